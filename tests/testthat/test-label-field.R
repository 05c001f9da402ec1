# A schema field stands in for labels: every function that takes `field` gives on
# a field exactly what it gives on the same answers annotated as labels.

one_order <- function(labelled) {
  attr(labelled, "order_probs") <- order_probs_record(list(as.matrix(labelled[c(".prob_yes", ".prob_no")])),
                                                      labelled)
  attr(labelled, "manifest") <- structure(list(prompt = list(schema = "{}")), class = "newrllama4_manifest")
  labelled
}

test_that("a field's view has the labels' columns, and only a field with probabilities has one", {
  labelled <- one_order(simulated_labels(50, seed = 1))
  data <- as_field(labelled, "tone")
  view <- labels_view(data, "tone")
  expect_identical(view$.label, labelled$.label)
  expect_identical(view[c(".prob_yes", ".prob_no", ".confidence")], labelled[c(".prob_yes", ".prob_no", ".confidence")])
  expect_identical(attr(view, "order_probs")$probs[[1]][, "yes"], attr(labelled, "order_probs")$probs[[1]][, 1])
  expect_identical(labels_view(data, NULL), data)

  boolean <- labels_view(as_field(labelled, "negative", boolean = TRUE), "negative")
  expect_identical(levels(boolean$.label), c("true", "false"))
  expect_identical(as.character(boolean$.label) == "true", as.character(labelled$.label) == "yes")

  data$count <- seq_len(nrow(data))
  expect_error(labels_view(data, "count"), class = "newrllama4_error_missing_column")
  expect_error(labels_view(data, "nothing"), class = "newrllama4_error_invalid_argument")
  data$.prob_tone_no <- NULL
  expect_error(labels_view(data, "tone"), ".prob_tone_no", class = "newrllama4_error_missing_column")
})

test_that("review_sample() draws a field's rows as it draws labels', and returns the data's own rows", {
  labelled <- one_order(simulated_labels(400, seed = 2))
  data <- as_field(labelled, "negative", boolean = TRUE)
  for (weight in c("confidence", "uniform")) {
    by_labels <- review_sample(labelled, n = 40, weight = weight, seed = 3)
    by_field <- review_sample(data, n = 40, weight = weight, seed = 3, field = "negative")
    expect_identical(by_field$.row, by_labels$.row)
    expect_identical(by_field$.sample_prob, by_labels$.sample_prob)
    expect_identical(sub("^yes", "true", sub("^no", "false", by_labels$.stratum)), by_field$.stratum)
    expect_true(all(c("negative", ".prob_negative_true") %in% names(by_field)))
    expect_false(".label" %in% names(by_field))
    expect_identical(attr(by_field, "design")$field, "negative")
  }
  more <- review_sample(data, n = 10, weight = "uniform", seed = 4, previous = by_field, field = "negative")
  expect_identical(nrow(more), 50L)
  expect_error(review_sample(data, n = 5), class = "newrllama4_error_invalid_argument")
})

test_that("agreement() compares a field's column with codes, logical codes matching a boolean's values", {
  labelled <- one_order(simulated_labels(200, seed = 5))
  data <- as_field(labelled, "negative", boolean = TRUE)
  data$coded_negative <- data$truth == "yes"
  expected <- agreement(factor(ifelse(labelled$.label == "yes", "true", "false"), levels = c("true", "false")),
                        ifelse(data$coded_negative, "true", "false"), n_boot = 50, seed = 1)
  expect_equal(agreement(data, coded_negative, field = "negative", n_boot = 50, seed = 1), expected)
  codes <- data$coded_negative
  expect_equal(agreement(data, codes, field = "negative", n_boot = 50, seed = 1), expected)
  expect_equal(agreement(labelled, truth, field = ".label", n_boot = 0)$metrics,
               agreement(labelled$.label, labelled$truth, n_boot = 0)$metrics)
  expect_error(agreement(data$negative, codes, field = "negative"), class = "newrllama4_error_invalid_argument")
})

test_that("label_regression() and label_shares() on a field equal them on the same answers as labels", {
  labelled <- one_order(simulated_labels(1500, seed = 6))
  coded <- review_sample(labelled, n = 200, weight = "confidence", seed = 7)
  enum <- as_field(labelled, "tone")
  boolean <- as_field(labelled, "negative", boolean = TRUE)
  boolean_coded <- review_sample(boolean, n = 200, weight = "confidence", seed = 7, field = "negative")
  boolean_coded$coded_negative <- boolean_coded$truth == "yes"

  expected <- label_regression(yes ~ x, labelled, coded, truth, family = "binomial", seed = 1)
  on_enum <- label_regression(yes ~ x, enum, review_sample(enum, n = 200, seed = 7, field = "tone"), truth,
                              family = "binomial", seed = 1, field = "tone")
  on_boolean <- label_regression(negative ~ x, boolean, boolean_coded, coded_negative, family = "binomial",
                                 seed = 1, field = "negative")
  expect_equal(coef(on_enum), coef(expected))
  expect_equal(vcov(on_enum), vcov(expected))
  expect_equal(coef(on_boolean), coef(expected))
  expect_equal(confint(on_boolean), confint(expected))

  shares <- label_shares(labelled, coded, truth, by = "group", seed = 1)
  field_shares <- label_shares(boolean, boolean_coded, coded_negative, by = "group", seed = 1, field = "negative")
  expect_identical(field_shares$label, ifelse(shares$label == "yes", "true", "false"))
  expect_equal(field_shares$estimate, shares$estimate)
  expect_equal(field_shares$conf.low, shares$conf.low)
})

