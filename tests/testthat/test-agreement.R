test_that("labels: factor levels first and in order, then the others; unused levels stay out of macro-F1", {
  truth <- factor(c("pos", "pos", "neg", "neutral", "neg"), levels = c("neg", "neutral", "pos", "mixed"))
  predicted <- c("pos", "neg", "neg", "pos", "irrelevant")
  result <- agreement(predicted, truth, n_boot = 0)
  expect_equal(rownames(result$confusion), c("neg", "neutral", "pos", "mixed", "irrelevant"))
  expect_equal(colnames(result$confusion), rownames(result$confusion))
  figures <- result$per_label
  # neg: TP 1, g 2, p 2 -> F1 2/4; neutral: never predicted -> precision NA, recall 0, F1 0;
  # pos: TP 1, g 2, p 2 -> F1 2/4; mixed: on neither side -> all NA;
  # irrelevant: never in truth -> precision 0, recall NA, F1 0
  expect_equal(figures$f1, c(0.5, 0, 0.5, NA, 0))
  expect_equal(figures$precision, c(0.5, NA, 0.5, NA, 0))
  expect_equal(figures$recall, c(0.5, 0, 0.5, NA, NA))
  # macro-F1 over the four labels some pair uses: (0.5 + 0 + 0.5 + 0) / 4
  expect_equal(estimate_of(result, "macro_f1"), 0.25)

  # truth's levels come before predicted's; labels of character vectors sort in the C locale
  both_factors <- agreement(factor("b", levels = c("b", "z")), factor("b", levels = c("c", "b")), n_boot = 0)
  expect_equal(rownames(both_factors$confusion), c("c", "b", "z"))
  expect_equal(rownames(agreement(c("b", "C", "a"), c("a", "b", "C"), n_boot = 0)$confusion), c("C", "a", "b"))
})

test_that("labels that never match raise a classed warning", {
  expect_warning(
    result <- agreement(c("positive", "negative", "negative"), c("pos", "neg", "neg"), n_boot = 0),
    "no label in common", class = "newrllama4_warning_no_common_label"
  )
  expect_equal(estimate_of(result, "accuracy"), 0)
  expect_no_warning(agreement(c("a", "b"), c("b", "b"), n_boot = 0))
})

test_that("labels typed in case or spaces of their own are refused, blank cells are missing", {
  # a CSV file of codes read by read.csv(): slips of typing, and cells left empty
  codes <- read.csv(text = "predicted,truth\nyes,yes\nno,\"no \"\nyes,Yes\nno,no\nyes,\nno,no", strip.white = FALSE)
  err <- expect_error(agreement(codes$predicted, codes$truth, n_boot = 0), class = "newrllama4_error_label_spelling")
  expect_s3_class(err, "newrllama4_error_invalid_argument")
  expect_match(conditionMessage(err), "no ", fixed = TRUE)
  expect_match(conditionMessage(err), "Yes", fixed = TRUE)
  expect_error(agreement(factor("yes", levels = c("yes", "no")), factor("yes", levels = c("Yes", "yes")), n_boot = 0),
               class = "newrllama4_error_label_spelling")
  expect_error(agreement(list(a = codes$predicted, b = codes$predicted), codes$truth, n_boot = 0),
               class = "newrllama4_error_invalid_argument")

  mended <- trimws(tolower(codes$truth))
  result <- agreement(codes$predicted, mended, n_boot = 0)
  expect_equal(result$n_missing, c(predicted = 0, truth = 1))
  expect_equal(estimate_of(result, "accuracy"), 1)
  expect_equal(rownames(result$confusion), c("no", "yes"))
  blank_level <- agreement(factor(codes$predicted), factor(mended, levels = c("yes", "no", "")), n_boot = 0)
  expect_equal(rownames(blank_level$confusion), c("yes", "no"))
  expect_equal(blank_level$n_dropped, 1)
})

