"""The model's hidden states of each prompt: a row's features, kept beside the step loop.

A prompt's features are one or more of its states, concatenated in the order asked
(`FeatureRequest.kinds`):

- "last": its last token's final hidden state: the last layer's output after the output
  norm (llama.cpp names it "result_norm"), the vector the logits of the prompt's first
  answer token -- a label's probabilities -- are read from.
- "middle": its last token's state after a middle layer (`layer`, by default
  n_layer // 2, at most the last but one): the layer's output, llama.cpp's "l_out-<il>".
  A final layer is tuned to the next token; a middle layer's states often separate
  meanings better (linear probes of intermediate layers).
- "mean": the mean, over the tokens of the prompt's text (`FeatureRequest.texts`: the
  row's text within the prompt, not the instruction and examples every row shares), of
  that middle layer's state. llama.cpp computes the last layer only for output rows
  (it keeps the rows of `inp_out_ids` before the last layer's feed-forward), so the
  mean is over a layer every token goes through.

Taking them costs no decode: the step loop computes them anyway. llama.cpp gives out
states only with `llama_set_embeddings`, which makes every token of a batch an output
row, logits included (llama_context::decode, "when computing embeddings, all tokens are
output"): the output matrix over every prompt token, about as much again as Gemma's
prefill. So the states are read where they are computed instead, through the
scheduler's eval callback (cb_eval), which shows each node of the graph as it is about
to run: the callback asks for "result_norm" and the chosen layer's "l_out", only while a
decode holds a row that wants them, and copies their rows. The callback decides nothing
else, and the graph's nodes run with the same kernels on the same rows: with or without
features, every answer is the same bits.

"result_norm" has one row per output row of a micro-batch, in the order of the logits'
rows. A middle layer's output has one row per token of the micro-batch, in the order
llama.cpp's split takes them from the batch (`micro_batches`); each row is the state of
one (sequence, position). A prompt's text tokens must then be computed, not restored
from the prefix cache: a sequence that keeps the mean restores at most its cells before
the text (`Sequence.n_restorable`). Every row of a prompt is the same bits whatever
shares its batch (batch-invariant mode), so its mean, summed in position order, is too.

The vector is kept in single precision, as llama.cpp computes it, as little-endian
float32 bytes (4 a dimension, n_embd per kind): 100,000 rows of Gemma's 640 dimensions
are 256 MB a kind.
"""

from __future__ import annotations

import ctypes
import dataclasses
from dataclasses import dataclass
from typing import Any, Optional, Sequence as SequenceType

import llama_cpp as llama
import numpy as np
from llama_cpp import _ggml

from .errors import InvalidArgumentError

_RESULT_NORM = b"result_norm"
KINDS = ("last", "middle", "mean")

_ggml_get_name = _ggml.libggml.ggml_get_name
_ggml_get_name.argtypes, _ggml_get_name.restype = [ctypes.c_void_p], ctypes.c_char_p
_ggml_nrows = _ggml.libggml.ggml_nrows
_ggml_nrows.argtypes, _ggml_nrows.restype = [ctypes.c_void_p], ctypes.c_int64
_ggml_nbytes = _ggml.libggml.ggml_nbytes
_ggml_nbytes.argtypes, _ggml_nbytes.restype = [ctypes.c_void_p], ctypes.c_size_t
_ggml_backend_tensor_get = _ggml.libggml.ggml_backend_tensor_get
_ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
_ggml_backend_tensor_get.restype = None


@dataclass(frozen=True)
class FeatureRequest:
    """Which states a call keeps for each prompt: `kinds` (in the order their vectors are
    concatenated), the `layer` of "middle" and "mean", and each prompt's text (or None)
    whose tokens "mean" averages."""

    kinds: tuple[str, ...] = ("last",)
    layer: int = 0
    texts: Optional[tuple[Optional[str], ...]] = None

    @property
    def needs_layer(self) -> bool:
        return "middle" in self.kinds or "mean" in self.kinds

    def key(self) -> Any:
        """What the result cache knows the request by (but the texts, which are per prompt);
        today's state alone as before, so that answers kept with it are found again."""
        return True if self.kinds == ("last",) else {"kinds": list(self.kinds), "layer": self.layer}

    def text(self, index: int) -> Optional[str]:
        return None if self.texts is None or "mean" not in self.kinds else self.texts[index]


