"""Model: tokenizer, detokenizer, chat template, metadata."""

import ctypes
import logging

import llama_cpp
import pytest

import newrllama4 as nl


def test_tokenize_round_trip(model):
    tokens = model.tokenize("hello how are you")
    assert tokens[0] == 1  # BOS from the vocabulary's add_bos flag
    assert model.tokenize("hello how are you", add_special=False) == tokens[1:]
    assert model.detokenize(tokens[1:]) == "hello how are you"


def test_text_outside_the_vocabulary_round_trips_through_byte_tokens(model):
    text = "café 日本 🙂"
    assert model.detokenize(model.tokenize(text, add_special=False)) == text


def test_special_tokens_are_parsed_only_on_request(model):
    assert 3 not in model.tokenize("<|im_start|>user")
    assert model.tokenize("<|im_start|>user", parse_special=True)[1] == 3


def test_tokenizer_argument_checks(model):
    with pytest.raises(nl.InvalidArgumentError, match="text"):
        model.tokenize(None)
    with pytest.raises(nl.InvalidArgumentError, match="add_special"):
        model.tokenize("x", add_special="yes")
    with pytest.raises(nl.InvalidArgumentError, match=r"tokens\[1\]"):
        model.detokenize([5, model.n_vocab])
    with pytest.raises(nl.InvalidArgumentError, match="tokens"):
        model.detokenize("abc")


def test_chat_template(model):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]
    text = model.apply_chat_template(messages)
    assert text == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    assert not model.apply_chat_template(messages, add_generation_prompt=False).endswith("assistant\n")


@pytest.mark.parametrize("messages", [[], "hello", [{"role": "user"}], [{"role": 1, "content": "x"}]])
def test_chat_template_argument_checks(model, messages):
    with pytest.raises(nl.InvalidArgumentError, match="messages"):
        model.apply_chat_template(messages)


def test_metadata(model):
    assert model.n_vocab > 256 and model.n_ctx_train == 4096
    assert model.n_params > 0 and model.size > 0
    assert "tiny" in repr(model) or "llama" in repr(model)


def _model_of(context):
    return ctypes.cast(llama_cpp.llama_get_model(context._handle), ctypes.c_void_p).value


def _address(handle):
    return ctypes.cast(handle, ctypes.c_void_p).value


@pytest.fixture
def fast_lane_here(monkeypatch):
    """The fast lane in this process, as where ggml keeps its own settings (else worker.py runs it)."""
    monkeypatch.setattr("newrllama4.context.ggml_forces_tiled_matmul", lambda: False)


def test_one_sequence_fast_lane_contexts_share_a_repacked_copy_loaded_on_first_use(tiny_model_path, fast_lane_here):
    with nl.Model(tiny_model_path) as model:  # not the session's model, which may hold the copy already
        with nl.Context(model, n_ctx=64, n_seq_max=1) as invariant, \
                nl.Context(model, n_ctx=64, n_seq_max=2, batch_invariant=False) as batched_fast:
            assert _model_of(invariant) == _model_of(batched_fast) == _address(model.handle())
            assert model._repacked_handle is None
            with nl.Context(model, n_ctx=64, n_seq_max=1, batch_invariant=False) as fast, \
                    nl.Context(model, n_ctx=128, n_seq_max=1, batch_invariant=False) as other_fast:
                repacked = _address(model.handle(repacked=True))
                assert repacked != _address(model.handle())
                assert _model_of(fast) == _model_of(other_fast) == repacked
                assert fast.generate_parallel(["hello there"], max_tokens=4).texts[0]
    with pytest.raises(nl.ClosedError):
        model.handle(repacked=True)


def test_gemma_fast_lane_gets_ggml_repacked_weights(caplog, fast_lane_here):
    with caplog.at_level(logging.DEBUG, logger="newrllama4.llama_cpp"), nl.Model() as model:
        nl.Context(model, n_ctx=64, n_seq_max=1).close()
        assert "CPU_REPACK" not in caplog.text
        with nl.Context(model, n_ctx=64, n_seq_max=1, batch_invariant=False) as fast:
            assert fast.generate_parallel(["The capital of France is"], max_tokens=3, temperature=0).texts[0]
    assert "CPU_REPACK" in caplog.text  # llama.cpp logs the buffer of repacked matrices it loads


@pytest.mark.parametrize("which", ["model", "smollm2"])
def test_prompt_lengths_are_what_the_engine_decodes(which, request):
    model = request.getfixturevalue(which)
    conversation = [{"role": "system", "content": "Label it."}, {"role": "user", "content": "a long text " * 30}]
    prompts = ["hello how are you", "<|im_start|>user", [1, 2, 3], conversation] if which == "smollm2" else \
        ["hello how are you", "<|im_start|>user", [1, 2, 3], "word " * 200]
    lengths = model.prompt_lengths(prompts)
    assert lengths == [len(model.prompt_tokens(p)) for p in prompts]
    assert lengths[2] == 3
    # the engine's own count, where a prompt outgrows a context of 16 tokens
    with nl.Context(model, n_ctx=16, n_seq_max=1) as ctx:
        result = ctx.generate_parallel(prompts, max_tokens=1)
    for length, completion in zip(lengths, result):
        if length > 16:
            assert completion.error.n_tokens == length
        else:
            assert completion.error is None
