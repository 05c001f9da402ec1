# Coverage of label_regression()'s corrected intervals in simulation: 3,000
# texts, an annotator right about 90% of the time whose errors grow with the
# covariate x, 300 coded rows drawn by review_sample(); for both families,
# both sampling weights and both predictions, over many draws: how often each
# estimator's 95% interval covers the true slope, and the intervals' widths.
# Then, for label_shares(): the coded rows a confidence-weighted sample needs
# to reach the width of a uniform sample of 300.
#
#   Rscript tools/bench_findings.R [draws]      (default 1000; make bench runs it)

suppressPackageStartupMessages(library(newrllama4))
draws <- as.integer(commandArgs(TRUE)[1])
if (is.na(draws)) draws <- 1000L
n_rows <- 3000
n_coded <- 300
intercept <- -0.3
slope <- 0.8

simulate <- function(seed) {
  withr::with_seed(seed, {
    x <- stats::rnorm(n_rows)
    truth <- stats::rbinom(n_rows, 1, stats::plogis(intercept + slope * x))
    wrong <- stats::rbinom(n_rows, 1, stats::plogis(-2.5 + x))
    label <- ifelse(wrong == 1, 1 - truth, truth)
    # the model is less sure where it is wrong, as real ones are
    sure <- ifelse(wrong == 1, stats::runif(n_rows, 0.5, 0.8), stats::runif(n_rows, 0.6, 0.99))
    prob <- ifelse(label == 1, sure, 1 - sure)
    data.frame(x = x, .label = factor(ifelse(label == 1, "yes", "no"), levels = c("yes", "no")),
               .prob_yes = prob, .prob_no = 1 - prob, .confidence = sure, truth = ifelse(truth == 1, "yes", "no"))
  })
}

# the superpopulation's coefficients: the logistic slope, and the least-squares
# slope of the truth's indicator on x, Cov(x, P(yes | x)) / Var(x)
true_slope <- c(
  binomial = slope,
  gaussian = stats::integrate(function(x) x * stats::plogis(intercept + slope * x) * stats::dnorm(x), -Inf, Inf)$value
)

cell <- function(family, weight, prediction) {
  rows <- vapply(seq_len(draws), function(seed) {
    data <- simulate(seed)
    coded <- review_sample(data, n_coded, weight = weight, seed = seed)
    fit <- label_regression(yes ~ x, data, coded, truth, family = family, prediction = prediction, seed = seed)
    table <- summary(fit)$table
    table <- table[table$term == "x", ]
    c(table$conf.low <= true_slope[[family]] & true_slope[[family]] <= table$conf.high,
      table$conf.high - table$conf.low)
  }, numeric(6))
  data.frame(family = family, weight = weight, prediction = prediction,
             corrected = mean(rows[1, ]), naive = mean(rows[2, ]), coded_only = mean(rows[3, ]),
             width_corrected = mean(rows[4, ]), width_coded_only = mean(rows[6, ]),
             width_ratio = mean(rows[4, ]) / mean(rows[6, ]))
}

started <- Sys.time()
cells <- expand.grid(family = c("gaussian", "binomial"), weight = c("uniform", "confidence"),
                     prediction = c("probs", "fit"), stringsAsFactors = FALSE)
coverage <- do.call(rbind, Map(cell, cells$family, cells$weight, cells$prediction))
cat(sprintf("Coverage of the true slope by 95%% intervals, %d draws of %d rows with %d coded\n\n",
            draws, n_rows, n_coded))
print(format(coverage, digits = 3), row.names = FALSE)

# label_shares(): the width a uniform sample of 300 reaches, and the coded rows
# a confidence-weighted sample needs for it (the mean over draws of the
# interval's width, at each size)
share_width <- function(weight, n) {
  mean(vapply(seq_len(min(draws, 200)), function(seed) {
    data <- simulate(seed)
    shares <- label_shares(data, review_sample(data, n, weight = weight, seed = seed), truth)
    corrected <- shares[shares$estimator == "corrected" & shares$label == "yes", ]
    corrected$conf.high - corrected$conf.low
  }, 0))
}
uniform_width <- share_width("uniform", n_coded)
sizes <- seq(150, n_coded, by = 25)
confidence_widths <- vapply(sizes, share_width, 0, weight = "confidence")
enough <- sizes[confidence_widths <= uniform_width]
cat(sprintf("\nShare of 'yes': a uniform sample of %d gives intervals %.4f wide; confidence-weighted samples of %s
rows give %s; the smallest as narrow: %s rows\n", n_coded, uniform_width, paste(sizes, collapse = ", "),
            paste(sprintf("%.4f", confidence_widths), collapse = ", "),
            if (length(enough)) min(enough) else "none"))
cat(sprintf("\n%.0f s\n", as.numeric(Sys.time() - started, units = "secs")))
