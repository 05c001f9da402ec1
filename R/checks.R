# Argument checks, run in R before anything reaches the engine. Each raises
# newrllama4_error_invalid_argument naming the argument and what was wrong.
# generate_parallel()'s own arguments are converted in generate-args.R, where the
# engine checks their ranges.

abort_invalid <- function(message, arg, call, ..., subclass = "invalid_argument") {
  abort_newrllama4(subclass, message, argument = arg, ..., call = call, .envir = parent.frame())
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

# NULL, or a seed R's RNG takes (set.seed() wants an integer).
check_seed <- function(seed, call = caller_env()) {
  if (is.null(seed)) return(NULL)
  check_whole(seed, "seed", min = 0, max = .Machine$integer.max, call = call)
}

# `expr` evaluated with the generator seeded by `seed` (check_seed()'s), or as
# the session's generator stands where `seed` is NULL.
with_optional_seed <- function(seed, expr) if (is.null(seed)) expr else withr::with_seed(seed, expr)

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
  check_handle(model, "model", "newrllama4_model", "model_load", live, call)
}

check_context <- function(context, live = TRUE, call = caller_env()) {
  check_handle(context, "context", "newrllama4_context", "context_create", live, call)
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
    abort_newrllama4(
      "closed",
      c(problem, "i" = "Create it again with {.fn {maker}}."),
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
  check_string(path, "source", call)
  if (!file.exists(path)) {
    abort_invalid("{.arg source} {.path {path}} does not exist.", "source", call)
  }
  if (dir.exists(path)) {
    abort_invalid("{.arg source} {.path {path}} is a directory, not a GGUF file.", "source", call)
  }
  magic <- readBin(path, "raw", n = 4)
  if (!identical(magic, charToRaw("GGUF"))) {
    abort_invalid("{.arg source} {.path {path}} is not a GGUF file.", "source", call)
  }
  normalizePath(path)
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

# One of `choices`; the first (the default) when given all of them.
check_choice <- function(x, choices, arg, call = caller_env()) {
  if (identical(x, choices)) return(choices[[1]])
  if (!rlang::is_string(x, choices)) {
    abort_invalid("{.arg {arg}} must be one of {.or {.val {choices}}}, not {.obj_type_friendly {x}}{show_value(x)}.",
                  arg, call)
  }
  x
}
