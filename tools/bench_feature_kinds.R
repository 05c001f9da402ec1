# Which states make the better features of a row (issue 61): the final state
# at the annotation prompt's last token ("last", today's features = TRUE), the
# middle layer's state there ("middle"), the middle layer's mean over the text's
# own tokens ("mean"), and their concatenations; and the set learn_labels()
# chooses among all of them by its cross-validation ("chosen by CV"). On the
# corpora of tools/bench_learned.R and tm's Reuters articles cut into passages
# (tools/annotation-corpora.R) and both embedded models: the learned accuracy on
# the rows not coded at 150 uniform coded rows (review_sample(), the gold labels
# standing in for the coders'; Reuters by whole articles, about 150 passages),
# `draws` times. Each corpus is annotated once with all three kinds for each
# layer of "middle" and "mean" asked for (kept in build/bench-features/ by
# layer, so that a second run only learns; draws = 0 annotates alone), to
# choose that layer by measurement. What each kind costs the label pass:
# python/benchmarks/bench_features.py --kinds.
#   Rscript tools/bench_feature_kinds.R [draws] [models] [corpora] [layers] [sets]
#   (default: 5 gemma3-270m,smollm2-135m-instruct words,nouns_verbs,parts_of_speech_five,reuters
#    default, every set; lists comma-separated; a layer is a number or
#    "default", the engine's default_layer(); a set is a name of `candidates`
#    below: "middle,mean,chosen by CV" are those a layer changes)
suppressPackageStartupMessages(library(newrllama4))
source(file.path("tools", "annotation-corpora.R"))
arguments <- commandArgs(TRUE)
argument <- function(i, default) if (length(arguments) >= i) strsplit(arguments[i], ",")[[1]] else default
corpora <- c(learned_corpora, reuters = reuters_passages)
draws <- as.integer(argument(1, 5L))
models <- argument(2, c("gemma3-270m", "smollm2-135m-instruct"))
corpus_names <- argument(3, names(corpora))
layers <- argument(4, "default")
coded_rows <- 150L
kinds <- c("last", "middle", "mean")
sets <- list("last" = "last", "middle" = "middle", "mean" = "mean", "last + middle" = c("last", "middle"),
             "last + mean" = c("last", "mean"), "middle + mean" = c("middle", "mean"), "all three" = kinds)
candidates <- c(sets, list("chosen by CV" = TRUE))
candidates <- candidates[argument(5, names(candidates))]
stopifnot(!anyNA(names(candidates)))
kept <- file.path("build", "bench-features")
dir.create(kept, recursive = TRUE, showWarnings = FALSE)

# The layer of "middle" and "mean": a number, or the engine's default for the model.
layer_number <- function(loaded, layer) {
  if (layer == "default") reticulate::import("newrllama4.features")$default_layer(loaded$py$n_layer)
  else as.integer(layer)
}

annotated <- function(loaded, model, corpus_name, corpus, layer) {
  path <- file.path(kept, sprintf("%s-%s-layer%d.rds", model, corpus_name, layer))
  if (file.exists(path)) return(readRDS(path))
  ctx <- context_create(loaded, n_ctx = 1024L, n_seq_max = 8L)
  data <- suppressWarnings(annotate_texts(corpus$data, text, corpus$instruction, labels = corpus$labels,
                                          context = ctx, progress = FALSE, features = kinds,
                                          feature_layer = layer))
  saveRDS(data, path)
  data
}

# One draw's coded rows: 150 uniform rows, or whole clusters of about 150 rows.
drawn <- function(data, corpus, seed) {
  if (is.null(corpus$cluster)) return(review_sample(data, coded_rows, weight = "uniform", seed = seed))
  n_clusters <- round(coded_rows * length(unique(data[[corpus$cluster]])) / nrow(data))
  review_sample(data, n_clusters, seed = seed, cluster = corpus$cluster)
}

