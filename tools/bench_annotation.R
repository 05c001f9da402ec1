# Does an annotation hinge on the order of its worked examples, and what do
# example_orders, calibrate and recalibrate_labels() do about it? Accuracy and
# seconds of annotate_texts() for each option, on the two embedded models and five
# labelled corpora that no test uses and nothing was tuned to (see
# tools/annotation-corpora.R: Reuters acq/crude, hand-written reviews, words of
# the Bing opinion lexicon, nouns and verbs, five parts of speech). Order A shows
# the examples as listed, order B reversed; "A+B" asks under both (with more
# than two examples, example_orders = 2 would take A's rotation instead of B).
# Each run starts from an empty prefix cache, so that its seconds are its own;
# the cost is against order A alone (k = 1) in the same run.
# The A+B run keeps the model's hidden states (features = TRUE), and beside the
# refit at 30 coded rows learn_labels() learns from them, so that a better
# order can win whatever the averaged labels say (issue 53).
#   Rscript tools/bench_annotation.R [--orders-only] [--cache=DIR] [corpus ...]
#   (the corpora's functions, e.g. parts_of_speech_five; default all. --orders-only runs orders A, B and A+B
#   with the refit and the learner at 30 coded rows: what issue 53's done-when on example orders compares.
#   --cache keeps each annotation in DIR (annotate_texts(cache =)), so that a run again scores the same
#   annotations without making them: no seconds are reported then)
suppressPackageStartupMessages({
  library(newrllama4)
  library(tm)
})
source(file.path("tools", "annotation-corpora.R"))

options_to_compare <- list(
  "order A" = list(order = "A", example_orders = 1L, calibrate = FALSE),
  "order B" = list(order = "B", example_orders = 1L, calibrate = FALSE),
  "A+B averaged" = list(order = "A", example_orders = 2L, calibrate = FALSE),
  "batch-calibrated A" = list(order = "A", example_orders = 1L, calibrate = "batch"),
  "batch-calibrated B" = list(order = "B", example_orders = 1L, calibrate = "batch"),
  "content-free-calibrated, A+B averaged" = list(order = "A", example_orders = 2L, calibrate = "content-free"),
  "batch-calibrated, A+B averaged (recommended)" = list(order = "A", example_orders = 2L, calibrate = "batch")
)

arguments <- commandArgs(TRUE)
orders_only <- "--orders-only" %in% arguments
cache_dir <- sub("^--cache=", "", grep("^--cache=", arguments, value = TRUE))
if (length(cache_dir) == 1) dir.create(cache_dir, showWarnings = FALSE, recursive = TRUE)
if (orders_only) options_to_compare <- options_to_compare[c("order A", "order B", "A+B averaged")]
coded_counts <- if (orders_only) 30 else c(20, 30, 60)
corpora <- list(reuters = reuters, reviews = reviews, words = words, parts_of_speech = parts_of_speech,
                parts_of_speech_five = parts_of_speech_five)
chosen_corpora <- grep("^--", arguments, value = TRUE, invert = TRUE)
if (length(chosen_corpora) > 0) corpora <- corpora[chosen_corpora]

# the worked examples' rows as listed (order A) or reversed (order B)
examples_in_order <- function(n, order) if (order == "A") seq_len(n) else rev(seq_len(n))
# one order, or orders A and B (the examples given in order A)
orders_asked <- function(n, example_orders) {
  if (example_orders == 1) 1L else list(examples_in_order(n, "A"), examples_in_order(n, "B"))
}
# the annotation's cache file under --cache, else none
cache_file <- function(model, corpus, option) {
  if (length(cache_dir) == 1) file.path(cache_dir, paste0(gsub("[^A-Za-z0-9]+", "-", paste(model, corpus, option)),
                                                          ".sqlite"))
}

models <- list(
  "Gemma 3 270M" = function() context_create(model_load("gemma3-270m"), n_ctx = 1024L, n_seq_max = 8L),
  "SmolLM2 135M" = function() context_create(model_load("smollm2-135m-instruct"), n_ctx = 1024L, n_seq_max = 8L)
)

