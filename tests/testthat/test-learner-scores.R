test_that("equal probabilities are not weighed; a tail or a stratum's floor counts by 1 / pi", {
  expect_null(design_weights(list(prob = NULL)))
  expect_null(design_weights(list(prob = rep(0.075, 40))))
  expect_equal(design_weights(list(prob = c(1, 0.1, 0.1))), c(1, 10, 10))
  # whatever the sample's design, its coded rows count by it
  data <- speaker_rows(100, 10, 1)$data
  coded <- review_sample(data, 60, weight = "uniform", seed = 1, tail = "x")
  design <- checked_coded_rows(data, coded, rlang::quo(truth), NULL, labels = levels(data$.label))
  expect_equal(design_weights(design), 1 / coded$.sample_prob)
  expect_identical(mean_one(NULL), 1)
  expect_equal(mean_one(c(1, 3)), c(0.5, 1.5))
})

test_that("weighted scores and guard are the unweighted ones at equal weights, and follow the weights otherwise", {
  y <- c(1L, 1L, 2L, 2L, 1L, 2L, 1L, 2L)
  right <- cbind(c(0.9, 0.8, 0.2, 0.1, 0.7, 0.3, 0.6, 0.4), c(0.1, 0.2, 0.8, 0.9, 0.3, 0.7, 0.4, 0.6))
  # wrong on the last two rows
  partly <- right
  partly[7:8, ] <- right[7:8, 2:1]
  plain <- scored(list(right, partly), y)
  equal <- scored(list(right, partly), y, rep(3, 8))
  expect_equal(equal$accuracy, plain$accuracy)
  expect_equal(equal$log_loss, plain$log_loss)
  expect_equal(plain$accuracy, c(1, 0.75))
  # rows 7 and 8 stand for nine times as many rows as the others
  heavy <- scored(list(right, partly), y, c(rep(1, 6), 9, 9))
  expect_equal(heavy$accuracy, c(1, 6 / 24))
  expect_gt(heavy$log_loss[2], plain$log_loss[2])

  # the guard: equal weights decide as no weights, at any scale
  withr::with_seed(1, for (i in 1:50) {
    correct <- runif(40) < 0.8
    baseline <- runif(40) < 0.65
    expect_identical(beats(correct, baseline, rep(2.5, 40)), beats(correct, baseline))
  })
  # right on 24 rows more than the baseline, wrong on 6 it got right: beats it unweighted ...
  correct <- c(rep(TRUE, 24), rep(FALSE, 6), rep(TRUE, 10))
  baseline <- c(rep(FALSE, 24), rep(TRUE, 6), rep(TRUE, 10))
  expect_true(beats(correct, baseline))
  # ... but not where the six rows it lost stand for ten times as many
  expect_false(beats(correct, baseline, c(rep(1, 24), rep(10, 6), rep(1, 10))))
  expect_identical(lowest_loss_beating(list(correct = cbind(baseline, correct), log_loss = c(1, 0.5),
                                            weights = c(rep(1, 24), rep(10, 6), rep(1, 10))), 2L, 1L), 1L)
})

test_that("a coded row's weight is as many copies of it, in the refit's likelihood and in the ridge learner", {
  withr::local_seed(2)
  n <- 60
  y <- sample(1:2, n, replace = TRUE)
  log_probs <- list(order_log_probs(cbind(runif(n), runif(n))), order_log_probs(cbind(runif(n), runif(n))))
  copies <- c(3, 1, 2, rep(1, n - 3))
  twice <- rep(seq_len(n), copies)
  weighed <- fit_label_model(log_probs, y, row_weights = copies)
  copied <- fit_label_model(lapply(log_probs, function(l) l[twice, ]), y[twice])
  expect_equal(weighed$theta, copied$theta, tolerance = 1e-4)
  expect_gt(max(abs(weighed$theta - fit_label_model(log_probs, y)$theta)), 1e-3)

  x <- matrix(rnorm(n * 4), n) + y
  as_given <- exp(log_probs[[1]])
  family <- glmnet_family(log_probs[1], x, as_given)
  bigger_x <- rbind(x, x[twice, ])
  bigger <- glmnet_family(list(rbind(log_probs[[1]], log_probs[[1]][twice, ])), bigger_x,
                          rbind(as_given, as_given[twice, ]))
  weighed <- family$predict(seq_len(n), y, 1:10, which = 5, weights = copies)[[1]]
  copied <- bigger$predict(n + seq_along(twice), y[twice], 1:10, which = 5)[[1]]
  expect_equal(weighed, copied, tolerance = 1e-4)
  expect_gt(max(abs(weighed - family$predict(seq_len(n), y, 1:10, which = 5)[[1]])), 1e-4)
})
