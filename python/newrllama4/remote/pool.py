"""Which endpoint takes each request of a call, and how long one rests after a failure."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from typing import Optional, Sequence as SequenceType

from .dialects import OpenAICompatible

log = logging.getLogger("newrllama4")

MAX_REST_SECONDS = 30.0


@dataclasses.dataclass(frozen=True)
class Endpoint:
    url: str  # the base URL, ending before /completions
    api: OpenAICompatible

    def __str__(self) -> str:
        return f"{self.url} ({self.api.name})"


@dataclasses.dataclass
class _EndpointState:
    endpoint: Endpoint
    in_flight: int = 0
    sent: int = 0
    failures_in_a_row: int = 0
    refusals_in_a_row: int = 0  # of those failures, the ones where the connection was refused
    resting_until: float = 0.0


class Unreachable(Exception):
    """Every endpoint of the call has refused connections `rounds` times in a row: the
    servers are gone, and the prompts not yet answered fail without being sent again.
    `endpoint` is the one that refused last."""

    def __init__(self, endpoint: Endpoint, rounds: int):
        super().__init__(f"every server had refused connections {rounds} times in a row.")
        self.endpoint = endpoint
        self.rounds = rounds


class EndpointPool:
    """Which endpoint takes each request, within one call: of those below their
    `per_endpoint` requests in flight and not resting after a failure, the one with the
    fewest in flight (then the fewest sent). A retry waits for another endpoint that is
    not resting rather than go back to the one that failed it. With none free, a request
    waits for a release or for a rest to end.

    Once every endpoint has refused connections `give_up_after` times in a row (counting
    requests that failed together once), acquire raises Unreachable. Without that, the
    prompts of a call whose only server died would each make every attempt, with rests of
    up to 30 s between rounds: hours for thousands of prompts, to fail in the end."""

    def __init__(self, endpoints: SequenceType[Endpoint], per_endpoint: int, backoff: float, give_up_after: int):
        self._states = [_EndpointState(e) for e in endpoints]
        self._per_endpoint = per_endpoint
        self._backoff = backoff
        self._give_up_after = give_up_after
        self._last_refused: Optional[Endpoint] = None
        self._changed = asyncio.Event()

    async def acquire(self, avoid: Optional[Endpoint] = None) -> Endpoint:
        while True:
            if self._last_refused is not None and all(s.refusals_in_a_row >= self._give_up_after for s in self._states):
                raise Unreachable(self._last_refused, self._give_up_after)
            now = time.monotonic()
            awake = [s for s in self._states if s.resting_until <= now]
            if any(s.endpoint is not avoid for s in awake):
                awake = [s for s in awake if s.endpoint is not avoid]
            ready = [s for s in awake if s.in_flight < self._per_endpoint]
            if ready:
                state = min(ready, key=lambda s: (s.in_flight, s.sent))
                state.in_flight += 1
                state.sent += 1
                return state.endpoint
            rest_ends = [s.resting_until - now for s in self._states if s.resting_until > now]
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(rest_ends, default=None))

    def release(self, endpoint: Endpoint, failed: bool = False, retry_after: Optional[float] = None,
                refused: bool = False) -> None:
        """Give back `endpoint`'s slot; `failed` (a failure worth a retry) makes it rest;
        `refused` says that the failure was a connection the endpoint refused."""
        state = next(s for s in self._states if s.endpoint is endpoint)
        state.in_flight -= 1
        now = time.monotonic()
        if not failed:
            state.failures_in_a_row = 0
            state.refusals_in_a_row = 0
        elif state.resting_until <= now:  # requests that were in flight together fail together: count them once
            state.failures_in_a_row += 1
            state.refusals_in_a_row = state.refusals_in_a_row + 1 if refused else 0
            if refused:
                self._last_refused = endpoint
            rest = min(MAX_REST_SECONDS, self._backoff * 2 ** (state.failures_in_a_row - 1))
            if retry_after is not None:
                rest = max(rest, min(MAX_REST_SECONDS, retry_after))
            state.resting_until = now + rest
            log.debug("endpoint %s rests %.2f s after %d failures in a row", endpoint.url, rest,
                      state.failures_in_a_row)
        self._changed.set()
