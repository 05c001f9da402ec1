"""RemoteContext: generate_parallel() on OpenAI-compatible servers, and finding out what they serve."""

from __future__ import annotations

import os
from typing import Any, Optional

import httpx

from ..checks import check_callable, check_int, check_prompts, check_real, is_conversation
from ..constraints import Constraint
from ..errors import ClosedError, EndpointError, InvalidArgumentError
from ..call_driver import Progress
from ..result_cache import check_cache_path
from ..generation import Generator
from ..labels import Labels
from ..results import ParallelResult
from ..sampling import SamplingParams
from .call import RemoteCall, RemoteSettings, run_to_completion
from .dialects import OpenAICompatible, server_api
from .http import client_timeout, describe_error, server_message
from .pool import Endpoint

# Read by default, and only this one: falling back on OPENAI_API_KEY would send an
# OpenAI key to whatever server `base_url` names.
API_KEY_VARIABLE = "NEWRLLAMA4_API_KEY"


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
    their own order and ignore what they lack (see dialects.py); prompts given as
    token ids need a server that takes them (vLLM, llama-server); a conversation goes
    to the chat endpoint, where the server applies its model's chat template.

    `json_schema` and `grammar` go to the server's structured outputs (see
    dialects.py), which check them against the server's vocabulary. Each answer is
    checked against them again on arrival (constraints.text_error): one the server let
    through against them fails with ConstraintError, one cut off by max_tokens with
    IncompleteOutputError, as locally; a JSON answer's value is in `parsed`.

    With `labels`, vLLM's and llama-server's labels are scored exactly as locally, on
    their own endpoints (see labels.py). On other servers each answer is restricted to a
    label by the server's structured outputs, and where the top log-probabilities of
    the answer's first token show the labels (see labels.label_probs), they give
    `label_probs`. Either way the label is picked from `label_probs` as locally: the
    most likely with temperature 0, else drawn with the prompt's own random stream;
    where they are unknown, `label_probs` is None and the label is the server's answer.

    `cache` works as locally (see result_cache.py): answers are looked up before any
    request and committed as they arrive, keyed by `model_identity` and the prompt as
    sent, never by the endpoints' addresses or the API key.
    """

    def __init__(
        self,
        base_url: Any,
        model: Optional[str] = None,
        api_key: Optional[str] = None,
        max_concurrency: int = RemoteSettings.max_concurrency,
        timeout: float = RemoteSettings.timeout,
        retries: int = RemoteSettings.retries,
        backoff: float = RemoteSettings.backoff,
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
            response = httpx.get(f"{url}/models", headers=self._headers, timeout=client_timeout(self.timeout))
        except httpx.HTTPError as error:
            raise EndpointError(url, f"does not answer: {describe_error(error)}.") from None
        if response.status_code in (401, 403):
            raise EndpointError(url, f"refused the API key (HTTP {response.status_code}); pass `api_key` or "
                                     f"set the environment variable {API_KEY_VARIABLE}.")
        if response.status_code != 200:
            raise EndpointError(url, f"answered GET /models with HTTP {response.status_code}: "
                                     f"{server_message(response)}")
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

    def __repr__(self) -> str:
        state = "closed" if self.closed else (
            f"{self.model!r} on {', '.join(map(str, self.endpoints))}, "
            f"{self.max_concurrency} requests at once per endpoint"
        )
        return f"<newrllama4.RemoteContext {state}>"

    @property
    def settings(self) -> RemoteSettings:
        """What a call reads of this context, as it is when the call starts."""
        return RemoteSettings(self.endpoints, self.model, tuple(self._headers.items()), self.max_concurrency,
                              self.timeout, self.retries, self.backoff)

    @property
    def server_kinds(self) -> list[str]:
        """The kinds of server behind the endpoints (see dialects.py), sorted, each once."""
        return self.settings.server_kinds

    @property
    def scores_fields(self) -> bool:  # type: ignore[override]
        """Whether every endpoint can score a schema's fields (`field_probs`): llama-server's."""
        return all(e.api.label_scoring is not None and e.api.label_scoring.scores_fields for e in self.endpoints)

    @property
    def model_identity(self) -> str:
        """What names this context's model in a result cache's key (RemoteSettings.model_identity)."""
        return self.settings.model_identity

    # -- generation -------------------------------------------------------------------

    def _vocabulary(self) -> None:
        return None  # the servers check constraints against their own

    def _generate(self, prompts: list[Any], labels: list[Optional[Labels]],
                  constraints: list[Optional[Constraint]], sampling: SamplingParams,
                  on_progress: Progress, cache: Optional[str], features: Any = None) -> ParallelResult:
        if self._closed:
            raise ClosedError("remote context")
        if features is not None:
            raise InvalidArgumentError(
                "hidden_states", True, "False: a server gives no hidden state of a prompt it answers (embed_parallel "
                "asks its embeddings endpoint)"
            )
        used = [(name, value) for name, value in (("labels", labels), ("json_schema", constraints))
                if any(v is not None for v in value)]
        unable = [str(e) for e in self.endpoints if not e.api.has_structured_outputs]
        if used and unable:
            name, value = used[0]
            raise InvalidArgumentError(
                name, value, f"None: {', '.join(unable)} has no structured outputs newrllama4 knows of"
            )
        if not self.scores_fields and any(c is not None and c.fields is not None for c in constraints):
            raise InvalidArgumentError(
                "field_probs", True, f"False: {', '.join(self.server_kinds)} cannot score a schema's fields "
                "(llama-server can)"
            )
        call = RemoteCall(self.settings, prompts, labels, constraints, sampling, on_progress, cache)
        return run_to_completion(call.run())


    # -- embeddings ---------------------------------------------------------------------

    def embed_parallel(self, prompts: Any, on_progress: Progress = None, cache: Any = None) -> ParallelResult:
        """Each prompt's embedding from the servers' embeddings endpoint, in prompt order:
        a completion per prompt with the vector in `hidden_state` (little-endian float32,
        as the server computed it, not normalised) and `text` empty.

        A prompt is a string or a list of token ids, embedded alone, pooled as the server
        was started to pool (llama-server's `--pooling`, vLLM's pooler): with `last`, a
        prompt's vector is the state the local engine's `hidden_states` keeps, within
        the kernels' differences. A server that gives no embeddings (see
        `dialects.py`) stops the call with NoEmbeddingsError; another failed request
        fails its prompt alone, after retries, as in generate_parallel. `cache` keeps the
        vectors as it keeps answers, apart from them.
        """
        if self._closed:
            raise ClosedError("remote context")
        prompts = check_prompts(prompts)
        for i, prompt in enumerate(prompts):
            if is_conversation(prompt):
                raise InvalidArgumentError(f"prompts[{i}]", "a conversation",
                                           "a string or token ids: an embeddings endpoint takes no chat messages")
        n = len(prompts)
        call = RemoteCall(self.settings, prompts, [None] * n, [None] * n, SamplingParams(max_tokens=1, temperature=0),
                          check_callable("on_progress", on_progress), check_cache_path(cache), embeddings=True)
        result = run_to_completion(call.run())
        sizes = {len(c.hidden_state) for c in result if c.hidden_state is not None}
        if len(sizes) > 1:
            raise EndpointError(self.endpoints[0].url, f"gave embeddings of {len(sizes)} sizes in one call.")
        return result


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
