#' How an annotation was made: a reproducibility manifest
#'
#' Everything that determines the answers of an [annotate()] call, and what
#' the run did: the model file and its SHA-256, the chat template's SHA-256
#' (or the plain layout) -- or, for answers from servers ([context_remote()]),
#' the model id they report, the kind of server and the endpoints' base URLs,
#' with `NA` for the file, its SHA-256 and the template, which stay on the
#' server (never the API key) -- the instruction, labels or schema, the number of
#' worked examples, every generation parameter with the seed actually used,
#' the rows answered, taken from the cache, failed or skipped, the timings,
#' and the versions of R, Python, the engine, llama-cpp-python and llama.cpp.
#' Print it in a report, or turn it into a table with [as.data.frame()].
#'
#' @param x The value of [annotate()].
#' @param ... Unused.
#' @return A `newrllama_manifest` object: a named list of sections.
#' @export
#' @examples
#' ctx <- context_create(model_load(), n_ctx = 512L, n_seq_max = 2L)
#' labelled <- annotate(c("I love it.", "I hate it."), instruction = "Positive or negative?",
#'                      labels = c("positive", "negative"), context = ctx, progress = FALSE)
#' manifest(labelled)
#' as.data.frame(manifest(labelled))
manifest <- function(x) {
  record <- attr(x, "manifest", exact = TRUE)
  if (!inherits(record, "newrllama_manifest")) {
    abort_invalid(c(
      "{.arg x} must be the value of {.fn annotate}, not {.obj_type_friendly {x}}.",
      "i" = "Data frame verbs that rebuild the table drop the manifest; take it from the result first."
    ), "x", caller_env())
  }
  record
}

new_manifest <- function(context, answers, task, n_rows) {
  nl <- engine()
  remote <- inherits(context, "newrllama_remote_context")
  model <- if (remote) engine_call(nl$server_record, context$py) else engine_call(nl$model_record, context$model$py)
  # one set of fields for both: NA for what a local file or a server does not have
  model <- lapply(stats::setNames(nm = manifest_model_fields), function(field) model[[field]] %||% NA)
  stats <- generation_stats(answers)
  errors <- generation_errors(answers)
  parameters <- utils::modifyList(generation_defaults(), task$parameters)
  parameters$seed <- stats$seed
  structure(list(
    created = format(Sys.time(), "%Y-%m-%d %H:%M:%S %Z"),
    model = model[setdiff(manifest_model_fields, "chat_template_sha256")],
    prompt = list(
      layout = task$layout,
      chat_template_sha256 = model$chat_template_sha256,
      instruction = task$instruction,
      labels = task$labels,
      schema = if (is.null(task$schema)) NULL else as.character(jsonlite::toJSON(task$schema, auto_unbox = TRUE)),
      examples = task$n_examples
    ),
    parameters = c(parameters, if (remote) {
      list(max_concurrency = context$py$max_concurrency)
    } else {
      list(n_ctx = context$py$n_ctx, n_seq_max = context$py$n_seq_max)
    }),
    rows = list(
      total = n_rows,
      skipped_missing_text = n_rows - length(answers),
      from_cache = stats$result_cache_hits,
      computed = length(answers) - stats$result_cache_hits - nrow(errors),
      failed = nrow(errors),
      cache = task$cache %||% NA_character_
    ),
    timings = stats[c("total_seconds", "prefill_seconds", "decode_seconds", "sample_seconds",
                      "prompt_tokens", "cached_prompt_tokens", "generated_tokens")],
    versions = c(list(R = R.version$version.string), engine_call(nl$versions))
  ), class = "newrllama_manifest")
}

# A local model is its file and where it came from (the Hub repository, file and commit,
# the URL, or the Ollama model and digest); a server's model its id, the kinds of server and
# their base URLs (never the API key).
manifest_model_fields <- c("file", "path", "sha256", "file_bytes", "description", "parameters",
                           "source", "hub_repo", "hub_file", "hub_revision", "url", "ollama_model", "ollama_digest",
                           "id", "server", "endpoints", "chat_template_sha256")

# generate_parallel()'s defaults for everything that shapes an answer.
generation_defaults <- function() {
  defaults <- formals(generate_parallel)
  names <- c("max_tokens", "top_k", "top_p", "temperature", "repeat_last_n", "penalty_repeat", "seed", "stop")
  lapply(defaults[names], eval)
}

#' @rdname manifest
#' @param row.names,optional Unused; for the generic.
#' @export
as.data.frame.newrllama_manifest <- function(x, row.names = NULL, optional = FALSE, ...) {
  sections <- unclass(x)
  rows <- lapply(names(sections), function(section) {
    value <- sections[[section]]
    if (!is.list(value)) value <- stats::setNames(list(value), section)
    data.frame(
      section = section,
      item = names(value),
      value = vapply(value, manifest_value, ""),
      stringsAsFactors = FALSE, row.names = NULL
    )
  })
  do.call(rbind, rows)
}

manifest_value <- function(value) {
  if (is.null(value)) return("")
  paste(format(unlist(value), scientific = FALSE, trim = TRUE), collapse = ", ")
}

#' @export
print.newrllama_manifest <- function(x, ...) {
  table <- as.data.frame(x)
  cli::cli_text("{.cls newrllama_manifest} created {x$created}")
  for (section in setdiff(unique(table$section), "created")) {
    cli::cli_h3(section)
    rows <- table[table$section == section, ]
    value <- ifelse(nchar(rows$value) > 70, paste0(substr(rows$value, 1, 67), "..."), rows$value)
    cli::cli_bullets(stats::setNames(sprintf("%s: %s", rows$item, escape_braces(value)), rep("*", nrow(rows))))
  }
  invisible(x)
}
