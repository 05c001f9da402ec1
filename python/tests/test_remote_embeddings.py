"""RemoteContext.embed_parallel: embeddings from llama.cpp's own llama-server of the tiny
model (started with --embeddings, and without), llama-cpp-python's server, and a stand-in
that answers as vLLM does (no vLLM here: it needs a GPU)."""

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

import newrllama4 as nl
from conftest import random_prompts
from newrllama4.testing import LlamaCppServer
from test_remote_call import remote

PROMPTS = random_prompts(6, seed=3, max_words=40)  # 7 to 36 tokens with BOS


@pytest.fixture(scope="module")
def last_pooling_server(tiny_model_path):
    with LlamaCppServer(tiny_model_path, pooling="last", n_parallel=2) as server:
        yield server


def vectors(result):
    return [np.frombuffer(c.hidden_state, dtype="<f4") for c in result]


def test_llama_server_pooling_the_last_token_gives_the_engines_own_states(last_pooling_server, ctx, proxy_for):
    # the tiny model's prompts stay below a tile of 64 tokens, where the server and the
    # engine run the same kernels: the same bits (measured: 0.0 apart)
    proxy = proxy_for(last_pooling_server)
    server = remote(proxy.url)
    result = server.embed_parallel(PROMPTS)
    local = ctx.generate_parallel(PROMPTS, max_tokens=1, temperature=0, hidden_states=True)
    assert all(c.error is None and c.text == "" for c in result)
    for mine, theirs in zip(vectors(local), vectors(result)):
        np.testing.assert_array_equal(theirs, mine)
    assert [c.n_prompt_tokens for c in result] == [c.n_prompt_tokens for c in local]
    assert result.stats.prompt_tokens == sum(c.n_prompt_tokens for c in local)
    body = proxy.bodies[0]  # raw float32 in base64, not normalised
    assert (body["model"], body["encoding_format"], body["embd_normalize"]) == (server.model, "base64", -1)
    assert sorted(b["input"] for b in proxy.bodies) == sorted(PROMPTS)


def test_embeddings_come_back_from_the_cache_apart_from_answers(last_pooling_server, tmp_path, proxy_for):
    proxy = proxy_for(last_pooling_server)
    server = remote(proxy.url)
    path = str(tmp_path / "cache.sqlite")
    first = server.embed_parallel(PROMPTS[:3], cache=path)
    again = server.embed_parallel(PROMPTS[:4], cache=path)
    assert [c.from_cache for c in again] == [True, True, True, False]
    assert [c.hidden_state for c in again[:3]] == [c.hidden_state for c in first]
    assert len(proxy.bodies) == 4


def test_a_server_without_embeddings_stops_the_call_with_a_classed_error(tiny_llama_server, tiny_server,
                                                                          tiny_model_path):
    with pytest.raises(nl.NoEmbeddingsError, match="--embeddings") as raised:
        remote(tiny_llama_server.url).embed_parallel(PROMPTS)
    assert raised.value.status == 501 and isinstance(raised.value, nl.EndpointError)
    with pytest.raises(nl.NoEmbeddingsError, match="embedding=True"):  # llama-cpp-python's server: HTTP 500
        remote(tiny_server.url).embed_parallel(PROMPTS[:2])
    with LlamaCppServer(tiny_model_path, pooling="none", n_parallel=1) as unpooled:
        with pytest.raises(nl.NoEmbeddingsError, match="Pooling type 'none'") as raised:
            remote(unpooled.url).embed_parallel(PROMPTS[:2])
    assert raised.value.status == 400


def test_prompts_an_embeddings_endpoint_cannot_take(last_pooling_server):
    server = remote(last_pooling_server.url)
    with pytest.raises(nl.InvalidArgumentError, match="chat messages"):
        server.embed_parallel(["hello", [{"role": "user", "content": "hi"}]])
    result = server.embed_parallel(["hello", ""])
    assert result[0].hidden_state is not None and isinstance(result[1].error, nl.EmptyPromptError)


# -- vLLM's answers, from a stand-in -------------------------------------------------------


class StandInVLLM:
    """Answers GET /v1/models and POST /v1/embeddings as vLLM does: for an embedding model
    (`pooling`), or for a model it runs to generate, which has no embeddings route (404)."""

    DIM = 8

    def __init__(self, pooling: bool = True, floats: bool = False):
        self.pooling, self.floats = pooling, floats
        self.bodies: list[dict] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                stand_in.reply(self, 200, {"object": "list", "data": [
                    {"id": "intfloat/e5-small", "object": "model", "owned_by": "vllm"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stand_in.bodies.append(body)
                if not stand_in.pooling:
                    return stand_in.reply(self, 404, {"detail": "Not Found"})
                vector = stand_in.vector(body["input"])
                embedding = vector.tolist() if stand_in.floats else base64.b64encode(vector.tobytes()).decode()
                stand_in.reply(self, 200, {
                    "id": "embd-1", "object": "list", "created": 1, "model": body["model"],
                    "data": [{"index": 0, "object": "embedding", "embedding": embedding}],
                    "usage": {"prompt_tokens": len(body["input"].split()) + 2, "total_tokens": 0,
                              "completion_tokens": 0, "prompt_tokens_details": None},
                })

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.handle_error = lambda request, address: None  # the client closed a connection: it may
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def vector(self, text):
        return np.random.default_rng(len(text)).standard_normal(self.DIM).astype("<f4")

    @staticmethod
    def reply(handler, status, payload):
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def close(self):
        self._server.shutdown()
        self._server.server_close()


@pytest.mark.parametrize("floats", [False, True], ids=["base64", "a server that ignores encoding_format"])
def test_vllm_embeddings_are_read_as_float32(floats):
    stand_in = StandInVLLM(floats=floats)
    try:
        server = remote(stand_in.url)
        assert server.server_kinds == ["vLLM"]
        result = server.embed_parallel(PROMPTS[:3])
        for prompt, vector in zip(PROMPTS[:3], vectors(result)):
            np.testing.assert_array_equal(vector, stand_in.vector(prompt))
        assert result[0].n_prompt_tokens == len(PROMPTS[0].split()) + 2
        assert all(b["normalize"] is False and b["encoding_format"] == "base64" for b in stand_in.bodies)
    finally:
        stand_in.close()


def test_vllm_serving_a_model_to_generate_has_no_embeddings():
    stand_in = StandInVLLM(pooling=False)
    try:
        with pytest.raises(nl.NoEmbeddingsError, match="HTTP 404: Not Found"):
            remote(stand_in.url).embed_parallel(PROMPTS)
        assert len(stand_in.bodies) <= 16  # one round of requests, no retries
    finally:
        stand_in.close()
