"""Prefill of unique long prompts, and decode, against llama.cpp's defaults, in one run.

24 unique prompts of 265-330 tokens (default model, 2 threads):
  (a) llama-cpp-python's Llama with its defaults (llama.cpp's kernels: F16 cache, weight
      repacking, ggml's tiled matmul), one prompt after another, in a process of its own
  (b) generate_parallel, batch-invariant (the default), n_seq_max 8, 1 new token
  (b0) the same with ggml's tiled matmul off, as the engine ran before it forced it on
  (c) generate_parallel, batch_invariant=False (the fast lane), the same, in a process
      whose ggml forces the tiled matmul for identity: the context runs in a worker process
      with ggml's own settings (worker.py); its decode below at n_seq_max 1 runs on the
      repacked weights
  (c0) the fast lane in a process that keeps ggml's own tiled-matmul switch (the user set
      GGML_CPU_TILED_MM_FORCE=0 before importing newrllama4; identity is then not
      guaranteed), where it runs in that process
Then decode: 4 of the prompts, 64 tokens each, one sequence at a time (Llama.eval of one
token at a time; generate_parallel at n_seq_max 1, greedy, both lanes). Prefill and
decode rates count the time of Llama.eval calls (one llama_decode each, and no copy of
logits) and, for ours, the time inside llama_decode (the call's stats). ggml reads its
settings once per process, so every run is a fresh child process; the runs take turns for `--rounds` rounds and each shows its fastest; ratios are to (a)
in the same run, since the machine is shared and absolute numbers drift.

Usage: python bench_prefill.py [--threads 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys

SENTENCES = [
    "The committee met on Tuesday to discuss the budget for the coming year.",
    "Rain fell over the hills for three days, and the river rose above its banks.",
    "Her grandfather kept bees behind the house and sold honey at the market.",
    "The new bridge was built from steel and concrete by a team of two hundred workers.",
    "Scientists measured the temperature of the lake every morning for a decade.",
    "In the old town, narrow streets wind between houses painted yellow and blue.",
    "The orchestra rehearsed the symphony until the conductor was satisfied.",
    "A small company in the north makes bicycles by hand from recycled aluminium.",
    "The library opens at nine and closes at six, except on public holidays.",
    "Farmers in the valley grow wheat, barley and potatoes in rotation.",
    "The museum's new wing holds paintings from the seventeenth century.",
    "Every winter the lake freezes, and children skate on it after school.",
]
TOPICS = [
    "the ocean", "a mountain village", "the history of bread", "how bridges are built", "a long train ride",
    "the first computers", "honey bees", "a winter morning", "the printing press", "volcanoes", "jazz music",
    "a busy market", "the moon landing", "coral reefs", "an old library", "desert plants", "the water cycle",
    "a chess match", "ancient Rome", "the northern lights", "a small bakery", "rain forests", "the telescope",
    "a football final",
]
N_DECODE_PROMPTS, DECODE_TOKENS = 4, 64


def prompt_tokens(tokenize) -> list[list[int]]:
    """24 unique prompts of 265-330 tokens: a topic line, then sentences in a shuffled order."""
    rng = random.Random(19)
    prompts = []
    for topic in TOPICS:
        sentences = SENTENCES * 4
        rng.shuffle(sentences)
        tokens = tokenize(f"Notes on {topic}.\n\n" + " ".join(sentences))
        prompts.append(tokens[: rng.randint(265, 330)])
    return prompts


def run_llama(path: str, threads: int) -> dict:
    import time

    import llama_cpp

    llm = llama_cpp.Llama(path, n_ctx=1024, n_threads=threads, n_threads_batch=threads, verbose=False)
    prompts = prompt_tokens(lambda text: llm.tokenize(text.encode()))

    def timed_eval(tokens: list[int]) -> float:
        started = time.perf_counter()
        llm.eval(tokens)  # one llama_decode per n_batch (512) tokens
        return time.perf_counter() - started

    llm.eval(prompts[-1][:64])  # warm-up
    prefill_seconds = 0.0
    for tokens in prompts:
        llm.reset()
        prefill_seconds += timed_eval(tokens)
    decode_seconds = 0.0
    for tokens in prompts[:N_DECODE_PROMPTS]:
        llm.reset()
        llm.eval(tokens)
        # one token per llama_decode, as generation feeds them; which tokens does not change the cost
        decode_seconds += sum(timed_eval([token]) for token in tokens[:DECODE_TOKENS])
    return {"prefill_tokens": sum(map(len, prompts)), "prefill_seconds": prefill_seconds,
            "decode_tokens": N_DECODE_PROMPTS * DECODE_TOKENS, "decode_seconds": decode_seconds}


def run_ours(path: str, threads: int, batch_invariant: bool) -> dict:
    import newrllama4 as nl

    with nl.Model(path) as model:
        prompts = prompt_tokens(model.tokenize)
        with nl.Context(model, n_ctx=512, n_seq_max=8, n_threads=threads, batch_invariant=batch_invariant) as ctx:
            ctx.generate_parallel([p[:64] for p in prompts[:8]], max_tokens=1)  # warm-up
            ctx.clear_cache()
            prefill = ctx.generate_parallel(prompts, max_tokens=1, temperature=0).stats
        with nl.Context(model, n_ctx=512, n_seq_max=1, n_threads=threads, batch_invariant=batch_invariant) as ctx:
            decode = ctx.generate_parallel(prompts[:N_DECODE_PROMPTS], max_tokens=DECODE_TOKENS, temperature=0,
                                           penalty_repeat=1.0).stats
    return {"prefill_tokens": prefill.prompt_tokens, "prefill_seconds": prefill.prefill_seconds,
            "decode_tokens": decode.generated_tokens, "decode_seconds": decode.decode_seconds,
            "kv_cache": prefill.kv_cache, "identity_guaranteed": prefill.identity_guaranteed}


RUNS = {
    "(a) llama-cpp-python Llama, llama.cpp's defaults": "llama",
    "(b) generate_parallel, batch-invariant": "invariant",
    "(b0) the same, tiled matmul off (the engine before)": "invariant-untiled",
    "(c) generate_parallel, batch_invariant=False (in a worker)": "fast",
    "(c0) the same in a process with ggml's own switch": "fast-native",
}
# settings a child runs with beside the engine's own (which a setting in the environment overrides)
CHILD_SETTINGS = {"invariant-untiled": {"GGML_CPU_TILED_MM": "0"}, "fast-native": {"GGML_CPU_TILED_MM_FORCE": "0"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=sorted(RUNS.values()), help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # the Llama child never imports newrllama4, which would set ggml up its own way
        result = (run_llama(args.path, args.threads) if args.child == "llama"
                  else run_ours(args.path, args.threads, batch_invariant=not args.child.startswith("fast")))
        print(json.dumps(result))
        return
    import newrllama4

    path = newrllama4.default_model_path()
    best: dict[str, dict] = {}
    for _ in range(args.rounds):
        for name, child in RUNS.items():
            # Llama gets a process without ggml settings of ours: llama.cpp's defaults
            env = {k: v for k, v in os.environ.items() if not k.startswith("GGML_")}
            env.update(CHILD_SETTINGS.get(child, {}))
            out = subprocess.run([sys.executable, __file__, "--child", child, "--threads", str(args.threads),
                                  "--path", path], env=env, capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            for phase in ("prefill", "decode"):
                rate = result[f"{phase}_tokens"] / result[f"{phase}_seconds"]
                if rate > best.get(name, {}).get(phase, 0):
                    best.setdefault(name, {})[phase] = rate
            best[name]["kv_cache"] = result.get("kv_cache", "f16/f16")
            best[name]["identity"] = result.get("identity_guaranteed", False)
    print(f"24 unique prompts of 265-330 tokens, default model, {args.threads} threads, "
          f"best of {args.rounds} rounds\n")
    print("| run | KV cache | identity | prefill tok/s | vs (a) | decode tok/s (1 sequence) | vs (a) |")
    print("|---|---|---|---:|---:|---:|---:|")
    reference = best[next(iter(RUNS))]
    for name, rates in best.items():
        print(f"| {name} | {rates['kv_cache']} | {'yes' if rates['identity'] else 'no'} | "
              f"{rates['prefill']:.0f} | {rates['prefill'] / reference['prefill']:.2f}x | "
              f"{rates['decode']:.1f} | {rates['decode'] / reference['decode']:.2f}x |")


if __name__ == "__main__":
    main()
