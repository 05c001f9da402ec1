test_that("the corrected slope covers the truth where the naive one does not", {
  draws <- vapply(1:60, function(seed) {
    data <- simulated_labels(2000, seed)
    coded <- review_sample(data, 250, weight = "uniform", seed = seed)
    fit <- label_regression(yes ~ x, data, coded, truth, family = "binomial", seed = seed)
    table <- summary(fit)$table
    slope <- table[table$term == "x", ]
    c(corrected = slope$conf.low[1] <= 0.8 && 0.8 <= slope$conf.high[1],
      naive = slope$conf.low[2] <= 0.8 && 0.8 <= slope$conf.high[2],
      width = (slope$conf.high[1] - slope$conf.low[1]) / (slope$conf.high[3] - slope$conf.low[3]))
  }, numeric(3))
  # 60 draws: 0.95 coverage gives 51 or more with probability 0.99
  expect_gte(sum(draws["corrected", ]), 51)
  expect_lte(mean(draws["naive", ]), 0.2)
  expect_lt(mean(draws["width", ]), 0.95)
})

# survey's design for `coded` (drawn by review_sample()): strata and their rows.
survey_design <- function(coded, columns) {
  strata <- attr(coded, "design")$strata
  columns$stratum <- coded$.stratum
  columns$rows <- strata$rows[match(coded$.stratum, strata$name)]
  survey::svydesign(ids = ~1, strata = ~stratum, fpc = ~rows, data = columns)
}

test_that("at lambda 1, gaussian fits solve least squares on DSL's pseudo-outcomes, with the design's variance", {
  skip_if_not_installed("survey")
  data <- simulated_labels(1500, 7)
  coded <- review_sample(data, 200, weight = "confidence", seed = 7)
  fit <- label_regression(yes ~ x + group, data, coded, truth, seed = 7, lambda = 1)
  # the pseudo-outcome: prediction everywhere, plus the weighted error on coded rows
  y <- as.numeric(coded$truth == "yes")
  pseudo <- data$.prob_yes
  pseudo[coded$.row] <- pseudo[coded$.row] + (y - pseudo[coded$.row]) / coded$.sample_prob
  reference <- stats::lm(pseudo ~ x + group, data)
  expect_equal(unname(coef(fit)), unname(coef(reference)), tolerance = 1e-8)
  # the corpus target's variance: that of the stratified sample's total of x (y - g), as survey estimates it;
  # the population's adds the coded rows' estimate of sum x x' (y - mu)^2
  x <- stats::model.matrix(~ x + group, data)
  z <- x[coded$.row, ] * (y - data$.prob_yes[coded$.row])
  totals <- survey::svytotal(~ z1 + z2 + z3, survey_design(coded, data.frame(z1 = z[, 1], z2 = z[, 2], z3 = z[, 3])))
  bread <- solve(crossprod(x))
  corpus <- label_regression(yes ~ x + group, data, coded, truth, seed = 7, lambda = 1, target = "corpus")
  expect_equal(unname(vcov(corpus)), unname(bread %*% stats::vcov(totals) %*% bread), tolerance = 1e-8)
  residual <- x[coded$.row, ] * (y - fitted(reference)[coded$.row])
  expect_equal(unname(vcov(fit)), unname(vcov(corpus) + bread %*% crossprod(residual, residual / coded$.sample_prob)
                                         %*% bread), tolerance = 1e-8)
  naive <- stats::lm(I(.label == "yes") ~ x + group, data)
  expect_equal(unname(fit$fits$naive$coefficients), unname(coef(naive)), tolerance = 1e-8)
  expect_equal(unname(fit$vcov$naive), unname(sandwich::vcovHC(naive, type = "HC0")), tolerance = 1e-8)
  expect_equal(nobs(fit), 1500L)
  expect_identical(rownames(confint(fit)), c("(Intercept)", "x", "groupb"))
})

test_that("the coded rows alone are survey's weighted regression, with its variance for the corpus", {
  skip_if_not_installed("survey")
  data <- simulated_labels(1000, 3)
  coded <- review_sample(data, 150, weight = "confidence", seed = 3)
  coded$y <- as.numeric(coded$truth == "yes")
  design <- survey_design(coded, coded[c("x", "y")])
  for (family in c("gaussian", "binomial")) {
    fit <- label_regression(yes ~ x, data, coded, truth, family = family, seed = 3, target = "corpus")
    reference <- survey::svyglm(y ~ x, design, family = if (family == "binomial") stats::quasibinomial() else
      stats::gaussian())
    expect_equal(unname(fit$fits$coded_only$coefficients), unname(coef(reference)), tolerance = 1e-6)
    expect_equal(unname(fit$vcov$coded_only), unname(stats::vcov(reference)), tolerance = 1e-5)
  }
})

