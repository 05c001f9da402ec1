test_that("the estimators fit the learner again in its own folds: a coded row's prediction is its learned label's", {
  rows <- learnable_rows(600)
  coded <- review_sample(rows$data, n = 150, weight = "uniform", seed = 1)
  learned <- learn_labels(rows$data, coded, gold, features = rows$x)
  fit <- label_regression(a ~ z, learned, coded, gold, seed = 2)
  # shared folds and one learner: each coded row's cross-fitted prediction is the one learn_labels() gave it
  expect_identical(fit$predictions[coded$.row], learned$.prob_a[coded$.row])
  expect_identical(unname(fit$folds[coded$.row]), rep_len(1:5, 150))
  expect_match(manifest(fit)$estimation$prediction_model, "learn_labels()'s learner", fixed = TRUE)
  expect_identical(manifest(fit)$prompt$learner, "ridge logistic on the features")
  # the other rows' predictions come from the learner of their fold, fitted without that fold's coded rows
  other <- setdiff(seq_len(600), coded$.row)
  expect_gt(max(abs(fit$predictions[other] - learned$.prob_a[other])), 1e-3)
  # narrower than the coded rows alone, and than with the zero-shot labels
  width <- function(x, term) diff(confint(x)[term, ])
  zero_shot <- label_regression(a ~ z, rows$data, coded, gold, seed = 2)
  coded_only <- estimate_table(fit, "coded_only")
  expect_lt(width(fit, "z"), 0.95 * (coded_only$conf.high - coded_only$conf.low)[coded_only$term == "z"])
  expect_lt(width(fit, "(Intercept)"), width(zero_shot, "(Intercept)"))
  shares <- label_shares(learned, coded, gold, seed = 2)
  expect_identical(shares$estimate[shares$estimator == "corrected" & shares$label == "a"], unname(coef(
    label_regression(a ~ 1, learned, coded, gold, seed = 2))[[1]]))
  # learned labels saw the codes: no covariate, as refitted ones are not
  expect_error(label_regression(z ~ a, learned, coded, gold), "the labels.*fitted to the codes",
               class = "newrllama4_error_invalid_argument")
  # a subset or a file loses what the learner learned from: a classed error, not labels taken as given
  written <- through_csv(learned)
  attr(written, "manifest") <- attr(learned, "manifest")
  expect_error(label_regression(a ~ z, written, coded, gold), "as it returned it",
               class = "newrllama4_error_invalid_argument")
  skip_if_not_installed("dplyr")
  expect_error(label_shares(dplyr::filter(learned, id > 1), coded, gold), "as it returned it",
               class = "newrllama4_error_invalid_argument")
})