def default_layer(n_layer: int) -> int:
    """The middle layer: n_layer // 2, at most the last but one (whose output has every token's row)."""
    return max(0, min(n_layer // 2, n_layer - 2))


def check_features(hidden_states: Any, texts: Any, layer: Any, n_prompts: int,
                   n_layer: Optional[int]) -> Optional[FeatureRequest]:
    """generate_parallel's `hidden_states` (False, True for ("last",), or a list of kinds),
    `feature_texts` and `feature_layer` as one request, or None; `n_layer` None on a
    server, which keeps no states."""
    if hidden_states is False or hidden_states is None:
        return None
    kinds = ("last",) if hidden_states is True else hidden_states
    if isinstance(kinds, str):
        kinds = (kinds,)
    if not (isinstance(kinds, (list, tuple)) and kinds and all(k in KINDS for k in kinds)
            and len(set(kinds)) == len(kinds)):
        raise InvalidArgumentError("hidden_states", hidden_states, f"True, False or distinct kinds among {KINDS}")
    if texts is not None:
        if not isinstance(texts, (list, tuple)) or len(texts) != n_prompts or \
                not all(t is None or isinstance(t, str) for t in texts):
            raise InvalidArgumentError("feature_texts", texts, "one text (or None) per prompt")
        texts = tuple(texts)
    request = FeatureRequest(tuple(kinds), 0, texts)
    if layer is not None and (not isinstance(layer, int) or isinstance(layer, bool) or not (
            n_layer is None or 0 <= layer <= n_layer - 2)):
        raise InvalidArgumentError("feature_layer", layer, f"a layer from 0 to {n_layer - 2 if n_layer else 0}: "
                                   "the last layer's output has only the output rows")
    if not request.needs_layer or n_layer is None:
        return request
    if n_layer < 2:
        raise InvalidArgumentError("hidden_states", hidden_states,
                                   "'last' only: a model of one layer has no middle layer")
    return dataclasses.replace(request, layer=default_layer(n_layer) if layer is None else layer)


def text_span(model: Any, tokens: list[int], text: Optional[str]) -> tuple[int, int]:
    """Where a prompt's text lies in its tokens, [first, end): the tokens that spell any
    byte of the text's last occurrence in what the tokens spell (the instruction and
    examples come before it, the template's end of turn after; a tokenizer may add a
    space after a special token, which the text's tokens then hold); the whole prompt
    without a text, or when the tokens do not spell it."""
    whole = (0, len(tokens))
    if not text or not tokens:
        return whole
    pieces = [model.token_piece(t, special=True) for t in tokens]
    start = b"".join(pieces).rfind(text.encode("utf-8"))
    if start < 0:
        return whole
    ends = np.cumsum([len(p) for p in pieces])
    first = int(np.searchsorted(ends, start, side="right"))
    last = int(np.searchsorted(ends, start + len(text.encode("utf-8")), side="left"))
    return (first, last + 1)


def micro_batches(slots: SequenceType[int], n_ubatch: int) -> list[list[int]]:
    """The batch rows of each micro-batch, in the order llama.cpp computes them, for a
    batch whose row k belongs to sequence `slots[k]`: llama_batch_allocr::split_equal
    with `sequential` (a KV cache of one stream per sequence, kv_unified=False): a run of
    consecutive sequence ids, each giving its next rows in equal numbers, sequence after
    sequence."""
    rows_of: dict[int, list[int]] = {}
    rank = []  # each row's place among its sequence's rows
    for row, slot in enumerate(slots):
        rank.append(len(rows_of.setdefault(slot, [])))
        rows_of[slot].append(row)
    taken = {slot: 0 for slot in rows_of}
    left = len(slots)
    batches = []
    while left:
        seqs: list[int] = []
        for row, slot in enumerate(slots):
            if taken[slot] > rank[row] or slot in seqs:
                continue
            if seqs and slot != seqs[-1] + 1:
                continue
            seqs.append(slot)
            if len(seqs) > n_ubatch:
                break
        per_seq: list[list[int]] = [[] for _ in seqs]
        while all(taken[s] < len(rows_of[s]) for s in seqs):
            for k, slot in enumerate(seqs):
                per_seq[k].append(rows_of[slot][taken[slot]])
                taken[slot] += 1
                left -= 1
            if (len(per_seq[0]) + 1) * len(seqs) > n_ubatch:
                break
        batches.append([row for rows in per_seq for row in rows])
    return batches


class HiddenStates:
    """The hidden states of one context's decodes, while asked for.

    `install(params)` puts the callback into the context's params before llama.cpp makes
    the context. Before a decode, `want(last, layer)` says which tensors to copy:
    "result_norm" when `last`, "l_out-<layer>" when `layer` is not None; `take()` gives
    what was copied since: the final rows (n_outputs x n_embd, in the logits' order) and
    the layer's rows of each micro-batch. Otherwise the callback only says no.
    """

    def __init__(self, n_embd: int):
        self.n_embd = n_embd
        self._names: frozenset[bytes] = frozenset()
        self._final: list[np.ndarray] = []
        self._layer: list[np.ndarray] = []
        self._callback = llama.ggml_backend_sched_eval_callback(self._observe)  # kept alive with the context

    def install(self, params: Any) -> None:
        params.cb_eval = self._callback
        params.cb_eval_user_data = None

    def want(self, last: bool, layer: Optional[int]) -> None:
        self._names = frozenset(([_RESULT_NORM] if last else []) + ([b"l_out-%d" % layer] if layer is not None else []))

    def stop(self) -> None:
        self._names = frozenset()

    def take(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """The final rows and the layer's micro-batches copied since the last take."""
        final = np.concatenate(self._final) if self._final else np.empty((0, self.n_embd), np.float32)
        layer = self._layer
        self._final, self._layer = [], []
        return final, layer

    def _observe(self, tensor: int, ask: bool, user_data: Any) -> bool:
        if not self._names:
            return False
        name = _ggml_get_name(tensor)
        if name not in self._names:
            return False
        if ask:
            return True
        rows = np.empty((_ggml_nrows(tensor), self.n_embd), dtype=np.float32)
        _ggml_backend_tensor_get(tensor, rows.ctypes.data, 0, _ggml_nbytes(tensor))
        (self._final if name == _RESULT_NORM else self._layer).append(rows)
        return True


class KeptStates:
    """What one sequence keeps of its prompt's states: the kinds of `request`, its text's
    tokens [first, end) for the mean. `wants_layer_row(position)` says which of its rows
    of the layer a decode keeps; `assembled()` gives the vector once its last prompt
    token is done."""

    def __init__(self, request: FeatureRequest, n_prompt: int, span: tuple[int, int]):
        self.request = request
        self.n_prompt = n_prompt
        self.span = span
        self.final: Optional[np.ndarray] = None
        self.layer_rows: dict[int, np.ndarray] = {}

    def wants_layer_rows(self, start: int, n: int) -> bool:
        """Whether any of positions [start, start + n) is one `wants_layer_row`."""
        kinds = self.request.kinds
        return ("middle" in kinds and start <= self.n_prompt - 1 < start + n) or (
            "mean" in kinds and start < self.span[1] and self.span[0] < start + n)

    def wants_layer_row(self, position: int) -> bool:
        kinds = self.request.kinds
        return ("middle" in kinds and position == self.n_prompt - 1) or (
            "mean" in kinds and self.span[0] <= position < self.span[1])

    def assembled(self) -> bytes:
        parts = []
        for kind in self.request.kinds:
            if kind == "last":
                parts.append(self.final)
            elif kind == "middle":
                parts.append(self.layer_rows[self.n_prompt - 1])
            else:
                rows = [self.layer_rows[p] for p in range(*self.span)]
                parts.append((np.sum(np.asarray(rows, dtype=np.float64), axis=0) / len(rows)).astype(np.float32))
        return state_bytes(np.concatenate(parts))


def state_bytes(row: np.ndarray) -> bytes:
    """A state as the engine hands it on: little-endian float32."""
    return row.astype("<f4", copy=False).tobytes()


def state_array(data: Optional[bytes]) -> Optional[np.ndarray]:
    return None if data is None else np.frombuffer(data, dtype="<f4")
