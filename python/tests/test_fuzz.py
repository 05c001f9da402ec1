"""Property-based fuzzing: whatever a caller passes, each call returns a result or raises a newrllama4 error.

Examples are derandomized (the same on every run, so that a failure in CI replays
anywhere) and bounded to keep the suite fast; raise `max_examples` to search longer.
"""

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import newrllama4 as nl
from newrllama4 import for_r

FUZZ = settings(
    max_examples=80, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
N_CTX = 32

SPECIAL = ["<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>", "\x00", " ", "\n", "é"]


def texts_of(characters):
    """Strings of these characters mixed with the vocabulary's special tokens, NUL and spaces."""
    return st.lists(st.one_of(characters, st.sampled_from(SPECIAL)), max_size=30).map("".join)


texts = texts_of(st.characters(exclude_categories=["Cs"]))  # every string UTF-8 can encode
any_texts = texts_of(st.characters(codec=None, categories=None, exclude_categories=[]) | st.just("\ud800"))
token_lists = st.lists(st.integers(-3, 700), max_size=N_CTX + 8)
prompts = st.lists(st.one_of(texts, token_lists), max_size=6)
# values in range, so that the engine runs
valid_params = st.fixed_dictionaries(
    {},
    optional={
        "max_tokens": st.integers(1, N_CTX + 8),
        "temperature": st.floats(0, 5),
        "top_k": st.integers(0, 1000),
        "top_p": st.floats(0.01, 1),
        "min_p": st.floats(0, 1),
        "repeat_last_n": st.integers(0, 100),
        "penalty_repeat": st.floats(0.01, 3),
        "seed": st.one_of(st.none(), st.integers(-1, 2**64)),
        "stop": st.one_of(st.none(), texts.filter(bool), st.lists(texts.filter(bool), min_size=1, max_size=3)),
    },
)
# anything a caller might pass as a parameter
odd_values = st.one_of(
    st.none(), st.booleans(), any_texts, st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70), st.lists(st.integers(), max_size=2),
)
# one odd parameter per call, so that each reaches its own check
any_params = st.tuples(st.sampled_from(sorted(valid_params.wrapped_strategy.optional)), odd_values).map(
    lambda item: dict([item])
)


@pytest.fixture(scope="module")
def fuzz_ctx(model):
    with nl.Context(model, n_ctx=N_CTX, n_seq_max=3, n_batch=16) as context:
        yield context


def check_outcome(context, prompts, params):
    """Every outcome of a call is a result whose answers reach R, or an InvalidArgumentError."""
    try:
        result = context.generate_parallel(prompts, **params)
    except nl.InvalidArgumentError as error:
        event(f"refused: {error.argument.split('[')[0]}")
        return
    finally:
        assert context.cached_tokens() == 0
    assert len(result) == len(prompts)
    for completion in result:
        event(f"prompt: {type(completion.error).__name__ if completion.error else completion.finish_reason}")
        if completion.finish_reason == "error":
            assert isinstance(completion.error, nl.PromptError)
        else:
            assert completion.finish_reason in ("stop", "length") and completion.error is None
            assert len(completion.tokens) == completion.n_tokens
            assert completion.n_prompt_tokens + completion.n_tokens <= N_CTX + 1
    for text in for_r.to_r(result)["texts"]:
        text.encode("utf-8")
        assert "\x00" not in text


@FUZZ
@given(prompts=prompts, params=valid_params)
def test_any_prompts_give_a_result_or_a_classed_error(fuzz_ctx, prompts, params):
    check_outcome(fuzz_ctx, prompts, params)


@FUZZ
@given(prompts=st.lists(texts, min_size=1, max_size=4), data=st.data())
def test_a_prompt_utf8_cannot_encode_is_refused_by_its_index(fuzz_ctx, prompts, data):
    index = data.draw(st.integers(0, len(prompts) - 1))
    cut = data.draw(st.integers(0, len(prompts[index])))
    prompts[index] = prompts[index][:cut] + data.draw(st.characters(categories=["Cs"])) + prompts[index][cut:]
    with pytest.raises(nl.InvalidArgumentError) as info:
        fuzz_ctx.generate_parallel(prompts)
    assert info.value.argument == f"prompts[{index}]"


@FUZZ
@given(params=any_params)
def test_any_parameter_values_give_a_result_or_a_classed_error(fuzz_ctx, params):
    check_outcome(fuzz_ctx, ["hello how are you", [1, 5, 6]], params)


@FUZZ
@given(text=any_texts)
def test_any_encodable_text_round_trips_through_the_tokenizer(model, text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        with pytest.raises(nl.InvalidArgumentError):
            model.tokenize(text)
        return
    # "\u2581" is SentencePiece's space marker: the tokenizer keeps it, the detokenizer writes a space
    assert model.detokenize(model.tokenize(text, add_special=False)) == text.replace("\u2581", " ")


@FUZZ
@given(tokens=st.lists(st.integers(0, 600), max_size=40))
def test_any_token_ids_detokenize_to_text_r_can_hold(model, tokens):
    try:
        text = model.detokenize(tokens)
    except nl.InvalidArgumentError:
        assert any(t >= model.n_vocab for t in tokens)
        return
    assert isinstance(for_r.call(model.detokenize, tokens), str)
    assert "\x00" not in for_r.r_string(text)
