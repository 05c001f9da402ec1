"""The narrow layer between the engine and llama-cpp-python's ctypes API.

Owns process-wide llama.cpp state (ggml's switches, backend initialisation, log
routing) and the token batch that a context allocates once and refills every step.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
import warnings
from contextlib import contextmanager
from typing import Iterator

# ggml's CPU switches that decide a token's numerics. ggml reads each one once per
# process, when its first matrix product runs, so they are set here, when the engine
# is imported, before llama_cpp is: after that, llama_cpp's own Llama (or anything
# else on the same ggml) may run first and fix other values for the whole process.
# ggml's tiled K-quant matmul serves batches of 8+ rows and the reference kernel
# smaller ones, and the two round differently, so a token's numerics would depend on
# its batch size. Forced, the tiled kernel serves every batch: each output is one row's
# dot product in a fixed order whatever the rows beside it (bit-compared:
# benchmarks/bitcompare.py), and prefill gets llama.cpp's fast kernel.
GGML_SETTINGS = {"GGML_CPU_TILED_MM": "1", "GGML_CPU_TILED_MM_FORCE": "1"}
_FORCE = "GGML_CPU_TILED_MM_FORCE"


def _llama_ran_first() -> bool:
    # llama_cpp's Llama initialises the backend once, on its first instance; one that
    # existed before us may have run a matmul with ggml's defaults
    llama_module = sys.modules.get("llama_cpp.llama")
    return llama_module is not None and getattr(llama_module.Llama, "_Llama__backend_initialized", False)


def _apply_ggml_settings(llama_first: bool) -> list[str]:
    """Set GGML_SETTINGS unless the user set them; return why they may not be in force."""
    problems = ["llama_cpp's Llama ran in this process before newrllama4 was imported"] if llama_first else []
    for name, value in GGML_SETTINGS.items():
        current = os.environ.setdefault(name, value)
        if current != value:
            problems.append(f"{name}={current} is set in the environment (identity needs {value})")
    return problems


_ggml_read_before_us = _llama_ran_first()
_force_before_us = os.environ.get(_FORCE)  # what ggml read then, if it did
_ggml_problems = _apply_ggml_settings(_ggml_read_before_us)

try:
    import llama_cpp as llama  # noqa: E402  (after ggml's settings, on purpose)
except Exception as exc:  # its shared library missing, or built for another machine: OSError, RuntimeError
    raise ImportError(
        f"newrllama4 cannot load llama.cpp (llama-cpp-python): {type(exc).__name__}: {exc}. Rebuild it for this "
        f"machine: {sys.executable} -m pip install --force-reinstall --no-cache-dir llama-cpp-python"
    ) from exc
import numpy as np  # noqa: E402

from .errors import IdentityWarning  # noqa: E402

GGML_TYPE_BF16 = 30  # ggml.h; llama_cpp does not export it

_log = logging.getLogger("newrllama4.llama_cpp")
_backend_lock = threading.Lock()
_backend_ready = False
_GGML_LOG_ERROR, _GGML_LOG_CONT = 4, 5
_error_lines: list[str] = []  # llama.cpp's error lines while a `llama_errors()` block runs
_errors_wanted = False


def identity_problems() -> list[str]:
    """Why ggml may not run in this process with the settings batch invariance needs."""
    return list(_ggml_problems)


def identity_guaranteed() -> bool:
    """Whether ggml runs in this process with the settings batch invariance needs."""
    return not _ggml_problems


def ggml_forces_tiled_matmul() -> bool:
    """Whether ggml in this process takes the tiled matmul for every batch (GGML_SETTINGS),
    as far as can be known: a Llama that ran before the engine was imported had ggml read
    the environment as it was then."""
    return (_force_before_us if _ggml_read_before_us else os.environ.get(_FORCE)) == "1"


def ggml_defaults_environment() -> dict[str, str]:
    """This process's environment with ggml's own tiled-matmul switch (for 8+ rows), for a
    worker process (worker.py) that runs llama.cpp's fastest kernels."""
    return {**os.environ, _FORCE: "0"}


@llama.llama_log_callback
def _route_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    # llama.cpp talks a lot on stderr; keep it, but only for whoever asks the logger
    line = text.decode("utf-8", errors="replace").rstrip("\n")
    if _errors_wanted and level in (_GGML_LOG_ERROR, _GGML_LOG_CONT):
        _error_lines.append(line.strip())
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug(line)


@contextmanager
def llama_errors() -> Iterator[list[str]]:
    """Collect the error lines llama.cpp logs inside the block (lines of another thread's
    llama.cpp calls at the same time would join them: it is for messages, not decisions)."""
    global _errors_wanted
    _error_lines.clear()
    _errors_wanted = True
    try:
        yield _error_lines
    finally:
        _errors_wanted = False


def ensure_backend() -> None:
    """Initialise llama.cpp once per process and route its log lines to our logger.

    Warns (IdentityWarning) when ggml may run with other settings than GGML_SETTINGS.
    """
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            if _ggml_problems:
                warnings.warn(IdentityWarning(_ggml_problems), stacklevel=3)
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
