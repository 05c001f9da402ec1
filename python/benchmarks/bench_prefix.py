"""Shared-prefix reuse on the annotation workload, in one run.

48 prompts = one long instruction with few-shot examples (~250 tokens) + a one-sentence
text each, 4 new tokens, greedy, n_seq_max=8, default model. Then the same with two
instructions of half the length, each shared by 24 prompts (interleaved). For each:
reuse off, reuse on (a fresh context), and reuse on with a warm cache (a second call on
the same context, the next 48 texts). Outputs with reuse are checked against reuse off.
"new tok" counts the tokens generated: a greedy answer that ends early (an end-of-text
token) saves decode steps, so two engines whose numbers differ do different work for
4 new tokens; with 1 new token (the label of an annotation) the work is the same, and
those rows follow.

With `--llama-server PATH` (llama.cpp's server binary: `make setup-test` builds it from the
engine's llama.cpp into .venv/bin; `make bench` passes it), the same prompts also go to
llama-server with 8 slots and its prompt cache, through a RemoteContext: the reference for
what reuse should reach. Its answers are compared with ours ("same" counts the prompts
whose answers match).

Usage: python bench_prefix.py [--threads N] [--llama-server PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import time
from typing import Iterator

import httpx

import newrllama4 as nl
from newrllama4.testing import free_port

INSTRUCTION = """You are annotating news sentences for a study of media coverage. Read the sentence and \
decide which topic it is mainly about. Choose exactly one label from this list: economy, politics, sports, \
science, culture. Economy covers prices, jobs, trade, banks, companies and budgets. Politics covers \
elections, parliaments, parties, governments, laws and diplomacy. Sports covers matches, players, teams, \
tournaments and records. Science covers research, discoveries, medicine, space and technology. Culture \
covers art, music, film, books, festivals and heritage. If a sentence touches several topics, pick the \
one that the sentence is mostly about. Answer with the label only, in lower case, and nothing else.

Sentence: The central bank kept interest rates unchanged for the third month in a row.
Label: economy

Sentence: The striker scored twice as the home team won the cup final on Sunday.
Label: sports

Sentence: Researchers found water ice in a crater near the south pole of the moon.
Label: science

