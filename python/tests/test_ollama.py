"""Models pulled with Ollama (ollama.py, and sources.py's ollama:NAME[:TAG]), in a stand-in store."""

import hashlib
from pathlib import Path

import pytest

import newrllama4 as nl
from newrllama4.ollama import ollama_display, ollama_name
from newrllama4.testing import write_ollama_model
from test_sources import generates, tiny_bytes  # noqa: F401  (a fixture)


@pytest.fixture
def ollama_home(tmp_path, monkeypatch, tiny_model_path):
    """A home folder whose ~/.ollama/models holds tiny:latest and tiny:chat."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("OLLAMA_MODELS", raising=False)
    store = tmp_path / ".ollama" / "models"
    write_ollama_model(store, "tiny", "latest", tiny_model_path)
    write_ollama_model(store, "tiny", "chat", tiny_model_path)
    return store


def test_an_ollama_model_is_read_in_place_from_the_store(ollama_home, tiny_model_path):
    digest = "sha256:" + hashlib.sha256(Path(tiny_model_path).read_bytes()).hexdigest()
    for spec in ("ollama:tiny", "ollama:tiny:latest", "ollama:library/tiny:chat"):
        with nl.Model(spec) as model:
            assert model.path == str(ollama_home / "blobs" / digest.replace(":", "-"))
            assert model.source["ollama_digest"] == digest and generates(model)
    assert model.source == {"source": "ollama:library/tiny:chat", "ollama_model": "tiny:chat",
                            "ollama_digest": digest}


def test_ollama_models_is_looked_up_first(ollama_home, tmp_path, monkeypatch, tiny_bytes):
    other = tmp_path / "other.gguf"
    other.write_bytes(tiny_bytes + b"\0" * 32)
    digest = write_ollama_model(tmp_path / "elsewhere", "tiny", "latest", other)
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "elsewhere"))
    with nl.Model("ollama:tiny") as model:
        assert model.source["ollama_digest"] == digest
    with nl.Model("ollama:tiny:chat") as model:  # not in OLLAMA_MODELS: found in ~/.ollama/models
        assert model.path.startswith(str(ollama_home))


def test_an_unknown_ollama_model_lists_the_pulled_ones(ollama_home, tiny_model_path):
    with pytest.raises(nl.ModelNotFoundError, match="No Ollama model llama3.2:3b") as missing:
        nl.Model("ollama:llama3.2:3b")
    assert missing.value.candidates == ["tiny:chat", "tiny:latest"]
    digest = hashlib.sha256(Path(tiny_model_path).read_bytes()).hexdigest()
    (ollama_home / "blobs" / f"sha256-{digest}").unlink()
    with pytest.raises(nl.ModelNotFoundError, match="which is missing: pull the model again"):
        nl.Model("ollama:tiny")


def test_ollama_names_take_ollama_s_defaults():
    assert ollama_name("ollama:llama3.2:3b") == ("registry.ollama.ai", "library", "llama3.2", "3b")
    assert ollama_name("ollama:me/model") == ("registry.ollama.ai", "me", "model", "latest")
    assert ollama_display("registry.ollama.ai", "library", "llama3.2", "3b") == "llama3.2:3b"
    assert ollama_display("example.com", "me", "model", "q4") == "example.com/me/model:q4"
    with pytest.raises(nl.InvalidArgumentError):
        ollama_name("ollama:a/b/c/d")
