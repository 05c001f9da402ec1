uncoded_accuracy <- function(data, coded) {
  rest <- setdiff(seq_len(nrow(data)), coded$.row)
  mean(as.character(data$.label[rest]) == data$gold[rest])
}

test_that("features that carry the label are learned from 150 coded rows, well past the zero-shot labels", {
  rows <- learnable_rows(600)
  coded <- review_sample(rows$data, n = 150, weight = "uniform", seed = 1)
  learned <- learn_labels(rows$data, coded, gold, features = rows$x)
  # zero-shot is noise (about 0.5); the features' Bayes accuracy is about 0.8
  expect_lt(uncoded_accuracy(rows$data, coded), 0.6)
  expect_gt(uncoded_accuracy(learned, coded), uncoded_accuracy(rows$data, coded) + 0.15)
  probs <- as.matrix(learned[c(".prob_a", ".prob_b")])
  expect_equal(unname(rowSums(probs)), rep(1, 600))
  expect_identical(as.character(learned$.label), c("a", "b")[max.col(probs, "first")])
  expect_equal(learned$.confidence, apply(probs, 1, max))
  expect_identical(learned$id, rows$data$id)
  record <- manifest(learned)$prompt
  expect_identical(record$calibration, "learned")
  expect_identical(record$learner, "ridge logistic on the features")
  expect_true(record$learner_penalty %in% learner_penalties)
  expect_identical(record$features, "a matrix given")
  expect_identical(record$hand_coded_rows, 150L)
  expect_identical(record$learner_folds, stats::setNames(rep_len(1:5, 150), coded$.row))
  expect_gt(record$cross_validated_accuracy, 0.7)
  expect_match(record$learned_agreement, "^accuracy 0\\.[0-9]{3}, Cohen's kappa")
  expect_match(record$zero_shot_agreement, "^accuracy 0\\.[0-9]{3}, Cohen's kappa")
  # the labels as they are, 3 x 4 refits (one order: 2 x 4) and 9 penalties of the learner
  expect_length(record$learner_cross_validation, 1 + 8 + 9)
  expect_identical(sum(grepl("(chosen)", record$learner_cross_validation, fixed = TRUE)), 1L)
  # the coded rows' labels are cross-fitted: their accuracy against the codes, each row counted by its design (the
  # strata's floors), is the cross-validated one
  expect_equal(stats::weighted.mean(as.character(learned$.label[coded$.row]) == coded$gold, 1 / coded$.sample_prob),
               record$cross_validated_accuracy)
  expect_identical(learn_labels(rows$data, coded, gold, features = rows$x), learned)  # no draw of its own
})

test_that("a coded row's learned label does not change when its own code changes", {
  rows <- learnable_rows(300, strength = 2)
  coded <- review_sample(rows$data, n = 100, weight = "uniform", seed = 2)
  learned <- learn_labels(rows$data, coded, gold, features = rows$x)
  expect_identical(manifest(learned)$prompt$calibration, "learned")
  columns <- c(".label", ".prob_a", ".prob_b", ".confidence")
  for (i in c(1, 37, 100)) {
    flipped <- coded
    flipped$gold[i] <- setdiff(c("a", "b"), coded$gold[i])
    again <- learn_labels(rows$data, flipped, gold, features = rows$x)
    expect_identical(manifest(again)$prompt$calibration, "learned")
    expect_identical(again[coded$.row[i], columns], learned[coded$.row[i], columns])
  }
})

test_that("features of noise give the labels back, and never worse labels on average", {
  # the labels' probabilities are the truth's own, the features noise: nothing to learn
  declined <- 0
  outcomes <- vapply(1:6, function(seed) {
    rows <- learnable_rows(300, informative = 0, seed = seed)
    p <- rows$data$.prob_a
    rows$data$gold <- withr::with_seed(seed, ifelse(stats::runif(300) < p, "a", "b"))
    coded <- review_sample(rows$data, n = 60, weight = "uniform", seed = seed)
    learned <- withCallingHandlers(learn_labels(rows$data, coded, gold, features = rows$x),
                                   newrllama4_message_refit_declined = function(m) {
                                     declined <<- declined + 1
                                     invokeRestart("muffleMessage")
                                   })
    kept <- identical(manifest(learned)$prompt$learner, "none")
    if (kept) expect_identical(learned$.label, rows$data$.label)
    c(kept = kept, gain = uncoded_accuracy(learned, coded) - uncoded_accuracy(rows$data, coded))
  }, numeric(2))
  expect_gte(sum(outcomes["kept", ]), 4)
  expect_identical(declined, sum(outcomes["kept", ]))
  expect_gte(mean(outcomes["gain", ]), -0.01)
})

