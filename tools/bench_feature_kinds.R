# Which states make the better features of a row (issue 61): the final state
# at the annotation prompt's last token (features = TRUE, "last"), the middle
# layer's state there ("middle"), the middle layer's mean over the text's own
# tokens ("mean"), and their concatenations. On one corpus of
# tools/bench_learned.R and Gemma 3 270M, the learned accuracy on the rows not
# coded at 150 uniform coded rows (review_sample(), the gold labels standing in
# for the coders'), learn_labels() on each feature set, `draws` times. The
# corpus is annotated once with all three kinds (kept in build/bench-features/).
# What each kind costs the label pass: python/benchmarks/bench_features.py --kinds.
#   Rscript tools/bench_feature_kinds.R [corpus] [draws]   (default: words 10)
suppressPackageStartupMessages(library(newrllama4))
source(file.path("tools", "annotation-corpora.R"))
arguments <- commandArgs(TRUE)
corpus_name <- if (length(arguments) >= 1) arguments[1] else "words"
draws <- if (length(arguments) >= 2) as.integer(arguments[2]) else 10L
coded_rows <- 150L

# the Bing lexicon words of tools/bench_learned.R, 1,000 rows; another corpus of
# tools/annotation-corpora.R by its function's name
corpus <- if (corpus_name == "words") words(1000) else get(corpus_name)()
kinds <- c("last", "middle", "mean")
ctx <- context_create(model_load("gemma3-270m"), n_ctx = 1024L, n_seq_max = 8L)
annotate <- function(data, features) {
  suppressWarnings(annotate_texts(data, text, corpus$instruction, labels = corpus$labels, context = ctx,
                                  progress = FALSE, features = features))
}

# learned accuracy per feature set
dir.create(file.path("build", "bench-features"), recursive = TRUE, showWarnings = FALSE)
kept <- file.path("build", "bench-features", sprintf("gemma3-270m-%s.rds", corpus_name))
data <- if (file.exists(kept)) readRDS(kept) else annotate(corpus$data, kinds)
saveRDS(data, kept)
values <- newrllama4:::row_features(data)
n_embd <- ncol(values) / length(kinds)
columns <- function(set) unlist(lapply(match(set, kinds), function(k) (k - 1) * n_embd + seq_len(n_embd)))
sets <- list("last" = "last", "middle" = "middle", "mean" = "mean", "last + middle" = c("last", "middle"),
             "last + mean" = c("last", "mean"), "middle + mean" = c("middle", "mean"), "all three" = kinds)
with_set <- function(set) {
  source <- attr(values, "source")
  source$state <- source$state[match(set, kinds)]
  data$.features <- newrllama4:::features_from_matrix(values[, columns(set), drop = FALSE], source)
  data
}
accuracy <- function(set) {
  one <- with_set(set)
  vapply(seq_len(draws), function(seed) {
    coded <- review_sample(one, coded_rows, weight = "uniform", seed = seed)
    rest <- setdiff(seq_len(nrow(one)), coded$.row)
    learned <- suppressMessages(learn_labels(one, coded, gold))
    mean(as.character(learned$.label[rest]) == one$gold[rest])
  }, 0)
}
started <- Sys.time()
results <- data.frame(features = names(sets), t(vapply(sets, function(set) {
  figures <- accuracy(set)
  c(accuracy = mean(figures), se = stats::sd(figures) / sqrt(length(figures)))
}, numeric(2))))
cat(sprintf("\nLearned accuracy on the rows not coded, %s (%d rows; majority %.3f, zero-shot %.3f), %d coded rows, %d draws\n",
            corpus$name, nrow(data), max(table(data$gold)) / nrow(data),
            mean(as.character(data$.label) == data$gold), coded_rows, draws))
print(results, row.names = FALSE, digits = 3)
cat(sprintf("\n%.0f s\n", as.numeric(Sys.time() - started, units = "secs")))
