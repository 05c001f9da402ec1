"""Shared prompt prefixes are decoded once and restored, and outputs stay identical to solo."""

import random

import llama_cpp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import newrllama4 as nl
from newrllama4 import _llama
from newrllama4.attention import TILE, restorable
from newrllama4.prefix_cache import BLOCK, PrefixCache
from conftest import WORDS, random_prompts


def grouped_prompts(n, seed=0):
    """Prompts made of one of three instructions (70 to 260 words: one to four whole tiles
    of 64 tokens to share) and a short text, plus a few alone."""
    rng = random.Random(seed)

    def text(words):
        return " ".join(rng.choice(WORDS) for _ in range(words))

    instructions = [f"instruction {text(words)}\n" for words in (70, 140, 260)]
    shared = [f"{instructions[i % 3]}text {text(rng.randint(1, 12))}" for i in range(n - 4)]
    return shared + random_prompts(4, seed=seed, max_words=80)


PROMPTS = grouped_prompts(40, seed=2)


def run(model, prompts, n_seq_max, n_batch=512, prefix_cache=True, **params):
    with nl.Context(model, n_ctx=512, n_seq_max=n_seq_max, n_batch=n_batch, prefix_cache=prefix_cache) as ctx:
        return ctx.generate_parallel(prompts, **{"max_tokens": 16, "temperature": 0, **params})


def tokens(result):
    assert all(c.finish_reason in ("stop", "length") for c in result)
    return [c.tokens for c in result]


@pytest.fixture(scope="module")
def solo(model):
    return tokens(run(model, PROMPTS, n_seq_max=1, prefix_cache=False))


@pytest.mark.parametrize("n_seq_max, n_batch", [(1, 512), (3, 512), (8, 512), (8, 16), (16, 40)])
def test_reuse_is_token_identical_to_solo_without_reuse(model, solo, n_seq_max, n_batch):
    result = run(model, PROMPTS, n_seq_max, n_batch)
    assert tokens(result) == solo
    # the instructions were decoded once each, not once per prompt
    assert result.stats.cached_prompt_tokens > 0.7 * result.stats.prompt_tokens


def test_decoded_tokens_are_the_uncached_ones_exactly_once(model):
    result = run(model, PROMPTS, n_seq_max=8, max_tokens=6)
    stats = result.stats
    assert stats.cached_prompt_tokens == sum(c.n_cached_tokens for c in result) > 0
    assert stats.decoded_tokens == sum(
        c.n_prompt_tokens - c.n_cached_tokens + c.n_tokens - (c.finish_reason == "length") for c in result
    )
    # a prompt restores at most everything but its last token, whose logits it needs
    assert all(c.n_cached_tokens < c.n_prompt_tokens for c in result)


def test_prompts_that_share_nothing_restore_nothing(model):
    prompts = [f"{w} " + p for w, p in zip(WORDS, random_prompts(12, seed=9))]
    assert run(model, prompts, n_seq_max=4).stats.cached_prompt_tokens == 0


def test_a_second_call_restores_the_first_calls_prefixes(model, solo):
    with nl.Context(model, n_ctx=512, n_seq_max=8) as ctx:
        first = ctx.generate_parallel(PROMPTS[:20], max_tokens=16, temperature=0)
        second = ctx.generate_parallel(PROMPTS[20:], max_tokens=16, temperature=0)
        ctx.clear_cache()
        cleared = ctx.generate_parallel(PROMPTS[20:], max_tokens=16, temperature=0)
        assert ctx.cached_tokens() == 0  # the cache lives in host memory, every KV stream is empty
    assert tokens(first) + tokens(second) == solo
    assert tokens(cleared) == tokens(second)
    assert first.stats.prefix_snapshots > 0 and first.stats.prefix_cache_bytes > 0
    # the instructions come from the first call, so nothing new needs decoding before the texts
    assert second.stats.cached_prompt_tokens > cleared.stats.cached_prompt_tokens
    assert second.stats.decoded_tokens < cleared.stats.decoded_tokens


def test_one_prompt_per_call_reuses_the_previous_calls_prompt(model):
    prompts = [p for p in PROMPTS if p.startswith(PROMPTS[2].split("\n")[0])][:4]
    with nl.Context(model, n_ctx=512, n_seq_max=2) as ctx:
        results = [ctx.generate(p, max_tokens=8, temperature=0) for p in prompts]
    with nl.Context(model, n_ctx=512, n_seq_max=2, prefix_cache=False) as ctx:
        fresh = [ctx.generate(p, max_tokens=8, temperature=0) for p in prompts]
    assert [c.tokens for c in results] == [c.tokens for c in fresh]
    assert results[0].n_cached_tokens == 0
    assert all(c.n_cached_tokens >= len(model.tokenize(prompts[0].split("\n")[0])) - TILE for c in results[1:])


