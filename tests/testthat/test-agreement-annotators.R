truth <- c("pos", "pos", "pos", "neg", "neg", "neg", "neutral", "neutral", "pos", "neg")
annotators <- data.frame(
  model_a = c("pos", "pos", "neg", "neg", "neg", "pos", "neutral", NA, "pos", "neg"),
  model_b = c("pos", "neg", "neg", "neg", "pos", "pos", "neutral", "neutral", "neg", "neg"),
  coder = truth
)

test_that("each annotator gets the figures agreement() gives it alone, one row each", {
  compared <- agreement(annotators, truth, n_boot = 100, seed = 4)
  expect_s3_class(compared, "newrllama4_agreements")
  expect_identical(compared$annotators$annotator, names(annotators))
  for (annotator in names(annotators)) {
    alone <- agreement(annotators[[annotator]], truth, n_boot = 100, seed = 4)
    row <- compared$annotators[compared$annotators$annotator == annotator, ]
    expect_identical(row$n, alone$n)
    for (metric in alone$metrics$metric) {
      expected <- alone$metrics[alone$metrics$metric == metric, ]
      expect_identical(c(row[[metric]], row[[paste0(metric, "_lower")]], row[[paste0(metric, "_upper")]]),
                       c(expected$estimate, expected$lower, expected$upper))
    }
    expect_identical(compared$each[[annotator]]$confusion, alone$confusion)
  }
  expect_identical(compared$annotators$accuracy[[3]], 1)
  expect_identical(compared$annotators$n, c(9L, 10L, 10L))
})

test_that("annotators are compared pair by pair over the units both labelled", {
  compared <- agreement(as.list(annotators), truth, n_boot = 0)
  pairs <- compared$pairwise
  expect_identical(paste(pairs$annotator_1, pairs$annotator_2),
                   c("model_a model_b", "model_a coder", "model_b coder"))
  both <- !is.na(annotators$model_a)
  expect_identical(pairs$n, c(9L, 9L, 10L))
  expect_equal(pairs$agreement[[1]], mean(annotators$model_a[both] == annotators$model_b[both]))
  # alpha is symmetric: the same as agreement() of the two, either way round
  alpha <- function(a, b) {
    figures <- agreement(a, b, n_boot = 0)$metrics
    figures$estimate[figures$metric == "krippendorff_alpha"]
  }
  expect_equal(pairs$krippendorff_alpha[[1]], alpha(annotators$model_a[both], annotators$model_b[both]))
  expect_equal(pairs$krippendorff_alpha[[1]], alpha(annotators$model_b[both], annotators$model_a[both]))
  expect_equal(pairs$krippendorff_alpha[[3]], alpha(annotators$model_b, annotators$coder))
  expect_identical(nrow(agreement(list(only = truth), truth, n_boot = 0)$pairwise), 0L)
})

test_that("as.data.frame() is tidy, print() shows both tables, plot() is a ggplot of every metric", {
  compared <- agreement(annotators, truth, n_boot = 50, seed = 1)
  table <- as.data.frame(compared)
  expect_named(table, c("annotator", "n", "metric", "estimate", "lower", "upper"))
  expect_identical(nrow(table), 3L * 4L)
  out <- paste(utils::capture.output(print(compared)), collapse = "\n")
  expect_match(out, "3 annotators")
  expect_match(out, "model_b")
  expect_match(out, "Krippendorff's alpha")
  expect_match(out, "Between annotators")
  skip_if_not_installed("ggplot2")
  plot <- plot(compared)
  expect_s3_class(plot, "ggplot")
  expect_identical(levels(plot$data$metric), unname(metric_names))
  expect_no_error(ggplot2::ggplot_build(plot))
})

test_that("bad annotators are classed errors that name them", {
  bad <- function(predicted, pattern) {
    expect_error(agreement(predicted, truth), pattern, class = "newrllama4_error_invalid_argument")
  }
  bad(list(truth), "one distinct name per annotator")
  bad(list(a = truth, a = truth), "one distinct name")
  bad(list(), "one distinct name")
  bad(list(a = truth, b = truth[-1]), "Annotator \"b\"")
  bad(list(a = truth, b = seq_along(truth)), "Annotator \"b\"")
  err <- expect_error(agreement(list(a = truth, empty = rep(NA_character_, 10)), truth),
                      class = "newrllama4_error_invalid_argument")
  expect_match(conditionMessage(err), "empty")
})
