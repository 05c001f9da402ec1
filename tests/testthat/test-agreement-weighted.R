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
  expect_error(agreement(list(one = coded$.label), coded$truth, weights = rep(0.5, 100)),
               class = "newrllama4_error_invalid_argument")
})

test_that("several annotators share the weights: each one's figures and their pairs are the population's", {
  coded <- review_sample(doubtful_labels(), 150, seed = 4)
  flipped <- ifelse(seq_len(150) %% 7 == 0, ifelse(coded$.label == "a", "b", "a"), as.character(coded$.label))
  weights <- 1 / coded$.sample_prob
  both <- agreement(list(model = coded$.label, other = flipped), coded$truth, weights = weights, n_boot = 100, seed = 1)
  expect_equal(both$each$other, agreement(flipped, coded$truth, weights = weights, n_boot = 100, seed = 1))
  expect_equal(both$pairwise$agreement, stats::weighted.mean(as.character(coded$.label) == flipped, weights))
  expect_output(print(both), "units within their strata")
})

test_that("rounds drawn by doubt are weighed as the estimators combine them, each round's variance its own", {
  skip_if_not_installed("survey")
  drawn <- through_csv(drawn_in_rounds(doubtful_labels(), 100, c(60, 60), seed = 1))
  result <- agreement(drawn, truth, field = ".label", seed = 1, n_boot = 200)
  # round r's rows weigh w_r / pi + the later rounds' w, w_r its share of the rows drawn
  share <- as.vector(table(drawn$.draw)) / nrow(drawn)
  later <- rev(cumsum(rev(share))) - share
  weight <- share[drawn$.draw] / drawn$.sample_prob + later[drawn$.draw]
  agree <- as.numeric(drawn$truth == as.character(drawn$.label))
  accuracy <- sum(weight * agree) / sum(weight)
  expect_equal(result$metrics$estimate[1], accuracy)
  expect_equal(sum(result$confusion_weighted), sum(weight))
  # each round's stratified variance (survey's, its own strata and probabilities), its terms times its weight
  variances <- vapply(1:3, function(r) {
    round <- drawn[drawn$.draw == r, ]
    round$term <- share[r] * (agree[drawn$.draw == r] - accuracy) / sum(weight)
    design <- survey::svydesign(ids = ~1, strata = ~.stratum, fpc = ~.stratum_rows, data = round)
    unname(survey::SE(survey::svytotal(~term, design)))^2
  }, 0)
  expect_equal(result$design$std.error, sqrt(sum(variances)))
  expect_identical(result$design$units, 220L)
  expect_identical(result$design$rounds, 3L)
  expect_identical(result$design$df, 220L - length(unique(drawn$.stratum)))
  expect_true(all(result$metrics$lower <= result$metrics$estimate & result$metrics$estimate <= result$metrics$upper))
  expect_match(paste(capture.output(print(result)), collapse = " "), "combine the 3 rounds drawn by doubt")
})

test_that("two rounds drawn by doubt cover the population's accuracy, their errors as wide as their se", {
  data <- doubtful_labels()
  accuracy <- mean(data$truth == as.character(data$.label))
  draws <- vapply(1:400, function(seed) {
    drawn <- drawn_in_rounds(data, 40, 40, seed)
    weighted <- agreement(drawn, truth, field = ".label", n_boot = 0)
    figures <- weighted$metrics[1, ]
    c(covers = figures$lower <= accuracy && accuracy <= figures$upper,
      z = (figures$estimate - accuracy) / weighted$design$std.error)
  }, c(covers = 0, z = 0))
  # 400 draws: coverage's se 0.011; the errors' spread over their standard errors within 0.15 of 1
  expect_gte(mean(draws["covers", ]), 0.93)
  expect_lte(mean(draws["covers", ]), 0.98)
  expect_lt(abs(sqrt(mean(draws["z", ]^2)) - 1), 0.15)
  # without the rounds' probabilities a round drawn by doubt cannot be weighed: the sample's own figures, warned
  drawn <- drawn_in_rounds(data, 40, 40, seed = 1)
  expect_warning(agreement(drawn[names(drawn) != ".sample_prob"], truth, field = ".label", n_boot = 0),
                 class = "newrllama4_warning_unweighted_sample")
})

test_that("pairs given weights are drawn with replacement: their order does not move the intervals", {
  withr::local_seed(1)
  truth <- sample(c("a", "b"), 200, replace = TRUE)
  predicted <- ifelse(stats::runif(200) < 0.8, truth, ifelse(truth == "a", "b", "a"))
  weights <- c(1, 1.2, rep(3, 198))
  first_one <- agreement(predicted, truth, weights = weights, n_boot = 500, seed = 1)
  # the first pair's probability stood for all of them: a weight of 1 first gave a variance of 0 (intervals of
  # zero width, the accuracy's Wilson's at the n pairs), 1.2 first a finite-population correction of 0.17
  reordered <- c(3:200, 1:2)
  last_one <- agreement(predicted[reordered], truth[reordered], weights = weights[reordered], n_boot = 500, seed = 1)
  expect_equal(first_one$design$std.error, last_one$design$std.error)
  expect_gt(first_one$design$std.error, 0.02)
  widths <- first_one$metrics$upper - first_one$metrics$lower
  expect_true(all(widths > 0.04))
})

test_that("weighted figures take the accuracy's scale: kappa's interval is the accuracy's over 1 - chance", {
  # kappa = (accuracy - chance) / (1 - chance): with the labels' shares held, each side of its interval is the
  # accuracy's over 1 - chance. The percentile bounds of three rounds by doubt fell 0.81-1.13 of it (300 resamples,
  # seeds 1-20), their own Monte Carlo error and the normal's quantile; at the accuracy's scale 0.95-1.07
  ratios <- vapply(1:10, function(seed) {
    drawn <- through_csv(drawn_in_rounds(doubtful_labels(), 50, c(50, 50), seed = seed))
    result <- agreement(drawn, truth, field = ".label", seed = 1, n_boot = 300)
    figures <- result$metrics
    confusion <- unclass(result$confusion_weighted)
    chance <- sum(rowSums(confusion) * colSums(confusion)) / sum(confusion)^2
    kappa <- figures[figures$metric == "cohen_kappa", ]
    accuracy <- figures[figures$metric == "accuracy", ]
    c((kappa$estimate - kappa$lower) / (accuracy$estimate - accuracy$lower),
      (kappa$upper - kappa$estimate) / (accuracy$upper - accuracy$estimate)) * (1 - chance)
  }, c(0, 0))
  expect_lt(max(abs(ratios - 1)), 0.08)
  printed <- capture.output(print(agreement(drawn_in_rounds(doubtful_labels(), 50, 50, seed = 1), truth,
                                            field = ".label", seed = 1, n_boot = 100)))
  expect_match(paste(printed, collapse = " "), "at the scale of the accuracy's interval")
})
