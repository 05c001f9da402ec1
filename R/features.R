# The model's hidden states as features of the rows: annotate_texts(features =
# TRUE) and embed_texts() add them to the data as the column `.features`, and
# the learner reads them with row_features().
#
# The column is a list with one element per row: the row's vector in single
# precision (4 bytes a dimension, little-endian, as the engine sends it), or
# NULL for a row without features (its text missing, its prompt failed). A
# list of float32 blobs keeps 100,000 rows of Gemma's 640 dimensions in 256 MB
# (a double matrix takes 512 MB), and as a column it goes wherever the rows go:
# `[`, subset(), split(), dplyr's filter(), arrange(), slice() and joins, and
# bind_rows() of annotations of the same source. The column's attribute
# `source` names the model and the state the vectors are (see
# features_source()). A CSV keeps no vectors: write.csv() and readr write the
# placeholder "<features>", and row_features() of the data read back says how
# to get them again.

features_column_name <- ".features"

# A features column from the engine's rows: `blobs`, a list of raw vectors of
# 4 * dim bytes or NULL.
new_features <- function(blobs, dim, source) {
  structure(blobs, dim_features = as.integer(dim), source = source, class = c("newrllama4_features", "list"))
}

# A features column from a double matrix, one row per row (NA rows have none).
features_from_matrix <- function(values, source) {
  blobs <- lapply(seq_len(nrow(values)), function(i) {
    if (anyNA(values[i, ])) NULL else writeBin(as.double(values[i, ]), raw(), size = 4L, endian = "little")
  })
  new_features(blobs, ncol(values), source)
}

# The features of every row of `data` as a double matrix (one row per row, NA
# where a row has none; columns f1..fd) with the attribute `source`; an error
# of class newrllama4_error_no_features saying how to get them when `data` has
# none.
row_features <- function(data, call = caller_env()) {
  column <- data[[features_column_name]]
  if (!inherits(column, "newrllama4_features")) {
    how <- c("i" = "Add them with {.code annotate_texts(..., features = TRUE)} or {.fn embed_texts}.")
    problem <- if (is.null(column)) {
      "The data have no {.field .features} column: the model's hidden states of its rows."
    } else {
      c("The data's {.field .features} column is not the engine's features.",
        "x" = "A file (a CSV, a spreadsheet) keeps only their placeholder, not the vectors.")
    }
    abort_newrllama4("no_features", c(problem, how), call = call)
  }
  features_matrix(column)
}

# `rows` in chunks of at most 4,096: reading features or predicting on them a
# chunk at a time keeps one chunk's copies, not the whole matrix's (at 100,000
# rows of Gemma's three kinds, 1.5 GB each).
row_chunks <- function(rows) split(rows, (seq_along(rows) - 1L) %/% 4096L)

# Read in chunks of rows (row_chunks()): the whole column's bytes, their
# doubles and their transpose at once were three more copies of the matrix.
features_matrix <- function(column) {
  dim <- attr(column, "dim_features")
  present <- which(!vapply(column, is.null, logical(1)))
  values <- matrix(NA_real_, length(column), dim, dimnames = list(NULL, paste0("f", seq_len(dim))))
  for (chunk in row_chunks(present)) {
    values[chunk, ] <- matrix(readBin(unlist(unclass(column)[chunk], use.names = FALSE), "double",
                                      n = length(chunk) * dim, size = 4L, endian = "little"),
                              ncol = dim, byrow = TRUE)
  }
  attr(values, "source") <- attr(column, "source")
  values
}

# Where a features column came from: the model, and which states, one after
# the other ("last_token", the final state at the annotation prompt's last
# token; "last_token_layer_<l>", layer l's state there; "text_mean_layer_<l>",
# layer l's mean over the text's own tokens; "server pooled"); NULL for data
# without features.
features_source <- function(data) {
  attr(data[[features_column_name]], "source")
}

