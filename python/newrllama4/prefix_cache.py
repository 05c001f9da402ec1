"""Shared prompt prefixes, decoded once: KV snapshots in host memory, keyed by their exact tokens.

Why a restored prefix is exact: in a batch-invariant context every token takes the
attention kernel its own sequence decides (attention.py), and the weight matmuls work
row by row, so a token's K and V depend on the tokens before it and nothing else:
not on where its prompt was cut into chunks, nor on the other sequences in the
batch. A snapshot of a sequence's cells after its first L tokens holds the very bits
that any prompt starting with those L tokens computes there, as long as each token took
the same kernel in both (a snapshot records how many of its tokens took the tiled one;
`attention.restorable`), and restoring it into an empty stream puts the cells at the
offsets a fresh run would use.

`PrefixCache` (one per context, outlives calls): snapshots taken with
`llama_state_seq_get_data`, found in a radix tree over their tokens (as in SGLang's
RadixAttention) by walking the prompt once, bounded by a byte budget with
least-recently-used eviction. A snapshot counts for a prompt when they share at
least a whole block (`BLOCK` tokens). Which snapshots one call takes and restores is
`prefix_plan.PrefixPlan`'s.

With sliding-window attention (Gemma 3), a snapshot longer than the window holds
only the window's last cells for the SWA layers, so it can be restored whole but not
cut shorter: a shorter prefix would lack SWA cells it needs.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from .attention import restorable

# A snapshot is restored into a prompt that shares at least this many tokens with it
# (then to the token), and the plan names shared prefixes by their whole blocks of it.
BLOCK = 16


@dataclass(eq=False)
class Snapshot:
    tokens: tuple[int, ...]  # the prefix whose cells `data` holds
    data: Any  # llama_state_seq_get_data bytes
    n_tiled: int  # how many of them took the tiled attention kernel (attention.py)
    node: "_Node" = field(repr=False)  # where the tree holds it: the node its tokens end at
    used: int = 0  # when it was last added or restored (PrefixCache._clock): ties go to the latest
    continued: bool = False  # one prompt's own, kept for the next call to go on from (PrefixPlan)

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def nbytes(self) -> int:
        return len(self.data)


class _Node:
    """A node of the radix tree: the tokens from the root to it are its parent's and `edge`.

    Children are keyed by the first token of their edge, so a prompt that takes another
    child (or none) shares exactly `depth` tokens with every snapshot below. `extending`
    counts the snapshots of this node and all below it that may be cut shorter, by how
    many of their tokens took the tiled kernel, with the most recently used of each
    count: all of them share this node's tokens with a prompt that gets here, so they
    restore the same number of its tokens, and the latest is the one to take. (Eviction
    takes the least recently used of all, so it never removes the latest of a group that
    others are left in; a discarded snapshot's groups look among their node's own
    snapshots and children for the next.) Snapshots that may only be restored whole
    (sliding windows) are found in `own`, the snapshots of exactly this node's tokens."""

    __slots__ = ("edge", "parent", "depth", "children", "own", "extending")

    def __init__(self, edge: tuple[int, ...], parent: Optional[_Node], depth: int):
        self.edge = edge
        self.parent = parent
        self.depth = depth
        self.children: dict[int, _Node] = {}
        self.own: dict[int, Snapshot] = {}
        self.extending: dict[int, list] = {}  # n_tiled -> [how many, the most recently used]

    def lineage(self) -> Iterator[_Node]:
        """This node and its ancestors, the root left out (no prefix is looked up by zero tokens)."""
        node: Optional[_Node] = self
        while node is not None and node.parent is not None:
            yield node
            node = node.parent


def _matched(tokens: tuple[int, ...], start: int, end: int, edge: tuple[int, ...]) -> int:
    """How many of `tokens[start:end]` agree with the start of `edge`."""
    n = min(end - start, len(edge))
    if tokens[start:start + n] == edge[:n]:
        return n
    return next(i for i in range(n) if tokens[start + i] != edge[i])


