# Engine exceptions -> classed R conditions.
#
# Every class of the engine's error module maps by name onto an R class, most
# specific first: PromptTooLongError (a PromptError) becomes
# c("newrllama4_error_prompt_too_long", "newrllama4_error_prompt",
#   "newrllama4_error", "rlang_error", "error", "condition"). The exception's
# attributes become condition fields, with prompt indices made 1-based.

engine_error_prefix <- "newrllama4.errors."

# Every condition the package signals is made here, its classes derived from one
# subclass as httr2 derives them from a status: "missing_column" gives
# c("newrllama4_error_missing_column", "newrllama4_error_invalid_argument",
#   "newrllama4_error"), following `condition_parents`, so that a handler for a
# general kind also catches each special one.
condition_parents <- c(
  missing_column = "invalid_argument",
  argument_order = "invalid_argument",
  example_label = "invalid_argument",
  label_spelling = "invalid_argument",
  decimal_comma = "invalid_argument",
  coded_rows = "invalid_argument",
  coded_truth = "coded_rows",
  too_few_coded = "coded_rows",
  coding_file = "invalid_argument",
  code_refused = "invalid_argument",
  coding_access = "invalid_argument",
  coding_roles = "coding_access",
  empty_stratum = "coded_rows",
  weighted_sample = "coded_rows",
  skewed_clusters = "coded_rows",
  degenerate_fit = "estimation",
  skewed_covariate = "leverage"
)

# `subclass` may name several, most specific first: the chain goes on from the last.
condition_classes <- function(subclass, kind) {
  chain <- subclass
  parent <- condition_parents[subclass[[length(subclass)]]][[1]]
  while (!is.na(parent)) {
    chain <- c(chain, parent)
    parent <- condition_parents[parent][[1]]
  }
  c(paste0("newrllama4_", kind, "_", chain), paste0("newrllama4_", kind))
}

# cli's message, interpolated in the caller's frame; `...` become the condition's fields.
abort_newrllama4 <- function(subclass, message, ..., call = caller_env(), .envir = parent.frame()) {
  cli::cli_abort(message, class = condition_classes(subclass, "error"), ..., call = call, .envir = .envir)
}

warn_newrllama4 <- function(subclass, message, ..., .envir = parent.frame()) {
  cli::cli_warn(message, class = condition_classes(subclass, "warning"), ..., .envir = .envir)
}

inform_newrllama4 <- function(subclass, message, ..., .envir = parent.frame()) {
  cli::cli_inform(message, class = condition_classes(subclass, "message"), ..., .envir = .envir)
}

# Run an engine call; re-signal a Python exception as its R condition.
with_engine <- function(expr, call = caller_env()) {
  reticulate::py_last_error(NULL)  # so that an exception found afterwards is this call's
  tryCatch(expr, error = function(e) {
    last <- reticulate::py_last_error()
    exception <- attr(last, "exception", exact = TRUE)
    if (is.null(exception)) stop(e)
    if (inherits(exception, "python.builtin.KeyboardInterrupt")) rlang::interrupt()
    rlang::cnd_signal(engine_condition(exception, call, traceback = last$message))
  })
}

# The R condition for a Python exception (raised, or returned in a Completion).
engine_condition <- function(exception, call = NULL, traceback = NULL) {
  python_classes <- class(exception)
  ours <- python_classes[startsWith(python_classes, engine_error_prefix)]
  fields <- engine_for_r$to_r(reticulate::py_get_attr(exception, "__dict__"))
  if (!is.null(fields$index)) fields$index <- as.integer(fields$index) + 1L
  if (!is.null(fields$argument)) fields$argument <- r_argument(fields$argument)
  message <- if (!is.null(fields$detail)) {
    sprintf("Prompt %d %s", fields$index, fields$detail)
  } else if (!is.null(fields$argument) && !is.null(fields$expected)) {
    # an InvalidArgumentError, in R's words: the engine's message, but R's names
    sprintf("`%s` must be %s, not %s.", fields$argument, r_words(fields$expected), fields$value)
  } else {
    reticulate::py_str(exception)
  }
  if (length(ours) == 0) {
    classes <- "newrllama4_error_engine"
    python_class <- sub("^python\\.builtin\\.", "", python_classes[[1]])
    message <- c(sprintf("The engine failed unexpectedly (%s): %s", python_class, message),
                 "i" = "The Python traceback is in the condition's {.field traceback} field.")
    fields <- list(python_class = python_class, traceback = traceback)
  } else {
    classes <- setdiff(vapply(ours, r_condition_class, ""), "newrllama4_error")
  }
  rlang::catch_cnd(cli::cli_abort(
    escape_braces(message),
    class = c(classes, "newrllama4_error"),
    call = call,
    !!!fields
  ))
}

# Arguments the engine names otherwise than R: model_load()'s `source` is
# Model()'s `path`, generate_parallel()'s `features` its `hidden_states`.
r_argument_names <- c(path = "source", hidden_states = "features")

# The R name of an argument the engine names: "json_schema[0]", the first
# prompt's schema, is "json_schema[[1]]" (R numbers prompts from 1);
# "labels[1]" is "labels[[2]]".
r_argument <- function(argument) {
  parts <- regmatches(argument, regexec("^([a-z_]+)(\\[([0-9]+)\\])?$", argument))[[1]]
  if (length(parts) == 0) return(argument)
  name <- if (parts[[2]] %in% names(r_argument_names)) r_argument_names[[parts[[2]]]] else parts[[2]]
  if (!nzchar(parts[[3]])) return(name)
  sprintf("%s[[%d]]", name, as.integer(parts[[4]]) + 1L)
}

# What the engine expects, in R's words: NULL, TRUE and FALSE for Python's None, True and False.
r_words <- function(expected) {
  r_names <- c(None = "NULL", True = "TRUE", False = "FALSE")
  for (python in names(r_names)) {
    expected <- gsub(sprintf("\\b%s\\b", python), sprintf("`%s`", r_names[[python]]), expected, perl = TRUE)
  }
  expected
}

# "newrllama4.errors.PromptTooLongError" -> "newrllama4_error_prompt_too_long"
r_condition_class <- function(python_class) {
  name <- sub("Error$", "", sub(engine_error_prefix, "", python_class, fixed = TRUE))
  if (name == "Newrllama") return("newrllama4_error")
  snake <- tolower(gsub("([a-z0-9])([A-Z])", "\\1_\\2", name))
  paste0("newrllama4_error_", snake)
}

# A message of text from elsewhere (an exception, pip's output) for cli, which
# would read its braces as markup; the "i" bullets are ours and keep theirs.
escape_braces <- function(text) {
  out <- gsub("}", "}}", gsub("{", "{{", text, fixed = TRUE), fixed = TRUE)
  out[names(out) == "i"] <- text[names(text) == "i"]
  out
}
