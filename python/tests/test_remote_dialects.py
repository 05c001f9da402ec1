"""What each kind of server is sent and answers (remote/dialects.py), with no server."""

import asyncio
import json
import math

import httpx
import pytest

from newrllama4.constraints import check_constraints
from newrllama4.remote.dialects import VLLM, LlamaCppPython, LlamaServer, endpoint_path, read_answer
from newrllama4.remote.labels import label_grammar
from newrllama4.sampling import SamplingParams

from test_remote_call import CONVERSATION, SCHEMA


# -- what each server is sent, and how answers are read ---------------------------------------


def test_vllm_and_llama_server_requests():
    params = SamplingParams(top_k=5, min_p=0.1, repeat_last_n=32, penalty_repeat=1.2, stop="\n")
    vllm = VLLM().request_body("m", "hi", params, 7, None)
    assert (vllm["top_k"], vllm["min_p"], vllm["repetition_penalty"], vllm["stop"]) == (5, 0.1, 1.2, ["\n"])
    server = LlamaServer().request_body("m", [1, 2], params, 7, None)
    assert (server["repeat_penalty"], server["repeat_last_n"], server["prompt"]) == (1.2, 32, [1, 2])
    # no window, no penalty
    assert VLLM().request_body("m", "hi", SamplingParams(repeat_last_n=0), 7, None)["repetition_penalty"] == 1.0
    labelled = LlamaCppPython().request_body("m", "hi", params, 7, ("yes", "no"))
    assert labelled["grammar"] == label_grammar(("yes", "no"))
    assert "stop" not in labelled and labelled["max_tokens"] == 4 and labelled["logprobs"] == 20


def test_a_conversation_is_sent_as_messages_with_the_chat_apis_logprobs_fields():
    params = SamplingParams(stop="\n")
    body = LlamaCppPython().request_body("m", CONVERSATION, params, 7, ("yes", "no"))
    assert body["messages"] == CONVERSATION and "prompt" not in body
    assert (body["logprobs"], body["top_logprobs"]) == (True, 20)
    assert endpoint_path(CONVERSATION) == "chat/completions" and endpoint_path("hi") == endpoint_path([1]) == "completions"
    chat_form = {"choices": [{"message": {"role": "assistant", "content": "yes"}, "finish_reason": "stop",
                              "logprobs": {"content": [{"token": "yes", "logprob": -0.2,
                                                        "top_logprobs": [{"token": "yes", "logprob": -0.2}]}]}}]}
    answer = read_answer(chat_form)
    assert (answer.text, answer.first_top_logprobs) == ("yes", [("yes", -0.2)])
    with pytest.raises(TypeError):  # a tool call: no text
        read_answer({"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "tool_calls"}]})


def test_json_schemas_and_grammars_go_to_each_servers_structured_outputs():
    params = SamplingParams()
    schema, gbnf = check_constraints(SCHEMA, None, 1, None)[0], check_constraints(None, 'root ::= "a"', 1, None)[0]
    assert VLLM().request_body("m", "hi", params, 7, constraint=schema)["structured_outputs"] == {"json": SCHEMA}
    assert VLLM().request_body("m", "hi", params, 7, constraint=gbnf)["structured_outputs"] == {"grammar": 'root ::= "a"'}
    assert LlamaServer().request_body("m", "hi", params, 7, constraint=schema)["json_schema"] == SCHEMA
    assert LlamaServer().request_body("m", "hi", params, 7, constraint=gbnf)["grammar"] == 'root ::= "a"'
    assert "root ::=" in LlamaCppPython().request_body("m", "hi", params, 7, constraint=schema)["grammar"]
    # a schema given as a JSON string is sent as the object it spells
    as_text = check_constraints('{"type": "integer"}', None, 1, None)[0]
    assert LlamaServer().request_body("m", "hi", params, 7, constraint=as_text)["json_schema"] == {"type": "integer"}


def test_both_forms_of_logprobs_are_read():
    openai_form = {"choices": [{"text": " yes", "finish_reason": "stop", "logprobs": {
        "tokens": [" yes"], "token_logprobs": [-0.1], "top_logprobs": [{" yes": -0.1, " no": -2.5}]}}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 2}}}
    answer = read_answer(openai_form)
    assert answer.first_top_logprobs == [(" yes", -0.1), (" no", -2.5)]
    assert (answer.n_prompt_tokens, answer.n_tokens, answer.n_cached_tokens) == (4, 1, 2)
    llama_server_form = {"choices": [{"text": " yes", "finish_reason": "length", "logprobs": {"content": [
        {"token": " yes", "logprob": -0.1, "top_logprobs": [{"token": " yes", "logprob": -0.1}]}]}}]}
    answer = read_answer(llama_server_form)
    assert answer.first_top_logprobs == [(" yes", -0.1)] and answer.finish_reason == "length"


VLLM_TOKENS = {"Is it?": [11, 12, 13], "yes": [21], " yes": [22], "nope": [25, 26], " nope": [25, 26]}


def vllm_logprob(position, token):
    return -0.05 * token - 0.01 * position


def fake_vllm(request, seen):
    body = json.loads(request.content)
    seen.append((request.url.path, body))
    if request.url.path == "/tokenize":
        assert body["model"] == "m"
        if "messages" in body:
            assert body["add_generation_prompt"] and not body["add_special_tokens"]
            return httpx.Response(200, json={"count": 3, "max_model_len": 99, "tokens": [1, 11, 13]})
        tokens = VLLM_TOKENS[body["prompt"]]
        return httpx.Response(200, json={"count": len(tokens), "max_model_len": 99,
                                         "tokens": ([1] if body["add_special_tokens"] else []) + tokens})
    assert request.url.path == "/v1/completions" and body["prompt_logprobs"] == 1 and body["max_tokens"] == 1
    prompt = body["prompt"]
    logprobs = [None] + [{str(t): {"logprob": vllm_logprob(i, t), "rank": 1, "decoded_token": "x"}}
                         for i, t in enumerate(prompt[1:], start=1)]
    return httpx.Response(200, json={"choices": [{"index": 0, "text": "!", "finish_reason": "length",
                                                  "prompt_logprobs": logprobs}],
                                     "usage": {"prompt_tokens": len(prompt), "completion_tokens": 1}})


def test_vllm_labels_are_scored_from_prompt_logprobs_of_each_spelling():
    from newrllama4.remote.dialects import VLLMScoring

    seen = []

    async def scores(prompt):
        transport = httpx.MockTransport(lambda request: fake_vllm(request, seen))
        async with httpx.AsyncClient(transport=transport) as client:
            return await VLLMScoring(client, "http://vllm:8000/v1", "m").label_scores(prompt, ("yes", "nope"))

    for prompt, tokens in (("Is it?", [1, 11, 12, 13]), ([1, 11, 12, 13], [1, 11, 12, 13]), (CONVERSATION, [1, 11, 13])):
        seen.clear()
        result = asyncio.run(scores(prompt))
        n = len(tokens)
        # "yes", " yes", and "nope" and " nope", spelt alike: one spelling, one request
        yes = math.exp(vllm_logprob(n, 21)) + math.exp(vllm_logprob(n, 22))
        nope = math.exp(vllm_logprob(n, 25) + vllm_logprob(n + 1, 26))
        assert result.probs == pytest.approx([yes / (yes + nope), nope / (yes + nope)])
        assert result.n_prompt_tokens == n
        sent = sorted(body["prompt"] for path, body in seen if path == "/v1/completions")
        assert sent == sorted([tokens + [21], tokens + [22], tokens + [25, 26]])
