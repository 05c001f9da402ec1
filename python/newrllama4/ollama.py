"""Ollama's model store: where it is, and how Ollama names the models in it (sources.py reads them)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from .errors import InvalidArgumentError

OLLAMA_PREFIX = "ollama:"
_OLLAMA_REGISTRY, _OLLAMA_NAMESPACE = "registry.ollama.ai", "library"
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"


def ollama_stores() -> list[Path]:
    """Where Ollama keeps pulled models, in the order looked up: $OLLAMA_MODELS, the per-user
    default, and the folder of the Linux service (which runs as its own user)."""
    configured = os.environ.get("OLLAMA_MODELS")
    stores = [Path(configured).expanduser()] if configured else []
    return stores + [Path.home() / ".ollama" / "models", Path("/usr/share/ollama/.ollama/models")]


def ollama_name(spec: str) -> tuple[str, str, str, str]:
    """"ollama:llama3.2:3b" -> (registry, namespace, model, tag), with Ollama's defaults."""
    name = spec[len(OLLAMA_PREFIX):]
    path, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "latest")
    parts = path.split("/")
    if not path or not tag or len(parts) > 3 or not all(parts):
        raise InvalidArgumentError("path", spec, "an Ollama model as ollama:NAME or ollama:NAME:TAG")
    parts = [_OLLAMA_REGISTRY, _OLLAMA_NAMESPACE][: 3 - len(parts)] + parts
    return parts[0], parts[1], parts[2], tag


def ollama_display(registry: str, namespace: str, model: str, tag: str) -> str:
    """The name `ollama list` shows: without the default registry and namespace."""
    prefix = [] if registry == _OLLAMA_REGISTRY else [registry]
    prefix += [] if registry == _OLLAMA_REGISTRY and namespace == _OLLAMA_NAMESPACE else [namespace]
    return "/".join(prefix + [model]) + f":{tag}"


def ollama_models(store: Path) -> Iterator[str]:
    for manifest in sorted((store / "manifests").glob("*/*/*/*")):
        if manifest.is_file():
            yield ollama_display(*manifest.relative_to(store / "manifests").parts)
