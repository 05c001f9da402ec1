# A small table worked out by hand: 10 pairs, labels a, b, c.
#
#              predicted
#   truth       a  b  c   truth totals g
#     a        4  1  1   6
#     b        0  2  0   2
#     c        1  1  0   2
#   predicted totals p:
#              5  4  1   n = 10, agreeing pairs 4 + 2 + 0 = 6
hand_gold <- c("a", "a", "a", "a", "a", "a", "b", "b", "c", "c")
hand_predicted <- c("a", "a", "a", "a", "b", "c", "b", "b", "a", "b")

estimate_of <- function(result, metric) result$metrics$estimate[result$metrics$metric == metric]

test_that("the figures of a small table equal those computed by hand", {
  result <- agreement(hand_predicted, hand_gold, n_boot = 0)
  expect_equal(unclass(result$confusion), matrix(c(4, 0, 1, 1, 2, 1, 1, 0, 0), 3,
                                                 dimnames = list(truth = c("a", "b", "c"), predicted = c("a", "b", "c"))))
  # accuracy: 6 / 10
  expect_equal(estimate_of(result, "accuracy"), 0.6)
  # F1 = 2 TP / (g + p): a 8 / 11, b 4 / 6, c 0 / 3; macro-F1 = (8/11 + 2/3 + 0) / 3 = 46/99
  expect_equal(result$per_label$f1, c(8 / 11, 2 / 3, 0))
  expect_equal(result$per_label$precision, c(4 / 5, 2 / 4, 0 / 1))
  expect_equal(result$per_label$recall, c(4 / 6, 2 / 2, 0 / 2))
  expect_equal(estimate_of(result, "macro_f1"), 46 / 99)
  # chance agreement p_e = (6 * 5 + 2 * 4 + 2 * 1) / 100 = 0.4; kappa = (0.6 - 0.4) / (1 - 0.4) = 1/3
  expect_equal(estimate_of(result, "cohen_kappa"), 1 / 3)
  # coincidence matrix = table + its transpose = [8 1 2; 1 4 1; 2 1 0]: N = 20 values,
  # 12 agreeing, label totals N_c = 11, 6, 3; sum N_c^2 = 166;
  # alpha = 1 - (N - 1) * 8 / (400 - 166) = 1 - 152/234 = 41/117
  # (the Python package krippendorff gives 0.3504273504, the same)
  expect_equal(estimate_of(result, "krippendorff_alpha"), 41 / 117)
  expect_equal(result$per_label$n_truth, c(6L, 2L, 2L))
  expect_equal(result$per_label$n_predicted, c(5L, 4L, 1L))
  expect_equal(result$n, 10L)
  expect_equal(result$n_dropped, 0L)
  expect_identical(as.data.frame(result), result$metrics)
  expect_equal(result$metrics$metric, c("accuracy", "macro_f1", "cohen_kappa", "krippendorff_alpha"))
})

test_that("perfect agreement scores 1 everywhere, with intervals of 1", {
  labels <- rep(c("x", "y", "z"), times = c(5, 3, 2))
  result <- agreement(labels, labels, seed = 1)
  expect_equal(result$metrics$estimate, rep(1, 4))
  expect_equal(result$metrics$lower, rep(1, 4))
  expect_equal(result$metrics$upper, rep(1, 4))
  expect_equal(result$per_label$f1, rep(1, 3))
})

test_that("chance-level and systematically opposed labels score as computed by hand", {
  # every cell 4: accuracy 8/16; p_e = (8 * 8 + 8 * 8) / 256 = 0.5, kappa 0;
  # F1 = 2 * 4 / (8 + 8) = 0.5 for both; coincidences 8 agreeing of N = 32 values,
  # totals 16 and 16: alpha = 1 - 31 * 16 / (1024 - 512) = 1/32, just above 0
  truth <- rep(c("yes", "no"), each = 8)
  predicted <- rep(c("yes", "no"), times = 8)
  chance <- agreement(predicted, truth, n_boot = 0)
  expect_equal(chance$metrics$estimate, c(0.5, 0.5, 0, 1 / 32))

  # yes <-> no throughout, 4 pairs: accuracy 0, p_e = 0.5, kappa = -0.5 / 0.5 = -1;
  # N = 8 values, none agreeing, totals 4 and 4: alpha = 1 - 7 * 8 / (64 - 32) = -0.75
  opposed <- agreement(c("no", "no", "yes", "yes"), c("yes", "yes", "no", "no"), n_boot = 0)
  expect_equal(opposed$metrics$estimate, c(0, 0, -1, -0.75))
})

test_that("kappa and alpha are undefined when both sides use one label throughout", {
  result <- agreement(c("a", "a", "a"), c("a", "a", "a"), seed = 1)
  expect_equal(result$metrics$estimate, c(1, 1, NA, NA))
  expect_equal(result$metrics$lower, c(1, 1, NA, NA))
  expect_output(print(result), "Cohen's kappa +undefined")
})

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
  expect_equal(rownames(agreement(c("b", "B", "a"), c("a", "b", "B"), n_boot = 0)$confusion), c("B", "a", "b"))
})

test_that("labels that never match, as in a case mismatch, raise a classed warning", {
  expect_warning(
    result <- agreement(c("Pos", "Neg", "Neg"), c("pos", "neg", "neg"), n_boot = 0),
    "no label in common", class = "newrllama4_warning_no_common_label"
  )
  expect_equal(estimate_of(result, "accuracy"), 0)
  expect_no_warning(agreement(c("a", "b"), c("b", "b"), n_boot = 0))
})

