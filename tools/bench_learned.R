# Labels learned from the coded rows against the zero-shot labels and the
# refit, and what they do to a finding (issue 53): on three labelled word
# corpora large enough to code 300 rows and score the rest (1,000 Bing lexicon
# words, 700 nouns and verbs, 1,000 words of five parts of speech;
# tools/annotation-corpora.R) and both embedded models. Each corpus is
# annotated once, zero-shot, with features = TRUE (kept in build/bench-learned/
# so that a second run only learns). Then for 50, 100, 150 and 300 coded rows,
# drawn by review_sample(weight = "uniform") with the gold labels standing in
# for the coders', `draws` times: the accuracy on the rows not coded of the
# zero-shot labels, of recalibrate_labels() and of learn_labels(); and the
# width of the corrected 95% interval of the largest label's share
# (label_shares()) with the zero-shot and with the learned labels, each over
# the coded rows' alone.
#   Rscript tools/bench_learned.R [draws]   (default 10)
suppressPackageStartupMessages(library(newrllama4))
source(file.path("tools", "annotation-corpora.R"))
arguments <- commandArgs(TRUE)
draws <- if (length(arguments) >= 1) as.integer(arguments[1]) else 10L
sizes <- c(50, 100, 150, 300)

corpora <- learned_corpora
models <- c("Gemma 3 270M" = "gemma3-270m", "SmolLM2 135M" = "smollm2-135m-instruct")
kept <- file.path("build", "bench-learned")
dir.create(kept, recursive = TRUE, showWarnings = FALSE)

annotated <- function(model, corpus_name) {
  path <- file.path(kept, sprintf("%s-%s.rds", models[[model]], corpus_name))
  if (file.exists(path)) return(readRDS(path))
  corpus <- corpora[[corpus_name]]()
  ctx <- context_create(model_load(models[[model]]), n_ctx = 1024L, n_seq_max = 8L)
  data <- suppressWarnings(annotate_texts(corpus$data, text, corpus$instruction, labels = corpus$labels,
                                          context = ctx, progress = FALSE, features = TRUE))
  saveRDS(data, path)
  data
}

# One draw of `size` coded rows: accuracies on the rows not coded, and the
# share's interval widths over the coded rows' alone.
one_draw <- function(data, size, seed, share_label) {
  coded <- review_sample(data, size, weight = "uniform", seed = seed)
  rest <- setdiff(seq_len(nrow(data)), coded$.row)
  accuracy <- function(labelled) mean(as.character(labelled$.label[rest]) == data$gold[rest])
  refit <- suppressMessages(suppressWarnings(recalibrate_labels(data, coded, gold)))
  learned <- suppressMessages(learn_labels(data, coded, gold))
  width <- function(labelled) {
    shares <- suppressMessages(suppressWarnings(label_shares(labelled, coded, gold, seed = seed)))
    shares <- shares[shares$label == share_label, ]
    spread <- shares$conf.high - shares$conf.low
    spread[shares$estimator == "corrected"] / spread[shares$estimator == "coded_only"]
  }
  c(zero_shot = accuracy(data), refit = accuracy(refit), learned = accuracy(learned),
    width_zero_shot = width(data), width_learned = width(learned))
}

started <- Sys.time()
rows <- list()
for (model in names(models)) {
  for (corpus_name in names(corpora)) {
    data <- annotated(model, corpus_name)
    share_label <- names(which.max(table(data$gold)))
    for (size in sizes) {
      figures <- vapply(seq_len(draws), function(seed) one_draw(data, size, seed, share_label), numeric(5))
      rows[[length(rows) + 1]] <- data.frame(
        model = model, corpus = corpus_name, rows = nrow(data), coded = size,
        majority = max(table(data$gold)) / nrow(data), t(rowMeans(figures))
      )
      message(paste(utils::capture.output(print(rows[[length(rows)]], row.names = FALSE, digits = 3)),
                    collapse = "\n"))
    }
  }
}
cat(sprintf("Learned labels (issue 53), %d draws of each size\n\n", draws))
print(do.call(rbind, rows), row.names = FALSE, digits = 3)
cat(sprintf("\n%.0f s\n", as.numeric(Sys.time() - started, units = "secs")))
