"""Sampling parameters, per-prompt random streams, and the sampler of a whole batch."""

from __future__ import annotations

import hashlib
import itertools
import math
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

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
    stop: Sequence[str] = field(default_factory=tuple)

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
    and the greedy argmax; for top-k, a pass of group maxima narrows each row to the
    few groups of tokens that can hold its top k, so no row is ever sorted whole
    (top_k = 0 with top_p < 1 or min_p > 0 is the exception: then the whole
    vocabulary is ranked).
    """

    def __init__(self, params: SamplingParams, n_vocab: int):
        self.params = params
        self.n_vocab = n_vocab
        # groups of about 64 tokens (4096 groups for a 262k vocabulary): few enough
        # tokens per group that gathering the candidate groups' strided ids stays cheap
        self.n_groups = 1 << max(2, round(math.log2(n_vocab)) - 6)

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
        if k == 0 or 4 * k >= self.n_groups:
            ids = np.argsort(-logits, axis=1, kind="stable")[:, : k or n_vocab]
            return ids, np.take_along_axis(logits, ids, axis=1)
        group_max, gather = self._groups(logits)
        # the k-th largest group maximum bounds each row's k-th largest logit from below,
        # so every top-k logit sits in a group whose maximum reaches it
        # (the k-th largest is the (n - k)-th smallest: partitioning a negated copy costs twice as much)
        bound = np.partition(group_max, self.n_groups - k, axis=1)[:, self.n_groups - k]
        # a constrained row may allow fewer than k tokens (the others are -inf): its
        # candidates are then the tokens it allows, and the rest of its k places are empty
        bound = np.maximum(bound, np.finfo(logits.dtype).min)
        rows, group_ids = np.nonzero(group_max >= bound[:, None])
        values, value_ids = gather(rows, group_ids)
        hit, column = np.nonzero(values >= bound[rows][:, None])
        row, ids, vals = rows[hit], value_ids[hit, column], values[hit, column]
        order = np.lexsort((ids, -vals, row))
        row, ids, vals = row[order], ids[order], vals[order]
        starts = np.searchsorted(row, np.arange(n_rows + 1))
        empty = np.arange(k) >= np.diff(starts)[:, None]
        take = np.where(empty, 0, starts[:-1, None] + np.arange(k))
        return ids[take], np.where(empty, -np.inf, vals[take])

    def _groups(self, logits: np.ndarray) -> tuple[np.ndarray, Callable[[np.ndarray, np.ndarray], tuple]]:
        """Each row's group maxima, and a function gathering the logits and ids of (row, group) pairs.

        Group g holds the ids congruent to g modulo `n_groups`: seen as a (depth x
        n_groups) matrix per row, the maxima are a reduction over contiguous rows of
        the matrix, as fast as one pass can be, and nothing is copied but the few ids
        past the last whole row."""
        n_rows, n_vocab = logits.shape
        depth = n_vocab // self.n_groups
        whole = logits[:, : depth * self.n_groups].reshape(n_rows, depth, self.n_groups)
        group_max = whole.max(axis=1)
        offsets = np.arange(depth) * self.n_groups
        n_rest = n_vocab - depth * self.n_groups
        if n_rest:
            rest = np.full((n_rows, self.n_groups), -np.inf, dtype=logits.dtype)
            rest[:, :n_rest] = logits[:, depth * self.n_groups:]
            np.maximum(group_max, rest, out=group_max)
            offsets = np.append(offsets, depth * self.n_groups)

        def gather(rows: np.ndarray, group_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            values = whole[rows, :, group_ids]
            if n_rest:
                values = np.concatenate([values, rest[rows, group_ids][:, None]], axis=1)
            return values, offsets + group_ids[:, None]

        return group_max, gather