test_that("three labels are learned by one multinomial, and covariates can carry the signal", {
  rows <- learnable_rows(600, labels = c("a", "b", "c"), majority = 0.5, informative = 3, strength = 2, seed = 3)
  coded <- review_sample(rows$data, n = 150, weight = "uniform", seed = 3)
  learned <- learn_labels(rows$data, coded, gold, features = rows$x)
  expect_gt(uncoded_accuracy(learned, coded), uncoded_accuracy(rows$data, coded) + 0.15)
  expect_equal(unname(rowSums(as.matrix(learned[paste0(".prob_", c("a", "b", "c"))]))), rep(1, 600))
  with_covariates <- rows$data
  with_covariates$x1 <- rows$x[, 1]
  with_covariates$x2 <- rows$x[, 2]
  with_covariates$x3 <- rows$x[, 3]
  covariates_only <- learn_labels(with_covariates, coded, gold, features = FALSE, covariates = c("x1", "x2", "x3"))
  expect_identical(manifest(covariates_only)$prompt$features, "covariates x1, x2, x3")
  expect_gt(uncoded_accuracy(covariates_only, coded), uncoded_accuracy(rows$data, coded) + 0.15)
  # a covariate read as text from a file with a decimal comma had been learned from as a factor of 600 levels
  with_covariates$x1 <- format(with_covariates$x1, decimal.mark = ",")
  expect_error(learn_labels(with_covariates, coded, gold, features = FALSE, covariates = c("x1", "x2")),
               "x1 of `data` holds numbers written with a decimal comma", class = "newrllama4_error_decimal_comma")
  invalid <- function(...) expect_error(learn_labels(...), class = "newrllama4_error_invalid_argument")
  invalid(rows$data, coded, gold, features = rows$x[1:10, ])
  invalid(rows$data, coded, gold, features = "yes")
  invalid(rows$data, coded, gold, features = FALSE, covariates = "nothing")
  expect_error(learn_labels(rows$data, coded, gold), class = "newrllama4_error_no_features")
})

test_that("each field of a schema annotation gets its own learner", {
  rows <- learnable_rows(400, labels = c("pos", "neg"), informative = 1, strength = 2, seed = 4)
  flag <- learnable_rows(400, labels = c("true", "false"), informative = 1, strength = 2, seed = 5)
  data <- data.frame(id = seq_len(400), tone = factor(rows$data$.label, levels = c("pos", "neg")),
                     .prob_tone_pos = rows$data$.prob_pos, .prob_tone_neg = rows$data$.prob_neg,
                     .confidence_tone = rows$data$.confidence, flag = flag$data$.label == "true",
                     .prob_flag_true = flag$data$.prob_true, .prob_flag_false = flag$data$.prob_false,
                     .confidence_flag = flag$data$.confidence)
  attr(data, "field_order_probs") <- field_probs_record(data, c("tone", "flag"))
  # a schema annotation's manifest has no calibration of labels
  attr(data, "manifest") <- structure(list(prompt = list(schema = "tone, flag")), class = "newrllama4_manifest")
  x <- cbind(rows$x[, 1], flag$x[, 1], matrix(withr::with_seed(6, stats::rnorm(400 * 10)), 400))
  coded <- data[1:150, ]
  coded$.row <- 1:150
  coded$tone_code <- rows$data$gold[1:150]
  coded$flag_code <- flag$data$gold[1:150] == "true"
  learned <- learn_labels(data, coded, c(tone = "tone_code", flag = "flag_code"), features = x,
                          field = c("tone", "flag"))
  rest <- 151:400
  expect_gt(mean(as.character(learned$tone[rest]) == rows$data$gold[rest]),
            mean(as.character(data$tone[rest]) == rows$data$gold[rest]) + 0.15)
  expect_gt(mean(learned$flag[rest] == (flag$data$gold[rest] == "true")),
            mean(data$flag[rest] == (flag$data$gold[rest] == "true")) + 0.15)
  expect_true(is.logical(learned$flag))
  record <- manifest(learned)$prompt
  expect_identical(record[["calibration (tone)"]], "learned")
  expect_identical(record[["calibration (flag)"]], "learned")
  expect_null(record$calibration)
  one <- learn_labels(data, coded, tone_code, features = x, field = "tone")
  expect_identical(one$tone, learned$tone)
  expect_identical(one$flag, data$flag)
  expect_error(learn_labels(data, coded, tone_code, features = x, field = c("tone", "flag")),
               class = "newrllama4_error_invalid_argument")
  # a field's answered rows need their features, as the labels' do
  holed <- x
  holed[200, 3] <- NA
  expect_error(learn_labels(data, coded, tone_code, features = holed, field = "tone"), "needs its features",
               class = "newrllama4_error_invalid_argument")
  expect_error(label_regression(learned, coded, true ~ tone, truth = c(flag = "flag_code", tone = "tone_code"),
                                field = "flag"), class = "newrllama4_error_invalid_argument")
  # a learned field is corrected by its own learner, fitted again in its folds
  coded$.sample_prob <- 150 / 400
  coded <- coded[c(".row", ".sample_prob", "tone_code")]
  fit <- suppressMessages(label_regression(pos ~ 1, learned, coded, tone_code, field = "tone"))
  expect_identical(fit$predictions[1:150], learned$.prob_tone_pos[1:150])
  expect_match(manifest(fit)$estimation$prediction_model, "learn_labels()'s learner", fixed = TRUE)
})

