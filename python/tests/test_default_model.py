"""Integration with the embedded default model (Gemma 3 270M): slower, a few seconds each."""

import random
import re

import pytest

import newrllama4 as nl
from conftest import random_prompts

pytestmark = pytest.mark.slow


def test_default_model_loads_and_writes_english(gemma):
    assert "gemma" in gemma.description.lower() or gemma.n_params > 200e6
    with nl.Context(gemma, n_ctx=512, n_seq_max=2) as ctx:
        result = ctx.generate_parallel(
            ["The capital of France is the city of", "Water is made of hydrogen and"], max_tokens=12, temperature=0
        )
    assert "Paris" in result[0].text
    assert "oxygen" in result[1].text.lower()
    for completion in result:
        assert re.search(r"[A-Za-z]{3,}", completion.text)


def test_default_model_is_a_base_model_without_chat_template(gemma):
    with pytest.raises(nl.ChatTemplateError):
        gemma.apply_chat_template([{"role": "user", "content": "Hi"}])


def test_default_model_batch_matches_solo(gemma):
    # a quantized model exercises the kernels where batch shape could change numerics:
    # mixed prompt lengths, more prompts than slots, sequences ending at different steps
    prompts = random_prompts(40, seed=11, max_words=50)
    lengths = dict(max_tokens=24, temperature=0)
    with nl.Context(gemma, n_ctx=256, n_seq_max=1, prefix_cache=False) as solo_ctx:
        solo = [c.tokens for c in solo_ctx.generate_parallel(prompts, **lengths)]
    with nl.Context(gemma, n_ctx=256, n_seq_max=16) as ctx:
        assert [c.tokens for c in ctx.generate_parallel(prompts, **lengths)] == solo


def long_prompts(rng_seed=21):
    """33 prompts of 100 to 600 tokens: three long instructions (100, 150 and 230 words) each
    followed by short texts, ten prompts each, and three long texts alone."""
    rng = random.Random(rng_seed)
    words = (
        "the council voted on the budget while players trained for the final and scientists "
        "measured the river after the storm in the old city near the mountain school"
    ).split()

    def text(n):
        return " ".join(rng.choice(words) for _ in range(n))

    instructions = [f"Instruction: {text(n)}\n" for n in (100, 150, 230)]
    shared = [f"{instructions[i % 3]}Text: {text(rng.randint(3, 40))}\nAnswer:" for i in range(30)]
    alone = [f"{text(n)}\nSummary:" for n in (140, 380, 570)]
    return shared + alone


GREEDY = dict(max_tokens=8, temperature=0)


@pytest.fixture(scope="module")
def long_solo(gemma):
    prompts = long_prompts()
    with nl.Context(gemma, n_ctx=1024, n_seq_max=1, prefix_cache=False) as ctx:
        return prompts, [c.tokens for c in ctx.generate_parallel(prompts, **GREEDY)]


def test_long_prompts_span_100_to_600_tokens(gemma, long_solo):
    lengths = [len(gemma.tokenize(p)) for p in long_solo[0]]
    assert min(lengths) >= 100 and max(lengths) >= 550 and max(lengths) <= 700


def test_long_prompts_batch_matches_solo_without_reuse(gemma, long_solo):
    # prompt chunks of up to 16 rows, cut at different places than alone, several
    # sequences per batch, sequences past 512 KV cells
    prompts, solo = long_solo
    with nl.Context(gemma, n_ctx=1024, n_seq_max=4, n_batch=64, prefix_cache=False) as ctx:
        assert [c.tokens for c in ctx.generate_parallel(prompts, **GREEDY)] == solo


TOPIC_WORDS = "the court ruled on the tariff while the team trained and the lab tested a vaccine".split()


def instruction_ending_into_a_tile(gemma, rng, n_words, into):
    """A labelling instruction of about `n_words` words whose length ends `into` (a range)
    tokens into a tile of 64; and its length."""
    while True:
        instruction = "Label the topic of the sentence. " + " ".join(rng.choice(TOPIC_WORDS) for _ in range(n_words)) + "\n"
        n_instruction = len(gemma.tokenize(instruction))
        if n_instruction % 64 in into:
            return instruction, n_instruction
        n_words += 1


def sentence_prompts(instruction, rng, n, max_words):
    return [f"{instruction}Sentence: {' '.join(rng.choice(TOPIC_WORDS) for _ in range(rng.randint(1, max_words)))}"
            "\nTopic:" for _ in range(n)]


