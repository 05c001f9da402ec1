"""One call's prompts from their look-up to their last answer, wherever they run: the
result cache, the progress callback and the windows.

The step loop (engine.py), field_probs' rounds and a server's requests (remote/call.py)
only compute answers; a CallDriver looks each prompt up in the result cache before it
runs and counts the answers found done at once, then takes every other answer as its
prompt finishes: commits it to the cache, and only then reports it to the progress
callback, so a process killed from the callback has stored every answer it was told of.

Locally a call runs its prompts a window at a time (WINDOW_PER_SLOT per slot), each
window looked up as it starts; field_probs' rounds look every prompt up first and run
the others in windows of ROUND_WINDOW per slot; a server's requests run all at once,
bounded by the endpoint pool.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from .result_cache import CachedCall
from .results import Completion, ParallelResult, Stats

log = logging.getLogger("newrllama4")

# generate_parallel's on_progress: called with (prompts done, prompts) as each prompt is done
Progress = Optional[Callable[[int, int], Any]]

# How many prompts a call turns into sequences at a time, per slot. A call then holds the
# tokens and sequences of one window (some 20 KB a row on the tiny model: 100,000 prompts
# at once took 2.3 GB), so its memory follows n_seq_max, not its rows; the slots drain at
# each window's end, a step or two in a window's 64 rounds of prompts. Shared prefixes
# carry over through the prefix cache.
WINDOW_PER_SLOT = 64
# field_probs' rounds run over windows of this many prompts per slot: enough to keep every
# slot busy through a round's call, few enough that the snapshots a window holds between
# rounds (one per prompt, up to n_ctx tokens of KV each) stay within the prefix cache's
# budget at the usual sizes; where they do not, the cache evicts the oldest and those
# prompts are decoded again, exactly as before, only slower
ROUND_WINDOW = 4


def windows(indices: Sequence[int], size: int) -> Iterator[Sequence[int]]:
    """`indices` in consecutive runs of `size`."""
    for first in range(0, len(indices), size):
        yield indices[first:first + size]


class CallDriver:
    """One call's answers by prompt, the result cache (closed with the driver) and the
    progress callback."""

    def __init__(self, n_prompts: int, on_progress: Progress = None, cache: Optional[CachedCall] = None):
        self.completions: list[Optional[Completion]] = [None] * n_prompts
        self.on_progress = on_progress
        self.cache = cache
        self.n_hits = 0
        self._n_done = 0
        self._started = time.perf_counter()

    def __enter__(self) -> CallDriver:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.cache is not None:
            self.cache.close()

    def look_up(self, indices: Iterable[int], key: Callable[[int], Any]) -> list[int]:
        """The prompts among `indices` still to compute, in order; the others' answers,
        found in the result cache, are kept and reported done. `key(i)` is what the cache
        knows prompt i by (its tokens, or the prompt as a server is sent it), None for a
        prompt that fails before it runs, which is not looked up."""
        to_compute, n_found = [], 0
        for index in indices:
            prompt = None if self.cache is None else key(index)
            found = None if prompt is None else self.cache.lookup(index, prompt)
            if found is None:
                to_compute.append(index)
            else:
                self.completions[index] = found
                n_found += 1
        self.n_hits += n_found
        for _ in range(n_found):
            self._report()
        return to_compute

    def finish(self, index: int, completion: Completion) -> None:
        """Keep prompt `index`'s answer, commit it to the result cache, then report it."""
        self.completions[index] = completion
        if self.cache is not None:
            self.cache.store(index, completion)
        self._report()

    def result(self, stats: Stats) -> ParallelResult:
        """The call's answers, with `stats` completed by what the driver counted."""
        stats.prompts = len(self.completions)
        stats.result_cache_hits = self.n_hits
        stats.failures = sum(c.finish_reason == "error" for c in self.completions)
        stats.total_seconds = time.perf_counter() - self._started
        stats.close()
        log.debug("stats: %s", stats)
        return ParallelResult(self.completions, stats)

    def _report(self) -> None:
        self._n_done += 1
        if self.on_progress is not None:
            self.on_progress(self._n_done, len(self.completions))
