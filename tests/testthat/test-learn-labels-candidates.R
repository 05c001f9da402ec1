# Two orders of two labels, a share 0.7 of them "a": order 1 is confident noise,
# order 2 tells the labels apart; their average (the labels as annotated) is
# dragged toward order 1's noise.
one_good_order <- function(n, seed) {
  withr::with_seed(seed, {
    gold <- ifelse(stats::runif(n) < 0.7, "a", "b")
    odds <- list(stats::rnorm(n, sd = 3), ifelse(gold == "a", 1.2, -1.2) + stats::rnorm(n))
  })
  order_probs <- lapply(odds, function(z) cbind(a = stats::plogis(z), b = stats::plogis(-z)))
  mean_probs <- softmax_rows((log(order_probs[[1]]) + log(order_probs[[2]])) / 2)
  data <- data.frame(id = seq_len(n), gold = gold,
                     .label = factor(c("a", "b")[max.col(mean_probs, "first")], levels = c("a", "b")),
                     .prob_a = mean_probs[, 1], .prob_b = mean_probs[, 2], .confidence = apply(mean_probs, 1, max))
  attr(data, "order_probs") <- order_probs_record(order_probs, data)
  attr(data, "manifest") <- structure(list(prompt = list(calibration = "none")), class = "newrllama4_manifest")
  data
}

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
