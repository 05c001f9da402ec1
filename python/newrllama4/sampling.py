"""Sampling parameters, per-prompt random streams, and the sampler of a whole batch."""

from __future__ import annotations

import hashlib
import itertools
import secrets
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from . import _top_k
from .checks import check_int, check_real, check_text
from .errors import InvalidArgumentError


@dataclass(frozen=True)
class SamplingParams:
    """How every sequence of one call is sampled. Validated on construction."""

    max_tokens: int = 100
    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.9
    min_p: float = 0.0
    repeat_last_n: int = 64
    penalty_repeat: float = 1.1
    seed: Optional[int] = 1234
    stop: Optional[Sequence[str]] = None  # a tuple, empty for None, once constructed

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise in place once
        set_(self, "max_tokens", check_int("max_tokens", self.max_tokens, minimum=1))
        set_(self, "temperature", check_real("temperature", self.temperature, 0.0))
        set_(self, "top_k", check_int("top_k", self.top_k, minimum=0))
        set_(self, "top_p", check_real("top_p", self.top_p, 0.0, 1.0, open_minimum=True))
        set_(self, "min_p", check_real("min_p", self.min_p, 0.0, 1.0))
        set_(self, "repeat_last_n", check_int("repeat_last_n", self.repeat_last_n, minimum=0))
        set_(self, "penalty_repeat", check_real("penalty_repeat", self.penalty_repeat, 0.0, open_minimum=True))
        set_(self, "seed", _resolve_seed(self.seed))
        set_(self, "stop", _check_stop(self.stop))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def penalised(self) -> bool:
        return self.repeat_last_n > 0 and self.penalty_repeat != 1.0


def _resolve_seed(seed: Any) -> int:
    """None or -1 draw a fresh seed, so that the call can still be replayed from stats.
    Drawn seeds stay below 2^31 so that R receives them as integers."""
    if seed is not None:
        seed = check_int("seed", seed, minimum=-1)
        if seed != -1:
            return seed
    return secrets.randbits(31)


def _check_stop(stop: Any) -> tuple[str, ...]:
    if stop is None:
        return ()
    if isinstance(stop, str):
        stop = (stop,)
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop):
        raise InvalidArgumentError("stop", stop, "None, a non-empty string or a list of non-empty strings")
    return tuple(check_text(f"stop[{i}]", s) for i, s in enumerate(stop))


def sequence_seed(seed: int, index: int) -> int:
    """The seed of prompt `index`: depends on nothing but the call's seed and the index."""
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def sequence_generator(seed: int, index: int) -> np.random.Generator:
    """Prompt `index`'s own random stream: one uniform draw per sampled token."""
    return np.random.Generator(np.random.PCG64(sequence_seed(seed, index)))


class BatchSampler:
    """Samples the next token of every sequence of a step at once, from the step's logits.

    For each sequence (one row of logits), in this order:

    1. Repetition penalty: each distinct token among the sequence's last
       `repeat_last_n` tokens (prompt included) has its logit divided by
       `penalty_repeat` if it is positive, multiplied by it otherwise (llama.cpp's rule).
    2. `temperature == 0`: the token with the highest logit, ties to the lowest id. Done.
    3. Tokens are ranked by logit, ties by lower id; top-k (`top_k > 0`) keeps the
       first `top_k`.
    4. Probabilities: softmax of the kept logits divided by `temperature`.
    5. top-p (`top_p < 1`): keeps the shortest run of first-ranked tokens whose
       probabilities add up to at least `top_p`.
    6. min-p (`min_p > 0`): drops tokens less likely than `min_p` times the first one.
    7. Draw: with u, the next double in [0, 1) of the sequence's own generator, the
       first token in rank order whose cumulative probability exceeds u times the kept
       total. When nothing is cut (top_k = 0, top_p = 1, min_p = 0) the order is by id,
       which spares ranking the whole vocabulary.

    A logit of -inf (a token a json_schema or grammar refuses) is never drawn, nor ranked
    among the top k: a row that allows fewer than `top_k` tokens keeps just those.

    Every operation works on the whole batch: one pass over the logits for the penalty
    and the greedy argmax; top-k reads each row once in C (`_top_k.c`: numpy has no
    batched top-k that reads a row once), the rows shared among `n_threads` threads (the
    context's, idle between decodes), so no row is ever sorted whole (top_k = 0 with
    top_p < 1 or min_p > 0 is the exception: then the whole vocabulary is ranked). A row's
    answer never depends on the threads or on the other rows.
    """

    def __init__(self, params: SamplingParams, n_vocab: int, n_threads: int = 1):
        self.params = params
        self.n_vocab = n_vocab
        self.n_threads = n_threads

    def sample(self, logits: np.ndarray, histories: Sequence[Sequence[int]],
               generators: Sequence[np.random.Generator]) -> np.ndarray:
        """The next token of each row of `logits` (rows x n_vocab, penalised in place)."""
        params = self.params
        if params.penalised:
            self._penalise(logits, histories)
        if params.greedy:
            return logits.argmax(axis=1)
        ids, kept = self._ranked(logits)
        scaled = kept / params.temperature
        probs = np.exp(scaled - scaled.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        keep = probs > 0  # a constrained row's refused tokens (-inf) are never drawn
        if params.top_p < 1.0:
            keep &= (np.cumsum(probs, axis=1) - probs) < params.top_p
        if params.min_p > 0.0:
            keep &= probs >= params.min_p * probs.max(axis=1, keepdims=True)
        probs = np.where(keep, probs, 0.0)
        cumulative = np.cumsum(probs, axis=1)
        u = np.array([g.random() for g in generators])
        chosen = (cumulative <= (u * cumulative[:, -1])[:, None]).sum(axis=1)
        last_kept = keep.shape[1] - 1 - keep[:, ::-1].argmax(axis=1)
        chosen = np.minimum(chosen, last_kept)
        return ids[np.arange(len(ids)), chosen]

    def _penalise(self, logits: np.ndarray, histories: Sequence[Sequence[int]]) -> None:
        # a token seen twice is gathered twice from the same logit and scattered twice with
        # the same value, so each distinct token is penalised exactly once
        recent = [h[-self.params.repeat_last_n:] for h in histories]
        rows = np.repeat(np.arange(len(recent)), [len(r) for r in recent])
        cols = np.fromiter(itertools.chain.from_iterable(recent), dtype=np.int64, count=len(rows))
        values = logits[rows, cols]
        penalty = self.params.penalty_repeat
        logits[rows, cols] = np.where(values > 0, values / penalty, values * penalty)

    def _ranked(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token ids and logits of each row's top-k candidates (all tokens without top-k),
        best first, ties by lower id."""
        k = self.params.top_k
        n_rows, n_vocab = logits.shape
        if k == 0 and self.params.top_p == 1.0 and self.params.min_p == 0.0:
            # nothing is cut, so ranking would only decide where a draw lands: id order will do
            return np.broadcast_to(np.arange(n_vocab), logits.shape), logits
        if k == 0 or k >= n_vocab:  # every token is a candidate
            ids = np.argsort(-logits, axis=1, kind="stable")
            return ids, np.take_along_axis(logits, ids, axis=1)
        ids = np.empty((n_rows, k), dtype=np.int64)
        values = np.empty((n_rows, k), dtype=np.float32)
        # no copy of the engine's rows (a view of llama.cpp's buffer): one would cost a read more
        _top_k.top_k(np.ascontiguousarray(logits, dtype=np.float32), n_rows, n_vocab, k, ids, values,
                     self.n_threads)
        return ids, values
