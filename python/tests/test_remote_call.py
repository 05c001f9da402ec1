"""One call on a RemoteContext (remote/call.py) against real OpenAI-compatible servers of the
tiny model (llama-cpp-python's), with a fault-injecting proxy in front of them for the
error paths: answers, several endpoints, retries and failures."""

import asyncio
import signal
import subprocess
import sys
import time

import pytest

import newrllama4 as nl
from conftest import random_prompts
from fault_proxy import Fault, FaultProxy
from newrllama4.remote.dialects import OpenAICompatible
from newrllama4.remote import request_seed
from newrllama4.testing import ModelServer

PROMPTS = random_prompts(6, seed=31, max_words=12)


@pytest.fixture
def proxy(tiny_server, proxy_for):
    return proxy_for(tiny_server)


def remote(url, **kwargs):
    return nl.RemoteContext(url, **{"retries": 2, "backoff": 0.01, **kwargs})


# -- the happy path ------------------------------------------------------------------------


def test_results_come_in_prompt_order_and_match_prompts_sent_alone(tiny_server):
    prompts = [" ".join(["hello"] * n) for n in range(1, 9)]  # n words: n + 1 tokens with BOS
    ctx = remote(tiny_server.url, max_concurrency=4)
    result = ctx.generate_parallel(prompts, max_tokens=6, temperature=0)
    assert [c.n_prompt_tokens for c in result] == [n + 1 for n in range(1, 9)]
    assert all(c.finish_reason in ("stop", "length") and c.error is None for c in result)
    assert result.texts == [ctx.generate(p, max_tokens=6, temperature=0).text for p in prompts]
    stats = result.stats
    assert stats.prompts == 8 and stats.failures == 0 and stats.retries == 0
    assert stats.generated_tokens == sum(c.n_tokens for c in result) > 0
    assert 1 <= stats.peak_active_sequences <= 4
    assert 0 < stats.request_seconds <= stats.total_seconds


def test_each_request_carries_the_prompts_own_seed_and_the_mapped_parameters(proxy):
    ctx = remote(proxy.url)
    ctx.generate_parallel(PROMPTS, max_tokens=5, temperature=0.7, top_k=7, top_p=0.8, min_p=0.05,
                          penalty_repeat=1.3, seed=99, stop=["\n", "king"])
    by_prompt = {body["prompt"]: body for body in proxy.bodies}
    for index, prompt in enumerate(PROMPTS):
        body = by_prompt[prompt]
        assert body["seed"] == request_seed(99, index) < 2**31
        assert body["model"] == ctx.model
        assert (body["max_tokens"], body["temperature"], body["top_k"], body["top_p"], body["min_p"]) == (
            5, 0.7, 7, 0.8, 0.05)
        assert body["repeat_penalty"] == 1.3 and body["stop"] == ["\n", "king"]
        assert "repeat_last_n" not in body  # llama-cpp-python's server has a fixed window


def test_a_seed_gives_the_same_sampled_answers_again(tiny_server):
    ctx = remote(tiny_server.url)
    first = ctx.generate_parallel(PROMPTS, max_tokens=8, temperature=1.0, seed=5)
    assert ctx.generate_parallel(PROMPTS, max_tokens=8, temperature=1.0, seed=5).texts == first.texts
    assert first.stats.seed == 5


def test_empty_prompts_fail_alone_without_a_request(proxy):
    result = remote(proxy.url).generate_parallel(["hello", "", []], max_tokens=3)
    assert result[0].error is None
    assert isinstance(result[1].error, nl.EmptyPromptError) and isinstance(result[2].error, nl.EmptyPromptError)
    assert len(proxy.bodies) == 1 and result.stats.failures == 2


def test_no_prompts_give_an_empty_result(tiny_server):
    assert len(remote(tiny_server.url).generate_parallel([])) == 0


def test_progress_is_reported_once_per_prompt(tiny_server):
    seen = []
    remote(tiny_server.url).generate_parallel(PROMPTS + [""], max_tokens=3,
                                              on_progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 7) for i in range(1, 8)]


def test_labels_give_a_label_for_every_prompt(tiny_server):
    labels = ["yes", "no", 'say "hi"\n', "a\\b"]  # the grammar escapes quotes, newlines and backslashes
    result = remote(tiny_server.url).generate_parallel(PROMPTS, labels=labels, temperature=0)
    for completion in result:
        assert completion.error is None and completion.label in labels and completion.text == completion.label
        if completion.label_probs is not None:
            assert list(completion.label_probs) == labels
            assert sum(completion.label_probs.values()) == pytest.approx(1.0)
            assert completion.label == max(labels, key=completion.label_probs.get)


SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
          "required": ["answer"]}


def test_json_schema_answers_parse_and_follow_the_schema(tiny_server):
    # llama-cpp-python's server gets the schema as a GBNF grammar
    result = remote(tiny_server.url).generate_parallel(PROMPTS, json_schema=SCHEMA, max_tokens=40, temperature=0)
    for completion in result:
        assert completion.error is None and completion.parsed["answer"] in ("yes", "no")


def test_answers_a_server_let_through_against_the_schema_fail_alone(tiny_server):
    # llama-cpp-python's server drops numeric bounds when it turns a schema into a grammar
    bounded = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 5}},
               "required": ["n"]}
    result = remote(tiny_server.url).generate_parallel(PROMPTS * 3, json_schema=bounded, max_tokens=40,
                                                       temperature=1.0, seed=3)
    refused = [c for c in result if c.error is not None]
    assert refused, "the server kept to the bounds: this test needs an answer that breaks them"
    for completion in refused:
        assert isinstance(completion.error, nl.ConstraintError) and completion.parsed is None
        assert "json_schema refuses" in str(completion.error) and tiny_server.url in str(completion.error)
    for completion in result:
        if completion.error is None:
            assert 1 <= completion.parsed["n"] <= 5


def test_a_constrained_answer_cut_short_fails_alone_as_locally(tiny_server):
    result = remote(tiny_server.url).generate_parallel(PROMPTS[:2], json_schema=[SCHEMA, None], max_tokens=2)
    assert isinstance(result[0].error, nl.IncompleteOutputError) and result[0].error.n_tokens == 2
    assert result[0].finish_reason == "error" and result[1].error is None


def test_grammar_answers_follow_the_grammar(tiny_server):
    result = remote(tiny_server.url).generate_parallel(PROMPTS, grammar='root ::= "cat" | "dog" " house"?',
                                                       max_tokens=8)
    assert all(c.text in ("cat", "dog", "dog house") and c.parsed is None for c in result)


def test_constraints_are_checked_before_any_request(proxy):
    ctx = remote(proxy.url)
    with pytest.raises(nl.InvalidArgumentError) as caught:
        ctx.generate_parallel(PROMPTS[:1], json_schema="{not json")
    assert caught.value.argument == "json_schema"
    with pytest.raises(nl.InvalidArgumentError):
        ctx.generate_parallel(PROMPTS[:1], json_schema=SCHEMA, labels=["a", "b"])
    assert proxy.bodies == []


def test_a_server_without_structured_outputs_refuses_labels_and_constraints(tiny_server):
    ctx = remote(tiny_server.url)
    ctx.endpoints = (nl.remote.Endpoint(tiny_server.url, OpenAICompatible()),)
    for constraint in ({"labels": ["a", "b"]}, {"json_schema": SCHEMA}, {"grammar": 'root ::= "a"'}):
        with pytest.raises(nl.InvalidArgumentError, match="no structured outputs"):
            ctx.generate_parallel(PROMPTS[:1], **constraint)


CONVERSATION = [{"role": "system", "content": "Answer yes or no."}, {"role": "user", "content": "hello how are you"}]


def test_a_conversation_goes_to_the_chat_endpoint_which_applies_the_models_template(proxy, model):
    ctx = remote(proxy.url)
    result = ctx.generate_parallel([CONVERSATION, "hello"], max_tokens=6, temperature=0)
    assert [sorted(set(body) & {"messages", "prompt"}) for body in proxy.bodies] in (
        [["messages"], ["prompt"]], [["prompt"], ["messages"]])
    assert next(body for body in proxy.bodies if "messages" in body)["messages"] == CONVERSATION
    # the server lays the messages out with the template in the tiny model's file
    rendered = model.apply_chat_template(CONVERSATION, add_generation_prompt=True)
    as_text = ctx.generate(rendered, max_tokens=6, temperature=0)
    assert (result[0].text, result[0].n_prompt_tokens) == (as_text.text, as_text.n_prompt_tokens)
    assert result[0].error is None and result[1].error is None


