"""A loaded GGUF model: weights, vocabulary, tokenizer and chat template."""

from __future__ import annotations

import ctypes
import os
import threading
import weakref
from typing import Any, Iterable, Optional

import llama_cpp as llama

from ._llama import ensure_backend, set_fields
from .checks import check_bool, check_int, check_text, is_conversation
from .errors import ChatTemplateError, ClosedError, InvalidArgumentError, ModelLoadError
from .files import file_sha256
from .sources import ProgressCallback, resolve_model

_LOAD_MODE_NONE, _LOAD_MODE_MMAP = 0, 1


class Model:
    """A GGUF model loaded once and shared by any number of contexts.

    `path` is a GGUF file, the name of a model an installed package carries (models.py:
    "gemma3-270m", the default for `path=None`, or "smollm2-135m-instruct"), or where to
    get one (sources.py): "hf://OWNER/REPO/FILE.gguf" (FILE may be a glob such as
    "*Q4_K_M.gguf"), an https:// or http:// URL of a GGUF file (checked against `sha256`
    when given), or "ollama:NAME[:TAG]". A download reports to `progress` (a callable given
    a `sources.DownloadProgress`) and to the `newrllama4.sources` logger; a second load
    reads the cached file. `source` says where the file came from (for the manifest).
    """

    def __init__(self, path: Optional[str | os.PathLike] = None, n_gpu_layers: int = 0, use_mmap: bool = True,
                 sha256: Optional[str] = None, progress: Optional[ProgressCallback] = None):
        n_gpu_layers = check_int("n_gpu_layers", n_gpu_layers, minimum=-1)
        use_mmap = check_bool("use_mmap", use_mmap)
        if progress is not None and not callable(progress):
            raise InvalidArgumentError("progress", progress, "None or a callable")
        resolved = resolve_model(path, sha256=sha256, progress=progress)
        self.path, self.source = resolved.path, resolved.source
        ensure_backend()
        self.n_gpu_layers = n_gpu_layers
        self.use_mmap = use_mmap
        self._handle = handle = self._load(repacked=False)
        self._vocab = llama.llama_model_get_vocab(handle)
        self._lock = threading.Lock()
        self._contexts: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._repacked_handle: Any = None
        self.n_vocab = llama.llama_vocab_n_tokens(self._vocab)
        self.n_ctx_train = llama.llama_model_n_ctx_train(handle)
        self.n_embd = llama.llama_model_n_embd(handle)  # the length of a prompt's hidden state (features.py)
        self.n_layer = llama.llama_model_n_layer(handle)
        self.n_params = llama.llama_model_n_params(handle)
        self.size = llama.llama_model_size(handle)
        buf = ctypes.create_string_buffer(256)
        llama.llama_model_desc(handle, buf, len(buf))
        self.description = buf.value.decode("utf-8", errors="replace")

    def _load(self, repacked: bool) -> Any:
        params = set_fields(
            llama.llama_model_default_params(),
            n_gpu_layers=self.n_gpu_layers,
            load_mode=_LOAD_MODE_MMAP if self.use_mmap else _LOAD_MODE_NONE,
            use_extra_bufts=repacked,
        )
        handle = llama.llama_model_load_from_file(os.fsencode(self.path), params)
        if not handle:
            raise ModelLoadError(f"llama.cpp could not load the model file {self.path!r}.", self.path)
        return handle

    # -- lifetime -------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._handle is None

    def handle(self, repacked: bool = False) -> Any:
        """llama.cpp's model. Its weights are not repacked: repacked weights take a 4-row
        kernel for full groups of rows and a 1-row kernel for the rest, so a token's
        numerics would depend on its place in the batch. `repacked=True` gives a second
        copy, loaded on first use, with ggml's repacked layout for contexts that do not
        need identity (the fast lane, one sequence at a time): its kernels skip the tiled
        matmul this process forces, which is slower for a row or two. It holds the
        repacked matrices in memory beside the mapped file."""
        if self._handle is None:
            raise ClosedError("model")
        if not repacked:
            return self._handle
        with self._lock:
            if self._repacked_handle is None:
                self._repacked_handle = self._load(repacked=True)
            return self._repacked_handle

    def register_context(self, context: Any) -> None:
        with self._lock:
            self.handle()
            self._contexts.add(context)

    def close(self) -> None:
        """Free the model, closing its contexts first. Safe to call twice."""
        with self._lock:
            contexts = list(self._contexts)
        for context in contexts:
            context.close()  # raises, leaving the model open, inside that context's own call
        with self._lock:
            self._contexts.clear()
            for handle in (self._handle, self._repacked_handle):
                if handle is not None:
                    llama.llama_model_free(handle)
            self._handle = self._repacked_handle = None
            self._vocab = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.description}, {self.n_params / 1e6:.0f}M parameters"
        return f"<newrllama4.Model {os.path.basename(self.path)!r}: {state}>"

    # -- vocabulary -----------------------------------------------------------------

    def vocab(self) -> Any:
        self.handle()
        return self._vocab

    def is_eog(self, token: int) -> bool:
        return llama.llama_vocab_is_eog(self._vocab, token)

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = False) -> list[int]:
        text = check_text("text", text)
        add_special = check_bool("add_special", add_special)
        parse_special = check_bool("parse_special", parse_special)
        vocab = self.vocab()
        data = text.encode("utf-8")
        capacity = len(data) + 8
        while True:
            buf = (llama.llama_token * capacity)()
            n = llama.llama_tokenize(vocab, data, len(data), buf, capacity, add_special, parse_special)
            if n >= 0:
                return list(buf[:n])
            capacity = -n

    def prompt_tokens(self, prompt: Any) -> list[int]:
        """The tokens a prompt is decoded as: a conversation rendered by the chat template
        (ChatTemplateError without one), a string with its special tokens parsed, token ids
        as given."""
        if is_conversation(prompt):
            prompt = self.apply_chat_template(prompt, add_generation_prompt=True)
        if isinstance(prompt, str):
            return self.tokenize(prompt, add_special=True, parse_special=True) if prompt else []
        return [int(t) for t in prompt]

    def prompt_lengths(self, prompts: Iterable[Any]) -> list[int]:
        """How many tokens each prompt is decoded as, without decoding any."""
        return [len(self.prompt_tokens(prompt)) for prompt in prompts]

    def check_tokens(self, name: str, tokens: Any) -> list[int]:
        """Validate a list of token ids: llama.cpp aborts the process on an id outside the vocabulary."""
        if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Iterable):
            raise InvalidArgumentError(name, tokens, "a list of token ids")
        checked = [check_int(f"{name}[{i}]", t, minimum=0, maximum=self.n_vocab - 1) for i, t in enumerate(tokens)]
        return checked

    def detokenize(self, tokens: Iterable[int]) -> str:
        tokens = self.check_tokens("tokens", tokens)
        vocab = self.vocab()
        array = (llama.llama_token * max(len(tokens), 1))(*tokens)
        capacity = 8 * len(tokens) + 16
        while True:
            buf = ctypes.create_string_buffer(capacity)
            n = llama.llama_detokenize(vocab, array, len(tokens), buf, capacity, False, False)
            if n >= 0:
                return buf.raw[:n].decode("utf-8", errors="replace")
            capacity = -n

    def token_piece(self, token: int, special: bool = False) -> bytes:
        """The bytes of one token as it appears inside generated text; with `special`, a
        special token as its text (as a prompt spells it: features.text_span)."""
        buf = ctypes.create_string_buffer(64)
        n = llama.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        return buf.raw[:n]

    @property
    def sha256(self) -> str:
        """The SHA-256 of the model file, read once per process (files.file_sha256)."""
        return file_sha256(self.path)

    # -- chat -----------------------------------------------------------------------

    @property
    def chat_template(self) -> Optional[str]:
        """The chat template stored in the GGUF file, or None for a model without one (a base model)."""
        template = llama.llama_model_chat_template(self.handle(), None)
        return template.decode("utf-8", errors="replace") if template else None

    def apply_chat_template(self, messages: Any, add_generation_prompt: bool = True) -> str:
        """Render chat messages ([{"role": ..., "content": ...}]) with the model's own template."""
        add_generation_prompt = check_bool("add_generation_prompt", add_generation_prompt)
        if not isinstance(messages, (list, tuple)) or not messages:
            raise InvalidArgumentError("messages", messages, "a non-empty list of {'role', 'content'} dicts")
        encoded = []
        for i, message in enumerate(messages):
            if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                    and isinstance(message.get("content"), str)):
                raise InvalidArgumentError(f"messages[{i}]", message, "a dict with string 'role' and 'content'")
            encoded.append(tuple(_c_string(f"messages[{i}]['{key}']", message[key]) for key in ("role", "content")))
        template = self.chat_template
        if template is None:
            raise ChatTemplateError("This model has no chat template; format the prompt yourself.")
        template = template.encode("utf-8")
        chat = (llama.llama_chat_message * len(encoded))(*[llama.llama_chat_message(r, c) for r, c in encoded])
        capacity = 2 * sum(len(r) + len(c) for r, c in encoded) + 256
        while True:
            buf = ctypes.create_string_buffer(capacity)
            n = llama.llama_chat_apply_template(template, chat, len(encoded), add_generation_prompt, buf, capacity)
            if n < 0:
                raise ChatTemplateError("llama.cpp does not support this model's chat template.")
            if n <= capacity:
                return buf.raw[:n].decode("utf-8", errors="replace")
            capacity = n


def _c_string(name: str, text: Any) -> bytes:
    """`text` as a NUL-terminated C string: a NUL inside would silently cut it short."""
    data = check_text(name, text).encode("utf-8")
    if b"\0" in data:
        raise InvalidArgumentError(name, text, f"a string without NUL, found at position {text.index(chr(0))}")
    return data
