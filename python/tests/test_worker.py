"""The fast lane in a worker process with ggml's own settings (worker.py).

This test process forces ggml's tiled matmul (the engine's settings for identity), so
every `batch_invariant=False` context here runs in a worker.
"""

import gc
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import pytest

import newrllama4 as nl
from newrllama4 import errors

from conftest import random_prompts

GREEDY = {"max_tokens": 6, "temperature": 0}


def _environment_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as environ:
        return dict(item.split(b"=", 1) for item in environ.read().split(b"\0") if b"=" in item)


@pytest.fixture
def fast(model):
    with nl.Context(model, n_ctx=256, n_seq_max=4, batch_invariant=False) as context:
        yield context


def test_a_fast_lane_context_runs_in_a_worker_with_ggml_s_own_switch(model, fast):
    assert os.environ["GGML_CPU_TILED_MM_FORCE"] == "1"  # this process: identity's settings
    assert fast.worker_pid not in (None, os.getpid())
    assert f"in worker process {fast.worker_pid}" in repr(fast)
    if sys.platform.startswith("linux"):
        assert _environment_of(fast.worker_pid)[b"GGML_CPU_TILED_MM_FORCE"] == b"0"
    with nl.Context(model, n_ctx=64, n_seq_max=2) as invariant:
        assert invariant.worker_pid is None


def test_answers_come_back_in_order_with_each_failure_its_own(model, fast):
    prompts = random_prompts(9, seed=3) + ["", [model.n_vocab + 5], "word " * 400]
    result = fast.generate_parallel(prompts, **GREEDY)
    assert [c.finish_reason == "error" for c in result] == [False] * 9 + [True] * 3
    assert all(len(c.tokens) == 6 for c in result[:9])
    assert isinstance(result[9].error, nl.EmptyPromptError) and result[9].error.index == 9
    assert isinstance(result[10].error, nl.InvalidTokenError) and result[10].error.token == model.n_vocab + 5
    assert isinstance(result[11].error, nl.PromptTooLongError) and result[11].error.limit == 256
    stats = result.stats
    assert (stats.batch_invariant, stats.identity_guaranteed, stats.prompts, stats.failures) == (False, False, 12, 3)
    # the same prompt again, alone: an answer, not state left from the call before
    assert fast.generate(prompts[0], **GREEDY).finish_reason == "length"


def test_labels_schemas_caches_and_the_prefix_cache_work_through_the_worker(model, fast, tmp_path):
    labelled = fast.generate_parallel(["the king is", "the queen is"], labels=["good", "bad"], temperature=0)
    assert all(abs(sum(c.label_probs.values()) - 1) < 1e-9 and c.text in ("good", "bad") for c in labelled)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    shaped = fast.generate("a number:", json_schema=schema, max_tokens=20, temperature=0)
    assert shaped.finish_reason == "error" or isinstance(shaped.parsed["n"], int)
    cache = str(tmp_path / "answers.sqlite")
    first = fast.generate_parallel(["one two three", "four five"], **GREEDY, cache=cache)
    again = fast.generate_parallel(["one two three", "four five"], **GREEDY, cache=cache)
    assert [c.from_cache for c in again] == [True, True] and again.texts == first.texts
    instruction = " ".join(["Label the sentence that follows as good or bad."] * 6)
    prompts = [f"{instruction} Sentence: {text}" for text in random_prompts(4, seed=5)]
    cold = fast.generate_parallel(prompts, **GREEDY).stats.cached_prompt_tokens
    assert fast.generate_parallel(prompts, **GREEDY).stats.cached_prompt_tokens > cold
    fast.clear_cache()
    assert fast.generate_parallel(prompts, **GREEDY).stats.cached_prompt_tokens == cold
    assert fast.cached_tokens() == 0


def test_progress_is_reported_in_this_process_and_may_ask_the_context(fast):
    seen = []
    fast.generate_parallel(random_prompts(5, seed=1), **GREEDY,
                           on_progress=lambda done, total: seen.append((done, total, fast.cached_tokens())))
    assert [(done, total) for done, total, _ in seen] == [(i, 5) for i in range(1, 6)]
    assert any(cached > 0 for *_, cached in seen)  # asked mid-call, answered by the worker


