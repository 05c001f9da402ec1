# How answers are sampled unless a call says otherwise: the engine's defaults
# (SamplingParams; a test holds the two equal), given to both signatures below.
# A default that is an integer marks a whole-number argument (see sampling_params()).
sampling_defaults <- list(max_tokens = 100L, top_k = 40L, top_p = 0.9, min_p = 0, temperature = 0.8,
                          repeat_last_n = 64L, penalty_repeat = 1.1, seed = 1234L, stop = NULL)

#' Generate text for many prompts at once
#'
#' Runs every prompt through the model, up to the context's `n_seq_max` at a
#' time in one shared batch, and returns one answer per prompt, in order. Each
#' prompt runs in its own isolated sequence: its answer does not depend on the
#' other prompts, on `n_seq_max`, or on earlier calls. With `temperature = 0`
#' the answer is the one the model gives the prompt alone; with a fixed `seed`,
#' a call is reproducible.
#'
#' A prompt that cannot run (empty, or longer than the context's `n_ctx`) fails
#' alone: its answer is `NA` and the others are unaffected.
#'
#' @param context A context from [context_create()], or from
#'   [context_remote()] to run the prompts on servers.
#' @param prompts A character vector of prompts, or a list of conversations,
#'   each a list of messages as for [apply_chat_template()]: a local model lays
#'   a conversation out with its chat template (a model without one raises
#'   `newrllama4_error_chat_template`), a server with its own, at its chat
#'   endpoint (see [context_remote()]). Names are kept.
#' @param max_tokens Most tokens to generate per prompt.
#' @param top_k,top_p Keep only the `top_k` most likely tokens (`0`: all of
#'   them), and of those the most likely ones whose probabilities add up to
#'   `top_p`.
#' @param min_p Then drop the tokens less likely than `min_p` times the most
#'   likely one; `0` keeps them all.
#' @param temperature Randomness: `0` always picks the most likely token.
#' @param repeat_last_n,penalty_repeat Penalise tokens seen among the last
#'   `repeat_last_n` ones (prompt included) by `penalty_repeat`; `1` disables.
#' @param seed Random seed; `-1` or `NULL` draws one (reported in the stats).
#' @param stop Strings that end an answer; the string itself is left out.
#' @param labels Restrict every answer to one of these labels: a character
#'   vector of at least two distinct labels for all prompts, or a list with
#'   one such vector (or `NULL`, for free text) per prompt. The answer is the
#'   most likely label (with `temperature = 0`), or drawn from the labels'
#'   probabilities; a label's probability is the model's likelihood of its
#'   tokens after the prompt, written as it is or after a space, normalised
#'   over the labels. `max_tokens`, `top_k`, `top_p` and the penalty do not
#'   apply to labels.
#' @param json_schema Constrain answers to JSON that follows a schema: a JSON
#'   schema as a named list (such as `list(type = "object", properties =
#'   list(...), required = c(...))`) or as a JSON string, for all prompts, or
#'   a list with one schema (or `NULL`) per prompt. Answers are compact JSON
#'   (`{"a": 1, "b": "x"}`); [parsed_answers()] gives them as R values. An
#'   answer cut off by `max_tokens` or the context before its JSON is complete
#'   fails (class `newrllama4_error_incomplete_output`) instead of passing as
#'   valid. A schema the engine cannot use raises
#'   `newrllama4_error_invalid_argument` before anything runs.
#' @param grammar Constrain answers to a GBNF grammar (llama.cpp's grammar
#'   format, such as `'root ::= "yes" | "no"'`): one string for all prompts, or
#'   a list with one grammar (or `NULL`) per prompt. Incomplete answers fail as
#'   with `json_schema`. A prompt has at most one of `labels`, `json_schema`
#'   and `grammar`.
#' @param cache The path of a result cache file (SQLite; created if missing),
#'   or `NULL`. Prompts whose answers the file holds are not run again; every
#'   other answer is stored as soon as its prompt finishes, so a run that dies
#'   (killed, R crashing, a power cut) resumes where it stopped when called
#'   again, and gives what an uninterrupted run gives. An answer is found again
#'   only for the same model file (by its SHA-256), the same prompt tokens and
#'   every argument that can change it (with `temperature > 0`, also the same
#'   `seed` and position in `prompts`); with a remote context, for the same
#'   model id and prompt as sent (see [context_remote()]). Failed prompts are
#'   not stored. Several R
#'   sessions can share one file. A file that is not a result cache raises
#'   `newrllama4_error_cache`. [generation_stats()] counts the answers read from
#'   it (`result_cache_hits`).
#' @param progress Show a progress bar. By default only in an interactive
#'   session, and not while knitr renders a document (see
#'   [rlang::is_interactive()]): a report shows no bar unless asked.
#' @param on_error What to do when prompts fail: `"warn"` returns `NA` for
#'   them with one warning of class `newrllama4_warning_partial_failure`;
#'   `"stop"` raises the first failure's error, with the partial results in its
#'   `result` field.
#' @param field_probs With `json_schema`: `TRUE` scores each top-level field
#'   that is an `enum` of strings or a `boolean` where its value starts, as
#'   `labels` are scored (every value's tokens, written as JSON, as they are and
#'   after a space, normalised over the values), takes the most likely value
#'   (with `temperature = 0`; else drawn from the probabilities) and goes on
#'   after it; numbers and free text are generated as without it.
#'   [field_probs()] gives the probabilities. The schema must fix where each
#'   value starts: an object whose properties are all `required` and the only
#'   ones (`additionalProperties = FALSE`), else
#'   `newrllama4_error_invalid_argument`. A server scores them where it can
#'   score labels (llama-server), and refuses with
#'   `newrllama4_error_invalid_argument` where it cannot (see
#'   [context_remote()]).
#' @param features `TRUE` keeps each prompt's features, all three kinds below
#'   one after the other, in single precision, at no extra decode. Some of
#'   `"last"` (the final hidden state of its last token, the one its first
#'   answer token, a label's probabilities, is read from), `"middle"` (the state of the
#'   last token after the model's middle layer, or `feature_layer`) and
#'   `"mean"` (that layer's states averaged over the prompt's tokens) keep
#'   those states, one after the other. [annotate_texts()] adds them to the rows as the column
#'   `.features`. A prompt's features are the same bits whatever else shares
#'   its batch, and the answers are the same with or without them. Not with
#'   `field_probs`, nor on a server (`newrllama4_error_invalid_argument`).
#' @param feature_layer The layer whose output `"middle"` and `"mean"` keep:
#'   `NULL` for the model's middle one (`n_layer %/% 2`), or a layer from 0
#'   (the first) to `n_layer - 2` (the last layer's output is computed for the
#'   output rows alone). `features_source()` of the rows names it
#'   (`"last_token_layer_12"`), and the cache keeps each layer's apart.
#' @return A character vector of class `newrllama4_answers`, one answer per
#'   prompt, with the prompts' names. It prints the answers and a summary line;
#'   [generation_stats()] and [generation_errors()] give the call's counters and
#'   failed prompts. A NUL the model emits, which R strings cannot hold, arrives
#'   as U+FFFD, as do bytes that are not valid UTF-8; other control characters
#'   arrive unchanged. With `labels`, [label_probs()] gives the labels'
#'   probabilities; with `json_schema`, [parsed_answers()] the parsed answers,
#'   and with `field_probs` [field_probs()] the fields' probabilities;
#'   [manifest()] says how they were made (model and SHA-256, every parameter,
#'   versions, timings). No prompts give no answers.
#' @seealso [generate()] for a single prompt.
#' @export
#' @examplesIf engine_available()
#' model <- model_load()
#' ctx <- context_create(model, n_ctx = 256L, n_seq_max = 4L)
#' answers <- generate_parallel(ctx, c(a = "The capital of France is", b = "2 + 2 ="),
#'                              max_tokens = 8L, temperature = 0)
#' answers
#' generation_stats(answers)$generation_tokens_per_s
#'
#' # answers that follow a JSON schema
#' schema <- list(type = "object",
#'                properties = list(city = list(type = "string", maxLength = 20),
#'                                  country = list(enum = c("France", "Italy", "Spain"))),
#'                required = c("city", "country"))
#' places <- generate_parallel(ctx, c("Paris is a city in", "Rome is a city in"),
#'                             json_schema = schema, max_tokens = 24L, temperature = 0)
#' str(parsed_answers(places))
generate_parallel <- function(context, prompts, max_tokens, top_k, top_p, min_p, temperature, repeat_last_n,
                              penalty_repeat, seed, stop, labels = NULL, json_schema = NULL, grammar = NULL,
                              cache = NULL, progress = rlang::is_interactive(), on_error = c("warn", "stop"),
                              field_probs = FALSE, features = FALSE, feature_layer = NULL) {
  check_context(context)
  prompts <- check_prompts(prompts)
  params <- c(sampling_params(current_env()), constraint_params(labels, json_schema, grammar, length(prompts)))
  params$cache <- check_cache(cache)
  params$field_probs <- check_flag(field_probs, "field_probs")
  request <- feature_request(features, feature_layer, context$model)
  kinds <- request$kinds
  params$hidden_states <- request$hidden_states
  params$feature_layer <- request$layer
  check_flag(progress, "progress")
  on_error <- check_choice(on_error, c("warn", "stop"), "on_error")
  result <- run_engine(context, as.list(unname(prompts)), c(params, request["feature_texts"]), progress)
  answers <- result$texts
  names(answers) <- names(prompts)
  answers <- new_answers(answers, result$errors, result$stats, probs_matrix(result$label_probs, names(prompts)),
                         parse_answers(answers, params$json_schema),
                         new_manifest(context, params, result, constraints_record(params, result$field_probs)),
                         field_probs_matrices(result$field_probs, names(prompts)),
                         if (!is.null(kinds)) {
                           prompt_features(result$hidden_states, length(prompts),
                                           context$model$py$n_embd * length(kinds),
                                           list(model = basename(context$model$py$path),
                                                state = feature_states(kinds, request$layer)))
                         })
  n_failed <- nrow(result$errors)
  if (n_failed > 0) {
    first <- result$conditions[[1]]
    if (on_error == "stop") {
      first$result <- answers
      rlang::cnd_signal(first)
    }
    warn_newrllama4(
      "partial_failure",
      c("{n_failed} of {length(prompts)} prompt{?s} failed; {?its/their} answer{?s are/ is/s are} {.code NA}.",
        "i" = "First failure: {conditionMessage(first)}",
        "i" = "See {.code generation_errors()} of the result for all of them.")
    )
  }
  answers
}
formals(generate_parallel)[names(sampling_defaults)] <- sampling_defaults

