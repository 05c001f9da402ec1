test_that("the figures of a small table equal those computed by hand", {
  result <- agreement(hand_predicted, hand_truth, n_boot = 0)
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

test_that("perfect agreement scores 1 everywhere, its intervals reaching below as Wilson's does", {
  labels <- rep(c("x", "y", "z"), times = c(5, 3, 2))
  result <- agreement(labels, labels, seed = 1)
  expect_equal(result$metrics$estimate, rep(1, 4))
  expect_equal(result$metrics$upper, rep(1, 4))
  expect_equal(result$per_label$f1, rep(1, 3))
  # every replicate agrees too: the percentile bounds were [1, 1]. The accuracy's is Wilson's for 10 of 10, t on 9
  # df; kappa's the kappa of the pairs moved toward errors (spread as predicted) until that accuracy
  t2 <- stats::qt(0.975, 9)^2
  lower <- 10 / (10 + t2)
  expect_equal(result$metrics$lower[1], lower)
  truths <- c(5, 3, 2)
  wrong <- t(vapply(1:3, function(r) truths[[r]] * replace(truths, r, 0) / sum(truths[-r]), numeric(3)))
  moved <- lower * diag(truths) + (1 - lower) * wrong
  chance <- sum(rowSums(moved) * colSums(moved)) / 100
  expect_equal(result$metrics$lower[3], (lower - chance) / (1 - chance))
  expect_true(all(result$metrics$lower < 0.7))
})

test_that("a few pairs of labels nearly always right: the accuracy and kappa cover", {
  # 20 pairs of labels 97% right (half "a"): the percentile bootstrap covered in 39% of 300 draws, its
  # interval [1, 1] wherever the 20 agreed; Wilson's accuracy and kappa at its scale 0.98
  truth_kappa <- (0.97 - 0.5) / 0.5
  covered <- vapply(1:150, function(seed) {
    withr::with_seed(seed, {
      truth <- sample(c("a", "b"), 20, replace = TRUE)
      predicted <- ifelse(stats::runif(20) < 0.97, truth, ifelse(truth == "a", "b", "a"))
    })
    figures <- agreement(predicted, truth, n_boot = 200, seed = seed)$metrics
    kappa <- figures[figures$metric == "cohen_kappa", ]
    c(accuracy = figures$lower[1] <= 0.97 && 0.97 <= figures$upper[1],
      kappa = isTRUE(kappa$lower <= truth_kappa && truth_kappa <= kappa$upper))
  }, c(accuracy = NA, kappa = NA))
  expect_gte(mean(covered["accuracy", ]), 0.93)
  expect_gte(mean(covered["kappa", ]), 0.93)
})

test_that("the accuracy's interval covers every accuracy of 20 pairs, the exact binomial coverage", {
  # each number of agreeing pairs of 20 and its interval; coverage at p sums the binomial's chances of those that
  # hold p. Wilson's alone fell to 0.86 just above 19 of 20's upper bound (0.992); with Brown, Cai and DasGupta's
  # Poisson bounds for one or two pairs on a side, 0.933 (a percentile bootstrap: 0 above 0.95, where 20 of 20
  # gave [1, 1] and 19 of 20 ended at 1)
  truth <- rep(c("a", "b"), 10)
  flipped <- rep(c("b", "a"), 10)
  bounds <- t(vapply(0:20, function(agreeing) {
    figures <- agreement(ifelse(seq_len(20) <= agreeing, truth, flipped), truth, n_boot = 0)$metrics
    c(figures$lower[1], figures$upper[1])
  }, numeric(2)))
  coverage <- vapply(seq(0.5, 0.999, by = 0.001), function(p) {
    sum(stats::dbinom(0:20, 20, p) * (bounds[, 1] <= p & p <= bounds[, 2]))
  }, 0)
  expect_gte(min(coverage), 0.925)
  expect_gt(mean(coverage), 0.95)
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
  expect_equal(result$metrics$lower[c(1, 3, 4)], c(3 / (3 + stats::qt(0.975, 2)^2), NA, NA))
  expect_output(print(result), "Cohen's kappa +undefined")
})

test_that("bootstrap intervals hold the estimates, follow a seed and leave the session's RNG alone", {
  result <- agreement(hand_predicted, hand_truth, seed = 42)
  expect_true(all(result$metrics$lower <= result$metrics$estimate))
  expect_true(all(result$metrics$estimate <= result$metrics$upper))
  expect_true(all(result$metrics$lower < result$metrics$upper))
  expect_identical(agreement(hand_predicted, hand_truth, seed = 42), result)
  expect_false(identical(agreement(hand_predicted, hand_truth, seed = 43)$metrics, result$metrics))

  set.seed(2024)
  before <- .Random.seed
  agreement(hand_predicted, hand_truth, seed = 42)
  expect_identical(.Random.seed, before)

  # without a seed the resamples come from the session's RNG, so set.seed() fixes them
  set.seed(7)
  first <- agreement(hand_predicted, hand_truth)
  set.seed(7)
  expect_identical(agreement(hand_predicted, hand_truth), first)

  narrower <- agreement(hand_predicted, hand_truth, level = 0.5, seed = 42)$metrics
  expect_true(all(narrower$upper - narrower$lower <= result$metrics$upper - result$metrics$lower))

  # without the bootstrap only the accuracy has its interval (Wilson's)
  skipped <- agreement(hand_predicted, hand_truth, n_boot = 0)
  expect_true(all(is.na(c(skipped$metrics$lower[-1], skipped$metrics$upper[-1]))))
  expect_equal(c(skipped$metrics$lower[1], skipped$metrics$upper[1]),
               c(result$metrics$lower[1], result$metrics$upper[1]))
  expect_equal(skipped$metrics$estimate, result$metrics$estimate)
})

test_that("a replicate draws pairs, or whole units within their strata, as resampling them one by one would", {
  # pairs drawn one by one: a replicate's accuracy is a binomial share, so its percentiles are the binomial's
  truth <- factor(rep(c("a", "b"), 100))
  predicted <- factor(ifelse(seq_len(200) <= 130, as.character(truth), ifelse(truth == "a", "b", "a")))
  bounds <- bootstrap_bounds(truth, predicted, 0.95, 20000, seed = 1)
  expect_lte(max(abs(bounds[1, ] * 200 - stats::qbinom(c(0.025, 0.975), 200, 0.65))), 1)
  # ten units of ten pairs, five wholly right and five wholly wrong: a replicate draws units, not pairs
  units <- split(seq_len(100), rep(1:10, each = 10))
  right <- rep(c(TRUE, FALSE), each = 50)
  truth <- factor(rep(c("a", "b"), 50))
  predicted <- factor(ifelse(right, as.character(truth), ifelse(truth == "a", "b", "a")))
  bounds <- bootstrap_bounds(truth, predicted, 0.95, 20000, seed = 1, units = units)
  expect_equal(bounds[1, ], stats::qbinom(c(0.025, 0.975), 10, 0.5) / 10)
  # two strata: each draws its own units, so a stratum wholly right stays so; weights count each pair
  strata <- rep(c("sure", "unsure"), each = 50)
  right <- c(rep(TRUE, 50), rep(c(TRUE, FALSE), 25))
  predicted <- factor(ifelse(right, as.character(truth), ifelse(truth == "a", "b", "a")))
  weights <- rep(c(1, 3), each = 50)
  bounds <- bootstrap_bounds(truth, predicted, 0.95, 20000, seed = 1, weights = weights, strata = strata)
  expected <- (50 + 3 * stats::qbinom(c(0.025, 0.975), 50, 0.5)) / 200
  expect_lte(max(abs(bounds[1, ] - expected)), 3 / 200)
})

test_that("rows drawn by a design: a replicate varies as the design's variance says, in each round", {
  # five strata of 8 units, each 60% of its stratum's rows: drawing 8 of 8 with replacement gave the accuracy
  # (8 - 1) / 8 / (1 - 0.6) = 2.2 times its variance
  withr::local_seed(1)
  truth <- factor(sample(c("a", "b"), 40, replace = TRUE))
  right <- stats::runif(40) < rep(c(0.9, 0.5, 0.7, 0.3, 0.6), each = 8)
  predicted <- factor(ifelse(right, as.character(truth), ifelse(truth == "a", "b", "a")), levels = levels(truth))
  design <- list(prob = rep(0.6, 40), stratum = rep(letters[1:5], each = 8), unit = as.character(1:40))
  # the design's variance of the weighted accuracy: each stratum's spread over n - 1, times 1 - 0.6
  accuracy <- design_accuracy(right, design, 0.95)
  # each design's parts as weighted_agreement() gives them to the bootstrap
  width_over_design <- function(design) {
    parts <- round_parts(design)
    bounds <- bootstrap_bounds(truth, predicted, 0.95, 20000, seed = 2, weights = 1 / design$prob,
                               units = as.list(1:40), strata = design$stratum,
                               fraction = parts$fraction, drawn_share = parts$drawn_share)
    unname(bounds[1, 2] - bounds[1, 1]) / (2 * stats::qnorm(0.975) * design_accuracy(right, design, 0.95)$std.error)
  }
  expect_equal(width_over_design(design), 1, tolerance = 0.06)
  # a second round: its rows' weights are theirs in it plus no later share, the first round's rows carry the
  # second's share as well, which no draw of the first round moves
  rounds <- with_rounds(utils::modifyList(design, list(
    stratum = rep(c("a", "b", "round 2: c", "round 2: d", "round 2: e"), each = 8),
    strata = data.frame(name = c("a", "b", "round 2: c", "round 2: d", "round 2: e"), drawn = 8)
  )))
  share <- round_parts(rounds)$drawn_share
  expect_true(all(share[1:16] < 1) && all(share[17:40] == 1))
  expect_equal(width_over_design(rounds), 1, tolerance = 0.06)
  # the plain bootstrap, each stratum's 8 units drawn 8 times, is 1.48 times as wide
  plain <- bootstrap_bounds(truth, predicted, 0.95, 20000, seed = 2, weights = 1 / design$prob, strata = design$stratum)
  expect_gt((plain[1, 2] - plain[1, 1]) / (2 * stats::qnorm(0.975) * accuracy$std.error), 1.3)
})
