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

test_that("the feature set that carries the labels is chosen, in every fold, and its accuracy is not optimistic", {
  data <- rows_with_feature_kinds(500, informative = "middle", strength = 1.5)
  coded <- review_sample(data, n = 120, weight = "uniform", seed = 3)
  learned <- learn_labels(data, coded, gold)
  record <- manifest(learned)$prompt
  expect_identical(record$learner_feature_sets, c("last", "middle", "last + middle"))
  expect_match(record$learner, "^ridge logistic on the features: (middle|last \\+ middle)$")
  expect_identical(record$features, if (grepl("last", record$learner)) "simulated, last_token, last_token_layer_1"
                                    else "simulated, last_token_layer_1")
  # each fold chose among the sets on its training rows: none chose the noise alone
  families <- learner_families(list(order_log_probs(attr(data, "order_probs")$probs[[1]])),
                               learner_features(data, TRUE, NULL, NULL), attr(learned, "learner")$as_given)
  chosen <- vapply(attr(learned, "learner")$inner_choices, function(choice) families[[choice$family]]$settings$model[1], "")
  expect_false(any(chosen == "ridge logistic on the features: last"))
  # the cross-validated accuracy, choice of set included, is that of the rows not coded
  rest <- setdiff(seq_len(nrow(data)), coded$.row)
  accuracy <- function(labelled) mean(as.character(labelled$.label[rest]) == data$gold[rest])
  expect_equal(record$cross_validated_accuracy, accuracy(learned), tolerance = 0.06)
  noise <- suppressMessages(learn_labels(data, coded, gold, features = "last"))
  expect_gt(accuracy(learned), accuracy(noise) + 0.15)
  # the estimators choose among the same sets in the learner's folds
  fit <- label_regression(a ~ 1, learned, coded, gold, seed = 1)
  expect_identical(fit$predictions[coded$.row], learned$.prob_a[coded$.row])
})

test_that("a fold's labels come from a set chosen without its codes: rewriting them changes none of them", {
  data <- rows_with_feature_kinds(400, informative = "last", kinds = c("last", "middle", "mean"), seed = 4)
  coded <- review_sample(data, n = 100, weight = "uniform", seed = 4)
  as_given <- as.matrix(data[c(".prob_a", ".prob_b")])
  families <- learner_families(list(order_log_probs(as_given)), learner_features(data, TRUE, NULL, NULL), as_given)
  expect_length(families, 1 + 4)
  y <- match(coded$gold, c("a", "b"))
  learned <- learned_by_folds(families, coded$.row, y, as_given)
  fold <- learned$choices$folds == 1
  rewritten <- y
  rewritten[fold] <- 3L - y[fold]
  again <- learned_by_folds(families, coded$.row, rewritten, as_given)
  # the choice on all coded rows (which labels the rows not coded) sees them; the fold's own choice does not
  expect_identical(again$cross_fitted[fold, ], learned$cross_fitted[fold, ])
  expect_false(identical(again$cross_fitted[!fold, ], learned$cross_fitted[!fold, ]))
})

test_that("features naming one set fit that set alone, under the model's plain name", {
  data <- rows_with_feature_kinds(300, informative = "middle")
  coded <- review_sample(data, n = 90, weight = "uniform", seed = 5)
  record <- manifest(learn_labels(data, coded, gold, features = "middle"))$prompt
  expect_identical(record$learner, "ridge logistic on the features")
  expect_null(record$learner_feature_sets)
  expect_identical(record$features, "simulated, last_token_layer_1")
  sets <- manifest(learn_labels(data, coded, gold, features = list("last", c("middle", "last"))))$prompt
  expect_identical(sets$learner_feature_sets, c("last", "last + middle"))
  expect_error(learn_labels(data, coded, gold, features = "mean"), class = "newrllama4_error_invalid_argument")
  expect_error(learn_labels(data, coded, gold, features = list("last", 3)), class = "newrllama4_error_invalid_argument")
})

test_that("a label coded once leaves the other labels to the learner, not to the labels as they are", {
  # five labels, each told apart by a feature, the annotated labels noise; eight rows are an "e", and of the 120
  # coded rows one alone (every fold's fit learns from at most that one): on main every fit gave the labels as
  # they are
  rows <- learnable_rows(800, labels = c("a", "b", "c", "d", "e"), majority = 0.4, dim = 10, informative = 5,
                         strength = 3, seed = 2)
  keep <- which(rows$data$gold != "e" | cumsum(rows$data$gold == "e") <= 8)
  data <- subset_rows(rows$data, keep)
  x <- rows$x[keep, ]
  coded <- review_sample(data, n = 120, weight = "uniform", seed = 2)
  expect_identical(sum(coded$gold == "e"), 1L)
  learned <- suppressMessages(learn_labels(data, coded, gold, features = x))
  expect_match(manifest(learned)$prompt$learner, "^ridge logistic on the features")
  rest <- setdiff(seq_len(nrow(data)), coded$.row)
  accuracy <- function(labelled) mean(as.character(labelled$.label[rest]) == labelled$gold[rest])
  expect_gt(accuracy(learned), accuracy(data) + 0.3)
  # the label coded once keeps its add-one share of the rows learnt from, its row one of them where rows are alike
  families <- learner_families(list(order_log_probs(attr(data, "order_probs")$probs[[1]])), x,
                               attr(learned, "learner")$as_given)
  y <- match(coded$gold, c("a", "b", "c", "d", "e"))
  probs <- families[[2]]$predict(coded$.row, y, rest, which = 5)[[1]]
  expect_equal(probs[, 5], rep(2 / (nrow(coded) + 5), length(rest)))
  expect_equal(rowSums(probs), rep(1, length(rest)))
  # weighted by the design, its row counts as the fit weighs it: drawn with a quarter of the others' chance, it
  # stands for four of their rows (scaled to a mean weight of one)
  n <- nrow(coded)
  weights <- ifelse(y == 5, 4, 1)
  weighted <- families[[2]]$predict(coded$.row, y, rest, which = 5, weights = weights)[[1]]
  expect_equal(weighted[, 5], rep((4 * n / (n + 3) + 1) / (n + 5), length(rest)))
  expect_equal(rowSums(weighted), rep(1, length(rest)))
})

test_that("the learner's probabilities are glmnet's own predictions, for two labels or five, one row or many", {
  for (labels in c(2, 5)) {
    x <- withr::with_seed(labels, matrix(stats::rnorm(120 * 6), 120))
    y <- factor(withr::with_seed(labels, sample(seq_len(labels), 120, replace = TRUE)))
    fit <- quietly_glmnet(x, y, weights = withr::with_seed(1, stats::runif(120)))
    for (rows in list(1, 1:40)) {
      expect_equal(multinomial_probs(fit, x[rows, , drop = FALSE]),
                   unname(stats::predict(fit, x[rows, , drop = FALSE], s = fit$lambda, type = "response")),
                   tolerance = 1e-12, ignore_attr = TRUE)
    }
  }
})
