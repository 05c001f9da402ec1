# The arguments of generate_parallel() and generate(), made into what the engine
# takes. These only convert: R's types into the engine's (a whole number as an
# integer, labels as lists, a schema as JSON, text as UTF-8), refusing what
# cannot be converted (a string for a number, NA, a vector for a scalar). Whether
# a value is in range -- `top_p` in (0, 1], two distinct labels, a valid schema --
# the engine checks, once for R and Python; its InvalidArgumentError arrives as
# newrllama4_error_invalid_argument naming the argument (see engine_condition()).

# The sampling arguments of the calling function's frame `env`, by the names of
# sampling_defaults.
sampling_params <- function(env, call = caller_env()) {
  lapply(stats::setNames(nm = names(sampling_defaults)), function(name) {
    value <- env[[name]]
    switch(name,
      seed = if (is.null(value)) NULL else engine_number(value, name, whole = TRUE, call = call),
      stop = engine_stop(value, call),
      engine_number(value, name, whole = is.integer(sampling_defaults[[name]]), call = call)
    )
  })
}

constraint_params <- function(labels, json_schema, grammar, n_prompts, call = caller_env()) {
  list(
    labels = engine_labels(labels, n_prompts, call = call),
    json_schema = engine_json_schema(json_schema, n_prompts, call = call),
    grammar = engine_grammar(grammar, n_prompts, call = call)
  )
}

# A single number. A whole one is an integer where it fits (the engine takes a
# whole double too, and refuses a fraction where it wants a whole number).
engine_number <- function(x, arg, whole = FALSE, call = caller_env()) {
  if (!is.numeric(x) || length(x) != 1 || is.na(x)) {
    abort_invalid("{.arg {arg}} must be a single number, not {.obj_type_friendly {x}}.", arg, call)
  }
  if (!whole) return(as.double(x))
  if (is.finite(x) && x == round(x) && abs(x) <= .Machine$integer.max) as.integer(x) else x
}

engine_stop <- function(stop, call = caller_env()) {
  if (is.null(stop)) return(NULL)
  if (!is.character(stop) || anyNA(stop)) {
    abort_invalid("{.arg stop} must be {.code NULL} or a character vector of non-empty strings.", "stop", call)
  }
  as.list(as_utf8(stop, "stop", call))
}

# A character vector of prompts, or a list of conversations (each a list of messages).
check_prompts <- function(prompts, call = caller_env()) {
  # a plain list of conversations; a classed list (a data frame, a model's answer) is not one
  if (is.list(prompts) && !is.object(prompts)) {
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

# NULL, or the path of a result cache file, which the engine creates if missing.
check_cache <- function(cache, call = caller_env()) {
  if (is.null(cache)) return(NULL)
  check_string(cache, "cache", call)
  path.expand(as_utf8(cache, "cache", call))
}

# NULL, one value for every prompt, or a list of values (or NULLs), one per prompt:
# `is_one` says what a value is, `convert` makes one (given its name, such as
# "grammar[[2]]") into what the engine takes, `one` describes a value.
per_prompt <- function(x, n_prompts, is_one, convert, one, arg, call) {
  if (is.null(x)) return(NULL)
  if (is_one(x)) return(convert(x, arg))
  if ((is.list(x) || is.character(x)) && length(x) == n_prompts) {
    x <- unname(as.list(x))
    if (all(vapply(x, function(v) is.null(v) || is_one(v), NA))) {
      return(lapply(seq_along(x), function(i) if (is.null(x[[i]])) NULL else convert(x[[i]], sprintf("%s[[%d]]", arg, i))))
    }
  }
  abort_invalid("{.arg {arg}} must be {one}, or a list of {n_prompts} of them (or {.code NULL}), one per prompt.",
                arg, call)
}

# A set of labels goes to the engine as a list, so that reticulate never turns a
# set of one into a scalar.
engine_labels <- function(labels, n_prompts, call = caller_env()) {
  label_list <- function(x, arg) {
    if (anyNA(x)) abort_invalid("{.arg {arg}} must not contain {.code NA}.", arg, call)
    as.list(as_utf8(x, arg, call))
  }
  per_prompt(labels, n_prompts, is.character, label_list, "a character vector of labels", "labels", call)
}

# A schema is a named list, or a JSON string; it goes to the engine as a JSON
# string. `required` and `enum` are JSON arrays even when they hold one value,
# which a plain R vector of length one would not be.
engine_json_schema <- function(json_schema, n_prompts, call = caller_env()) {
  is_one <- function(x) rlang::is_string(x) || (is.list(x) && rlang::is_named(x))
  schema_json <- function(x, arg) {
    if (is.character(x)) return(as_utf8(x, arg, call))
    as.character(jsonlite::toJSON(json_arrays(x), auto_unbox = TRUE, null = "null", digits = NA))
  }
  per_prompt(json_schema, n_prompts, is_one, schema_json, "a JSON schema (a named list or a JSON string)",
             "json_schema", call)
}

json_arrays <- function(schema) {
  if (!is.list(schema)) return(schema)
  for (key in intersect(names(schema), c("required", "enum"))) {
    if (is.atomic(schema[[key]])) schema[[key]] <- as.list(schema[[key]])
  }
  lapply(schema, json_arrays)
}

# A GBNF grammar is a string.
engine_grammar <- function(grammar, n_prompts, call = caller_env()) {
  per_prompt(grammar, n_prompts, rlang::is_string, function(x, arg) as_utf8(x, arg, call),
             "a GBNF grammar (a string)", "grammar", call)
}
