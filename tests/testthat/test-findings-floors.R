# The variance's floors (findings-floors.R): what a stratum of few coded units
# borrows, and the least error a row is taken to have where the coded rows show none.

test_that("a stratum of two alike codes borrows a variance, not a variance of 0", {
  # issue 58: a label on 4% of 2,000 rows, a coin flip there, 2 of 50 rows coded in it (drawn without the floor
  # review_sample() now keeps); both "yes", so its spread was 0 and the share 0.039 [0.031, 0.049] for a truth of 0.025
  data <- thin_stratum(2000, 22)
  coded <- coded_in_strata(data, c(yes = 2, no = 48), 22)
  expect_identical(coded$truth[coded$.label == "yes"], c("yes", "yes"))
  expect_message(shares <- label_shares(data, coded, truth, seed = 1), class = "newrllama4_message_variance_pooled")
  share <- shares[shares$label == "yes" & shares$estimator == "corrected", ]
  expect_lt(share$conf.low, 0.025)
  expect_gt(share$conf.high, 0.025)
  estimate <- attr(shares, "estimates")$yes
  expect_identical(estimate$variance_pooled, "yes")
  expect_identical(generics::glance(shares)$strata_borrowing, 1L)
  # and its 50 coded rows are all labelled right: the rare-error floor holds too
  expect_true(generics::glance(shares)$variance_floored)
  thin <- estimate$parts$corrected$strata$yes
  expect_true(thin$pooled)
  expect_true(thin$alike)
  expect_gt(pooled_share(estimate$parts$corrected, diag(estimate$vcov$corrected)), 0)
  # two codes of "yes": Agresti and Coull's adjusted proportion 4 / 6, variance 2 / 9, on the share's scale, for 8 of
  # the stratum's 9 degrees of freedom
  expect_gte(thin$cov[1, 1], 8 / 9 * 2 / 9 / nrow(data)^2)
})

test_that("predictions right on every coded row do not make the interval vanish: their rare errors elsewhere count", {
  # a learner right on 99% of rows: 2% of them a coin flip its features cannot tell; 150 of 700 rows coded
  sharp <- function(seed) {
    rows <- rarely_wrong(seed)
    coded <- review_sample(rows$data, 150, weight = "uniform", seed = seed)
    list(data = rows$data, coded = coded, learned = quietly(learn_labels(rows$data, coded, gold, features = rows$x)))
  }
  draw <- function(seed) {
    world <- sharp(seed)
    data <- world$data
    coded <- world$coded
    learned <- world$learned
    shares <- quietly(label_shares(learned, coded, gold, seed = seed, target = "corpus"))
    share <- shares[shares$label == "a" & shares$estimator == "corrected", ]
    value <- mean(data$gold == "a")
    c(covered = share$conf.low <= value && value <= share$conf.high, width = share$conf.high - share$conf.low,
      errors = sum((learned$.prob_a[coded$.row] > 0.5) != (data$gold[coded$.row] == "a")))
  }
  draws <- vapply(1:20, draw, numeric(3))
  # 4 of these 20 draws see no error among their coded rows: their intervals were 0.004 wide and 3 of the 4 missed
  # (over 300 draws: 56 without an error, covering 0.32; all draws 0.857; with the floor 0.983, those 56 covering 1.0)
  unseen <- draws["errors", ] == 0
  expect_gte(sum(unseen), 2)
  expect_true(all(draws["covered", unseen] == 1))
  expect_gt(min(draws["width", unseen]), 0.5 * stats::median(draws["width", !unseen]))
  expect_gte(mean(draws["covered", ]), 0.95)
  # said, in a message and in the printout
  world <- sharp(which(unseen)[[1]])
  expect_message(shares <- label_shares(world$learned, world$coded, gold, seed = 1, target = "corpus"),
                 class = "newrllama4_message_variance_floored")
  printed <- gsub("\\s+", " ", paste(utils::capture.output(print(shares)), collapse = " "))
  expect_match(printed, "Wilson's centre for no error")
  expect_true(generics::glance(shares)$variance_floored)
  # the floor: Wilson's centre for no error among n coded rows, for 0/1 codes only
  codes <- list(y = rep(c(0, 1), 75), prediction = rep(c(0.2, 0.9), 75), zero_one = TRUE)
  expect_equal(rare_error_variance(codes), stats::qnorm(0.975)^2 / 2 / (150 + stats::qnorm(0.975)^2))
  # one error seen: the residuals' own spread stands
  codes$prediction[[1]] <- 0.6
  expect_identical(rare_error_variance(codes), NA_real_)
  expect_identical(rare_error_variance(list(y = c(0.5, 2), prediction = c(0.5, 2), zero_one = FALSE)), NA_real_)
})

