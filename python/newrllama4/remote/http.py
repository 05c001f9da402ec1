"""HTTP for the remote context: timeouts, posting JSON, status errors and what a failure says."""

from __future__ import annotations

from typing import Any, Optional

import httpx

# how long a server may take to accept a connection, within the context's `timeout`
CONNECT_SECONDS = 10.0


class StatusError(Exception):
    """A request answered with an HTTP status other than 200."""

    def __init__(self, response: httpx.Response):
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


async def post_json(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> Any:
    """The JSON a POST is answered with; StatusError for a status other than 200,
    ValueError for a body that is not JSON."""
    response = await client.post(url, json=body)
    if response.status_code != 200:
        raise StatusError(response)
    return response.json()


def client_timeout(seconds: float) -> httpx.Timeout:
    # no pool timeout: EndpointPool bounds the requests, so none waits for a connection
    return httpx.Timeout(seconds, connect=min(seconds, CONNECT_SECONDS), pool=None)


def describe_error(error: httpx.HTTPError) -> str:
    """The error's message, and that of the OS error under it: httpx's async client says
    only "All connection attempts failed" for a refused connection."""
    root: BaseException = error
    while root.__cause__ is not None or root.__context__ is not None:
        root = root.__cause__ or root.__context__
    text = str(error) or type(error).__name__
    return text if root is error or str(root) in text else f"{text} ({type(root).__name__}: {root})"


def server_message(response: httpx.Response) -> str:
    """The error message in a server's response: OpenAI's {"error": {"message": ...}},
    FastAPI's {"detail": ...}, or the body's text."""
    try:
        payload = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])[:300]
        if "detail" in payload:
            return str(payload["detail"])[:300]
    return response.text[:300]


def retry_after_seconds(response: httpx.Response) -> Optional[float]:
    """How long a response's Retry-After asks to wait, if it gives seconds."""
    try:
        return max(0.0, float(response.headers["retry-after"]))
    except (KeyError, ValueError):
        return None  # absent, or an HTTP date: the pool's own backoff then
