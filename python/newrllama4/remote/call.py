"""One generate_parallel call on a RemoteContext: each prompt's requests, retries and answer."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Iterator, Optional, TypeVar

import httpx
import numpy as np

from ..call_driver import CallDriver, Progress
from ..constraints import Constraint, text_error
from ..errors import (
    ConstraintError,
    EmptyPromptError,
    IncompleteOutputError,
    NoEmbeddingsError,
    PromptError,
    RemoteConnectionError,
    RemoteError,
    RemoteHTTPError,
    RemoteResponseError,
    RemoteTimeoutError,
)
from ..features import FeatureRequest
from ..labels import Labels, pick_label
from ..result_cache import CachedCall
from ..results import Completion, ParallelResult, Stats
from ..sampling import SamplingParams, sequence_generator, sequence_seed
from .dialects import Answer, endpoint_path, read_answer, read_embedding
from .fields import scored_answer
from .http import StatusError, client_timeout, describe_error, retry_after_seconds, server_message
from .labels import answer_label, label_probs
from .pool import Endpoint, EndpointPool, Unreachable

log = logging.getLogger("newrllama4")

# the event loop sleeps in select() until a server answers; waking it this often lets
# an interrupt (Ctrl-C, or R's, which arrives as a pending call) run promptly
WAKE_SECONDS = 0.1

# bumped when the labels' probabilities from a kind of server change for the same inputs;
# 2: vLLM's and llama-server's labels scored exactly (labels.py)
REMOTE_LABEL_SCORING = 2
# bumped when what an embeddings request asks for changes (dialects.py); 1: raw float32
REMOTE_EMBEDDINGS = 1

T = TypeVar("T")


def run_to_completion(coroutine: Awaitable[T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    # this thread already runs an event loop (a notebook's): ours gets a thread of its own
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


def request_seed(seed: int, index: int) -> int:
    """The seed sent with prompt `index`'s request: the prompt's local seed, cut to 31 bits
    because llama.cpp servers keep seeds as 32-bit numbers and read 2^32 - 1 as "random"."""
    return sequence_seed(seed, index) % 2**31


@dataclass(frozen=True)
class RemoteSettings:
    """What a call reads of its RemoteContext, fixed when the call starts; the defaults are
    RemoteContext's."""

    endpoints: tuple[Endpoint, ...]
    model: str
    # the API key's header: sent, never shown
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    max_concurrency: int = 16
    timeout: float = 600.0
    retries: int = 3
    backoff: float = 1.0

    @property
    def server_kinds(self) -> list[str]:
        """The kinds of server behind the endpoints (see dialects.py), sorted, each once."""
        return sorted({endpoint.api.name for endpoint in self.endpoints})

    @property
    def model_identity(self) -> str:
        """What names the model in a result cache's key: the model id the servers report,
        whichever endpoints serve it."""
        return f"server:{self.model}"


