# Codebooks (issue 32): a question asked as labels against the same question
# asked as a schema field, and a codebook of several fields against values coded
# by hand, on the two embedded models.
#  1. Labels or a field: Reuters acq/crude and the hand-written reviews
#     (tools/annotation-corpora.R), each asked with `labels =` and as a schema
#     with one enum field of the same values: accuracy and seconds.
#  2. A codebook: the 68 Reuters articles with four fields whose values Reuters'
#     own indexers coded (tm's acq and crude keep them): the topic (acquisition
#     or oil, an enum), and whether the article is about the United States,
#     Canada (its `places`) or OPEC (its `orgs`), three booleans. Per field:
#     accuracy, Cohen's kappa, the mean confidence, and the share of the
#     majority value, the accuracy of always answering it.
# Each run starts from an empty prefix cache, so that its seconds are its own.
#   Rscript tools/bench_codebook.R
suppressPackageStartupMessages({
  library(newrllama4)
  library(tm)
})
source(file.path("tools", "annotation-corpora.R"))

models <- list(
  "Gemma 3 270M" = function() context_create(model_load("gemma3-270m"), n_ctx = 1024L, n_seq_max = 8L),
  "SmolLM2 135M" = function() context_create(model_load("smollm2-135m-instruct"), n_ctx = 1024L, n_seq_max = 8L)
)

timed <- function(ctx, expr) {
  context_clear_cache(ctx)
  seconds <- system.time(value <- suppressWarnings(expr))[["elapsed"]]
  list(value = value, seconds = seconds)
}

# -- 1. labels or a field ------------------------------------------------------------

labels_or_field <- function(ctx, model, corpus) {
  examples <- corpus$examples
  as_labels <- timed(ctx, annotate_texts(corpus$data, text, corpus$instruction, labels = corpus$labels,
                                         examples = examples, context = ctx, progress = FALSE))
  field_examples <- data.frame(text = examples$text, answer = examples$.label)
  as_field <- timed(ctx, annotate_texts(corpus$data, text, corpus$instruction,
                                        schema = list(answer = corpus$labels), examples = field_examples,
                                        context = ctx, progress = FALSE))
  data.frame(
    model = model, corpus = corpus$name, asked_as = c("labels", "schema field"),
    accuracy = c(mean(as.character(as_labels$value$.label) == corpus$data$gold, na.rm = TRUE),
                 mean(as.character(as_field$value$answer) == corpus$data$gold, na.rm = TRUE)),
    same_answer = mean(as.character(as_labels$value$.label) == as.character(as_field$value$answer), na.rm = TRUE),
    failed = c(sum(!is.na(as_labels$value$.error)), sum(!is.na(as_field$value$.error))),
    seconds = c(as_labels$seconds, as_field$seconds)
  )
}

# -- 2. a codebook against Reuters' own coding --------------------------------------

reuters_codebook <- function() {
  corpus <- reuters()
  data("acq", package = "tm", envir = environment())
  data("crude", package = "tm", envir = environment())
  docs <- c(acq, crude)[-c(1, length(acq) + 1)]  # reuters() keeps the first article of each topic as examples
  coded <- function(field, value) vapply(docs, function(doc) value %in% meta(doc, field), NA)
  corpus$data$topic <- corpus$data$gold
  corpus$data$usa <- coded("places", "usa")
  corpus$data$canada <- coded("places", "canada")
  corpus$data$opec <- coded("orgs", "opec")
  corpus$instruction <- paste("Code the news article: its topic (acquisition or oil), and whether it is about",
                              "the United States, about Canada, and about OPEC.")
  corpus$schema <- list(topic = c("acquisition", "oil"), usa = "boolean", canada = "boolean", opec = "boolean")
  corpus
}

codebook_accuracy <- function(ctx, model, corpus) {
  run <- timed(ctx, annotate_texts(corpus$data, text, corpus$instruction, schema = corpus$schema, context = ctx,
                                   progress = FALSE))
  out <- run$value
  do.call(rbind, lapply(names(corpus$schema), function(field) {
    truth <- corpus$data[[field]]
    figures <- agreement(out, truth, field = field, n_boot = 0)$metrics
    data.frame(model = model, field = field, rows = sum(!is.na(out[[field]])),
               accuracy = figures$estimate[figures$metric == "accuracy"],
               kappa = figures$estimate[figures$metric == "cohen_kappa"],
               mean_confidence = mean(out[[paste0(".confidence_", field)]], na.rm = TRUE),
               majority_share = max(table(truth)) / length(truth), seconds = run$seconds)
  }))
}

first <- list()
second <- list()
for (model in names(models)) {
  ctx <- models[[model]]()
  invisible(annotate_texts(c("warm", "up"), instruction = "Answer a or b.", labels = c("a", "b"), context = ctx,
                           progress = FALSE))
  for (corpus in list(reuters(), reviews())) {
    first[[length(first) + 1]] <- labels_or_field(ctx, model, corpus)
    message(sprintf("%s, %s: done", model, corpus$name))
  }
  second[[length(second) + 1]] <- codebook_accuracy(ctx, model, reuters_codebook())
  context_free(ctx)
}
cat("\n1. The same question as labels and as a schema field\n")
print(do.call(rbind, first), digits = 3, row.names = FALSE)
cat("\n2. A four-field codebook against Reuters' own coding (68 articles; the seconds are the whole codebook's)\n")
print(do.call(rbind, second), digits = 3, row.names = FALSE)
