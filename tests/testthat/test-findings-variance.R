# The design-based variance and the tuned lambda (findings-variance.R), against survey and
# the estimating equations they solve.

test_that("at lambda 1, gaussian fits solve least squares on DSL's pseudo-outcomes, with the design's variance", {
  skip_if_not_installed("survey")
  data <- simulated_labels(1500, 7)
  coded <- review_sample(data, 200, weight = "confidence", seed = 7)
  fit <- label_regression(yes ~ x + group, data, coded, truth, seed = 7, lambda = 1)
  # the pseudo-outcome: prediction everywhere, plus the weighted error on coded rows
  y <- as.numeric(coded$truth == "yes")
  pseudo <- data$.prob_yes
  pseudo[coded$.row] <- pseudo[coded$.row] + (y - pseudo[coded$.row]) / coded$.sample_prob
  reference <- stats::lm(pseudo ~ x + group, data)
  expect_equal(unname(coef(fit)), unname(coef(reference)), tolerance = 1e-8)
  # the corpus target's variance: that of the stratified sample's total of x (y - g), as survey estimates it;
  # the population's adds the coded rows' estimate of sum x x' (y - mu)^2
  x <- stats::model.matrix(~ x + group, data)
  z <- x[coded$.row, ] * (y - data$.prob_yes[coded$.row])
  totals <- survey::svytotal(~ z1 + z2 + z3, survey_design(coded, data.frame(z1 = z[, 1], z2 = z[, 2], z3 = z[, 3])))
  bread <- solve(crossprod(x))
  # each coded row's terms divided by sqrt(1 - h), h the leverage of its code (HC2)
  leverage <- rowSums((x[coded$.row, ] %*% bread) * x[coded$.row, ]) / coded$.sample_prob
  z <- z / sqrt(1 - leverage)
  totals <- survey::svytotal(~ z1 + z2 + z3, survey_design(coded, data.frame(z1 = z[, 1], z2 = z[, 2], z3 = z[, 3])))
  corpus <- label_regression(yes ~ x + group, data, coded, truth, seed = 7, lambda = 1, target = "corpus")
  expect_equal(unname(vcov(corpus)), unname(bread %*% stats::vcov(totals) %*% bread), tolerance = 1e-8)
  residual <- x[coded$.row, ] * (y - fitted(reference)[coded$.row]) / sqrt(1 - leverage)
  expect_equal(unname(vcov(fit)), unname(vcov(corpus) + bread %*% crossprod(residual, residual / coded$.sample_prob)
                                         %*% bread), tolerance = 1e-8)
  naive <- stats::lm(I(.label == "yes") ~ x + group, data)
  expect_equal(unname(fit$fits$naive$coefficients), unname(coef(naive)), tolerance = 1e-8)
  expect_equal(unname(fit$vcov$naive), unname(sandwich::vcovHC(naive, type = "HC0")), tolerance = 1e-8)
  expect_equal(nobs(fit), 1500L)
  expect_identical(rownames(confint(fit)), c("(Intercept)", "x", "groupb"))
})

test_that("the coded rows alone are survey's weighted regression, with its variance for the corpus (HC2)", {
  skip_if_not_installed("survey")
  data <- simulated_labels(1000, 3)
  coded <- review_sample(data, 150, weight = "confidence", seed = 3)
  coded$y <- as.numeric(coded$truth == "yes")
  design <- survey_design(coded, coded[c("x", "y")])
  for (family in c("gaussian", "binomial")) {
    fit <- label_regression(yes ~ x, data, coded, truth, family = family, seed = 3, target = "corpus")
    reference <- survey::svyglm(y ~ x, design, family = if (family == "binomial") stats::quasibinomial() else
      stats::gaussian())
    expect_equal(unname(fit$fits$coded_only$coefficients), unname(coef(reference)), tolerance = 1e-6)
    expect_equal(unname(fit$vcov$coded_only), unname(survey_vcov_hc2(reference, design)), tolerance = 1e-5)
  }
})

