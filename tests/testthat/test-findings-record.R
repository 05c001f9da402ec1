test_that("the record splits each variance into its corpus and sampling parts, with the effective n they imply", {
  data <- simulated_labels(2000, 31)
  coded <- review_sample(data, 150, weight = "uniform", seed = 31)
  fit <- label_regression(yes ~ x, data, coded, truth, seed = 1)
  table <- fit$record$estimates
  expect_named(table, c("term", "estimator", "estimate", "std.error", "statistic", "p.value", "conf.low", "conf.high",
                        "df", "skewness", "effective_n", "design_effect", "var_corpus", "var_sampling", "lambda"))
  designed <- table[table$estimator != "naive", ]
  expect_equal(designed$var_corpus + designed$var_sampling, designed$std.error^2)
  expect_equal(table$var_corpus[table$estimator == "corrected"], unname(diag(fit$parts$corrected$population)))
  # the codes alone from a uniform sample: about as many effective rows as coded ones
  alone <- table[table$estimator == "coded_only", ]
  expect_true(all(alone$design_effect > 0.4 & alone$design_effect < 1.2))
  expect_equal(alone$effective_n, 2000 * alone$var_corpus / alone$std.error^2)
  expect_equal(alone$lambda, c(0, 0))
  expect_equal(table$lambda[table$estimator == "corrected"], unname(fit$lambda))
  expect_true(all(is.na(table$effective_n[table$estimator == "naive"])))
  # the corpus target has no corpus part
  corpus <- label_regression(yes ~ x, data, coded, truth, seed = 1, target = "corpus")$record$estimates
  expect_equal(corpus$var_corpus[corpus$estimator == "corrected"], c(0, 0))
  expect_gt(min(corpus$effective_n[corpus$estimator == "corrected"]),
            max(table$effective_n[table$estimator == "corrected"]))
  expect_identical(fit$record$design$fewest_coded, min(table(coded$.stratum)))
  expect_true(fit$record$small_sample)
  expect_null(fit$record$learner)
  expect_identical(fit$record$naive, "the model's labels")
})

test_that("the record keeps the design: strata, lost rows, clusters drawn whole", {
  data <- simulated_labels(800, 19)
  coded <- review_sample(data, 60, weight = "confidence", seed = 19)
  coded$truth[1:4] <- NA
  fit <- suppressWarnings(label_regression(yes ~ x, data, coded, truth, seed = 1))
  design <- fit$record$design
  expect_identical(c(design$drawn, design$lost), c(60, 4))
  expect_identical(design$strata, 6L)
  expect_identical(design$fewest_coded, min(table(coded$.stratum[!is.na(coded$truth)])))
  expect_false(design$equal_weights)
  clusters <- clustered(3)
  drawn <- review_sample(clusters, n = 12, cluster = "speaker", weight = "uniform", seed = 1)
  shares <- label_shares(clusters, drawn, truth, seed = 2)
  record <- attr(shares, "record")
  expect_identical(c(record$design$clusters_drawn, record$design$clusters), c(12L, 80L))
  expect_identical(record$design$cluster, "speaker")
  expect_false(record$small_sample)
  expect_identical(record$interval, "wilson")
})

test_that("learned labels: the record names the learner, its accuracy, the guard's decision and the naive labels", {
  rows <- learnable_rows(600)
  coded <- review_sample(rows$data, n = 150, weight = "uniform", seed = 1)
  learned <- learn_labels(rows$data, coded, gold, features = rows$x)
  fit <- label_regression(a ~ z, learned, coded, gold, seed = 2)
  expect_identical(fit$record$learner[c("verb", "model", "kept")],
                   list(verb = "learn_labels()", model = "ridge logistic on the features", kept = TRUE))
  expect_identical(fit$record$learner$accuracy, manifest(learned)$prompt$cross_validated_accuracy)
  expect_identical(fit$record$naive, "the learned labels")
  # the naive estimate is the learned labels' share as if true
  naive <- fit$record$estimates[fit$record$estimates$estimator == "naive", ]
  expect_equal(naive$estimate[[1]] + naive$estimate[[2]] * mean(learned$z), mean(learned$.label == "a"))
  # the labels' probabilities are the truth's own, the features noise: the guard keeps the labels as annotated
  noise <- learnable_rows(300, informative = 0, seed = 1)
  noise$data$gold <- withr::with_seed(1, ifelse(stats::runif(300) < noise$data$.prob_a, "a", "b"))
  coded <- review_sample(noise$data, n = 60, weight = "uniform", seed = 1)
  declined <- suppressMessages(learn_labels(noise$data, coded, gold, features = noise$x))
  kept <- label_regression(a ~ z, declined, coded, gold, seed = 2)$record
  expect_false(kept$learner$kept)
  expect_identical(kept$naive, "the model's labels")
})

test_that("the manifest reads the record", {
  data <- simulated_labels(800, 19)
  coded <- review_sample(data, 100, weight = "confidence", seed = 19)
  fit <- label_regression(yes ~ x, data, coded, truth, seed = 19)
  record <- manifest(fit)$estimation
  x <- fit$record$estimates[fit$record$estimates$term == "x" & fit$record$estimates$estimator == "corrected", ]
  expect_match(record[["corrected (x)"]], sprintf("std.error %.4g, df %s, effective n %.4g", x$std.error, format(round(x$df, 1)),
                                                  x$effective_n), fixed = TRUE)
  expect_identical(record$naive, "the model's labels as if true")
  expect_identical(record$fewest_coded_rows_in_a_stratum, fit$record$design$fewest_coded)
  expect_match(record$variance_method, "HC2")
  expect_match(record$interval_method, "small-sample degrees of freedom .*at most the design's 94")
  shares <- manifest(label_shares(data, coded, truth, by = "group", seed = 1))$estimation
  expect_match(shares[["corrected (a: yes)"]], "effective n")
  expect_match(shares$interval_method, "Wilson")
})