test_that("the binomial fit solves the logistic score equation of PPI++ at its lambda", {
  data <- simulated_labels(1000, 3)
  coded <- review_sample(data, 150, weight = "uniform", seed = 3)
  fit <- label_regression(yes ~ x, data, coded, truth, family = "binomial", seed = 3)
  expect_gt(fit$lambda, 0)
  expect_lt(fit$lambda, 1)
  x <- cbind(1, data$x)
  mu <- stats::plogis(x %*% coef(fit))
  y <- as.numeric(coded$truth == "yes")
  g <- data$.prob_yes
  coded_part <- crossprod(x[coded$.row, ], (y - mu[coded$.row] - fit$lambda * (g - mu)[coded$.row]) /
                            coded$.sample_prob)
  score <- fit$lambda * crossprod(x, g - mu) + coded_part
  expect_lt(max(abs(score)), 1e-6)
  expect_match(format(fit), "lambda\\): 0\\.[0-9]+, tuned", all = FALSE)
  expect_identical(manifest(fit)$estimation$lambda, fit$lambda)
})

test_that("a coded row's cross-fitted prediction does not depend on its own code", {
  data <- simulated_labels(800, 11)
  coded <- review_sample(data, 120, weight = "uniform", seed = 11)
  fit <- label_regression(yes ~ x, data, coded, truth, prediction = "fit", seed = 5)
  flipped <- coded
  flipped$truth[1] <- if (coded$truth[1] == "yes") "no" else "yes"
  refit <- label_regression(yes ~ x, data, flipped, truth, prediction = "fit", seed = 5)
  row <- coded$.row[1]
  expect_identical(refit$predictions[row], fit$predictions[row])
  # rows of other folds saw the code
  other_folds <- fit$folds != fit$folds[row]
  expect_false(identical(refit$predictions[other_folds], fit$predictions[other_folds]))
})

test_that("recalibrate_labels() output is refitted fold by fold, never on a row's own code", {
  data <- simulated_labels(600, 13)
  data$.prob_yes <- stats::plogis(stats::qlogis(data$.prob_yes) + 2)  # leaning toward "yes", which a refit undoes
  data$.prob_no <- 1 - data$.prob_yes
  probs <- as.matrix(data[c(".prob_yes", ".prob_no")])
  attr(data, "order_probs") <- order_probs_record(list(probs), data)
  attr(data, "manifest") <- structure(list(created = "now", prompt = list(labels = c("yes", "no"))),
                                      class = "newrllama4_manifest")
  coded <- review_sample(data, 100, weight = "uniform", seed = 2)
  refitted <- recalibrate_labels(data, coded, truth)
  expect_identical(manifest(refitted)$prompt$calibration, "hand-coded")
  fit <- label_regression(yes ~ x, refitted, coded, truth, seed = 4)
  expect_match(fit$prediction_model, "recalibrate_labels\\(\\)'s refit, cross-fitted in 5 folds")
  flipped <- coded
  flipped$truth[3] <- if (coded$truth[3] == "yes") "no" else "yes"
  again <- label_regression(yes ~ x, refitted, flipped, truth, seed = 4)
  row <- coded$.row[3]
  expect_identical(again$predictions[row], fit$predictions[row])
  # the refitted probabilities themselves used every code, including this one
  expect_false(identical(fit$predictions, refitted$.prob_yes))
})

test_that("a numeric answer column is an outcome, predicted by itself", {
  data <- simulated_labels(600, 17)
  data$score <- data$.prob_yes * 10 + stats::rnorm(600)
  data$true_score <- data$score + 1 + data$x
  coded <- review_sample(data, 80, weight = "uniform", seed = 1)
  fit <- label_regression(score ~ x, data, coded, true_score, seed = 1)
  expect_equal(unname(coef(fit)["x"]), 1 + unname(coef(stats::lm(score ~ x, data))["x"]), tolerance = 0.1)
  expect_identical(fit$outcome_kind, "answer")
})

test_that("print, summary, tidy, glance, plot and manifest describe the three estimators", {
  data <- simulated_labels(800, 19)
  coded <- review_sample(data, 100, weight = "confidence", seed = 19)
  fit <- label_regression(yes ~ x, data, coded, truth, family = "binomial", seed = 19)
  printed <- capture.output(print(fit))
  expect_match(printed[1], "yes ~ x, binomial; 800 rows, 100 coded by hand")
  expect_true(any(grepl("corrected +naive +coded_only", printed)))
  expect_true(any(grepl("times as wide as the coded rows' alone", printed)))
  skip_if_not_installed("broom")
  tidy <- broom::tidy(fit)
  expect_identical(unique(tidy$estimator), c("corrected", "naive", "coded_only"))
  expect_equal(tidy$estimate[tidy$estimator == "corrected"], unname(coef(fit)))
  expect_equal(broom::glance(fit)$coded, 100L)
  path <- withr::local_tempfile(fileext = ".pdf")
  grDevices::pdf(path)
  expect_invisible(plot(fit))
  grDevices::dev.off()
  record <- manifest(fit)
  expect_identical(record$estimation$coded_rows, 100L)
  expect_identical(record$estimation$coded_row_numbers, paste(coded$.row, collapse = " "))
  expect_identical(record$estimation$folds, 5L)
  expect_match(record$estimation$prediction_model, "the model's probabilities")
  expect_true("estimation" %in% as.data.frame(record)$section)
})

