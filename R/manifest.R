#' How answers were made: a reproducibility manifest
#'
#' Everything that determines the answers of a [generate_parallel()],
#' [generate()] or [annotate_texts()] call, and what the run did: the model
#' file and its SHA-256, the chat template's SHA-256 -- or, for answers from
#' servers ([context_remote()]), the model id they report, the kind of server
#' and the endpoints' base URLs, with `NA` for the file, its SHA-256 and the
#' template, which stay on the server (never the API key) -- the prompt's
#' shape (for [annotate_texts()]: the layout, instruction, labels or schema and
#' the number of worked examples; otherwise the labels, schema or grammar the
#' answers kept to), every generation parameter with the seed actually used,
#' the engine's mode (`batch_invariant`, the KV cache's types, and
#' `identity_guaranteed`: whether every answer is the one its prompt gets
#' alone, which servers never guarantee),
#' the prompts answered, taken from the cache or failed (for [annotate_texts()]
#' also the rows answered, failed or skipped for want of a text, and with
#' `passages` how the texts were split: the passages' size in tokens, their
#' overlap, the rules that combine them and how many passages the texts
#' gave), the
#' timings, and the versions of R, Python, the engine, llama-cpp-python and
#' llama.cpp. Print it in a report, or turn it into a table with
#' [as.data.frame()].
#'
#' The model file is hashed when the manifest is first asked for (once per
#' session and file), not by every call: the SHA-256 is that of the file as it
#' was when the answers were made. A file changed or removed since gives `NA`,
#' with a warning of class `newrllama4_warning_model_changed`.
#'
#' @param x The value of [generate_parallel()], [generate()] or
#'   [annotate_texts()].
#' @return A `newrllama4_manifest` object: a named list of sections.
#' @seealso [annotate_texts()], [generate_parallel()], [learn_labels()] and the estimators, whose results carry one.
#' @export
#' @examplesIf engine_available()
#' ctx <- context_create(model_load(), n_ctx = 512L, n_seq_max = 2L)
#' labelled <- annotate_texts(c("I love it.", "I hate it."),
#'                            instruction = "Positive or negative?",
#'                            labels = c("positive", "negative"), context = ctx,
#'                            progress = FALSE)
#' manifest(labelled)
#' as.data.frame(manifest(labelled))
#'
#' answers <- generate_parallel(ctx, "The capital of France is", max_tokens = 4L,
#'                              temperature = 0)
#' manifest(answers)$parameters$temperature
manifest <- function(x) {
  record <- attr(x, "manifest", exact = TRUE)
  if (!inherits(record, "newrllama4_manifest")) {
    abort_invalid(c(
      "{.arg x} must be the value of {.fn generate_parallel}, {.fn generate} or {.fn annotate_texts},
       not {.obj_type_friendly {x}}.",
      "i" = "Subsets, combinations and data frame verbs that rebuild the table drop the manifest; take it from the result first."
    ), "x", caller_env())
  }
  with_model_sha256(record)
}

# The manifest of one engine call; annotate_texts() fills in its own prompt and rows.
new_manifest <- function(context, params, result, prompt) {
  nl <- engine()
  remote <- inherits(context, "newrllama4_remote_context")
  model <- if (remote) {
    engine_call(nl$server_record, context$py)
  } else {
    engine_call(nl$model_record, context$model$py, hash_file = FALSE)
  }
  file_state <- model$file_state
  # one set of fields for both: NA for what a local file or a server does not have
  model <- lapply(stats::setNames(nm = manifest_model_fields), function(field) model[[field]] %||% NA)
  stats <- result$stats
  n_failed <- nrow(result$errors)
  parameters <- params[intersect(names(sampling_defaults), names(params))]
  parameters$seed <- stats$seed
  parameters["stop"] <- list(unlist(parameters$stop))
  structure(list(
    created = format(Sys.time(), "%Y-%m-%d %H:%M:%S %Z"),
    model = model[setdiff(manifest_model_fields, "chat_template_sha256")],
    prompt = c(prompt, list(chat_template_sha256 = model$chat_template_sha256)),
    parameters = c(parameters, if (remote) {
      list(max_concurrency = context$py$max_concurrency)
    } else {
      list(n_ctx = context$py$n_ctx, n_seq_max = context$py$n_seq_max, batch_invariant = stats$batch_invariant,
           kv_cache = stats$kv_cache)
    }, list(identity_guaranteed = stats$identity_guaranteed)),
    prompts = list(
      total = stats$prompts,
      from_cache = stats$result_cache_hits,
      computed = stats$prompts - stats$result_cache_hits - n_failed,
      failed = n_failed,
      cache = params$cache %||% NA_character_
    ),
    timings = stats[c("total_seconds", "prefill_seconds", "decode_seconds", "sample_seconds",
                      "prompt_tokens", "cached_prompt_tokens", "generated_tokens")],
    versions = engine_versions()
  ), class = "newrllama4_manifest", file_state = file_state)
}

