test_that("the planned number of coded rows reaches the target standard error", {
  reached <- vapply(1:12, function(seed) {
    data <- simulated_labels(20000, seed)
    pilot <- review_sample(data, 150, weight = "uniform", seed = seed)
    plan <- coded_rows_needed(label_regression(yes ~ x, data, pilot, truth, seed = seed), se = 0.02)
    expect_identical(plan$term, "x")
    expect_gt(plan$coded_needed, 150)
    coded <- review_sample(data, plan$coded_needed, weight = "uniform", seed = seed + 100)
    fit <- label_regression(yes ~ x, data, coded, truth, seed = seed)
    sqrt(vcov(fit)["x", "x"]) / 0.02
  }, 0)
  # a pilot's estimate of the model's errors is noisy, one draw at a time: on average within 20%
  expect_lt(abs(mean(reached) - 1), 0.2)
  expect_true(all(reached > 0.6 & reached < 1.5))
})

test_that("a pilot that meets the target needs no more rows; an unreachable target says NA", {
  data <- simulated_labels(2000, 47)
  pilot <- review_sample(data, 300, weight = "uniform", seed = 1)
  fit <- label_regression(yes ~ x, data, pilot, truth, seed = 1)
  se <- sqrt(vcov(fit)["x", "x"])
  plan <- coded_rows_needed(fit, se = se * 1.5)
  expect_lt(plan$coded_needed, 300)
  expect_equal(plan$std.error, se)
  expect_true(is.na(coded_rows_needed(fit, se = 1e-4)$coded_needed))
  shares <- label_shares(data, pilot, truth)
  expect_identical(coded_rows_needed(shares, se = 0.01)$term, c("yes: (Intercept)", "no: (Intercept)"))
  expect_error(coded_rows_needed(data, 0.01), class = "newrllama4_error_invalid_argument")
  expect_error(coded_rows_needed(fit, se = 0), class = "newrllama4_error_invalid_argument")
  expect_error(coded_rows_needed(fit, se = 0.01, terms = "z"), class = "newrllama4_error_invalid_argument")
})

test_that("annotators are ranked by the coded rows each needs, beside their time per row", {
  data <- simulated_labels(3000, 48)
  pilot <- review_sample(data, 150, weight = "uniform", seed = 1)
  # a second annotator whose probabilities carry no information
  blind <- data
  blind$.prob_yes <- withr::with_seed(2, stats::runif(3000))
  blind$.prob_no <- 1 - blind$.prob_yes
  blind$.label <- factor(ifelse(blind$.prob_yes > 0.5, "yes", "no"), levels = c("yes", "no"))
  fits <- list(blind = label_regression(yes ~ x, blind, pilot, truth, seed = 1),
               good = label_regression(yes ~ x, data, pilot, truth, seed = 1))
  plan <- coded_rows_needed(fits, se = 0.02, seconds_per_row = c(good = 0.4, blind = 0.1))
  expect_identical(plan$annotator, c("good", "blind"))
  expect_identical(plan$seconds_per_row, c(0.4, 0.1))
  expect_lt(plan$coded_needed[1], plan$coded_needed[2])
  expect_identical(plan$coded_needed[1], coded_rows_needed(fits$good, se = 0.02)$coded_needed)
  # time per row from each annotation's manifest
  attr(fits$good, "manifest")$timings <- list(total_seconds = 600)
  attr(fits$good, "manifest")$prompts <- list(total = 3000)
  expect_identical(coded_rows_needed(fits, se = 0.02)$seconds_per_row, c(0.2, NA))
  other <- label_regression(yes ~ x, data, review_sample(data, 150, weight = "uniform", seed = 9), truth, seed = 1)
  expect_error(coded_rows_needed(list(good = fits$good, other = other), se = 0.02),
               class = "newrllama4_error_invalid_argument")
})

test_that("with learned labels the plan rests on the learner's errors: fewer coded rows than zero-shot labels need", {
  rows <- learnable_rows(1000, dim = 10, strength = 1.5)
  coded <- review_sample(rows$data, n = 150, weight = "uniform", seed = 1)
  learned <- suppressMessages(learn_labels(rows$data, coded, gold, features = rows$x))
  zero_shot <- coded_rows_needed(label_shares(rows$data, coded, gold, seed = 1), se = 0.03)
  with_learner <- coded_rows_needed(label_shares(learned, coded, gold, seed = 1), se = 0.03)
  expect_true(all(with_learner$std.error < zero_shot$std.error))
  expect_true(all(with_learner$coded_needed < 0.9 * zero_shot$coded_needed))
})

