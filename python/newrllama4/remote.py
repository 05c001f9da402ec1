"""RemoteContext: generate_parallel() on OpenAI-compatible servers (vLLM, llama.cpp's llama-server).

Each prompt is one request to `{base_url}/completions` (to `/chat/completions` for chat
messages, see openai_api.py); prompts run up to
`max_concurrency` at a time on each endpoint and go to the endpoint with the fewest
requests in flight. A request that fails with a broken or refused connection, HTTP 429
or a 5xx status is sent again, on another endpoint when one is available, up to
`retries` times; an endpoint that failed rests before it gets more requests (`backoff`
seconds, doubling with each failure in a row, at most MAX_REST_SECONDS, or what its
Retry-After asks). A prompt whose last attempt fails gets its classed error in its
Completion; the other prompts are unaffected.

The HTTP client is httpx's async one, not the `openai` package's (which wraps httpx and
brings pydantic and more with it): it gives direct control of timeouts, connection
limits and retries -- the openai client's own retries stay on one endpoint -- and sends
the fields the OpenAI API lacks (top_k, min_p, grammar, structured outputs) as plain
JSON, where the openai client takes them only as untyped `extra_body`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Iterator, Optional, Sequence as SequenceType, TypeVar

import httpx
import numpy as np

from .checks import check_int, check_real
from .choices import Labels, pick_label
from .constraints import Constraint, text_error
from .errors import (
    ClosedError,
    ConstraintError,
    EmptyPromptError,
    EndpointError,
    IncompleteOutputError,
    InvalidArgumentError,
    PromptError,
    RemoteConnectionError,
    RemoteError,
    RemoteHTTPError,
    RemoteResponseError,
    RemoteTimeoutError,
)
from .generation import Generator, Progress
from .openai_api import (
    Answer, OpenAICompatible, answer_label, endpoint_path, label_probs, read_answer, server_api,
)
from .remote_scoring import StatusError
from .result_cache import CachedCall
from .results import Completion, ParallelResult, Stats
from .sampling import SamplingParams, sequence_generator, sequence_seed

log = logging.getLogger("newrllama4")

# Read by default, and only this one: falling back on OPENAI_API_KEY would send an
# OpenAI key to whatever server `base_url` names.
API_KEY_VARIABLE = "NEWRLLAMA4_API_KEY"
MAX_REST_SECONDS = 30.0
# how long a server may take to accept a connection, within the context's `timeout`
CONNECT_SECONDS = 10.0
# the event loop sleeps in select() until a server answers; waking it this often lets
# an interrupt (Ctrl-C, or R's, which arrives as a pending call) run promptly
WAKE_SECONDS = 0.1

# bumped when the labels' probabilities from a kind of server change for the same inputs;
# 2: vLLM's and llama-server's labels scored exactly (remote_scoring.py)
REMOTE_LABEL_SCORING = 2

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Endpoint:
    url: str  # the base URL, ending before /completions
    api: OpenAICompatible

    def __str__(self) -> str:
        return f"{self.url} ({self.api.name})"


class RemoteContext(Generator):
    """Runs prompts on OpenAI-compatible servers instead of a local model.

    `base_url` is a server's API root (`http://host:8000/v1`; a bare `http://host:8000`
    gets `/v1`), or a list of them serving the same model: prompts are spread over them.
    `model` is the model id to ask for; None takes the one model the servers serve.
    `api_key` defaults to the NEWRLLAMA4_API_KEY environment variable; it is sent to
    the servers and never shown. Each endpoint gets at most `max_concurrency`
    requests at once; `timeout` is how long one request may wait for its answer (a
    request that times out is not sent again); `retries` and `backoff` are described
    in the module's docstring.

    Every server is asked for its models when the context is created: one that does
    not answer, refuses the key or does not serve `model` raises EndpointError.

    `generate_parallel` and `generate` take the arguments of Context's and return the
    same results, with these differences: each prompt's request carries a seed derived
    from the call's seed and the prompt's position, but a server that batches freely
    does not give one prompt the same answer whatever else it runs; `Completion.tokens`
    is empty (the token counts are the server's); the servers run their samplers in
    their own order and ignore what they lack (see openai_api.py); prompts given as
    token ids need a server that takes them (vLLM, llama-server); a conversation goes
    to the chat endpoint, where the server applies its model's chat template.

    `json_schema` and `grammar` go to the server's structured outputs (see
    openai_api.py), which check them against the server's vocabulary. Each answer is
    checked against them again on arrival (constraints.text_error): one the server let
    through against them fails with ConstraintError, one cut off by max_tokens with
    IncompleteOutputError, as locally; a JSON answer's value is in `parsed`.

    With `choices`, vLLM's and llama-server's labels are scored exactly as locally, on
    their own endpoints (see remote_scoring.py). On other servers each answer is restricted to a
    label by the server's structured outputs, and where the top log-probabilities of
    the answer's first token show the labels (see openai_api.label_probs), they give
    `choice_probs`. Either way the label is picked from `choice_probs` as locally: the
    most likely with temperature 0, else drawn with the prompt's own random stream;
    where they are unknown, `choice_probs` is None and the label is the server's answer.

    `cache` works as locally (see result_cache.py): answers are looked up before any
    request and committed as they arrive, keyed by `model_identity` and the prompt as
    sent, never by the endpoints' addresses or the API key.
    """

    def __init__(
        self,
        base_url: Any,
        model: Optional[str] = None,
        api_key: Optional[str] = None,
        max_concurrency: int = 16,
        timeout: float = 600.0,
        retries: int = 3,
        backoff: float = 1.0,
    ):
        urls = _check_base_urls(base_url)
        if model is not None and (not isinstance(model, str) or not model):
            raise InvalidArgumentError("model", model, "None or a model id")
        if api_key is not None and not isinstance(api_key, str):
            raise InvalidArgumentError("api_key", type(api_key).__name__, "None or a string (shown here: its type)")
        self.max_concurrency = check_int("max_concurrency", max_concurrency, minimum=1)
        self.timeout = check_real("timeout", timeout, 0.0, open_minimum=True)
        self.retries = check_int("retries", retries, minimum=0)
        self.backoff = check_real("backoff", backoff, 0.0)
        api_key = os.environ.get(API_KEY_VARIABLE) if api_key is None else api_key
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        found = [self._discover(url, model) for url in urls]
        self.model = found[0][0]
        for (served, _), url in zip(found, urls):
            if served != self.model:
                raise EndpointError(url, f"serves {served!r}, but {urls[0]} serves {self.model!r}; "
                                         f"every endpoint must serve the same model.")
        self.endpoints = tuple(Endpoint(url, api) for (_, api), url in zip(found, urls))
        self._closed = False

    def _discover(self, url: str, model: Optional[str]) -> tuple[str, OpenAICompatible]:
        """The id of the model `url` serves (`model`, or its only one) and its API dialect."""
        try:
            response = httpx.get(f"{url}/models", headers=self._headers, timeout=_timeout(self.timeout))
        except httpx.HTTPError as error:
            raise EndpointError(url, f"does not answer: {_describe(error)}.") from None
        if response.status_code in (401, 403):
            raise EndpointError(url, f"refused the API key (HTTP {response.status_code}); pass `api_key` or "
                                     f"set the environment variable {API_KEY_VARIABLE}.")
        if response.status_code != 200:
            raise EndpointError(url, f"answered GET /models with HTTP {response.status_code}: "
                                     f"{_server_message(response)}")
        try:
            entries = {entry["id"]: entry for entry in response.json()["data"]}
        except (ValueError, KeyError, TypeError):
            raise EndpointError(url, "did not list its models as an OpenAI-compatible server does.") from None
        if model is None and len(entries) != 1:
            raise EndpointError(url, f"serves {len(entries)} models ({', '.join(entries)}); choose one with `model`.")
        if model is not None and model not in entries:
            raise EndpointError(url, f"does not serve {model!r}; it serves {', '.join(entries) or 'no model'}.")
        entry = entries[model] if model is not None else next(iter(entries.values()))
        return entry["id"], server_api(entry.get("owned_by"))

    # -- lifetime ---------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Refuse further calls; nothing is held between calls. Safe to call twice."""
        self._closed = True

    def __enter__(self) -> "RemoteContext":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else (
            f"{self.model!r} on {', '.join(map(str, self.endpoints))}, "
            f"{self.max_concurrency} requests at once per endpoint"
        )
        return f"<newrllama4.RemoteContext {state}>"

    @property
    def server_kinds(self) -> list[str]:
        """The kinds of server behind the endpoints (see openai_api.py), sorted, each once."""
        return sorted({endpoint.api.name for endpoint in self.endpoints})

    @property
    def model_identity(self) -> str:
        """What names this context's model in a result cache's key: the model id the
        servers report, whichever endpoints serve it."""
        return f"server:{self.model}"

    # -- generation -------------------------------------------------------------------

    def _vocabulary(self) -> None:
        return None  # the servers check constraints against their own

    def _generate(self, prompts: list[Any], label_sets: list[Optional[Labels]],
                  constraints: list[Optional[Constraint]], sampling: SamplingParams,
                  on_progress: Progress, cache: Optional[str]) -> ParallelResult:
        if self._closed:
            raise ClosedError("remote context")
        used = [(name, value) for name, value in (("choices", label_sets), ("json_schema", constraints))
                if any(v is not None for v in value)]
        unable = [str(e) for e in self.endpoints if not e.api.has_structured_outputs]
        if used and unable:
            name, value = used[0]
            raise InvalidArgumentError(
                name, value, f"None: {', '.join(unable)} has no structured outputs newrllama4 knows of"
            )
        call = RemoteCall(self, prompts, label_sets, constraints, sampling, on_progress, cache)
        return _run_to_completion(call.run())


