# Labels learned from 150 uniform coded rows of learnable_rows(600, strength), and their corpus shares.
learned_shares <- function(strength) {
  rows <- learnable_rows(600, strength = strength)
  coded <- review_sample(rows$data, n = 150, weight = "uniform", seed = 1)
  learned <- suppressMessages(learn_labels(rows$data, coded, gold, features = rows$x))
  list(rows = rows, coded = coded, learned = learned,
       shares = suppressMessages(label_shares(learned, coded, gold, seed = 2, target = "corpus")))
}

test_that("learned labels' intervals count the learner's dependence on the coded rows, and say so", {
  fit <- learned_shares(strength = 2)
  rows <- fit$rows
  coded <- fit$coded
  learned <- fit$learned
  shares <- fit$shares
  estimate <- attr(shares, "estimates")$a
  dependence <- estimate$parts$corrected$learner
  expect_identical(dependence$groups, learner_jackknife_groups)
  expect_gt(dependence$share[["(Intercept)"]], 0)
  # added to the variance the design gives, which it does not replace
  before <- estimate$parts$corrected
  before$learner <- NULL
  corrected <- shares[shares$label == "a" & shares$estimator == "corrected", ]
  expect_equal(corrected$std.error^2, design_vcov(before, "corpus")[[1]] * (1 + dependence$share[[1]]))
  expect_equal(corrected$var_sampling, corrected$std.error^2)
  # the variance of the refitted learners' shifts, scaled down for the jackknife's count of a second-order term
  expect_equal(diag(dependence$variance), dependence$shift_variance / second_order_factor(150, 15))
  expect_match(paste(capture.output(print(shares)), collapse = " "), "delete-a-group jackknife over 15 groups")
  # the replicates fit each fold's learner at the setting the fold chose, never choosing again
  local_package_binding("choose_setting", function(...) stop("chose again"))
  expect_no_error(suppressMessages(label_regression(a ~ z, learned, coded, gold, seed = 2)))
  # labels as annotated do not depend on the coded rows: nothing added, nothing said
  zero_shot <- suppressMessages(label_shares(rows$data, coded, gold, seed = 2))
  expect_null(attr(zero_shot, "estimates")$a$parts$corrected$learner)
  expect_no_match(paste(capture.output(print(zero_shot)), collapse = " "), "jackknife")
})

test_that("where the learner's dependence leaves the labels no gain, the estimate is the coded rows' alone", {
  # a learner whose dependence on its coded rows outweighs its gain: counted 50 times over here, its variance, the
  # jackknife's part counted, exceeds theirs
  local_package_binding("second_order_factor", function(units, groups) 0.02)
  fit <- learned_shares(strength = 1.2)
  shares <- fit$shares
  estimate <- attr(shares, "estimates")$a
  expect_identical(unname(estimate$lambda), 0)
  expect_match(estimate$lambda_rule, "the coded rows alone) where the learner's dependence on them left no gain",
               fixed = TRUE)
  a <- shares[shares$label == "a", ]
  expect_equal(a$estimate[a$estimator == "corrected"], a$estimate[a$estimator == "coded_only"])
  expect_equal(a$std.error[a$estimator == "corrected"], a$std.error[a$estimator == "coded_only"])
  # a lambda given is the user's: kept, its variance counting the dependence
  given <- suppressMessages(label_regression(a ~ 1, fit$learned, fit$coded, gold, seed = 2, target = "corpus",
                                             lambda = 1))
  expect_identical(unname(given$lambda), 1)
  expect_gt(given$parts$corrected$learner$share[[1]], 0)
})

test_that("a replicate drops whole units of every stratum and its strata still stand for all their rows", {
  units <- c(1, 1, 2, 3, 3, 4, 5, 6, 7, 8, 9, 10)
  stratum <- c("a", "a", "a", "a", "a", "b", "b", "b", "b", "b", "b", "c")
  group <- jackknife_groups(units, stratum, seed = 1, groups = 4)
  # a cluster's rows share a group; the stratum of one unit is never dropped
  expect_true(all(tapply(group, units, function(g) length(unique(g))) == 1))
  expect_identical(group[stratum == "c"], 0L)
  expect_setequal(group[stratum != "c"], 1:4)
  # each stratum of several units is in several groups, so no replicate drops all of it
  expect_true(all(tapply(group[stratum != "c"], stratum[stratum != "c"], function(g) length(unique(g))) >= 2))
  expect_identical(jackknife_groups(units, stratum, seed = 1, groups = 4), group)
  sample <- list(rows = 101:112, prob = c(rep(0.2, 5), rep(0.5, 6), 1), units = units, stratum = stratum,
                 truth_labels = rep(c("x", "y"), 6))
  keep <- group != 2
  replicate <- replicate_sample(sample, keep)
  expect_identical(replicate$rows, sample$rows[keep])
  # each stratum's units, weighted, still count its units: the kept ones stand for the dropped
  units_weighted <- function(s, strata) {
    tapply(1 / s$prob[!duplicated(s$units)], strata[!duplicated(s$units)], sum)
  }
  expect_equal(units_weighted(replicate, stratum[keep]), units_weighted(sample, stratum))
})

test_that("the jackknife counts a second-order term as second_order_factor() says", {
  # a sum over pairs of units whose terms have mean zero given either unit: the learner's part is of this kind
  pairs_sum <- function(x) (sum(x)^2 - sum(x^2)) / 2
  groups <- rep_len(1:15, 60)
  draws <- withr::with_seed(1, replicate(3000, {
    x <- stats::rnorm(60)
    replicates <- vapply(1:15, function(k) pairs_sum(x[groups != k]), 0)
    c(statistic = pairs_sum(x), jackknife = 14 / 15 * sum((replicates - mean(replicates))^2))
  }))
  counted <- mean(draws["jackknife", ]) / stats::var(draws["statistic", ])
  expect_equal(counted, second_order_factor(60, 15), tolerance = 0.08)
  # the delete-one jackknife counts it twice as the units grow (Efron and Stein); never scaled up
  expect_equal(second_order_factor(1000, 1000), 2, tolerance = 0.01)
  expect_identical(second_order_factor(4, 4), 1)
})
