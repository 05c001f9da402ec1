"""Who runs next and what goes into the next batch. Pure bookkeeping: no llama.cpp calls."""

from __future__ import annotations

import bisect
from collections import deque
from typing import Iterable

from .sequence import Sequence

# One entry of a batch plan: a sequence and how many of its pending tokens to feed.
PlanEntry = tuple[Sequence, int]


class Scheduler:
    """Admits waiting sequences into free slots and plans each llama_decode batch.

    A slot is a seq_id with its own KV stream, so admission only waits for a free
    slot: a sequence never competes with another one for KV cells.

    With `separate_phases`, a batch holds either one prompt's tokens (prefill) or one
    new token per generating sequence (decode), never a mix. Mixing phases, or packing
    several prompts into one prefill batch, changes the floating-point path of some
    tokens and so, now and then, a greedy output; keeping them apart makes every
    output independent of what else was in the call. Prefill goes first so that
    newcomers join the next decode batch. Without `separate_phases`, a batch holds
    every generating sequence's token and fills up with prompt chunks.
    """

    def __init__(self, n_slots: int, n_batch: int, separate_phases: bool):
        self.n_batch = n_batch
        self.separate_phases = separate_phases
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self._free_slots = list(range(n_slots))

    @property
    def done(self) -> bool:
        return not self.waiting and not self.running

    def add(self, sequences: Iterable[Sequence]) -> None:
        self.waiting.extend(sequences)

    def admit(self) -> list[Sequence]:
        """Move waiting sequences into free slots, lowest slot first; return the newcomers."""
        admitted = []
        while self.waiting and self._free_slots:
            sequence = self.waiting.popleft()
            sequence.slot = self._free_slots.pop(0)
            self.running.append(sequence)
            admitted.append(sequence)
        return admitted

    def retire(self, sequence: Sequence) -> None:
        self.running.remove(sequence)
        bisect.insort(self._free_slots, sequence.slot)

    def next_batch(self) -> list[PlanEntry]:
        budget = self.n_batch
        plan: list[PlanEntry] = []
        prefilling = [s for s in self.running if s.prefilling]
        if not (self.separate_phases and prefilling):
            decoding = [s for s in self.running if not s.prefilling]
            plan = [(s, 1) for s in decoding]
            budget -= len(plan)
            if self.separate_phases:
                return plan
        if self.separate_phases:
            # one prompt per prefill batch: llama.cpp splits a batch of several prompts
            # into micro-batches by their lengths, which changes each prompt's numerics
            prefilling = prefilling[:1]
        for sequence in prefilling:
            if budget == 0:
                break
            n = min(sequence.pending, budget)
            plan.append((sequence, n))
            budget -= n
        return plan
