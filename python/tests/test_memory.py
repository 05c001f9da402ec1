"""A context whose KV cache the machine cannot hold is refused before llama.cpp allocates it."""

import logging
import re
import time

import pytest

import newrllama4 as nl
from newrllama4 import memory


def kv_bytes_llama_cpp_reports(caplog, model, **context_args):
    """Create a context and sum the KV cache sizes llama.cpp logs, in MiB rounded to two decimals."""
    with caplog.at_level(logging.DEBUG, logger="newrllama4.llama_cpp"):
        caplog.clear()
        nl.Context(model, **context_args).close()
    sizes = re.findall(r"llama_kv_cache: size = +([0-9.]+) MiB", caplog.text)
    assert sizes, caplog.text
    return sum(float(s) for s in sizes) * 2**20, len(sizes)


def estimate(monkeypatch, model, **context_args):
    """The estimate Context makes from the params it hands to llama.cpp."""
    estimates = []
    real = memory.kv_cache_bytes

    def recording(model, params):
        estimates.append(real(model, params))
        return estimates[-1]

    monkeypatch.setattr(memory, "kv_cache_bytes", recording)
    nl.Context(model, **context_args).close()
    return estimates[0]


@pytest.mark.parametrize("n_ctx, n_seq_max", [(100, 3), (1000, 3), (257, 5), (4096, 1)])
def test_the_estimate_is_what_llama_cpp_allocates(caplog, monkeypatch, model, n_ctx, n_seq_max):
    reported, n_lines = kv_bytes_llama_cpp_reports(caplog, model, n_ctx=n_ctx, n_seq_max=n_seq_max)
    estimated = estimate(monkeypatch, model, n_ctx=n_ctx, n_seq_max=n_seq_max)
    assert estimated == pytest.approx(reported, abs=0.01 * 2**20 * n_lines)


@pytest.mark.slow
def test_the_estimate_counts_gemmas_sliding_window_layers_at_full_size(caplog, monkeypatch, gemma):
    reported, n_lines = kv_bytes_llama_cpp_reports(caplog, gemma, n_ctx=1000, n_seq_max=3)
    assert n_lines == 2  # llama.cpp keeps the sliding-window layers in a cache of their own
    estimated = estimate(monkeypatch, gemma, n_ctx=1000, n_seq_max=3)
    assert estimated == pytest.approx(reported, abs=0.01 * 2**20 * n_lines)


@pytest.mark.slow
def test_an_absurd_context_on_gemma_is_refused_at_once(gemma):
    started = time.perf_counter()
    with pytest.raises(nl.ContextTooLargeError) as info:
        nl.Context(gemma, n_ctx=32768, n_seq_max=256)
    assert time.perf_counter() - started < 1
    assert info.value.needed_bytes > info.value.available_bytes > 0


def test_a_cache_larger_than_the_memory_available_is_a_context_error_with_both_numbers(monkeypatch, model):
    quarter = estimate(monkeypatch, model, n_ctx=1024, n_seq_max=8)
    needed = estimate(monkeypatch, model, n_ctx=4096, n_seq_max=8)
    assert needed > 2 * quarter
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 2 * quarter)
    with pytest.raises(nl.ContextTooLargeError) as info:
        nl.Context(model, n_ctx=4096, n_seq_max=8)
    error = info.value
    assert isinstance(error, nl.ContextError)
    assert (error.needed_bytes, error.available_bytes) == (needed, 2 * quarter)
    assert (error.n_ctx, error.n_seq_max) == (4096, 8)
    assert f"{needed / 1e6:.1f} MB of KV cache" in str(error) and "n_seq_max" in str(error)
    nl.Context(model, n_ctx=1024, n_seq_max=8).close()


def test_unknown_available_memory_refuses_nothing(monkeypatch, model):
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: None)
    nl.Context(model, n_ctx=256, n_seq_max=2).close()


def test_n_ctx_beyond_the_trained_length_is_refused_not_clamped(model):
    with pytest.raises(nl.InvalidArgumentError) as info:
        nl.Context(model, n_ctx=10**9)
    assert info.value.argument == "n_ctx" and "4096" in str(info.value) and "trained" in str(info.value)
    with nl.Context(model, n_ctx=model.n_ctx_train, n_seq_max=1) as ctx:
        assert ctx.n_ctx == model.n_ctx_train


def test_the_cache_type_sets_the_bytes_per_cell(model):
    import llama_cpp as llama

    from newrllama4._llama import set_fields

    def estimate_for(type_kv):
        params = set_fields(llama.llama_context_default_params(), n_ctx=1024, n_seq_max=2, kv_unified=False,
                            type_k=type_kv, type_v=type_kv)
        return memory.kv_cache_bytes(model, params)

    f16 = estimate_for(llama.GGML_TYPE_F16)
    assert estimate_for(llama.GGML_TYPE_Q8_0) == f16 * 34 / 64  # blocks of 32 in 34 bytes, not 64
    assert estimate_for(llama.GGML_TYPE_F32) == 2 * f16


def test_available_memory_reads_meminfo_and_a_cgroup_limit(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684084 kB\nMemFree:  100 kB\nMemAvailable:    2000 kB\n")
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    assert memory.available_memory_bytes(str(meminfo), str(cgroup)) == 2000 * 1024
    (cgroup / "memory.max").write_text("max\n")
    assert memory.available_memory_bytes(str(meminfo), str(cgroup)) == 2000 * 1024
    (cgroup / "memory.max").write_text("1500000\n")
    (cgroup / "memory.current").write_text("1000000\n")
    assert memory.available_memory_bytes(str(meminfo), str(cgroup)) == 500_000
    assert memory.available_memory_bytes(str(tmp_path / "none"), str(tmp_path / "none")) is None
