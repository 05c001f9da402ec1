"""What shapes an answer, for a reproducibility record: the versions, and the model (a file, or a server's)."""

from __future__ import annotations

import hashlib
import os
import platform
from importlib import metadata
from typing import Any, Optional

import llama_cpp as llama

from ._version import __version__
from .model import Model
from .files import file_identity, file_sha256


def versions() -> dict[str, str]:
    """The engine, its libraries, the llama.cpp build and the Python running them."""
    return {
        "newrllama4": __version__,
        "llama-cpp-python": metadata.version("llama_cpp_python"),
        # llama-cpp-python pins the llama.cpp it vendors; the library reports its own version and CPU features
        "llama.cpp": llama.llama_version().decode(),
        "llama.cpp system": llama.llama_print_system_info().decode().strip(" |"),
        "llguidance": metadata.version("llguidance"),
        "numpy": metadata.version("numpy"),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def model_record(model: Model, hash_file: bool = True) -> dict[str, Any]:
    """What identifies a model's answers: its file and the SHA-256 of the file and of its chat
    template, and where the file came from (`source` as given, then `hub_repo`, `hub_file` and
    `hub_revision`, the commit, for hf://; `url` for a URL; `ollama_model` and `ollama_digest`).

    With `hash_file=False` the SHA-256 is left out (None) and `file_state` says which
    version of the file answered, for `file_sha256_if_unchanged()` to hash later: a call's
    record is cheap to make, and a multi-gigabyte file is read only when one is asked for.
    """
    template = model.chat_template
    return {
        **model.source,
        "file": os.path.basename(model.path),
        "path": model.path,
        "sha256": model.sha256 if hash_file else None,
        "file_state": file_state(model.path),
        "file_bytes": os.path.getsize(model.path),
        "description": model.description,
        "parameters": model.n_params,
        "chat_template_sha256": None if template is None else hashlib.sha256(template.encode("utf-8")).hexdigest(),
    }


def file_state(path: str) -> str:
    """The file's size and modification time, as one string that survives a trip through R."""
    _, size, mtime_ns = file_identity(path)
    return f"{size}:{mtime_ns}"


def file_sha256_if_unchanged(path: str, state: str) -> Optional[str]:
    """The SHA-256 of the file a record's `file_state` describes; None if it changed or went."""
    try:
        unchanged = file_state(path) == state
    except OSError:
        return None
    return file_sha256(path) if unchanged else None


def server_record(context: Any) -> dict[str, Any]:
    """What identifies a remote context's answers: the model id its servers report, the
    kinds of server and their base URLs (the API key is never part of a context's record)."""
    return {
        "id": context.model,
        "server": context.server_kinds,
        "endpoints": [endpoint.url for endpoint in context.endpoints],
    }