test_that("a confident annotator's extreme probabilities, without features, give labels and no bare error", {
  # as the tiny test model answers: 'no' at 0.9999 on every row, half of them coded 'yes'. glmnet's
  # multinomial fit cannot converge against such a fit's offsets; learn_labels() fits none
  rows <- learnable_rows(40, labels = c("yes", "no"), seed = 7)
  data <- rows$data
  data$.prob_yes <- 1e-4 * (1 + rep(c(0, 0.04, 0.1, 0.12), 10))
  data$.prob_no <- 1 - data$.prob_yes
  data$.label <- factor("no", levels = c("yes", "no"))
  data$.confidence <- data$.prob_no
  attr(data, "order_probs") <- order_probs_record(list(as.matrix(data[c(".prob_yes", ".prob_no")])), data)
  data$gold <- rep(c("yes", "no"), 20)
  coded <- review_sample(data, 20, weight = "uniform", seed = 1)
  learned <- suppressMessages(learn_labels(data, coded, gold, features = FALSE))
  expect_identical(nrow(learned), 40L)
  expect_false(anyNA(learned$.label))
  expect_identical(manifest(learned)$prompt$features, "none")
  expect_error(learn_labels(data, coded, gold, features = FALSE, covariates = list("id")),
               class = "newrllama4_error_invalid_argument")
})

# Candidates whose held-out probabilities do not depend on the rows they were
# fitted to: `right` says which of the 30 coded rows each labels right (label 1
# of two) and with what probability.
fixed_family <- function(right, prob, fitted = TRUE) {
  probs <- cbind(ifelse(right, prob, 1 - prob), ifelse(right, 1 - prob, prob))
  list(settings = data.frame(model = if (fitted) "a fit" else "nothing to fit", penalty = NA_real_),
       fitted = fitted, predict = function(train, y, at, which = 1L, weights = NULL) list(probs[at, , drop = FALSE]))
}

test_that("a fit must beat the candidates with nothing to fit by a standard error, not only the labels", {
  y <- rep(1L, 30)
  as_given <- cbind(rep(c(0.6, 0.4), 15), rep(c(0.4, 0.6), 15))
  free <- fixed_family(seq_len(30) > 3, 0.6, fitted = FALSE)
  # one more row right, and surer: lower log-loss, but within a standard error of the order alone
  close_fit <- fixed_family(seq_len(30) > 2, 0.9)
  choice <- choose_setting(list(close_fit, free), seq_len(30), y, as_given)
  expect_identical(c(choice$family, choice$setting), c(2L, 1L))
  # a fit well above it is chosen; without a candidate with nothing to fit, the fit beats the labels alone
  expect_identical(choose_setting(list(fixed_family(rep(TRUE, 30), 0.9), free), seq_len(30), y, as_given)$family, 1L)
  expect_identical(choose_setting(list(close_fit), seq_len(30), y, as_given)$family, 1L)
  # an order alone that does not beat the labels as they are leaves them the baseline
  expect_identical(choose_setting(list(fixed_family(seq_len(30) > 14, 0.6, fitted = FALSE)), seq_len(30), y,
                                  as_given)$family, 0L)
})

test_that("an order that all coded rows show better is the baseline in every fold, where a fold's rows miss it", {
  y <- rep(1L, 30)
  # the labels right on the odd rows; the order on them and on rows 2 and 4 too, which lie in folds 2 and 4
  as_given <- cbind(rep(c(0.6, 0.4), 15), rep(c(0.4, 0.6), 15))
  order <- fixed_family(seq_len(30) %% 2 == 1 | seq_len(30) %in% c(2, 4), 0.6, fitted = FALSE)
  # two rows more of 30 beat the labels by a standard error; one more of the 24 outside fold 2 does not
  expect_identical(baseline_choice(list(order), seq_len(30), y, as_given), list(family = 1L, setting = 1L))
  expect_identical(baseline_choice(list(order), which(rep_len(1:5, 30) != 2), rep(1L, 24), as_given),
                   list(family = 0L, setting = 0L))
  learned <- learned_by_folds(list(order), seq_len(30), y, as_given)
  expect_true(learned$kept)
  expect_identical(learned$choices$inner_choices, rep(list(list(family = 1L, setting = 1L)), 5))
  expect_equal(learned$cross_fitted, order$predict(NULL, NULL, 1:30)[[1]])
})

