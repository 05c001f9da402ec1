"""The result cache (`cache=`): hits and misses, what the key covers, crashes, concurrent writers."""

import contextlib
import dataclasses
import inspect
import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

import newrllama4 as nl
from conftest import random_prompts
from newrllama4 import result_cache
from newrllama4.testing import write_tiny_model

GREEDY = dict(max_tokens=8, temperature=0)


@pytest.fixture
def ctx(model):
    # one thread, as the child processes below: llama.cpp's threads spin while they
    # wait for each other, so processes sharing the cores slow down many times over
    with nl.Context(model, n_ctx=256, n_seq_max=4, n_threads=1) as context:
        yield context


def answers(result):
    """What a completion says, without what depends on how it was obtained."""
    return [(c.text, c.tokens, c.n_prompt_tokens, c.n_tokens, c.finish_reason, c.label, c.label_probs)
            for c in result]


def query(path, sql):
    """One statement on a SQLite file, committed; the first value it returns, if any."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        row = db.execute(sql).fetchone()
        return None if row is None else row[0]


def stored_rows(path):
    return query(path, "SELECT count(*) FROM answers")


def test_a_second_call_reads_every_answer_back_as_it_was(ctx, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(10, seed=1)
    labelled = [["yes", "no"] if i % 3 == 0 else None for i in range(10)]
    first = ctx.generate_parallel(prompts, **GREEDY, labels=labelled, cache=cache)
    assert first.stats.result_cache_hits == 0 and not any(c.from_cache for c in first)
    again = ctx.generate_parallel(prompts, **GREEDY, labels=labelled, cache=cache)
    assert again.stats.result_cache_hits == 10 and all(c.from_cache for c in again)
    for computed, cached in zip(first, again):
        assert cached.n_cached_tokens == cached.n_prompt_tokens  # none of the prompt was decoded
        assert dataclasses.replace(cached, n_cached_tokens=computed.n_cached_tokens, from_cache=False) == computed
    assert again.stats.generated_tokens == again.stats.prompt_tokens == again.stats.llama_decode_calls == 0
    assert answers(first) == answers(ctx.generate_parallel(prompts, **GREEDY, labels=labelled))


def test_only_the_prompts_missing_from_the_cache_run(ctx, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(12, seed=2)
    ctx.generate_parallel(prompts[:5], **GREEDY, cache=cache)
    progress = []
    result = ctx.generate_parallel(prompts, **GREEDY, cache=cache, on_progress=lambda done, total: progress.append(done))
    assert result.stats.result_cache_hits == 5 and [c.from_cache for c in result] == [True] * 5 + [False] * 7
    assert result.stats.prompt_tokens == sum(c.n_prompt_tokens for c in result[5:])
    assert progress == list(range(1, 13))
    assert answers(result) == answers(ctx.generate_parallel(prompts, **GREEDY))


def test_failed_prompts_are_not_stored(tmp_path, model):
    cache = tmp_path / "answers.sqlite"
    prompts = ["hello how are you", "", " ".join(["river"] * 100), "once upon a time"]
    with nl.Context(model, n_ctx=32, n_seq_max=2) as ctx:
        first = ctx.generate_parallel(prompts, max_tokens=4, temperature=0, cache=cache)
        again = ctx.generate_parallel(prompts, max_tokens=4, temperature=0, cache=cache)
    assert [c.finish_reason == "error" for c in first] == [False, True, True, False]
    assert stored_rows(cache) == 2
    assert [c.from_cache for c in again] == [True, False, False, True]
    assert isinstance(again[2].error, nl.PromptTooLongError)


def test_greedy_answers_are_found_whatever_the_order_and_the_seed(ctx, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(8, seed=3)
    first = ctx.generate_parallel(prompts, **GREEDY, seed=1, cache=cache)
    shuffled = ctx.generate_parallel(prompts[::-1], **GREEDY, seed=2, cache=cache)
    assert shuffled.stats.result_cache_hits == 8
    assert answers(shuffled)[::-1] == answers(first)


def test_sampled_answers_are_keyed_by_seed_and_index(ctx, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(6, seed=4)
    sampled = dict(max_tokens=8, temperature=1.0, seed=7)
    first = ctx.generate_parallel(prompts, **sampled, cache=cache)
    assert ctx.generate_parallel(prompts, **sampled, cache=cache).stats.result_cache_hits == 6
    # each prompt's random stream is seeded from (seed, index): moved, it is another answer
    moved = ctx.generate_parallel(prompts[1:] + prompts[:1], **sampled, cache=cache)
    assert moved.stats.result_cache_hits == 0
    assert answers(moved) == answers(ctx.generate_parallel(prompts[1:] + prompts[:1], **sampled))
    assert ctx.generate_parallel(prompts, **dict(sampled, seed=8), cache=cache).stats.result_cache_hits == 0
    assert answers(ctx.generate_parallel(prompts, **sampled, cache=cache)) == answers(first)


# a value other than the base call's for every argument of generate_parallel in the key
BASE = dict(max_tokens=6, temperature=0.7, top_k=40, top_p=0.9, min_p=0.0, repeat_last_n=64, penalty_repeat=1.1,
            seed=1, stop=None, labels=None, json_schema=None, grammar=None, field_probs=False,
            hidden_states=False, feature_texts=None, feature_layer=None)
OTHER = dict(max_tokens=7, temperature=0.9, top_k=20, top_p=0.8, min_p=0.05, repeat_last_n=8, penalty_repeat=1.3,
             seed=2, stop=["zzz"], labels=["yes", "no"], json_schema={"type": "integer", "minimum": 0, "maximum": 99},
             grammar='root ::= "a" | "b"', field_probs=True, hidden_states=True, feature_texts=["of", "the", "a"],
             feature_layer=0)


def test_every_argument_that_can_change_an_answer_is_in_the_key():
    # an argument added to generate_parallel must be given a value here, or be declared
    # unable to change an answer in result_cache.NOT_IN_KEY
    arguments = set(inspect.signature(nl.Context.generate_parallel).parameters)
    assert set(BASE) == set(OTHER) == arguments - result_cache.NOT_IN_KEY


# the tiny model's one layer before its last is the default one: feature_layer is keyed in
# test_features.test_the_result_cache_keeps_each_kind_apart
@pytest.mark.parametrize("argument", sorted(set(OTHER) - {"feature_layer"}))
def test_changing_one_argument_misses(ctx, tmp_path, argument):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(3, seed=5)
    # field_probs changes the answers to a schema with an enum or a boolean field, and only those
    base = dict(BASE, json_schema=WITH_ENUM, max_tokens=40) if argument == "field_probs" else BASE
    # a prompt's text is keyed where its mean is kept
    base = dict(BASE, hidden_states=["mean"]) if argument == "feature_texts" else base
    ctx.generate_parallel(prompts, **base, cache=cache)
    assert ctx.generate_parallel(prompts, **base, cache=cache).stats.result_cache_hits == 3
    assert ctx.generate_parallel(prompts, **dict(base, **{argument: OTHER[argument]}), cache=cache) \
        .stats.result_cache_hits == 0


WITH_ENUM = {"type": "object", "properties": {"a": {"enum": ["x", "y"]}}, "required": ["a"],
             "additionalProperties": False}


def test_field_probs_leaves_the_keys_of_other_answers_alone(ctx, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(3, seed=6)
    ctx.generate_parallel(prompts, **BASE, cache=cache)
    assert ctx.generate_parallel(prompts, **dict(BASE, field_probs=True), cache=cache).stats.result_cache_hits == 3


def test_the_prompt_tokens_the_model_file_and_the_context_are_in_the_key(model, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompt = "hello how are you"
    with nl.Context(model, n_ctx=64, n_seq_max=2) as ctx:
        ctx.generate(prompt, **GREEDY, cache=cache)
        assert ctx.generate(model.tokenize(prompt), **GREEDY, cache=cache).from_cache  # the same tokens
        assert not ctx.generate(prompt + " today", **GREEDY, cache=cache).from_cache
    with nl.Context(model, n_ctx=64, n_seq_max=2, batch_invariant=False) as ctx:
        assert not ctx.generate(prompt, **GREEDY, cache=cache).from_cache
    n_prompt = len(model.tokenize(prompt))
    # a window that max_tokens reaches first changes nothing; a tighter one can end the answer
    with nl.Context(model, n_ctx=n_prompt + GREEDY["max_tokens"], n_seq_max=1) as ctx:
        assert ctx.generate(prompt, **GREEDY, cache=cache).from_cache
    with nl.Context(model, n_ctx=n_prompt + 2, n_seq_max=1) as ctx:
        assert not ctx.generate(prompt, **GREEDY, cache=cache).from_cache
    with nl.Model(write_tiny_model(tmp_path / "other.gguf", seed=1)) as other, \
            nl.Context(other, n_ctx=64, n_seq_max=1) as ctx:
        assert not ctx.generate(prompt, **GREEDY, cache=cache).from_cache


def test_the_model_file_is_hashed_once_and_again_when_it_changes(tmp_path, monkeypatch):
    hashed = []
    monkeypatch.setattr(result_cache, "file_sha256", lambda path: hashed.append(path) or "0" * 64)
    path = write_tiny_model(tmp_path / "model.gguf")
    cache = tmp_path / "answers.sqlite"
    with nl.Model(path) as model:
        for _ in range(2):
            with nl.Context(model, n_ctx=64, n_seq_max=1) as ctx:
                ctx.generate("hello", max_tokens=2, cache=cache)
        assert len(hashed) == 1
        stat = os.stat(path)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
        with nl.Context(model, n_ctx=64, n_seq_max=1) as ctx:
            ctx.generate("hello", max_tokens=2, cache=cache)
    assert len(hashed) == 2


def test_the_model_hash_is_the_file_sha256(tiny_model_path):
    import hashlib

    with open(tiny_model_path, "rb") as handle:
        assert result_cache.file_sha256(tiny_model_path) == hashlib.sha256(handle.read()).hexdigest()


def test_a_file_that_is_not_a_result_cache_is_a_cache_error(ctx, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database, " * 100)
    foreign = tmp_path / "other-app.sqlite"
    query(foreign, "CREATE TABLE measurements (x REAL)")
    newer = tmp_path / "newer.sqlite"
    ctx.generate("hello", max_tokens=2, cache=newer)
    query(newer, "PRAGMA user_version = 99")
    for path, problem in [(text, "not a usable SQLite database"), (foreign, "another application"),
                          (newer, "layout 99"), (tmp_path, "not a usable SQLite database|cannot be opened")]:
        with pytest.raises(nl.CacheError, match=problem) as info:
            ctx.generate_parallel(["hello"], max_tokens=2, cache=path)
        assert info.value.path == str(path)
    assert ctx.generate("hello", max_tokens=2).finish_reason != "error"  # the context is unharmed
    assert text.read_text().startswith("not a database")


@pytest.mark.parametrize("cache", [42, "", b"answers.sqlite", ["a.sqlite"]])
def test_a_cache_that_is_not_a_path_is_refused(ctx, cache):
    with pytest.raises(nl.InvalidArgumentError, match="`cache`"):
        ctx.generate("hello", cache=cache)


# A child process: generates with a cache, on one thread (two children share the
# machine's cores). With `go`, it waits for that file to exist before it opens the
# cache, so that two children start together; with `kill_after`, it kills itself
# with SIGKILL once that many prompts are done (each answer is committed before the
# progress callback hears of it).
CHILD = """
import json, os, signal, sys, time
import newrllama4 as nl
job = json.loads(sys.argv[1])