# What a call's constraints were, as sent to the engine: labels, a schema (its
# JSON) or a grammar, shared by all prompts, or "per prompt" where each has its own.
# With `field_probs`, the fields that were scored (`field_probs`: their names, in
# the order the answers gave them).
constraints_record <- function(params, field_probs = NULL) {
  shared <- function(value, is_one) if (is.null(value)) NULL else if (is_one(value)) unlist(value) else "per prompt"
  compact(list(
    labels = shared(params$labels, function(x) all(vapply(x, rlang::is_string, NA))),
    schema = shared(params$json_schema, is.character),
    grammar = shared(params$grammar, is.character),
    field_probs = if (isTRUE(params$field_probs)) unique(unlist(lapply(field_probs, names))) %||% character()
  ))
}

compact <- function(x) x[!vapply(x, is.null, NA)]

# The engine's versions do not change within a session: asked once.
engine_versions <- function() {
  if (is.null(the$versions)) the$versions <- c(list(R = R.version$version.string), engine_call(engine()$versions))
  the$versions
}

# The manifest with the model file's SHA-256, hashed now if the call left it
# out: NA, with a warning, if the file is no longer the one that answered.
with_model_sha256 <- function(record) {
  file_state <- attr(record, "file_state", exact = TRUE)
  if (is.null(file_state) || !is.na(record$model$sha256)) return(record)
  sha256 <- engine_call(engine()$about$file_sha256_if_unchanged, record$model$path, file_state)
  if (is.null(sha256)) {
    warn_newrllama4(
      "model_changed",
      c("The model file {.path {record$model$path}} changed or went after these answers were made.",
        "i" = "The manifest's {.field sha256} is {.code NA}: the file that answered can no longer be identified.")
    )
  }
  record$model$sha256 <- sha256 %||% NA_character_
  attr(record, "file_state") <- NULL
  record
}

# A local model is its file and where it came from (the Hub repository, file and commit,
# the URL, or the Ollama model and digest); a server's model its id, the kinds of server and
# their base URLs (never the API key).
manifest_model_fields <- c("file", "path", "sha256", "file_bytes", "description", "parameters",
                           "source", "hub_repo", "hub_file", "hub_revision", "url", "ollama_model", "ollama_digest",
                           "id", "server", "endpoints", "chat_template_sha256")

#' @rdname manifest
#' @param row.names,optional Unused; for the generic.
#' @param ... Unused.
#' @export
as.data.frame.newrllama4_manifest <- function(x, row.names = NULL, optional = FALSE, ...) {
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
format.newrllama4_manifest <- function(x, ...) {
  table <- as.data.frame(x)
  lines <- cli::format_inline("{.cls newrllama4_manifest} created {x$created}")
  for (section in setdiff(unique(table$section), "created")) {
    rows <- table[table$section == section, ]
    # each value cut to the console's width, at least 64 characters: a SHA-256
    # is shown whole, since it is what a report keeps
    room <- pmax(64, getOption("width", 80) - nchar(bullet_lines(paste0(rows$item, ": "))))
    value <- ifelse(nchar(rows$value) > room, paste0(substr(rows$value, 1, room - 3), "..."), rows$value)
    lines <- c(lines, "", cli::style_bold(section), bullet_lines(sprintf("%s: %s", rows$item, value)))
  }
  within_width(lines)
}

#' @export
print.newrllama4_manifest <- function(x, ...) print_lines(x, ...)

# data's manifest, or a new one for labels made elsewhere (a simulation, another
# tool), for the steps that add to it.
manifest_of <- function(data) {
  record <- attr(data, "manifest", exact = TRUE)
  if (inherits(record, "newrllama4_manifest")) return(record)
  structure(list(created = format(Sys.time(), "%Y-%m-%d %H:%M:%S %Z")), class = "newrllama4_manifest")
}
