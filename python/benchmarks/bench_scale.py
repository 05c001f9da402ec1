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
snapshots per row, the process's peak RSS, and the memory the prompts given and the
answers returned hold. CPU ms per row (every thread of the process) is the figure to
compare on a shared machine, where other work inflates wall time. Texts are `distinct`
(one sentence each) or `near-duplicate` (pairs sharing an opening line, as retweets or
wire stories do). The tiny random-weight model (newrllama4.testing, byte-level
vocabulary) by default, or `--model gemma3-270m`; `--prefix-cache-mb` sets the cache's
budget. The sizes run in one process in the order given; peak RSS only grows, so a
size's figure is its own only when it is the largest so far.

Usage:
  python bench_scale.py micro [--sizes 1000 10000 100000] [--ops 200]
  python bench_scale.py engine [--model tiny|gemma3-270m] [--sizes 1000 10000] \
      [--texts distinct|near-duplicate] [--prefix-cache-mb 512] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import time
from math import nan

from newrllama4.prefix_cache import BLOCK, PrefixCache

# -- micro -------------------------------------------------------------------------------


def synthetic_prompt(rng: random.Random, instruction: list[int]) -> list[int]:
    return instruction + [rng.randrange(256) for _ in range(rng.randint(24, 72))]


def own_snapshot(tokens: list[int]) -> list[int]:
    """What the plan snapshots of a prompt that shares nothing: its whole blocks short of the last token."""
    return tokens[:(len(tokens) - 1) // BLOCK * BLOCK]


def plan_seconds(cache: PrefixCache, prompts: list[list[int]]) -> float:
    """How long PrefixPlan takes to plan a call of these prompts (no model: no KV memory to name)."""
    from unittest import mock

    import llama_cpp

    from newrllama4.attention import tiled_end
    from newrllama4.prefix_plan import PrefixPlan
    from newrllama4.sequence import Sequence

    sequences = [Sequence(i, p, ()) for i, p in enumerate(prompts)]
    for s in sequences:
        s.n_tiled = tiled_end(s.n_prompt)
    with mock.patch.object(llama_cpp, "llama_get_memory", lambda ctx: None):
        started = time.perf_counter()
        PrefixPlan(cache, None, sequences)
        return time.perf_counter() - started


def micro(sizes: list[int], ops: int, seed: int = 0) -> None:
    print("per operation, with this many snapshots in the cache; the plan per prompt of a call of as many prompts")
    print(f"{'snapshots':>10} {'fill s':>8} {'lookup us':>10} {'add us':>9} {'restored':>9} {'plan us':>8}")
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
        plan = plan_seconds(cache, [synthetic_prompt(rng, instruction) for _ in range(n)]) / n
        print(f"{n:>10} {fill:>8.2f} {lookup * 1e6:>10.1f} {add * 1e6:>9.1f} {restored / ops:>9.1f} "
              f"{plan * 1e6:>8.1f}", flush=True)


# -- engine ------------------------------------------------------------------------------

INSTRUCTION = ("Read the sentence below, taken from a novel, and decide whether the narrator or a "
               "character expresses a positive feeling in it. Answer yes or no.\n\n")
WORDS = ("she he they it was had been would could not never always very much more little great good "
         "young old house family sister brother mother father friend letter morning evening time day "
         "walk room garden manner heart mind feeling spirits pleasure happiness regard opinion "
         "acquaintance marriage fortune ball dance visit call dinner party carriage town country "
         "of the and to in with for at by from on as but so that which who whom whose".split())


def sentence(rng: random.Random, low: int, high: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(words).capitalize() + "."


def texts(n: int, kind: str, seed: int = 0) -> list[str]:
    """`distinct`: a sentence each; `near-duplicate`: pairs that share an opening line."""
    rng = random.Random(seed)
    if kind == "distinct":
        return [sentence(rng, 8, 30) for _ in range(n)]
    openings = [sentence(rng, 10, 16) for _ in range((n + 1) // 2)]
    return [f"{openings[i // 2]} {sentence(rng, 4, 16)}" for i in range(n)]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


def deep_mb(value: object) -> float:
    """The memory a value holds, following its containers and objects (each object once):
    the prompts given and the answers returned, which the issue's memory bound leaves out."""
    seen: set[int] = set()
    pending, total = [value], 0
    while pending:
        v = pending.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        total += sys.getsizeof(v)
        if isinstance(v, dict):
            pending.extend(v.keys())
            pending.extend(v.values())
        elif isinstance(v, (list, tuple, set, frozenset)):
            pending.extend(v)
        elif hasattr(v, "__dict__"):
            pending.append(vars(v))
    return total / 2**20


def engine(model_name: str, sizes: list[int], kind: str, prefix_cache_mb: float, threads: int,
           n_seq_max: int) -> None:
    import inspect
    import tempfile

    import newrllama4 as nl

    with tempfile.TemporaryDirectory() as tmp:
        if model_name == "tiny":
            from newrllama4.testing import write_tiny_model
            path = write_tiny_model(f"{tmp}/tiny.gguf")
        else:
            path = model_name
        with nl.Model(path) as model:
            print(f"{model_name}, {kind} texts, n_seq_max={n_seq_max}, prefix_cache_mb={prefix_cache_mb:g}, "
                  f"{threads} threads; labels yes/no")
            print(f"{'rows':>7} {'ms/row':>7} {'CPU ms/row':>10} {'overhead':>9} {'snapshots':>9} {'in cache':>8} "
                  f"{'KB copied/row':>13} {'restored':>8} {'peak RSS MB':>11} {'prompts MB':>10} {'answers MB':>10}",
                  flush=True)
            for n in sizes:
                prompts = [f"{INSTRUCTION}Sentence: {t}\nAnswer:" for t in texts(n, kind)]
                n_ctx = max(len(model.tokenize(p)) for p in prompts) + 16
                with nl.Context(model, n_ctx=n_ctx, n_seq_max=n_seq_max, n_threads=threads,
                                prefix_cache_mb=prefix_cache_mb) as ctx:
                    # the labels argument, as this version of the engine names it
                    params = inspect.signature(ctx.generate_parallel).parameters
                    labels = {"labels" if "labels" in params else "choices": ["yes", "no"]}
                    ctx.generate_parallel(["warm-up"], max_tokens=1)
                    cpu_started = time.process_time()
                    result = ctx.generate_parallel(prompts, **labels)
                    cpu = time.process_time() - cpu_started
                    stats = result.stats
                print(f"{n:>7} {stats.total_seconds / n * 1e3:>7.1f} {cpu / n * 1e3:>10.1f} "
                      f"{stats.overhead_seconds / stats.total_seconds:>9.1%} {stats.prefix_snapshots:>9} "
                      # (NaN from an engine older than these counters, for a comparison)
                      f"{getattr(stats, 'prefix_cache_snapshots', nan):>8} "
                      f"{getattr(stats, 'prefix_copied_bytes', nan) / n / 1024:>13.1f} "
                      f"{stats.cached_prompt_tokens / stats.prompt_tokens:>8.0%} {peak_rss_mb():>11.0f} "
                      f"{deep_mb(prompts):>10.1f} {deep_mb(list(result)):>10.1f}",
                      flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="part", required=True)
    m = sub.add_parser("micro")
    m.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    m.add_argument("--ops", type=int, default=200)
    e = sub.add_parser("engine")
    e.add_argument("--model", default="tiny", help="tiny (the random-weight test model) or a model name or path")
    e.add_argument("--sizes", type=int, nargs="+", default=None,
                   help="rows: 1000 10000 100000 for tiny, 500 5000 for a real model by default")
    e.add_argument("--texts", choices=["distinct", "near-duplicate"], default="distinct")
    e.add_argument("--prefix-cache-mb", type=float, default=512)
    e.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    e.add_argument("--n-seq-max", type=int, default=16)
    args = parser.parse_args(argv)
    if args.part == "micro":
        micro(args.sizes, args.ops)
    else:
        sizes = args.sizes or ([1000, 10_000, 100_000] if args.model == "tiny" else [500, 5000])
        engine(args.model, sizes, args.texts, args.prefix_cache_mb, args.threads, args.n_seq_max)


if __name__ == "__main__":
    main(sys.argv[1:])