test_that("a stratum of few coded units weighs its own spread and the borrowed one by their degrees of freedom", {
  totals <- cbind(c(1, 2, 4, 9), c(0.5, 0.5, 1, 1))
  units <- list(small = list(totals = totals, units = 40, drawn = 4),
                large = list(totals = totals[rep(1:4, 3), ], units = 400, drawn = 12))
  strata <- pooled_strata(units, c(small = 2, large = 2), 1, c(small = FALSE, large = FALSE))
  own <- stats::var(totals[, 1])
  borrowed <- 2 * mean(totals[, 2]^2)
  expect_equal(strata$small$cov[1, 1], (3 * own + 6 * borrowed) / 9)
  expect_false(strata$small$pooled)
  # from few_coded_units on, a stratum keeps its own
  expect_equal(strata$large$cov[1, 1], stats::var(totals[rep(1:4, 3), 1]))
  expect_true(pooled_strata(list(small = list(totals = cbind(c(1, 1, 1), 1), units = 40, drawn = 3)), c(small = 2),
                            1, c(small = TRUE))$small$pooled)
  # clusters drawn whole borrow their rows' products' spread, not their totals', and keep at least their own
  rows_spread <- list(small = matrix(0.1 * 4), large = matrix(1))
  clusters <- pooled_strata(units, c(small = 2, large = 2), 1, c(small = FALSE, large = FALSE),
                            cluster_spreads = rows_spread)
  expect_equal(clusters$small$cov[1, 1], own)
  rows_spread$small <- matrix(40 * 4)
  clusters <- pooled_strata(units, c(small = 2, large = 2), 1, c(small = FALSE, large = FALSE),
                            cluster_spreads = rows_spread)
  expect_equal(clusters$small$cov[1, 1], (3 * own + 6 * 2 * 40) / 9)
})

test_that("strata of few coded rows do not overstate a regression's variance", {
  # issue 58's coverage matrix: a label as a covariate at 40 uniform rows, its "yes" rows mostly in a thin stratum
  # of five; each of its small strata raised to the pooled spread where below, the variance was 1.41x the estimate's
  # spread over the draws and the coverage 0.990 (200 draws; 0.994 over 500). Weighed by degrees of freedom: 1.00x.
  fits <- lapply(1:120, function(seed) {
    world <- speaker_rows(200, 10, seed, thin = TRUE)
    coded <- quietly(review_sample(world$data, 40, weight = "uniform", seed = seed))
    tryCatch(quietly(label_regression(y ~ yes + x, world$data, coded, truth, seed = seed)),
             newrllama4_error = function(e) NULL)
  })
  fits <- Filter(Negate(is.null), fits)
  estimates <- vapply(fits, function(fit) fit$fits$coded_only$coefficients[["yes"]], 0)
  variances <- vapply(fits, function(fit) fit$vcov$coded_only["yes", "yes"], 0)
  expect_gt(length(fits), 110)
  expect_gt(stats::var(estimates) / mean(variances), 0.85)
  expect_lt(stats::var(estimates) / mean(variances), 1.2)
})

test_that("a factor's level whose few coded rows agree takes its codes' adjusted proportion's variance, not 0", {
  # 1,000 draws: where the level's 4-9 coded rows agreed its coefficient covered 0.35-0.66 (where they differed
  # 0.94-0.97), silently past 9 rows; now 0.99 and 0.77-0.99
  covered <- logical()
  for (seed in 1:40) {
    data <- small_level_world(seed)
    coded <- review_sample(data, 150, seed = seed)
    in_level <- coded$truth[coded$group == "g1"]
    if (length(in_level) < 2 || length(unique(in_level)) > 1) next
    fit <- quietly(label_regression(yes ~ group, data, coded, truth, seed = seed, target = "corpus"))
    expect_true("groupg1" %in% fit$variance_levels)
    value <- stats::coef(stats::lm((truth == "yes") ~ group, data))[["groupg1"]]
    interval <- confint(fit)["groupg1", ]
    covered <- c(covered, interval[[1]] <= value && value <= interval[[2]])
  }
  expect_gte(length(covered), 10)
  expect_gte(mean(covered), 0.9)
  expect_output(print(fit), "where the coded rows of a level agree \\(.*groupg1")
  # codes that differ in the level: no floor
  data <- small_level_world(1)
  expect_length(quietly(label_regression(yes ~ group, data, review_sample(data, 1500, seed = 1), truth, seed = 1,
                                         target = "corpus"))$variance_levels, 0)
})