class PrefixCache:
    """Snapshots of prompt prefixes, bounded by `max_bytes`, least recently used evicted first.

    A radix tree over the snapshots' tokens (as SGLang's RadixAttention keeps its KV
    cache) finds the one that restores the most of a prompt by walking the prompt once:
    the cost grows with the prompt's length and the branch points on its path, not with
    the number of snapshots (benchmarks/bench_scale.py micro: one lookup took 15.6 ms at
    1,000 snapshots and 1.1 s at 100,000 with the hash chain it replaces).

    `keep_prompts` (off by default) has a prompt that shares nothing with the others of
    its call leave a snapshot of itself for later calls, as every such prompt did before:
    for workloads that send the same texts again (another question after the same text).
    A call of one prompt always does (PrefixPlan)."""

    def __init__(self, max_bytes: int, n_swa: int, keep_prompts: bool = False):
        self.max_bytes = max_bytes
        self.n_swa = n_swa
        self.keep_prompts = keep_prompts
        self.nbytes = 0
        self._clock = 0
        self._lru: OrderedDict[int, Snapshot] = OrderedDict()  # id -> snapshot, oldest first
        self._root = _Node((), None, 0)

    def __len__(self) -> int:
        return len(self._lru)

    def clear(self) -> None:
        self._lru.clear()
        self._root = _Node((), None, 0)
        self.nbytes = 0

    def _cuttable(self, snapshot: Snapshot) -> bool:
        return self.n_swa == 0 or snapshot.n_tokens <= self.n_swa

    def lookup(self, tokens: list[int], limit: int, n_tiled: int = 0) -> tuple[Optional[Snapshot], int]:
        """The snapshot that restores the most of `tokens[:limit]`, and how many tokens it
        restores: a prompt whose first `n_tiled` tokens take the tiled kernel restores only
        as many as `attention.restorable` allows (all of them where neither has a tiled
        part: outside batch invariance no sequence has one). Only a snapshot that shares
        a whole block (BLOCK tokens) with the prompt counts; of those that restore as many
        tokens, the most recently used."""
        if limit < BLOCK:
            return None, 0
        best: tuple[int, int, Optional[Snapshot]] = (0, -1, None)  # tokens restored, when used, snapshot
        for shared, node in reversed(self._path(tuple(tokens[:limit]))):  # the longest shared prefix first
            if shared < max(best[0], BLOCK):
                break  # restores at most `shared` tokens
            for n_there, (_, snapshot) in node.extending.items():
                best = max(best, (restorable(shared, n_there, n_tiled), snapshot.used, snapshot), key=_rank)
            if shared == node.depth:  # the prompt holds all of the snapshots that end here
                for snapshot in node.own.values():
                    common = restorable(shared, snapshot.n_tiled, n_tiled)
                    if common == shared or self._cuttable(snapshot):
                        best = max(best, (common, snapshot.used, snapshot), key=_rank)
        n_restored, _, snapshot = best
        if snapshot is None or n_restored == 0:
            return None, 0
        self._use(snapshot)
        return snapshot, n_restored

    def _path(self, tokens: tuple[int, ...]) -> list[tuple[int, _Node]]:
        """Where `tokens` leaves the tree, as (tokens shared, node): every snapshot below the
        node shares exactly that many tokens with it, unless a later node takes it further."""
        path, node, at = [], self._root, 0
        while at < len(tokens):
            child = node.children.get(tokens[at])
            if child is None:
                break
            at += _matched(tokens, at, len(tokens), child.edge)
            path.append((at, child))
            if at < child.depth:
                break
            node = child
        return path

    def prefixes_of(self, tokens: list[int]) -> list[Snapshot]:
        """The snapshots whose tokens all begin `tokens`."""
        return [snapshot for shared, node in self._path(tuple(tokens)) if shared == node.depth
                for snapshot in node.own.values()]

    def covers(self, tokens: list[int], n_tiled: int = 0) -> bool:
        """Whether a snapshot restores all of `tokens` (to a prompt whose first `n_tiled` take
        the tiled kernel)."""
        return self.lookup(tokens, len(tokens), n_tiled)[1] == len(tokens)

    def add(self, tokens: list[int], data: Any, n_tiled: int = 0) -> Optional[Snapshot]:
        """Keep a snapshot of `tokens`, the first `n_tiled` of which took the tiled kernel, and
        return it; None if it does not fit the budget or is there already."""
        n_tiled = min(n_tiled, len(tokens))
        if len(data) > self.max_bytes or self.covers(tokens, n_tiled):
            return None
        while self.nbytes + len(data) > self.max_bytes:
            self._remove(next(iter(self._lru.values())))  # the least recently used
        key = tuple(tokens)
        node = self._insert(key)
        snapshot = Snapshot(key, data, n_tiled, node)
        node.own[id(snapshot)] = snapshot
        self._lru[id(snapshot)] = snapshot
        self.nbytes += snapshot.nbytes
        if self._cuttable(snapshot):
            for holder in node.lineage():
                holder.extending.setdefault(n_tiled, [0, snapshot])[0] += 1
        self._use(snapshot)
        return snapshot

    def _use(self, snapshot: Snapshot) -> None:
        self._clock += 1
        snapshot.used = self._clock
        self._lru.move_to_end(id(snapshot))
        if self._cuttable(snapshot):
            for holder in snapshot.node.lineage():
                holder.extending[snapshot.n_tiled][1] = snapshot

    def _latest(self, node: _Node, n_tiled: int) -> Iterator[Snapshot]:
        """The snapshots that may be the latest of a group of `node`: its own, its children's latest."""
        yield from (s for s in node.own.values() if s.n_tiled == n_tiled and self._cuttable(s))
        yield from (child.extending[n_tiled][1] for child in node.children.values() if n_tiled in child.extending)

    def _insert(self, tokens: tuple[int, ...]) -> _Node:
        """The node of exactly `tokens`, made (and an edge split) if need be."""
        node, at = self._root, 0
        while at < len(tokens):
            child = node.children.get(tokens[at])
            if child is None:
                node.children[tokens[at]] = leaf = _Node(tokens[at:], node, len(tokens))
                return leaf
            n = _matched(tokens, at, len(tokens), child.edge)
            if n < len(child.edge):  # the tokens end or turn off inside the edge: a node there
                middle = _Node(child.edge[:n], node, at + n)
                middle.extending = {n_there: list(group) for n_there, group in child.extending.items()}
                node.children[tokens[at]] = middle
                child.edge, child.parent = child.edge[n:], middle
                middle.children[child.edge[0]] = child
                child = middle
            node, at = child, at + n
        return node

    def discard(self, snapshot: Snapshot) -> None:
        """Drop a snapshot no later prompt is expected to use (if it is still here)."""
        if id(snapshot) in self._lru:
            self._remove(snapshot)

    def _remove(self, snapshot: Snapshot) -> None:
        del self._lru[id(snapshot)]
        node = snapshot.node
        del node.own[id(snapshot)]
        if self._cuttable(snapshot):
            for holder in node.lineage():  # from the bottom up
                group = holder.extending[snapshot.n_tiled]
                group[0] -= 1
                if not group[0]:
                    del holder.extending[snapshot.n_tiled]
                elif group[1] is snapshot:  # (discarded, not evicted) the latest of the others below
                    group[1] = max(self._latest(holder, snapshot.n_tiled), key=lambda s: s.used)
        self.nbytes -= snapshot.nbytes
        while node.parent is not None and not node.own and not node.children:  # nothing left below
            del node.parent.children[node.edge[0]]
            node = node.parent
        if node.parent is not None and not node.own and len(node.children) == 1:  # no branch here any more
            (child,) = node.children.values()
            node.edge += child.edge
            node.depth, node.children = child.depth, child.children
            node.own, node.extending = child.own, child.extending
            for below in node.children.values():
                below.parent = node
            for kept in node.own.values():
                kept.node = node


def _rank(candidate: tuple[int, int, Optional[Snapshot]]) -> tuple[int, int]:
    return candidate[0], candidate[1]
