"""Shared-prefix reuse on the annotation workload, in one run.

48 prompts = one long instruction with few-shot examples (~250 tokens) + a one-sentence
text each, 4 new tokens, greedy, n_seq_max=8, default model. Then the same with two
instructions of half the length, each shared by 24 prompts (interleaved). For each:
reuse off, reuse on (a fresh context), and reuse on with a warm cache (a second call on
the same context, the next 48 texts). Outputs with reuse are checked against reuse off.

Usage: python bench_prefix.py [--threads N]
"""

from __future__ import annotations

import argparse
import os

import newrllama4 as nl

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


def run(model: nl.Model, threads: int, first: list[str], second: list[str]) -> list[tuple[str, nl.Stats, bool]]:
    params = dict(max_tokens=4, temperature=0)
    with nl.Context(model, n_ctx=512, n_seq_max=8, n_threads=threads, prefix_cache=False) as ctx:
        ctx.generate_parallel(["warm-up"], **params)
        off = ctx.generate_parallel(first, **params)
    with nl.Context(model, n_ctx=512, n_seq_max=8, n_threads=threads) as ctx:
        ctx.generate_parallel(["warm-up"], **params)
        on = ctx.generate_parallel(first, **params)
        warm = ctx.generate_parallel(second, **params)
    with nl.Context(model, n_ctx=512, n_seq_max=8, n_threads=threads, prefix_cache=False) as ctx:
        warm_reference = ctx.generate_parallel(second, **params)
    return [("reuse off", off.stats, True),
            ("reuse on", on.stats, on.texts == off.texts),
            ("reuse on, warm cache (next 48 texts)", warm.stats, warm.texts == warm_reference.texts)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    with nl.Model() as model:
        workloads = [("one instruction", [INSTRUCTION]), ("two instructions, 24 prompts each", halves(INSTRUCTION))]
        print(f"48 prompts, 4 new tokens, greedy, n_seq_max=8, {args.threads} threads; "
              f"instruction {len(model.tokenize(INSTRUCTION))} tokens, halves "
              f"{[len(model.tokenize(h)) for h in halves(INSTRUCTION)]}\n")
        print(f"| {'workload':<34} | {'run':<36} | {'prompt tok':>10} | {'cached':>6} | {'prefill s':>9} "
              f"| {'total s':>7} | {'vs off':>6} | identical |")
        print(f"|{'-' * 36}|{'-' * 38}|{'-' * 12}:|{'-' * 7}:|{'-' * 10}:|{'-' * 8}:|{'-' * 7}:|-----------|")
        for name, instructions in workloads:
            rows = run(model, args.threads, prompts(instructions, texts(48)), prompts(instructions, texts(48, 48)))
            baseline = rows[0][1].total_seconds
            for label, stats, identical in rows:
                print(f"| {name:<34} | {label:<36} | {stats.prompt_tokens:>10} | {stats.cached_prompt_tokens:>6} "
                      f"| {stats.prefill_seconds:>9.2f} | {stats.total_seconds:>7.2f} "
                      f"| {baseline / stats.total_seconds:>5.2f}x | {'yes' if identical else 'NO':<9} |")


if __name__ == "__main__":
    main()
