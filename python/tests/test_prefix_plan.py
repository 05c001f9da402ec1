"""A call's shared prompt prefixes are decoded once and restored (PrefixPlan), within the call and
across calls, and outputs stay identical to solo."""

import random

import llama_cpp
import pytest

import newrllama4 as nl
from newrllama4 import _llama
from newrllama4.attention import TILE
from newrllama4.prefix_cache import BLOCK
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


def test_an_opening_that_few_texts_share_past_the_instruction_is_not_kept_after_the_call(model):
    # near-duplicate texts (pairs sharing an opening line) after one instruction: each pair's
    # opening is decoded once and restored by the other text, then dropped, where the
    # instruction and an opening that many texts share stay for later calls (and every
    # opening when keep_prompts asks for them)
    rng = random.Random(4)
    instruction = "Say whether the text is about the sea. " * 4
    openings = [" ".join(rng.choice(WORDS) for _ in range(5)) for _ in range(5)]  # under a tile
    texts = [f"{o} then {rng.choice(WORDS)}" for o in openings for _ in range(2)]
    texts += [f"{openings[0]} and so {w}" for w in WORDS[:3]]  # five texts share the first opening
    prompts = [f"{instruction}Text: {t}" for t in texts]
    with nl.Context(model, n_ctx=512, n_seq_max=3) as ctx:
        reference = run(model, prompts, n_seq_max=1, prefix_cache=False, max_tokens=4)
        first = ctx.generate_parallel(prompts, max_tokens=4, temperature=0)
        kept = sorted(len(s.tokens) for s in ctx._prefix_cache._lru.values())
        ctx._prefix_cache.keep_prompts = True
        ctx._prefix_cache.clear()
        asked = ctx.generate_parallel(prompts, max_tokens=4, temperature=0)
        all_kept = len(ctx._prefix_cache)
    assert tokens(first) == tokens(asked) == tokens(reference)
    assert first.stats.prefix_snapshots == 6  # the instruction, then each opening
    n_instruction = len(model.tokenize(f"{instruction}Text: "))
    assert len(kept) == 2 and n_instruction - BLOCK < kept[0] <= n_instruction < kept[1]
    assert all_kept >= 6  # every opening


def test_the_bytes_copied_are_the_snapshots_taken_and_restored(model):
    with nl.Context(model, n_ctx=512, n_seq_max=4) as ctx:
        cold = ctx.generate_parallel(PROMPTS[:12], max_tokens=2, temperature=0)
        warm = ctx.generate_parallel(PROMPTS[12:24], max_tokens=2, temperature=0)
    assert cold.stats.prefix_cache_snapshots == cold.stats.prefix_snapshots == 3  # the three instructions
    assert cold.stats.prefix_copied_bytes > cold.stats.prefix_cache_bytes  # taken, then restored by the others
    assert warm.stats.prefix_snapshots == 0 and warm.stats.prefix_copied_bytes > 0  # restored only


def test_a_label_questions_prompt_is_dropped_once_its_scoring_sequences_have_restored_it(model):
    prompts, labels = PROMPTS[:9], ["yes", "no", "maybe"]
    reference = run(model, prompts, n_seq_max=1, prefix_cache=False, labels=labels)
    with nl.Context(model, n_ctx=512, n_seq_max=4) as ctx:
        dropped = ctx.generate_parallel(prompts, labels=labels, temperature=0)
        ctx.clear_cache()
        ctx._prefix_cache.keep_prompts = True
        kept = ctx.generate_parallel(prompts, labels=labels, temperature=0)
    for result in (dropped, kept):
        assert [c.label_probs for c in result] == [c.label_probs for c in reference]
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
