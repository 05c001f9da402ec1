"""Bad arguments raise the right error class; a bad prompt fails alone."""

import pytest

import newrllama4 as nl
from newrllama4 import _llama

GOOD = ["hello how are you", "once upon a time", "tell me a story"]


@pytest.mark.parametrize(
    "argument, value",
    [
        ("max_tokens", -1), ("max_tokens", 0), ("max_tokens", 2.5), ("max_tokens", None), ("max_tokens", "9"),
        ("temperature", -0.1), ("temperature", float("nan")), ("temperature", None),
        ("top_p", 0.0), ("top_p", 1.5), ("top_k", -1), ("min_p", 2.0),
        ("repeat_last_n", -3),
        ("penalty_repeat", 0.0), ("seed", -2), ("seed", 1.5),
        ("stop", 3), ("stop", [""]), ("stop", ["ok", None]), ("on_progress", "not callable"),
    ],
)
def test_bad_sampling_arguments_name_the_argument_and_value(ctx, argument, value):
    with pytest.raises(nl.InvalidArgumentError) as info:
        ctx.generate_parallel(GOOD, **{argument: value})
    assert argument in str(info.value) and info.value.argument == argument
    assert isinstance(info.value, ValueError)


def test_a_penalty_window_longer_than_any_sequence_sees_the_whole_sequence(ctx):
    # the window is a slice of the sequence's tokens, never allocated at its nominal size
    long = ctx.generate_parallel(GOOD, max_tokens=8, temperature=0, repeat_last_n=10**6)
    cut = ctx.generate_parallel(GOOD, max_tokens=8, temperature=0, repeat_last_n=ctx.n_ctx + 1)
    assert long.texts == cut.texts


@pytest.mark.parametrize("prompts", [
    None, "a single string", 42, [None], ["ok", 3], [["a"]], [[1, True]], {"a": 1},
    [[{"role": "user"}]], [[{"role": "user", "content": 3}]], [[{"role": "user", "content": "hi"}, 3]],
])
def test_bad_prompts_argument(ctx, prompts):
    with pytest.raises(nl.InvalidArgumentError, match="prompts"):
        ctx.generate_parallel(prompts)


def test_an_empty_prompt_list_gives_an_empty_result(ctx):
    result = ctx.generate_parallel([])
    assert len(result) == 0 and result.stats.prompts == 0


def test_missing_directory_and_non_gguf_model_files(tmp_path):
    with pytest.raises(nl.ModelLoadError, match="does not exist"):
        nl.Model(tmp_path / "missing.gguf")
    with pytest.raises(nl.ModelLoadError, match="directory"):
        nl.Model(tmp_path)
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("hello")
    with pytest.raises(nl.ModelLoadError, match="not a GGUF"):
        nl.Model(not_gguf)
    with pytest.raises(nl.InvalidArgumentError, match="path"):
        nl.Model(123)


def test_a_corrupt_gguf_is_a_load_error_not_a_crash(tmp_path, tiny_model_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(open(tiny_model_path, "rb").read()[:5000])
    with pytest.raises(nl.ModelLoadError) as info:
        nl.Model(broken)
    assert info.value.path == str(broken)


def test_bad_prompts_fail_alone(ctx, model):
    too_long = "hello " * 600  # more tokens than n_ctx=512
    prompts = [GOOD[0], "", too_long, [], [1, model.n_vocab + 5], GOOD[1]]
    result = ctx.generate_parallel(prompts, max_tokens=8, temperature=0)
    reasons = [c.finish_reason for c in result]
    assert reasons[0] != "error" and reasons[5] != "error"
    assert reasons[1:5] == ["error"] * 4
    assert isinstance(result[1].error, nl.EmptyPromptError) and result[1].error.index == 1
    assert isinstance(result[2].error, nl.PromptTooLongError)
    assert result[2].error.limit == 512 and result[2].error.n_tokens > 512
    assert isinstance(result[3].error, nl.EmptyPromptError)
    assert isinstance(result[4].error, nl.InvalidTokenError) and result[4].error.token == model.n_vocab + 5
    assert all(isinstance(c.error, nl.PromptError) for c in result[1:5])
    assert result.stats.failures == 4
    # the good prompts are unaffected by the bad ones
    assert result[0].text == ctx.generate(GOOD[0], max_tokens=8, temperature=0).text
    assert result[5].text == ctx.generate(GOOD[1], max_tokens=8, temperature=0).text


def test_a_prompt_that_fits_exactly_completes_with_length(model):
    with nl.Context(model, n_ctx=32, n_seq_max=2) as ctx:
        tokens = model.tokenize("hello " * 40)[:32]
        result = ctx.generate_parallel([tokens, "hello"], max_tokens=50, temperature=0)
    assert result[0].finish_reason == "length" and result[0].n_tokens == 1
    # generation stops at the context window, not with an error
    assert result[1].finish_reason in ("length", "stop") and result[1].n_prompt_tokens + result[1].n_tokens <= 33


@pytest.fixture
def failing_decode(monkeypatch):
    """Make llama_decode fail for every batch holding a token of slot 1."""
    real_decode = _llama.TokenBatch.decode

    def decode(self, ctx):
        breaks = any(self._seq_id[i][0] == 1 for i in range(self.n_tokens))
        return -1 if breaks else real_decode(self, ctx)

    monkeypatch.setattr(_llama.TokenBatch, "decode", decode)


def test_a_sequence_that_breaks_decode_fails_alone_after_retries(model, failing_decode):
    with nl.Context(model, n_ctx=256, n_seq_max=3) as ctx:
        result = ctx.generate_parallel(GOOD, max_tokens=6, temperature=0)
        assert ctx.cached_tokens() == 0
    assert [c.finish_reason for c in result].count("error") == 1
    failed = next(c for c in result if c.finish_reason == "error")
    assert isinstance(failed.error, nl.DecodeError) and failed.error.code == -1
    assert result.stats.retries >= 1


def test_decode_failure_retry_keeps_the_other_outputs_identical(model, failing_decode):
    with nl.Context(model, n_ctx=256, n_seq_max=3) as ctx:
        result = ctx.generate_parallel(GOOD, max_tokens=6, temperature=0)
    failed = next(i for i, c in enumerate(result) if c.finish_reason == "error")
    reference = {}
    with nl.Context(model, n_ctx=256, n_seq_max=1) as solo:
        reference = {i: solo.generate(p, max_tokens=6, temperature=0).text for i, p in enumerate(GOOD)}
    assert all(result[i].text == reference[i] for i in range(3) if i != failed)
