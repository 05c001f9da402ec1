"""RemoteContext: generate_parallel() on OpenAI-compatible servers (vLLM, llama.cpp's llama-server).

Each prompt is one request to `{base_url}/completions` (to `/chat/completions` for chat
messages, see dialects.py); prompts run up to
`max_concurrency` at a time on each endpoint and go to the endpoint with the fewest
requests in flight. A request that fails with a broken or refused connection, HTTP 429
or a 5xx status is sent again, on another endpoint when one is available, up to
`retries` times; an endpoint that failed rests before it gets more requests (`backoff`
seconds, doubling with each failure in a row, at most MAX_REST_SECONDS, or what its
Retry-After asks). Once every endpoint has refused connections in `retries + 1` rounds
in a row (at least three), the servers are taken for gone and the prompts not yet
answered fail without waiting out their retries. A prompt whose last attempt fails gets
its classed error in its Completion; the other prompts are unaffected.

The HTTP client is httpx's async one, not the `openai` package's (which wraps httpx and
brings pydantic and more with it): it gives direct control of timeouts, connection
limits and retries -- the openai client's own retries stay on one endpoint -- and sends
the fields the OpenAI API lacks (top_k, min_p, grammar, structured outputs) as plain
JSON, where the openai client takes them only as untyped `extra_body`.

One job per module: the context and its discovery of the servers (context.py), the
endpoint pool (pool.py), one call's requests (call.py), HTTP (http.py), what each kind
of server is sent and answers (dialects.py), and labels (labels.py).
"""

from .call import request_seed
from .context import API_KEY_VARIABLE, RemoteContext
from .pool import Endpoint, EndpointPool

__all__ = ["API_KEY_VARIABLE", "Endpoint", "EndpointPool", "RemoteContext", "request_seed"]
