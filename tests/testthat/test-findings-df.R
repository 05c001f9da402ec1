# The small-sample degrees of freedom (findings-df.R): Bell and McCaffrey's, against closed forms.

# The first coded_n[h] rows of each of two strata of sizes[h] rows (the first sizes[1] rows of `data`, then the
# rest), coded as a stratified draw would be.
first_rows_of_two_strata <- function(data, sizes, coded_n) {
  stratum <- rep(names(sizes), sizes)
  picked <- c(seq_len(coded_n[[1]]), sizes[[1]] + seq_len(coded_n[[2]]))
  coded <- data[picked, ]
  coded$.row <- picked
  coded$.stratum <- stratum[picked]
  coded$.stratum_rows <- sizes[coded$.stratum]
  coded$.stratum_drawn <- coded_n[coded$.stratum]
  coded$.sample_prob <- (coded_n / sizes)[coded$.stratum]
  coded$.sampling_unit <- ".row"
  coded
}

test_that("a binary regressor's df is Bell and McCaffrey's closed form; two strata's the survey Satterthwaite's", {
  # one stratum, lambda 0 (the coded rows alone), a 0/1 covariate: HC2's terms are each group's residuals
  # over n_g (n_g - 1), so the variance is a sum of n_g - 1 equal squares a group and its df
  # (1 / n_0 + 1 / n_1)^2 / sum 1 / (n_g^2 (n_g - 1)): Welch's under equal variances (Imbens and Kolesar 2016)
  data <- simulated_labels(2000, 5)
  data$x <- as.numeric(data$x > 1)
  rows <- c(which(data$x == 1)[1:6], which(data$x == 0)[1:34])
  coded <- coded_at(data, rows)
  groups <- c(6, 34)
  closed <- sum(1 / groups)^2 / sum(1 / (groups^2 * (groups - 1)))
  for (target in c("corpus", "population")) {
    fit <- quietly(label_regression(yes ~ x, data, coded, truth, seed = 5, lambda = 0, target = target))
    expect_equal(fit$df$corrected[["x"]], closed, tolerance = 1e-8)
    expect_equal(fit$df$coded_only[["x"]], closed, tolerance = 1e-8)
  }
  expect_equal(closed, 6.8882, tolerance = 1e-4)
  # an intercept on two strata of unequal weight: each stratum's terms centred in it, so its variance is
  # sum_h W_h s_h^2 and the df (sum_h W_h d_h^2)^2 / sum_h (W_h d_h^2)^2 / (n_h - 1), W_h = N_h^2 (1 / n_h - 1 / N_h),
  # d_h = 1 / sqrt(1 - h_h) and h_h = (N_h / n_h) / N each row's leverage (HC2)
  sizes <- c(a = 1800, b = 200)
  coded_n <- c(a = 30, b = 12)
  coded <- first_rows_of_two_strata(data, sizes, coded_n)
  fit <- suppressMessages(label_regression(yes ~ 1, data, coded, truth, seed = 5, lambda = 0, target = "corpus"))
  weight <- sizes^2 * (1 / coded_n - 1 / sizes) / (1 - (sizes / coded_n) / sum(sizes))
  expect_equal(fit$df$coded_only[[1]], sum(weight)^2 / sum(weight^2 / (coded_n - 1)), tolerance = 1e-8)
  expect_lt(fit$df$coded_only[[1]], sum(coded_n) - 2)
})

test_that("speakers of unequal sizes drawn whole: a share's df is its closed form, under the speakers less one", {
  # ten speakers drawn whole, each a sampling unit: the corpus share's variance is the spread of the speakers'
  # totals of the residuals e - mean(e), a quadratic form in the errors whose matrix over the speakers is
  # (D - m m' / n) / n^2 (D their sizes m, n coded rows), so its df is
  # (n - sum m^2 / n)^2 / (sum m^2 - 2 sum m^3 / n + (sum m^2)^2 / n^2): the speakers less one where all are alike
  sizes <- c(rep(3, 30), rep(30, 5))
  data <- simulated_labels(sum(sizes), 5)
  data$speaker <- rep(seq_along(sizes), sizes)
  # drawn uniformly: review_sample() would take the largest whole
  coded <- speakers_drawn_uniformly(data, 10, seed = 2)
  m <- as.vector(table(coded$speaker))
  n <- sum(m)
  closed <- (n - sum(m^2) / n)^2 / (sum(m^2) - 2 * sum(m^3) / n + sum(m^2)^2 / n^2)
  fit <- quietly(label_regression(yes ~ 1, data, coded, truth, seed = 5, lambda = 0, target = "corpus"))
  expect_equal(fit$df$coded_only[[1]], closed, tolerance = 1e-8)
  expect_lt(closed, 8)
})