# The learned accuracy on the rows not coded, for each candidate, in `draws`
# draws; each draw's figures are appended to `kept`/draws.csv as they come (the
# same seeds draw the same rows at every layer: compare layers draw by draw).
accuracies <- function(data, corpus, cell) {
  figures <- vapply(seq_len(draws), function(seed) {
    coded <- drawn(data, corpus, seed)
    rest <- setdiff(seq_len(nrow(data)), coded$.row)
    accuracy <- vapply(candidates, function(features) {
      learned <- suppressMessages(learn_labels(data, coded, gold, features = features))
      mean(as.character(learned$.label[rest]) == data$gold[rest])
    }, 0)
    log <- file.path(kept, "draws.csv")
    utils::write.table(data.frame(cell, seed = seed, features = names(candidates), accuracy = accuracy), log,
                       sep = ",", row.names = FALSE, col.names = !file.exists(log), append = file.exists(log))
    accuracy
  }, numeric(length(candidates)))
  figures <- matrix(figures, nrow = length(candidates))
  data.frame(features = names(candidates), accuracy = rowMeans(figures),
             se = apply(figures, 1, stats::sd) / sqrt(draws))
}

started <- Sys.time()
rows <- list()
default_layers <- c()
for (model in models) {
  loaded <- model_load(model)
  default_layers[model] <- layer_number(loaded, "default")
  for (corpus_name in corpus_names) {
    corpus <- corpora[[corpus_name]]()
    for (layer in vapply(layers, function(layer) layer_number(loaded, layer), 0L)) {
      data <- annotated(loaded, model, corpus_name, corpus, layer)
      message(sprintf("%s on %s, layer %d of %d, annotated (%.0f s so far)", model, corpus_name, layer,
                      loaded$py$n_layer, as.numeric(Sys.time() - started, units = "secs")))
      if (draws == 0) next
      cell <- data.frame(model = model, corpus = corpus_name, layer = layer)
      result <- cbind(cell, rows = nrow(data), majority = max(table(data$gold)) / nrow(data),
                      zero_shot = mean(as.character(data$.label) == data$gold), accuracies(data, corpus, cell))
      rows[[length(rows) + 1]] <- result
      message(paste(utils::capture.output(print(result, row.names = FALSE, digits = 3)), collapse = "\n"))
    }
  }
}
if (length(rows) > 0) {
  cat(sprintf("\nLearned accuracy on the rows not coded, %d coded rows, %d draws\n\n", coded_rows, draws))
  print(do.call(rbind, rows), row.names = FALSE, digits = 3)
}

# Each layer against the default, draw by draw (the same seeds, the same coded
# rows), over every run kept in draws.csv for these models and corpora.
log <- file.path(kept, "draws.csv")
if (draws > 0 && file.exists(log)) {
  kept_draws <- unique(utils::read.csv(log))
  kept_draws <- kept_draws[kept_draws$model %in% models & kept_draws$corpus %in% corpus_names, ]
  kept_draws$default <- kept_draws$layer == default_layers[kept_draws$model]
  reference <- kept_draws[kept_draws$default, c("model", "corpus", "seed", "features", "accuracy")]
  paired <- merge(kept_draws, reference, by = c("model", "corpus", "seed", "features"), suffixes = c("", "_default"))
  paired$difference <- paired$accuracy - paired$accuracy_default
}
if (draws > 0 && file.exists(log) && nrow(paired) > 0) {
  by_layer <- stats::aggregate(cbind(accuracy, difference) ~ model + corpus + layer + features, paired, mean)
  by_layer$se_difference <- stats::aggregate(difference ~ model + corpus + layer + features, paired,
                                             function(d) stats::sd(d) / sqrt(length(d)))$difference
  by_layer$draws <- stats::aggregate(difference ~ model + corpus + layer + features, paired, length)$difference
  cat("\nEach layer against the default layer, draw by draw (difference in accuracy, its se over the draws)\n\n")
  print(by_layer[order(by_layer$model, by_layer$features, by_layer$corpus, by_layer$layer), ],
        row.names = FALSE, digits = 3)
}
cat(sprintf("\n%.0f s\n", as.numeric(Sys.time() - started, units = "secs")))