def test_a_callback_that_raises_stops_the_call_and_the_context_goes_on(fast):
    class Enough(OSError):  # an OSError of the callback's own is not a broken pipe to the worker
        pass

    def stop_at_two(done, total):
        if done == 2:
            raise Enough

    pid = fast.worker_pid
    with pytest.raises(Enough):
        fast.generate_parallel(random_prompts(6, seed=2), **GREEDY, on_progress=stop_at_two)
    assert fast.worker_pid == pid
    assert fast.cached_tokens() == 0
    with pytest.raises(nl.ContextError, match="inside its own on_progress"):
        fast.generate_parallel(["a", "b"], **GREEDY, on_progress=lambda d, t: fast.generate("c", **GREEDY))
    assert fast.generate_parallel(["hello there"], **GREEDY)[0].finish_reason == "length"


def test_an_interrupt_mid_call_ends_the_worker_at_once_and_the_context_goes_on(fast):
    pid = fast.worker_pid
    # Python's own handler: a process started in the background (CI) inherits SIGINT ignored
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupt = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    interrupt.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            fast.generate_parallel(["hello how are you"] * 4000, max_tokens=200)  # minutes of work
    finally:
        interrupt.cancel()  # never let it reach the test run itself
        signal.signal(signal.SIGINT, handler)
    assert time.monotonic() - started < 6  # the worker killed, not waited for until it finished
    assert fast.generate("hello", **GREEDY).finish_reason == "length"
    assert fast.worker_pid != pid


def test_a_worker_starts_where_sys_executable_is_the_host_program(model, monkeypatch):
    """Python embedded in R may name R as its executable: the worker is this prefix's Python."""
    monkeypatch.setattr(sys, "executable", "/usr/lib/R/bin/exec/R")
    with nl.Context(model, n_ctx=64, n_seq_max=2, batch_invariant=False) as fast:
        assert fast.generate("hello", **GREEDY).finish_reason == "length"


def test_a_worker_that_dies_fails_its_call_and_the_next_call_starts_another(fast):
    pid = fast.worker_pid
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(nl.ContextError, match="worker process ended"):
        fast.generate("hello", **GREEDY)
    assert fast.generate("hello", **GREEDY).finish_reason == "length"
    assert fast.worker_pid not in (None, pid)


def _running(pid):
    """Whether the process runs (an ended one that no one has reaped yet does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # no /proc: the signal said it is there
        return True


def test_closing_the_context_or_its_model_ends_the_worker(tiny_model_path):
    with nl.Model(tiny_model_path) as model:
        one = nl.Context(model, n_ctx=64, n_seq_max=1, batch_invariant=False)
        two = nl.Context(model, n_ctx=64, n_seq_max=2, batch_invariant=False)
        pids = [one.worker_pid, two.worker_pid]
        one.close()
        one.close()
        assert one.closed and not two.closed
        with pytest.raises(nl.ClosedError):
            one.generate("hello", **GREEDY)
    assert two.closed
    for pid in pids:
        with pytest.raises(ChildProcessError):  # reaped: not left as a zombie
            os.waitpid(pid, os.WNOHANG)


def test_a_context_dropped_without_closing_ends_its_worker(model):
    pid = nl.Context(model, n_ctx=64, n_seq_max=2, batch_invariant=False).worker_pid
    gc.collect()
    assert not _running(pid)


def test_a_context_the_worker_cannot_make_raises_its_error_here(model):
    with pytest.raises(nl.InvalidArgumentError, match="context length the model was trained for") as raised:
        nl.Context(model, n_ctx=model.n_ctx_train + 1, n_seq_max=2, batch_invariant=False)
    assert raised.value.argument == "n_ctx"  # checked in the worker: its attributes came along


@pytest.mark.parametrize("error", [
    errors.InvalidArgumentError("n_ctx", -1, "a positive integer"),
    errors.ContextTooLargeError(4096, 8, 10**12, 10**9),
    errors.ClosedError("context"),
    errors.CacheError("/tmp/x.sqlite", "it is locked"),
    errors.EmptyPromptError(3),
    errors.InvalidTokenError(1, 99999, 1000),
    errors.PromptTooLongError(2, 500, 256),
    errors.DecodeError(0, -3),
    errors.IncompleteOutputError(4, "json_schema", 20, "length"),
    errors.RemoteHTTPError(5, "http://127.0.0.1:1/v1", 3, 503, "busy"),
    errors.ModelNotFoundError("hf://a/b/c.gguf", "no such file", ["d.gguf"]),
    errors.ChecksumMismatchError("https://x/y.gguf", "ab" * 32, "cd" * 32),
])
def test_every_error_crosses_a_process_whole(error):
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error) and copy.__dict__ == error.__dict__


FAST_LANE = """
import json, sys
import newrllama4 as nl
prompts, here = json.loads(sys.argv[1]), sys.argv[2] == "here"
if here:  # the fast lane in this process whatever its ggml settings, as before worker.py
    nl.context.ggml_forces_tiled_matmul = lambda: False
