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
  # narrower than the coded rows alone (0.97x, 0.93x before the learner's dependence on the coded rows was
  # counted: learner_dependence()), and than with the zero-shot labels
  width <- function(x, term) diff(confint(x)[term, ])
  zero_shot <- label_regression(a ~ z, rows$data, coded, gold, seed = 2)
  coded_only <- estimate_table(fit, "coded_only")
  expect_lt(width(fit, "z"), (coded_only$conf.high - coded_only$conf.low)[coded_only$term == "z"])
  expect_lt(width(fit, "(Intercept)"), width(zero_shot, "(Intercept)"))
  shares <- label_shares(learned, coded, gold, seed = 2)
  expect_identical(shares$estimate[shares$estimator == "corrected" & shares$label == "a"], unname(coef(
    label_regression(a ~ 1, learned, coded, gold, seed = 2))[[1]]))
  # learned labels saw the codes: no covariate, as refitted ones are not
  expect_error(label_regression(z ~ a, learned, coded, gold), "a was fitted to the codes.*cannot be a covariate",
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

test_that("a fold's prediction never depends on the codes of the rows it predicts, though the baseline saw them", {
  # 30 coded rows of two labels; the labels right on the odd rows (a confidence of 0.6), the second order on rows
  # 2 and 4 too (folds 2 and 4): all 30 codes show that order better, the 24 outside fold 2 do not
  y <- rep(c(1L, 2L, 2L, 1L, 2L, 1L), 5)
  probs_right_at <- function(right) {
    p_true <- ifelse(right, 0.6, 0.4)
    cbind(ifelse(y == 1, p_true, 1 - p_true), ifelse(y == 2, p_true, 1 - p_true))
  }
  as_given <- probs_right_at(seq_len(30) %% 2 == 1)
  order_probs <- list(as_given, probs_right_at(seq_len(30) %% 2 == 1 | seq_len(30) %in% c(2, 4)))
  data <- data.frame(.label = factor(c("a", "b")[max.col(as_given)], levels = c("a", "b")), .prob_a = as_given[, 1],
                     .prob_b = as_given[, 2], .confidence = apply(as_given, 1, max))
  attr(data, "order_probs") <- order_probs_record(order_probs, data)
  families <- learner_families(lapply(order_probs, order_log_probs), NULL, as_given)
  learned_from <- function(codes) {
    learned <- learned_by_folds(families, seq_len(30), codes, as_given)
    attr(data, "learner") <- c(list(families = "learner", features = FALSE, covariates = NULL, as_given = as_given,
                                    coded_rows = seq_len(30)), learned$choices)
    data
  }
  # row 2's code decides the baseline chosen on all coded rows (the order, or the labels as they are) ...
  flipped <- replace(y, 2, 3L - y[2])
  expect_identical(attr(learned_from(y), "learner")$baseline$family, 3L)
  expect_identical(attr(learned_from(flipped), "learner")$baseline$family, 0L)
  # ... but not the estimators' prediction of fold 2, fitted and chosen on the other folds' rows alone
  outside_fold_2 <- which(rep_len(1:5, 30) != 2)
  predicted <- lapply(list(y, flipped), function(codes) {
    learner_of(learned_from(codes), NULL)(outside_fold_2, y[outside_fold_2])
  })
  expect_identical(predicted[[1]], predicted[[2]])
  expect_identical(structure(predicted[[1]], choice = NULL), as_given)
})

test_that("the guard chooses between two valid estimates: the labels as annotated, or the learner in each fold", {
  # features of noise: the guard declines, and the estimators correct the labels as annotated, which no code made
  rows <- learnable_rows(300, informative = 0, seed = 2)
  rows$data$gold <- withr::with_seed(2, ifelse(stats::runif(300) < rows$data$.prob_a, "a", "b"))
  coded <- review_sample(rows$data, n = 60, weight = "uniform", seed = 2)
  expect_message(declined <- learn_labels(rows$data, coded, gold, features = rows$x),
                 class = "newrllama4_message_refit_declined")
  expect_identical(manifest(declined)$prompt$learner, "none")
  zero_shot <- label_shares(rows$data, coded, gold, seed = 1)
  expect_identical(label_shares(declined, coded, gold, seed = 1)[names(zero_shot)], zero_shot[names(zero_shot)])
  # kept: each fold's learner is chosen again without the fold's codes, so no coded row's prediction moves with its own
  rows <- learnable_rows(300, seed = 2)
  coded <- review_sample(rows$data, n = 100, weight = "uniform", seed = 2)
  kept <- learn_labels(rows$data, coded, gold, features = rows$x)
  expect_identical(manifest(kept)$prompt$learner, "ridge logistic on the features")
  fit <- label_regression(a ~ 1, kept, coded, gold, seed = 1)
  flipped <- coded
  flipped$gold[7] <- setdiff(c("a", "b"), coded$gold[7])
  expect_identical(label_regression(a ~ 1, kept, flipped, gold, seed = 1)$predictions[coded$.row[7]],
                   fit$predictions[coded$.row[7]])
})

test_that("a text whose coders split is learned from each code, and the estimators learn it alike", {
  rows <- learnable_rows(600, seed = 5)
  coded <- review_sample(rows$data, n = 150, weight = "uniform", seed = 5)
  disputed <- seq(1, 150, by = 5)
  other <- coded[disputed, ]
  other$gold <- ifelse(other$gold == "a", "b", "a")
  coded$.code_weight <- 1
  coded$.code_weight[disputed] <- 0.5
  other$.code_weight <- 0.5
  both <- rbind(coded, other)
  both <- both[order(both$.row), ]
  learned <- learn_labels(rows$data, both, gold, features = rows$x)
  record <- manifest(learned)$prompt
  expect_match(record$learner, "ridge logistic")
  expect_identical(record$hand_coded_rows, 150L)
  expect_identical(names(record$learner_folds), as.character(coded$.row))
  # a split text is half right whatever its label: the accuracy is the expected agreement with its coders
  right <- as.numeric(as.character(learned$.label[coded$.row]) == coded$gold)
  right[disputed] <- 0.5
  expect_equal(record$cross_validated_accuracy, stats::weighted.mean(right, 1 / coded$.sample_prob))
  # learned from both codes, not the first alone
  first_only <- learn_labels(rows$data, coded[names(coded) != ".code_weight"], gold, features = rows$x)
  expect_gt(max(abs(learned$.prob_a - first_only$.prob_a)), 1e-3)
  # the estimators learn each fold from both codes too: a coded text's prediction is its learned label's
  fit <- label_regression(a ~ z, learned, both, gold, seed = 2)
  expect_identical(fit$predictions[coded$.row], learned$.prob_a[coded$.row])
  shares <- label_shares(learned, both, gold, seed = 2)
  expect_true(all(is.finite(shares$conf.low)))
})

test_that("folds on rounds drawn since the learner choose each setting once, again where what they read changes", {
  rows <- learnable_rows(600)
  first <- review_sample(rows$data, n = 80, weight = "uniform", seed = 1)
  learned <- suppressMessages(learn_labels(rows$data, first, gold, features = rows$x))
  both <- review_sample(learned, n = 60, weight = "learned", previous = first, seed = 2)
  choices <- 0
  choose <- choose_setting
  local_package_binding("choose_setting", function(...) {
    choices <<- choices + 1
    choose(...)
  })
  rm(list = ls(fold_choices), envir = fold_choices)
  # the learner's own folds do not hold the second round: each of the five folds chooses, once for both labels
  shares <- label_shares(learned, both, gold, seed = 3)
  expect_identical(choices, 5)
  # a slope on the same rounds and folds reads the same choices
  share_of_a <- label_regression(a ~ 1, learned, both, gold, seed = 3)
  expect_identical(choices, 5)
  expect_equal(unname(coef(share_of_a)[[1]]), shares$estimate[shares$estimator == "corrected" & shares$label == "a"])
  # one code changed: the four folds that learn from it choose again, on what they now read
  recoded <- both
  recoded$gold[1] <- setdiff(c("a", "b"), recoded$gold[1])
  label_shares(learned, recoded, gold, seed = 3)
  expect_identical(choices, 9)
})
