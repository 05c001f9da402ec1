"""The prefix cache on its own: lookup, budget, sliding windows, and its radix tree against a scan."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import newrllama4 as nl
from newrllama4.attention import TILE, restorable
from newrllama4.prefix_cache import BLOCK, PrefixCache


def test_context_arguments_are_checked(model):
    with pytest.raises(nl.InvalidArgumentError, match="prefix_cache"):
        nl.Context(model, prefix_cache="yes")
    with pytest.raises(nl.InvalidArgumentError, match="prefix_cache_mb"):
        nl.Context(model, prefix_cache_mb=-1)


# -- the cache on its own: lookup, budget, sliding windows ---------------------------------


def fake(n):
    return bytes(n)


def test_lookup_returns_the_longest_restorable_prefix_and_extends_it_token_by_token():
    cache = PrefixCache(max_bytes=10_000, n_swa=0)
    base = list(range(100, 164))  # 4 blocks
    cache.add(base[:32], fake(10))
    cache.add(base[:64], fake(10))
    snapshot, n = cache.lookup(base[:40] + [1, 2, 3], limit=42)
    assert snapshot.n_tokens == 64 and n == 40  # cut inside the longer snapshot
    snapshot, n = cache.lookup(base + [5], limit=64)
    assert snapshot.n_tokens == 64 and n == 64
    assert cache.lookup(base[:20], limit=15) == (None, 0)  # shorter than a block: nothing to look up by
    assert cache.lookup([1] + base, limit=60) == (None, 0)


def test_batch_invariant_lookup_restores_only_tokens_that_took_the_prompts_kernel():
    cache = PrefixCache(max_bytes=10_000, n_swa=0)
    base = list(range(100, 400))
    cache.add(base[:192], fake(10), n_tiled=192)  # three whole tiles
    # within tiled parts a restore ends at a whole tile, so the rest of the prompt's tiled part is whole tiles
    snapshot, n = cache.lookup(base[:150] + [1, 2], limit=151, n_tiled=128)
    assert snapshot.n_tokens == 192 and n == 128
    assert cache.lookup(base[:60] + [1], limit=61, n_tiled=0) == (None, 0)  # less than a tile in common
    # an instruction's one-row part (192..208) is restored only where the prompt's tiled part ends at 192 too
    cache.add(base[:208], fake(10), n_tiled=192)
    snapshot, n = cache.lookup(base[:205] + [1, 2, 3], limit=207, n_tiled=192)
    assert snapshot.n_tokens == 208 and n == 205
    snapshot, n = cache.lookup(base[:205] + [1] * 60, limit=264, n_tiled=256)  # its 192..256 take the tiled kernel
    assert n == 192
    snapshot, n = cache.lookup(base[:205] + [1], limit=205, n_tiled=128)  # its 128.. take the one-row kernel
    assert n == 128
    # the same tokens with another kernel boundary are another snapshot, not one already there
    assert cache.covers(base[:208], n_tiled=192) and not cache.covers(base[:208], n_tiled=128)
    assert cache.add(base[:208], fake(10), n_tiled=128)


def test_a_snapshot_longer_than_the_sliding_window_is_only_restored_whole():
    cache = PrefixCache(max_bytes=10_000, n_swa=40)
    base = list(range(100, 164))
    cache.add(base[:32], fake(10))
    cache.add(base[:64], fake(10))
    assert cache.lookup(base + [1], limit=64)[1] == 64  # whole: fine
    snapshot, n = cache.lookup(base[:50], limit=49)  # cutting the 64-token one would lose SWA cells
    assert snapshot.n_tokens == 32 and n == 32


def test_the_least_recently_used_snapshot_goes_first():
    cache = PrefixCache(max_bytes=25, n_swa=0)
    a, b, c = ([k] * BLOCK for k in (1, 2, 3))
    assert cache.add(a, fake(10)) and cache.add(b, fake(10))
    cache.lookup(a + [0], limit=BLOCK)  # a is used again, so b is now the oldest
    assert cache.add(c, fake(10))
    assert cache.covers(a) and cache.covers(c) and not cache.covers(b)
    assert cache.nbytes == 20 and len(cache) == 2
    assert not cache.add([4] * BLOCK, fake(26))  # larger than the whole budget
    cache.clear()
    assert cache.nbytes == 0 and len(cache) == 0 and not cache.covers(a)


# -- the radix tree against a brute-force reference -------------------------------------------


class ScanningCache:
    """The cache's rules by brute force: every snapshot compared with the prompt, token by token."""

    def __init__(self, max_bytes, n_swa):
        self.max_bytes, self.n_swa = max_bytes, n_swa
        self.snapshots = []  # (tokens, data, n_tiled), least recently used first

    def lookup(self, tokens, limit, n_tiled=0):
        wanted = tuple(tokens[:max(limit, 0)])
        best, best_n = None, 0
        for snapshot in self.snapshots:  # a later one, used more recently, wins a tie
            there, _, n_there = snapshot
            common = next((i for i, (a, b) in enumerate(zip(there, wanted)) if a != b), min(len(there), len(wanted)))
            if common < BLOCK:
                continue
            n = restorable(common, n_there, n_tiled)
            if n < len(there) and not (self.n_swa == 0 or len(there) <= self.n_swa):
                continue
            if n > 0 and n >= best_n:
                best, best_n = snapshot, n
        if best is not None:
            self.snapshots = [s for s in self.snapshots if s is not best] + [best]
        return best, best_n

    def discard(self, data):
        self.snapshots = [s for s in self.snapshots if s[1] is not data]

    def add(self, tokens, data, n_tiled=0):
        n_tiled = min(n_tiled, len(tokens))
        if len(data) > self.max_bytes or self.lookup(tokens, len(tokens), n_tiled)[1] == len(tokens):
            return False
        while sum(len(s[1]) for s in self.snapshots) + len(data) > self.max_bytes:
            self.snapshots.pop(0)
        self.snapshots.append((tuple(tokens), data, n_tiled))
        return True


