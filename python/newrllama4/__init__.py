"""newrllama4: isolated, continuous-batching parallel generation on llama.cpp."""

from __future__ import annotations

import logging
import os

# first: ggml's settings go into the environment before anything here loads llama.cpp
from . import _llama  # noqa: F401  isort: skip
from ._version import __version__  # noqa: F401  (R checks it against its own)
from .about import model_record, server_record, versions
from .context import Context
from .errors import (
    AmbiguousModelError,
    CacheError,
    ChatTemplateError,
    ChecksumMismatchError,
    ClosedError,
    ConstraintError,
    ContextError,
    ContextTooLargeError,
    DecodeError,
    DownloadError,
    EmptyPromptError,
    EndpointError,
    GatedModelError,
    IdentityWarning,
    IncompleteOutputError,
    InvalidArgumentError,
    InvalidTokenError,
    ModelLoadError,
    ModelNotFoundError,
    ModelSourceError,
    NewrllamaError,
    NoEmbeddingsError,
    NotGgufError,
    PromptError,
    PromptTooLongError,
    RemoteConnectionError,
    RemoteError,
    RemoteHTTPError,
    RemoteResponseError,
    RemoteTimeoutError,
)
from .model import Model
from .models import MODEL_NAMES, default_model_path, model_path
from .remote import RemoteContext
from .results import Completion, ParallelResult, Stats
from .sampling import SamplingParams
from .sources import DownloadProgress, resolve_model

__all__ = [
    "AmbiguousModelError", "CacheError", "ChatTemplateError", "ChecksumMismatchError", "ClosedError", "Completion",
    "ConstraintError", "Context", "ContextError", "ContextTooLargeError", "DecodeError", "DownloadError",
    "DownloadProgress", "EmptyPromptError", "EndpointError", "GatedModelError", "IdentityWarning",
    "IncompleteOutputError", "InvalidArgumentError", "InvalidTokenError", "MODEL_NAMES", "Model", "ModelLoadError",
    "ModelNotFoundError", "ModelSourceError", "NewrllamaError", "NoEmbeddingsError",
    "NotGgufError", "ParallelResult", "PromptError",
    "PromptTooLongError", "RemoteConnectionError", "RemoteContext", "RemoteError", "RemoteHTTPError",
    "RemoteResponseError", "RemoteTimeoutError", "SamplingParams", "Stats", "default_model_path", "model_path",
    "model_record", "resolve_model", "server_record", "versions",
]

logging.getLogger("newrllama4").addHandler(logging.NullHandler())
if os.environ.get("NEWRLLAMA4_DEBUG") == "1":
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    logging.getLogger("newrllama4").addHandler(_handler)
    logging.getLogger("newrllama4").setLevel(logging.DEBUG)
