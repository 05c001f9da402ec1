"""The sampler's top-k kernel (_top_k.c) against numpy's argpartition, on the same rows, in
GB/s against the memory bandwidth measured in the same run.

The rows are one step's logits at the R defaults' top_k = 40: 32 rows of Gemma 3 270M's
262,144 logits (32 MiB), either drawn from a normal distribution (`--logits normal`, no
model needed) or the logits Gemma gave bench_parallel's 32 essay prompts at a late step
of 16 sampled tokens (`--logits gemma`; how often a block of them holds a logit above
the running threshold is the kernel's one data-dependent cost). They are read by:
  - the kernel on one thread, and on `--threads` threads (rows shared among them);
  - numpy's argpartition of each row (the top k unordered, in one call), one thread;
  - the reference: numpy's sum of the array (one read, one thread), and the same sum with
    the rows shared among `--threads` threads, what the machine's memory delivers to them.
GB/s is the array's bytes over the time of one call. Every method runs once a round and
the rounds take turns, so that the machine's drift falls on all of them; each shows its
fastest round.

Usage: python bench_top_k.py [--logits normal|gemma] [--rows 32] [--vocab 262144] [--k 40]
                             [--threads N] [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from newrllama4 import _top_k


def normal_logits(rows: int, vocab: int) -> np.ndarray:
    # logits of a language model spread over some ten units; the scale barely matters
    return (np.random.default_rng(0).standard_normal((rows, vocab)) * 3).astype(np.float32)


def gemma_logits(rows: int, max_tokens: int = 16) -> np.ndarray:
    """The logits the default model gave `rows` essay prompts at the last step of `max_tokens`
    that sampled all of them, as the sampler received them (after the repetition penalty)."""
    import newrllama4 as nl
    from bench_parallel import R_DEFAULTS, prompts
    from newrllama4 import sampling

    seen: list[np.ndarray] = []
    real = sampling.BatchSampler._ranked

    def spy(self: sampling.BatchSampler, logits: np.ndarray):
        seen.append(logits.copy())
        return real(self, logits)

    sampling.BatchSampler._ranked = spy
    try:
        with nl.Model() as model, nl.Context(model, n_ctx=512, n_seq_max=rows) as ctx:
            ctx.generate_parallel(prompts(rows), max_tokens=max_tokens, **R_DEFAULTS)
    finally:
        sampling.BatchSampler._ranked = real
    return next(step for step in reversed(seen) if len(step) == rows)


def threaded_sum(pool: ThreadPoolExecutor, logits: np.ndarray, threads: int) -> float:
    # numpy lets go of the GIL while it reduces, so the shares overlap
    return sum(pool.map(np.sum, np.array_split(logits, threads)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logits", choices=("normal", "gemma"), default="normal")
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=262_144, help="with --logits normal")
    parser.add_argument("--k", type=int, default=40)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    logits = gemma_logits(args.rows) if args.logits == "gemma" else normal_logits(args.rows, args.vocab)
    rows, vocab = logits.shape
    ids = np.empty((rows, args.k), dtype=np.int64)
    values = np.empty((rows, args.k), dtype=np.float32)

    def kernel(threads: int) -> Callable[[], object]:
        return lambda: _top_k.top_k(logits, rows, vocab, args.k, ids, values, threads)

    with ThreadPoolExecutor(args.threads) as pool:
        methods = {
            "top-k kernel, 1 thread": kernel(1),
            f"top-k kernel, {args.threads} threads": kernel(args.threads),
            "numpy argpartition, 1 thread": lambda: np.argpartition(logits, vocab - args.k, axis=1),
            "reference: numpy sum, 1 thread": logits.sum,
            f"reference: numpy sum, {args.threads} threads": lambda: threaded_sum(pool, logits, args.threads),
        }
        fastest = dict.fromkeys(methods, float("inf"))
        for _ in range(args.rounds):
            for name, method in methods.items():
                started = time.perf_counter()
                method()
                fastest[name] = min(fastest[name], time.perf_counter() - started)

    print(f"{args.logits} logits, {rows} rows x {vocab} ({logits.nbytes / 2**20:.0f} MiB), k = {args.k}, "
          f"fastest of {args.rounds} rounds\n")
    one_thread_sum = fastest["reference: numpy sum, 1 thread"]
    print(f"| {'method':<34} | ms a call |  GB/s | vs sum, 1 thread |")
    print(f"|{'-' * 36}|----------:|------:|-----------------:|")
    for name, seconds in fastest.items():
        print(f"| {name:<34} | {seconds * 1e3:>9.2f} | {logits.nbytes / seconds / 1e9:>5.1f} | "
              f"{one_thread_sum / seconds:>15.2f}x |")


if __name__ == "__main__":
    main()
