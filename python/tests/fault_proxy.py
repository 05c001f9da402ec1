"""An HTTP proxy in front of a test server that fails requests on demand, for the remote
context's error paths: HTTP error statuses, dropped connections, answers that never come
or are not JSON.

It runs an asyncio server in a thread of its own. Each POST takes the next fault from
`faults` (or `fault_always`); without one it is forwarded to the upstream server. Every
POST's JSON body is kept in `bodies`. Answers close their connection, so that each
request is one connection: `open_connections` counts the requests in flight, and
`peak_connections` the most at once.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Optional

import httpx


class Fault:
    """What the proxy does with one request instead of forwarding it."""

    def __init__(self, status: Optional[int] = None, retry_after: Optional[float] = None, hang: bool = False,
                 drop: bool = False, garbage: bool = False, delay: float = 0.0):
        self.status = status
        self.retry_after = retry_after
        self.hang = hang  # never answer
        self.drop = drop  # close the connection without an answer
        self.garbage = garbage  # answer 200 with a body that is not JSON
        self.delay = delay  # then forward


class FaultProxy:
    def __init__(self, upstream: Optional[str], api_key: Optional[str] = None):
        self.upstream = upstream  # an API root such as http://127.0.0.1:8000/v1, or None
        self.api_key = api_key  # when set, requests without it get 401
        self.faults: list[Fault] = []
        self.fault_always: Optional[Fault] = None
        self.bodies: list[dict] = []
        self.open_connections = 0
        self.peak_connections = 0
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait()
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._client = httpx.AsyncClient(timeout=60)
        ready.set()
        self._loop.run_forever()

    def close(self) -> None:
        async def shut() -> None:
            self._server.close()
            await self._client.aclose()

        asyncio.run_coroutine_threadsafe(shut(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open_connections += 1
        self.peak_connections = max(self.peak_connections, self.open_connections)
        try:
            await self._answer(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        finally:
            self.open_connections -= 1
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        method, path, _ = (await reader.readline()).decode().split(" ", 2)
        headers = {}
        while (line := (await reader.readline()).decode().strip()):
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", 0)))
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return await _reply(writer, 401, b'{"error": {"message": "wrong API key"}}')
        fault = None
        if method == "POST":
            self.bodies.append(json.loads(body))
            fault = self.faults.pop(0) if self.faults else self.fault_always
        if fault is not None:
            if fault.hang:
                await reader.read()  # until the client closes the connection
                return
            if fault.drop:
                return
            if fault.garbage:
                return await _reply(writer, 200, b"this is not JSON")
            if fault.status is not None:
                extra = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
                return await _reply(writer, fault.status, b'{"error": {"message": "injected fault"}}', extra)
            await asyncio.sleep(fault.delay)
        url = self.upstream.removesuffix("/v1") + path
        response = await self._client.request(method, url, content=body, headers={"content-type": "application/json"})
        await _reply(writer, response.status_code, response.content)


async def _reply(writer: asyncio.StreamWriter, status: int, content: bytes, extra: Optional[dict] = None) -> None:
    head = [f"HTTP/1.1 {status} X", "Content-Type: application/json", f"Content-Length: {len(content)}",
            "Connection: close", *(f"{k}: {v}" for k, v in (extra or {}).items())]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + content)
    await writer.drain()