test_that("a reference level whose few coded rows agree takes the floor too: the intercept and every contrast rest on it", {
  # read from a CSV file, the groups are text and their levels alphabetical: the 3% level is the reference; 400
  # draws, the intercept covered 0.733 and the 20% level's contrast 0.925 (0.255 and 0.796 where the reference's
  # codes agreed); now 0.988 and 0.993
  covered <- NULL
  for (seed in 1:40) {
    data <- small_level_world(seed)
    data$group <- as.character(data$group)
    coded <- review_sample(data, 150, seed = seed)
    in_level <- coded$truth[coded$group == "g1"]
    if (length(unique(in_level)) > 1) next
    alike <- list(data = data, coded = coded)
    fit <- quietly(label_regression(yes ~ group, data, coded, truth, seed = seed, target = "corpus"))
    expect_true("groupg1" %in% fit$variance_levels)
    value <- stats::coef(stats::lm((truth == "yes") ~ group, data))
    interval <- confint(fit)
    # the coded rows' own interval, printed beside it, rests on the same codes (0.066 for the intercept before)
    alone <- generics::tidy(fit, estimator = "coded_only", conf.int = TRUE)
    alone <- as.matrix(alone[match(c("(Intercept)", "groupg8"), alone$term), c("conf.low", "conf.high")])
    covered <- rbind(covered, vapply(c("(Intercept)", "groupg8"), function(term) {
      interval[term, 1] <= value[[term]] && value[[term]] <= interval[term, 2]
    }, NA), alone[, 1] <= value[c("(Intercept)", "groupg8")] & value[c("(Intercept)", "groupg8")] <= alone[, 2])
  }
  expect_gte(nrow(covered), 16)
  expect_true(all(colMeans(covered[c(TRUE, FALSE), ]) >= 0.9))
  expect_true(all(colMeans(covered[c(FALSE, TRUE), ]) >= 0.9))
  # a logical covariate's FALSE rows, a 0/1 number's zeros
  data <- alike$data
  data$small <- data$group != "g1"
  fit <- quietly(label_regression(yes ~ small, data, alike$coded, truth, seed = 1))
  expect_true("smallFALSE" %in% fit$variance_levels)
  data$small <- as.numeric(data$small)
  expect_true("small = 0" %in% quietly(label_regression(yes ~ small, data, alike$coded, truth, seed = 1))$variance_levels)
})

test_that("a reference level's coded rows are counted: none stops naming it, few warn, one takes the floor", {
  data <- small_level_world(179)
  data$group <- as.character(data$group)
  coded <- review_sample(data, 150, seed = 179)
  expect_equal(sum(coded$group == "g1"), 1)
  expect_warning(fit <- label_regression(yes ~ group, data, coded, truth, seed = 1, target = "corpus"),
                 "Fewer than 10 coded rows in .*groupg1", class = "newrllama4_warning_few_coded")
  # its one code takes the floor, read alone too (it had no interval there); the floor's part, known, gives the
  # intercept a df of its own
  table <- summary(fit)$table
  alone <- table[table$term == "(Intercept)" & table$estimator == "coded_only", ]
  expect_true(all(is.finite(c(alone$conf.low, alone$conf.high))))
  expect_gt(alone$std.error, 0.5)
  expect_true(all(is.finite(confint(fit)["(Intercept)", ])))
  coded$truth[coded$group == "g1"] <- NA
  expect_error(quietly(label_regression(yes ~ group, data, coded, truth, seed = 1)), "No coded rows tell apart groupg1",
               class = "newrllama4_error_too_few_coded")
})