def _check_base_urls(base_url: Any) -> list[str]:
    urls = [base_url] if isinstance(base_url, str) else base_url
    expected = "a URL (http:// or https://) or a non-empty list of them"
    if not isinstance(urls, (list, tuple)) or not urls:
        raise InvalidArgumentError("base_url", base_url, expected)
    normalised = []
    for url in urls:
        try:
            parsed = httpx.URL(url) if isinstance(url, str) else None
        except httpx.InvalidURL:
            parsed = None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
            raise InvalidArgumentError("base_url", url, expected)
        url = url.rstrip("/")
        normalised.append(url + "/v1" if parsed.path in ("", "/") else url)
    if len(set(normalised)) != len(normalised):
        raise InvalidArgumentError("base_url", base_url, "URLs of distinct endpoints")
    return normalised


def _timeout(seconds: float) -> httpx.Timeout:
    # no pool timeout: EndpointPool bounds the requests, so none waits for a connection
    return httpx.Timeout(seconds, connect=min(seconds, CONNECT_SECONDS), pool=None)


def _run_to_completion(coroutine: Awaitable[T]) -> T:
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


@dataclasses.dataclass
class _EndpointState:
    endpoint: Endpoint
    in_flight: int = 0
    sent: int = 0
    failures_in_a_row: int = 0
    resting_until: float = 0.0