"""

SUBJECTS = ["The parliament", "A local orchestra", "The football club", "Engineers at the university",
            "The finance minister", "A small publisher", "The national team", "Doctors in the capital",
            "The opposition party", "A film festival", "The stock exchange", "Astronomers",
            "The city council", "A famous painter", "The tennis champion", "The trade union"]
EVENTS = ["announced a new plan on Monday", "faced sharp criticism this week", "celebrated a record year",
          "opened an exhibition downtown", "lost an important vote", "published surprising results"]


def texts(n: int, offset: int = 0) -> list[str]:
    return [f"{SUBJECTS[i % len(SUBJECTS)]} {EVENTS[(i // len(SUBJECTS) + i) % len(EVENTS)]}."
            for i in range(offset, offset + n)]


def prompts(instructions: list[str], sentences: list[str]) -> list[str]:
    return [f"{instructions[i % len(instructions)]}Sentence: {s}\nLabel:" for i, s in enumerate(sentences)]


def halves(text: str) -> list[str]:
    paragraphs = text.split("\n\n")
    return ["\n\n".join(paragraphs[:1] + paragraphs[1:2]) + "\n\n", "\n\n".join(paragraphs[:1] + paragraphs[2:])]


def run(model: nl.Model, threads: int, first: list[str], second: list[str], max_tokens: int
        ) -> tuple[list[tuple[str, nl.Stats, str]], tuple[list[str], list[str]]]:
    params = dict(max_tokens=max_tokens, temperature=0)
    with nl.Context(model, n_ctx=512, n_seq_max=8, n_threads=threads, prefix_cache=False) as ctx:
        ctx.generate_parallel(["warm-up"], **params)
        off = ctx.generate_parallel(first, **params)
    with nl.Context(model, n_ctx=512, n_seq_max=8, n_threads=threads) as ctx:
        ctx.generate_parallel(["warm-up"], **params)
        on = ctx.generate_parallel(first, **params)
        warm = ctx.generate_parallel(second, **params)
    with nl.Context(model, n_ctx=512, n_seq_max=8, n_threads=threads, prefix_cache=False) as ctx:
        warm_reference = ctx.generate_parallel(second, **params)
    same = {True: "yes", False: "NO"}
    return [("reuse off", off.stats, "yes"),
            ("reuse on", on.stats, same[on.texts == off.texts]),
            ("reuse on, warm cache (next 48 texts)", warm.stats, same[warm.texts == warm_reference.texts])
            ], (off.texts, warm_reference.texts)


@contextlib.contextmanager
def llama_server(binary: str, model_path: str, threads: int) -> Iterator[str]:
    """llama.cpp's server of the model with 8 slots of 512 tokens, as our contexts have; its API root.
    With --swa-full, as our contexts: without it a sliding-window model (Gemma 3) re-processes
    every prompt whole, its prompt cache unused."""
    port = free_port()
    process = subprocess.Popen([binary, "-m", model_path, "--host", "127.0.0.1", "--port", str(port),
                                "-c", str(8 * 512), "-np", "8", "-t", str(threads), "-tb", str(threads),
                                "--swa-full"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    break
            time.sleep(0.2)
        yield url
    finally:
        process.kill()
        process.wait()


def run_llama_server(binary: str, model: nl.Model, threads: int, first: list[str], second: list[str],
                     ours: tuple[list[str], list[str]], max_tokens: int) -> list[tuple[str, nl.Stats, str]]:
    params = dict(max_tokens=max_tokens, temperature=0)
    with llama_server(binary, model.path, threads) as url, nl.RemoteContext(url, max_concurrency=8) as ctx:
        ctx.generate_parallel(["warm-up"], **params)
        cold = ctx.generate_parallel(first, **params)
        warm = ctx.generate_parallel(second, **params)
    same = [sum(a == b for a, b in zip(result.texts, texts)) for result, texts in zip((cold, warm), ours)]
    return [("llama-server, 8 slots, prompt cache", cold.stats, f"{same[0]}/48 same"),
            ("llama-server, warm (next 48 texts)", warm.stats, f"{same[1]}/48 same")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--llama-server", help="llama.cpp's llama-server binary, to compare with")
    args = parser.parse_args()
    with nl.Model() as model:
        workloads = [("one instruction", [INSTRUCTION]), ("two instructions, 24 prompts each", halves(INSTRUCTION))]
        print(f"48 prompts, greedy, n_seq_max=8, {args.threads} threads; "
              f"instruction {len(model.tokenize(INSTRUCTION))} tokens, halves "
              f"{[len(model.tokenize(h)) for h in halves(INSTRUCTION)]}\n")
        print(f"| {'workload':<46} | {'run':<36} | {'prompt tok':>10} | {'cached':>6} | {'new tok':>7} "
              f"| {'prefill s':>9} | {'total s':>7} | {'vs off':>6} | identical |")
        print(f"|{'-' * 48}|{'-' * 38}|{'-' * 12}:|{'-' * 7}:|{'-' * 8}:|{'-' * 10}:|{'-' * 8}:|{'-' * 7}:|-----------|")
        for max_tokens in (4, 1):
            for name, instructions in workloads:
                first, second = prompts(instructions, texts(48)), prompts(instructions, texts(48, 48))
                rows, ours = run(model, args.threads, first, second, max_tokens)
                if args.llama_server:
                    rows += run_llama_server(args.llama_server, model, args.threads, first, second, ours, max_tokens)
                baseline = rows[0][1].total_seconds
                name = f"{name}, {max_tokens} new token{'s' * (max_tokens > 1)}"
                for label, stats, identical in rows:
                    print(f"| {name:<46} | {label:<36} | {stats.prompt_tokens:>10} | {stats.cached_prompt_tokens:>6} "
                          f"| {stats.generated_tokens:>7} | {stats.prefill_seconds:>9.2f} | {stats.total_seconds:>7.2f} "
                          f"| {baseline / stats.total_seconds:>5.2f}x | {identical:<9} |")


if __name__ == "__main__":
    main()