test_that("rows drawn one by one: the coded rows' variance is sandwich's HC2 with the sample's finite population", {
  # one stratum, rows drawn uniformly, lambda 0: the corpus target's variance is the HC2 sandwich of the
  # coded rows' least squares times (1 - n / N) n / (n - 1) (the sample variance of a total drawn
  # without replacement); the population's adds n / N of the uncentred HC2 sandwich. Equal to 1e-4, not
  # exactly: the design's variance centres the scores in their stratum (as survey does, checked to 1e-8
  # above), and HC2's scores x e / sqrt(1 - h), unlike HC0's, do not sum to exactly zero
  data <- simulated_labels(2000, 3)
  rows <- sort(withr::with_seed(3, sample.int(2000, 60)))
  coded <- coded_at(data, rows)
  coded$y <- as.numeric(coded$truth == "yes")
  hc2 <- sandwich::vcovHC(stats::lm(y ~ x, coded), type = "HC2")
  f <- 60 / 2000
  for (target in c("corpus", "population")) {
    fit <- suppressMessages(label_regression(yes ~ x, data, coded, truth, seed = 3, lambda = 0, target = target))
    factor <- (1 - f) * 60 / 59 + if (target == "population") f else 0
    expect_equal(unname(vcov(fit)), unname(hc2 * factor), tolerance = 1e-4)
  }
  # the correction vanishes as the coded rows grow: HC2 against HC0 at 60 and at 600 coded rows
  ratio <- function(n) {
    rows <- sort(withr::with_seed(4, sample.int(2000, n)))
    model <- stats::lm(I(truth == "yes") ~ x, data[rows, ])
    sandwich::vcovHC(model, type = "HC2")[2, 2] / sandwich::vcovHC(model, type = "HC0")[2, 2]
  }
  expect_gt(ratio(60), 1.03)
  expect_lt(ratio(600), 1.02)
})

test_that("each coefficient of the binomial fit solves the logistic score equation of PPI++ at its own lambda", {
  data <- simulated_labels(1000, 3)
  coded <- review_sample(data, 150, weight = "uniform", seed = 3)
  fit <- label_regression(yes ~ x, data, coded, truth, family = "binomial", seed = 3)
  expect_true(all(fit$lambda > 0 & fit$lambda < 1))
  expect_gt(abs(fit$lambda[["x"]] - fit$lambda[["(Intercept)"]]), 0.01)
  x <- cbind(1, data$x)
  y <- as.numeric(coded$truth == "yes")
  g <- data$.prob_yes
  for (j in 1:2) {
    lambda <- fit$lambda[[j]]
    at <- label_regression(yes ~ x, data, coded, truth, family = "binomial", seed = 3, lambda = lambda)
    mu <- stats::plogis(x %*% coef(at))
    coded_part <- crossprod(x[coded$.row, ], (y - mu[coded$.row] - lambda * (g - mu)[coded$.row]) /
                              coded$.sample_prob)
    score <- lambda * crossprod(x, g - mu) + coded_part
    expect_lt(max(abs(score)), 1e-6)
    expect_equal(coef(at)[[j]], coef(fit)[[j]])
    expect_equal(vcov(at)[j, j], vcov(fit)[j, j])
  }
  expect_match(format(fit), "lambda\\): \\(Intercept\\) 0\\.[0-9]+, x 0\\.[0-9]+, tuned", all = FALSE)
  expect_identical(manifest(fit)$estimation$lambda, fit$lambda)
})

test_that("with fewer than 100 coded rows lambda is 1, not tuned on the rows it is applied to", {
  # issue 58: tuned on 60 coded rows, the slope's interval covered 0.935 (0.836 where lambda <= 0.5); at 1, 0.961
  data <- simulated_labels(2000, 5)
  few <- suppressMessages(label_regression(yes ~ x, data, review_sample(data, 60, weight = "uniform", seed = 5),
                                           truth, seed = 5))
  expect_equal(unname(few$lambda), c(1, 1))
  expect_false(few$lambda_tuned)
  expect_match(few$lambda_rule, "fewer than 100 coded rows")
  expect_match(format(few), "lambda\\): 1\\.000, 1 \\(DSL\\): fewer than 100", all = FALSE)
  enough <- suppressMessages(label_regression(yes ~ x, data, review_sample(data, 150, weight = "uniform", seed = 5),
                                              truth, seed = 5))
  expect_true(enough$lambda_tuned)
  expect_match(enough$lambda_rule, "tuned")
})

