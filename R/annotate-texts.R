#' Annotate texts: labels or typed fields for every row of a data frame
#'
#' Sends every row's text, after one instruction and optional worked examples,
#' to a local model or to servers, and adds the answers to `data` as columns: a
#' factor of labels with their probabilities, typed columns from a schema, or
#' free text. The instruction and the examples are the same for every row, so a
#' local model reads them once (see `prefix_cache` in [context_create()]).
#'
#' The prompt is a conversation when the model has a chat template: the
#' instruction as the system turn, each example as a user turn (its text) and
#' an assistant turn (its answer), then the row's text as the last user turn.
#' A local model without a template (such as the default Gemma base model) gets
#' a plain layout: the instruction, then `Text:` and `Answer:` lines for each
#' example and the row. A remote context ([context_remote()]) always sends the
#' conversation, as chat messages to the servers' chat endpoint, where the
#' server lays it out with its model's own template: serve an instruction
#' model there (a base model has no template, and every row then fails with
#' the server's error in `.error`). Labels are scored on the server as
#' locally (vLLM, llama-server) and schemas kept to by its structured outputs
#' (see [context_remote()]).
#'
#' With `cache`, every answer is written to a SQLite file as soon as it is
#' finished: a run that is interrupted -- Ctrl-C, a crash, a power cut, a
#' server that goes away -- and started again computes only the rows not yet
#' in the file, and gives the same result as an uninterrupted run. For a remote
#' context an answer is found again by the servers' model id and the messages
#' sent, whichever endpoints serve it. [manifest()] describes how a result was
#' made.
#'
#' @param data A data frame, or a character vector of texts.
#' @param text The text of each row: a column of `data`, bare
#'   (`text = review`) or as a string (`text = "review"`: a string without
#'   braces names a column, and one that names none is an error of class
#'   `newrllama4_error_missing_column` listing the columns), any expression over its
#'   columns, or a glue template such as `"{title}: {body}"`. Not needed when
#'   `data` is a character vector. The same rule holds for every function that
#'   takes `text`, and for the columns of `examples`.
#' @param instruction The task, in words: what to read and what to answer.
#' @param labels A character vector of labels: each row gets exactly one, in a
#'   factor column `.label` with these levels, and each label's probability in
#'   a column `.prob_<label>` (see `labels` in [generate_parallel()]).
#' @param schema A named list of fields to extract, each becoming a column of
#'   its type: `"string"`, `"integer"`, `"number"`, `"boolean"`, a character
#'   vector of allowed values (a factor column), or a JSON schema of the field
#'   as a list (such as `list(type = "integer", minimum = 0)`). Answers are JSON
#'   objects with every field. Each categorical field (allowed values, or a
#'   list with an `enum` of strings) and each boolean field gets
#'   probabilities, as labels do: the model's probability of each value where
#'   the value starts in the JSON, and the most likely value (see
#'   `field_probs` in [generate_parallel()]).
#' @param examples A data frame of worked examples: the columns that `text`
#'   uses, and the answer -- a `.label` column with `labels`, one column per
#'   field with `schema`, an `.answer` column otherwise. An example whose
#'   `.label` is not one of `labels` is an error of class
#'   `newrllama4_error_example_label` (field `examples`: which ones).
#' @param example_orders With `labels` and worked examples: in how many
#'   orders of the examples to ask about every row (a whole number), or the
#'   orders themselves (a list of permutations of the examples' rows). A small
#'   model tends to answer with the label of the last example it saw, so one
#'   order can swing a whole annotation; several orders, averaged, do not hinge
#'   on any one. The orders are the given one, then its rotations (each example
#'   last once), then permutations drawn from a fixed seed; the manifest
#'   records them. Each order is a shared prefix, decoded once, so each order
#'   more costs about the rows' own tokens again, not the instruction's.
#' @param calibrate With `labels`: divide each row's label probabilities by
#'   the label prior that the prompt itself gives the model, per order, and
#'   normalise them again. It removes a bias toward a label that the
#'   instruction and the order of the examples cause.
#'   * `"batch"` (or `TRUE`): the prior is the geometric mean of the rows' own
#'     label probabilities under that order, over the rows of this call, so
#'     each label's log-probability is centred on its mean over the rows
#'     (batch calibration, Zhou et al. 2024; here in log space). No extra
#'     prompts. It assumes that the rows are a mix of the labels, not chosen
#'     by label: the more one label dominates the data, the more it pulls the
#'     boundary toward an even split (see `vignette("annotating-text")`, "Labels
#'     that do not hinge on the order of the examples"). Needs at least two rows with
#'     probabilities (else an error of class `newrllama4_error_calibration`).
#'   * `"content-free"`: the prior is the mean probabilities the model gives
#'     content-free inputs (`"N/A"`, `""`, `"[MASK]"`) under the same
#'     instruction and examples (contextual calibration, Zhao et al. 2021),
#'     three more prompts per order.
#'   * `FALSE` or `"none"`: the model's probabilities as they are.
#'
#'   The kind and the prior are in the manifest (`calibration`,
#'   `label_prior`). Measured on four labelled corpora and two small models
#'   (`docs/benchmarks.md`), where the order of the examples swung accuracy,
#'   `example_orders = 2` followed by [learn_labels()] on 30 rows coded by hand
#'   came within 0.05 of the better order, or above it, on all eight cells
#'   (the refit alone, `features = FALSE`'s smallest candidate, not: 0.117
#'   under on one); without coded rows, `example_orders = 2` with
#'   `calibrate = TRUE` was the most robust option, short of it where one label
#'   dominates. The default stays one order, uncalibrated, whose probabilities
#'   are the model's own.
#'
#'   With `example_orders > 1` or `calibrate`, each row gets its most likely
#'   label under the combined probabilities, so `temperature` must be 0 (the
#'   default here), and a server must give label probabilities.
#' @param context A context from [context_create()] or [context_remote()]; `NULL` uses
#'   SmolLM2 135M Instruct (`model_load("smollm2-135m-instruct")`) with 8
#'   sequences of 2048 tokens, or as many as the longest row needs with its
#'   answer, up to the model's window of 8192 (a message of class
#'   `newrllama4_message_context_size` says what it chose). It is kept for the
#'   session. A given local context that cannot hold the longest row fails
#'   before any row runs, with an error of class
#'   `newrllama4_error_context_too_small` that names the row and the `n_ctx` it
#'   needs.
#' @param cache Path of a SQLite file that keeps every finished answer, or
#'   `NULL`.
#' @param passages For texts longer than the context: `NULL` or `FALSE` to
#'   send every text whole (a row too long for the context fails); `TRUE`, or
#'   [passage_options()] to choose the passages' size, their overlap and how
#'   their answers combine, to split every text longer than a passage on its
#'   paragraphs and sentences, annotate each passage as a text of its own (the
#'   instruction and examples stay a shared prefix, read once), and combine
#'   the passages' answers into the row's. With `TRUE` a passage is as long as
#'   the context allows beside the instruction, the examples and the answer --
#'   without `context`, the model's whole window -- so a text that fits stays
#'   whole. [passage_answers()] gives each passage's own answers, and the
#'   manifest's `passages` section records the split. Needs a local model,
#'   whose tokenizer counts the passages.
#' @param features `TRUE` adds a column `.features`: each row's features, the
#'   model's hidden states of the row's prompt (instruction, examples, text),
#'   all three kinds below, one after the other. Some of `"last"` (the final
#'   state at the prompt's last token, the state its label is read from, and
#'   what `TRUE` kept before: on the corpora of `tools/bench_feature_kinds.R`
#'   all three together gave [learn_labels()] better labels than it alone on
#'   average, at about the cost of the label pass), `"middle"` (the state there after the
#'   model's middle layer, which often separates meanings better than the
#'   last, tuned to the next token) and `"mean"` (the middle layer's states
#'   averaged over the row's own text, not the instruction and examples every
#'   row shares) keep those states, one after the other in the order given;
#'   `features_source()` of the result names them. Another layer than the
#'   middle one for `"middle"` and `"mean"`: `feature_layer` in `...` (see
#'   [generate_parallel()]). [learn_labels()] chooses among the kinds kept,
#'   alone and together, by its cross-validation. They come
#'   with the label pass at no extra decode, are the same bits whatever else is
#'   annotated beside the row, leave the answers as they are, and are kept in
#'   `cache` with the answers. With several `example_orders` or `passages`, a
#'   row's features are the mean of its prompts'. Each row's vector is stored in
#'   single precision (4 bytes a dimension: 100,000 rows of Gemma's 640 in 256
#'   MB); the column follows its rows through `[`, `subset()` and dplyr's
#'   verbs, and prints one cell a row. A CSV keeps only a placeholder,
#'   `"<features>"`. Needs a local model, and `labels`, free text or a schema
#'   without categorical or boolean fields (those are scored in rounds). On a
#'   server it is an error of class `newrllama4_error_invalid_argument`: the
#'   label pass gives no hidden state, and a second request per row to the
#'   embeddings endpoint would not be the state the label was read from (it
#'   pools the prompt as the server was started to) nor come free; a server
#'   that generates is often no server of embeddings (vLLM serves a model to
#'   generate or to pool, and llama-server started with `--embeddings` is for
#'   embeddings alone). [embed_texts()] takes them from a server that gives
#'   them.
#' @param ... Passed to [generate_parallel()]: `max_tokens`, `temperature`
#'   (`0` unless given), `seed`, `progress`, ...
#' @return `data` (a data frame; a character vector becomes a data frame with
#'   a `text` column) with the new columns and `.error`: `NA`, or why that
#'   row has no answer. With `labels` also `.confidence`, the probability of
#'   the row's label, and with several `example_orders` `.agreement_orders`,
#'   the share of orders whose own most likely label is the row's; the
#'   `.prob_` columns are then averaged over the orders, and calibrated with
#'   `calibrate` (the manifest's `calibration` says how). With `schema`, each
#'   categorical or boolean field `f` also gets `.prob_<f>_<value>` for each
#'   allowed value (`.prob_<f>_true` and `.prob_<f>_false` for a boolean),
#'   summing to 1, and `.confidence_<f>`, the probability of the row's value;
#'   the manifest's `prompt$field_probs` names the fields scored. A server that
#'   cannot score fields (only llama-server can) leaves these columns `NA`, with
#'   a warning of class `newrllama4_warning_field_probs`. When the orders disagree on more
#'   than a tenth of the rows, a warning of class
#'   `newrllama4_warning_order_sensitive` says so. [review_sample()] draws
#'   rows to code by hand, most of them where the model was least sure, and
#'   [learn_labels()] learns the labels again from a random sample of them. Rows keep their order and their other columns. A row
#'   whose text is missing, empty or only white space is not sent to the model:
#'   its answer is `NA` and `.error` says why; with `passages`, so is a row
#'   one of whose passages failed (`.error` names the passage). A data frame
#'   without rows gives one without rows, with the answer columns.
#' @seealso [agreement()] to compare the labels with human coding,
#'   [manifest()] for how the result was made, [passage_options()] for texts
#'   longer than the context.
#' @export
#' @examplesIf engine_available()
#' reviews <- data.frame(id = 1:3, review = c("Great value, works well.",
#'                                            "Broke after a day.", "It is a kettle."))
#' # the embedded base model stands in here; see the vignette for an instruction model
#' ctx <- context_create(model_load(), n_ctx = 512L, n_seq_max = 4L)
#' annotate_texts(reviews, review, "Is the review positive, negative or neutral?",
#'                labels = c("positive", "negative", "neutral"), context = ctx,
#'                progress = FALSE)
#' # every row under both orders of two worked examples, batch-calibrated
#' examples <- data.frame(review = c("Love it.", "Awful."),
#'                        .label = c("positive", "negative"))
#' labelled <- annotate_texts(reviews, review, "Is the review positive or negative?",
#'                            labels = c("positive", "negative"), examples = examples,
#'                            example_orders = 2L, calibrate = TRUE, context = ctx,
#'                            progress = FALSE)
#' labelled[c("review", ".label", ".confidence", ".agreement_orders")]
#' manifest(labelled)$prompt[c("example_orders", "calibration", "label_prior")]
annotate_texts <- function(data, text, instruction, labels = NULL, schema = NULL, examples = NULL,
                           example_orders = 1L, calibrate = FALSE, context = NULL, cache = NULL, passages = NULL,
                           features = FALSE, ...) {
  if (is.character(data)) data <- data.frame(text = data, stringsAsFactors = FALSE)
  if (!is.data.frame(data)) {
    abort_invalid("{.arg data} must be a data frame or a character vector, not {.obj_type_friendly {data}}.",
                  "data", current_env())
  }
  text <- if (missing(text)) rlang::quo(text) else rlang::enquo(text)
  texts <- row_texts(data, text, "text")
  instruction <- check_text(instruction, "instruction")
  if (!is.null(labels) && !is.null(schema)) {
    abort_invalid("Give {.arg labels} or {.arg schema}, not both.", "schema", current_env())
  }
  if (!is.null(labels)) labels <- check_labels(labels, "labels", current_env())
  answer <- answer_shape(labels, schema)
  turns <- example_turns(examples, text, answer)
  orders <- example_order_list(example_orders, length(turns))
  calibration <- check_calibrate(calibrate)
  params <- utils::modifyList(list(temperature = 0, max_tokens = answer$max_tokens), list(...))
  combined_labels <- length(orders) > 1 || calibration != "none"
  if (combined_labels && answer$kind != "labels") {
    abort_invalid("{.arg example_orders} and {.arg calibrate} apply to {.arg labels}.", "example_orders", current_env())
  }
  if (combined_labels && !identical(params$temperature, 0)) {
    abort_invalid(c("With {.arg example_orders} or {.arg calibrate} a row gets its most likely label: {.arg temperature} must be 0.",
                    "x" = "It is {params$temperature}."), "temperature", current_env())
  }
  passages <- check_passages(passages)
  feature_kinds <- check_features(features)
  features <- !is.null(feature_kinds)
  if (!is.null(context)) check_context(context)
  if (features && inherits(context, "newrllama4_remote_context")) {
    abort_invalid(c("{.arg features} needs a local model: a server's label pass gives no hidden state.",
                    "i" = "Take a server's embeddings with {.fn embed_texts}, from a server started to give them."),
                  "features", current_env())
  }
  if (!is.null(passages) && inherits(context, "newrllama4_remote_context")) {
    abort_invalid(c("{.arg passages} needs a local model: it counts the passages' tokens with its tokenizer.",
                    "i" = "Split the texts before sending them to a server."), "passages", current_env())
  }
  model <- if (is.null(context)) annotation_model() else context$model
  layout <- if (is.null(context)) model_layout(model) else prompts_layout(context)
  skipped <- text_problems(texts)
  runnable <- which(is.na(skipped))
  # what the model reads: each row's text, or each passage of it
  passage_rows <- NULL
  sent <- texts[runnable]
  sent_rows <- runnable
  if (!is.null(passages)) {
    overhead <- prompt_around(model, layout, instruction, turns, orders) + answer_tokens(model, answer, params)
    size <- passage_size(passages, if (is.null(context)) model$py$n_ctx_train else context$py$n_ctx, overhead)
    passage_rows <- split_passages(model, sent, runnable, size, passages$overlap)
    sent <- passage_rows$.text
    sent_rows <- passage_rows$.row
  }
  # a server counts its own tokens
  needed <- if (!is.null(model)) {
    tokens_needed(model, layout, instruction, turns, sent, sent_rows, orders, calibration, answer, params)
  }
  if (is.null(context)) context <- annotation_context(model, needed) else check_context_holds(context, needed)
  prompts <- ensemble_prompts(layout, instruction, turns, sent, orders, calibration)
  scored <- scored_field_names(answer)
  field_probs <- length(scored) > 0 && context_scores_fields(context)
  if (features && field_probs) {
    abort_invalid("{.arg features} needs {.arg labels}, free text, or a schema without categorical or boolean fields.",
                  "features", current_env())
  }
  answers <- withCallingHandlers(
    rlang::exec(generate_parallel, context, prompts, labels = labels, json_schema = answer$json_schema,
                field_probs = field_probs, cache = cache, on_error = "warn", !!!params,
                features = with_feature_texts(feature_kinds, c(as.list(rep(sent, length(orders))),
                                                               vector("list", length(prompts) - length(sent) * length(orders))))),
    newrllama4_warning_partial_failure = function(w) rlang::cnd_muffle(w)
  )
  labelled <- if (answer$kind == "labels") combine_orders(answers, length(sent), orders, labels, calibration)
  order_probs <- labelled$order_probs
  if (is.null(passages)) {
    result <- add_answer_columns(data, answer, answers, runnable, skipped, labelled, length(orders))
    disagreement <- if (!is.null(labelled)) order_disagreement(labelled)
  } else {
    passage_rows <- add_answer_columns(passage_rows, answer, answers, seq_along(sent), rep(NA_character_, length(sent)),
                                   labelled, length(orders))
    result <- spread_texts(data, combine_passages(passage_rows, passages), skipped)
    order_probs <- lapply(order_probs, combine_probs, owner = match(sent_rows, runnable), n = length(runnable),
                          rule = passages$combine)
    disagreement <- if (length(orders) > 1) {
      order_disagreement(list(label = result$.label, agreement_orders = result$.agreement_orders))
    }
    attr(result, "passages") <- passage_rows
  }
  if (!is.null(labelled)) {
    attr(result, "order_probs") <- order_probs_record(lapply(order_probs, function(probs) {
      all_rows <- matrix(NA_real_, nrow(data), length(labels), dimnames = list(NULL, labels))
      all_rows[runnable, ] <- probs
      all_rows
    }), result)
  }
  if (field_probs) attr(result, "field_order_probs") <- field_probs_record(result, scored)
  if (features) {
    prompt_rows <- c(rep(sent_rows, length(orders)), rep(NA_integer_, length(answers) - length(sent) * length(orders)))
    result[[features_column_name]] <- rows_features(attr(answers, "features"), prompt_rows, nrow(data))
  }
  n_failed <- sum(!is.na(result$.error))
  if (n_failed > 0) {
    warn_newrllama4("partial_failure", c("{n_failed} of {nrow(data)} row{?s} {?has/have} no answer; {.field .error} says why.",
                    "i" = "First: {result$.error[!is.na(result$.error)][[1]]}"))
  }
  warn_if_order_sensitive(disagreement, length(orders), calibration)
  attr(result, "stats") <- generation_stats(answers)
  attr(result, "manifest") <- annotation_manifest(attr(answers, "manifest"), compact(list(
    layout = layout, instruction = instruction, labels = labels,
    schema = if (is.null(answer$json_schema)) NULL else as.character(jsonlite::toJSON(answer$json_schema, auto_unbox = TRUE)),
    field_probs = if (field_probs) scored,
    features = if (features) features_source(result)$state,
    examples = length(turns),
    example_orders = if (answer$kind == "labels") order_names(orders),
    order_disagreement = if (length(orders) > 1) disagreement,
    calibration = if (answer$kind == "labels") calibration,
    label_prior = if (!is.null(labelled$prior)) prior_record(labelled$prior)
  )), result, skipped, if (!is.null(passages)) passages_record(passages, size, passage_rows))
  result
}

