# The moment fit and its cross-fitted predictions (findings.R).

test_that("a coded row's cross-fitted prediction does not depend on its own code", {
  data <- simulated_labels(800, 11)
  coded <- review_sample(data, 120, weight = "uniform", seed = 11)
  fit <- label_regression(yes ~ x, data, coded, truth, prediction = "fit", seed = 5)
  flipped <- coded
  flipped$truth[1] <- if (coded$truth[1] == "yes") "no" else "yes"
  refit <- label_regression(yes ~ x, data, flipped, truth, prediction = "fit", seed = 5)
  row <- coded$.row[1]
  expect_identical(refit$predictions[row], fit$predictions[row])
  # rows of other folds saw the code
  other_folds <- fit$folds != fit$folds[row]
  expect_false(identical(refit$predictions[other_folds], fit$predictions[other_folds]))
})

test_that("the cross-fitted prediction model leaves its intercept and the probability unpenalised", {
  data <- simulated_labels(400, 8)
  y <- as.numeric(data$truth == "yes")
  z <- stats::qlogis(data$.prob_yes) + 1.5
  fit <- moment_fit(cbind(1, z, data$x), y, binary = TRUE, penalty = 1e6, free = 2)
  expect_equal(unname(fit$coefficients[1:2]), unname(stats::coef(stats::glm(y ~ z, family = stats::binomial))),
               tolerance = 1e-4)
  expect_lt(abs(fit$coefficients[[3]]), 1e-3)
})

test_that("intervals take a t quantile on each estimate's degrees of freedom, at most the design's: few clusters, wider", {
  data <- clustered(2)
  coded <- review_sample(data, 12, seed = 2, cluster = "speaker")
  fit <- label_regression(yes ~ 1, data, coded, truth, seed = 2)
  # an intercept on 12 clusters of one size drawn whole: Bell and McCaffrey's df is the design's, 11
  expect_equal(unname(fit$df$corrected), 11)
  interval <- confint(fit)
  # the t on those df, bent by the estimate's skew (skewed_interval())
  bent <- skewed_interval(coef(fit)[[1]], sqrt(vcov(fit)[1, 1]), 11, fit$skewness$corrected[[1]])
  expect_equal(unname(interval[1, ]), c(bent$conf.low, bent$conf.high))
  expect_equal(unname(interval[1, 2] - interval[1, 1]), 2 * stats::qt(0.975, 11) * sqrt(vcov(fit)[1, 1]),
               tolerance = 0.01)
  rows <- review_sample(simulated_labels(600, 2), 100, weight = "uniform", seed = 2)
  fit <- label_regression(yes ~ x, simulated_labels(600, 2), rows, truth, seed = 2)
  expect_identical(fit$record$design_df, 98)
  expect_true(all(fit$df$corrected <= 98) && fit$df$corrected[["x"]] < fit$df$corrected[["(Intercept)"]])
})

test_that("a logistic fit stops as separated only where it is: rows far out fitted near 0 or 1 are no sign", {
  # the coverage matrix: slopes of 1.3-3.4 on 60 coded rows of a lognormal covariate (lambda 0), finite in glm(),
  # stopped as separated in 4% of draws by corpus rows of weight 0 far out, and slopes of 1.6-4.2 on 40 coded rows
  # with the tail drawn whole in 12%, where coded rows far out are rightly fitted near 0 or 1
  data <- simulated_labels(2000, 3)
  data$x[1:5] <- c(40, 45, 50, -40, -45)
  data$truth[1:5] <- c("yes", "yes", "yes", "no", "no")
  for (tail in c(FALSE, TRUE)) {
    rows <- c(if (tail) 1:5, withr::with_seed(3, sample(6:2000, 60)))
    coded <- coded_at(data, rows)
    fit <- quietly(label_regression(yes ~ x, data, coded, truth, family = "binomial", seed = 3, lambda = 0))
    alone <- suppressWarnings(stats::glm(I(truth == "yes") ~ x, family = stats::binomial, data = coded))
    far <- abs(stats::coef(alone)[["x"]] * (if (tail) coded$x else data$x))
    expect_gt(max(far), 30)
    expect_equal(unname(fit$fits$corrected$coefficients), unname(stats::coef(alone)), tolerance = 1e-6)
  }
  # separation among the coded rows, complete or at one row of each code on the boundary, still stops
  middle <- stats::median(coded$x)
  coded$truth <- ifelse(coded$x > middle, "yes", "no")
  expect_error(quietly(label_regression(yes ~ x, data, coded, truth, family = "binomial", seed = 3, lambda = 0)),
               class = "newrllama4_error_degenerate_fit")
  data$x[6:7] <- middle
  quasi <- coded_at(data, c(rows, 6:7))
  quasi$truth <- c(coded$truth, "yes", "no")
  expect_error(quietly(label_regression(yes ~ x, data, quasi, truth, family = "binomial", seed = 3, lambda = 0)),
               class = "newrllama4_error_degenerate_fit")
})
