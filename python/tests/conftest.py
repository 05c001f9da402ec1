import random

import pytest

import newrllama4 as nl
from fault_proxy import FaultProxy
from newrllama4.models import model_path
from newrllama4.testing import LlamaCppServer, ModelServer, write_tiny_model

WORDS = (
    "the of and to in is was for on that with as by at from his her it an were are which this "
    "hello how you today tell me a story once upon king queen river mountain small large red"
).split()


def random_prompts(n, seed=0, max_words=60):
    """Prompts of mixed lengths, from one word to `max_words`."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, max_words))) for _ in range(n)]


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("models") / "tiny.gguf")


@pytest.fixture(scope="session")
def model(tiny_model_path):
    with nl.Model(tiny_model_path) as loaded:
        yield loaded


@pytest.fixture
def ctx(model):
    with nl.Context(model, n_ctx=512, n_seq_max=4) as context:
        yield context


@pytest.fixture(scope="session")
def gemma():
    with nl.Model() as loaded:
        yield loaded


@pytest.fixture(scope="session")
def smollm2():
    """The instruction model that comes with the engine: SmolLM2 135M Instruct, ChatML template."""
    with nl.Model("smollm2-135m-instruct") as loaded:
        yield loaded


@pytest.fixture(scope="session")
def tiny_server(tiny_model_path):
    """An OpenAI-compatible server of the tiny model, shared by the tests that leave it running."""
    with ModelServer(tiny_model_path) as server:
        yield server


@pytest.fixture(scope="session")
def second_tiny_server(tiny_model_path):
    with ModelServer(tiny_model_path) as server:
        yield server


@pytest.fixture(scope="session")
def tiny_llama_server(tiny_model_path):
    """llama.cpp's own llama-server of the tiny model (the test extra builds it: no skip without it)."""
    with LlamaCppServer(tiny_model_path) as server:
        yield server


@pytest.fixture(scope="session")
def smollm2_llama_server():
    """llama-server of SmolLM2 135M Instruct, the model the `smollm2` fixture loads locally."""
    with LlamaCppServer(model_path("smollm2-135m-instruct"), n_ctx=1024, n_parallel=2) as server:
        yield server


@pytest.fixture
def proxy_for():
    """Starts a fault-injecting proxy in front of a server; every one is closed after the test."""
    proxies = []

    def start(server):
        proxies.append(FaultProxy(server.url))
        return proxies[-1]

    yield start
    for started in proxies:
        started.close()