test_that("a round by doubt is planned against uniform rows, with its Neyman bound", {
  rows <- learnable_rows(1500, dim = 10, strength = 1.5)
  pilot <- review_sample(rows$data, n = 100, weight = "uniform", seed = 1)
  learned <- suppressMessages(learn_labels(rows$data, pilot, gold, features = rows$x))
  fit <- suppressMessages(label_shares(learned, pilot, gold, seed = 1, target = "corpus"))
  plan <- coded_rows_needed(fit, se = 0.02, doubt = learned)
  doubt <- sqrt(learned$.confidence * (1 - learned$.confidence))[-pilot$.row]
  # at the variances the pilot's codes give the doubt (doubt_variance())
  expect_equal(plan$neyman_bound, rep(doubt_variance_ratio(doubt, variance = doubt_variance(learned)[-pilot$.row]), 2))
  expect_lt(plan$neyman_bound[[1]], 0.95)
  expect_identical(plan$more_uniform, plan$coded_needed - 100L)
  expect_true(all(plan$more_by_doubt < plan$more_uniform))
  # a round of that size by doubt reaches the target as planned, give or take the pilot's noise
  both <- review_sample(learned, n = plan$more_by_doubt[[1]], weight = "learned", previous = pilot, seed = 2)
  after <- suppressMessages(label_shares(learned, both, gold, seed = 1, target = "corpus"))
  expect_lt(after$std.error[after$estimator == "corrected"][[1]], 0.02 * 1.15)
  # already there: no more rows
  expect_identical(coded_rows_needed(fit, se = 1, doubt = learned)$more_by_doubt, c(0L, 0L))
  expect_error(coded_rows_needed(fit, se = 0.02, doubt = rows$data), "learn_labels",
               class = "newrllama4_error_invalid_argument")
})

test_that("with five labels, each label's share is planned for a round by its own doubt", {
  rows <- learnable_rows(1500, labels = c("a", "b", "c", "d", "e"), majority = 0.3, dim = 10, strength = 3, seed = 2)
  pilot <- review_sample(rows$data, n = 75, weight = "uniform", seed = 2)
  learned <- suppressMessages(learn_labels(rows$data, pilot, gold, features = rows$x))
  fit <- suppressMessages(label_shares(learned, pilot, gold, seed = 1, target = "corpus"))
  plan <- coded_rows_needed(fit, se = 0.02, doubt = learned)
  rest <- -pilot$.row
  own <- vapply(c("a", "b", "c", "d", "e"), function(label) {
    p <- learned[[paste0(".prob_", label)]][rest]
    doubt_variance_ratio(sqrt(p * (1 - p)), variance = doubt_variance(learned, label)[rest])
  }, 0)
  expect_equal(plan$neyman_bound, unname(own))
  # "a", told apart by the features, gains more from its own doubt than from the top label's
  top <- doubt_of(learned$.confidence[rest])
  expect_lt(plan$neyman_bound[[1]], doubt_variance_ratio(top, variance = doubt_variance(learned)[rest]) - 0.05)
  # a regression of a label is planned by that label's doubt
  regression <- suppressMessages(label_regression(b ~ z, learned, pilot, gold, seed = 1, target = "corpus"))
  expect_equal(coded_rows_needed(regression, se = 0.02, doubt = learned)$neyman_bound, unname(own[["b"]]))
})

test_that("a slope on a long tail is not planned past the coded rows at which it stops", {
  # a straight line through codes of 0 and 1 on a lognormal covariate stops past 60 coded rows (findings-estimate.R):
  # a plan of more would send the user to code rows that end in newrllama4_error_skewed_covariate
  data <- simulated_labels(2000, 1, covariate = skewed)
  fit <- suppressWarnings(suppressMessages(label_regression(yes ~ x, data, review_sample(data, 60, "uniform", seed = 1),
                                                            truth, seed = 1)))
  expect_identical(fit$leverage$rows_limit, 60L)
  now <- sqrt(vcov(fit)["x", "x"])
  expect_true(is.na(coded_rows_needed(fit, se = now / 2)$coded_needed))
  expect_lte(coded_rows_needed(fit, se = now * 1.5)$coded_needed, 60)
  normal <- simulated_labels(2000, 1)
  fit <- suppressMessages(label_regression(yes ~ x, normal, review_sample(normal, 60, "uniform", seed = 1), truth,
                                           seed = 1))
  expect_null(fit$leverage$rows_limit)
  expect_gt(coded_rows_needed(fit, se = sqrt(vcov(fit)["x", "x"]) / 2)$coded_needed, 60)
})

test_that("a sample of clusters drawn whole is planned in clusters, which review_sample() counts", {
  data <- simulated_labels(3000, seed = 7)
  data$speaker <- rep(seq_len(150), each = 20)
  coded <- review_sample(data, 10, cluster = speaker, seed = 1)
  fit <- suppressMessages(label_shares(data, coded, truth, seed = 1))
  now <- coded_rows_needed(fit, se = 1)$std.error[[1]]
  plan <- coded_rows_needed(fit, se = now / 2)
  expect_identical(plan$clusters_needed, as.integer(ceiling(10 * plan$coded_needed / 200)))
  # half the standard error: about four times the speakers, the corpus part aside
  expect_true(all(plan$clusters_needed >= 38 & plan$clusters_needed <= 150))
  expect_identical(coded_rows_needed(fit, se = now * 1.001)$clusters_needed, c(10L, 10L))
  expect_null(coded_rows_needed(label_shares(data, review_sample(data, 200, seed = 1), truth, seed = 1),
                                se = 0.02)$clusters_needed)
})
