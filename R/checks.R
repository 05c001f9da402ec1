# Argument checks, run in R before anything reaches the engine. Each raises
# newrllama4_error_invalid_argument naming the argument and what was wrong.

abort_invalid <- function(message, arg, call, ...) {
  cli::cli_abort(
    message,
    class = c("newrllama4_error_invalid_argument", "newrllama4_error"),
    argument = arg,
    call = call,
    ...,
    .envir = parent.frame()
  )
}

check_string <- function(x, arg, call = caller_env()) {
  if (!is.character(x) || length(x) != 1 || is.na(x)) {
    abort_invalid("{.arg {arg}} must be a single string, not {.obj_type_friendly {x}}.", arg, call)
  }
  invisible(x)
}

# A single string, as UTF-8 for the engine.
check_text <- function(x, arg, call = caller_env()) {
  check_string(x, arg, call)
  as_utf8(x, arg, call)
}

check_flag <- function(x, arg, call = caller_env()) {
  if (!is.logical(x) || length(x) != 1 || is.na(x)) {
    abort_invalid("{.arg {arg}} must be {.code TRUE} or {.code FALSE}, not {.obj_type_friendly {x}}.", arg, call)
  }
  invisible(x)
}

# A single whole number in [min, max], returned as an integer where it fits.
check_whole <- function(x, arg, min, max = Inf, call = caller_env()) {
  ok <- is.numeric(x) && length(x) == 1 && !is.na(x) && is.finite(x) && x == round(x) && x >= min && x <= max
  if (!ok) {
    range <- range_text(min, max)
    abort_invalid("{.arg {arg}} must be a single whole number {range}, not {.obj_type_friendly {x}}{show_value(x)}.",
                  arg, call)
  }
  if (abs(x) <= .Machine$integer.max) as.integer(x) else x
}

# A single number in [min, max] (or (min, max] with `open_min`).
check_number <- function(x, arg, min, max = Inf, open_min = FALSE, call = caller_env()) {
  ok <- is.numeric(x) && length(x) == 1 && !is.na(x) && is.finite(x) &&
    (if (open_min) x > min else x >= min) && x <= max
  if (!ok) {
    range <- range_text(min, max, open_min)
    abort_invalid("{.arg {arg}} must be a single number {range}, not {.obj_type_friendly {x}}{show_value(x)}.",
                  arg, call)
  }
  as.double(x)
}

# "in [0, 1]", "in (0, 1]", ">= 0" or "> 0".
range_text <- function(min, max, open_min = FALSE) {
  if (is.finite(max)) {
    sprintf("in %s%s, %s]", if (open_min) "(" else "[", format(min, scientific = FALSE), format(max, scientific = FALSE))
  } else {
    sprintf("%s %s", if (open_min) ">" else ">=", min)
  }
}

# Indices for a cli message: cli pluralises by the length of a character vector,
# but takes a numeric one as a single quantity and fails on several.
positions <- function(indices) as.character(indices)

show_value <- function(x) {
  if (is.atomic(x) && length(x) == 1 && !is.na(x)) paste0(" (", format(x), ")") else ""
}

# `live = FALSE` also accepts a freed one, or one from another R session.
check_model <- function(model, live = TRUE, call = caller_env()) {
  check_handle(model, "model", "newrllama_model", "model_load", live, call)
}

check_context <- function(context, live = TRUE, call = caller_env()) {
  check_handle(context, "context", "newrllama_context", "context_create", live, call)
}

# A model or context object, as made by its constructor `maker`; if `live`, one
# that still has its engine object: not freed, and not from another R session
# (saved, then read back), where it arrives as a null pointer.
check_handle <- function(x, arg, class, maker, live, call) {
  if (!inherits(x, class)) {
    abort_invalid("{.arg {arg}} must be a {arg} from {.fn {maker}}, not {.obj_type_friendly {x}}.", arg, call)
  }
  state <- handle_state(x)
  if (live && state != "live") {
    problem <- if (state == "freed") {
      "This {arg} has been freed."
    } else {
      "This {arg} comes from another R session (saved, then read back); its engine object stayed there."
    }
    cli::cli_abort(
      c(problem, "i" = "Create it again with {.fn {maker}}."),
      class = c("newrllama4_error_closed", "newrllama4_error"),
      what = arg,
      call = call
    )
  }
  invisible(x)
}

# "live", "freed", or "restored" (from another R session: a null pointer).
handle_state <- function(x) {
  if (reticulate::py_is_null_xptr(x$py)) return("restored")
  if (x$py$closed) "freed" else "live"
}

# The engine's rule (newrllama4.models): a string without a path separator that
# does not end in ".gguf" names a model, which the engine checks; a path R checks
# before the engine starts.
is_model_name <- function(x) {
  rlang::is_string(x) && !grepl("[/\\\\]", x) && !grepl("\\.gguf$", x, ignore.case = TRUE)
}

check_model_path <- function(path, call = caller_env()) {
  check_string(path, "model_path", call)
  if (!file.exists(path)) {
    abort_invalid("{.arg model_path} {.path {path}} does not exist.", "model_path", call)
  }
  if (dir.exists(path)) {
    abort_invalid("{.arg model_path} {.path {path}} is a directory, not a GGUF file.", "model_path", call)
  }
  magic <- readBin(path, "raw", n = 4)
  if (!identical(magic, charToRaw("GGUF"))) {
    abort_invalid("{.arg model_path} {.path {path}} is not a GGUF file.", "model_path", call)
  }
  normalizePath(path)
}