# The label prior of each order, one string per order ("2,1: a 0.91, b 0.09").
prior_record <- function(prior) {
  sprintf("%s: %s", rownames(prior), apply(prior, 1, function(p) {
    paste(colnames(prior), formatC(p, digits = 3, format = "f"), collapse = ", ")
  }))
}

# Why a row's text cannot be annotated: missing, or empty (nothing but white
# space, which a model would label as if it were a text); NA for the others.
text_problems <- function(texts) {
  problems <- rep(NA_character_, length(texts))
  problems[!is.na(texts) & !nzchar(trimws(texts))] <- "The text is empty."
  problems[is.na(texts)] <- "The text is missing."
  problems
}

# The manifest of the engine call, with the annotation's prompt and its rows.
annotation_manifest <- function(record, prompt, result, skipped, passages = NULL) {
  record$prompt <- c(prompt, record$prompt["chat_template_sha256"])
  answered <- is.na(result$.error)
  record$rows <- list(total = nrow(result), skipped_missing_text = sum(!is.na(skipped)), answered = sum(answered),
                      failed = sum(!answered & is.na(skipped)))
  record$passages <- passages
  sections <- c("created", "model", "prompt", if (!is.null(passages)) "passages", "parameters", "rows", "prompts",
                "timings", "versions")
  structure(record[sections],
            class = class(record), file_state = attr(record, "file_state"))
}

