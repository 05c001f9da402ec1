"""The result cache (`cache=`) with a RemoteContext, against real servers of the tiny model."""

import dataclasses
import glob

import pytest

import newrllama4 as nl
from conftest import random_prompts
from fault_proxy import Fault, FaultProxy
from newrllama4.remote.dialects import LlamaServer
from newrllama4.testing import ModelServer
from test_remote_call import kill_after_first_answer, remote
from test_result_cache import BASE, OTHER, WITH_ENUM, answers, stored_rows

GREEDY = dict(max_tokens=6, temperature=0)


@pytest.fixture
def proxy(tiny_server, proxy_for):
    return proxy_for(tiny_server)


def test_a_second_run_is_read_back_whole_without_a_request(proxy, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(8, seed=41, max_words=12)
    labelled = [["yes", "no"] if i % 3 == 0 else None for i in range(8)]
    ctx = remote(proxy.url)
    first = ctx.generate_parallel(prompts, **GREEDY, labels=labelled, cache=cache)
    assert first.stats.result_cache_hits == 0 and first.stats.failures == 0 and not any(c.from_cache for c in first)
    assert len(proxy.bodies) == 8 and stored_rows(cache) == 8
    progress = []
    again = ctx.generate_parallel(prompts, **GREEDY, labels=labelled, cache=cache,
                                  on_progress=lambda done, total: progress.append(done))
    assert len(proxy.bodies) == 8  # not one request
    assert again.stats.result_cache_hits == 8 and all(c.from_cache for c in again) and progress == list(range(1, 9))
    assert again.stats.prompt_tokens == again.stats.generated_tokens == again.stats.request_seconds == 0
    for computed, cached in zip(first, again):
        assert cached.n_cached_tokens == cached.n_prompt_tokens
        assert dataclasses.replace(cached, n_cached_tokens=computed.n_cached_tokens, from_cache=False) == computed
    assert answers(again) == answers(first)


def test_a_run_whose_server_died_resumes_with_only_the_missing_prompts(tiny_model_path, tiny_server, proxy, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(10, seed=42, max_words=10)
    with ModelServer(tiny_model_path) as doomed:  # serves the same model as tiny_server, at another address
        # no retries: each retry on the dead server doubles its rest (up to 30 s), which here
        # only adds minutes of waiting to the failures this test needs
        interrupted = remote(doomed.url, max_concurrency=2, retries=0).generate_parallel(
            prompts, **GREEDY, cache=cache, on_progress=kill_after_first_answer(doomed))
    finished = [i for i, c in enumerate(interrupted) if c.error is None]
    assert finished and interrupted.stats.failures == len(prompts) - len(finished)
    assert stored_rows(cache) == len(finished)  # failed prompts are not stored
    resumed = remote(proxy.url).generate_parallel(prompts, **GREEDY, cache=cache)
    assert [c.from_cache for c in resumed] == [i in finished for i in range(len(prompts))]
    assert sorted(body["prompt"] for body in proxy.bodies) == sorted(
        p for i, p in enumerate(prompts) if i not in finished)
    assert resumed.stats.failures == 0 and resumed.stats.result_cache_hits == len(finished)
    assert answers(resumed) == answers(remote(tiny_server.url).generate_parallel(prompts, **GREEDY))


def test_an_answer_that_failed_on_the_server_is_asked_again(proxy, tmp_path):
    cache = tmp_path / "answers.sqlite"
    proxy.faults = [Fault(status=400)]
    first = remote(proxy.url, max_concurrency=1).generate_parallel(["hello", "the king"], **GREEDY, cache=cache)
    assert isinstance(first[0].error, nl.RemoteHTTPError) and stored_rows(cache) == 1
    again = remote(proxy.url).generate_parallel(["hello", "the king"], **GREEDY, cache=cache)
    assert [c.from_cache for c in again] == [False, True] and again.stats.failures == 0


def test_sampled_answers_are_keyed_by_seed_and_index(tiny_server, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(4, seed=43, max_words=10)
    sampled = dict(max_tokens=6, temperature=1.0, seed=7)
    ctx = remote(tiny_server.url)
    ctx.generate_parallel(prompts, **sampled, cache=cache)
    assert ctx.generate_parallel(prompts, **sampled, cache=cache).stats.result_cache_hits == 4
    # each request's seed comes from (seed, index): a moved prompt is another request
    assert ctx.generate_parallel(prompts[::-1], **sampled, cache=cache).stats.result_cache_hits == 0
    assert ctx.generate_parallel(prompts, **dict(sampled, seed=8), cache=cache).stats.result_cache_hits == 0
    assert ctx.generate_parallel(prompts[::-1], **GREEDY, cache=cache).stats.result_cache_hits == 0
    # greedy answers depend on neither
    assert ctx.generate_parallel(prompts, **dict(GREEDY, seed=3), cache=cache).stats.result_cache_hits == 4


@pytest.mark.parametrize("argument", sorted(set(OTHER) - {"field_probs", "hidden_states", "feature_layer",
                                                            "feature_texts"}))
def test_changing_one_argument_misses(tiny_server, tmp_path, argument):
    # the arguments test_result_cache checks against generate_parallel's signature; field_probs
    # below, on the one server that scores fields; hidden_states never reaches a cache here, since
    # a server refuses it (test_hidden_states_are_refused_before_any_request), and feature_layer
    # and feature_texts only say which states to keep, so without them the answer is the same
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(3, seed=44, max_words=8)
    ctx = remote(tiny_server.url)
    ctx.generate_parallel(prompts, **BASE, cache=cache)
    assert ctx.generate_parallel(prompts, **BASE, cache=cache).stats.result_cache_hits == 3
    assert ctx.generate_parallel(prompts, **dict(BASE, **{argument: OTHER[argument]}), cache=cache) \
        .stats.result_cache_hits == 0


def test_hidden_states_are_refused_before_any_request(tiny_server, tmp_path):
    cache = tmp_path / "answers.sqlite"
    with pytest.raises(nl.InvalidArgumentError, match="hidden state"):
        remote(tiny_server.url).generate_parallel(random_prompts(2, seed=45), **dict(BASE, hidden_states=True),
                                                  cache=cache)
    assert not cache.exists()


def test_field_probs_misses_on_llama_server(tiny_llama_server, tmp_path):
    # field_probs changes only the answers to a schema with an enum or a boolean field
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(3, seed=44, max_words=8)
    ctx = remote(tiny_llama_server.url)
    base = dict(BASE, json_schema=WITH_ENUM, max_tokens=40)
    ctx.generate_parallel(prompts, **base, cache=cache)
    assert ctx.generate_parallel(prompts, **base, cache=cache).stats.result_cache_hits == 3
    scored = ctx.generate_parallel(prompts, **dict(base, field_probs=True), cache=cache)
    assert scored.stats.result_cache_hits == 0 and all(c.field_probs for c in scored)
    assert ctx.generate_parallel(prompts, **dict(base, field_probs=True), cache=cache).stats.result_cache_hits == 3


def test_local_and_remote_answers_never_meet_in_one_file(model, tiny_server, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(4, seed=45, max_words=8)
    ctx = remote(tiny_server.url)  # serves the very file `model` was loaded from
    with nl.Context(model, n_ctx=256, n_seq_max=2) as local:
        local.generate_parallel(prompts, **GREEDY, cache=cache)
        assert ctx.generate_parallel(prompts, **GREEDY, cache=cache).stats.result_cache_hits == 0
        assert stored_rows(cache) == 8
        assert local.generate_parallel(prompts, **GREEDY, cache=cache).stats.result_cache_hits == 4
    assert ctx.generate_parallel(prompts, **GREEDY, cache=cache).stats.result_cache_hits == 4
    # another kind of server is sent other fields for the same arguments
    ctx.endpoints = (nl.remote.Endpoint(tiny_server.url, LlamaServer()),)
    assert ctx.generate_parallel(prompts, **GREEDY, cache=cache).stats.result_cache_hits == 0


def test_labels_stored_before_the_servers_scored_them_exactly_are_not_found_again(tiny_server, tmp_path,
                                                                                   monkeypatch):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(3, seed=47, max_words=8)
    ctx = remote(tiny_server.url)
    monkeypatch.setattr(nl.remote.call, "REMOTE_LABEL_SCORING", nl.remote.call.REMOTE_LABEL_SCORING - 1)
    ctx.generate_parallel(prompts, **GREEDY, labels=["yes", "no"], cache=cache)
    monkeypatch.undo()
    again = ctx.generate_parallel(prompts, **GREEDY, labels=["yes", "no"], cache=cache)
    assert again.stats.result_cache_hits == 0 and stored_rows(cache) == 6


def test_neither_the_api_key_nor_the_address_is_in_the_cache(tiny_server, tmp_path):
    secret = "sk-never-in-the-cache"
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(3, seed=46, max_words=8)
    guarded = FaultProxy(tiny_server.url, api_key=secret)
    try:
        first = remote(guarded.url, api_key=secret).generate_parallel(prompts, **GREEDY, cache=cache)
    finally:
        guarded.close()
    assert first.stats.failures == 0
    # the same model without a key, at another address: the same keys
    assert remote(tiny_server.url).generate_parallel(prompts, **GREEDY, cache=cache).stats.result_cache_hits == 3
    for path in glob.glob(f"{cache}*"):  # the database, its WAL and shared memory
        with open(path, "rb") as handle:
            content = handle.read()
        assert secret.encode() not in content and guarded.url.encode() not in content


def test_a_conversation_is_keyed_by_its_messages(tiny_server, model, tmp_path):
    cache = tmp_path / "answers.sqlite"
    conversation = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "the king"}]
    ctx = remote(tiny_server.url)
    first = ctx.generate(conversation, **GREEDY, cache=cache)
    assert ctx.generate(conversation, **GREEDY, cache=cache) == dataclasses.replace(
        first, n_cached_tokens=first.n_prompt_tokens, from_cache=True)
    other = [conversation[0], {"role": "user", "content": "the queen"}]
    assert not ctx.generate(other, **GREEDY, cache=cache).from_cache
    # the server renders the template: the same text sent as a string is another request
    rendered = model.apply_chat_template(conversation, add_generation_prompt=True)
    assert not ctx.generate(rendered, **GREEDY, cache=cache).from_cache
