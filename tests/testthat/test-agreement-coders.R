# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the
# nominal example: four coders, twelve units, missing values; alpha 0.743.
krippendorff_example <- rbind(
  A = c(1, 2, 3, 3, 2, 1, 4, 1, 2, NA, NA, NA),
  B = c(1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NA, 3),
  C = c(NA, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NA),
  D = c(1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NA)
)

test_that("alpha among any number of coders with missing codes is Krippendorff's", {
  wide <- t(krippendorff_example)
  wide[] <- as.character(wide)
  humans <- coders_alpha(wide, level = 0.95, n_boot = 0, seed = NULL)
  expect_equal(humans$krippendorff_alpha, 0.743, tolerance = 1e-3)
  expect_identical(humans$texts, 11L)
  # two coders: the same alpha as agreement() between them
  pair <- wide[, c("B", "D")]
  both <- stats::complete.cases(pair)
  expect_equal(coders_alpha(pair, 0.95, 0, NULL)$krippendorff_alpha,
               agreement(pair[both, 1], pair[both, 2], n_boot = 0)$metrics$estimate[4])
})

test_that("agreement() of read_codes(by = 'coder'): the people's alpha with its interval, the model against each", {
  fixture <- coding_fixture(n = 8, overlap = 1)
  codes <- c("yes", "no", "yes", "yes", "no", "no", "yes", "no")
  for (unit in 1:8) {
    store_write(fixture$file, unit, "ana", list(code = codes[unit]))
    store_write(fixture$file, unit, "ben", list(code = if (unit == 3) "no" else codes[unit]))
  }
  result <- agreement(read_codes(fixture$file, by = "coder"), n_boot = 200, seed = 1)
  expect_s3_class(result, "newrllama4_coder_agreement")
  expect_identical(result$humans$texts, 8L)
  expect_lt(result$humans$lower, result$humans$krippendorff_alpha)
  expect_identical(result$annotators$annotator, c("ana", "ben"))
  expect_identical(result$pairwise$agreement, 7 / 8)
  expect_output(print(result), "Krippendorff's alpha between the coders")
  expect_output(print(result), "The model against each coder")
  # the coded field named bare or as a string; one the codes do not have lists those they do
  by_coder <- read_codes(fixture$file, by = "coder")
  expect_equal(agreement(by_coder, field = code, n_boot = 200, seed = 1), result)
  expect_equal(agreement(by_coder, field = "code", n_boot = 200, seed = 1), result)
  expect_error(agreement(by_coder, field = "tone"), "The coded fields of `predicted`: code", fixed = TRUE,
               class = "newrllama4_error_missing_column")
})