def test_an_instructions_one_row_part_is_restored_where_the_tiled_parts_end_together(model):
    # instruction + text: the first tile takes the tiled kernel, the instruction's remaining
    # ~40 tokens and the text the one-row kernel, in every prompt; so they restore the
    # instruction to its last token, not only its whole tile
    rng = random.Random(8)
    instruction = "instruction " + " ".join(rng.choice(WORDS) for _ in range(96)) + "\n"
    n_instruction = len(model.tokenize(instruction))
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 10))) for _ in range(16)]
    prompts = [instruction + text for text in texts]
    solo = tokens(run(model, prompts, n_seq_max=1, prefix_cache=False))
    with nl.Context(model, n_ctx=512, n_seq_max=4) as ctx:
        cold = ctx.generate_parallel(prompts[:8], max_tokens=16, temperature=0)
        warm = ctx.generate_parallel(prompts[8:], max_tokens=16, temperature=0)
    assert all(TILE + BLOCK < n_instruction < c.n_prompt_tokens < 2 * TILE for c in list(cold) + list(warm))
    assert tokens(cold) + tokens(warm) == solo
    restored = [c.n_cached_tokens for c in list(cold)[1:] + list(warm)]
    assert n_instruction % BLOCK and all(n >= n_instruction for n in restored)  # past the whole tile


def test_a_cached_instruction_is_restored_without_waiting_for_the_few_tokens_past_it(model):
    # the cold call's prompts share the instruction; the warm call's share one more word.
    # The few tokens past what the cache holds, within its last block, are decoded with
    # each prompt rather than by an owner that every other prompt would wait for
    rng = random.Random(3)
    instruction = "instruction " + " ".join(rng.choice(WORDS) for _ in range(26)) + "\ntext"
    n_instruction = len(model.tokenize(instruction))
    assert n_instruction % BLOCK < BLOCK - 2

    def texts(n, first=""):
        return [f"{instruction}{first} {' '.join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))}" for _ in range(n)]

    cold_prompts, warm_prompts = texts(6), texts(6, first=" " + WORDS[0])
    solo = tokens(run(model, cold_prompts + warm_prompts, n_seq_max=1, prefix_cache=False, max_tokens=8))
    with nl.Context(model, n_ctx=512, n_seq_max=3) as ctx:
        cold = ctx.generate_parallel(cold_prompts, max_tokens=8, temperature=0)
        warm = ctx.generate_parallel(warm_prompts, max_tokens=8, temperature=0)
    assert tokens(cold) + tokens(warm) == solo
    assert cold.stats.prefix_snapshots == 1 and warm.stats.prefix_snapshots == 0
    assert [c.n_cached_tokens for c in warm] == [n_instruction] * 6


def test_sampled_outputs_with_a_seed_are_the_same_with_reuse_on_and_off(model):
    params = dict(temperature=1.0, top_k=0, top_p=1.0, seed=11, max_tokens=12)
    on = run(model, PROMPTS[:24], n_seq_max=6, **params)
    off = run(model, PROMPTS[:24], n_seq_max=6, prefix_cache=False, **params)
    assert on.stats.cached_prompt_tokens > 0
    assert tokens(on) == tokens(off)


def test_a_tiny_budget_caches_nothing_and_changes_nothing(model, solo):
    with nl.Context(model, n_ctx=512, n_seq_max=8, prefix_cache_mb=0.001) as ctx:
        result = ctx.generate_parallel(PROMPTS, max_tokens=16, temperature=0)
    assert tokens(result) == solo
    assert result.stats.prefix_snapshots == 0 and result.stats.prefix_cache_bytes == 0


def test_the_cache_stays_within_its_budget(model):
    with nl.Context(model, n_ctx=512, n_seq_max=4, prefix_cache_mb=0.5) as ctx:
        for seed in range(6):
            result = ctx.generate_parallel(grouped_prompts(12, seed=seed), max_tokens=2, temperature=0)
            assert 0 < result.stats.prefix_cache_bytes <= 0.5 * 2**20


def test_when_the_owner_of_a_shared_prefix_fails_the_others_still_complete(model, monkeypatch):
    prompts = [p for p in PROMPTS if p.startswith(PROMPTS[1].split("\n")[0])][:6]
    real_decode = _llama.TokenBatch.decode

    calls = []

    def decode(self, ctx):  # the first batch fails: the first prompt's, decoding the shared prefix alone
        calls.append(self.n_tokens)
        return -1 if len(calls) == 1 else real_decode(self, ctx)

    monkeypatch.setattr(_llama.TokenBatch, "decode", decode)
    result = run(model, prompts, n_seq_max=3)
    monkeypatch.undo()
    reference = run(model, prompts, n_seq_max=1, prefix_cache=False)
    assert [c.finish_reason == "error" for c in result] == [True] + [False] * (len(prompts) - 1)
    assert tokens(result[1:]) == tokens(reference[1:])
    assert result.stats.cached_prompt_tokens > 0  # the next prompt took over the shared prefix


