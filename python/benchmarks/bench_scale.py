"""Study scale (issue 34): does the engine's cost per row stay flat as rows and cached snapshots grow?

Two parts, picked by the first argument:

`micro`: the prefix cache alone, pure Python, no model. A cache holding N snapshots of
synthetic prompts (one 40-token instruction, ending inside a block, then a distinct text
of 24 to 72 tokens from a 256-token vocabulary, as a byte-level model tokenizes) and the
time of one `lookup` (what a prompt restores; what the plan's `_cached_enough` asks) and
one `add` (its `covers` check, then eviction of the oldest within the byte budget, so N
stays put) of new prompts of the same kind, at each N.

`engine`: `generate_parallel` with labels (yes/no), `n_seq_max=16`, over N prompts of one
instruction and a text each: ms per row, the engine's overhead share of the wall time
(Stats.overhead_seconds: its Python work), snapshots taken, bytes copied to and from
snapshots per row, and the process's peak RSS. Texts are `distinct` (one sentence each)
or `near-duplicate` (pairs sharing an opening line, as retweets or wire stories do).
The tiny random-weight model (newrllama4.testing, byte-level vocabulary) by default, or
`--model gemma3-270m`; `--prefix-cache-mb` sets the cache's budget. One size per process
when peak RSS matters (`--sizes 1000`), since peak RSS only grows.

Usage:
  python bench_scale.py micro [--sizes 1000 10000 100000] [--ops 200]
  python bench_scale.py engine [--model tiny|gemma3-270m] [--sizes 1000 10000] \
      [--texts distinct|near-duplicate] [--prefix-cache-mb 512] [--threads N]
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time

from newrllama4.prefix_cache import BLOCK, PrefixCache

# -- micro -------------------------------------------------------------------------------


def synthetic_prompt(rng: random.Random, instruction: list[int]) -> list[int]:
    return instruction + [rng.randrange(256) for _ in range(rng.randint(24, 72))]


def own_snapshot(tokens: list[int]) -> list[int]:
    """What the plan snapshots of a prompt that shares nothing: its whole blocks short of the last token."""
    return tokens[:(len(tokens) - 1) // BLOCK * BLOCK]


def micro(sizes: list[int], ops: int, seed: int = 0) -> None:
    print(f"{'snapshots':>10} {'fill s':>8} {'lookup us':>10} {'add us':>9} {'restored':>9}")
    for n in sizes:
        rng = random.Random(seed)
        instruction = [rng.randrange(256) for _ in range(40)]
        cache = PrefixCache(max_bytes=n * 100, n_swa=0)
        started = time.perf_counter()
        for _ in range(n):
            cache.add(own_snapshot(synthetic_prompt(rng, instruction)), bytes(100))
        fill = time.perf_counter() - started
        assert len(cache) == n, len(cache)
        prompts = [synthetic_prompt(rng, instruction) for _ in range(ops)]
        started = time.perf_counter()
        restored = sum(cache.lookup(p, len(p) - 1)[1] for p in prompts)
        lookup = (time.perf_counter() - started) / ops
        started = time.perf_counter()
        for p in prompts:
            cache.add(own_snapshot(p), bytes(100))
        add = (time.perf_counter() - started) / ops
        assert len(cache) == n
        print(f"{n:>10} {fill:>8.2f} {lookup * 1e6:>10.1f} {add * 1e6:>9.1f} {restored / ops:>9.1f}", flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="part", required=True)
    m = sub.add_parser("micro")
    m.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    m.add_argument("--ops", type=int, default=200)
    args = parser.parse_args(argv)
    if args.part == "micro":
        micro(args.sizes, args.ops)


if __name__ == "__main__":
    main(sys.argv[1:])
