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
    with nl.Context(gemma, n_ctx=256, n_seq_max=1) as solo_ctx:
        solo = [c.tokens for c in solo_ctx.generate_parallel(prompts, **lengths)]
    with nl.Context(gemma, n_ctx=256, n_seq_max=16) as ctx:
        assert [c.tokens for c in ctx.generate_parallel(prompts, **lengths)] == solo


def long_prompts(rng_seed=21):
    """Prompts of 100 to 600 tokens: two long instructions, each followed by short texts, and long texts alone."""
    rng = random.Random(rng_seed)
    words = random_prompts(1, seed=rng_seed, max_words=1)[0].split() + (
        "the council voted on the budget while players trained for the final and scientists "
        "measured the river after the storm in the old city near the mountain school").split()

    def text(n):
        return " ".join(rng.choice(words) for _ in range(n))

    instructions = [f"Instruction: {text(90)}\n", f"Task: {text(230)}\n"]
    shared = [f"{instructions[i % 2]}Text: {text(rng.randint(3, 40))}\nAnswer:" for i in range(9)]
    alone = [f"{text(n)}\nSummary:" for n in (140, 380, 570)]
    return shared + alone


@pytest.fixture(scope="module")
def long_solo(gemma):
    prompts = long_prompts()
    with nl.Context(gemma, n_ctx=1024, n_seq_max=1) as ctx:
        return prompts, [c.tokens for c in ctx.generate_parallel(prompts, max_tokens=10, temperature=0)]


def test_long_prompts_span_100_to_600_tokens(gemma, long_solo):
    lengths = [len(gemma.tokenize(p)) for p in long_solo[0]]
    assert min(lengths) >= 100 and max(lengths) >= 550 and max(lengths) <= 700


@pytest.mark.parametrize("n_seq_max, n_batch", [(4, 64), (16, 100)])
def test_long_prompts_batch_matches_solo(gemma, long_solo, n_seq_max, n_batch):
    # prompt chunks of 4 to 64 rows, cut at different places, several sequences per batch,
    # sequences past 512 KV cells: a prompt's output is the same as alone
    prompts, solo = long_solo
    with nl.Context(gemma, n_ctx=1024, n_seq_max=n_seq_max, n_batch=n_batch) as ctx:
        assert [c.tokens for c in ctx.generate_parallel(prompts, max_tokens=10, temperature=0)] == solo