with nl.Model() as model, nl.Context(model, n_ctx=1024, n_seq_max=4, batch_invariant=False) as fast:
    result = fast.generate_parallel(prompts, labels=["positive", "negative"], temperature=0)
    print(json.dumps({"pid": fast.worker_pid, "probs": [c.label_probs for c in result]}))
"""


def test_gemma_s_fast_lane_gives_the_numbers_of_a_process_with_ggml_s_own_settings(gemma):
    """The worker's answers are bit for bit those of the fast lane in a process that never
    forced the tiled matmul, and the forced matmul here gives other numbers: the worker
    runs llama.cpp's own kernels, not this process's."""
    instruction = (
        "You label customer reviews. Answer positive if the customer would buy again, negative otherwise. "
        "Consider the whole review, including sarcasm, and ignore shipping complaints."
    )
    reviews = [
        "The blender broke after two weeks and support never answered my emails.",
        "Honestly the best headphones I have owned; the battery lasts for days.",
        "It works, I guess, if you enjoy reading the manual three times to set a clock.",
        "Arrived late, box crushed, but the lamp itself is gorgeous and bright.",
        "Cheap plastic, wobbly legs, and the screws did not fit the holes.",
        "My kids use this tablet every day and it still runs like new.",
    ]
    worked = [
        ("The vacuum lost suction within a month, and the replacement filter costs half as much as the machine.",
         "negative"),
        ("I was sceptical about a kettle with a thermometer, but now I make tea at the right temperature every "
         "morning and would not go back.", "positive"),
        ("Shipping took three weeks and the courier left it in the rain, yet the boots are warm, dry and "
         "comfortable on long walks.", "positive"),
        ("Oh great, another charger that works only when the cable is held at exactly the right angle.",
         "negative"),
        ("The desk was easy to assemble, sturdy, and the drawer glides smoothly; I ordered a second one for the "
         "office.", "positive"),
        ("After the update the app logs me out every hour and the thermostat forgets its schedule.", "negative"),
    ]
    examples = "".join(f"Review: {text}\nLabel: {label}\n\n" for text, label in worked)
    prompts = [instruction + "\n\n" + examples + "Review: " + review + "\nLabel:" for review in reviews]
    assert min(len(gemma.tokenize(p)) for p in prompts) > 200  # prefill through the tiled attention kernel (64+ rows a sequence), not short prompts only

    def fast_lane_in_a_process(force, where):
        done = subprocess.run([sys.executable, "-c", FAST_LANE, json.dumps(prompts), where],
                              env={**os.environ, "GGML_CPU_TILED_MM_FORCE": force},
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    own = fast_lane_in_a_process("0", "")
    assert own["pid"] is None  # ggml's own settings there: the fast lane ran in that process
    with nl.Context(gemma, n_ctx=1024, n_seq_max=4, batch_invariant=False) as fast:
        assert fast.worker_pid is not None
        worker = [c.label_probs for c in fast.generate_parallel(prompts, labels=["positive", "negative"],
                                                                 temperature=0)]
    assert worker == own["probs"]
    forced = fast_lane_in_a_process("1", "here")  # under the forced tiled matmul, as before the worker
    assert forced["pid"] is None and forced["probs"] != own["probs"]