# The states a call can keep (`features =`): TRUE is `default_feature_kinds`,
# FALSE none (NULL).
feature_kinds <- c("last", "middle", "mean")

# What features = TRUE keeps: all three kinds, the set best on average of those
# tools/bench_feature_kinds.R measured (Gemma 3 270M, 150 coded rows, on the
# lexicon words, Reuters passages and nouns and verbs: learned accuracy 0.925
# with the last state alone, 0.938 with all three), and learn_labels() then
# chooses among each alone and all together.
default_feature_kinds <- feature_kinds

check_features <- function(features, arg = "features", call = caller_env()) {
  if (isFALSE(features)) return(NULL)
  if (isTRUE(features)) return(default_feature_kinds)
  if (!is.character(features) || length(features) == 0 || anyNA(features) || anyDuplicated(features) ||
      !all(features %in% feature_kinds)) {
    abort_invalid("{.arg {arg}} must be {.code TRUE}, {.code FALSE} or some of {.val {feature_kinds}}, not
                  {.obj_type_friendly {features}}{show_value(features)}.", arg, call)
  }
  features
}

# The kinds of features with each prompt's text, whose tokens "mean" averages
# (annotate_texts() knows where a row's text is; a prompt given to
# generate_parallel() is averaged whole), as generate_parallel()'s `features`.
with_feature_texts <- function(kinds, texts) {
  if (is.null(kinds)) return(FALSE)
  structure(kinds, texts = texts, class = "newrllama4_feature_texts")
}

# What the engine is asked for: the kinds, each prompt's text, and the layer
# of "middle" and "mean" (`feature_layer`, checked against `model`'s layers;
# NULL for the engine's middle one, features.default_layer, or where no kind
# reads a layer).
feature_request <- function(features, feature_layer = NULL, model = NULL, call = caller_env()) {
  kinds <- check_features(if (inherits(features, "newrllama4_feature_texts")) unclass(features) else features,
                          call = call)
  texts <- attr(features, "texts")
  layered <- any(c("middle", "mean") %in% kinds)
  if (!is.null(feature_layer)) {
    if (!layered) {
      abort_invalid("{.arg feature_layer} is the layer of the {.val middle} and {.val mean} features: ask for one of
                    them in {.arg features}.", "feature_layer", call)
    }
    feature_layer <- check_whole(feature_layer, "feature_layer", 0, if (is.null(model)) Inf else model$py$n_layer - 2,
                                 call)
  }
  # a server has no model here, and refuses the states
  layer <- if (layered && !is.null(model)) {
    feature_layer %||% reticulate::import("newrllama4.features")$default_layer(model$py$n_layer)
  }
  list(kinds = kinds, hidden_states = if (is.null(kinds)) FALSE else as.list(kinds),
       feature_texts = if (!is.null(texts) && "mean" %in% kinds) as.list(texts), layer = layer)
}

# The names of the states `kinds` keeps, as features_source() gives them,
# `layer` that of "middle" and "mean".
feature_states <- function(kinds, layer) {
  unname(c(last = "last_token", middle = sprintf("last_token_layer_%d", layer %||% NA),
           mean = sprintf("text_mean_layer_%d", layer %||% NA))[kinds])
}

# The kind of each state of a features column (features_source()$state):
# "last", "middle" or "mean" (whatever its layer), or the state's own name where
# no kind names it (a server's pooled vector).
state_kinds <- function(states) {
  ifelse(states == "last_token", "last", ifelse(startsWith(states, "last_token_layer_"), "middle",
         ifelse(startsWith(states, "text_mean_layer_"), "mean", states)))
}

# The feature sets among which learn_labels() chooses, from the states `values`
# (row_features()) keeps: `features` TRUE for each kind alone and all of them
# together (not every concatenation: on the three corpora measured the pairs
# were within 0.01 of the better of these, and each set is a fit in every fold
# of the nested choice); some of the kinds (a character
# vector) for that one set; a list of such vectors for those sets. A named list
# ("middle + mean") of each set's columns of `values`, each with its `source`
# (the model and the set's states).
feature_sets <- function(values, features, call = caller_env()) {
  source <- attr(values, "source")
  kinds <- state_kinds(unlist(source$state))
  width <- ncol(values) %/% length(kinds)
  sets <- if (isTRUE(features)) {
    c(as.list(kinds), list(kinds))
  } else {
    check_feature_sets(features, kinds, call)
  }
  sets <- lapply(sets, function(set) set[order(match(set, kinds))])
  sets <- sets[!duplicated(sets)]
  stats::setNames(lapply(sets, function(set) {
    k <- match(set, kinds)
    named <- source
    named$state <- unlist(source$state)[k]
    structure(unlist(lapply(k, function(i) (i - 1L) * width + seq_len(width))),
              source = paste(unlist(named), collapse = ", "))
  }), vapply(sets, paste, "", collapse = " + "))
}

# learn_labels()' `features` as sets of the `kinds` (a list of character
# vectors): some of them, or a list of such.
check_feature_sets <- function(features, kinds, call) {
  sets <- if (is.character(features)) list(features) else features
  known <- is.list(sets) && length(sets) > 0 && all(vapply(sets, function(set) {
    is.character(set) && length(set) > 0 && !anyNA(set) && !anyDuplicated(set) && all(set %in% kinds)
  }, NA))
  if (!known) {
    abort_invalid(c("{.arg features} must be {.code TRUE}, {.code FALSE}, a numeric matrix, or sets of the kinds of
                     features the data keep: {.val {kinds}}.",
                    "i" = "Keep more kinds with {.code annotate_texts(features = c(\"last\", \"middle\", \"mean\"))}."),
                  "features", call)
  }
  sets
}

#' @export
`[.newrllama4_features` <- function(x, i) {
  new_features(unclass(x)[i], attr(x, "dim_features"), attr(x, "source"))
}

#' @export
format.newrllama4_features <- function(x, ...) {
  ifelse(vapply(x, is.null, logical(1)), NA_character_, sprintf("<features %d>", attr(x, "dim_features")))
}

#' @export
print.newrllama4_features <- function(x, ...) {
  cat(sprintf("# %d rows of %d features (%s)\n", length(x), attr(x, "dim_features"),
              paste(unlist(attr(x, "source")), collapse = ", ")))
  print(format(x), quote = FALSE)
  invisible(x)
}

# What a file keeps of a row's features: a placeholder (write.csv() and readr
# write a column of objects through as.character()).
#' @export
as.character.newrllama4_features <- function(x, ...) {
  ifelse(vapply(x, is.null, logical(1)), NA_character_, "<features>")
}

# vctrs (dplyr, tidyr, tibble) slices and combines the blobs as a plain list and
# restores the column's class and source.
#' @exportS3Method vctrs::vec_proxy
vec_proxy.newrllama4_features <- function(x, ...) {
  unclass(x)[seq_along(x)]
}

#' @exportS3Method vctrs::vec_restore
vec_restore.newrllama4_features <- function(x, to, ...) {
  new_features(x, attr(to, "dim_features"), attr(to, "source"))
}

# The features of a call's prompts (generate_parallel(features = TRUE), a
# server's embeddings): the engine's float32 vectors of `dim` numbers, one after
# the other, as a features column with one element per prompt (NULL for a prompt
# without: it failed).
prompt_features <- function(hidden_states, n_prompts, dim, source) {
  size <- 4L * dim
  blobs <- vector("list", n_prompts)
  kept <- as.logical(unlist(hidden_states$kept %||% rep(FALSE, n_prompts)))
  blobs[kept] <- lapply(seq_len(sum(kept)) - 1L, function(k) hidden_states$states[k * size + seq_len(size)])
  new_features(blobs, dim, source)
}

# Each row's features from its prompts' (`prompt_rows`: the row of each prompt,
# NA for a prompt of no row): the prompt's own where a row has one prompt, else
# their mean (over the example orders, the passages); NULL for a row one of
# whose prompts has none.
rows_features <- function(features, prompt_rows, n_rows) {
  mine <- which(!is.na(prompt_rows))
  rows <- prompt_rows[mine]
  if (!anyDuplicated(rows)) {
    blobs <- vector("list", n_rows)
    blobs[rows] <- unclass(features)[mine]
    return(new_features(blobs, attr(features, "dim_features"), attr(features, "source")))
  }
  values <- features_matrix(features[mine])
  sums <- rowsum(values, rows)
  means <- matrix(NA_real_, n_rows, ncol(values))
  means[as.integer(rownames(sums)), ] <- sums / as.vector(table(rows))
  features_from_matrix(means, attr(features, "source"))
}

#' Embed texts: the model's features of every row, without a labelling task
#'
#' Gives every row of `data` the features that [annotate_texts()] keeps with
#' `features = TRUE`: the model's hidden states of the row's prompt, the
#' instruction followed by the row's text, laid out as [annotate_texts()] lays
#' out its prompts (the final state at its last token, the middle layer's
#' there, and the middle layer's mean over the text's tokens). With the instruction of an
#' annotation, a row's features are the same bits as that annotation's; the
#' model answers nothing (one token is decoded past the prompt, and dropped).
#' Features serve a learner fitted on rows coded by hand: the state carries more
#' of what the model read than the label it would give.
#'
#' On a server ([context_remote()]) each row's prompt goes to the server's
#' embeddings endpoint (OpenAI's `/embeddings`) as text, in the plain layout
#' (the instruction, then `Text:` and `Answer:` lines; an embeddings endpoint
#' takes no chat messages, so for a model with a chat template these are not
#' the prompts a local model embeds), and the server pools
#' its tokens' states as it was started to: llama-server with `--embeddings
#' --pooling mean` (or `last`, `cls`), vLLM for a model it serves as an
#' embedding model (`vllm serve MODEL --runner pooling`). The vectors come as
#' the server computes them, not normalised, in the same `.features` column,
#' whose source records the server. Pooled by the last token, llama-server's
#' vector of a prompt is the local engine's state of the same prompt on the
#' same model (measured: the same bits on the test model; 4-6% apart in norm on
#' Gemma 3 270M's prompts of 18 to 231 tokens, where the server's attention
#' kernels sum differently). Pooled by the mean, it is another feature (the
#' mean over the prompt's tokens). A server that gives no embeddings (one
#' started without `--embeddings`, a model vLLM runs to generate, llama-server's
#' model without pooling) stops the call with an error of class
#' `newrllama4_error_no_embeddings` that says how to start one.
#'
#' @inheritParams annotate_texts
#' @param instruction What the model is to read the texts for, in words: the
#'   features follow it (the same text under another task is another state).
#'   Wrapping a text in its task makes its features better predictors of that
#'   task's codes (Buckmann and Hill 2024).
#' @param features The states to keep, as in [annotate_texts()]: `TRUE` for
#'   all three kinds, or some of `"last"`,
#'   `"middle"` and `"mean"` (their layer: `feature_layer` in `...`); on a
#'   server `TRUE`.
#' @param ... Passed to [generate_parallel()]: `progress`, `feature_layer`,
#'   ...; on a server only `progress`.
#' @return `data` (a data frame; a character vector becomes a data frame with
#'   a `text` column) with a column `.features` (one vector a row in single
#'   precision; see `features` in [annotate_texts()]) and `.error`: `NA`, or why
#'   a row has none. Rows keep their order and their other columns. The
#'   manifest ([manifest()]) says how they were made.
#' @seealso [annotate_texts()], whose `features = TRUE` keeps the same
#'   features with the labels, at no extra cost.
#' @export
#' @examplesIf engine_available()
#' reviews <- data.frame(id = 1:3, review = c("Great value, works well.",
#'                                            "Broke after a day.", "It is a kettle."))
#' ctx <- context_create(model_load(), n_ctx = 512L, n_seq_max = 4L)
#' embedded <- embed_texts(reviews, review, "Is the review positive or negative?",
#'                         context = ctx, progress = FALSE)
#' embedded
#' \dontrun{
#' # on the GPU machine:
#' #   llama-server -m model.gguf --embeddings --pooling mean --port 8080
#' embed_texts(reviews, review, "Is the review positive or negative?",
#'             context = context_remote("http://gpu-1:8080"))
#' }
embed_texts <- function(data, text, instruction, context = NULL, cache = NULL, passages = NULL, features = TRUE,
                        ...) {
  text <- if (missing(text)) rlang::quo(text) else rlang::enquo(text)
  kinds <- check_features(features)
  if (is.null(kinds)) abort_invalid("{.arg features} must name some features to embed, not {.code FALSE}.", "features")
  if (inherits(context, "newrllama4_remote_context")) {
    if (!isTRUE(features) && !identical(kinds, "last")) {
      abort_invalid("On a server {.arg features} is {.code TRUE}: the server pools the states as it was started to.",
                    "features")
    }
    return(embed_on_server(data, text, instruction, context, cache, passages, ...))
  }
  embedded <- annotate_texts(data, !!text, instruction, context = context, cache = cache, passages = passages,
                             features = kinds, max_tokens = 1L, ...)
  embedded[[".answer"]] <- NULL  # the one token decoded past the prompt
  embedded
}

# embed_texts() on a server: each row's prompt, in the plain layout, to its
# embeddings endpoint.
embed_on_server <- function(data, text, instruction, context, cache, passages, ..., call = caller_env()) {
  if (is.character(data)) data <- data.frame(text = data, stringsAsFactors = FALSE)
  if (!is.data.frame(data)) {
    abort_invalid("{.arg data} must be a data frame or a character vector, not {.obj_type_friendly {data}}.",
                  "data", call)
  }
  texts <- row_texts(data, text, "text", call)
  instruction <- check_text(instruction, "instruction", call)
  if (!is.null(check_passages(passages))) {
    abort_invalid(c("{.arg passages} needs a local model: it counts the passages' tokens with its tokenizer.",
                    "i" = "Split the texts before sending them to a server."), "passages", call)
  }
  dots <- list(...)
  if (!all(rlang::names2(dots) == "progress")) {
    abort_invalid("On a server {.fn embed_texts} takes no argument in {.arg ...} but {.arg progress}.", "...", call)
  }
  progress <- check_flag(dots$progress %||% rlang::is_interactive(), "progress", call)
  params <- list(cache = check_cache(cache))
  skipped <- text_problems(texts)
  runnable <- which(is.na(skipped))
  prompts <- render_prompts("plain", instruction, list(), texts[runnable])
  result <- run_engine(context, as.list(prompts), params, progress, call, run = context$py$embed_parallel)
  errors <- skipped
  errors[runnable[result$errors$index]] <- result$errors$message
  data$.error <- errors
  kept <- result$hidden_states
  dim <- if (is.null(kept)) 0L else length(kept$states) %/% (4L * sum(unlist(kept$kept)))
  source <- list(model = context$py$model, state = "server pooled",
                 server = paste(unlist(context$py$server_kinds), collapse = ", "))
  data[[features_column_name]] <- rows_features(prompt_features(kept, length(prompts), dim, source), runnable,
                                                nrow(data))
  prompt <- list(layout = "plain", instruction = instruction, features = source$state)
  attr(data, "stats") <- result$stats
  attr(data, "manifest") <- annotation_manifest(new_manifest(context, params, result, prompt), prompt, data, skipped)
  data
}
