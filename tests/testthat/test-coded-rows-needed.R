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
