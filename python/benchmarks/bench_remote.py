"""RemoteContext: one local server against two, and the client's own cost per request.

64 prompts (the essay openings of bench_parallel.py), 32 new tokens each, greedy, on
the default model served by llama-cpp-python's OpenAI-compatible server (the test
extra), on 127.0.0.1:
  (a) one server with every core
  (a') one server with half the cores
  (b) two servers with half the cores each, the prompts spread over both
  (c) the client alone: 1000 prompts against a stub server (another process) that
      answers at once, so that the time per request is the client's own (httpx, JSON,
      scheduling; 16 requests in flight)
On one machine (b) cannot beat (a) -- both share the same cores; on two machines it
would have twice the hardware. llama-cpp-python's server runs one request at a time;
vLLM or llama-server batch them.

Usage: python bench_remote.py [--prompts 64] [--max-tokens 32] [--threads N] [--model PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import time

import newrllama4 as nl
from bench_parallel import prompts
from newrllama4.testing import ModelServer, free_port

STUB_ANSWER = json.dumps({
    "choices": [{"text": " and so on", "index": 0, "finish_reason": "length", "logprobs": None}],
    "usage": {"prompt_tokens": 16, "completion_tokens": 4, "total_tokens": 20},
}).encode()
STUB_MODELS = json.dumps({"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "stub"}]}).encode()


async def _answer_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while request_line := await reader.readline():  # keep-alive: requests until the client closes
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        await reader.readexactly(length)
        body = STUB_MODELS if request_line.startswith(b"GET") else STUB_ANSWER
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
    writer.close()


def _serve_stub(port: int) -> None:
    async def serve() -> None:
        server = await asyncio.start_server(_answer_at_once, "127.0.0.1", port)
        await server.serve_forever()

    asyncio.run(serve())


def start_stub_server() -> str:
    """An OpenAI-compatible server that answers every request at once, in a process of its
    own so that its work is not counted as the client's."""
    port = free_port()
    multiprocessing.Process(target=_serve_stub, args=(port,), daemon=True).start()
    for _ in range(100):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return f"http://127.0.0.1:{port}/v1"
        time.sleep(0.05)
    raise RuntimeError("the stub server did not start")


def run(name: str, urls: list[str], texts: list[str], max_tokens: int, baseline: float | None) -> float:
    ctx = nl.RemoteContext(urls)
    ctx.generate_parallel(texts[:2], max_tokens=2, temperature=0)  # warm-up: connections, model pages
    stats = ctx.generate_parallel(texts, max_tokens=max_tokens, temperature=0).stats
    ratio = f"{baseline / stats.total_seconds:>5.2f}x" if baseline else "   1x"
    print(f"| {name:<36} | {stats.generated_tokens:>9} | {stats.total_seconds:>7.2f} "
          f"| {stats.generation_tokens_per_s:>8.1f} | {1000 * stats.total_seconds / len(texts):>10.2f} | {ratio:>12} |")
    return stats.total_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--model", default=None, help="a GGUF file; the default model if omitted")
    args = parser.parse_args()
    model = args.model or nl.default_model_path()
    texts = prompts(args.prompts)
    half = max(1, args.threads // 2)
    print(f"{args.prompts} prompts, {args.max_tokens} new tokens, greedy, {args.threads} threads, {model}\n")
    print(f"| {'run':<36} | generated | seconds |    tok/s | ms/request | speed vs (a) |")
    print(f"|{'-' * 38}|----------:|--------:|---------:|-----------:|-------------:|")
    with ModelServer(model, n_ctx=512, n_threads=args.threads) as server:
        baseline = run("(a) one server", [server.url], texts, args.max_tokens, None)
    if half < args.threads:  # what one server makes of half the cores, to read (b) by
        with ModelServer(model, n_ctx=512, n_threads=half) as server:
            run(f"(a') one server, {half} threads", [server.url], texts, args.max_tokens, baseline)
    with ModelServer(model, n_ctx=512, n_threads=half) as first, ModelServer(model, n_ctx=512, n_threads=half) as second:
        run(f"(b) two servers, {half} threads each", [first.url, second.url], texts, args.max_tokens, baseline)
    run("(c) client alone, 1000 prompts", [start_stub_server()], prompts(1000), args.max_tokens, None)


if __name__ == "__main__":
    main()
