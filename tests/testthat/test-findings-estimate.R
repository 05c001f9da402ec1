# The estimate of the corrected fit (findings-estimate.R): ordinary data that used to end
# label_regression() in an unclassed error now gives a classed condition that says what to do.

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