# The text of each row: a column, an expression over columns, or a glue template
# (a string literal with braces); a row with a missing value in the template's
# columns is NA. A column is named as every column argument is (column_values():
# bare, or a string without braces), and one that is not there is the classed
# error listing the columns of `of`.
row_texts <- function(data, text, arg, call = caller_env(), of = "data") {
  template <- rlang::quo_get_expr(text)
  value <- tryCatch(
    if (rlang::is_string(template) && grepl("{", template, fixed = TRUE)) {
      as.character(glue::glue_data(data, template, .na = NULL, .envir = rlang::quo_get_env(text)))
    } else {
      column_values(text, data, arg, of, call)
    },
    error = function(e) {
      if (inherits(e, "newrllama4_error")) rlang::cnd_signal(e)
      abort_invalid(c("{.arg {arg}} must be a column of the data, or an expression or glue template over its columns.",
                      "x" = conditionMessage(e)), arg, call)
    }
  )
  if (is.factor(value)) value <- as.character(value)
  if (!is.character(value) || length(value) != nrow(data)) {
    abort_invalid(c("{.arg {arg}} must give one string per row, not {.obj_type_friendly {value}}.",
                    "i" = "Name a column unquoted ({.code text = review}), by its name ({.code text = \"review\"}) or
                           in a glue template ({.code text = \"{{title}}: {{review}}\"}); the data's columns:
                           {.field {names(data)}}."), arg, call)
  }
  as_utf8(value, arg, call)
}