#' Generate text for one prompt
#'
#' [generate_parallel()] for a single prompt, which can also be given as token
#' ids from [model_tokenize()] or as a conversation. A failing prompt raises its error.
#'
#' @inheritParams generate_parallel
#' @param prompt A single string, an integer vector of token ids, or a
#'   conversation (a list of messages).
#' @return A single string, with how it was made in its `manifest` attribute
#'   (see [manifest()]); it prints as the string alone. Compare it with `==`,
#'   or drop the attributes with [as.vector()] first.
#' @seealso [generate_parallel()] for many prompts at once; [context_create()].
#' @export
#' @examplesIf engine_available()
#' model <- model_load()
#' ctx <- context_create(model, n_ctx = 256L, n_seq_max = 1L)
#' generate(ctx, "The capital of France is", max_tokens = 8L, temperature = 0)
generate <- function(context, prompt, max_tokens, top_k, top_p, min_p, temperature, repeat_last_n, penalty_repeat,
                     seed, stop, labels = NULL, json_schema = NULL, grammar = NULL, cache = NULL) {
  check_context(context)
  if (is.numeric(prompt)) {
    check_tokens(prompt, "prompt")
    prompt <- as.list(as.integer(prompt))
  } else if (is.list(prompt)) {
    prompt <- check_messages(prompt, "prompt")
  } else {
    prompt <- check_text(prompt, "prompt")
  }
  params <- c(sampling_params(current_env()), constraint_params(labels, json_schema, grammar, 1L))
  params$cache <- check_cache(cache)
  result <- run_engine(context, list(prompt), params, progress = FALSE)
  if (nrow(result$errors) > 0) rlang::cnd_signal(result$conditions[[1]])
  answer <- result$texts
  # a server's answer may come without label probabilities (see context_remote())
  probs <- probs_matrix(result$label_probs, NULL)
  if (!is.null(probs)) attr(answer, "probs") <- probs[1, ]
  if (!is.null(json_schema)) attr(answer, "parsed") <- parse_answers(answer, params$json_schema)[[1]]
  attr(answer, "manifest") <- new_manifest(context, params, result, constraints_record(params))
  class(answer) <- "newrllama4_text"
  answer
}