test_that("labels from another tool, a plain data frame without .confidence, go from the sample to the estimates", {
  # a classifier's labels biased toward 'neg' (its log-odds 1.5 too low): the refit's offset mends them
  set.seed(11)
  x <- rnorm(400)
  truth <- ifelse(stats::runif(400) < stats::plogis(2 * x), "pos", "neg")
  prob_pos <- stats::plogis(2 * x - 1.5)
  plain <- data.frame(id = 1:400, x = x, .label = ifelse(prob_pos > 0.5, "pos", "neg"), .prob_pos = prob_pos,
                      .prob_neg = 1 - prob_pos, truth = truth)
  coded <- review_sample(plain, n = 120, weight = "uniform", seed = 1)
  expect_identical(nrow(coded), 120L)
  learned <- suppressMessages(learn_labels(plain, coded, truth, features = FALSE))
  expect_identical(manifest(learned)$prompt$calibration, "learned")
  expect_identical(levels(learned$.label), c("pos", "neg"))
  expect_gt(uncoded_accuracy(transform(learned, gold = truth), coded),
            uncoded_accuracy(transform(plain, gold = truth), coded) + 0.05)
  fit <- label_regression(pos ~ x, learned, coded, truth, seed = 1)
  expect_match(manifest(fit)$estimation$prediction, "learn_labels()'s learner", fixed = TRUE)
  expect_true(all(is.finite(fit$std.error)))
  shares <- label_shares(learned, coded, truth, seed = 1)
  expect_setequal(shares$label, c("pos", "neg"))
  # the record is built from the columns, as labels_view() builds it for every verb
  expect_identical(attr(labels_view(plain, NULL), "order_probs")$probs[[1]][, "pos"], prob_pos)
  expect_equal(labels_view(plain, NULL)$.confidence, pmax(prob_pos, 1 - prob_pos))
  # columns that do not make labels are left as they are, for the verbs' own errors
  expect_identical(labels_view(plain[c("id", ".label", ".prob_pos")], NULL), plain[c("id", ".label", ".prob_pos")])
  expect_error(learn_labels(plain[c("id", ".label", ".prob_pos")], coded, truth, features = FALSE),
               ".prob_<label>", class = "newrllama4_error_missing_column")
})

test_that("a tail drawn whole is weighed by its design: the accuracy is the rows', and the estimators fit alike", {
  rows <- learnable_rows(800, seed = 4)
  data <- rows$data
  withr::with_seed(4, data$length <- exp(rnorm(800, sd = 1.5)))
  # the longest texts' features say the opposite label: the learner gets them wrong
  longest <- order(data$length, decreasing = TRUE)[1:40]
  x <- rows$x
  x[longest, 1] <- rows$x[longest, 1] - 2 * 1.2 * (data$gold[longest] == "a") + 1.2
  coded <- review_sample(data, n = 120, weight = "uniform", seed = 4, tail = "length")
  whole <- coded$.sample_prob == 1
  expect_gt(sum(whole), 5)
  learned <- learn_labels(data, coded, gold, features = x)
  record <- manifest(learned)$prompt
  expect_match(record$learner, "ridge logistic")
  expect_match(record$learner_weights, "inclusion probability")
  right <- as.character(learned$.label[coded$.row]) == coded$gold
  # the cross-validated accuracy stands for the rows: each coded row counts by 1 / its probability
  expect_equal(record$cross_validated_accuracy, stats::weighted.mean(right, 1 / coded$.sample_prob))
  expect_gt(mean(right[!whole]) - mean(right[whole]), 0.2)
  expect_gt(record$cross_validated_accuracy - mean(right), 0.02)
  # the estimators weigh the coded rows alike in the learner's folds: each coded row's prediction is its label's
  fit <- label_regression(a ~ z, learned, coded, gold, seed = 2)
  expect_identical(fit$predictions[coded$.row], learned$.prob_a[coded$.row])
  # rows drawn with equal probabilities are not weighed, and the manifest says nothing of it
  clusters <- review_sample(data, n = 24, cluster = "id", seed = 4)
  expect_null(manifest(learn_labels(data, clusters, gold, features = x))$prompt$learner_weights)
})
