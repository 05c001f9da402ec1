"""What shapes an answer, for a reproducibility record: the versions, and the model (a file, or a server's)."""

from __future__ import annotations

import hashlib
import os
import platform
from importlib import metadata
from typing import Any

import llama_cpp as llama

from .model import Model


def versions() -> dict[str, str]:
    """The engine, its libraries, the llama.cpp build and the Python running them."""
    from . import __version__

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


def model_record(model: Model) -> dict[str, Any]:
    """What identifies a model's answers: its file and the SHA-256 of the file and of its chat
    template, and where the file came from (`source` as given, then `hub_repo`, `hub_file` and
    `hub_revision`, the commit, for hf://; `url` for a URL; `ollama_model` and `ollama_digest`)."""
    template = model.chat_template
    return {
        **model.source,
        "file": os.path.basename(model.path),
        "path": model.path,
        "sha256": model.sha256,
        "file_bytes": os.path.getsize(model.path),
        "description": model.description,
        "parameters": model.n_params,
        "chat_template_sha256": None if template is None else hashlib.sha256(template.encode("utf-8")).hexdigest(),
    }


def server_record(context: Any) -> dict[str, Any]:
    """What identifies a remote context's answers: the model id its servers report, the
    kinds of server and their base URLs (the API key is never part of a context's record)."""
    return {
        "id": context.model,
        "server": context.server_kinds,
        "endpoints": [endpoint.url for endpoint in context.endpoints],
    }
