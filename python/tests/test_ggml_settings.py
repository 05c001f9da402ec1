"""ggml's settings come first, and a process where they came too late says so.

ggml reads its switches once per process, so each case runs in a fresh Python.
"""

import json
import os
import subprocess
import sys

PROBE = """
import json, os, sys, warnings
tiny, llama_first = sys.argv[1], sys.argv[2] == "1"
if llama_first:  # llama-cpp-python's own Llama runs before newrllama4 is imported
    import llama_cpp
    llm = llama_cpp.Llama(model_path=tiny, verbose=False)
    llm("the king and the queen", max_tokens=4)
import newrllama4 as nl
setting = {name: os.environ.get(name) for name in nl._llama.GGML_SETTINGS}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model = nl.Model(tiny)
with nl.Context(model, n_ctx=128, n_seq_max=2) as ctx:
    stats = ctx.generate_parallel(["hello how are you"], max_tokens=4, temperature=0).stats
with nl.Context(model, n_ctx=128, n_seq_max=2, batch_invariant=False) as fast:
    fast_lane_answers = fast.generate("hello how are you", max_tokens=4).finish_reason
    fast_lane_in_a_worker = fast.worker_pid is not None
print(json.dumps({
    "setting": setting,
    "warnings": [[type(w.message).__name__, str(w.message)] for w in caught],
    "identity_guaranteed": stats.identity_guaranteed,
    "fast_lane": [fast_lane_answers, fast_lane_in_a_worker],
}))
"""


def probe(tiny_model_path, llama_first, **env):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GGML_")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, tiny_model_path, "1" if llama_first else "0"],
        env={**environment, **env}, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_engine_sets_ggml_up_and_keeps_identity(tiny_model_path):
    result = probe(tiny_model_path, llama_first=False)
    assert result["setting"] == {"GGML_CPU_TILED_MM": "1", "GGML_CPU_TILED_MM_FORCE": "1"}
    assert result["warnings"] == []
    assert result["identity_guaranteed"] is True
    assert result["fast_lane"] == ["length", True]  # ggml's own settings are in its worker


def test_a_llama_that_ran_first_gives_a_warning_and_a_flag(tiny_model_path):
    result = probe(tiny_model_path, llama_first=True)
    assert [name for name, _ in result["warnings"]] == ["IdentityWarning"]
    assert "Llama ran in this process before newrllama4" in result["warnings"][0][1]
    assert result["identity_guaranteed"] is False
    assert result["fast_lane"] == ["length", False]  # ggml runs its own settings here already


def test_a_setting_of_the_users_own_is_kept_and_flagged(tiny_model_path):
    result = probe(tiny_model_path, llama_first=False, GGML_CPU_TILED_MM_FORCE="0")
    assert result["setting"] == {"GGML_CPU_TILED_MM": "1", "GGML_CPU_TILED_MM_FORCE": "0"}
    assert "GGML_CPU_TILED_MM_FORCE=0 is set in the environment" in result["warnings"][0][1]
    assert result["identity_guaranteed"] is False
    assert result["fast_lane"] == ["length", False]


def test_batch_invariant_false_is_the_fast_lane_and_never_claims_identity(model):
    import newrllama4 as nl

    with nl.Context(model, n_ctx=64, n_seq_max=2, batch_invariant=False) as ctx:
        stats = ctx.generate_parallel(["hello", "the king"], max_tokens=2).stats
    assert stats.batch_invariant is False and stats.identity_guaranteed is False
    assert stats.kv_cache == "f16/f16"