test_that("lambda is tuned on 100 independent units: clusters drawn whole count once each", {
  # a rating's slope from 10 of 60 speakers drawn whole (250 coded rows) covered 0.917 with lambda tuned on them,
  # 0.940 at 1 (1,000 draws)
  data <- rated_speakers(3)
  clusters <- review_sample(data, 10, weight = "uniform", seed = 3, cluster = "speaker")
  fit <- suppressMessages(label_regression(rating ~ x, data, clusters, truth, seed = 3, target = "corpus"))
  expect_equal(unname(fit$lambda), c(1, 1))
  expect_match(fit$lambda_rule, "fewer than 100 coded clusters")
  # as many rows drawn one by one are tuned on
  rows <- review_sample(data, nrow(clusters), weight = "uniform", seed = 3)
  one_by_one <- suppressMessages(label_regression(rating ~ x, data, rows, truth, seed = 3, target = "corpus"))
  expect_true(one_by_one$lambda_tuned)
  # and named clusters of those rows count as the units
  named <- suppressMessages(label_regression(rating ~ x, data, rows, truth, seed = 3, target = "corpus",
                                             cluster = speaker))
  expect_match(named$lambda_rule, "fewer than 100 coded clusters")
})

test_that("fewer than ten clusters drawn whole: a share's variance is the clusters' own, not a row's times theirs", {
  # each cluster's total borrowed a row's variance as if its rows erred alike: 8 of 80 speakers, a standard error
  # 1.72x this one and coverage 1.000; now, borrowing as independent rows would, 4 and 8 speakers of 20 cover 0.973
  # and 0.950 (1,000 draws each)
  data <- clustered(3)
  for (speakers in c(8, 4)) {
    coded <- review_sample(data, speakers, weight = "uniform", seed = 3, cluster = "speaker")
    shares <- suppressMessages(label_shares(data, coded, truth, seed = 3, target = "corpus"))
    yes <- shares[shares$estimator == "corrected" & shares$label == "yes", ]
    # the corpus's share at lambda 1: Horvitz-Thompson's correction over clusters drawn at random
    totals <- as.vector(tapply((coded$truth == "yes") - coded$.prob_yes, coded$speaker, sum))
    expect_equal(yes$estimate, mean(data$.prob_yes) + 80 / speakers * sum(totals) / nrow(data))
    expect_equal(yes$std.error, sqrt(80^2 * (1 / speakers - 1 / 80) * stats::var(totals)) / nrow(data))
    expect_identical(yes$df, speakers - 1)
  }
})

test_that("a covariate whose tail the coded rows miss warns, and the estimate is the coded rows' alone", {
  # issue 58: a lognormal covariate on 60 coded rows covered 0.785 (tuned), and HC3's leverage cut at 0.99
  # exploded the se in a few draws
  data <- simulated_labels(2000, 1, covariate = skewed)
  coded <- review_sample(data, 60, weight = "uniform", seed = 1)
  expect_warning(fit <- suppressMessages(label_regression(yes ~ x, data, coded, truth, seed = 1)),
                 "range of .*x.*logistic slope.*past 60 coded rows this straight line",
                 class = "newrllama4_warning_leverage")
  expect_identical(fit$leverage$covariates, "x")
  expect_gt(fit$leverage$leverage[["x"]], 1)
  expect_gt(fit$leverage$rows_needed, 60)
  expect_equal(unname(fit$lambda), c(0, 0))
  expect_equal(coef(fit), fit$fits$coded_only$coefficients)
  expect_equal(vcov(fit), fit$vcov$coded_only)
  # a coded row far out (leverage near 1) has its terms' variance at most doubled (HC3 cut at 0.99 gave this draw an se of 11.0)
  # (the coded rows reach this draw's tail, so the warning is the long tail's, over the corpus: findings-estimate.R)
  reached <- simulated_labels(2000, 3, covariate = skewed)
  expect_warning(fit <- suppressMessages(label_regression(yes ~ x, reached, review_sample(reached, 60, "uniform",
                                                                                               seed = 3), truth, seed = 3)),
                 class = "newrllama4_warning_skewed_covariate")
  expect_lt(sqrt(vcov(fit)["x", "x"]), 1)
  # a normal covariate is within reach of the same number of rows
  normal <- simulated_labels(2000, 1)
  expect_no_warning(fit <- suppressMessages(label_regression(yes ~ x, normal, review_sample(normal, 60, "uniform",
                                                                                               seed = 1), truth)))
  expect_length(fit$leverage$covariates, 0)
})