# generate()'s answer prints as its text: its attributes (the manifest's sixty
# lines, the probabilities) are what manifest() and attr() are for.
#' @export
print.newrllama4_text <- function(x, ...) {
  print(as.vector(x), ...)
  invisible(x)
}

#' @export
format.newrllama4_text <- function(x, ...) format(as.vector(x), ...)
formals(generate)[names(sampling_defaults)] <- sampling_defaults

# Answers to prompts with a JSON schema as R values (arrays of scalars become
# vectors, objects named lists); NULL where a prompt had none or failed, and NULL
# for a call without schemas.
parse_answers <- function(answers, json_schema) {
  if (is.null(json_schema)) return(NULL)
  has_schema <- if (is.list(json_schema)) !vapply(json_schema, is.null, NA) else rep(TRUE, length(answers))
  parsed <- vector("list", length(answers))
  names(parsed) <- names(answers)
  for (i in which(has_schema & !is.na(answers))) {
    parsed[i] <- list(jsonlite::fromJSON(answers[[i]], simplifyVector = TRUE, simplifyDataFrame = FALSE,
                                         simplifyMatrix = FALSE))
  }
  parsed
}

# One engine call (`run`: the context's generate_parallel, or a server's
# embed_parallel); returns the answers (NA for failures), the errors data frame,
# their conditions and the stats.
run_engine <- function(context, prompts, params, progress, call = caller_env(), run = context$py$generate_parallel) {
  on_progress <- NULL
  if (progress) {
    bar <- cli::cli_progress_bar("Generating", total = length(prompts), .envir = environment())
    on_progress <- function(done, total) cli::cli_progress_update(id = bar, set = done)
  }
  result <- rlang::exec(engine_call, run, prompts, !!!params, on_progress = on_progress,
                        call = call)
  failed <- which(!vapply(result$errors, is.null, NA))
  conditions <- lapply(result$errors[failed], engine_condition, call = call)
  texts <- as.character(result$texts)
  texts[failed] <- NA_character_
  list(
    texts = texts,
    errors = data.frame(
      index = failed,
      class = vapply(conditions, function(c) class(c)[[1]], ""),
      message = vapply(conditions, conditionMessage, ""),
      stringsAsFactors = FALSE
    ),
    conditions = conditions,
    stats = result$stats,
    label_probs = result$label_probs,
    field_probs = result$field_probs,
    hidden_states = result$hidden_states
  )
}

# The labels' probabilities, one row per prompt and one column per label (of any
# prompt: NA where a prompt had other labels, or none, or failed); NULL without labels.
probs_matrix <- function(label_probs, prompt_names) {
  labels <- unique(unlist(lapply(label_probs, names)))
  if (is.null(labels)) return(NULL)
  probs <- matrix(NA_real_, nrow = length(label_probs), ncol = length(labels),
                  dimnames = list(prompt_names, labels))
  for (i in seq_along(label_probs)) {
    probs[i, names(label_probs[[i]])] <- unlist(label_probs[[i]])
  }
  probs
}

# Each scored field's probabilities: a matrix per field (in the order the fields
# come), one row per prompt and one column per value, NA where a prompt did not
# score that field (it failed, or had another schema); NULL when none did.
field_probs_matrices <- function(field_probs, prompt_names) {
  fields <- unique(unlist(lapply(field_probs, names)))
  if (is.null(fields)) return(NULL)
  lapply(stats::setNames(nm = fields), function(field) {
    probs_matrix(lapply(field_probs, function(p) p[[field]]), prompt_names)
  })
}
