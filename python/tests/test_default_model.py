"""Integration with the embedded default model (Gemma 3 270M): slower, a few seconds each."""

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
