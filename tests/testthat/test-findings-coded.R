# The coded rows, checked once (findings-coded.R): rows without a label, and rows short of
# their design, which are nonresponse.

test_that("rows without a label are left out with a message saying the estimate is for the labelled rows", {
  data <- simulated_labels(800, 33)
  coded <- review_sample(data, 150, weight = "uniform", seed = 33)
  data[setdiff(1:40, coded$.row), c(".label", ".prob_yes", ".prob_no", ".confidence")] <- NA
  expect_message(fit <- label_regression(yes ~ x, data, coded, truth, seed = 1), "labelled|have them",
                 class = "newrllama4_message_rows_left_out")
  expect_lt(nobs(fit), 800)
  expect_message(shares <- label_shares(data, coded, truth, seed = 1), class = "newrllama4_message_rows_left_out")
  expect_true(all(is.finite(shares$estimate)))
})

test_that("coded rows short of the design are reweighted within their stratum; an uncoded stratum is an error", {
  data <- simulated_labels(1500, 34)
  coded <- review_sample(data, 200, weight = "confidence", seed = 34)
  design <- attr(coded, "design")
  dropped <- coded[-(1:12), ]
  attr(dropped, "design") <- design
  expect_warning(fit <- label_regression(yes ~ x, data, dropped, truth, seed = 1), "12 drawn rows",
                 class = "newrllama4_warning_nonresponse")
  answered <- table(dropped$.stratum)[design$strata$name]
  expected_prob <- as.vector(answered / design$strata$rows)[match(dropped$.stratum, design$strata$name)]
  expect_equal(fit$sample_prob, expected_prob)
  # a missing code is the same nonresponse as a dropped row
  missing_codes <- coded
  missing_codes$truth[1:12] <- NA
  expect_warning(same <- label_regression(yes ~ x, data, missing_codes, truth, seed = 1),
                 class = "newrllama4_warning_nonresponse")
  expect_equal(coef(same), coef(fit))
  # a stratum with no coded row
  gone <- coded[coded$.stratum != coded$.stratum[1], ]
  attr(gone, "design") <- design
  expect_error(suppressWarnings(label_regression(yes ~ x, data, gone, truth)), coded$.stratum[1], fixed = TRUE,
               class = "newrllama4_error_empty_stratum")
})
