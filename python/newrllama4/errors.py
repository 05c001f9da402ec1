"""Every exception the engine raises.

The R package maps these classes one-to-one onto classed R conditions, reading
the public attributes of each instance as condition fields, so every attribute
set here is part of the interface.
"""

from __future__ import annotations

from typing import Any, Optional

from .files import format_bytes


def describe(value: Any, limit: int = 60) -> str:
    """A short, readable rendering of a bad value for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class NewrllamaError(Exception):
    """Base class of every error raised by newrllama4."""

    def __reduce__(self) -> tuple:
        # pickle rebuilds an exception by calling its class with `args`, which holds only the
        # message where __init__ takes other arguments; a worker process (worker.py) sends
        # these back whole, attributes included
        return _rebuild_error, (type(self), self.args, self.__dict__)


def _rebuild_error(cls: type, args: tuple, attributes: dict) -> NewrllamaError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(attributes)
    return error


class IdentityWarning(UserWarning):
    """ggml may run with other settings than batch invariance needs, for the rest of the process.

    ggml reads its switches once per process; when something else set ggml up first
    (llama_cpp's Llama before newrllama4 was imported, or the switches set in the
    environment), batched answers may differ from the same prompt alone. Every call's
    stats then say `identity_guaranteed=False`.
    """

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__(
            "Batch invariance is not guaranteed in this process: " + "; ".join(self.problems)
            + ". Answers may differ from the same prompt run alone. Import newrllama4 before anything "
            "that runs llama.cpp, in a new process, without those environment variables."
        )


class InvalidArgumentError(NewrllamaError, ValueError):
    """An argument has the wrong type or a value outside its range."""

    def __init__(self, argument: str, value: Any, expected: str):
        self.argument = argument
        self.value = describe(value)
        self.expected = expected
        super().__init__(f"`{argument}` must be {expected}, not {self.value}.")


class ModelLoadError(NewrllamaError):
    """The model file is missing, is not a GGUF file, or llama.cpp refused it."""

    def __init__(self, message: str, path: Optional[str] = None):
        self.path = path
        super().__init__(message)


class NotGgufError(ModelLoadError):
    """The file has no GGUF magic bytes: a download of something else (an HTML page, a
    safetensors file), or a file that is not a model."""

    def __init__(self, path: str, origin: Optional[str] = None):
        self.origin = origin  # where the file came from (an hf://, URL or ollama: source), if fetched
        fetched = f" (from {origin})" if origin else ""
        super().__init__(f"The file {path!r}{fetched} is not a GGUF file: it does not start with the bytes 'GGUF'.",
                         path)


class ModelSourceError(ModelLoadError):
    """A model named by where it comes from (hf://, an http(s) URL, ollama:) could not be had.
    `source` is the string as given."""

    def __init__(self, source: str, message: str, path: Optional[str] = None):
        self.source = source
        super().__init__(message, path)


class ModelNotFoundError(ModelSourceError):
    """No such Hub repository, file in it, URL, or Ollama model. `candidates` lists what
    does exist where that can be known (the repository's GGUF files, the Ollama models
    pulled on this machine), else is empty."""

    def __init__(self, source: str, problem: str, candidates: Optional[list[str]] = None):
        self.candidates = list(candidates or [])
        listed = f" Found: {', '.join(self.candidates)}." if self.candidates else ""
        super().__init__(source, f"{problem}{listed}")


class AmbiguousModelError(ModelSourceError):
    """A file pattern (hf://OWNER/REPO/*Q4_K_M.gguf) matches more than one model file;
    `candidates` lists them."""

    def __init__(self, source: str, candidates: list[str]):
        self.candidates = list(candidates)
        super().__init__(
            source, f"{source!r} matches {len(candidates)} model files, not one: {', '.join(candidates)}. "
            "Name one of them, or narrow the pattern."
        )


class GatedModelError(ModelSourceError):
    """The Hub repository is gated or private, and no token with access to it was sent."""


class DownloadError(ModelSourceError):
    """The network failed: the server could not be reached, or the connection broke
    mid-file. What arrived is kept (`path`, `bytes_done` of `bytes_total`), and loading
    the model again resumes from there."""

    def __init__(self, source: str, problem: str, path: Optional[str] = None, bytes_done: Optional[int] = None,
                 bytes_total: Optional[int] = None):
        self.bytes_done = bytes_done
        self.bytes_total = bytes_total
        super().__init__(source, problem, path)


class ChecksumMismatchError(ModelSourceError):
    """A downloaded file's SHA-256 is not the one expected (`sha256 =`, or the Hub's); the
    file was not kept."""

    def __init__(self, source: str, expected: str, actual: str):
        self.expected = expected
        self.actual = actual
        super().__init__(
            source, f"The file downloaded from {source} has SHA-256 {actual}, not the expected {expected}; "
            "it was not kept."
        )


class ContextError(NewrllamaError):
    """llama.cpp could not create a context; the message says why, as far as llama.cpp told."""


class ContextTooLargeError(ContextError):
    """The KV cache a context needs is larger than the memory available; nothing was allocated."""

    def __init__(self, n_ctx: int, n_seq_max: int, needed_bytes: int, available_bytes: int):
        self.n_ctx = n_ctx
        self.n_seq_max = n_seq_max
        self.needed_bytes = needed_bytes
        self.available_bytes = available_bytes
        super().__init__(
            f"A context of {n_seq_max} sequences of n_ctx={n_ctx} tokens needs about "
            f"{format_bytes(needed_bytes)} of KV cache, but only {format_bytes(available_bytes)} of memory "
            f"is available; lower `n_ctx` or `n_seq_max`."
        )


class ClosedError(NewrllamaError):
    """A model or context was used after `close()`."""

    def __init__(self, what: str):
        self.what = what
        super().__init__(f"This {what} has been closed and can no longer be used.")


class CacheError(NewrllamaError):
    """The result cache file cannot be used: not a SQLite database, another
    application's database, or one that cannot be read or written."""

    def __init__(self, path: str, problem: str):
        self.path = path
        super().__init__(f"The result cache {path!r} {problem}.")


class ChatTemplateError(NewrllamaError):
    """The model has no chat template that llama.cpp can apply."""


class PromptError(NewrllamaError):
    """One prompt cannot be generated; the other prompts of the call are unaffected.

    `detail` is the message without the prompt's number, so that the R package can
    number prompts from 1.
    """

    def __init__(self, index: int, detail: str):
        self.index = index
        self.detail = detail
        super().__init__(f"Prompt {index} {detail}")


class EmptyPromptError(PromptError):
    """A prompt is empty or tokenizes to no tokens."""

    def __init__(self, index: int):
        super().__init__(index, "is empty: it has no tokens to start from.")


class InvalidTokenError(PromptError):
    """A prompt given as token ids holds an id outside the model's vocabulary."""

    def __init__(self, index: int, token: int, n_vocab: int):
        self.token = token
        self.n_vocab = n_vocab
        super().__init__(index, f"holds token id {token}, outside the vocabulary [0, {n_vocab}).")


class PromptTooLongError(PromptError):
    """A prompt has more tokens than one sequence of the context can hold."""

    def __init__(self, index: int, n_tokens: int, limit: int):
        self.n_tokens = n_tokens
        self.limit = limit
        super().__init__(
            index,
            f"has {n_tokens} tokens but the context holds at most {limit} per sequence; "
            f"shorten it or create the context with a larger `n_ctx`.",
        )


class DecodeError(PromptError):
    """llama_decode failed for a sequence, even when retried on its own."""

    def __init__(self, index: int, code: int):
        self.code = code
        super().__init__(index, f"failed: llama_decode returned {code} even for this prompt alone.")


class ConstraintError(PromptError):
    """A prompt's answer could not satisfy its json_schema or grammar."""


class IncompleteOutputError(ConstraintError):
    """A constrained answer was cut off (by max_tokens, n_ctx or a stop string) before it was complete."""

    def __init__(self, index: int, constraint: str, n_tokens: int, finish_reason: str):
        self.constraint = constraint
        self.n_tokens = n_tokens
        cut_by = "a stop string" if finish_reason == "stop" else "max_tokens or the context size (n_ctx)"
        super().__init__(
            index,
            f"was cut off by {cut_by} after {n_tokens} tokens, before it completed its {constraint}; "
            f"raise `max_tokens` (or `n_ctx`).",
        )


class EndpointError(NewrllamaError):
    """A server given to RemoteContext cannot be used: it does not answer, refuses the
    API key, or does not serve the model asked for. `endpoint` is its base URL."""

    def __init__(self, endpoint: str, problem: str):
        self.endpoint = endpoint
        super().__init__(f"{endpoint} {problem}")


class NoEmbeddingsError(EndpointError):
    """A server answered an embeddings request saying it gives none for its model: no
    embeddings endpoint (HTTP 404, 405 or 501: llama-server started without
    `--embeddings`, vLLM running a model to generate) or none it can pool (llama-server's
    model without pooling). `status` and `server_message` are its answer."""

    def __init__(self, endpoint: str, status: int, server_message: str):
        self.status = status
        self.server_message = server_message
        super().__init__(endpoint, (
            f"gives no embeddings of its model (HTTP {status}: {server_message}). Start llama-server with "
            "`--embeddings --pooling mean` (or `last`), serve an embedding model with vLLM (`vllm serve MODEL "
            "--runner pooling`), or embed on a local model (context_create())."
        ))


class RemoteError(PromptError):
    """A prompt's request to a server failed, after any retries (RemoteContext).

    `endpoint` is the base URL of the server that failed last and `attempts` how many
    requests were sent for the prompt: 0 when the servers were gone before its turn.
    """

    def __init__(self, index: int, endpoint: str, attempts: int, problem: str):
        self.endpoint = endpoint
        self.attempts = attempts
        if attempts == 0:
            super().__init__(index, f"was not sent to {endpoint}: {problem}")
        else:
            tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
            super().__init__(index, f"failed on {endpoint} after {tries}: {problem}")


class RemoteConnectionError(RemoteError):
    """No server could be reached, or the connection broke before an answer came."""


class RemoteTimeoutError(RemoteError):
    """The server took longer than the context's `timeout` to answer."""


class RemoteHTTPError(RemoteError):
    """The server answered with an HTTP error status; its message is in `server_message`."""

    def __init__(self, index: int, endpoint: str, attempts: int, status: int, server_message: str):
        self.status = status
        self.server_message = server_message
        super().__init__(index, endpoint, attempts, f"HTTP {status}: {server_message}")


class RemoteResponseError(RemoteError):
    """The server answered, but not with what was asked for: no completion in the
    response, an answer that is none of the labels, or a JSON answer that does not
    parse (a server that ignored the structured-output request, or a stop string)."""
