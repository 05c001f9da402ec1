# From labels to findings on a real corpus: 2,000 words of the Bing opinion
# lexicon (tidytext), labelled positive or negative by Gemma 3 270M with the
# recommended settings, every word's lexicon label known. Two findings, each
# three ways: from every row's true label (the target), from the model's
# labels as if true (naive), and corrected by label_shares() /
# label_regression() with a sample of coded rows (here the lexicon's labels of
# the sampled words), over many draws of the sample:
#   - the share of negative words;
#   - the slope of negativity on word length (a linear probability model).
# Then how many coded rows a confidence-weighted sample needs to reach the
# interval width of a uniform one.
#
#   Rscript tools/bench_findings_corpus.R [draws]    (default 200; make bench runs it)

suppressPackageStartupMessages({
  library(newrllama4)
  library(tm)
})
source("tools/annotation-corpora.R")
draws <- as.integer(commandArgs(TRUE)[1])
if (is.na(draws)) draws <- 200L
n_coded <- 100

corpus <- words(n = 2000)
ctx <- context_create(model_load("gemma3-270m"), n_ctx = 1024L, n_seq_max = 8L)
seconds <- system.time(labelled <- annotate_texts(
  corpus$data, text, corpus$instruction, labels = corpus$labels, examples = corpus$examples,
  example_orders = 2L, calibrate = "batch", context = ctx, progress = FALSE
))[["elapsed"]]
labelled$length <- nchar(labelled$text)
truth <- as.numeric(labelled$gold == "negative")
cat(sprintf("%s: %d words annotated in %.0f s, accuracy %.3f\n\n", corpus$name, nrow(labelled), seconds,
            mean(as.character(labelled$.label) == labelled$gold)))

# the targets: every row coded
target_share <- mean(truth)
target_slope <- unname(stats::coef(stats::lm(truth ~ length, labelled))[2])

# each estimator's interval for both findings, from one draw of coded rows
one_draw <- function(seed, weight) {
  coded <- review_sample(labelled, n_coded, weight = weight, seed = seed)
  shares <- label_shares(labelled, coded, gold, seed = seed)
  share <- shares[shares$label == "negative", ]
  slope <- summary(label_regression(negative ~ length, labelled, coded, gold, seed = seed))$table
  slope <- slope[slope$term == "length", ]
  rbind(data.frame(finding = "share", weight = weight, estimator = share$estimator,
                   cover = share$conf.low <= target_share & target_share <= share$conf.high,
                   width = share$conf.high - share$conf.low),
        data.frame(finding = "slope", weight = weight, estimator = slope$estimator,
                   cover = slope$conf.low <= target_slope & target_slope <= slope$conf.high,
                   width = slope$conf.high - slope$conf.low))
}
runs <- do.call(rbind, lapply(seq_len(draws), function(seed) rbind(one_draw(seed, "uniform"),
                                                                    one_draw(seed, "confidence"))))
table <- stats::aggregate(cbind(coverage = cover, mean_width = width) ~ finding + weight + estimator, runs, mean)
table <- table[order(table$finding, table$weight, match(table$estimator, c("corrected", "naive", "coded_only"))), ]
point <- function(estimator) {
  one <- review_sample(labelled, n_coded, weight = "uniform", seed = 1)
  shares <- label_shares(labelled, one, gold, seed = 1)
  fit <- summary(label_regression(negative ~ length, labelled, one, gold, seed = 1))$table
  c(share = shares$estimate[shares$label == "negative" & shares$estimator == estimator],
    slope = fit$estimate[fit$term == "length" & fit$estimator == estimator])
}
cat(sprintf("Targets (every row coded): share of negative %.4f, slope on length %.5f\n", target_share, target_slope))
cat(sprintf("One draw of %d uniform rows: naive share %.4f, corrected %.4f; naive slope %.5f, corrected %.5f\n\n",
            n_coded, point("naive")[["share"]], point("corrected")[["share"]], point("naive")[["slope"]],
            point("corrected")[["slope"]]))
cat(sprintf("Coverage of the targets by 95%% intervals over %d draws of %d coded rows\n", draws, n_coded))
print(format(table, digits = 3), row.names = FALSE)

share_width <- function(weight, n) {
  mean(vapply(seq_len(draws), function(seed) {
    shares <- label_shares(labelled, review_sample(labelled, n, weight = weight, seed = seed), gold, seed = seed)
    corrected <- shares[shares$estimator == "corrected" & shares$label == "negative", ]
    corrected$conf.high - corrected$conf.low
  }, 0))
}
uniform_width <- share_width("uniform", n_coded)
sizes <- seq(50, 150, by = 10)
confidence_widths <- vapply(sizes, share_width, 0, weight = "confidence")
enough <- sizes[confidence_widths <= uniform_width]
cat(sprintf("\nShare of negative: %d uniform rows give intervals %.4f wide; confidence-weighted samples of %s rows
give %s; the smallest as narrow: %s\n", n_coded, uniform_width, paste(sizes, collapse = ", "),
            paste(sprintf("%.4f", confidence_widths), collapse = ", "),
            if (length(enough)) paste(min(enough), "rows") else "none up to 150"))
