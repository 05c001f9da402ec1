# Does an annotation hinge on the order of its worked examples, and what do
# example_orders, calibrate and recalibrate_labels() do about it? Accuracy and
# seconds of annotate_texts() for each option, on the two embedded models and four
# labelled corpora that no test uses and nothing was tuned to (see
# tools/annotation-corpora.R: Reuters acq/crude, hand-written reviews, words of
# the Bing opinion lexicon, nouns and verbs). Order A shows the examples as listed, order B
# reversed. Each run starts from an empty prefix cache, so that its seconds
# are its own; the cost is against order A alone (k = 1) in the same run.
#   Rscript tools/bench_annotation.R
suppressPackageStartupMessages({
  library(newrllama4)
  library(tm)
})
source(file.path("tools", "annotation-corpora.R"))

options_to_compare <- list(
  "order A" = list(order = 1:2, example_orders = 1L, calibrate = FALSE),
  "order B" = list(order = 2:1, example_orders = 1L, calibrate = FALSE),
  "A+B averaged" = list(order = 1:2, example_orders = 2L, calibrate = FALSE),
  "batch-calibrated A" = list(order = 1:2, example_orders = 1L, calibrate = "batch"),
  "batch-calibrated B" = list(order = 2:1, example_orders = 1L, calibrate = "batch"),
  "content-free-calibrated, A+B averaged" = list(order = 1:2, example_orders = 2L, calibrate = "content-free"),
  "batch-calibrated, A+B averaged (recommended)" = list(order = 1:2, example_orders = 2L, calibrate = "batch")
)

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
  for (corpus in list(reuters(), reviews(), words(), parts_of_speech())) {
    for (option in names(options_to_compare)) {
      settings <- options_to_compare[[option]]
      context_clear_cache(ctx)
      seconds <- system.time(out <- suppressWarnings(annotate_texts(
        corpus$data, text, corpus$instruction, labels = corpus$labels,
        examples = corpus$examples[settings$order, ], example_orders = settings$example_orders,
        calibrate = settings$calibrate, context = ctx, progress = FALSE
      )))[["elapsed"]]
      rows[[length(rows) + 1]] <- data.frame(
        model = model, corpus = corpus$name, option = option,
        accuracy = mean(as.character(out$.label) == corpus$data$gold, na.rm = TRUE),
        order_disagreement = rlang::`%||%`(manifest(out)$prompt$order_disagreement, NA_real_),
        seconds = seconds
      )
      message(sprintf("%s, %s, %s: accuracy %.3f, %.1f s", model, corpus$name, option,
                      rows[[length(rows)]]$accuracy, seconds))
      if (option == "A+B averaged") {
        # the labels refitted to 30 rows coded by hand (here the gold labels), drawn
        # at random 50 times; accuracy on the rows not coded, averaged over the draws
        refitted <- vapply(seq_len(50), function(seed) {
          coded <- review_sample(out, n = 30, weight = "uniform", seed = seed)
          relabelled <- recalibrate_labels(out, coded, gold)
          rest <- setdiff(seq_len(nrow(out)), coded$.row)
          mean(as.character(relabelled$.label[rest]) == corpus$data$gold[rest], na.rm = TRUE)
        }, 0)
        rows[[length(rows) + 1]] <- data.frame(
          model = model, corpus = corpus$name, option = "A+B, refitted to 30 rows coded by hand (mean of 50 samples)",
          accuracy = mean(refitted), order_disagreement = NA_real_, seconds = seconds
        )
        message(sprintf("  refitted to 30 coded rows: accuracy %.3f (%.3f-%.3f over 50 samples)",
                        mean(refitted), min(refitted), max(refitted)))
      }
    }
  }
  context_free(ctx)
}
results <- do.call(rbind, rows)
order_a <- ave(results$seconds, results$model, results$corpus, FUN = function(seconds) seconds[[1]])
results$cost <- sprintf("%.2fx", results$seconds / order_a)
cat("\n| model | corpus | option | accuracy | orders disagree | seconds | cost vs order A |\n|---|---|---|---:|---:|---:|---:|\n")
with(results, cat(sprintf("| %s | %s | %s | %.3f | %s | %.1f | %s |\n", model, corpus, option, accuracy,
                          ifelse(is.na(order_disagreement), "", sprintf("%.2f", order_disagreement)), seconds, cost),
                  sep = ""))