test_that("a slope on a skewed covariate has few degrees of freedom, and its intervals cover", {
  # issue 58: a lognormal covariate on 60 coded rows, its slope's variance carried by a few rows far out;
  # on the design's 58 df its intervals covered about 0.90 (the corrected) and 0.88 (the coded rows alone)
  # over 500 draws, on Bell and McCaffrey's df (about 5) 0.95 and 0.94. A normal covariate keeps about a
  # third of its rows' df, as Imbens and Kolesar show for (sum x^2)^2 / sum x^4.
  covered <- vapply(1:60, function(seed) {
    data <- simulated_labels(2000, seed, covariate = skewed)
    coded <- review_sample(data, 60, weight = "uniform", seed = seed)
    fit <- quietly(label_regression(yes ~ x, data, coded, truth, seed = seed))
    table <- summary(fit)$table
    x <- table[table$term == "x" & table$estimator %in% c("corrected", "coded_only"), ]
    x$conf.low <= skewed_slope_yes & skewed_slope_yes <= x$conf.high
  }, c(NA, NA))
  expect_gte(mean(covered[1, ]), 0.93)
  expect_gte(mean(covered[2, ]), 0.9)
  data <- simulated_labels(2000, 1, covariate = skewed)
  fit <- quietly(label_regression(yes ~ x, data, review_sample(data, 60, weight = "uniform", seed = 1), truth, seed = 1))
  expect_lt(fit$df$corrected[["x"]], 15)
  expect_gt(fit$df$corrected[["(Intercept)"]], 30)
  normal <- simulated_labels(2000, 1)
  fit <- quietly(label_regression(yes ~ x, normal, review_sample(normal, 60, weight = "uniform", seed = 1), truth,
                                  seed = 1))
  expect_gt(fit$df$corrected[["x"]], 12)
})

test_that("past small_sample_df_rows coded rows the df is the design's, so estimates stay fast at study scale", {
  # Omega grows with the cube of the coded rows (141 s at 2,000 without this bound); the times are
  # docs/benchmarks.md's, this checks which road an estimate takes (past them a long tail stops: test-findings-estimate.R)
  normal <- simulated_labels(6000, 3)
  fit <- quietly(label_regression(yes ~ x, normal, coded_at(normal, seq_len(small_sample_df_rows + 100)), truth, seed = 1))
  expect_identical(unname(fit$df$corrected), rep(fit$design_df, 2))
  data <- simulated_labels(6000, 3, covariate = skewed)
  fewer <- quietly(label_regression(yes ~ x, data, coded_at(data, seq_len(60)), truth, seed = 1))
  expect_lt(fewer$df$corrected[["x"]], fewer$design_df)
})

test_that("a logistic slope on a 0/1 covariate takes Welch's df on the logit scale, its errors at mu (1 - mu)", {
  # the working model is the fit's own: each code's error of variance mu (1 - mu). On a 0/1 covariate each group's
  # logit is estimated from its n_g codes with variance 1 / (n_g v_g), v_g = p_g (1 - p_g), so the slope's df is
  # (sum 1 / (n_g v_g))^2 / sum 1 / ((n_g v_g)^2 (n_g - 1)). At one variance for every code (before) the groups
  # were weighed by 1 / (n_g v_g^2): 16.3 here, against 17.1; where rows far out have fitted probabilities near 0 or
  # 1 the gap is wide (a logistic slope on a lognormal covariate at 60 coded rows: about 5 against 11)
  data <- simulated_labels(2000, 5)
  data$x <- as.numeric(data$x > 1)
  yes <- data$truth == "yes"
  rows <- c(which(data$x == 1 & yes)[1:10], which(data$x == 1 & !yes)[1:2], which(data$x == 0 & yes)[1:8],
            which(data$x == 0 & !yes)[1:32])
  coded <- coded_at(data, rows)
  yes <- coded$truth == "yes"
  n_g <- c(sum(coded$x == 1), sum(coded$x == 0))
  p_g <- c(mean(yes[coded$x == 1]), mean(yes[coded$x == 0]))
  weight <- 1 / (n_g * p_g * (1 - p_g))
  welch <- sum(weight)^2 / sum(weight^2 / (n_g - 1))
  for (target in c("corpus", "population")) {
    fit <- quietly(label_regression(yes ~ x, data, coded, truth, family = "binomial", seed = 5, lambda = 0,
                                    target = target))
    expect_equal(fit$df$coded_only[["x"]], welch, tolerance = 1e-6)
  }
})

test_that("what a stratum of few 0/1 codes borrows counts as known: its df are not its own few", {
  # a share resting on a stratum of five codes: on their own spread alone its df would be about 4; the adjusted
  # proportion the stratum borrows for 5 of its 9 degrees of freedom moves little, and counts as known
  data <- simulated_labels(2000, 5)
  sizes <- c(a = 1900, b = 100)
  coded_n <- c(a = 5, b = 40)
  coded <- first_rows_of_two_strata(data, sizes, coded_n)
  expect_gt(length(unique(coded$truth[1:5])), 1)
  fit <- quietly(label_regression(yes ~ 1, data, coded, truth, seed = 5, lambda = 0, target = "corpus"))
  # the small stratum's own spread is 4 / 9 of its variance in 4 equal squares, the known part 5 / 9: df
  # (4 / 9 + 5 / 9)^2 / (4 (1 / 9)^2) = 81 / 4, the large stratum's part too small to move it
  expect_equal(fit$df$coded_only[[1]], 81 / 4, tolerance = 0.01)
})