test_that("pairs with a missing label are dropped and counted", {
  predicted <- c(hand_predicted, NA, NA, "a")
  truth <- c(hand_gold, "a", NA, NA)
  result <- agreement(predicted, truth, seed = 1)
  expect_equal(result$n, 10L)
  expect_equal(result$n_dropped, 3L)
  expect_equal(result$n_missing, c(predicted = 2L, truth = 2L))
  expect_equal(result[c("metrics", "confusion", "per_label")],
               agreement(hand_predicted, hand_gold, seed = 1)[c("metrics", "confusion", "per_label")])
  expect_output(print(result), "3 pairs with a missing label left out: 2 without a prediction, 2 without a hand-coded label")
  expect_error(agreement(c(NA, "a"), c("a", NA)), "No pair", class = "newrllama4_error_invalid_argument")
  expect_error(agreement(character(), factor()), "hold no labels", class = "newrllama4_error_invalid_argument")
})

test_that("bootstrap intervals hold the estimates, follow a seed and leave the session's RNG alone", {
  result <- agreement(hand_predicted, hand_gold, seed = 42)
  expect_true(all(result$metrics$lower <= result$metrics$estimate))
  expect_true(all(result$metrics$estimate <= result$metrics$upper))
  expect_true(all(result$metrics$lower < result$metrics$upper))
  expect_identical(agreement(hand_predicted, hand_gold, seed = 42), result)
  expect_false(identical(agreement(hand_predicted, hand_gold, seed = 43)$metrics, result$metrics))

  set.seed(2024)
  before <- .Random.seed
  agreement(hand_predicted, hand_gold, seed = 42)
  expect_identical(.Random.seed, before)

  # without a seed the resamples come from the session's RNG, so set.seed() fixes them
  set.seed(7)
  first <- agreement(hand_predicted, hand_gold)
  set.seed(7)
  expect_identical(agreement(hand_predicted, hand_gold), first)

  narrower <- agreement(hand_predicted, hand_gold, level = 0.5, seed = 42)$metrics
  expect_true(all(narrower$upper - narrower$lower <= result$metrics$upper - result$metrics$lower))

  skipped <- agreement(hand_predicted, hand_gold, n_boot = 0)
  expect_true(all(is.na(c(skipped$metrics$lower, skipped$metrics$upper))))
  expect_equal(skipped$metrics$estimate, result$metrics$estimate)
})

test_that("bad arguments raise classed errors that name the argument", {
  bad_calls <- list(
    predicted = quote(agreement(1:3, c("a", "b", "c"))),
    truth = quote(agreement(c("a", "b"), list("a", "b"))),
    truth = quote(agreement(c("a", "b"), c("a", "b", "c"))),
    level = quote(agreement(hand_predicted, hand_gold, level = 0)),
    level = quote(agreement(hand_predicted, hand_gold, level = 95)),
    n_boot = quote(agreement(hand_predicted, hand_gold, n_boot = -1)),
    n_boot = quote(agreement(hand_predicted, hand_gold, n_boot = 2.5)),
    seed = quote(agreement(hand_predicted, hand_gold, seed = "1")),
    seed = quote(agreement(hand_predicted, hand_gold, seed = 2^40))
  )
  for (i in seq_along(bad_calls)) {
    err <- expect_error(eval(bad_calls[[i]]), class = "newrllama4_error_invalid_argument")
    expect_equal(err$argument, names(bad_calls)[[i]])
    expect_match(conditionMessage(err), names(bad_calls)[[i]])
  }
})

test_that("print() shows the metrics, the intervals, the confusion matrix and the per-label figures", {
  result <- agreement(hand_predicted, hand_gold, seed = 1)
  expect_output(expect_invisible(print(result)), "10 pairs of labels, 3 labels")
  lines <- utils::capture.output(print(result))
  expect_match(lines, "^ Accuracy +0\\.600 +\\[0\\.[0-9]{3}, 0\\.[0-9]{3}\\]", all = FALSE)
  expect_match(lines, "Krippendorff's alpha +0\\.350", all = FALSE)
  expect_match(lines, "95% interval", all = FALSE)
  expect_match(lines, "Percentile bootstrap, 1000 resamples of the pairs, seed 1", all = FALSE)
  expect_match(lines, "rows: truth, columns: predicted", all = FALSE)
  expect_match(lines, "^ c +2 +1 +0\\.000 +0\\.000 +0\\.000", all = FALSE)
  expect_false(any(grepl("left out", lines)))
  without_intervals <- utils::capture.output(print(agreement(hand_predicted, hand_gold, n_boot = 0)))
  expect_match(without_intervals, "No bootstrap intervals", all = FALSE)
  expect_false(any(grepl("interval$|\\[", without_intervals)))
})

test_that("plot() draws the confusion matrix as a heat map", {
  skip_if_not_installed("ggplot2")
  result <- agreement(factor(hand_predicted, levels = c("a", "b", "c", "d")), hand_gold, n_boot = 0)
  heat_map <- plot(result)
  expect_s3_class(heat_map, "ggplot")
  tiles <- heat_map$data
  expect_equal(nrow(tiles), 16)
  expect_equal(tiles$n[tiles$truth == "a" & tiles$predicted == "a"], 4)
  # a tile's colour is its share of the hand-coded label's row; a label with no truth pair has none
  expect_equal(tiles$share[tiles$truth == "a" & tiles$predicted == "a"], 4 / 6)
  expect_true(all(is.na(tiles$share[tiles$truth == "d"])))
  expect_match(heat_map$labels$title, "Accuracy 0.60, Cohen's kappa 0.33 \\(10 pairs\\)")
  pdf(NULL)
  on.exit(dev.off())
  expect_no_error(print(heat_map))
})