def on_progress(done, total):
    if done == job["kill_after"]:
        os.kill(os.getpid(), signal.SIGKILL)

with nl.Model(job["model"]) as model, nl.Context(model, n_ctx=256, n_seq_max=4, n_threads=1) as ctx:
    while job["go"] and not os.path.exists(job["go"]):
        time.sleep(0.005)
    ctx.generate_parallel(job["prompts"], cache=job["cache"], on_progress=on_progress, **job["params"])
"""


def start_child(tmp_path, model_path, cache, prompts, params, kill_after=None, go=None):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    job = dict(model=model_path, cache=str(cache), prompts=prompts, params=params, kill_after=kill_after,
               go=go and str(go))
    return subprocess.Popen([sys.executable, str(script), json.dumps(job)], stderr=subprocess.PIPE, text=True)


def integrity(path):
    return query(path, "PRAGMA integrity_check")


def test_a_run_killed_mid_way_keeps_what_finished_and_the_rerun_computes_the_rest(ctx, tiny_model_path, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(20, seed=6)
    params = dict(max_tokens=12, temperature=0.8, seed=3)  # sampled: keys hold the indices
    child = start_child(tmp_path, tiny_model_path, cache, prompts, params, kill_after=7)
    child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL
    assert integrity(cache) == "ok" and stored_rows(cache) == 7
    rerun = ctx.generate_parallel(prompts, **params, cache=cache)
    assert rerun.stats.result_cache_hits == 7
    assert answers(rerun) == answers(ctx.generate_parallel(prompts, **params))


def test_two_processes_writing_one_cache_at_once(ctx, tiny_model_path, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(120, seed=7)
    # overlapping halves, the shared middle computed by both
    first, second = prompts[:80], prompts[40:]
    go = tmp_path / "go"
    children = [start_child(tmp_path, tiny_model_path, cache, part, GREEDY, go=go) for part in (first, second)]
    time.sleep(1)  # both load the model, then wait
    go.touch()
    for child in children:
        _, err = child.communicate(timeout=300)
        assert child.returncode == 0, err[-2000:]
    assert integrity(cache) == "ok" and stored_rows(cache) == len(set(prompts))
    again = ctx.generate_parallel(prompts, **GREEDY, cache=cache)
    assert again.stats.result_cache_hits == 120
    assert answers(again) == answers(ctx.generate_parallel(prompts, **GREEDY))


def _open_when_told(path, go):
    while not os.path.exists(go):
        pass
    result_cache.ResultCache(path).close()


def test_processes_creating_one_cache_file_at_the_same_moment_all_open_it(tmp_path):
    # switching a new file to WAL answered "locked" to the second of two processes
    # (64 of 300 opens failed before the retry), without waiting for the busy timeout
    forked = multiprocessing.get_context("fork")
    for attempt in range(40):
        path, go = tmp_path / f"{attempt}.sqlite", tmp_path / f"go{attempt}"
        children = [forked.Process(target=_open_when_told, args=(path, go)) for _ in range(2)]
        for child in children:
            child.start()
        time.sleep(0.02)
        go.touch()
        for child in children:
            child.join(timeout=60)
        assert [child.exitcode for child in children] == [0, 0], f"attempt {attempt}"


@pytest.mark.slow
def test_gemma_killed_at_any_moment_then_rerun_equals_an_uninterrupted_run(gemma, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = [f"Question {i}: name a {word} that" for i, word in enumerate(
        "river city animal colour tool planet country flower song food metal sport".split() * 2)]
    params = dict(max_tokens=24, temperature=0.7, seed=11)
    child = start_child(tmp_path, None, cache, prompts, params)
    deadline = time.monotonic() + 300
    while child.poll() is None and time.monotonic() < deadline:
        try:
            if cache.exists() and stored_rows(cache) >= 8:
                break
        except sqlite3.OperationalError:  # the child has not created the table yet
            pass
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)  # wherever it is: mid-decode, mid-commit
    child.communicate()
    assert child.returncode == -signal.SIGKILL and integrity(cache) == "ok"
    n_stored = stored_rows(cache)
    assert 8 <= n_stored < len(prompts)
    with nl.Context(gemma, n_ctx=256, n_seq_max=4, n_threads=1) as ctx:
        rerun = ctx.generate_parallel(prompts, **params, cache=cache)
        uninterrupted = ctx.generate_parallel(prompts, **params)
    assert rerun.stats.result_cache_hits == n_stored
    assert answers(rerun) == answers(uninterrupted)


def test_a_constrained_answer_comes_back_parsed_and_another_schema_misses(ctx, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(3, seed=6)
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
              "required": ["n"], "additionalProperties": False}
    first = ctx.generate_parallel(prompts, max_tokens=30, temperature=0, json_schema=schema, cache=cache)
    again = ctx.generate_parallel(prompts, max_tokens=30, temperature=0, json_schema=schema, cache=cache)
    assert again.stats.result_cache_hits == 3
    assert [c.parsed for c in again] == [c.parsed for c in first] and all(c.parsed is not None for c in first)
    other = dict(schema, properties={"n": {"type": "integer", "minimum": 10, "maximum": 19}})
    assert ctx.generate_parallel(prompts, max_tokens=30, temperature=0, json_schema=other,
                                 cache=cache).stats.result_cache_hits == 0