test_that("recalibrate_labels() refits a field as it refits labels, and findings cross-fit the field's refit", {
  labelled <- one_order(simulated_labels(600, seed = 8))
  # a model that leans toward "yes": an offset the refit can remove
  leaning <- stats::plogis(stats::qlogis(labelled$.prob_yes) + 1.5)
  labelled$.prob_yes <- leaning
  labelled$.prob_no <- 1 - leaning
  labelled$.label <- factor(ifelse(leaning > 0.5, "yes", "no"), levels = c("yes", "no"))
  labelled$.confidence <- pmax(leaning, 1 - leaning)
  labelled <- one_order(labelled)
  coded <- review_sample(labelled, n = 120, weight = "uniform", seed = 9)
  data <- as_field(labelled, "tone")
  data$other <- labelled$.label  # another field, left alone

  expected <- suppressWarnings(recalibrate_labels(labelled, coded, truth))
  refitted <- suppressWarnings(recalibrate_labels(data, coded, truth, field = "tone"))
  expect_identical(refitted$tone, expected$.label)
  expect_identical(refitted$.prob_tone_yes, expected$.prob_yes)
  expect_identical(refitted$.confidence_tone, expected$.confidence)
  expect_identical(refitted$other, data$other)
  record <- manifest(refitted)$prompt
  expect_identical(record[["calibration (tone)"]], "hand-coded")
  expect_identical(record[["refit_model (tone)"]], manifest(expected)$prompt$refit_model)
  expect_false(identical(record[["refit_model (tone)"]], "none"))
  expect_null(record[["calibration"]])

  # label_regression() refits the field's refit fold by fold, as it does the labels'
  expect_equal(coef(label_regression(yes ~ x, refitted, coded, truth, seed = 1, field = "tone")),
               coef(label_regression(yes ~ x, expected, coded, truth, seed = 1)))
  # a refit field is refitted again from its refitted probabilities, not from those annotated
  again <- suppressMessages(suppressWarnings(recalibrate_labels(refitted, coded, truth, field = "tone")))
  as_they_are <- manifest(again)$prompt[["refit_cross_validation (tone)"]][[1]]
  accuracy <- function(labels) {
    sprintf("accuracy %.3f", stats::weighted.mean(as.character(labels[coded$.row]) == coded$truth,
                                                  1 / coded$.sample_prob))
  }
  expect_false(identical(accuracy(refitted$tone), accuracy(data$tone)))
  expect_match(as_they_are, paste0("^none \\(the labels as they are\\): ", accuracy(refitted$tone)))
})

test_that("the documented field workflow runs: draw from the field, refit it, then regress on it", {
  labelled <- one_order(simulated_labels(600, seed = 8))
  leaning <- stats::plogis(stats::qlogis(labelled$.prob_yes) + 1.5)  # a lean the refit removes
  labelled$.prob_yes <- leaning
  labelled$.prob_no <- 1 - leaning
  labelled$.label <- factor(ifelse(leaning > 0.5, "yes", "no"), levels = c("yes", "no"))
  labelled$.confidence <- pmax(leaning, 1 - leaning)
  boolean <- as_field(one_order(labelled), "negative", boolean = TRUE)
  coded <- review_sample(boolean, n = 120, weight = "uniform", seed = 9, field = "negative")
  # codes read back from a file: "TRUE" and "FALSE", where the field's values are "true" and "false"
  coded$code <- ifelse(coded$truth == "yes", "TRUE", "FALSE")
  refitted <- suppressWarnings(recalibrate_labels(boolean, coded, code, field = "negative"))
  expect_identical(manifest(refitted)$prompt[["calibration (negative)"]], "hand-coded")
  expect_false(identical(refitted$negative, boolean$negative))
  # before: a false "do not sort" (the refit changed the field's column), then 'vmmin' not finite in the
  # fold-by-fold refit (codes "TRUE" matched no value)
  fit <- label_regression(negative ~ x, refitted, coded, code, seed = 1, field = "negative")
  expect_match(fit$prediction_model, "refit")
  expect_true(all(is.finite(confint(fit))))
  shares <- label_shares(refitted, coded, code, seed = 1, field = "negative")
  expect_setequal(shares$label, c("true", "false"))
})

test_that("codes read from a file: a slip of case or spaces is refused with its fix, an empty cell is not coded", {
  data <- simulated_labels(600, seed = 2)
  coded <- review_sample(data, 100, weight = "uniform", seed = 2)
  path <- withr::local_tempfile(fileext = ".csv")
  typed <- coded
  typed$truth[1:3] <- c("Yes", "no ", "")
  utils::write.csv(typed, path, row.names = FALSE)
  back <- utils::read.csv(path, strip.white = FALSE)
  for (fit in list(function(codes) label_shares(data, codes, truth, seed = 2),
                   function(codes) label_regression(yes ~ x, data, codes, truth, seed = 2),
                   function(codes) learn_labels(data, codes, truth, features = FALSE))) {
    err <- expect_error(fit(back), class = "newrllama4_error_coded_truth")
    expect_match(conditionMessage(err), "differ from a label only in case or spaces", fixed = TRUE)
  }
  # the empty cell, read as "", is the row not coded, as NA is (readr reads it so)
  back$truth[1:2] <- coded$truth[1:2]
  missing <- coded
  missing$truth[3] <- NA
  expect_warning(blank <- label_shares(data, back, truth, seed = 2), class = "newrllama4_warning_nonresponse")
  expect_warning(as_na <- label_shares(data, missing, truth, seed = 2), class = "newrllama4_warning_nonresponse")
  expect_identical(blank$estimate, as_na$estimate)
  expect_identical(blank$conf.low, as_na$conf.low)
})