def test_a_prompt_that_shares_nothing_leaves_a_snapshot_only_when_asked(model):
    # a snapshot costs a KV copy: of distinct texts none is kept unless the cache's
    # keep_prompts asks for it (the same texts sent again); a call of one prompt keeps its own
    texts = (f"{w} {p}" for w, p in zip(WORDS, random_prompts(30, seed=9)))
    prompts = [p for p in texts if len(model.tokenize(p)) > 40]
    assert len(prompts) >= 4
    with nl.Context(model, n_ctx=512, n_seq_max=3) as ctx:
        first = ctx.generate_parallel(prompts, max_tokens=4, temperature=0)
        again = ctx.generate_parallel(prompts, max_tokens=4, temperature=0)
        ctx._prefix_cache.keep_prompts = True
        kept = ctx.generate_parallel(prompts, max_tokens=4, temperature=0)
        reasked = ctx.generate_parallel(prompts, max_tokens=4, temperature=0)
    assert tokens(first) == tokens(again) == tokens(kept) == tokens(reasked)
    assert first.stats.prefix_snapshots == first.stats.prefix_cache_snapshots == first.stats.prefix_copied_bytes == 0
    assert again.stats.cached_prompt_tokens == 0
    assert kept.stats.prefix_snapshots == kept.stats.prefix_cache_snapshots == len(prompts)
    assert kept.stats.prefix_copied_bytes == kept.stats.prefix_cache_bytes > 0  # one copy each, no restore
    assert all(c.n_cached_tokens >= c.n_prompt_tokens - BLOCK for c in reasked)
    assert reasked.stats.prefix_snapshots == 0 and reasked.stats.prefix_copied_bytes == kept.stats.prefix_copied_bytes


def test_the_bytes_copied_are_the_snapshots_taken_and_restored(model):
    with nl.Context(model, n_ctx=512, n_seq_max=4) as ctx:
        cold = ctx.generate_parallel(PROMPTS[:12], max_tokens=2, temperature=0)
        warm = ctx.generate_parallel(PROMPTS[12:24], max_tokens=2, temperature=0)
    assert cold.stats.prefix_cache_snapshots == cold.stats.prefix_snapshots == 3  # the three instructions
    assert cold.stats.prefix_copied_bytes > cold.stats.prefix_cache_bytes  # taken, then restored by the others
    assert warm.stats.prefix_snapshots == 0 and warm.stats.prefix_copied_bytes > 0  # restored only


def test_a_label_questions_prompt_is_dropped_once_its_scoring_sequences_have_restored_it(model):
    prompts, labels = PROMPTS[:9], ["yes", "no", "maybe"]
    reference = run(model, prompts, n_seq_max=1, prefix_cache=False, choices=labels)
    with nl.Context(model, n_ctx=512, n_seq_max=4) as ctx:
        dropped = ctx.generate_parallel(prompts, choices=labels, temperature=0)
        ctx.clear_cache()
        ctx._prefix_cache.keep_prompts = True
        kept = ctx.generate_parallel(prompts, choices=labels, temperature=0)
    for result in (dropped, kept):
        assert [c.choice_probs for c in result] == [c.choice_probs for c in reference]
        assert result.stats.cached_prompt_tokens == kept.stats.cached_prompt_tokens
    # each prompt was snapshotted for its scoring sequences; only the instructions stay
    assert dropped.stats.prefix_snapshots == kept.stats.prefix_snapshots == kept.stats.prefix_cache_snapshots
    assert dropped.stats.prefix_cache_snapshots == 3


SHAPES = [
    ["hello how are you today"] * 3,  # duplicates
    [" ".join(WORDS[:30]), " ".join(WORDS[:30]) + " king", " ".join(WORDS[:31])],  # prefixes of each other
    [" ".join(WORDS[:n]) for n in (BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK, 2 * BLOCK + 1)],  # at block edges
    ["river"] + [" ".join(WORDS[:40]) + f" {w}" for w in WORDS[:5]],  # one short prompt among a group
]


@pytest.mark.parametrize("prompts", SHAPES)
def test_awkward_shapes_never_copy_kv_between_streams_and_match_solo(model, monkeypatch, prompts):
    # with one KV stream per sequence, llama_memory_seq_cp of a partial range across streams
    # aborts the process (a GGML_ASSERT); the engine must never call it
    def refuse(*args):
        raise AssertionError(f"llama_memory_seq_cp{args} called")

    monkeypatch.setattr(llama_cpp, "llama_memory_seq_cp", refuse)
    reference = tokens(run(model, prompts, n_seq_max=1, prefix_cache=False))
    for n_seq_max in (1, 2, 5):
        with nl.Context(model, n_ctx=512, n_seq_max=n_seq_max) as ctx:
            for _ in range(2):  # cold, then warm
                assert tokens(ctx.generate_parallel(prompts, max_tokens=16, temperature=0)) == reference


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
