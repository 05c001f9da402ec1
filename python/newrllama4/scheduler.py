"""Who runs next and what goes into the next batch. Pure bookkeeping: no llama.cpp calls."""

from __future__ import annotations

import bisect
from collections import deque
from typing import Callable, Iterable, NamedTuple, Optional

from .attention import chunk_length, one_row_length, planned_tokens, tiled_step
from .sequence import Sequence

# how many waiting prompts a slot's admission passes over before it gives up for this step
HELD_BACK_PER_SLOT = 4


class PlanEntry(NamedTuple):
    """One entry of a batch plan: a sequence and how many of its pending tokens to feed."""

    sequence: Sequence
    n: int


class Scheduler:
    """Admits waiting sequences into free slots and plans each llama_decode batch.

    A slot is a seq_id with its own KV stream, so admission only waits for a free
    slot: a sequence never competes with another one for KV cells.

    With `separate_phases` (batch invariance), a batch holds either prompt chunks or
    one new token per generating sequence (decode), never a mix: llama.cpp cuts a
    batch whose sequences bring different numbers of tokens into micro-batches, and
    each sequence's chunk lengths follow attention.py's rules, so that every token gets
    the attention kernel its own sequence decides. Chunks of a prompt's tiled part all
    have one length; one-row chunks may differ, as the engine pads them to one length
    (attention.throwaway_rows). Prefill goes first so that newcomers join the next
    decode batch.
    Without `separate_phases`, a batch holds every generating sequence's token and
    fills up with prompt chunks of any length, at most `n_batch` tokens.
    """

    def __init__(self, n_slots: int, n_batch: int, separate_phases: bool):
        self.separate_phases = separate_phases
        self.n_slots = n_slots
        self.capacity = planned_tokens(n_batch) if separate_phases else n_batch
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self._free_slots = list(range(n_slots))
        # prompts advance in chunks of an even share of the batch, so that the first
        # chunks of a full set of slots fit one batch; later chunks and tails group when
        # equal; a prompt's tiled part in multiples of attention.TILE
        self._share = max(1, n_batch // n_slots)
        self._tiled_step = tiled_step(n_batch, n_slots)

    @property
    def done(self) -> bool:
        return not self.waiting and not self.running

    def add(self, sequences: Iterable[Sequence]) -> None:
        self.waiting.extend(sequences)

    def admit(self, can_start: Optional[Callable[[Sequence], bool]] = None) -> list[Sequence]:
        """Move waiting sequences that `can_start` into free slots, in order, lowest slot
        first; return the newcomers. With nothing running, the first waiting sequence
        starts anyway, so that a wait can never stall the call. The search stops after a
        few held back per slot: where every prompt waits for one shared prefix, a step
        would otherwise ask about every waiting prompt, and a call of N prompts cost N²."""
        admitted, held_back = [], []
        max_held_back = HELD_BACK_PER_SLOT * self.n_slots
        while self.waiting and self._free_slots and len(held_back) < max_held_back:
            sequence = self.waiting.popleft()
            if can_start is None or can_start(sequence) or not self.running:
                sequence.slot = self._free_slots.pop(0)
                self.running.append(sequence)
                admitted.append(sequence)
            else:
                held_back.append(sequence)
        self.waiting.extendleft(reversed(held_back))
        return admitted

    def retire(self, sequence: Sequence) -> None:
        self.running.remove(sequence)
        bisect.insort(self._free_slots, sequence.slot)

    def next_batch(self) -> list[PlanEntry]:
        prefilling = [s for s in self.running if s.prefilling]
        decoding = [s for s in self.running if not s.prefilling]
        if self.separate_phases:
            # in slot order: llama.cpp cuts a batch into micro-batches of consecutive seq_ids
            plan = self._equal_prefill(prefilling) if prefilling else [PlanEntry(s, 1) for s in decoding]
            return sorted(plan, key=lambda entry: entry.sequence.slot)
        plan = [PlanEntry(s, 1) for s in decoding]
        budget = self.capacity - len(plan)
        for sequence in prefilling:
            if budget == 0:
                break
            n = min(sequence.boundary - sequence.n_cached, budget)
            plan.append(PlanEntry(sequence, n))
            budget -= n
        return plan

    def _chunk(self, sequence: Sequence) -> int:
        return chunk_length(sequence.n_cached, sequence.boundary, sequence.n_tiled, self._share, self._tiled_step)

    def _equal_prefill(self, prefilling: list[Sequence]) -> list[PlanEntry]:
        """Prompt chunks as many as the batch holds. In their tiled parts (attention.py)
        the first waiting chunk's length, for every prompt whose next chunk has it too;
        past them, where any chunk of fewer than TILE rows gives every token the same
        kernel, every such prompt's next chunk, cut to `attention.one_row_length`.
        Prompts that others wait for (`Sequence.awaited`: they decode a shared prefix)
        come first, in their tiled part before the rest, and take their whole next
        one-row chunk: what is past the others' length is a pass of llama.cpp's of its
        own in the same call, so no one waits for the shorter chunks beside them."""
        first = min(prefilling, key=lambda s: (not s.awaited, s.n_cached >= s.n_tiled))
        if first.n_cached < first.n_tiled:
            length = self._chunk(first)
            group = [s for s in prefilling if s.n_cached < s.n_tiled and self._chunk(s) == length]
            return [PlanEntry(s, length) for s in group[: self.capacity // length]]
        # each at most an even share of the batch, so that padded to the longest they fit it
        chunks = [(s, self._chunk(s)) for s in prefilling if s.n_cached >= s.n_tiled]
        length = one_row_length([n for s, n in chunks if not s.awaited] or [n for _, n in chunks])
        return [PlanEntry(s, n if s.awaited else min(n, length)) for s, n in chunks]
