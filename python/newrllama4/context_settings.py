"""A context's size and mode, checked once: what Context and WorkerContext are made from."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from .checks import check_bool, check_int, check_real


def default_threads() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class ContextSettings:
    """The arguments of Context after its model, in its order, validated on construction;
    `n_threads=None` becomes the cores this process may run on."""

    n_ctx: int = 2048
    n_seq_max: int = 8
    n_batch: int = 512
    n_threads: Optional[int] = None
    batch_invariant: bool = True
    prefix_cache: bool = True
    prefix_cache_mb: float = 512

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise in place once
        set_(self, "n_ctx", check_int("n_ctx", self.n_ctx, minimum=1))
        set_(self, "n_seq_max", check_int("n_seq_max", self.n_seq_max, minimum=1, maximum=256))
        set_(self, "n_batch", check_int("n_batch", self.n_batch, minimum=self.n_seq_max))
        set_(self, "n_threads", default_threads() if self.n_threads is None else
             check_int("n_threads", self.n_threads, minimum=1))
        set_(self, "batch_invariant", check_bool("batch_invariant", self.batch_invariant))
        set_(self, "prefix_cache", check_bool("prefix_cache", self.prefix_cache))
        set_(self, "prefix_cache_mb", check_real("prefix_cache_mb", self.prefix_cache_mb, 0.0))