def test_a_conversation_takes_labels_and_schemas(tiny_server):
    ctx = remote(tiny_server.url)
    labels = ["yes", "no"]
    for completion in ctx.generate_parallel([CONVERSATION] * 2, labels=labels, temperature=0):
        assert completion.error is None and completion.label in labels
        # the chat endpoint's log-probabilities: the tiny model's top tokens may begin no label
        assert completion.label_probs is None or sum(completion.label_probs.values()) == pytest.approx(1.0)
    answer = ctx.generate(CONVERSATION, json_schema=SCHEMA, max_tokens=40, temperature=0)
    assert answer.error is None and answer.parsed["answer"] in ("yes", "no")


def test_a_context_works_inside_a_running_event_loop(tiny_server):
    ctx = remote(tiny_server.url)

    async def notebook_cell():
        return ctx.generate_parallel(PROMPTS[:2], max_tokens=3)

    assert len(asyncio.run(notebook_cell())) == 2


# -- several endpoints ---------------------------------------------------------------------


def test_two_endpoints_share_the_prompts(tiny_server, second_tiny_server):
    proxies = [FaultProxy(tiny_server.url), FaultProxy(second_tiny_server.url)]
    try:
        ctx = remote([p.url for p in proxies], max_concurrency=2)
        result = ctx.generate_parallel(random_prompts(12, seed=3, max_words=10), max_tokens=4)
        assert result.stats.failures == 0
        # the faster endpoint may take more; neither gets more than max_concurrency at once
        assert sum(len(p.bodies) for p in proxies) == 12 and min(len(p.bodies) for p in proxies) >= 2
        assert [p.peak_connections for p in proxies] == [2, 2]
    finally:
        for p in proxies:
            p.close()


def kill_after_first_answer(server):
    def on_progress(done, total):
        if done == 1:
            server.stop()
    return on_progress


def test_prompts_on_a_server_that_dies_move_to_the_other(tiny_model_path, tiny_server):
    with ModelServer(tiny_model_path) as doomed:
        ctx = remote([doomed.url, tiny_server.url], max_concurrency=4)
        prompts = random_prompts(12, seed=4, max_words=10)
        result = ctx.generate_parallel(prompts, max_tokens=8, temperature=0,
                                       on_progress=kill_after_first_answer(doomed))
    assert result.stats.failures == 0 and result.stats.retries >= 1
    assert result.texts == remote(tiny_server.url).generate_parallel(prompts, max_tokens=8, temperature=0).texts


def test_when_the_only_server_dies_finished_prompts_survive_and_the_rest_fail_without_trying_it_again(
        tiny_model_path):
    with ModelServer(tiny_model_path) as doomed:
        # each refused round doubles the dead server's rest: from 1 ms, the few here take moments
        ctx = remote(doomed.url, max_concurrency=2, backoff=0.001)
        result = ctx.generate_parallel(random_prompts(40, seed=5, max_words=10), max_tokens=8,
                                       on_progress=kill_after_first_answer(doomed))
    finished = [c for c in result if c.error is None]
    failed = [c.error for c in result if c.error is not None]
    assert finished and failed and result.stats.failures == len(failed)
    assert all(isinstance(error, nl.RemoteConnectionError) and error.endpoint == doomed.url for error in failed)
    # three refused rounds (retries + 1) of at most two requests each, and the two in flight when it
    # died: not every failed prompt's three attempts (over a hundred requests here)
    assert sum(error.attempts for error in failed) <= 3 * 2 + 2
    never_sent = [error for error in failed if error.attempts == 0]
    assert len(never_sent) >= len(failed) - 8
    assert "was not sent to" in str(never_sent[0]) and "refused connections 3 times in a row" in str(never_sent[0])


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", [Fault(status=500), Fault(status=503), Fault(status=429), Fault(drop=True)])
def test_failures_worth_a_retry_are_retried(proxy, fault):
    proxy.faults = [fault, fault]
    result = remote(proxy.url, max_concurrency=1).generate_parallel(PROMPTS[:3], max_tokens=3)
    assert result.stats.failures == 0 and result.stats.retries == 2
    assert len(proxy.bodies) == 5


def test_an_endpoint_rests_as_long_as_its_retry_after_asks(proxy):
    proxy.faults = [Fault(status=429, retry_after=0.5)]
    started = time.monotonic()
    result = remote(proxy.url).generate_parallel(PROMPTS[:1], max_tokens=3)
    assert result[0].error is None and time.monotonic() - started >= 0.5