test_that("pairs with a missing label are dropped and counted", {
  predicted <- c(hand_predicted, NA, NA, "a")
  truth <- c(hand_truth, "a", NA, NA)
  result <- agreement(predicted, truth, seed = 1)
  expect_equal(result$n, 10L)
  expect_equal(result$n_dropped, 3L)
  expect_equal(result$n_missing, c(predicted = 2L, truth = 2L))
  expect_equal(result[c("metrics", "confusion", "per_label")],
               agreement(hand_predicted, hand_truth, seed = 1)[c("metrics", "confusion", "per_label")])
  # on one line where the console is wide enough, wrapped within its width where not
  expect_output(withr::with_options(list(width = 200), print(result)),
                "3 pairs with a missing label left out: 2 without a prediction, 2 without a hand-coded label")
  expect_error(agreement(c(NA, "a"), c("a", NA)), "No pair", class = "newrllama4_error_invalid_argument")
  expect_error(agreement(character(), factor()), "hold no labels", class = "newrllama4_error_invalid_argument")
})

test_that("bad arguments raise classed errors that name the argument", {
  bad_calls <- list(
    predicted = quote(agreement(1:3, c("a", "b", "c"))),
    truth = quote(agreement(c("a", "b"), list("a", "b"))),
    truth = quote(agreement(c("a", "b"), c("a", "b", "c"))),
    level = quote(agreement(hand_predicted, hand_truth, level = 0)),
    level = quote(agreement(hand_predicted, hand_truth, level = 95)),
    n_boot = quote(agreement(hand_predicted, hand_truth, n_boot = -1)),
    n_boot = quote(agreement(hand_predicted, hand_truth, n_boot = 2.5)),
    seed = quote(agreement(hand_predicted, hand_truth, seed = "1")),
    seed = quote(agreement(hand_predicted, hand_truth, seed = 2^40))
  )
  for (i in seq_along(bad_calls)) {
    err <- expect_error(eval(bad_calls[[i]]), class = "newrllama4_error_invalid_argument")
    expect_equal(err$argument, names(bad_calls)[[i]])
    expect_match(conditionMessage(err), names(bad_calls)[[i]])
  }
})

test_that("print() shows the metrics, the intervals, the confusion matrix and the per-label figures", {
  result <- agreement(hand_predicted, hand_truth, seed = 1)
  expect_output(expect_invisible(print(result)), "10 pairs of labels, 3 labels")
  lines <- utils::capture.output(print(result))
  expect_match(lines, "^ Accuracy +0\\.600 +\\[0\\.[0-9]{3}, 0\\.[0-9]{3}\\]", all = FALSE)
  expect_match(lines, "Krippendorff's alpha +0\\.350", all = FALSE)
  expect_match(lines, "95% interval", all = FALSE)
  expect_match(lines, "Percentile bootstrap, 1000 resamples of the pairs, seed 1", all = FALSE)
  expect_match(lines, "rows: truth, columns: predicted", all = FALSE)
  expect_match(lines, "^ c +2 +1 +0\\.000 +0\\.000 +0\\.000", all = FALSE)
  expect_false(any(grepl("left out", lines)))
  without_intervals <- utils::capture.output(print(agreement(hand_predicted, hand_truth, n_boot = 0)))
  expect_match(without_intervals, "No bootstrap intervals", all = FALSE)
  # the accuracy keeps Wilson's interval; the other figures have none
  expect_equal(sum(grepl("\\[", without_intervals)), 1)
  expect_match(without_intervals[grepl("\\[", without_intervals)], "Accuracy")
})

test_that("texts split between their coders' codes are refused, with what to do", {
  data <- simulated_labels(300, 4)
  coded <- split_between_coders(review_sample(data, 40, weight = "uniform", seed = 4), 1:2)
  err <- expect_error(agreement(coded, truth, field = .label, n_boot = 0), class = "newrllama4_error_coded_rows")
  expect_match(conditionMessage(err), "disagreements = \"missing\"", fixed = TRUE)
  kept <- coded[!duplicated(coded$.row), ]
  expect_identical(agreement(transform(kept, .code_weight = 1), truth, field = .label, n_boot = 0)$n, 40L)
})
