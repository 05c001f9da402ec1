"""Which shared prefixes one call decodes once, by whom, and who waits for them.

`PrefixPlan` (one per call) finds the prefixes that the call's prompts share, lets one
sequence decode each of them once and snapshot it into the context's `PrefixCache`
(prefix_cache.py, which says why a restored prefix is exact), and holds the other
sequences that contain it until they can restore it.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

import llama_cpp as llama
import numpy as np

from ._llama import restore_sequence, snapshot_sequence
from .attention import TILE, restorable
from .prefix_cache import BLOCK, PrefixCache, Snapshot
from .sequence import Sequence

log = logging.getLogger("newrllama4")

# A short prefix past an instruction that at least this many of a call's prompts share is
# kept for later calls (PrefixPlan): fewer share a text's opening by chance.
KEEP_SHARED = 4


def block_keys(tokens: list[int], n_blocks: int) -> list[int]:
    """Hash-chain keys of the first 1..n_blocks blocks: key k names tokens[:k * BLOCK] (the plan's)."""
    keys, key = [], 0
    for k in range(n_blocks):
        key = hash((key, tuple(tokens[k * BLOCK:(k + 1) * BLOCK])))
        keys.append(key)
    return keys


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


@dataclass(eq=False)
class _Prefix:
    """A prefix that several prompts of one call share: decoded once by its owner."""

    tokens: list[int]
    n_tiled: int  # how many of its tokens take the tiled kernel (batch-invariant)
    owner: Optional[Sequence] = None  # None once it is in the cache (or was never needed)
    prompts: set[int] = field(default_factory=set)  # the prompts (indices) of the sequences holding it
    to_start: int = 0  # how many of those sequences have yet to start
    snapshot: Optional[Snapshot] = None  # the snapshot its owner took


class PrefixPlan:
    """Which shared prefixes one call decodes once, by whom, and who waits for them.

    The prompts are sorted (by where their tiled parts end, then by tokens); two
    neighbours' common prefix, short of both prompts' last token (whose logits the
    prompt needs) and cut to what both may restore of each other's cells
    (batch-invariant: `attention.restorable`), names a shared prefix by its last whole
    block; the shared prefix is the shortest such common prefix of that block's
    prompts, so it ends where an instruction ends, not at a block edge (which left up
    to 15 instruction tokens to decode again with every prompt). Its owner is the
    first prompt, in call order, that contains it and may restore it: that sequence
    ends a prefill chunk exactly there and snapshots its cells, and goes before the
    others in the scheduler (`Sequence.awaited`). A shared prefix that the cache holds
    to its last whole block has no owner: its few tokens past that are not worth a
    wait. A sequence that contains a shared prefix it does not own waits until the
    prefix is cached, then restores it.

    A snapshot costs a copy of the KV cells it holds, and each restore another, and what
    the cache keeps it keeps in memory, so the plan keeps only snapshots a later prompt
    can use: the prefixes that prompts of the call share, for the call, and after it
    all but the openings: a prefix that few prompts share (under `KEEP_SHARED`) and that
    adds less than a tile (TILE tokens) to a shorter shared prefix. An instruction, or
    worked examples after it, come again in later calls; a text's opening line that a
    few texts after the instruction happen to share seldom does (a near-duplicate corpus
    kept a snapshot per pair, 1.6 GB after 5,000 rows of Gemma). Such an opening, or a
    prefix that only one prompt's sequences share (the prompt of a label question,
    which its scoring sequences restore), is dropped once the last of them has started;
    a sequence that shares nothing and restores nothing leaves no snapshot of its prompt.
    Both are kept for later calls when the call has one prompt (calls of one prompt can
    share only across calls: a chat, a loop) or the cache's `keep_prompts` asks for it
    (workloads that send the same texts again): a call of many distinct texts took one
    copy per row, and filled the cache's budget, with snapshots no later prompt used.
    `snapshots` counts the snapshots taken and kept, `copied_bytes` the bytes copied to
    and from snapshots.

    A caller that goes on from a call's prompts in the next call (the rounds of
    field_probs.py: each round's prompts are the previous round's, longer) says so:
    `to_continue`, each prompt keeps a snapshot of itself past all it restores and
    shares (a label question's prompt: the snapshot its scoring sequences share);
    `continuing`, the snapshot a prompt restores past the prefixes it shares with other
    prompts of the call is its own from the previous call, superseded by the one it
    now takes or no longer needed, and is dropped once the prompt's sequences have
    started. So a prompt holds one snapshot between calls, not one per call.
    """

    def __init__(self, cache: PrefixCache, ctx: Any, sequences: Iterable[Sequence],
                 to_continue: bool = False, continuing: bool = False):
        self.cache = cache
        self.ctx = ctx
        self.memory = llama.llama_get_memory(ctx)
        self.snapshots = 0
        self.copied_bytes = 0
        self._paths: dict[Sequence, list[_Prefix]] = {}  # shared prefixes a sequence contains, shortest first
        sequences = list(sequences)
        self._n_sequences = Counter(s.index for s in sequences)  # each prompt's sequences
        self._to_start = Counter(self._n_sequences)  # and how many of them have yet to start
        self._to_continue = to_continue
        self._continuing = continuing
        self._superseded: dict[int, list[Snapshot]] = {}  # a prompt's own snapshots of the previous call
        self._question: dict[int, list[int]] = {}  # a label question's prefix to keep (_plan)
        self._openings: set[_Prefix] = set()  # shared prefixes a little past a shorter one (_plan)
        self._keep_prompts = cache.keep_prompts or to_continue or len(self._n_sequences) == 1
        self._plan(sequences)

    def _plan(self, sequences: list[Sequence]) -> None:
        keys = {s: block_keys(s.tokens, (s.n_prompt - 1) // BLOCK) for s in sequences}
        arrays = {s: np.asarray(s.tokens) for s in sequences}
        # a prompt restores past a tiled part only from one whose tiled part ends at the
        # same place: sorted by that first, such prompts are neighbours
        ordered = sorted(sequences, key=lambda s: (s.n_tiled, s.tokens))
        # (key of the last whole block, n_tiled) -> the shortest neighbours' common prefix there
        shortest: dict[tuple[int, int], tuple[int, Sequence]] = {}
        for a, b in zip(ordered, ordered[1:]):
            common = min(common_prefix(arrays[a], arrays[b]), a.n_prompt - 1, b.n_prompt - 1)
            length = restorable(common, a.n_tiled, b.n_tiled)
            if length >= BLOCK:
                key = (keys[a][length // BLOCK - 1], min(length, a.n_tiled))
                if key not in shortest or length < shortest[key][0]:
                    shortest[key] = (length, a)
        # the prompts holding one block prefix are neighbours, so the shortest common prefix
        # of their neighbouring pairs is theirs: a shared instruction to its last token
        by_key: dict[int, list[_Prefix]] = {}
        for (key, n_tiled), (length, holder) in shortest.items():
            by_key.setdefault(key, []).append(_Prefix(holder.tokens[:length], n_tiled))
        to_decode = {p for group in by_key.values() for p in group if not self._cached_enough(p)}
        for sequence in sequences:  # call order, so the first holder owns a prefix
            self._paths[sequence] = [
                prefix for key in keys[sequence] for prefix in by_key.get(key, ())
                if restorable(len(prefix.tokens), prefix.n_tiled, sequence.n_tiled) == len(prefix.tokens)
                and sequence.tokens[:len(prefix.tokens)] == prefix.tokens
            ]
            for prefix in self._paths[sequence]:
                if prefix in to_decode and prefix.owner is None:
                    prefix.owner = sequence
                prefix.prompts.add(sequence.index)
                prefix.to_start += 1
        self._openings.update(longer for path in self._paths.values() for shorter, longer in zip(path, path[1:])
                              if len(longer.tokens) - len(shorter.tokens) < TILE)
        # what to_continue keeps of a label question: the shortest prefix only its sequences share,
        # its prompt (or more, where every spelling starts the same way), not the spellings' longer ones
        for prefix in sorted({p for path in self._paths.values() for p in path if len(p.prompts) == 1},
                             key=lambda p: -len(p.tokens)):
            self._question[next(iter(prefix.prompts))] = prefix.tokens

    def _cached_enough(self, prefix: _Prefix) -> bool:
        """Whether the cache restores a prefix to its last whole block: the few tokens past it
        are decoded with each prompt rather than make the prompts wait for an owner. A call
        `to_continue` wants them whole: the next call restores a label question's prompt."""
        restored = self.cache.lookup(prefix.tokens, len(prefix.tokens), prefix.n_tiled)[1]
        return restored >= (len(prefix.tokens) if self._to_continue else len(prefix.tokens) // BLOCK * BLOCK)

    # -- admission ----------------------------------------------------------------------

    def can_start(self, sequence: Sequence) -> bool:
        """False while a prefix this sequence contains is being decoded by another one."""
        return all(p.owner is None or p.owner is sequence for p in self._paths.get(sequence, ()))

    def start(self, sequence: Sequence) -> None:
        """Restore the longest cached prefix into the sequence's (empty) slot and plan its snapshots."""
        snapshot, n_restored = self.cache.lookup(sequence.tokens, sequence.n_restorable, sequence.n_tiled)
        self._to_start[sequence.index] -= 1
        if snapshot is not None:
            self.copied_bytes += snapshot.nbytes
            if restore_sequence(self.ctx, snapshot.data, sequence.slot):
                llama.llama_memory_seq_rm(self.memory, sequence.slot, n_restored, -1)
                sequence.n_cached = sequence.n_restored = n_restored
                log.debug("request %d reuses %d cached prompt tokens", sequence.index, n_restored)
            else:  # never seen; the sequence then decodes its whole prompt, which is still exact
                llama.llama_memory_seq_rm(self.memory, sequence.slot, -1, -1)
                log.debug("request %d could not restore a cached prefix", sequence.index)
        path = self._paths.get(sequence, [])
        for prefix in path:
            if prefix.owner is sequence and len(prefix.tokens) <= sequence.n_cached:
                prefix.owner = None  # restored from a longer snapshot: nothing left to decode
            prefix.to_start -= 1
            self._drop_if_done(prefix)
        owned = [len(p.tokens) for p in path if p.owner is sequence]
        if self._to_continue and self._n_sequences[sequence.index] == 1:  # (a label question's prompt: its path)
            # all of its prompt but the last token, which the next call's prompt starts with
            own = restorable(sequence.n_prompt - 1, sequence.n_tiled, sequence.n_tiled)
            if own > max([sequence.n_cached] + owned):
                owned.append(own)
        elif not path and sequence.n_cached == 0 and self._keep_prompts:
            # as much of its prompt as a later prompt that starts the same way may restore
            own = restorable(sequence.n_prompt - 1, sequence.n_tiled, sequence.n_tiled) // BLOCK * BLOCK
            owned = [own] if own else []
        if self._continuing:
            self._superseded.setdefault(sequence.index, []).extend(self._superseded_by(sequence, snapshot, path, owned))
        if not self._to_start[sequence.index]:
            for superseded in self._superseded.pop(sequence.index, ()):
                self.cache.discard(superseded)
        sequence.snapshot_at = owned
        self._mark_awaited(sequence)

    def _superseded_by(self, sequence: Sequence, restored: Optional[Snapshot], path: list[_Prefix],
                       owned: list[int]) -> list[Snapshot]:
        """The snapshots of a continuing sequence's prompt from earlier calls, to drop: those
        kept for it (`continued`, never a prefix prompts share), but this call's, and the
        one it restored if it goes on with no longer one to replace it (a snapshot whose
        tiled part ends elsewhere restores nothing of it any more: attention.restorable)."""
        keep = {id(p.snapshot) for p in path}
        if restored is not None and self._to_continue and max(owned, default=0) <= sequence.n_cached:
            keep.add(id(restored))
        return [s for s in self.cache.prefixes_of(sequence.tokens[:sequence.n_prompt])
                if s.continued and id(s) not in keep]

    # -- after each decode ----------------------------------------------------------------

    def after_decode(self, sequence: Sequence) -> None:
        """Snapshot the sequence if its cells now hold exactly a prefix it was to keep."""
        if not sequence.snapshot_at or sequence.n_cached != sequence.snapshot_at[0]:
            return
        sequence.snapshot_at.pop(0)
        length = sequence.n_cached
        tokens = sequence.tokens[:length]
        snapshot = None
        if not self.cache.covers(tokens, sequence.n_tiled):  # (a longer snapshot taken since may hold it)
            data = snapshot_sequence(self.ctx, sequence.slot)
            self.copied_bytes += len(data)
            snapshot = self.cache.add(tokens, data, sequence.n_tiled)
            if snapshot is not None:
                snapshot.continued = self._to_continue and not any(
                    len(p.tokens) == length and len(p.prompts) > 1 for p in self._paths.get(sequence, ()))
                self.snapshots += 1
                log.debug("request %d cached its first %d prompt tokens", sequence.index, length)
        self._release(sequence, length, snapshot)

    def retire(self, sequence: Sequence, waiting: Iterable[Sequence]) -> None:
        """Hand prefixes a sequence owned but never snapshotted (it failed) to a waiting holder.
        The waiting list is searched only then: a retire per row must not cost the rows left."""
        for prefix in self._paths.get(sequence, ()):
            if prefix.owner is sequence:
                prefix.owner = next((s for s in waiting if prefix in self._paths[s]), None)

    def _release(self, sequence: Sequence, length: int, snapshot: Optional[Snapshot]) -> None:
        for prefix in self._paths.get(sequence, ()):
            if prefix.owner is sequence and len(prefix.tokens) == length:
                prefix.owner = None
                prefix.snapshot = snapshot
                self._drop_if_done(prefix)
        self._mark_awaited(sequence)

    def _drop_if_done(self, prefix: _Prefix) -> None:
        """Drop the snapshot of a prefix that one prompt's sequences share, or few prompts past
        a shorter shared prefix, once all have started."""
        if prefix.snapshot is None or prefix.to_start:
            return
        if len(prefix.prompts) == 1:
            drop = not self._keep_prompts or self._to_continue and \
                prefix.tokens != self._question.get(next(iter(prefix.prompts)), prefix.tokens)
        else:
            drop = not self._keep_prompts and len(prefix.prompts) < KEEP_SHARED and prefix in self._openings
        if drop:
            self.cache.discard(prefix.snapshot)
            prefix.snapshot = None

    def _mark_awaited(self, sequence: Sequence) -> None:
        sequence.awaited = any(p.owner is sequence for p in self._paths.get(sequence, ()))
