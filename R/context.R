#' Create a context
#'
#' A context runs prompts against a model, up to `n_seq_max` at once. Each of
#' those sequences has its own slice of the KV cache, `n_ctx` tokens long
#' (prompt plus answer), so one prompt never sees or disturbs another.
#'
#' The KV cache is allocated at once: `n_ctx * n_seq_max` cells (and 64 more per
#' sequence with `batch_invariant = TRUE`). A context whose
#' estimated cache is larger than the memory available is refused before
#' anything is allocated, with an error of class
#' `newrllama4_error_context_too_large` (fields `needed_bytes` and
#' `available_bytes`). An `n_ctx` beyond the context length the model was
#' trained for is refused too (`newrllama4_error_invalid_argument`), rather than
#' silently lowered.
#'
#' A context lives in this R session only: one saved and read back (e.g. with
#' [saveRDS()] and [readRDS()]) raises `newrllama4_error_closed` when used;
#' create it again.
#'
#' @param model A model from [model_load()].
#' @param n_ctx Context window of each sequence, in tokens (prompt plus
#'   generated text); at most the model's trained context length.
#' @param n_threads CPU threads; `NULL` uses every core available to R.
#' @param n_seq_max How many prompts run at once. More gives higher
#'   throughput, up to what the hardware sustains, and costs `n_ctx` KV cache
#'   cells each.
#' @param prefix_cache Decode a prompt prefix that several prompts share (a
#'   long instruction, few-shot examples) once, and reuse it: within one call
#'   and in later calls on this context. Answers are exactly the same as
#'   without it; only faster. See [context_clear_cache()].
#' @param prefix_cache_mb Memory for cached prefixes, in MB; the least
#'   recently used go first when it is full.
#' @param batch_invariant `TRUE` (the default): every answer is exactly what the
#'   model gives that prompt alone, whatever else runs beside it. `FALSE` is the
#'   fast lane, for work that does not need that: llama.cpp's own batching, and
#'   with `n_seq_max = 1` its kernels for one prompt at a time (on a copy of the
#'   weights repacked for them, loaded on first use), in a worker process of
#'   its own, because llama.cpp's fastest kernels need settings that the
#'   batch-invariant contexts of this R session cannot share; answers may then
#'   differ in the last digits, and now and then in a token, with what runs
#'   beside them. The result's `stats` and [manifest()] record the mode.
#' @return A `newrllama4_context` object.
#' @seealso [generate_parallel()], [context_free()], [context_clear_cache()]
#' @export
#' @examplesIf engine_available()
#' model <- model_load()
#' ctx <- context_create(model, n_ctx = 512L, n_seq_max = 4L)
#' ctx
context_create <- function(model, n_ctx = 2048L, n_threads = NULL, n_seq_max = 8L,
                           prefix_cache = TRUE, prefix_cache_mb = 512, batch_invariant = TRUE) {
  check_model(model)
  n_ctx <- check_whole(n_ctx, "n_ctx", min = 1)
  if (!is.null(n_threads)) n_threads <- check_whole(n_threads, "n_threads", min = 1)
  n_seq_max <- check_whole(n_seq_max, "n_seq_max", min = 1)
  check_flag(prefix_cache, "prefix_cache")
  prefix_cache_mb <- check_number(prefix_cache_mb, "prefix_cache_mb", min = 0)
  check_flag(batch_invariant, "batch_invariant")
  py <- engine_call(engine()$Context,
    model$py, n_ctx = n_ctx, n_seq_max = n_seq_max, n_batch = max(512L, n_seq_max), n_threads = n_threads,
    prefix_cache = prefix_cache, prefix_cache_mb = prefix_cache_mb, batch_invariant = batch_invariant
  )
  structure(list(py = py, model = model), class = "newrllama4_context")
}

#' Free a context
#'
#' Releases the context's KV cache now. Using the context afterwards raises an
#' error of class `newrllama4_error_closed`.
#'
#' @param context A context from [context_create()].
#' @return `context`, invisibly.
#' @seealso [context_create()]; [model_free()] for the model.
#' @export
#' @examplesIf engine_available()
#' model <- model_load()
#' ctx <- context_create(model, n_ctx = 256L)
#' context_free(ctx)
context_free <- function(context) {
  check_context(context, live = FALSE)
  if (handle_state(context) == "live") with_engine(context$py$close())
  invisible(context)
}

#' Empty a context's prefix cache
#'
#' Drops every cached prompt prefix (see `prefix_cache` in
#' [context_create()]), so that later calls decode their prompts afresh and the
#' memory is returned. Answers do not change either way.
#'
#' @param context A context from [context_create()].
#' @return `context`, invisibly.
#' @seealso [context_create()]; [generation_stats()], whose `cached_prompt_tokens` show what the cache saved.
#' @export
#' @examplesIf engine_available()
#' model <- model_load()
#' ctx <- context_create(model, n_ctx = 256L, n_seq_max = 2L)
#' instruction <- "Answer with one word. Which is larger, a mouse or an elephant?"
#' first <- generate_parallel(ctx, c(instruction, instruction), max_tokens = 4L,
#'                            temperature = 0)
#' attr(first, "stats")$cached_prompt_tokens
#' context_clear_cache(ctx)
context_clear_cache <- function(context) {
  check_context(context)
  if (inherits(context, "newrllama4_remote_context")) {
    abort_invalid("{.arg context} is a remote context: its servers keep their own caches.", "context", environment())
  }
  with_engine(context$py$clear_cache())
  invisible(context)
}

#' @export
format.newrllama4_context <- function(x, ...) {
  py <- x$py
  format_handle(x, "{.cls newrllama4_context} for {.path {basename(py$model$path)}}", c(
    "n_ctx: {py$n_ctx} tokens per sequence",
    "n_seq_max: {py$n_seq_max} sequences at once",
    "threads: {py$n_threads}",
    if (py$batch_invariant) "batch-invariant: answers as each prompt alone" else "fast lane: answers may depend on the batch",
    if (!is.null(py$worker_pid)) "runs in worker process {py$worker_pid}"
  ))
}

#' @export
print.newrllama4_context <- function(x, ...) print_lines(x, ...)
