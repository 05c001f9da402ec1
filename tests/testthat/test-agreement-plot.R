test_that("plot() draws the confusion matrix as a heat map", {
  skip_if_not_installed("ggplot2")
  result <- agreement(factor(hand_predicted, levels = c("a", "b", "c", "d")), hand_truth, n_boot = 0)
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
