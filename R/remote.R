#' Run prompts on OpenAI-compatible servers
#'
#' A remote context sends prompts to servers that speak the OpenAI API, such as
#' vLLM or llama.cpp's `llama-server`, instead of running a local model.
#' [generate_parallel()] and [generate()] take it as they take a context from
#' [context_create()], and give the same answers, stats and classed errors, so
#' code written on a laptop runs unchanged on rented GPU machines.
#'
#' Each prompt is one request. Several `base_url`s serving the same model share
#' the prompts: each request goes to the endpoint with the fewest requests in
#' flight, at most `max_concurrency` per endpoint. A request that fails because
#' a server cannot be reached, drops the connection, answers HTTP 429 or a 5xx
#' status is sent again, to another endpoint when there is one, up to `retries`
#' times; a server that failed rests a moment (a second, doubling with each
#' failure in a row, or as long as its `Retry-After` asks) before it gets more.
#' Once every server has refused connections in `retries + 1` rounds in a row
#' (and at least three), the servers are taken for gone: the prompts not yet
#' answered fail at once, with `attempts` 0 if they were never sent, instead of
#' each waiting out its retries (hours, over thousands of prompts).
#' A request with no answer within `timeout` seconds is not sent again. A prompt
#' whose last attempt fails gets `NA`, like any failed prompt, with an error of
#' class `newrllama4_error_remote_connection`, `newrllama4_error_remote_timeout`,
#' `newrllama4_error_remote_http` (fields `status` and `server_message`) or
#' `newrllama4_error_remote_response` (an answer that is not a completion, or
#' not a label); each is also a `newrllama4_error_remote` (fields `endpoint` and
#' `attempts`) and a `newrllama4_error_prompt`. An interrupt (Ctrl-C) cancels
#' the requests in flight.
#'
#' Every endpoint is asked for its models when the context is created: one that
#' cannot be reached, refuses the API key, or does not serve `model` is an
#' error of class `newrllama4_error_endpoint`.
#'
#' The API key is read from the environment variable `NEWRLLAMA4_API_KEY`
#' unless given. `OPENAI_API_KEY` is never read: it would send an OpenAI key to
#' whatever server `base_url` names. The key is sent to the servers and never
#' printed or kept in the R object.
#'
#' What a server does not guarantee: an answer independent of the other prompts
#' (a server batches requests as it likes, and its numbers depend on the batch;
#' vLLM has an opt-in batch-invariant mode on some GPUs). Each request carries a
#' seed derived from `seed` and the prompt's position, as locally, which makes
#' a server's answers repeatable where the server itself is. Servers ignore the
#' parameters they lack: vLLM `repeat_last_n` (its penalty covers the whole
#' text), llama-cpp-python's server `repeat_last_n` too (its window is fixed
#' when it starts); llama-server takes them all. `labels`, `json_schema` and
#' `grammar` go to the server's structured outputs (vLLM, llama-server,
#' llama-cpp-python's server), which check them against the server's own
#' vocabulary; a JSON answer cut off by `max_tokens` fails with
#' `newrllama4_error_incomplete_output`, as locally. With `labels`, vLLM and
#' llama-server score every label as the local engine does -- the likelihood
#' of each spelling's own tokens after the prompt, normalised over the labels
#' -- and the label is chosen from those probabilities as locally (the most
#' likely at `temperature = 0`); against llama-server serving the same model
#' with the engine's F16 cache they agree with local ones within 1e-4.
#' llama-cpp-python's server restricts the answer with a grammar and its
#' probabilities are read from the top log-probabilities of the answer's first
#' token: exact for labels of one token, an approximation otherwise, `NA` when
#' they do not show the labels. llama-cpp-python's server turns a JSON schema into a grammar of
#' its own, which leaves out numeric bounds (`minimum`, `maximum`) and lets
#' raw control characters into strings (such an answer fails as not valid
#' JSON); vLLM and llama-server apply the schema themselves.
#'
#' A prompt given as a conversation (a list of messages) goes to the server's
#' chat endpoint (`/chat/completions`), which lays it out with the model's own
#' chat template; [annotate_texts()] sends its prompts that way, so serve an
#' instruction model for it.
#'
#' The result cache (`cache` in [generate_parallel()] and [annotate_texts()]) works
#' as with a local model: every answer is committed as it arrives, and a run
#' started again after a crash, an interrupt or a server that went away
#' computes only the prompts missing from the file. An answer is keyed by the
#' model id the servers report (not a file's SHA-256), the prompt as sent (its
#' text, token ids or messages, not its tokens), the kinds of server, and every
#' argument that can change it; never by the servers' addresses or the API key,
#' so the same model served elsewhere finds its answers again, and a local
#' model's answers and a server's never meet in one file.
#'
#' @param base_url The API root of a server, such as `"http://gpu-1:8000/v1"`
#'   (a bare `"http://gpu-1:8000"` gets `/v1`), or several of them serving the
#'   same model.
#' @param model The model to ask for, as the servers name it; `NULL` takes the
#'   one model they serve.
#' @param api_key The servers' API key; `NULL` reads `NEWRLLAMA4_API_KEY`, and
#'   sends none if it is unset.
#' @param max_concurrency Most requests in flight at once per endpoint.
#' @param timeout Seconds one request may wait for its answer.
#' @param retries How many times a failed request is sent again.
#' @return A `newrllama4_remote_context` object, which is also a
#'   `newrllama4_context`.
#' @seealso [generate_parallel()], [context_create()] for a local model.
#' @export
#' @examples
#' \dontrun{
#' # on the GPU machine: vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000
#' Sys.setenv(NEWRLLAMA4_API_KEY = "...")  # if the server was started with --api-key
#' ctx <- context_remote(c("http://gpu-1:8000/v1", "http://gpu-2:8000/v1"))
#' ctx
#' answers <- generate_parallel(ctx, c("The capital of France is", "2 + 2 ="),
#'                              max_tokens = 8L, temperature = 0)
#' generation_stats(answers)$retries
#' }
context_remote <- function(base_url, model = NULL, api_key = NULL, max_concurrency = 16L, timeout = 600,
                           retries = 3L) {
  check_base_url(base_url)
  if (!is.null(model)) check_string(model, "model")
  if (is.null(api_key)) {
    api_key <- Sys.getenv("NEWRLLAMA4_API_KEY")
    if (!nzchar(api_key)) api_key <- NULL
  } else {
    check_string(api_key, "api_key")
  }
  max_concurrency <- check_whole(max_concurrency, "max_concurrency", min = 1)
  timeout <- check_number(timeout, "timeout", min = 0, open_min = TRUE)
  retries <- check_whole(retries, "retries", min = 0)
  py <- engine_call(engine()$RemoteContext,
    as.list(base_url), model = model, api_key = api_key, max_concurrency = max_concurrency,
    timeout = timeout, retries = retries
  )
  structure(list(py = py), class = c("newrllama4_remote_context", "newrllama4_context"))
}

check_base_url <- function(base_url, call = caller_env()) {
  if (!is.character(base_url) || length(base_url) == 0 || anyNA(base_url)) {
    abort_invalid("{.arg base_url} must be a character vector of URLs, not {.obj_type_friendly {base_url}}.",
                  "base_url", call)
  }
  invisible(base_url)
}

#' @export
format.newrllama4_remote_context <- function(x, ...) {
  py <- x$py
  endpoint_names <- function() vapply(py$endpoints, function(e) reticulate::py_str(e), "")
  format_handle(x, "{.cls newrllama4_remote_context} for model {.val {py$model}}", c(
    "endpoint{?s}: {endpoint_names()}",
    "max_concurrency: {py$max_concurrency} request{?s} at once per endpoint",
    "timeout: {py$timeout} s; retries: {py$retries}"
  ))
}