class RemoteCall:
    """One generate_parallel call on a RemoteContext, or with `embeddings` one
    embed_parallel call: each prompt's embedding in its completion's `hidden_state`."""

    def __init__(self, settings: RemoteSettings, prompts: list[Any], labels: list[Optional[Labels]],
                 constraints: list[Optional[Constraint]], params: SamplingParams, on_progress: Progress,
                 cache: Optional[str], embeddings: bool = False):
        self.settings = settings
        self.embeddings = embeddings
        self.cache_path = cache
        self.prompts = prompts
        self.labels = labels
        self.constraints = constraints
        self.params = params
        self.on_progress = on_progress
        self.stats = Stats(seed=params.seed)
        self._in_flight = 0
        self._busy_since = 0.0

    async def run(self) -> ParallelResult:
        # opened here, in the thread that runs the event loop: a SQLite connection stays in its thread
        cache = None if self.cache_path is None else CachedCall(
            self.cache_path, self.settings.model_identity, self._cache_setup(), self.params, self.labels,
            self.constraints, features=FeatureRequest() if self.embeddings else None,
        )
        with CallDriver(len(self.prompts), self.on_progress, cache) as driver:
            await self._run(driver)
        computed = [c for c in driver.completions if c is not None and not c.from_cache]
        self.stats.prompt_tokens = sum(c.n_prompt_tokens for c in computed)
        self.stats.cached_prompt_tokens = sum(c.n_cached_tokens for c in computed)
        self.stats.generated_tokens = sum(c.n_tokens for c in computed)
        return driver.result(self.stats)

    def _cache_setup(self) -> dict[str, Any]:
        """What decides answers beside the model, the prompt and the arguments: the kinds of
        server, which decide what each request is sent (see dialects.py), and how labels
        are scored on them (answers stored before REMOTE_LABEL_SCORING are not found again);
        for embeddings, what their requests ask for instead (a completion and an embedding
        never meet)."""
        if self.embeddings:
            return {"servers": self.settings.server_kinds, "embeddings": REMOTE_EMBEDDINGS}
        return {"servers": self.settings.server_kinds, "label_scoring": REMOTE_LABEL_SCORING}

    async def _run(self, driver: CallDriver) -> None:
        for index, prompt in enumerate(self.prompts):
            if len(prompt) == 0:
                driver.finish(index, _failed(EmptyPromptError(index)))
        waiting = driver.look_up([i for i, prompt in enumerate(self.prompts) if len(prompt)], self.prompts.__getitem__)
        settings = self.settings
        n_workers = min(len(waiting), settings.max_concurrency * len(settings.endpoints))
        # the servers are taken for gone once they refused as many rounds in a row as one
        # prompt may try, and at least three (a server that restarts refuses for a moment)
        pool = EndpointPool(settings.endpoints, settings.max_concurrency, settings.backoff,
                            give_up_after=max(settings.retries + 1, 3))
        client = httpx.AsyncClient(
            headers=dict(settings.headers),
            timeout=client_timeout(settings.timeout),
            # the pool bounds requests; httpx's own limit would queue them behind its back
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=n_workers),
        )
        queue = iter(waiting)

        async def work() -> None:
            for index in queue:
                driver.finish(index, await self._complete(client, pool, index))

        async with client:
            await _all_or_none([work() for _ in range(n_workers)])

    async def _complete(self, client: httpx.AsyncClient, pool: EndpointPool, index: int) -> Completion:
        """Prompt `index`'s completion: its request, sent again after failures worth a retry."""
        seed = request_seed(self.params.seed, index)
        failed_on: Optional[Endpoint] = None
        failure: Optional[RemoteError] = None
        for attempt in range(1, self.settings.retries + 2):
            try:
                endpoint = await pool.acquire(avoid=failed_on)
            except Unreachable as gone:
                return _failed(failure or RemoteConnectionError(index, gone.endpoint.url, 0, str(gone)))
            log.debug("request %d sent to %s (attempt %d)", index, endpoint.url, attempt)
            retry_after, refused = None, False
            try:
                with self._request():
                    completion = await self._attempt(client, endpoint, index, attempt, seed)
            except httpx.TimeoutException as error:
                if not isinstance(error, httpx.ConnectTimeout):
                    pool.release(endpoint)
                    return _failed(RemoteTimeoutError(
                        index, endpoint.url, attempt, f"no answer within the timeout of {self.settings.timeout:g} s."
                    ))
                failure = RemoteConnectionError(index, endpoint.url, attempt, describe_error(error))
            except httpx.TransportError as error:
                failure = RemoteConnectionError(index, endpoint.url, attempt, describe_error(error))
                refused = isinstance(error, httpx.ConnectError)
            except StatusError as error:
                response = error.response
                failure = RemoteHTTPError(index, endpoint.url, attempt, response.status_code, server_message(response))
                if self.embeddings and _gives_no_embeddings(response):
                    pool.release(endpoint)  # no prompt of the call can have one: the call stops
                    raise NoEmbeddingsError(endpoint.url, response.status_code, server_message(response))
                if response.status_code != 429 and response.status_code < 500:
                    pool.release(endpoint)
                    return _failed(failure)
                retry_after = retry_after_seconds(response)
            else:
                pool.release(endpoint)
                return completion
            pool.release(endpoint, failed=True, retry_after=retry_after, refused=refused)
            log.debug("request %d failed: %s", index, failure)
            failed_on = endpoint
            if attempt <= self.settings.retries:
                self.stats.retries += 1
        return _failed(failure)

    async def _attempt(self, client: httpx.AsyncClient, endpoint: Endpoint, index: int, attempt: int,
                       seed: int) -> Completion:
        """One attempt at prompt `index` on `endpoint`: its request, or its labels' scoring
        requests; StatusError or httpx's errors for a failure that may be worth a retry."""
        prompt, labels, constraint = self.prompts[index], self.labels[index], self.constraints[index]
        if self.embeddings:
            response = await client.post(f"{endpoint.url}/embeddings",
                                         json=endpoint.api.embedding_body(self.settings.model, prompt))
            if response.status_code != 200:
                raise StatusError(response)
            return self._embedding(index, endpoint, attempt, response)
        if constraint is not None and constraint.fields is not None:  # RemoteContext checked that it can
            scoring = endpoint.api.label_scoring(client, endpoint.url, self.settings.model)
            try:
                return await scored_answer(scoring, prompt, index, constraint, self.params, seed)
            except (KeyError, IndexError, TypeError, ValueError) as error:
                return _failed(RemoteResponseError(
                    index, endpoint.url, attempt, f"the fields could not be scored ({type(error).__name__}: {error})."
                ))
        if labels is not None and endpoint.api.label_scoring is not None:
            scoring = endpoint.api.label_scoring(client, endpoint.url, self.settings.model)
            try:
                scores = await scoring.label_scores(prompt, labels)
            except (KeyError, IndexError, TypeError, ValueError) as error:
                return _failed(RemoteResponseError(
                    index, endpoint.url, attempt, f"the labels could not be scored ({type(error).__name__}: {error})."
                ))
            return self._labelled(index, labels, scores.probs, n_prompt_tokens=scores.n_prompt_tokens,
                                  n_tokens=0, n_cached_tokens=scores.n_cached_tokens)
        body = endpoint.api.request_body(self.settings.model, prompt, self.params, seed, labels,
                                         self.constraints[index])
        response = await client.post(f"{endpoint.url}/{endpoint_path(prompt)}", json=body)
        if response.status_code != 200:
            raise StatusError(response)
        return self._completion(index, endpoint, attempt, response)

    @contextlib.contextmanager
    def _request(self) -> Iterator[None]:
        """Count a request in flight, for the stats."""
        if self._in_flight == 0:
            self._busy_since = time.perf_counter()
        self._in_flight += 1
        self.stats.peak_active_sequences = max(self.stats.peak_active_sequences, self._in_flight)
        try:
            yield
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self.stats.request_seconds += time.perf_counter() - self._busy_since

    def _completion(self, index: int, endpoint: Endpoint, attempts: int, response: httpx.Response) -> Completion:
        try:
            answer = read_answer(response.json())
        except (ValueError, KeyError, IndexError, TypeError) as error:
            return _failed(RemoteResponseError(
                index, endpoint.url, attempts, f"the response holds no completion ({type(error).__name__}: {error})."
            ))
        labels, constraint = self.labels[index], self.constraints[index]
        if labels is not None:
            return self._label_completion(index, endpoint, attempts, answer, labels)
        completion = Completion(answer.text, [], answer.n_prompt_tokens, answer.n_tokens, answer.n_cached_tokens,
                                answer.finish_reason)
        if constraint is None:
            return completion
        if answer.finish_reason == "length":
            error: PromptError = IncompleteOutputError(index, constraint.kind, answer.n_tokens, "length")
            return dataclasses.replace(completion, finish_reason="error", error=error)
        problem = text_error(constraint, answer.text)
        if problem is not None:
            error = ConstraintError(
                index, f"has an answer from {endpoint.url} that its {constraint.kind} refuses ({problem}): "
                       f"the server enforced less of it than it was sent."
            )
            return dataclasses.replace(completion, finish_reason="error", error=error)
        if not constraint.parses_json:
            return completion
        return dataclasses.replace(completion, parsed=json.loads(answer.text))

    def _embedding(self, index: int, endpoint: Endpoint, attempts: int, response: httpx.Response) -> Completion:
        try:
            vector, n_prompt_tokens = read_embedding(response.json())
        except (ValueError, KeyError, IndexError, TypeError) as error:
            return _failed(RemoteResponseError(
                index, endpoint.url, attempts, f"the response holds no embedding ({type(error).__name__}: {error})."
            ))
        return Completion("", [], n_prompt_tokens, 0, 0, "stop", hidden_state=vector)

    def _label_completion(self, index: int, endpoint: Endpoint, attempts: int, answer: Answer,
                          labels: Labels) -> Completion:
        probs = label_probs(labels, answer.first_top_logprobs)
        server_label = answer_label(labels, answer.text)
        if probs is None and server_label is None:
            return _failed(RemoteResponseError(
                index, endpoint.url, attempts,
                f"the server answered {answer.text!r}, which is none of the labels; does it apply structured outputs?"
            ))
        return self._labelled(index, labels, probs, n_prompt_tokens=answer.n_prompt_tokens, n_tokens=answer.n_tokens,
                              n_cached_tokens=answer.n_cached_tokens, server_label=server_label)

    def _labelled(self, index: int, labels: Labels, probs: Optional[np.ndarray], server_label: Optional[str] = None,
                  **counts: int) -> Completion:
        """Prompt `index`'s label: picked from `probs` as locally (the most likely at
        temperature 0, else drawn with the prompt's own random stream), or the server's
        answer where the probabilities are unknown."""
        if probs is not None:
            label = labels[pick_label(probs, self.params.temperature, sequence_generator(self.params.seed, index))]
        else:
            label = server_label
        return Completion(
            text=label, tokens=[], finish_reason="stop", label=label,
            label_probs=None if probs is None else dict(zip(labels, probs.tolist())), **counts,
        )


async def _all_or_none(coroutines: list[Awaitable[None]]) -> None:
    """Run `coroutines` together; if one raises (the progress callback) or the call is
    cancelled, cancel the others -- which closes their connections -- and raise."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    waker = asyncio.ensure_future(_wake_regularly())
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in [*tasks, waker]:
            task.cancel()
        await asyncio.gather(*tasks, waker, return_exceptions=True)


async def _wake_regularly() -> None:
    while True:
        await asyncio.sleep(WAKE_SECONDS)


def _gives_no_embeddings(response: httpx.Response) -> bool:
    """Whether an embeddings request's error says that the server gives none: no such
    endpoint (404, 405), not implemented (501: llama-server without --embeddings), or a
    refusal of the model's pooling (llama-server's "Pooling type 'none' is not OAI
    compatible", older vLLM's "The model does not support Embeddings API"), or
    llama-cpp-python's server without `embedding=True` (an HTTP 500 that says so)."""
    if response.status_code in (404, 405, 501):
        return True
    message = server_message(response).lower()
    if response.status_code == 400 and ("pooling" in message or "not support" in message):
        return True
    return "embedding=true" in message


def _failed(error: PromptError) -> Completion:
    return Completion("", [], 0, 0, 0, "error", error)
