"""Creating a RemoteContext (remote/context.py): what the servers serve, the API key, arguments."""

import pytest

import newrllama4 as nl
from fault_proxy import FaultProxy
from newrllama4.testing import free_port

from test_remote_call import PROMPTS, remote


# -- creating a context ----------------------------------------------------------------------


def test_the_model_is_the_servers_and_names_the_cache_key(tiny_server, tiny_model_path):
    ctx = remote(tiny_server.url.removesuffix("/v1"))  # a bare server address gets /v1
    assert ctx.model == tiny_model_path == remote(tiny_server.url, model=tiny_model_path).model
    assert ctx.endpoints[0].url == tiny_server.url and ctx.endpoints[0].api.name == "llama-cpp-python"
    assert ctx.model_identity == f"server:{tiny_model_path}"
    assert nl.server_record(ctx) == {"id": tiny_model_path, "server": ["llama-cpp-python"],
                                     "endpoints": [tiny_server.url]}


def test_servers_that_cannot_be_used_are_refused_when_the_context_is_created(tiny_server):
    with pytest.raises(nl.EndpointError, match="does not answer"):
        remote(f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(nl.EndpointError, match="does not serve 'other'"):
        remote(tiny_server.url, model="other")


def test_the_api_key_is_sent_and_never_shown(tiny_server, monkeypatch):
    proxy = FaultProxy(tiny_server.url, api_key="sk-secret")
    try:
        with pytest.raises(nl.EndpointError, match="refused the API key"):
            remote(proxy.url, api_key="wrong")
        monkeypatch.setenv("NEWRLLAMA4_API_KEY", "sk-secret")
        ctx = remote(proxy.url)
        assert ctx.generate_parallel(PROMPTS[:1], max_tokens=2).stats.failures == 0
        assert "sk-secret" not in repr(ctx) and "sk-secret" not in repr(nl.server_record(ctx))
    finally:
        proxy.close()


@pytest.mark.parametrize("argument, value", [
    ("base_url", "localhost:8000"), ("base_url", []), ("base_url", ["http://a/v1", "http://a/v1/"]),
    ("base_url", 3), ("model", ""), ("max_concurrency", 0), ("timeout", 0), ("retries", -1),
])
def test_bad_arguments_name_the_argument(argument, value):
    kwargs = {"base_url": "http://127.0.0.1:1/v1", argument: value}
    with pytest.raises(nl.InvalidArgumentError) as caught:
        nl.RemoteContext(**kwargs)
    assert caught.value.argument == argument


def test_a_bad_api_key_is_refused_without_showing_it():
    with pytest.raises(nl.InvalidArgumentError) as caught:
        nl.RemoteContext("http://127.0.0.1:1/v1", api_key=12345)
    assert "12345" not in str(caught.value)


def test_a_closed_context_refuses_calls(tiny_server):
    with remote(tiny_server.url) as ctx:
        pass
    assert "closed" in repr(ctx)
    with pytest.raises(nl.ClosedError):
        ctx.generate("hello")
