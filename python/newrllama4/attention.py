"""Which flash-attention kernel each token takes, held fixed whatever else is in the batch.

With llama.cpp's F16 KV cache, ggml's CPU flash attention (`ggml-cpu/ops.cpp`) picks a
kernel by the shape of each call, and the kernels round differently:
- a tiled kernel when a sequence brings TILE (64) or more query rows to the call;
- a KV-split kernel when the whole call is one query row (one sequence, one token)
  over 512 or more cells: per-thread partial sums, merged at the end;
- a one-row kernel otherwise, which adds a row's cells one by one in cell order.
Read closely, the tiled kernel's result for a row does not depend on the rows beside
it (each row's online softmax runs over the same 64-cell tiles of its own stream, in
the same order, with tiles of one fixed shape; masked cells add exact zeros), and the
one-row kernel's never does. So a token's numbers depend on nothing but the tokens
before it as long as the kernel each token gets is a function of its own sequence:

- a prompt's whole tiles, its first `tiled_end` tokens (a multiple of TILE; for a
  label question, the question's whole tiles), are decoded in chunks of TILE rows or
  more, so they always get the tiled kernel;
- every other token (the prompt's last partial tile, a label's tokens after its
  question, generated tokens) goes in chunks of fewer than TILE rows, the one-row
  kernel;
- a token that llama.cpp would decode alone (it cuts a batch into micro-batches of
  consecutive seq_ids, so one whose slot has no neighbour in the batch) gets a
  throwaway companion row (the same token at the next position, removed after the
  call), which keeps it off the KV-split kernel.
A prefix snapshot records how many of its tokens took the tiled kernel, and is restored
only as far as every restored token took the kernel the restoring prompt gives it
(`restorable`): within the tiled parts in whole tiles, so what is left of a tiled part
still comes in whole tiles, and past them (the one-row part of a shared instruction) to
the token, between prompts whose tiled parts end at the same place.
Bit-compared in `benchmarks/bitcompare.py`; the tests compare greedy tokens and label
probabilities with the prompt decoded alone.
"""

from __future__ import annotations

# ggml's GGML_FA_TILE_Q: the query rows of one tile of the tiled kernel
TILE = 64


def tiled_end(n_leading: int) -> int:
    """How many leading prompt tokens take the tiled kernel: the whole tiles of the
    `n_leading` (the prompt, or a label question)."""
    return n_leading // TILE * TILE


def tiled_step(n_batch: int, n_slots: int) -> int:
    """The chunk of the tiled part: a multiple of TILE near an even share of the batch."""
    return max(TILE, n_batch // n_slots // TILE * TILE)


def planned_tokens(n_batch: int) -> int:
    """Tokens a batch plan may hold: at least one tile."""
    return max(n_batch, TILE)


def batch_capacity(n_batch: int, n_slots: int) -> int:
    """Tokens a batch must hold: the plan, and a companion for each slot at most."""
    return planned_tokens(n_batch) + n_slots


def chunk_length(n_cached: int, boundary: int, n_tiled: int, share: int, step: int) -> int:
    """How many tokens the next prefill chunk of a sequence takes, `n_cached` of its
    tokens being in the cache and the chunk to end at `boundary` at the latest (both
    multiples of TILE within the tiled part)."""
    if n_cached < n_tiled:
        return min(boundary, n_tiled, n_cached + step) - n_cached
    return min(boundary - n_cached, share, TILE - 1)


def restorable(n_common: int, n_tiled_there: int, n_tiled: int) -> int:
    """How many of the `n_common` leading tokens a prompt shares with a prefix snapshot it
    may restore, the prompt's first `n_tiled` tokens taking the tiled kernel and the
    snapshot's first `n_tiled_there`. Each restored token must have taken the kernel the
    prompt gives it: past a tiled part that holds when both tiled parts end at the same
    place; within them a restore ends at a whole tile, so that what is left of the
    prompt's tiled part still comes in whole tiles."""
    if n_common > n_tiled_there and n_tiled_there == n_tiled:
        return n_common
    return min(n_common, n_tiled_there, n_tiled) // TILE * TILE
