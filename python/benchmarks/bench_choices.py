"""Labels with probabilities against free generation, in one run.

32 annotation prompts (the instruction of bench_prefix.py plus a sentence each), 32 at
once, default model: (a) 4 free greedy tokens each, (b) `choices` with three labels.
Each on a fresh context, so both decode the instruction once and restore it.

Usage: python bench_choices.py [--threads N]
"""

from __future__ import annotations

import argparse
import os

import newrllama4 as nl
from bench_prefix import INSTRUCTION, prompts, texts

LABELS = ["economy", "politics", "culture"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    batch = prompts([INSTRUCTION], texts(32))
    runs = [("(a) 4 free tokens", dict(max_tokens=4)), (f"(b) choices={LABELS}", dict(choices=LABELS))]
    print(f"32 prompts, 32 at once, greedy, {args.threads} threads\n")
    print(f"| {'run':<48} | prompt tok | cached | decode calls | seconds | vs (a) |")
    print(f"|{'-' * 50}|-----------:|-------:|-------------:|--------:|-------:|")
    with nl.Model() as model:
        baseline = None
        for name, params in runs:
            with nl.Context(model, n_ctx=512, n_seq_max=32, n_threads=args.threads) as ctx:
                ctx.generate_parallel(["warm-up"], max_tokens=2, temperature=0)
                stats = ctx.generate_parallel(batch, temperature=0, **params).stats
            baseline = baseline or stats.total_seconds
            print(f"| {name:<48} | {stats.prompt_tokens:>10} | {stats.cached_prompt_tokens:>6} "
                  f"| {stats.llama_decode_calls:>12} | {stats.total_seconds:>7.2f} "
                  f"| {stats.total_seconds / baseline:>5.2f}x |")


if __name__ == "__main__":
    main()
