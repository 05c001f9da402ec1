"""HTTP for the remote context (remote/http.py): status errors, posting, Retry-After, error text."""

import asyncio

import httpx
import pytest

from newrllama4.remote.http import (
    CONNECT_SECONDS, StatusError, client_timeout, describe_error, post_json, retry_after_seconds, server_message,
)


def test_a_post_gives_the_json_of_a_200_and_a_status_error_otherwise():
    def answer(request):
        return httpx.Response(200, json={"echo": request.url.path}) if request.url.path == "/ok" else \
            httpx.Response(503, text="busy")

    async def post(path):
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            return await post_json(client, f"http://server{path}", {"a": 1})

    assert asyncio.run(post("/ok")) == {"echo": "/ok"}
    with pytest.raises(StatusError) as failed:
        asyncio.run(post("/busy"))
    assert failed.value.response.status_code == 503 and str(failed.value) == "HTTP 503"


def test_a_server_s_message_is_read_from_openai_s_form_fastapi_s_or_the_text():
    assert server_message(httpx.Response(400, json={"error": {"message": "bad prompt"}})) == "bad prompt"
    assert server_message(httpx.Response(422, json={"detail": "missing field"})) == "missing field"
    assert server_message(httpx.Response(500, text="x" * 400)) == "x" * 300
    assert server_message(httpx.Response(502)) == "Bad Gateway"


def test_retry_after_is_read_in_seconds_and_an_http_date_is_left_to_the_pool():
    assert retry_after_seconds(httpx.Response(429, headers={"Retry-After": "2.5"})) == 2.5
    assert retry_after_seconds(httpx.Response(429, headers={"Retry-After": "-1"})) == 0.0
    assert retry_after_seconds(httpx.Response(429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) is None
    assert retry_after_seconds(httpx.Response(429)) is None


def test_a_timeout_bounds_the_connection_and_never_the_pool():
    timeout = client_timeout(600.0)
    assert (timeout.read, timeout.connect, timeout.pool) == (600.0, CONNECT_SECONDS, None)
    assert client_timeout(2.0).connect == 2.0


def test_an_error_says_what_the_os_said_under_it():
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except OSError as cause:
            raise httpx.ConnectError("All connection attempts failed") from cause
    except httpx.ConnectError as error:
        assert describe_error(error) == ("All connection attempts failed "
                                         "(ConnectionRefusedError: [Errno 111] Connection refused)")
