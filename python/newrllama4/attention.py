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

- a prompt's first `tiled_end` tokens (its whole tiles but those within its last TILE
  tokens; for a prompt with labels, the prompt's), are decoded in chunks of TILE rows or
  more, so they always get the tiled kernel;
- every other token (the prompt's last partial tile, a label's tokens after its
  prompt, generated tokens) goes in chunks of fewer than TILE rows, the one-row
  kernel;
- a token that llama.cpp would decode alone (it cuts a batch into micro-batches of
  consecutive seq_ids, so one whose slot has no neighbour in the batch) gets a
  throwaway companion row (the same token at the next position, removed after the
  call), which keeps it off the KV-split kernel.
Throwaway rows also save llama.cpp passes over the weights (`throwaway_rows`): it
cuts a batch into micro-batches of consecutive seq_ids that bring equal numbers of
tokens, one pass each, so one-row chunks are padded to one length (the longest, but
for the longer chunk of a prompt others wait for, whose rest is a pass of its own)
and short gaps between slots are filled. A throwaway row comes after every real row of
its sequence (the causal mask hides it from them) and is removed after the call.
A prefix snapshot records how many of its tokens took the tiled kernel, and is restored
only as far as every restored token took the kernel the restoring prompt gives it
(`restorable`): within the tiled parts in whole tiles, so what is left of a tiled part
still comes in whole tiles, and past them (the one-row part of a shared instruction) to
the token, between prompts whose tiled parts end at the same place.
Bit-compared in `benchmarks/bitcompare.py`; the tests compare greedy tokens and label
probabilities with the prompt decoded alone.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

# ggml's GGML_FA_TILE_Q: the query rows of one tile of the tiled kernel
TILE = 64


class Rows(NamedTuple):
    """A run of one slot's rows in a batch: `n` rows from `position` on."""

    slot: int
    position: int
    n: int


def tiled_end(n_leading: int) -> int:
    """How many leading prompt tokens take the tiled kernel: the whole tiles of the
    `n_leading` (the prompt, which labels follow too) that end a tile or more before its end.

    Keeping the last tile's worth of tokens out of the tiled part lets prompts that
    share an instruction and differ in a text of up to TILE tokens restore all of it:
    their tiled parts end within the instruction, and a restore past the tiled parts
    goes to the token (`restorable`) from a snapshot whose tiled part ends at the same
    tile (the prefix plan keeps one for each such tile). When it was all the whole tiles,
    a text that carried a prompt over a tile boundary put its tiled end past the
    instruction, and up to 63 instruction tokens were decoded again for every such
    prompt. The one-row
    kernel costs little more for those tokens: in short contexts the matrix products,
    the same for both kernels, dominate.
    """
    return max(n_leading - TILE, 0) // TILE * TILE


def tiled_step(n_batch: int, n_slots: int) -> int:
    """The chunk of the tiled part: a multiple of TILE near an even share of the batch."""
    return max(TILE, n_batch // n_slots // TILE * TILE)


def planned_tokens(n_batch: int) -> int:
    """Tokens a batch plan may hold: at least one tile."""
    return max(n_batch, TILE)


def batch_capacity(n_batch: int, n_slots: int) -> int:
    """Tokens a batch must hold: the plan, and a companion for each slot at most."""
    return planned_tokens(n_batch) + n_slots


# About what one pass of llama.cpp over the weights costs, in rows of a batch, for a
# small model on a few CPU threads, where a pass costs far more than a row: a gap of
# idle slots between two slots of a one-row batch is filled with throwaway rows when
# they are at most this many, and one-row chunks are cut so as to spend the fewest rows
# and passes (`one_row_length`). The figure is rough on purpose: half or twice it do alike.
PASS_ROWS = 16


def one_row_length(chunks: list[int]) -> int:
    """How far a batch of one-row chunks of these lengths advances: every chunk is cut to
    it and padded to it. Of the ways to take the chunks in passes, each pass advancing
    every unfinished one by the same length, the first cut of the one that costs the
    fewest rows, counting a pass as PASS_ROWS: one pass pads every chunk to the longest,
    one per length pads none."""
    ends = sorted(set(chunks))
    # cost[i]: the rows and passes that finish every chunk once all have advanced ends[i]
    cost = [0] * len(ends)
    for i in range(len(ends) - 2, -1, -1):
        active = sum(n > ends[i] for n in chunks)
        cost[i] = min(PASS_ROWS + active * (ends[j] - ends[i]) + cost[j] for j in range(i + 1, len(ends)))
    return min((PASS_ROWS + len(chunks) * end + cost[i], end) for i, end in enumerate(ends))[1]


def throwaway_rows(chunks: list[Rows], next_position: Callable[[int], int], room: int, length: int) -> list[Rows]:
    """The throwaway rows a batch plan gets.

    `chunks` are the plan's rows, one run per slot; `next_position`
    gives the next free position of a slot outside the plan; `room` is how many rows may
    be added besides companions. Only a one-row batch (every chunk under TILE) gets any:
    its chunks are padded to `length` (what is past it of a longer chunk is a pass of
    its own), gaps of idle slots between them filled when they take at most PASS_ROWS
    rows and `room` allows, and a one-token chunk with no neighbouring slot after that
    gets a companion row."""
    if not chunks or max(n for _, _, n in chunks) >= TILE:
        return []
    rows = [Rows(slot, position + n, length - n) for slot, position, n in chunks if n < length]
    room -= sum(count for _, _, count in rows)
    slots = sorted(slot for slot, _, _ in chunks)
    runs = [[slots[0]]]
    for before, after in zip(slots, slots[1:]):
        gap = range(before + 1, after)
        if gap and len(gap) * length <= min(PASS_ROWS, room):
            rows += [Rows(slot, next_position(slot), length) for slot in gap]
            room -= len(gap) * length
        elif gap:
            runs.append([])
        runs[-1].append(after)
    if length == 1:
        alone = {slot: position for slot, position, n in chunks if n == 1}
        rows += [Rows(run[0], alone[run[0]] + 1, 1) for run in runs if len(run) == 1 and run[0] in alone]
    return rows


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