class EndpointPool:
    """Which endpoint takes each request, within one call: of those below their
    `per_endpoint` requests in flight and not resting after a failure, the one with the
    fewest in flight (then the fewest sent). A retry waits for another endpoint that is
    not resting rather than go back to the one that failed it. With none free, a request
    waits for a release or for a rest to end."""

    def __init__(self, endpoints: SequenceType[Endpoint], per_endpoint: int, backoff: float):
        self._states = [_EndpointState(e) for e in endpoints]
        self._per_endpoint = per_endpoint
        self._backoff = backoff
        self._changed = asyncio.Event()

    async def acquire(self, avoid: Optional[Endpoint] = None) -> Endpoint:
        while True:
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

    def release(self, endpoint: Endpoint, failed: bool = False, retry_after: Optional[float] = None) -> None:
        """Give back `endpoint`'s slot; `failed` (a failure worth a retry) makes it rest."""
        state = next(s for s in self._states if s.endpoint is endpoint)
        state.in_flight -= 1
        now = time.monotonic()
        if not failed:
            state.failures_in_a_row = 0
        elif state.resting_until <= now:  # requests that were in flight together fail together: count them once
            state.failures_in_a_row += 1
            rest = min(MAX_REST_SECONDS, self._backoff * 2 ** (state.failures_in_a_row - 1))
            if retry_after is not None:
                rest = max(rest, min(MAX_REST_SECONDS, retry_after))
            state.resting_until = now + rest
            log.debug("endpoint %s rests %.2f s after %d failures in a row", endpoint.url, rest,
                      state.failures_in_a_row)
        self._changed.set()


