test_that("each example order alone is a candidate with nothing to fit", {
  probs <- list(cbind(c(0.9, 0.2, 0.6), c(0.1, 0.8, 0.4)), cbind(c(0.3, 0.5, 0.99), c(0.7, 0.5, 0.01)))
  family <- orders_family(lapply(probs, order_log_probs))
  expect_identical(family$settings$model, c("example order 1 alone, as it is", "example order 2 alone, as it is"))
  # the coded rows and their codes change nothing: the order's own probabilities
  for (train in list(1:2, 3)) {
    expect_equal(family$predict(train, rep(1L, length(train)), 2:3), lapply(probs, function(p) p[2:3, ]))
  }
  expect_equal(family$predict(1:2, 1:2, 1, which = 2), list(probs[[2]][1, , drop = FALSE]))
  as_given <- probs[[1]]
  expect_length(learner_families(lapply(probs, order_log_probs), NULL, as_given), 3)
  expect_length(learner_families(lapply(probs[1], order_log_probs), NULL, as_given), 2)
})

test_that("with two orders the learner weighs each alone, and the estimators choose as it did", {
  data <- one_good_order(150, seed = 2)
  coded <- review_sample(data, n = 30, weight = "uniform", seed = 2)
  learned <- learn_labels(data, coded, gold, features = FALSE)
  record <- manifest(learned)$prompt
  expect_identical(record$learner, "example order 2 alone, as it is")
  expect_identical(record$learner_penalty, NA_real_)
  # the labels as they are, 3 x 4 refits, 9 penalties of the ridge, and each order alone
  expect_length(record$learner_cross_validation, 1 + 12 + 9 + 2)
  expect_match(record$learner_cross_validation[23:24], "^example order [12] alone, as it is: accuracy")
  rest <- setdiff(seq_len(150), coded$.row)
  order_2 <- mean(c("a", "b")[max.col(attr(data, "order_probs")$probs[[2]])][rest] == data$gold[rest])
  expect_gt(mean(as.character(learned$.label[rest]) == data$gold[rest]), order_2 - 0.05)
  expect_lt(mean(as.character(data$.label[rest]) == data$gold[rest]), order_2 - 0.1)
  # the estimators fit the same candidates again in the learner's folds: a coded row's prediction is its label's
  shares <- label_shares(learned, coded, gold, seed = 1)
  fit <- label_regression(a ~ 1, learned, coded, gold, seed = 1)
  expect_identical(fit$predictions[coded$.row], learned$.prob_a[coded$.row])
  expect_identical(shares$estimate[shares$estimator == "corrected" & shares$label == "a"], unname(coef(fit)[[1]]))
})
