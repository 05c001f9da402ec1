# Does the corpus share's interval cover with labels learned from 150 uniform
# coded rows, on the word corpora of tools/bench_learned.R (their annotations
# cached in build/bench-learned/ by that script)? Per draw: the commonest
# label's corrected share, its standard error, df and 95% interval, the coded
# rows alone's interval, how many coded rows the learner has wrong (|residual|
# > 0.5), the coded residuals' second and fourth central moments, and each
# cross-fitting fold's part of the estimate's error, (sum over its coded rows
# of e / pi - sum over its rows of e) / N with e = gold - lambda * prediction:
# the parts sum to the error, and their covariances over the draws show what
# the variance formula, which sums each part's own, leaves out; and the share
# of the variance that the learner's dependence on the coded rows added
# (learner_dependence()), of the variance before it.
#   Rscript tools/bench_learned_coverage.R MODEL CORPUS FROM:TO OUT.csv
# e.g. Rscript tools/bench_learned_coverage.R gemma3-270m nouns_verbs 1:60 nv.csv
suppressPackageStartupMessages(library(newrllama4))
args <- commandArgs(TRUE)
if (length(args) != 4) stop("usage: Rscript tools/bench_learned_coverage.R MODEL CORPUS FROM:TO OUT.csv")
cached <- sprintf("build/bench-learned/%s-%s.rds", args[[1]], args[[2]])
if (!file.exists(cached)) stop(cached, " is missing: run tools/bench_learned.R on that corpus and model first")
data <- readRDS(cached)
range <- as.integer(strsplit(args[[3]], ":", fixed = TRUE)[[1]])
label <- names(which.max(table(data$gold)))
gold <- as.numeric(data$gold == label)
rows <- nrow(data)

draw <- function(seed) {
  coded <- review_sample(data, 150, weight = "uniform", seed = seed)
  learned <- suppressMessages(learn_labels(data, coded, gold))
  shares <- suppressMessages(suppressWarnings(label_shares(learned, coded, gold, seed = seed, target = "corpus")))
  estimate <- attr(shares, "estimates")[[label]]
  corrected <- shares[shares$label == label & shares$estimator == "corrected", ]
  coded_only <- shares[shares$label == label & shares$estimator == "coded_only", ]
  e <- rep(NA_real_, rows)
  e[estimate$rows] <- gold[estimate$rows] - estimate$lambda[[1]] * estimate$predictions
  prob <- rep(NA_real_, rows)
  prob[estimate$coded_rows] <- estimate$sample_prob
  residuals <- e[estimate$coded_rows] - mean(e[estimate$coded_rows])
  folds <- vapply(sort(unique(estimate$folds)), function(k) {
    in_fold <- which(estimate$folds == k)
    drawn <- intersect(estimate$coded_rows, in_fold)
    (sum(e[drawn] / prob[drawn]) - sum(e[in_fold])) / rows
  }, 0)
  data.frame(seed, value = mean(gold), estimate = corrected$estimate, se = corrected$std.error, df = corrected$df,
             low = corrected$conf.low, high = corrected$conf.high, coded_low = coded_only$conf.low,
             coded_high = coded_only$conf.high, wrong = sum(abs(e[estimate$coded_rows]) > 0.5),
             m2 = mean(residuals^2), m4 = mean(residuals^4), n = length(residuals),
             added = rlang::`%||%`(estimate$parts$corrected$learner$share, 0),
             difference = estimate$parts$corrected$learner$difference[[1]],
             difference_se = estimate$parts$corrected$learner$difference_se[[1]],
             before = estimate$parts$corrected$learner$before[[1]],
             shift = rlang::`%||%`(estimate$parts$corrected$learner$shift_variance[[1]], NA_real_),
             t(stats::setNames(folds, paste0("fold_", seq_along(folds)))))
}

draws <- do.call(rbind, lapply(seq(range[[1]], range[[2]]), draw))
utils::write.csv(draws, args[[4]], row.names = FALSE)
covered <- draws$low <= draws$value & draws$value <= draws$high
z <- (draws$estimate - draws$value) / draws$se
errors <- as.matrix(draws[grep("^fold_", names(draws))])
cat(sprintf(paste("%s %s, %d draws: covers %.3f (coded rows alone %.3f); z sd %.2f; the learner's dependence adds",
                  "%.2f of the variance (mean); folds' cross covariance %.2f of their own\n"),
            args[[1]], args[[2]], nrow(draws), mean(covered),
            mean(draws$coded_low <= draws$value & draws$value <= draws$coded_high), stats::sd(z),
            mean(draws$added / (1 + draws$added)),
            (sum(crossprod(errors)) - sum(diag(crossprod(errors)))) / sum(diag(crossprod(errors)))))