class RemoteCall:
    """One generate_parallel call on a RemoteContext."""

    def __init__(self, context: RemoteContext, prompts: list[Any], label_sets: list[Optional[Labels]],
                 constraints: list[Optional[Constraint]], params: SamplingParams, on_progress: Progress,
                 cache: Optional[str]):
        self.context = context
        self.cache_path = cache
        self.prompts = prompts
        self.label_sets = label_sets
        self.constraints = constraints
        self.params = params
        self.on_progress = on_progress
        self.stats = Stats(seed=params.seed, prompts=len(prompts))
        self._n_done = 0
        self._in_flight = 0
        self._busy_since = 0.0

    async def run(self) -> ParallelResult:
        started = time.perf_counter()
        # opened here, in the thread that runs the event loop: a SQLite connection stays in its thread
        cache = None if self.cache_path is None else CachedCall(
            self.cache_path, self.context.model_identity, self._cache_setup(), self.params, self.label_sets,
            self.constraints,
        )
        try:
            completions = await self._run(cache)
        finally:
            if cache is not None:
                cache.close()
        computed = [c for c in completions if not c.from_cache]
        self.stats.result_cache_hits = len(completions) - len(computed)
        self.stats.prompt_tokens = sum(c.n_prompt_tokens for c in computed)
        self.stats.cached_prompt_tokens = sum(c.n_cached_tokens for c in computed)
        self.stats.generated_tokens = sum(c.n_tokens for c in computed)
        self.stats.failures = sum(c.finish_reason == "error" for c in completions)
        self.stats.total_seconds = time.perf_counter() - started
        self.stats.close()
        log.debug("stats: %s", self.stats)
        return ParallelResult(completions, self.stats)

    def _cache_setup(self) -> dict[str, Any]:
        """What decides answers beside the model, the prompt and the arguments: the kinds of
        server, which decide what each request is sent (see openai_api.py), and how labels
        are scored on them (answers stored before REMOTE_LABEL_SCORING are not found again)."""
        return {"servers": self.context.server_kinds, "label_scoring": REMOTE_LABEL_SCORING}

    async def _run(self, cache: Optional[CachedCall]) -> list[Completion]:
        completions: list[Optional[Completion]] = [None] * len(self.prompts)
        waiting = []
        for index, prompt in enumerate(self.prompts):
            if len(prompt) == 0:
                completions[index] = _failed(EmptyPromptError(index))
            elif cache is not None:
                completions[index] = cache.lookup(index, prompt)
            if completions[index] is None:
                waiting.append(index)
            else:
                self._report_done()
        context = self.context
        n_workers = min(len(waiting), context.max_concurrency * len(context.endpoints))
        pool = EndpointPool(context.endpoints, context.max_concurrency, context.backoff)
        client = httpx.AsyncClient(
            headers=context._headers,
            timeout=_timeout(context.timeout),
            # the pool bounds requests; httpx's own limit would queue them behind its back
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=n_workers),
        )
        queue = iter(waiting)

        async def work() -> None:
            for index in queue:
                completions[index] = await self._complete(client, pool, index)
                if cache is not None:  # committed before the progress callback hears of it
                    cache.store(index, completions[index])
                self._report_done()

        async with client:
            await _all_or_none([work() for _ in range(n_workers)])
        return completions

    def _report_done(self) -> None:
        self._n_done += 1
        if self.on_progress is not None:
            self.on_progress(self._n_done, len(self.prompts))

    async def _complete(self, client: httpx.AsyncClient, pool: EndpointPool, index: int) -> Completion:
        """Prompt `index`'s completion: its request, sent again after failures worth a retry."""
        seed = request_seed(self.params.seed, index)
        failed_on: Optional[Endpoint] = None
        for attempt in range(1, self.context.retries + 2):
            endpoint = await pool.acquire(avoid=failed_on)
            log.debug("request %d sent to %s (attempt %d)", index, endpoint.url, attempt)
            retry_after = None
            try:
                with self._request():
                    completion = await self._attempt(client, endpoint, index, attempt, seed)
            except httpx.TimeoutException as error:
                if not isinstance(error, httpx.ConnectTimeout):
                    pool.release(endpoint)
                    return _failed(RemoteTimeoutError(
                        index, endpoint.url, attempt, f"no answer within the timeout of {self.context.timeout:g} s."
                    ))
                failure: RemoteError = RemoteConnectionError(index, endpoint.url, attempt, _describe(error))
            except httpx.TransportError as error:
                failure = RemoteConnectionError(index, endpoint.url, attempt, _describe(error))
            except StatusError as error:
                response = error.response
                failure = RemoteHTTPError(index, endpoint.url, attempt, response.status_code, _server_message(response))
                if response.status_code != 429 and response.status_code < 500:
                    pool.release(endpoint)
                    return _failed(failure)
                retry_after = _retry_after(response)
            else:
                pool.release(endpoint)
                return completion
            pool.release(endpoint, failed=True, retry_after=retry_after)
            log.debug("request %d failed: %s", index, failure)
            failed_on = endpoint
            if attempt <= self.context.retries:
                self.stats.retries += 1
        return _failed(failure)

    async def _attempt(self, client: httpx.AsyncClient, endpoint: Endpoint, index: int, attempt: int,
                       seed: int) -> Completion:
        """One attempt at prompt `index` on `endpoint`: its request, or its labels' scoring
        requests; StatusError or httpx's errors for a failure that may be worth a retry."""
        prompt, labels = self.prompts[index], self.label_sets[index]
        if labels is not None and endpoint.api.label_scoring is not None:
            scoring = endpoint.api.label_scoring(client, endpoint.url, self.context.model)
            try:
                scores = await scoring.label_scores(prompt, labels)
            except (KeyError, IndexError, TypeError, ValueError) as error:
                return _failed(RemoteResponseError(
                    index, endpoint.url, attempt, f"the labels could not be scored ({type(error).__name__}: {error})."
                ))
            return self._labelled(index, labels, scores.probs, n_prompt_tokens=scores.n_prompt_tokens,
                                  n_tokens=0, n_cached_tokens=scores.n_cached_tokens)
        body = endpoint.api.request_body(self.context.model, prompt, self.params, seed, labels,
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
        labels, constraint = self.label_sets[index], self.constraints[index]
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
            text=label, tokens=[], finish_reason="stop", choice=label,
            choice_probs=None if probs is None else dict(zip(labels, probs.tolist())), **counts,
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


def _failed(error: PromptError) -> Completion:
    return Completion("", [], 0, 0, 0, "error", error)


def _describe(error: httpx.HTTPError) -> str:
    """The error's message, and that of the OS error under it: httpx's async client says
    only "All connection attempts failed" for a refused connection."""
    root: BaseException = error
    while root.__cause__ is not None or root.__context__ is not None:
        root = root.__cause__ or root.__context__
    text = str(error) or type(error).__name__
    return text if root is error or str(root) in text else f"{text} ({type(root).__name__}: {root})"


def _server_message(response: httpx.Response) -> str:
    """The error message in a server's response: OpenAI's {"error": {"message": ...}},
    FastAPI's {"detail": ...}, or the body's text."""
    try:
        payload = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])[:300]
        if "detail" in payload:
            return str(payload["detail"])[:300]
    return response.text[:300]


def _retry_after(response: httpx.Response) -> Optional[float]:
    try:
        return max(0.0, float(response.headers["retry-after"]))
    except (KeyError, ValueError):
        return None  # absent, or an HTTP date: the pool's own backoff then
