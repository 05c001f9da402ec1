"""Bit-compare a prompt's numbers across chunkings and batch compositions, per kernel setup.

For each setup (KV cache types, weight repacking, ggml's tiled matmul: off, on for 8+
rows as llama.cpp ships it, or forced for every row count) a child process decodes one
long prompt (default model) in one piece, in chunks of 128, 64, 63, 16 and 7 tokens, cut
irregularly, in chunks of 64 or more rows each (128, 128, 144), in chunks of 16 each
followed by throwaway rows to 40 (the engine's padding of one-row chunks, attention.py;
compared with the chunks of 16), and next to three other prompts that bring the same
chunk lengths; then decodes 8 greedy tokens alone, alone with
a throwaway companion row (the engine's discipline for a lone token, attention.py), and
next to three other sequences (after the prompt in chunks of 64 or more rows beside
them). "same" means the logits of the prompt's tokens at every 16th
position and of its last (each depends on all the KV cells before it) are bit-identical
to the one-piece decode (the decode column: every step's logits against decoding
alone); "differs" otherwise. ggml reads its switches once per process, hence a child
per setup.

Usage: python bitcompare.py [--threads N] [--prompt-tokens N] [--setups NAME ...]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys

SETUPS = {
    # name: (type_k, type_v, repack, GGML_CPU_TILED_MM, GGML_CPU_TILED_MM_FORCE)
    "Q8_0, no repack, tiled off (the engine before issue 19)": ("q8_0", "q8_0", False, "0", "0"),
    "Q8_0, no repack, tiled forced": ("q8_0", "q8_0", False, "1", "1"),
    "F16 K + BF16 V, no repack, tiled forced": ("f16", "bf16", False, "1", "1"),
    "F16, no repack, tiled forced (the engine now)": ("f16", "f16", False, "1", "1"),
    "F16, repack, tiled 8+ (llama.cpp's defaults)": ("f16", "f16", True, "1", "0"),
}
CHUNKINGS = {"128": [128], "64": [64], "63": [63], "16": [16], "7": [7], "irregular": [5, 100, 1, 37, 50, 9, 70],
             "128, 128, 144 (all 64+)": [128, 128, 144]}

TEXT = (
    "The history of the river valley begins with the farmers who settled its banks thousands of years "
    "ago. They grew barley and wheat, kept goats, and traded pottery with the people of the hills. Over "
    "the centuries the villages grew into towns, and the towns into a small kingdom whose kings built "
    "walls, temples and a great library. Scholars came from far away to read its books on astronomy, "
    "medicine and law. When the kingdom fell, the library burned, but some of its books survived in "
    "monasteries, where monks copied them by hand for a thousand years. Today the valley is known for "
    "its vineyards, its festivals and its museums, which hold the few pages that remain of the great "
    "library, written in a script that scholars learned to read only in the last century. "
)


# against the same chunks without throwaway rows, not against one piece
PADDED = "16, each padded to 40 by throwaway rows, against 16"


def chunks(n: int, pattern: list[int]) -> list[int]:
    sizes, k = [], 0
    while sum(sizes) < n:
        sizes.append(min(pattern[k % len(pattern)], n - sum(sizes)))
        k += 1
    return sizes


def child(setup: str, threads: int, n_prompt: int) -> dict:
    import llama_cpp as llama
    import numpy as np

    import newrllama4 as nl
    from newrllama4._llama import GGML_TYPE_BF16, TokenBatch, set_fields

    type_k, type_v, repack, _, _ = SETUPS[setup]
    types = {"q8_0": llama.GGML_TYPE_Q8_0, "f16": llama.GGML_TYPE_F16, "bf16": GGML_TYPE_BF16}
    model = nl.Model()
    if repack:  # Model never repacks: reload the same file with llama.cpp's default
        params = llama.llama_model_default_params()
        handle = llama.llama_model_load_from_file(model.path.encode(), params)
    else:
        handle = model.handle()
    tokens = model.tokenize(TEXT * 8)[:n_prompt]
    others = [model.tokenize(TEXT[k * 40:] * 8)[:n_prompt] for k in range(1, 4)]
    n_vocab = model.n_vocab

    def context(n_seq: int):
        params = set_fields(
            llama.llama_context_default_params(), n_ctx=1024 * n_seq, n_batch=512 * n_seq, n_ubatch=512 * n_seq,
            n_seq_max=n_seq, n_threads=threads, n_threads_batch=threads, kv_unified=False, swa_full=True,
            flash_attn_type=llama.LLAMA_FLASH_ATTN_TYPE_ENABLED, type_k=types[type_k], type_v=types[type_v],
            no_perf=True,
        )
        ctx = llama.llama_init_from_model(handle, params)
        assert ctx, "no context"
        return ctx, TokenBatch(512 * n_seq)

    def prefill(ctx, batch, prompts, sizes, padded_to=0):
        """Decode prompts[0..] together, chunk by chunk; the logits of prompt 0's tokens at
        every 16th position and its last (each depends on all the KV cells before it).
        With `padded_to` (one prompt), each chunk is followed by throwaway rows up to that
        many, removed after the call, as the engine pads one-row chunks."""
        start, rows = 0, []
        for size in sizes:
            batch.clear()
            for seq, prompt in enumerate(prompts):
                batch.add(prompt[start:start + size], start, seq, start + size == len(prompt))
            if padded_to > size:
                batch.add([prompts[0][start]] * (padded_to - size), start + size, 0, False)
            wanted = [i for i in range(size) if (start + i) % 16 == 0]
            batch._logits[wanted] = 1  # prompt 0's tokens come first in the batch
            assert batch.decode(ctx) == 0
            if padded_to > size:
                llama.llama_memory_seq_rm(llama.llama_get_memory(ctx), 0, start + size, -1)
            rows += [np.ctypeslib.as_array(llama.llama_get_logits_ith(ctx, i), shape=(n_vocab,)).copy()
                     for i in wanted]
            start += size
        rows.append(np.ctypeslib.as_array(llama.llama_get_logits_ith(ctx, sizes[-1] - 1), shape=(n_vocab,)).copy())
        return np.stack(rows)

    def decode(ctx, batch, prompts, n_steps, companion=False):
        """Greedy steps of every sequence together; the logits of sequence 0 at each step.
        With `companion`, sequence 0's token brings a throwaway row at the next position."""
        rows = []
        nexts = [prompt[-1] for prompt in prompts]  # feed each prompt's last token again: a fixed input
        for step in range(n_steps):
            batch.clear()
            for seq, prompt in enumerate(prompts):
                batch.add([nexts[seq]], len(prompt) + step, seq, True)
            if companion:
                batch.add([nexts[0]], len(prompts[0]) + step + 1, 0, False)
            assert batch.decode(ctx) == 0
            if companion:
                llama.llama_memory_seq_rm(llama.llama_get_memory(ctx), 0, len(prompts[0]) + step + 1, -1)
            logits = np.ctypeslib.as_array(llama.llama_get_logits(ctx), shape=(len(prompts), n_vocab))
            rows.append(logits[0].copy())
            nexts = [int(np.argmax(logits[s])) for s in range(len(prompts))]
        return rows

    memory_clear = lambda ctx: llama.llama_memory_clear(llama.llama_get_memory(ctx), True)
    solo_ctx, solo_batch = context(1)
    reference = prefill(solo_ctx, solo_batch, [tokens], [len(tokens)])
    same = lambda got: "same" if np.array_equal(got, reference) else "differs"
    solo_steps = decode(solo_ctx, solo_batch, [tokens], 8)
    llama.llama_memory_seq_rm(llama.llama_get_memory(solo_ctx), 0, len(tokens), -1)
    companion_steps = decode(solo_ctx, solo_batch, [tokens], 8, companion=True)
    result, by_chunking = {}, {}
    for name, pattern in CHUNKINGS.items():
        memory_clear(solo_ctx)
        by_chunking[name] = prefill(solo_ctx, solo_batch, [tokens], chunks(len(tokens), pattern))
        result[name] = same(by_chunking[name])
    memory_clear(solo_ctx)
    padded = prefill(solo_ctx, solo_batch, [tokens], chunks(len(tokens), [16]), padded_to=40)
    result[PADDED] = "same" if np.array_equal(padded, by_chunking["16"]) else "differs"
    four_ctx, four_batch = context(4)
    got = prefill(four_ctx, four_batch, [tokens] + others, chunks(len(tokens), [64]))
    result["64, beside 3 others"] = same(got)
    memory_clear(four_ctx)
    all_64 = chunks(len(tokens), CHUNKINGS["128, 128, 144 (all 64+)"])
    result["all 64+, beside 3 others"] = same(prefill(four_ctx, four_batch, [tokens] + others, all_64))
    # decoding from there: the prompt's cells are the one-piece ones wherever that column says "same"
    steps = decode(four_ctx, four_batch, [tokens] + others, 8)
    same_steps = lambda alone: "same" if all(np.array_equal(a, b) for a, b in zip(steps, alone)) else "differs"
    result["decode beside 3 others"] = same_steps(solo_steps)
    result["decode beside 3 others, against alone with a companion row"] = same_steps(companion_steps)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=400)
    parser.add_argument("--setups", nargs="*", default=list(SETUPS), help="which setups (default: all)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.threads, args.prompt_tokens)))
        return
    columns = [*CHUNKINGS, PADDED, "64, beside 3 others", "all 64+, beside 3 others", "decode beside 3 others",
               "decode beside 3 others, against alone with a companion row"]
    print(f"{args.prompt_tokens}-token prompt, default model, {args.threads} threads; "
          "against one piece (decode: against decoding alone)\n")
    print("| setup | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for setup in args.setups:
        tiled, forced = SETUPS[setup][3:]
        env = dict(os.environ, GGML_CPU_TILED_MM=tiled, GGML_CPU_TILED_MM_FORCE=forced)
        out = subprocess.run(
            [sys.executable, __file__, "--child", setup, "--threads", str(args.threads),
             "--prompt-tokens", str(args.prompt_tokens)], env=env, capture_output=True, text=True,
        )
        if out.returncode != 0:
            print(f"| {setup} | failed: {out.stderr.strip().splitlines()[-1:]} |")
            continue
        cells = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {setup} | " + " | ".join(cells[c] for c in columns) + " |", flush=True)


if __name__ == "__main__":
    main()
