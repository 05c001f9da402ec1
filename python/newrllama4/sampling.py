"""Sampling parameters and the per-sequence llama.cpp sampler chain built from them."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Sequence

import llama_cpp as llama
import numpy as np

from .checks import check_int, check_real, check_text
from .errors import InvalidArgumentError

# llama.cpp reads this seed value as "pick a random seed"; drawn seeds stay below 2^31
# so that R receives them as integers
_LLAMA_RANDOM_SEED = 0xFFFFFFFF
# top_k and repeat_last_n reach llama.cpp as int32_t, and ctypes wraps larger values silently
_INT32_MAX = 2**31 - 1


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
        set_(self, "top_k", check_int("top_k", self.top_k, minimum=0, maximum=_INT32_MAX))
        set_(self, "top_p", check_real("top_p", self.top_p, 0.0, 1.0, open_minimum=True))
        set_(self, "min_p", check_real("min_p", self.min_p, 0.0, 1.0))
        set_(self, "repeat_last_n", check_int("repeat_last_n", self.repeat_last_n, minimum=0, maximum=_INT32_MAX))
        set_(self, "penalty_repeat", check_real("penalty_repeat", self.penalty_repeat, 0.0, open_minimum=True))
        set_(self, "seed", _resolve_seed(self.seed))
        set_(self, "stop", _check_stop(self.stop))

    def for_context(self, n_ctx: int) -> "SamplingParams":
        """These params for sequences of at most `n_ctx` tokens plus the one sampled last.

        llama.cpp allocates the penalty window in full for every sequence; one longer
        than any sequence sees the same tokens, so it is cut to that length.
        """
        return replace(self, repeat_last_n=min(self.repeat_last_n, n_ctx + 1))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def penalised(self) -> bool:
        return self.repeat_last_n > 0 and self.penalty_repeat != 1.0


def _resolve_seed(seed: Any) -> int:
    """None or -1 draw a fresh seed, so that the call can still be replayed from stats."""
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
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=4).digest()
    value = int.from_bytes(digest, "little")
    return value if value != _LLAMA_RANDOM_SEED else 0


def build_sampler(params: SamplingParams, seed: int, n_vocab: int, history: Sequence[int]) -> Any:
    """A new sampler chain for one sequence, freed with `free_sampler`.

    `history` (the prompt) primes the repetition penalty, as llama.cpp's server does.
    Plain greedy decoding needs no chain: `sample` takes the argmax itself (None).
    """
    if params.greedy and not params.penalised:
        return None
    chain = llama.llama_sampler_chain_init(llama.llama_sampler_chain_default_params())
    add = llama.llama_sampler_chain_add
    if params.penalised:
        add(chain, llama.llama_sampler_init_penalties(
            n_vocab, params.repeat_last_n, params.penalty_repeat, 0.0, 0.0
        ))
    if params.greedy:
        # top-k/top-p/min-p never change the argmax, so greedy skips them
        add(chain, llama.llama_sampler_init_greedy())
    else:
        if params.top_k > 0:
            add(chain, llama.llama_sampler_init_top_k(params.top_k))
        add(chain, llama.llama_sampler_init_top_p(params.top_p, 1))
        if params.min_p > 0.0:
            add(chain, llama.llama_sampler_init_min_p(params.min_p, 1))
        add(chain, llama.llama_sampler_init_temp(params.temperature))
        add(chain, llama.llama_sampler_init_dist(seed))
    if params.penalised:
        for token in history[-params.repeat_last_n:]:
            llama.llama_sampler_accept(chain, token)
    return chain


def sample(chain: Any, ctx: Any, batch_index: int, n_vocab: int) -> int:
    """The next token of the sequence whose logits sit at `batch_index` of the last batch."""
    if chain is None:
        # llama.cpp's greedy sampler first copies every logit into a candidate array;
        # over a 262k vocabulary that copy costs more than the argmax (same first-max tie rule)
        logits = np.ctypeslib.as_array(llama.llama_get_logits_ith(ctx, batch_index), shape=(n_vocab,))
        return int(logits.argmax())
    return llama.llama_sampler_sample(chain, ctx, batch_index)


def free_sampler(chain: Any) -> None:
    if chain is not None:
        llama.llama_sampler_free(chain)