# A character vector of prompts, or a list of conversations (each a list of messages).
check_prompts <- function(prompts, call = caller_env()) {
  if (is.list(prompts) && !is.data.frame(prompts)) {
    return(Map(check_messages, prompts, sprintf("prompts[[%d]]", seq_along(prompts)), MoreArgs = list(call = call)))
  }
  if (!is.character(prompts)) {
    abort_invalid(
      "{.arg prompts} must be a character vector or a list of conversations, not {.obj_type_friendly {prompts}}.",
      "prompts", call
    )
  }
  missing <- which(is.na(prompts))
  if (length(missing) > 0) {
    abort_invalid("{.arg prompts} must not contain {.code NA}; found at position{?s} {positions(missing)}.",
                  "prompts", call)
  }
  as_utf8(prompts, "prompts", call)
}

# Strings as UTF-8, the engine's encoding. latin1 strings, and native ones in a
# locale that is not UTF-8, are translated; the others (marked "bytes", or native
# in a UTF-8 locale) must already be valid UTF-8, since translating invalid
# bytes would only turn them into "<e9>"-style escapes.
as_utf8 <- function(x, arg, call = caller_env()) {
  translate <- Encoding(x) == "latin1" | (Encoding(x) == "unknown" & !l10n_info()[["UTF-8"]])
  x[translate] <- enc2utf8(x[translate])
  invalid <- which(!validUTF8(x))
  if (length(invalid) > 0) {
    elements <- cli::pluralize("Element{?s} {positions(invalid)} {?is/are}")
    abort_invalid("{elements} not valid UTF-8 text in {.arg {arg}}.", arg, call)
  }
  Encoding(x) <- "UTF-8"
  x
}

check_seed <- function(seed, call = caller_env()) {
  if (is.null(seed)) return(NULL)
  seed <- check_whole(seed, "seed", min = -1, call = call)
  if (seed == -1L) NULL else seed
}

check_stop <- function(stop, call = caller_env()) {
  if (is.null(stop)) return(NULL)
  if (!is.character(stop) || length(stop) == 0 || anyNA(stop) || any(!nzchar(stop))) {
    abort_invalid("{.arg stop} must be {.code NULL} or a character vector of non-empty strings.", "stop", call)
  }
  as.list(as_utf8(stop, "stop", call))
}

# NULL, or the path of a result cache file, which the engine creates if missing.
check_cache <- function(cache, call = caller_env()) {
  if (is.null(cache)) return(NULL)
  check_string(cache, "cache", call)
  if (!nzchar(cache)) abort_invalid("{.arg cache} must be {.code NULL} or the path of a file, not {.val {cache}}.",
                                    "cache", call)
  path.expand(as_utf8(cache, "cache", call))
}

# NULL, one set of labels for every prompt, or a list of label sets (or NULLs),
# one per prompt; label sets go to the engine as lists so that reticulate never
# turns a set into a scalar.
check_choices <- function(choices, n_prompts, call = caller_env()) {
  if (is.null(choices)) return(NULL)
  if (is.character(choices)) return(as.list(check_labels(choices, "choices", call)))
  if (is.list(choices) && length(choices) == n_prompts) {
    return(lapply(seq_along(choices), function(i) {
      if (is.null(choices[[i]])) NULL else as.list(check_labels(choices[[i]], sprintf("choices[[%d]]", i), call))
    }))
  }
  abort_invalid(
    "{.arg choices} must be a character vector of labels, or a list of {n_prompts} of them (or {.code NULL}), one per prompt.",
    "choices", call
  )
}

check_labels <- function(labels, arg, call) {
  if (!is.character(labels) || length(labels) < 2 || anyNA(labels) || any(labels == "") || anyDuplicated(labels)) {
    abort_invalid("{.arg {arg}} must hold at least two distinct, non-empty labels.", arg, call)
  }
  as_utf8(labels, arg, call)
}

# NULL, one JSON schema for every prompt, or one schema (or NULL) per prompt; each
# goes to the engine as a JSON string, which checks that it is a valid schema. A
# schema is a named list, or a JSON string; `required` and `enum` are JSON arrays
# even when they hold one value, which a plain R vector of length one would not be.
check_json_schema <- function(json_schema, n_prompts, call = caller_env()) {
  is_one <- function(x) rlang::is_string(x) || (is.list(x) && rlang::is_named(x))
  schema_json <- function(x) {
    if (is.character(x)) return(as_utf8(x, "json_schema", call))
    as.character(jsonlite::toJSON(json_arrays(x), auto_unbox = TRUE, null = "null", digits = NA))
  }
  check_per_prompt(json_schema, n_prompts, is_one, schema_json,
                   "a JSON schema (a named list or a JSON string)", "json_schema", call)
}

json_arrays <- function(schema) {
  if (!is.list(schema)) return(schema)
  for (key in intersect(names(schema), c("required", "enum"))) {
    if (is.atomic(schema[[key]])) schema[[key]] <- as.list(schema[[key]])
  }
  lapply(schema, json_arrays)
}

# NULL, one GBNF grammar for every prompt, or one (or NULL) per prompt.
check_grammar <- function(grammar, n_prompts, call = caller_env()) {
  check_per_prompt(grammar, n_prompts, rlang::is_string, function(x) as_utf8(x, "grammar", call),
                   "a GBNF grammar (a string)", "grammar", call)
}

check_per_prompt <- function(x, n_prompts, is_one, convert, one, arg, call) {
  if (is.null(x)) return(NULL)
  if (is_one(x)) return(convert(x))
  if ((is.list(x) || is.character(x)) && !rlang::is_named(x) && length(x) == n_prompts) {
    x <- as.list(x)
    if (all(vapply(x, function(v) is.null(v) || is_one(v), NA))) {
      return(lapply(x, function(v) if (is.null(v)) NULL else convert(v)))
    }
  }
  abort_invalid("{.arg {arg}} must be {one}, or a list of {n_prompts} of them (or {.code NULL}), one per prompt.",
                arg, call)
}
