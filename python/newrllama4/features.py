"""The model's hidden state at the end of each prompt: a row's features, kept beside the step loop.

A prompt's features are its last token's final hidden state: the last layer's output
after the output norm (llama.cpp names it "result_norm"), the vector the logits of the
prompt's first answer token -- a label's probabilities -- are read from. Taking it costs
no decode: the step loop computes it anyway. llama.cpp gives it out only with
`llama_set_embeddings`, which makes every token of a batch an output row, logits
included (llama_context::decode, "when computing embeddings, all tokens are output"):
the output matrix over every prompt token, about as much again as Gemma's prefill. So
the state is read where it is computed instead, through the scheduler's eval callback
(cb_eval), which shows each node of the graph as it is about to run: the callback asks
for "result_norm" and copies its rows, one per output row of the ubatch, in the order of
the logits' rows. The callback decides nothing else, and the graph's nodes run with the
same kernels on the same rows: with or without features, every answer is the same bits.

The vector is kept in single precision, as llama.cpp computes it, as little-endian
float32 bytes (4 a dimension): 100,000 rows of Gemma's 640 dimensions are 256 MB.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional

import llama_cpp as llama
import numpy as np
from llama_cpp import _ggml

_RESULT_NORM = b"result_norm"

_ggml_get_name = _ggml.libggml.ggml_get_name
_ggml_get_name.argtypes, _ggml_get_name.restype = [ctypes.c_void_p], ctypes.c_char_p
_ggml_nrows = _ggml.libggml.ggml_nrows
_ggml_nrows.argtypes, _ggml_nrows.restype = [ctypes.c_void_p], ctypes.c_int64
_ggml_nbytes = _ggml.libggml.ggml_nbytes
_ggml_nbytes.argtypes, _ggml_nbytes.restype = [ctypes.c_void_p], ctypes.c_size_t
_ggml_backend_tensor_get = _ggml.libggml.ggml_backend_tensor_get
_ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
_ggml_backend_tensor_get.restype = None


class HiddenStates:
    """The final hidden states of one context's decodes, while `wanted`.

    `install(params)` puts the callback into the context's params before llama.cpp makes
    the context. While `wanted`, each decode's output rows are collected (`take()` gives
    them, rows in the logits' order); otherwise the callback only says no.
    """

    def __init__(self, n_embd: int):
        self.n_embd = n_embd
        self.wanted = False
        self._rows: list[np.ndarray] = []
        self._callback = llama.ggml_backend_sched_eval_callback(self._observe)  # kept alive with the context

    def install(self, params: Any) -> None:
        params.cb_eval = self._callback
        params.cb_eval_user_data = None

    def take(self) -> np.ndarray:
        """The rows collected since the last take (n_outputs x n_embd, float32)."""
        rows = self._rows[0] if len(self._rows) == 1 else np.concatenate(self._rows or [np.empty((0, self.n_embd),
                                                                                                  np.float32)])
        self._rows = []
        return rows

    def _observe(self, tensor: int, ask: bool, user_data: Any) -> bool:
        if not self.wanted:
            return False
        if _ggml_get_name(tensor) != _RESULT_NORM:
            return False
        if ask:
            return True
        rows = np.empty((_ggml_nrows(tensor), self.n_embd), dtype=np.float32)
        _ggml_backend_tensor_get(tensor, rows.ctypes.data, 0, _ggml_nbytes(tensor))
        self._rows.append(rows)
        return True


def state_bytes(row: np.ndarray) -> bytes:
    """A state as the engine hands it on: little-endian float32."""
    return row.astype("<f4", copy=False).tobytes()


def state_array(data: Optional[bytes]) -> Optional[np.ndarray]:
    return None if data is None else np.frombuffer(data, dtype="<f4")
