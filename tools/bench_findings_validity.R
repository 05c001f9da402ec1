# Coverage of label_regression()'s and label_shares()'s intervals off the happy
# path (issue 50): the sample's design through files, read_codes() and `[`,
# drawn rows lost, and the other cases of the issue's table. Each case is a
# function of a seed that simulates one data set (tests/testthat/
# helper-findings.R's simulations, as the tests use them), estimates and
# returns a named numeric vector: `covered` (1 if the 95% interval covers the
# truth) and whatever else the case measures (widths, ratios), each averaged
# over the draws. A draw that stops with one of the package's classed errors
# is counted, with its class, instead: a case may stop on purpose.
#
#   Rscript tools/bench_findings_validity.R [draws] [case pattern]
#     (default 1000 draws and every case; make bench runs it)

suppressPackageStartupMessages(library(newrllama4))
source(file.path("tests", "testthat", "helper-findings.R"))
arguments <- commandArgs(TRUE)
draws <- as.integer(arguments[1])
if (is.na(draws)) draws <- 1000L
pattern <- if (length(arguments) >= 2) arguments[2] else ""

# Whether the corrected interval for `term` covers `value`, and its width.
corrected_interval <- function(fit, term, value) {
  interval <- confint(fit)[term, ]
  c(covered = interval[[1]] <= value && value <= interval[[2]], width = interval[[2]] - interval[[1]])
}

# `rows` through a CSV file, as a spreadsheet user's would come back:
# factors as text, whole numbers as integers or doubles, no attributes.
through_csv <- function(rows) {
  file <- tempfile(fileext = ".csv")
  on.exit(unlink(file))
  utils::write.csv(rows, file, row.names = FALSE)
  utils::read.csv(file)
}

# the superpopulation share of "yes" in simulated_labels()
share_yes <- stats::integrate(function(x) stats::plogis(-0.3 + 0.8 * x) * stats::dnorm(x), -Inf, Inf)$value

quietly <- function(expr) suppressMessages(suppressWarnings(expr))

cases <- list(
  "12 of 80 speakers drawn whole, through a CSV file" = function(seed) {
    data <- clustered(seed)
    coded <- through_csv(review_sample(data, 12, seed = seed, cluster = "speaker"))
    corrected_interval(quietly(label_regression(yes ~ 1, data, coded, truth, seed = seed)), "(Intercept)",
                       clustered_share)
  },
  "12 of 80 speakers drawn whole, columns chosen with `[`" = function(seed) {
    data <- clustered(seed)
    coded <- review_sample(data, 12, seed = seed, cluster = "speaker")
    coded <- coded[c(".row", "truth", ".stratum", ".stratum_rows", ".stratum_drawn", ".sample_prob", ".sampling_unit")]
    corrected_interval(quietly(label_regression(yes ~ 1, data, coded, truth, seed = seed)), "(Intercept)",
                       clustered_share)
  },
  "12 of 80 speakers drawn whole, 10% of their rows uncodable, a CSV file" = function(seed) {
    data <- clustered(seed)
    coded <- review_sample(data, 12, seed = seed, cluster = "speaker")
    coded$truth[withr::with_seed(seed, stats::runif(nrow(coded)) < 0.1)] <- NA
    corrected_interval(quietly(label_regression(yes ~ 1, data, through_csv(coded), truth, seed = seed)), "(Intercept)",
                       clustered_share)
  },
  "30% of the drawn rows lost (confidence weights), then a CSV file" = function(seed) {
    data <- simulated_labels(2000, seed)
    coded <- review_sample(data, 300, weight = "confidence", seed = seed)
    kept <- withr::with_seed(seed, sort(sample.int(nrow(coded), round(0.7 * nrow(coded)))))
    coded <- through_csv(coded[kept, ])
    corrected_interval(quietly(label_regression(yes ~ 1, data, coded, truth, seed = seed)), "(Intercept)",
                       share_yes)
  },
  "a rare label (3%), 60 of 2000 rows drawn by confidence: its strata of one coded row collapsed" = function(seed) {
    data <- rare_labels(2000, seed)
    coded <- review_sample(data, 60, weight = "confidence", seed = seed)
    shares <- quietly(label_shares(data, coded, truth, seed = seed))
    share <- shares[shares$label == "yes" & shares$estimator == "corrected", ]
    c(covered = share$conf.low <= 0.03 && 0.03 <= share$conf.high, width = share$conf.high - share$conf.low)
  }
)
cases <- cases[grepl(pattern, names(cases))]

# One draw of a case: its measures, or the class of the error it stopped with.
one_draw <- function(case, seed) {
  tryCatch(case(seed), newrllama4_error = function(e) structure(NA_real_, stopped = class(e)[[1]]))
}

started <- Sys.time()
results <- lapply(names(cases), function(name) {
  outcomes <- lapply(seq_len(draws), one_draw, case = cases[[name]])
  stopped <- vapply(outcomes, function(o) if (is.null(attr(o, "stopped"))) NA_character_ else attr(o, "stopped"), "")
  measured <- do.call(rbind, outcomes[is.na(stopped)])
  row <- data.frame(case = name, draws = draws, stopped = mean(!is.na(stopped)),
                    errors = paste(unique(stats::na.omit(stopped)), collapse = ", "), stringsAsFactors = FALSE)
  if (!is.null(measured)) row <- cbind(row, t(colMeans(measured)))
  row
})
columns <- unique(unlist(lapply(results, names)))
table <- do.call(rbind, lapply(results, function(row) {
  row[setdiff(columns, names(row))] <- NA
  row[columns]
}))
cat(sprintf("Coverage of 95%% intervals off the happy path (issue 50), %d draws each\n\n", draws))
print(format(table, digits = 3), row.names = FALSE)
cat(sprintf("\n%.0f s\n", as.numeric(Sys.time() - started, units = "secs")))
