# A population whose labels are wrong mostly where the model doubts them: a
# sample drawn toward doubt understates its accuracy unless weighted.
doubtful_labels <- function(n = 2000, seed = 3) {
  withr::with_seed(seed, {
    sure <- stats::runif(n, 0.5, 1)
    truth <- sample(c("a", "b"), n, replace = TRUE)
    right <- stats::runif(n) < ifelse(sure > 0.75, 0.99, 0.4)
  })
  label <- ifelse(right, truth, ifelse(truth == "a", "b", "a"))
  data.frame(.label = factor(label, levels = c("a", "b")), .confidence = sure,
             .prob_a = ifelse(label == "a", sure, 1 - sure), .prob_b = ifelse(label == "a", 1 - sure, sure),
             truth = truth, speaker = rep(seq_len(n / 20), each = 20))
}

test_that("the drawn rows of a confidence sample give the population's accuracy within its interval", {
  data <- doubtful_labels()
  accuracy <- mean(data$truth == as.character(data$.label))
  covers <- vapply(1:200, function(seed) {
    coded <- review_sample(data, 300, seed = seed)
    weighted <- agreement(coded, truth, field = ".label", n_boot = 0)$metrics[1, ]
    # the same interval on the sample as if drawn uniformly: biased low
    unweighted <- agreement(coded, truth, field = ".label", n_boot = 0, weights = rep(1, 300))$metrics[1, ]
    c(weighted = weighted$lower <= accuracy && accuracy <= weighted$upper,
      unweighted = unweighted$lower <= accuracy && accuracy <= unweighted$upper)
  }, c(weighted = NA, unweighted = NA))
  expect_gte(mean(covers["weighted", ]), 0.92)
  expect_lt(mean(covers["unweighted", ]), 0.75)
})

test_that("the weighted accuracy and its standard error are survey's svymean() of the stratified design", {
  skip_if_not_installed("survey")
  coded <- review_sample(doubtful_labels(), 150, seed = 1)
  result <- agreement(coded, truth, field = ".label", seed = 1, n_boot = 200)
  coded$agree <- as.numeric(coded$truth == as.character(coded$.label))
  design <- survey::svydesign(ids = ~1, strata = ~.stratum, fpc = ~.stratum_rows, data = coded)
  reference <- survey::svymean(~agree, design)
  expect_equal(result$metrics$estimate[1], unname(stats::coef(reference)))
  expect_equal(result$design$std.error, unname(survey::SE(reference))[[1]])
  expect_identical(result$design$df, as.integer(survey::degf(design)))
  expect_true(all(result$metrics$lower <= result$metrics$estimate & result$metrics$estimate <= result$metrics$upper))
  expect_equal(sum(result$confusion_weighted), sum(1 / coded$.sample_prob))
  expect_match(paste(capture.output(print(result)), collapse = " "), "the population's figures")
  # weights alone: the same estimate, rows taken as drawn with replacement
  weights <- agreement(coded$.label, coded$truth, n_boot = 0, weights = 1 / coded$.sample_prob)
  expect_equal(weights$metrics$estimate, result$metrics$estimate)
})

test_that("lost codes are nonresponse within their stratum; clusters drawn whole are the units", {
  data <- doubtful_labels()
  coded <- review_sample(data, 150, seed = 2)
  coded$truth[1:5] <- NA
  result <- agreement(coded, truth, field = ".label", n_boot = 0)
  expect_identical(result$n_dropped, 5L)
  complete <- !is.na(coded$truth)
  answered <- table(coded$.stratum[complete])
  weights <- (coded$.stratum_rows / as.vector(answered[coded$.stratum]))[complete]
  agree <- (coded$truth == as.character(coded$.label))[complete]
  expect_equal(result$metrics$estimate[1], sum(weights * agree) / sum(weights))
  clusters <- review_sample(data, 12, cluster = "speaker", seed = 1)
  whole <- agreement(clusters, truth, field = ".label", n_boot = 0)
  expect_identical(whole$design$units, 12L)
  expect_identical(whole$design$df, 12L - whole$design$strata)
})

test_that("rows drawn without their probabilities warn; bad weights are classed errors", {
  coded <- review_sample(doubtful_labels(), 100, seed = 1)
  expect_warning(result <- agreement(coded[names(coded) != ".sample_prob"], truth, field = ".label", n_boot = 0),
                 class = "newrllama4_warning_unweighted_sample")
  expect_null(result$design)
  expect_error(agreement(coded$.label, coded$truth, weights = rep(0.5, 100)),
               class = "newrllama4_error_invalid_argument")
  expect_error(agreement(list(one = coded$.label), coded$truth, weights = rep(2, 100)),
               class = "newrllama4_error_invalid_argument")
})

test_that("rounds drawn by the learner's doubt are refused, their first round measured", {
  data <- doubtful_labels()
  first <- review_sample(data, 100, weight = "uniform", seed = 1)
  learned <- data
  attr(learned, "manifest") <- structure(list(prompt = list(calibration = "learned")), class = "newrllama4_manifest")
  both <- review_sample(learned, 60, weight = "learned", previous = first, seed = 2)
  # weighted by its round's probability alone, the second round would count as if drawn from every row
  expect_error(agreement(through_csv(both), truth, field = ".label", n_boot = 0), "first round alone",
               class = "newrllama4_error_weighted_sample")
  result <- agreement(both[both$.draw == 1, ], truth, field = ".label", n_boot = 0)
  expect_identical(result$design$units, 100L)
})
