# The value of generate_parallel(): a character vector of answers that carries
# its call's stats and errors as attributes, prints as answers plus one summary
# line, and is otherwise a plain character vector. Whatever makes a new vector
# or a data frame column from it (`[`, c(), ifelse(), paste(), data.frame(),
# dplyr verbs through vctrs) gives plain strings, since the call's stats do not
# describe a subset, a combination or a table.

new_answers <- function(texts, errors, stats, probs = NULL, parsed = NULL, manifest = NULL, field_probs = NULL,
                        features = NULL) {
  structure(texts, errors = errors, stats = stats, probs = probs, parsed = parsed, manifest = manifest,
            field_probs = field_probs, features = features, class = c("newrllama4_answers", "character"))
}

#' Stats and failures of a generate_parallel() call
#'
#' [generate_parallel()] returns a character vector of answers that also
#' carries the call's counters and failed prompts. `generation_stats()` and
#' `generation_errors()` read them (they are the `stats` and `errors`
#' attributes). Subsets and combinations of the answers (`x[1:2]`, `c()`,
#' `ifelse()`, rows of a filtered data frame) are plain character vectors
#' without them.
#'
#' An annotation ([annotate_texts()]) carries the stats of its engine call too:
#' `generation_stats()` gives them (its prompts are the rows' prompts, one per
#' example order and passage).
#'
#' @param x The value of [generate_parallel()]; for `generation_stats()`, also
#'   that of [annotate_texts()].
#' @return `generation_stats()`: a named list of counters and timings
#'   (`prompts`, `failures`, `result_cache_hits`, `prompt_tokens`,
#'   `generated_tokens`, `generation_tokens_per_s`, `seed`, ...). `generation_errors()`: a data
#'   frame with one row per failed prompt: its `index`, the `class` of its
#'   error and the error's `message`.
#' @seealso [generate_parallel()], whose answers carry them; [manifest()] for the whole record of a run.
#' @export
#' @examplesIf engine_available()
#' model <- model_load()
#' ctx <- context_create(model, n_ctx = 256L, n_seq_max = 2L)
#' answers <- generate_parallel(ctx, c("The capital of France is", ""), max_tokens = 8L,
#'                              temperature = 0, progress = FALSE)
#' answers
#' generation_stats(answers)$generated_tokens
#' generation_errors(answers)
generation_stats <- function(x) {
  if (is.data.frame(x) && !is.null(attr(x, "stats", exact = TRUE))) return(attr(x, "stats", exact = TRUE))
  check_answers(x, annotation = TRUE)
  attr(x, "stats")
}

#' @rdname generation_stats
#' @export
generation_errors <- function(x) {
  check_answers(x)
  attr(x, "errors")
}

#' Label probabilities of a generate_parallel() call with labels
#'
#' @param x The value of [generate_parallel()] called with `labels`.
#' @return A numeric matrix: one row per prompt (named after the prompts),
#'   one column per label, each row summing to 1; `NA` where a prompt failed
#'   or had other labels, or where llama-cpp-python's server's
#'   log-probabilities did not show the labels (see [context_remote()]). `NULL` for a call without `labels`,
#'   or without any label probabilities.
#' @seealso [generate_parallel()] with `labels =`; [field_probs()] for the fields of a JSON schema; [annotate_texts()], which puts them in columns.
#' @export
#' @examplesIf engine_available()
#' model <- model_load()
#' ctx <- context_create(model, n_ctx = 256L, n_seq_max = 2L)
#' prompts <- c(france = "The capital of France is", water = "Water is made of")
#' answers <- generate_parallel(ctx, prompts, labels = c("Paris", "oxygen", "Rome"),
#'                              temperature = 0, progress = FALSE)
#' answers
#' label_probs(answers)
label_probs <- function(x) {
  check_answers(x)
  attr(x, "probs")
}

#' Parsed answers of a generate_parallel() call with a JSON schema
#'
#' @param x The value of [generate_parallel()] called with `json_schema`.
#' @return A list with one element per prompt (named after the prompts): the
#'   prompt's JSON answer as an R value -- an object becomes a named list, an
#'   array of numbers or strings a vector -- or `NULL` where the prompt failed
#'   or had no schema. `NULL` for a call without `json_schema`.
#' @seealso [generate_parallel()] with `json_schema =`; [field_probs()] for the fields' probabilities.
#' @export
#' @examplesIf engine_available()
#' model <- model_load()
#' ctx <- context_create(model, n_ctx = 256L, n_seq_max = 2L)
#' schema <- list(type = "object", properties = list(year = list(type = "integer")),
#'                required = "year", additionalProperties = FALSE)
#' prompt <- paste0('Q: When did the Berlin Wall fall?\nA: {"year": 1989}\n',
#'                  "Q: When did Apollo 11 land on the moon?\nA:")
#' answers <- generate_parallel(ctx, c(moon = prompt), json_schema = schema,
#'                              max_tokens = 16L, temperature = 0, progress = FALSE)
#' answers
#' parsed_answers(answers)$moon$year
parsed_answers <- function(x) {
  check_answers(x)
  attr(x, "parsed")
}

