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
