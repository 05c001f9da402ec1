"""The narrow layer between the engine and llama-cpp-python's ctypes API.

Owns process-wide llama.cpp state (backend initialisation, log routing) and the
token batch that a context allocates once and refills every step.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading

import llama_cpp as llama
import numpy as np

_log = logging.getLogger("newrllama4.llama_cpp")
_backend_lock = threading.Lock()
_backend_ready = False


@llama.llama_log_callback
def _route_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    # llama.cpp talks a lot on stderr; keep it, but only for whoever asks the logger
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug(text.decode("utf-8", errors="replace").rstrip("\n"))


def ensure_backend() -> None:
    """Initialise llama.cpp once per process and route its log lines to our logger."""
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            # ggml's tiled K-quant matmul serves batches of 8+ rows and the reference
            # kernel smaller ones, so a token's numerics would depend on its batch size;
            # read once by ggml at the first matmul, hence set before any model runs
            os.environ.setdefault("GGML_CPU_TILED_MM", "0")
            llama.llama_log_set(_route_log, ctypes.c_void_p(0))
            llama.llama_backend_init()
            _backend_ready = True


def set_fields(struct: ctypes.Structure, **values: object) -> ctypes.Structure:
    """Set fields of a llama.cpp params struct, refusing names it does not have.

    ctypes silently accepts any attribute name, so a field renamed in llama.cpp would
    otherwise turn a setting into a no-op.
    """
    known = {name for name, *_ in type(struct)._fields_}
    unknown = set(values) - known
    if unknown:
        raise AttributeError(f"{type(struct).__name__} has no field(s) {sorted(unknown)}")
    for name, value in values.items():
        setattr(struct, name, value)
    return struct


def snapshot_sequence(ctx: llama.llama_context_p, seq_id: int) -> ctypes.Array:
    """A copy of one sequence's KV cells (every layer, SWA cache included) in host memory."""
    size = llama.llama_state_seq_get_size(ctx, seq_id)
    data = (ctypes.c_uint8 * size)()
    written = llama.llama_state_seq_get_data(ctx, data, size, seq_id)
    if written != size:
        raise RuntimeError(f"llama_state_seq_get_data wrote {written} of {size} bytes")
    return data


def restore_sequence(ctx: llama.llama_context_p, data: ctypes.Array, seq_id: int) -> bool:
    """Put a snapshot's cells into sequence `seq_id`, whose stream must be empty."""
    return llama.llama_state_seq_set_data(ctx, data, len(data), seq_id) == len(data)


class TokenBatch:
    """A llama_batch allocated once and refilled in place each step.

    numpy views over the C arrays make filling a step a few vectorised writes;
    each token carries exactly one seq_id, its own sequence's.
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.raw = llama.llama_batch_init(capacity, 0, 1)
        self._token = np.ctypeslib.as_array(self.raw.token, shape=(capacity,))
        self._pos = np.ctypeslib.as_array(self.raw.pos, shape=(capacity,))
        self._n_seq_id = np.ctypeslib.as_array(self.raw.n_seq_id, shape=(capacity,))
        self._logits = np.ctypeslib.as_array(self.raw.logits, shape=(capacity,))
        self._seq_id = [self.raw.seq_id[i] for i in range(capacity)]
        self._n_seq_id[:] = 1
        self.n_tokens = 0

    def clear(self) -> None:
        self.n_tokens = 0

    def add(self, tokens: list[int], first_pos: int, seq_id: int, want_last_logits: bool) -> None:
        """Append a run of one sequence's tokens."""
        start, end = self.n_tokens, self.n_tokens + len(tokens)
        self._token[start:end] = tokens
        self._pos[start:end] = np.arange(first_pos, first_pos + len(tokens), dtype=np.int32)
        self._logits[start:end] = 0
        self._logits[end - 1] = int(want_last_logits)
        seq_ids = self._seq_id
        for i in range(start, end):
            seq_ids[i][0] = seq_id
        self.n_tokens = end

    def decode(self, ctx: llama.llama_context_p) -> int:
        self.raw.n_tokens = self.n_tokens
        return llama.llama_decode(ctx, self.raw)

    def free(self) -> None:
        if self.raw is not None:
            llama.llama_batch_free(self.raw)
            self.raw = None