#' Field probabilities of a generate_parallel() call with a JSON schema
#'
#' With `field_probs = TRUE`, [generate_parallel()] scores every top-level
#' field of a JSON schema that is an `enum` of strings or a `boolean` where its
#' value starts, as it scores `labels`.
#'
#' @param x The value of [generate_parallel()] called with `json_schema` and
#'   `field_probs = TRUE`.
#' @return A named list with one element per scored field: a numeric matrix
#'   with one row per prompt (named after the prompts) and one column per
#'   allowed value (`"true"` and `"false"` for a boolean), each row summing to
#'   1; `NA` where a prompt failed or had another schema. `NULL` for a call
#'   without scored fields.
#' @seealso [generate_parallel()] with `json_schema =` and `field_probs = TRUE`; [label_probs()] for labels; [parsed_answers()].
#' @export
#' @examplesIf engine_available()
#' model <- model_load()
#' ctx <- context_create(model, n_ctx = 256L, n_seq_max = 2L)
#' schema <- list(type = "object",
#'                properties = list(sentiment = list(enum = c("positive", "negative")),
#'                                  sarcastic = list(type = "boolean")),
#'                required = c("sentiment", "sarcastic"), additionalProperties = FALSE)
#' reviews <- c("Great kettle.", "Oh wonderful, it broke on day one.")
#' prompts <- paste0("Review: ", reviews, "\nJSON:")
#' answers <- generate_parallel(ctx, prompts, json_schema = schema, field_probs = TRUE,
#'                              max_tokens = 32L, temperature = 0, progress = FALSE)
#' answers
#' field_probs(answers)$sentiment
field_probs <- function(x) {
  check_answers(x)
  attr(x, "field_probs")
}

# `annotation`: an annotate_texts() value is also taken, so the message names it.
check_answers <- function(x, call = caller_env(), annotation = FALSE) {
  if (!inherits(x, "newrllama4_answers")) {
    makers <- if (annotation) "{.fn generate_parallel} or {.fn annotate_texts}" else "{.fn generate_parallel}"
    abort_invalid(c(
      paste0("{.arg x} must be the value of ", makers, ", not {.obj_type_friendly {x}}."),
      "i" = "Subsets and combinations of answers are plain strings, and rebuilt data frames plain tables,
             without the call's stats."
    ), "x", call)
  }
  invisible(x)
}

#' @export
print.newrllama4_answers <- function(x, ...) {
  print(answer_texts(x), ...)
  cat(answers_summary(x), "\n", sep = "")
  invisible(x)
}

#' @export
format.newrllama4_answers <- function(x, ...) {
  format(answer_texts(x), ...)
}

#' @export
as.data.frame.newrllama4_answers <- function(x, ..., nm = deparse1(substitute(x))) {
  as.data.frame(answer_texts(x), ..., nm = nm)
}

# vctrs (dplyr, tidyr, tibble) stores and slices the answers as plain strings,
# and combines answers of different calls as it combines character vectors.
#' @exportS3Method vctrs::vec_proxy
vec_proxy.newrllama4_answers <- function(x, ...) {
  answer_texts(x)
}

#' @exportS3Method vctrs::vec_restore
vec_restore.newrllama4_answers <- function(x, to, ...) {
  x
}

# The answers alone, with their names.
answer_texts <- function(x) {
  attributes(x) <- list(names = names(x))
  x
}

answers_summary <- function(x) {
  stats <- attr(x, "stats")
  failed <- if (stats$failures > 0) sprintf("%d failed (see generation_errors())", stats$failures) else "0 failed"
  cached <- if (stats$result_cache_hits > 0) sprintf(", %d from the result cache", stats$result_cache_hits) else ""
  sprintf("# %d prompt%s, %s%s, %.1f tokens/s",
          stats$prompts, if (stats$prompts == 1) "" else "s", failed, cached, stats$generation_tokens_per_s)
}