test_that("a slope on a skewed covariate gets an interval that leans away from the tail its coded rows miss", {
  # a lognormal covariate, 60 uniform coded rows (past 60 the population's
  # straight line through 0/1 codes stops): the first 8 seeds of 1..300 where
  # the symmetric t interval missed the population's slope above it (15 of
  # 300 above, 6 below); the skew-corrected interval covered 5 of these 8, and
  # 0.960 of the 300 (the symmetric t 0.930)
  slope_row <- function(seed, covariate, rows = 60) {
    data <- simulated_labels(2000, seed, covariate = covariate)
    coded <- review_sample(data, rows, weight = "uniform", seed = seed)
    fit <- quietly(label_regression(yes ~ x, data, coded, truth, seed = seed))
    table <- fit$record$estimates
    table[table$estimator == "corrected" & table$term == "x", ]
  }
  missed <- lapply(c(12, 34, 36, 55, 68, 82, 97, 127), slope_row, covariate = skewed)
  symmetric <- vapply(missed, function(row) row$estimate - stats::qt(0.975, row$df) * row$std.error, 0)
  expect_true(all(symmetric > skewed_slope_yes))
  covered <- vapply(missed, function(row) row$conf.low <= skewed_slope_yes && skewed_slope_yes <= row$conf.high, NA)
  expect_gte(sum(covered), 4)
  leaning <- vapply(missed, function(row) (row$estimate - row$conf.low) / (row$conf.high - row$estimate), 0)
  expect_true(all(leaning > 1))
  # a normal covariate: about the symmetric t interval, as wide (at 150 rows, where its estimates are about symmetric)
  for (row in lapply(1:4, slope_row, covariate = stats::rnorm, rows = 150)) {
    t_width <- 2 * stats::qt(0.975, row$df) * row$std.error
    expect_equal(row$conf.high - row$conf.low, t_width, tolerance = 0.01)
    expect_equal((row$estimate - row$conf.low) / (row$conf.high - row$estimate), 1, tolerance = 0.1)
  }
})

test_that("the skew-corrected interval is the t interval without skew, and agrees with its p-value", {
  plain <- skewed_interval(c(0.5, -1), c(0.2, 0.4), c(10, Inf), c(0, 0))
  expect_equal(plain$conf.low, c(0.5, -1) - stats::qt(0.975, c(10, Inf)) * c(0.2, 0.4))
  expect_equal(plain$p.value, 2 * stats::pt(-abs(c(0.5, -1) / c(0.2, 0.4)), c(10, Inf)))
  expect_equal(skewed_interval(c(0.5, -1), c(0.2, 0.4), c(10, Inf), 0), plain)
  # a negative skew moves both bounds down, the lower more; 0 inside exactly where p > 0.05
  skewed_bounds <- skewed_interval(c(0.5, 0.5, 0.5), 0.2, 20, c(-0.3, 0, 0.3))
  expect_true(skewed_bounds$conf.low[1] < skewed_bounds$conf.low[2] && skewed_bounds$conf.high[1] < skewed_bounds$conf.high[2])
  expect_true(skewed_bounds$conf.low[3] > skewed_bounds$conf.low[2])
  for (estimate in seq(0.2, 0.7, by = 0.05)) {
    bounds <- skewed_interval(estimate, 0.2, 20, -0.4)
    expect_identical(bounds$conf.low <= 0, bounds$p.value >= 0.05)
  }
})