def solo_cold_and_warm(gemma, prompts, n_seq_max):
    """Greedy answers alone, then half the prompts on a fresh context and half after them."""
    with nl.Context(gemma, n_ctx=512, n_seq_max=1, prefix_cache=False) as ctx:
        solo = [c.tokens for c in ctx.generate_parallel(prompts, **GREEDY)]
    with nl.Context(gemma, n_ctx=512, n_seq_max=n_seq_max) as ctx:
        half = len(prompts) // 2
        return solo, list(ctx.generate_parallel(prompts[:half], **GREEDY)), list(ctx.generate_parallel(prompts[half:], **GREEDY))


def shared_tokens(gemma, prompts):
    """How many leading tokens all the prompts share (the instruction and the template's "Sentence:"),
    checked to end inside a 16-token block, where a restore cut to blocks would stop short."""
    tokenized = [gemma.tokenize(p) for p in prompts]
    shared = next(i for i, column in enumerate(zip(*tokenized)) if len(set(column)) > 1)
    assert shared % 16
    return shared


def test_rows_restore_an_instructions_last_partial_tile_exactly(gemma):
    # the annotation job: an instruction whose last partial tile (one-row kernel, as each
    # row's short text) is restored by every row whose text stays within that tile
    rng = random.Random(5)
    instruction, n_instruction = instruction_ending_into_a_tile(gemma, rng, 120, range(8, 25))
    candidates = sentence_prompts(instruction, rng, 60, 12)
    prompts = [p for p in candidates if len(gemma.tokenize(p)) // 64 == n_instruction // 64][:24]
    assert len(prompts) == 24
    solo, cold, warm = solo_cold_and_warm(gemma, prompts, n_seq_max=8)
    assert [c.tokens for c in cold + warm] == solo
    restored = [c.n_cached_tokens for c in cold[1:] + warm]
    assert all(n >= shared_tokens(gemma, prompts) for n in restored)  # past the last whole tile, to the token


def test_rows_whose_text_crosses_a_tile_boundary_restore_all_of_the_instruction(gemma):
    # an instruction ending 40 to 56 tokens into a tile: most rows' texts carry their prompt
    # into the next tile. Each row's tiled part still ends within the instruction, so every
    # row but the first of each tiled end restores the instruction to its last token;
    # texts of different lengths go through one-row chunks padded to one length and slots
    # freed in any order (attention.throwaway_rows)
    rng = random.Random(8)
    instruction, n_instruction = instruction_ending_into_a_tile(gemma, rng, 100, range(40, 57))
    prompts = sentence_prompts(instruction, rng, 24, 30)
    crossing = sum(len(gemma.tokenize(p)) // 64 > n_instruction // 64 for p in prompts)
    assert 4 <= crossing <= 20
    solo, cold, warm = solo_cold_and_warm(gemma, prompts, n_seq_max=6)
    assert [c.tokens for c in cold + warm] == solo
    restored = [c.n_cached_tokens for c in cold + warm]
    assert sum(n >= shared_tokens(gemma, prompts) for n in restored) >= len(prompts) - 2


@pytest.mark.parametrize("n_seq_max, n_batch", [(16, 256), (3, 512)])
def test_long_prompts_with_prefix_reuse_match_solo_cold_and_warm(gemma, long_solo, n_seq_max, n_batch):
    prompts, solo = long_solo
    with nl.Context(gemma, n_ctx=1024, n_seq_max=n_seq_max, n_batch=n_batch) as ctx:
        cold = ctx.generate_parallel(prompts, **GREEDY)
        warm = ctx.generate_parallel(prompts[::-1], **GREEDY)
    assert [c.tokens for c in cold] == solo
    assert [c.tokens for c in warm][::-1] == solo
    # each instruction decoded once, then restored by the other nine prompts, in whole
    # tiles of 64 tokens (the rest of the instruction is decoded with each prompt's text)
    assert cold.stats.cached_prompt_tokens > 0.45 * cold.stats.prompt_tokens
    assert warm.stats.cached_prompt_tokens > cold.stats.cached_prompt_tokens


def test_prefixes_longer_than_the_sliding_window_are_reused_exactly(gemma):
    # Gemma 3's sliding window is 512 tokens: a snapshot past it holds only the window's
    # last cells for the SWA layers, so it may be restored whole but never cut shorter
    rng = random.Random(4)
    words = "a storm crossed the valley while the band played near the market of the town".split()
    long_prefix = " ".join(rng.choice(words) for _ in range(700))  # whole tiles past the window
    cut = long_prefix[: len(long_prefix) * 3 // 5]
    first = [long_prefix + " First answer:", long_prefix + " Second answer:", cut + " Third answer:"]
    later = [cut + " river. Fourth answer:", long_prefix + " Fifth answer:"]
    with nl.Context(gemma, n_ctx=1024, n_seq_max=1, prefix_cache=False) as solo_ctx:
        solo = [c.tokens for c in solo_ctx.generate_parallel(first + later, **GREEDY)]
    with nl.Context(gemma, n_ctx=1024, n_seq_max=2) as ctx:
        result = list(ctx.generate_parallel(first, **GREEDY)) + list(ctx.generate_parallel(later, **GREEDY))
    assert [c.tokens for c in result] == solo
    n_cut = len(gemma.tokenize(cut))
    assert result[1].n_cached_tokens > 512  # restored whole
    assert 0 < result[3].n_cached_tokens <= n_cut  # from the shorter snapshot, not by cutting the long one
    assert result[4].n_cached_tokens > 512


def test_seeded_sampling_with_the_r_defaults_is_the_same_alone_and_with_reuse(gemma):
    # temperature, top-k, top-p and the repetition penalty, over the 262k vocabulary:
    # each prompt draws from its own stream, so neither the batch nor restored prefixes
    # change what it writes
    prompts = long_prompts()[:12]
    sampled = dict(max_tokens=12, temperature=0.8, top_k=40, top_p=0.9, penalty_repeat=1.1, seed=2024)
    with nl.Context(gemma, n_ctx=1024, n_seq_max=1, prefix_cache=False) as solo_ctx:
        solo = [c.tokens for c in solo_ctx.generate_parallel(prompts, **sampled)]
    with nl.Context(gemma, n_ctx=1024, n_seq_max=8) as ctx:
        batched = ctx.generate_parallel(prompts, **sampled)
    assert [c.tokens for c in batched] == solo
    assert batched.stats.cached_prompt_tokens > 0
    assert len({tuple(t) for t in solo}) > len(solo) // 2  # the prompts do not all say the same


def test_hundreds_of_tokens_past_the_sliding_window_match_solo_with_features_kept(gemma):
    # 500 greedy tokens each: both sequences decode past Gemma's 512-token sliding
    # window side by side, keeping all three kinds of features through the eval
    # callback, on a fresh context and again on the same one; what each writes and
    # its states are what it gets alone. The prompts are the first two that run all 500
    # tokens alone: where an end token is a near tie, the host's SIMD rounding decides
    # whether greedy decoding stops early (seed 41's first prompt stopped at 42 on one host)
    params = dict(max_tokens=500, temperature=0, hidden_states=["last", "middle", "mean"])
    prompts, solo = [], []
    with nl.Context(gemma, n_ctx=1024, n_seq_max=1, prefix_cache=False) as ctx:
        for prompt in random_prompts(8, seed=41, max_words=60):
            alone = ctx.generate(prompt, feature_texts=[prompt], **params)
            if len(alone.tokens) == 500:
                prompts.append(prompt)
                solo.append(alone)
            if len(prompts) == 2:
                break
    assert len(prompts) == 2, "fewer than two of eight prompts ran 500 tokens alone: try another seed"
    with nl.Context(gemma, n_ctx=1024, n_seq_max=2) as ctx:
        runs = [ctx.generate_parallel(prompts, feature_texts=prompts, **params) for _ in range(2)]
    assert all(len(gemma.tokenize(p)) + 500 > 512 for p in prompts)
    assert solo[0].tokens != solo[1].tokens
    for run in runs:
        assert [c.tokens for c in run] == [c.tokens for c in solo]
        assert [c.hidden_state for c in run] == [c.hidden_state for c in solo]


def test_labels_pick_the_likely_label_and_match_solo_on_long_prompts(gemma):
    # facts the model knows with a margin: "The largest planet ..." was Jupiter 0.38 against
    # Mars 0.35 and flipped when the tiled matmul changed the rounding
    facts = ["The capital of France is", "Water is made of hydrogen and", "The planet closest to the Sun is"]
    labels = [["London", "Paris", "Berlin"], ["nitrogen", "carbon", "oxygen"], ["Mercury", "Jupiter", "Saturn"]]
    with nl.Context(gemma, n_ctx=512, n_seq_max=3) as ctx:
        answers = ctx.generate_parallel(facts, labels=labels, temperature=0)
    assert [c.label for c in answers] == ["Paris", "oxygen", "Mercury"]
    assert answers[0].label_probs["Paris"] > 0.9
    prompts = long_prompts()[:9]
    topics = ["council budget", "sports final", "river science"]  # multi-token labels
    # alone, one prompt's scoring sequences at a time (each prompt's own prefix reused)
    with nl.Context(gemma, n_ctx=1024, n_seq_max=1) as solo_ctx:
        solo = solo_ctx.generate_parallel(prompts, labels=topics, temperature=0)
    with nl.Context(gemma, n_ctx=1024, n_seq_max=8) as ctx:
        batched = ctx.generate_parallel(prompts, labels=topics, temperature=0)
    assert [c.label_probs for c in batched] == [c.label_probs for c in solo]
    assert batched.stats.cached_prompt_tokens > 0.5 * batched.stats.prompt_tokens