def test_a_failure_after_the_last_retry_is_the_prompts_classed_error(proxy):
    proxy.faults = [Fault(status=500)] * 3
    result = remote(proxy.url, max_concurrency=1).generate_parallel(PROMPTS[:2], max_tokens=3)
    error = result[0].error
    assert isinstance(error, nl.RemoteHTTPError) and isinstance(error, nl.PromptError)
    assert (error.index, error.status, error.attempts, error.server_message) == (0, 500, 3, "injected fault")
    assert "Prompt 0 failed on" in str(error)
    assert result[1].error is None


@pytest.mark.parametrize("status", [400, 404, 422])
def test_client_errors_are_not_retried(proxy, status):
    proxy.faults = [Fault(status=status)]
    result = remote(proxy.url, max_concurrency=1).generate_parallel(PROMPTS[:2], max_tokens=3)
    assert isinstance(result[0].error, nl.RemoteHTTPError) and result[0].error.status == status
    assert result[0].error.attempts == 1 and result[1].error is None


def test_token_id_prompts_need_a_server_that_takes_them(tiny_server):
    # llama-cpp-python's server takes text only (and calls it HTTP 500); vLLM and llama-server take token ids
    result = remote(tiny_server.url).generate_parallel([[1, 50, 60]], max_tokens=3)
    assert isinstance(result[0].error, nl.RemoteHTTPError) and "valid string" in result[0].error.server_message


def test_an_answer_that_is_not_json_is_a_response_error(proxy):
    proxy.faults = [Fault(garbage=True)]
    result = remote(proxy.url, max_concurrency=1).generate_parallel(PROMPTS[:2], max_tokens=3)
    assert isinstance(result[0].error, nl.RemoteResponseError) and result[1].error is None


def test_a_request_that_outlasts_the_timeout_fails_alone_without_a_retry(proxy):
    proxy.faults = [Fault(hang=True)]
    result = remote(proxy.url, max_concurrency=2, timeout=5).generate_parallel(PROMPTS[:3], max_tokens=3)
    # the first request to reach the proxy hangs: prompt 0's or prompt 1's, sent at once
    failed = [c.error for c in result if c.error is not None]
    assert len(failed) == 1 and isinstance(failed[0], nl.RemoteTimeoutError) and failed[0].attempts == 1
    assert failed[0].index in (0, 1) and len(proxy.bodies) == 3


CTRL_C_CHILD = """
import signal, sys
import newrllama4 as nl
# as in a terminal session: a test run started in the background inherits SIGINT ignored
signal.signal(signal.SIGINT, signal.default_int_handler)
ctx = nl.RemoteContext(sys.argv[1], retries=2, backoff=0.01, max_concurrency=3, timeout=20.0)
print("calling", flush=True)
try:
    ctx.generate_parallel(["one", "two", "three", "four"], max_tokens=3)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(3)
print("returned", flush=True)
"""

def test_ctrl_c_cancels_the_requests_in_flight(proxy):
    # in a process of its own, as a user's session gets it: a real SIGINT from the terminal
    proxy.fault_always = Fault(hang=True)
    child = subprocess.Popen([sys.executable, "-c", CTRL_C_CHILD, proxy.url], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "calling"
    deadline = time.monotonic() + 10
    while proxy.open_connections < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proxy.open_connections == 3  # max_concurrency requests hang in the proxy
    started = time.monotonic()
    child.send_signal(signal.SIGINT)
    output, _ = child.communicate(timeout=15)
    assert child.returncode == 3 and output.strip() == "interrupted"
    assert time.monotonic() - started < 5
    deadline = time.monotonic() + 5
    while proxy.open_connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proxy.open_connections == 0
    proxy.fault_always = None
    assert remote(proxy.url).generate_parallel(PROMPTS[:2], max_tokens=3).stats.failures == 0


def test_an_exception_from_the_progress_callback_cancels_the_rest_and_propagates(proxy):
    class Stop(Exception):
        pass

    def stop(done, total):
        proxy.fault_always = Fault(hang=True)
        raise Stop

    with pytest.raises(Stop):
        remote(proxy.url, max_concurrency=2).generate_parallel(PROMPTS, max_tokens=3, on_progress=stop)
    deadline = time.monotonic() + 5
    while proxy.open_connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proxy.open_connections == 0