rows <- list()
for (model in names(models)) {
  ctx <- models[[model]]()
  # a first call pays for warming up, not order A
  invisible(annotate_texts(c("warm", "up"), instruction = "Answer a or b.", labels = c("a", "b"), context = ctx,
                           progress = FALSE))
  for (corpus in lapply(corpora, function(make) make())) {
    for (option in names(options_to_compare)) {
      settings <- options_to_compare[[option]]
      context_clear_cache(ctx)
      seconds <- system.time(out <- suppressWarnings(annotate_texts(
        corpus$data, text, corpus$instruction, labels = corpus$labels,
        examples = corpus$examples[examples_in_order(nrow(corpus$examples), settings$order), ],
        example_orders = orders_asked(nrow(corpus$examples), settings$example_orders), calibrate = settings$calibrate,
        features = option == "A+B averaged", context = ctx, cache = cache_file(model, corpus$name, option),
        progress = FALSE
      )))[["elapsed"]]
      if (length(cache_dir) == 1) seconds <- NA_real_
      rows[[length(rows) + 1]] <- data.frame(
        model = model, corpus = corpus$name, option = option,
        accuracy = mean(as.character(out$.label) == corpus$data$gold, na.rm = TRUE),
        order_disagreement = rlang::`%||%`(manifest(out)$prompt$order_disagreement, NA_real_),
        seconds = seconds
      )
      message(sprintf("%s, %s, %s: accuracy %.3f, %.1f s", model, corpus$name, option,
                      rows[[length(rows)]]$accuracy, seconds))
      if (option == "A+B averaged") {
        # the labels refitted to 20, 30 and 60 rows coded by hand (here the gold labels), and at 30
        # learned from the hidden states too, drawn at random 50 times each; accuracy on the rows
        # not coded, the new labels' and the labels' as they were, averaged over the draws
        for (n_coded in coded_counts[coded_counts <= nrow(out) / 2]) {
          verbs <- list(refitted = function(coded) recalibrate_labels(out, coded, gold),
                        learned = function(coded) learn_labels(out, coded, gold, features = TRUE))
          if (n_coded != 30) verbs$learned <- NULL
          for (verb in names(verbs)) {
            draws <- vapply(seq_len(50), function(seed) {
              coded <- review_sample(out, n = n_coded, weight = "uniform", seed = seed)
              relabelled <- suppressMessages(suppressWarnings(verbs[[verb]](coded)))
              rest <- setdiff(seq_len(nrow(out)), coded$.row)
              accuracy_of <- function(labels) mean(as.character(labels[rest]) == corpus$data$gold[rest], na.rm = TRUE)
              record <- manifest(relabelled)$prompt
              c(new = accuracy_of(relabelled$.label), raw = accuracy_of(out$.label),
                kept = identical(record$refit_model, "none") || identical(record$learner, "none"))
            }, numeric(3))
            rows[[length(rows) + 1]] <- data.frame(
              model = model, corpus = corpus$name,
              option = sprintf("A+B, %s %s %d rows coded by hand (mean of 50 samples; as they were: %.3f; kept in %d)",
                               verb, if (verb == "learned") "from" else "to", n_coded, mean(draws["raw", ]),
                               sum(draws["kept", ])),
              accuracy = mean(draws["new", ]), order_disagreement = NA_real_, seconds = seconds
            )
            message(sprintf("  %s, %d coded rows: accuracy %.3f (%.3f-%.3f over 50 samples), as they were %.3f",
                            verb, n_coded, mean(draws["new", ]), min(draws["new", ]), max(draws["new", ]),
                            mean(draws["raw", ])))
          }
        }
      }
    }
  }
  context_free(ctx)
}
results <- do.call(rbind, rows)
order_a <- ave(results$seconds, results$model, results$corpus, FUN = function(seconds) seconds[[1]])
results$cost <- ifelse(is.na(order_a), "", sprintf("%.2fx", results$seconds / order_a))
cat("\n| model | corpus | option | accuracy | orders disagree | seconds | cost vs order A |\n|---|---|---|---:|---:|---:|---:|\n")
with(results, cat(sprintf("| %s | %s | %s | %.3f | %s | %s | %s |\n", model, corpus, option, accuracy,
                          ifelse(is.na(order_disagreement), "", sprintf("%.2f", order_disagreement)),
                          ifelse(is.na(seconds), "", sprintf("%.1f", seconds)), cost),
                  sep = ""))
