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

test_that("coders who agree on nearly every text: alpha's interval covers, and is never [1, 1]", {
  # two coders each right on 99% of 20 texts (half "a"): the percentile bootstrap covered 0.345 of 200 draws, its
  # interval [1, 1] wherever they agreed throughout; at the scale of their observed agreement's Wilson interval 0.965
  alpha <- (0.99^2 + 0.01^2 - 0.5) / 0.5
  covered <- vapply(1:150, function(seed) {
    wide <- withr::with_seed(seed, {
      truth <- sample(c("a", "b"), 20, replace = TRUE)
      code <- function() ifelse(stats::runif(20) < 0.99, truth, ifelse(truth == "a", "b", "a"))
      cbind(ana = code(), ben = code())
    })
    humans <- coders_alpha(wide, 0.95, 200, seed)
    isTRUE(humans$lower <= alpha && alpha <= humans$upper)
  }, NA)
  expect_gte(mean(covered), 0.93)
  agreeing <- coders_alpha(cbind(ana = rep(c("a", "b"), 10), ben = rep(c("a", "b"), 10)), 0.95, 200, 1)
  expect_equal(agreeing$krippendorff_alpha, 1)
  expect_lt(agreeing$lower, 0.8)
  expect_equal(agreeing$upper, 1)
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

test_that("coders of a sample drawn toward doubt: alpha and the model against each are the population's", {
  data <- doubtful_labels()
  people <- doubtful_coders(data)
  alpha <- nominal_alpha(code_counts(people))
  accuracy <- mean(people$ana == as.character(data$.label))
  design_columns <- c(".sample_prob", ".stratum", ".stratum_rows", ".stratum_drawn", ".sampling_unit")
  draws <- vapply(1:200, function(seed) {
    drawn <- review_sample(data, 200, seed = seed)
    result <- agreement(coded_by_each(drawn, people), n_boot = 200, seed = seed)
    # the same codes without the design, as before: the sample's own figures
    plain <- agreement(coded_by_each(drawn[setdiff(names(drawn), design_columns)], people), n_boot = 0)
    ana <- result$each$ana$metrics[1, ]
    c(alpha = result$humans$krippendorff_alpha, plain_alpha = plain$humans$krippendorff_alpha,
      covers = result$humans$lower <= alpha && alpha <= result$humans$upper,
      accuracy = ana$estimate, plain_accuracy = plain$each$ana$metrics$estimate[1],
      accuracy_covers = ana$lower <= accuracy && accuracy <= ana$upper)
  }, numeric(6))
  figures <- rowMeans(draws)
  # 200 draws: the means' se 0.0035 (alpha) and 0.0018 (accuracy); the sample's own figures 0.06 and 0.04 low
  expect_lt(abs(figures[["alpha"]] - alpha), 0.012)
  expect_gt(alpha - figures[["plain_alpha"]], 0.04)
  expect_gte(figures[["covers"]], 0.92)
  expect_lt(abs(figures[["accuracy"]] - accuracy), 0.007)
  expect_gt(accuracy - figures[["plain_accuracy"]], 0.025)
  expect_gte(figures[["accuracy_covers"]], 0.92)
})

test_that("read_codes(by = 'coder') of a drawn sample carries its design into alpha, with equal weights the same", {
  data <- doubtful_labels()
  people <- doubtful_coders(data)
  drawn <- review_sample(data, 40, seed = 3)
  result <- agreement(read_codes(coding_file_of(drawn, people), by = "coder"), n_boot = 100, seed = 1)
  counts <- code_counts(people)
  expect_true(result$weighted)
  expect_equal(result$humans$krippendorff_alpha,
               nominal_alpha(counts[drawn$.row, ], mean_one(1 / drawn$.sample_prob)))
  expect_equal(result$each$ana$metrics$estimate[1],
               stats::weighted.mean(people$ana[drawn$.row] == as.character(drawn$.label), 1 / drawn$.sample_prob))
  expect_equal(result$pairwise$agreement,
               stats::weighted.mean(people$ana[drawn$.row] == people$ben[drawn$.row], 1 / drawn$.sample_prob))
  expect_output(print(result), "inclusion probability")
  # inclusion probabilities all alike: Krippendorff's alpha of the texts as they are
  wide <- cbind(ana = people$ana[drawn$.row], ben = people$ben[drawn$.row])
  alike <- list(prob = rep(0.02, 40), stratum = rep("all", 40), unit = as.character(1:40))
  expect_equal(coders_alpha(wide, 0.95, 0, NULL, alike)$krippendorff_alpha,
               coders_alpha(wide, 0.95, 0, NULL)$krippendorff_alpha)
})