test_that("mistakes are classed errors", {
  data <- simulated_labels(300, 23)
  coded <- review_sample(data, 40, weight = "uniform", seed = 23)
  expect_error(label_regression(yes ~ x, data, transform(coded, .row = .row + 1000L), truth),
               class = "newrllama4_error_coded_rows")
  expect_error(label_regression(yes ~ x, data, coded[names(coded) != ".sample_prob"], truth),
               class = "newrllama4_error_coded_rows")
  expect_error(label_regression(yes ~ x, data, transform(coded, truth = "maybe"), truth),
               class = "newrllama4_error_coded_truth")
  # no code at all: nothing stands for the strata's rows; without the design's strata, nothing says how to reweight
  expect_error(label_regression(yes ~ x, data, transform(coded, truth = NA), truth),
               class = "newrllama4_error_empty_stratum")
  expect_error(label_regression(yes ~ x, data, transform(coded, truth = NA, .stratum = NULL), truth),
               class = "newrllama4_error_coded_truth")
  expect_error(label_regression(yes ~ income, data, coded, truth), class = "newrllama4_error_missing_column")
  expect_error(label_regression(maybe ~ x, data, coded, truth), class = "newrllama4_error_missing_column")
  expect_error(label_regression(yes ~ x, data, `attr<-`(coded[1:5, ], "design", NULL), truth),
               class = "newrllama4_error_too_few_coded")
  # the coded rows must still be data's rows at .row
  expect_error(label_regression(yes ~ x, data[rev(seq_len(nrow(data))), ], coded, truth),
               class = "newrllama4_error_coded_rows")
  expect_error(label_regression(~ x, data, coded, truth), class = "newrllama4_error_invalid_argument")
  expect_error(label_regression(yes ~ x, data, coded, truth, family = "poisson"),
               class = "newrllama4_error_invalid_argument")
})

test_that("an enum field as covariate: its levels predicted by their probabilities, in DSL's moment", {
  n <- 800
  data <- withr::with_seed(5, {
    tone <- sample(c("calm", "angry", "sad"), n, replace = TRUE, prob = c(0.5, 0.3, 0.2))
    wrong <- stats::runif(n) < ifelse(tone == "angry", 0.3, 0.1)
    label <- ifelse(wrong, sample(c("calm", "angry", "sad"), n, replace = TRUE), tone)
    sure <- stats::runif(n, 0.5, 0.9)
    data.frame(x = stats::rnorm(n), tone = factor(label, levels = c("calm", "angry", "sad")),
               .prob_tone_calm = ifelse(label == "calm", sure, (1 - sure) / 2),
               .prob_tone_angry = ifelse(label == "angry", sure, (1 - sure) / 2),
               .prob_tone_sad = ifelse(label == "sad", sure, (1 - sure) / 2),
               .confidence_tone = sure, tone_code = tone, y = 1 + (tone == "angry") + 2 * (tone == "sad") +
                 stats::rnorm(n))
  })
  coded <- review_sample(data, 150, weight = "confidence", seed = 5, field = "tone")
  fit <- label_regression(y ~ tone + x, data, coded, tone_code, seed = 1, lambda = 1)
  # sum_i x_p (y - x_p b) + sum_coded (x_c (y - x_c b) - x_p (y - x_p b)) / pi = 0, solved for b
  predicted <- cbind(1, as.matrix(data[c(".prob_tone_angry", ".prob_tone_sad")]), data$x)
  codes <- factor(coded$tone_code, levels = c("calm", "angry", "sad"))
  true <- cbind(1, codes == "angry", codes == "sad", coded$x)
  weight <- 1 / coded$.sample_prob
  at <- predicted[coded$.row, ]
  gram <- crossprod(predicted) + crossprod(true, true * weight) - crossprod(at, at * weight)
  right <- crossprod(predicted, data$y) + crossprod(true, coded$y * weight) - crossprod(at, coded$y * weight)
  expect_equal(unname(coef(fit)), as.vector(solve(gram, right)), tolerance = 1e-8)
  naive <- stats::lm(y ~ tone + x, data)
  expect_equal(unname(fit$fits$naive$coefficients), unname(coef(naive)), tolerance = 1e-8)
  expect_identical(fit$labelled_covariates, "tone")
  expect_error(label_regression(y ~ tone * x, data, coded, tone_code), class = "newrllama4_error_invalid_argument")
  expect_error(label_regression(tone ~ x, data, coded, tone_code), class = "newrllama4_error_invalid_argument")
})