def check_tree(cache):
    """The tree's invariants: each node's `extending` counts the cuttable snapshots at or below it
    and names the most recently used; no branchless node without a snapshot; depths add up."""
    order = {id(s): i for i, s in enumerate(cache._lru.values())}
    assert sorted(s.used for s in cache._lru.values()) == [s.used for s in cache._lru.values()]

    def walk(node, depth):
        assert node.depth == depth + len(node.edge)
        below = [s for s in node.own.values() if cache._cuttable(s)]
        assert all(s.node is node and len(s.tokens) == node.depth for s in node.own.values())
        for first, child in node.children.items():
            assert child.parent is node and child.edge[0] == first
            below += walk(child, node.depth)
        if node.parent is not None:
            assert node.own or len(node.children) > 1
            grouped = {}
            for s in sorted(below, key=lambda s: order[id(s)]):
                grouped.setdefault(s.n_tiled, []).append(s)
            assert {n: (count, id(latest)) for n, (count, latest) in node.extending.items()} == {
                n: (len(group), id(group[-1])) for n, group in grouped.items()
            }
        return below

    walk(cache._root, 0)


# prompts made of a few pieces, so that they share prefixes and part inside and at the edges of blocks
PIECES = [[1] * BLOCK, [2] * 7, list(range(3, 26)), [1], [2] * 40, [1] * 9 + [2]]
token_lists = st.lists(st.sampled_from(range(len(PIECES))), max_size=8).flatmap(
    lambda pieces: st.lists(st.integers(0, 3), max_size=3).map(
        lambda tail: [t for p in pieces for t in PIECES[p]] + tail
    )
)
n_tiled = st.sampled_from([0, 0, 0, TILE, 2 * TILE])
# a few prompts, then operations on their prefixes, each extended by a few tokens or none
operations = st.tuples(
    st.lists(token_lists, min_size=1, max_size=4),
    st.lists(
        st.tuples(
            st.sampled_from(["add", "add", "add", "lookup", "lookup", "discard"]),
            st.integers(0, 3), st.integers(0, 200),
            st.lists(st.integers(0, 3), max_size=20), st.integers(-1, 200), n_tiled,
        ),
        max_size=40,
    ),
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(operations, st.sampled_from([0, 20, 100]), st.sampled_from([10, 40, 1000]))
def test_the_tree_answers_as_a_scan_of_every_snapshot_would(operations, n_swa, max_bytes):
    cache, reference = PrefixCache(max_bytes, n_swa), ScanningCache(max_bytes, n_swa)
    prompts, steps = operations
    for op, which, cut, tail, size, n in steps:
        tokens = prompts[which % len(prompts)][:cut] + tail
        if op == "add":
            data = bytearray(1 + size % 12)  # a new object each time: which snapshot is which
            assert (cache.add(tokens, data, n) is not None) == reference.add(tokens, data, n)
        elif op == "discard" and len(cache):  # any one, as the plan drops what one prompt's sequences share
            snapshot = list(cache._lru.values())[cut % len(cache)]
            cache.discard(snapshot)
            cache.discard(snapshot)  # gone already: nothing happens
            reference.discard(snapshot.data)
        elif op == "lookup":
            limit = min(size, len(tokens))
            snapshot, restored = cache.lookup(tokens, limit, n)
            expected, expected_n = reference.lookup(tokens, limit, n)
            assert restored == expected_n
            assert (snapshot and snapshot.data) is (expected and expected[1])
        assert [s.data for s in cache._lru.values()] == [s[1] for s in reference.snapshots]
        assert cache.nbytes == sum(len(s[1]) for s in reference.snapshots) <= max_bytes
        check_tree(cache)
    cache.clear()
    assert not cache._root.children and len(cache) == 0


def test_a_discarded_snapshot_hands_its_place_to_the_latest_of_the_others():
    cache = PrefixCache(max_bytes=1000, n_swa=0)
    base = list(range(100, 164))
    older, newer, other = fake(10), fake(10), fake(10)
    cache.add(base[:40] + [1] * 8, older)
    cache.add(base[:40] + [2] * 8, newer)  # the latest below the node of base[:40]
    cache.add(base[:40] + [1] * 4 + [3] * 4, other)
    cache.lookup(base[:40] + [2] * 8, limit=48)
    (newest,) = [s for s in cache._lru.values() if s.data is newer]
    cache.discard(newest)
    check_tree(cache)
    snapshot, n = cache.lookup(base[:40] + [4], limit=41)
    assert snapshot.data is other and n == 40  # the most recently used of those left
    snapshot, n = cache.lookup(base[:40] + [1] * 8 + [5], limit=49)
    assert snapshot.data is older and n == 48
    check_tree(cache)
