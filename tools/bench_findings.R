# Coverage and width of label_regression()'s and label_shares()'s intervals in
# simulation, over the grid of issue 39: the label as outcome or covariate, two
# labelled variables, texts clustered in speakers, lambda tuned or 1, the
# population or the corpus as target, uniform or confidence-weighted samples;
# and the width of the tuned interval against the coded rows' alone when the
# probabilities carry no information and when they carry much. The
# simulations are tests/testthat/helper-findings.R's, as the tests use them.
#
#   Rscript tools/bench_findings.R [draws]      (default 1000; make bench runs it)

suppressPackageStartupMessages(library(newrllama4))
source(file.path("tests", "testthat", "helper-findings.R"))
draws <- as.integer(commandArgs(TRUE)[1])
if (is.na(draws)) draws <- 1000L

# the superpopulation slope of the truth's indicator on x, and the logistic one
slope_lpm <- stats::integrate(function(x) x * stats::plogis(-0.3 + 0.8 * x) * stats::dnorm(x), -Inf, Inf)$value

# One draw of a setting: whether each estimator's interval for `term` covers
# `value`, their widths and lambda.
one_draw <- function(fit, term, value) {
  table <- summary(fit)$table
  table <- table[table$term == term, ]
  c(table$conf.low <= value & value <= table$conf.high, width = table$conf.high - table$conf.low,
    lambda = fit$lambda)
}

settings <- list(
  "label outcome, binomial, uniform, tuned, population" = function(seed) {
    data <- simulated_labels(2000, seed)
    coded <- review_sample(data, 200, weight = "uniform", seed = seed)
    one_draw(label_regression(yes ~ x, data, coded, truth, family = "binomial", seed = seed), "x", 0.8)
  },
  "label outcome, binomial, confidence, tuned, population" = function(seed) {
    data <- simulated_labels(2000, seed)
    coded <- review_sample(data, 200, weight = "confidence", seed = seed)
    one_draw(label_regression(yes ~ x, data, coded, truth, family = "binomial", seed = seed), "x", 0.8)
  },
  "label outcome, binomial, uniform, lambda 1, population" = function(seed) {
    data <- simulated_labels(2000, seed)
    coded <- review_sample(data, 200, weight = "uniform", seed = seed)
    one_draw(label_regression(yes ~ x, data, coded, truth, family = "binomial", seed = seed, lambda = 1), "x", 0.8)
  },
  "label outcome, gaussian, confidence, tuned, population" = function(seed) {
    data <- simulated_labels(2000, seed)
    coded <- review_sample(data, 200, weight = "confidence", seed = seed)
    one_draw(label_regression(yes ~ x, data, coded, truth, seed = seed), "x", slope_lpm)
  },
  "label outcome, gaussian, confidence, tuned, corpus" = function(seed) {
    data <- simulated_labels(2000, seed)
    corpus_slope <- unname(stats::coef(stats::lm(I(truth == "yes") ~ x, data))[2])
    coded <- review_sample(data, 200, weight = "confidence", seed = seed)
    one_draw(label_regression(yes ~ x, data, coded, truth, seed = seed, target = "corpus"), "x", corpus_slope)
  },
  "labelled covariate, observed outcome, uniform, tuned" = function(seed) {
    data <- with_applause(seed)
    coded <- review_sample(data, 150, weight = "uniform", seed = seed)
    one_draw(label_regression(applause ~ yes + x, data, coded, truth, seed = seed), "yes", 2)
  },
  "labelled covariate, observed outcome, confidence, tuned" = function(seed) {
    data <- with_applause(seed)
    coded <- review_sample(data, 150, weight = "confidence", seed = seed)
    one_draw(label_regression(applause ~ yes + x, data, coded, truth, seed = seed), "yes", 2)
  },
  "two labelled variables, uniform, tuned" = function(seed) {
    data <- two_labels(seed)
    coded <- review_sample(data, 200, weight = "uniform", seed = seed)
    one_draw(label_regression(yes ~ negative, data, coded, c(yes = "truth", negative = "negative_code"),
                              seed = seed), "negative", 0.3)
  },
  "clustered (ICC 0.3), rows drawn, without cluster =" = function(seed) {
    data <- clustered(seed)
    coded <- review_sample(data, 300, weight = "uniform", seed = seed)
    one_draw(label_regression(yes ~ 1, data, coded, truth, seed = seed), "(Intercept)", clustered_share)
  },
  "clustered (ICC 0.3), rows drawn, cluster-robust" = function(seed) {
    data <- clustered(seed)
    coded <- review_sample(data, 300, weight = "uniform", seed = seed)
    one_draw(label_regression(yes ~ 1, data, coded, truth, seed = seed, cluster = "speaker"), "(Intercept)",
             clustered_share)
  },
  "clustered (ICC 0.3), 12 of 80 speakers drawn whole" = function(seed) {
    data <- clustered(seed)
    coded <- review_sample(data, 12, seed = seed, cluster = "speaker")
    one_draw(label_regression(yes ~ 1, data, coded, truth, seed = seed), "(Intercept)", clustered_share)
  }
)

started <- Sys.time()
coverage <- do.call(rbind, lapply(names(settings), function(name) {
  rows <- vapply(seq_len(draws), settings[[name]], numeric(7))
  data.frame(setting = name, corrected = mean(rows[1, ]), naive = mean(rows[2, ]), coded_only = mean(rows[3, ]),
             width_ratio = mean(rows[4, ]) / mean(rows[6, ]), lambda = mean(rows[7, ]))
}))
cat(sprintf("Coverage of 95%% intervals and width of the corrected over the coded rows' alone, %d draws each\n\n",
            draws))
print(format(coverage, digits = 3), row.names = FALSE)

# Width of the tuned and the untuned (lambda 1, DSL) intervals over the coded
# rows' alone, slope and intercept of yes ~ x on 2,000 rows with 200 coded,
# when the probabilities carry no information (uniform noise) and when they
# carry much (the truth's logit +-2.5 plus noise).
width_ratios <- function(informative) {
  rows <- vapply(seq_len(draws), function(seed) {
    data <- reprobed(simulated_labels(2000, seed), seed, informative)
    coded <- review_sample(data, 200, weight = "uniform", seed = seed)
    tuned <- label_regression(yes ~ x, data, coded, truth, seed = seed)
    dsl <- label_regression(yes ~ x, data, coded, truth, seed = seed, lambda = 1)
    c(sqrt(diag(vcov(tuned))), sqrt(diag(vcov(dsl))), sqrt(diag(tuned$vcov$coded_only)), tuned$lambda)
  }, numeric(7))
  data.frame(probabilities = if (informative) "informative" else "uninformative",
             tuned_intercept = mean(rows[1, ]) / mean(rows[5, ]), tuned_slope = mean(rows[2, ]) / mean(rows[6, ]),
             dsl_intercept = mean(rows[3, ]) / mean(rows[5, ]), dsl_slope = mean(rows[4, ]) / mean(rows[6, ]),
             lambda = mean(rows[7, ]))
}
cat("\nStandard error over the coded rows' alone (mean over draws), tuned and at lambda 1\n\n")
print(format(rbind(width_ratios(FALSE), width_ratios(TRUE)), digits = 3), row.names = FALSE)
cat(sprintf("\n%.0f s\n", as.numeric(Sys.time() - started, units = "secs")))