test_that("where factors interact, each cell whose few coded rows agree takes the floor", {
  # a group of 3% by gender, yes ~ group * gender: where the small group's cell in the reference gender agreed and the
  # group's codes did not, its contrast covered 0.636 (300 draws; 0.888 over all); now 0.987 (0.998)
  covered <- logical()
  for (seed in 1:60) {
    data <- small_level_world(seed)
    data$group <- factor(ifelse(data$group == "g1", "small", "large"), levels = c("large", "small"))
    data$gender <- factor(ifelse(withr::with_seed(seed + 7, stats::runif(nrow(data))) < 0.5, "f", "m"))
    coded <- review_sample(data, 150, seed = seed)
    cell <- coded$truth[coded$group == "small" & coded$gender == "f"]
    if (length(cell) == 0 || length(unique(cell)) > 1 || length(unique(coded$truth[coded$group == "small"])) == 1 ||
        !all(table(coded$group, coded$gender) > 0)) next
    fit <- quietly(label_regression(yes ~ group * gender, data, coded, truth, seed = seed, target = "corpus"))
    expect_true("groupsmall:genderf" %in% fit$variance_levels)
    expect_false(any(c("groupsmall", "genderf") %in% fit$variance_levels))
    value <- stats::coef(stats::lm((truth == "yes") ~ group * gender, data))[["groupsmall"]]
    covered <- c(covered, confint(fit)["groupsmall", 1] <= value && value <= confint(fit)["groupsmall", 2])
  }
  expect_gte(length(covered), 8)
  expect_gte(mean(covered), 0.9)
})

test_that("a level of few coded rows of a numeric answer weighs their residuals' spread with all coded rows'", {
  # a rating's group of 3% of 3,000 rows, 150 uniform coded rows: where that group's few residuals were all 0 the
  # interval had no width; over 1,000 draws its coefficient covered 0.932 (0.836 where the model's errors there are
  # twice as large), now 0.981 (0.922), the intervals 0.73x and 0.65x as wide
  covered <- logical()
  for (seed in 1:40) {
    data <- rated_world(seed)
    coded <- review_sample(data, 150, weight = "uniform", seed = seed)
    in_group <- coded$group == "g1"
    if (!any(in_group)) next
    fit <- quietly(label_regression(rating ~ group, data, coded, truth, seed = seed, target = "corpus"))
    value <- stats::coef(stats::lm(truth ~ group, data))[["groupg1"]]
    covered <- c(covered, confint(fit)["groupg1", 1] <= value && value <= confint(fit)["groupg1", 2])
    if (all(coded$truth[in_group] == coded$rating[in_group])) alike <- list(fit = fit, rows = sum(in_group))
  }
  expect_gte(mean(covered), 0.9)
  expect_true("groupg1" %in% alike$fit$variance_levels)
  expect_gt(diff(confint(alike$fit)["groupg1", ]), 0.5)
  expect_output(print(alike$fit), paste("for a level of fewer than 10 coded rows their residuals' spread weighed with",
                                        "all coded rows' \\(.*groupg1") |> gsub(pattern = " ", replacement = "\\\\s+"))
  # a level of ten coded rows or more keeps its own
  data <- rated_world(1)
  expect_length(quietly(label_regression(rating ~ group, data, review_sample(data, 1500, weight = "uniform", seed = 1),
                                         truth, seed = 1, target = "corpus"))$variance_levels, 0)
})

test_that("texts split between their coders leave a label's codes 0/1 codes, and their floors in place", {
  # four split texts among 150 took every 0/1 floor away: where a 3% level's codes agreed it covered 0.847 over 300
  # draws (0.969 without them); now 0.969
  data <- small_level_world(12)
  coded <- review_sample(data, 150, seed = 12)
  expect_length(unique(coded$truth[coded$group == "g1"]), 1)
  split <- split_between_coders(coded, which(coded$group == "g8")[1:4])
  fit <- quietly(label_regression(yes ~ group, data, split, truth, seed = 12, target = "corpus"))
  expect_true("groupg1" %in% fit$variance_levels)
  expect_equal(fit$variance_levels, quietly(label_regression(yes ~ group, data, coded, truth, seed = 12,
                                                             target = "corpus"))$variance_levels)
})
