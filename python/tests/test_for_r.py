"""What reaches R: every string one that R can hold, whatever the model emits."""

import pytest

import newrllama4 as nl
from newrllama4 import for_r
from newrllama4.testing import call_emitting


@pytest.mark.parametrize(
    "text, expected",
    [
        ("plain", "plain"),
        ("a\x00b\x00", "a\ufffdb\ufffd"),
        ("lone \ud800 and \udfff", "lone \ufffd and \ufffd"),
        ("control \x01\x1b[31m\x7f kept", "control \x01\x1b[31m\x7f kept"),
        ("already \ufffd, café 🙂", "already \ufffd, café 🙂"),
    ],
)
def test_r_string_replaces_only_what_r_cannot_hold(text, expected):
    assert for_r.r_string(text) == expected
    for_r.r_string(text).encode("utf-8")  # a lone surrogate would raise here


def test_to_r_reaches_into_containers():
    value = {"a\x00": ["x\x00", ("y", 1)], "n": None}
    assert for_r.to_r(value) == {"a\ufffd": ["x\ufffd", ["y", 1]], "n": None}


def test_answers_holding_nul_reach_r_with_the_others_intact(ctx):
    prompts, seed = call_emitting(ctx, "\x00")
    params = dict(max_tokens=32, temperature=1.0, seed=seed)
    raw = ctx.generate_parallel(prompts, **params)
    assert any("\x00" in c.text for c in raw)
    converted = for_r.call(ctx.generate_parallel, prompts, **params)
    assert converted["texts"] == [c.text.replace("\x00", "\ufffd") for c in raw]
    assert converted["errors"] == [None] * len(prompts)
    assert converted["stats"]["prompts"] == len(prompts)


def test_failed_prompts_come_with_their_exceptions(ctx):
    converted = for_r.call(ctx.generate_parallel, ["hello", ""], max_tokens=2)
    assert converted["errors"][0] is None and isinstance(converted["errors"][1], nl.EmptyPromptError)


def test_whole_numbers_beyond_r_integers_become_doubles():
    converted = for_r.to_r({"needed_bytes": 82 * 10**9, "n_ctx": 4096, "negative": -(2**31), "flag": True})
    assert converted == {"needed_bytes": 82e9, "n_ctx": 4096, "negative": float(-(2**31)), "flag": True}
    assert type(converted["needed_bytes"]) is float and type(converted["n_ctx"]) is int
