"""Integration with the embedded default model (Gemma 3 270M): slower, a few seconds each."""

import re

import pytest

import newrllama4 as nl

pytestmark = pytest.mark.slow


def test_default_model_loads_and_writes_english(gemma):
    assert "gemma" in gemma.description.lower() or gemma.n_params > 200e6
    with nl.Context(gemma, n_ctx=512, n_seq_max=2) as ctx:
        result = ctx.generate_parallel(
            ["The capital of France is", "Water is made of hydrogen and"], max_tokens=12, temperature=0
        )
    assert "Paris" in result[0].text
    assert "oxygen" in result[1].text.lower()
    for completion in result:
        assert re.search(r"[A-Za-z]{3,}", completion.text)


def test_default_model_chat_template(gemma):
    text = gemma.apply_chat_template([{"role": "user", "content": "Hi"}])
    assert "<start_of_turn>user" in text and text.endswith("<start_of_turn>model\n")


def test_default_model_batch_matches_solo(gemma):
    prompts = [f"Write one sentence about the number {i}:" for i in range(10)]
    with nl.Context(gemma, n_ctx=256, n_seq_max=1) as solo_ctx:
        solo = solo_ctx.generate_parallel(prompts, max_tokens=16, temperature=0).texts
    with nl.Context(gemma, n_ctx=256, n_seq_max=8) as ctx:
        assert ctx.generate_parallel(prompts, max_tokens=16, temperature=0).texts == solo
