"""Any string a caller passes is a prompt or an InvalidArgumentError naming it, never a bare encoding error."""

import pytest

import newrllama4 as nl


def test_a_prompt_with_a_lone_surrogate_is_an_argument_error_naming_it(ctx):
    with pytest.raises(nl.InvalidArgumentError) as info:
        ctx.generate_parallel(["fine", "bad \udc80 text"])
    assert info.value.argument == "prompts[1]"
    assert "surrogate" in str(info.value) and "position 4" in str(info.value)


def test_nul_in_a_prompt_is_text_like_any_other(ctx, model):
    text = "hello\x00 how are you"
    tokens = model.tokenize(text, add_special=True, parse_special=True)
    assert model.detokenize(tokens[1:]) == text  # spelt out as a byte token, not cut short
    by_text, by_tokens = ctx.generate_parallel([text, tokens], max_tokens=6, temperature=0)
    assert by_text.finish_reason != "error" and by_text.n_prompt_tokens == len(tokens)
    assert by_text.text == by_tokens.text


def test_tokenize_refuses_a_lone_surrogate(model):
    with pytest.raises(nl.InvalidArgumentError, match="text"):
        model.tokenize("\ud83d")  # half of an emoji's UTF-16 pair


def test_a_stop_string_with_a_lone_surrogate_is_refused(ctx):
    with pytest.raises(nl.InvalidArgumentError) as info:
        ctx.generate_parallel(["hello"], stop=["ok", "\ud800"])
    assert info.value.argument == "stop[1]"


@pytest.mark.parametrize("key, value", [("role", "us\x00er"), ("content", "hi\x00 there"), ("content", "\udfff")])
def test_chat_messages_llama_cpp_would_cut_short_or_cannot_encode_are_refused(model, key, value):
    message = {"role": "user", "content": "hello", key: value}
    with pytest.raises(nl.InvalidArgumentError) as info:
        model.apply_chat_template([message])
    assert info.value.argument == f"messages[0]['{key}']"


def test_a_model_path_that_is_not_utf8_still_loads(tmp_path, tiny_model_path):
    # file names are bytes on Linux; Python spells undecodable ones with surrogates
    odd = tmp_path / "tiny-\udce9.gguf"
    odd.write_bytes(open(tiny_model_path, "rb").read())
    with nl.Model(odd) as model:
        assert model.tokenize("hello")
