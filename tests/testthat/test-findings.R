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
