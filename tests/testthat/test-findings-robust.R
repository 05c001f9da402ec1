# Ordinary data that used to end label_regression() or label_shares() in an
# unclassed error or a wrong answer (issue 39): each gives a classed condition
# that says what to do, or a valid estimate with a warning.

# `coded` rows of `data` drawn uniformly, with no design attribute.
coded_at <- function(data, rows, prob = length(rows) / nrow(data)) {
  coded <- data[rows, , drop = FALSE]
  coded$.row <- rows
  coded$.sample_prob <- prob
  coded
}

test_that("a level or group with no coded rows is a classed error naming it; with few, a warning", {
  data <- simulated_labels(1000, 31)
  data$party <- ifelse(seq_len(1000) <= 20, "small", data$group)
  # before: "system is exactly singular" from LAPACK, in 17 of 200 such draws
  coded <- coded_at(data, seq(21, 1000, by = 5))
  expect_error(label_regression(yes ~ x + party, data, coded, truth), "partysmall",
               class = "newrllama4_error_too_few_coded")
  expect_error(label_shares(data, coded, truth, by = "party", seed = 1), "small",
               class = "newrllama4_error_too_few_coded")
  few <- coded_at(data, c(1:3, seq(21, 1000, by = 5)))
  expect_warning(fit <- label_regression(yes ~ x + party, data, few, truth, seed = 1), "partysmall",
                 class = "newrllama4_warning_few_coded")
  expect_true(all(is.finite(coef(fit))))
})

test_that("a degenerate logistic cell is a classed error; a separated naive fit is left out with a warning", {
  data <- simulated_labels(1000, 32)
  data$cell <- ifelse(seq_len(1000) <= 50, "rare", "common")
  # the rare cell: the model all but sure of "no", and its 10 coded rows (weight 10 each, 100 for 50 rows) all "no":
  # the corrected share there is 0.01 - 0.01 * 100 / 50 < 0
  data$.prob_yes[1:50] <- 0.01
  data$.prob_no <- 1 - data$.prob_yes
  data$truth[1:50] <- "no"
  coded <- coded_at(data, c(seq(1, 50, by = 5), seq(51, 1000, by = 10)), prob = 0.1)
  expect_error(label_regression(yes ~ cell, data, coded, truth, family = "binomial"),
               class = "newrllama4_error_degenerate_fit")
  # the model's labels all "yes" in the cell: the naive fit separates, the corrected one stands
  data$.prob_yes[1:50] <- 0.6
  data$.prob_no <- 1 - data$.prob_yes
  data$.label[1:50] <- "yes"
  data$truth[1:50] <- rep(c("yes", "no"), 25)
  coded <- coded_at(data, coded$.row, prob = 0.1)
  expect_warning(fit <- label_regression(yes ~ cell, data, coded, truth, family = "binomial"), "naive",
                 class = "newrllama4_warning_degenerate_fit")
  expect_true(all(is.finite(coef(fit))))
  expect_true(all(is.na(fit$fits$naive$coefficients)))
  expect_output(print(fit), "corrected")
})

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

test_that("share intervals stay within [0, 1]", {
  data <- simulated_labels(2000, 35)
  data$rare <- ifelse(seq_len(2000) <= 60, "small", "large")
  data$truth[1:60] <- "no"
  # 4 coded rows in the small group at weight 30: its share's interval, unclipped, left [0, 1] below
  coded <- coded_at(data, c(1, 16, 31, 46, seq(61, 2000, by = 30)), prob = 1 / 30)
  shares <- suppressWarnings(label_shares(data, coded, truth, by = "rare", seed = 1))
  estimate <- attr(shares, "estimates")$yes
  unclipped <- estimate_table(estimate, "corrected")
  expect_true(any(unclipped$conf.low < 0 | unclipped$conf.high > 1))
  expect_true(all(shares$conf.low >= 0 & shares$conf.high <= 1 & shares$estimate >= 0 & shares$estimate <= 1))
})

test_that("label_shares() cross-fits every label in the same folds", {
  data <- simulated_labels(600, 36)
  coded <- review_sample(data, 100, weight = "uniform", seed = 36)
  shares <- label_shares(data, coded, truth, prediction = "fit")
  folds <- lapply(attr(shares, "estimates"), `[[`, "folds")
  expect_identical(folds$yes, folds$no)
})
