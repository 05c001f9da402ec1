# Coverage of the corrected intervals on each path issue 39 added, in
# simulation. Each uses 300 draws and asks for 92% coverage of 95% intervals
# (276 of 300): a method that covers 95% passes with probability 0.99, one that
# covers 90% with probability 0.15. Small corpora keep the whole file to a
# few minutes: CRAN's checks skip it, make test runs it.
skip_on_cran()

covers <- function(table, term, value) {
  row <- table[table$term == term, ]
  stats::setNames(row$conf.low <= value & value <= row$conf.high, row$estimator)
}

test_that("a labelled covariate with an observed outcome: corrected intervals cover, naive ones do not", {
  covered <- vapply(1:300, function(seed) {
    data <- with_applause(seed)
    coded <- review_sample(data, 150, weight = "uniform", seed = seed)
    fit <- label_regression(applause ~ yes + x, data, coded, truth, seed = seed)
    covers(summary(fit)$table, "yes", 2)
  }, logical(3))
  # measured: corrected 0.943, naive 0.000, coded rows alone 0.937
  expect_gte(mean(covered["corrected", ]), 0.92)
  expect_lt(mean(covered["naive", ]), 0.5)
})

test_that("two labelled variables in one model: each corrected by its own codes, by least squares or logistic", {
  covered <- vapply(1:300, function(seed) {
    data <- two_labels(seed)
    coded <- review_sample(data, 200, weight = "uniform", seed = seed)
    codes <- c(yes = "truth", negative = "negative_code")
    fit <- label_regression(yes ~ negative, data, coded, codes, seed = seed)
    logistic <- label_regression(yes ~ negative, data, coded, codes, family = "binomial", seed = seed)
    c(covers(summary(fit)$table, "negative", 0.3),
      logistic = covers(summary(logistic)$table, "negative", stats::qlogis(0.6) - stats::qlogis(0.3)))
  }, logical(6))
  # measured: corrected 0.940, naive 0.000, coded rows alone 0.960; logistic corrected 0.953, naive 0.000
  expect_gte(mean(covered["corrected", ]), 0.92)
  expect_lt(mean(covered["naive", ]), 0.5)
  expect_gte(sum(covered["logistic.corrected", ]), 276)
  expect_lt(mean(covered["logistic.naive", ]), 0.5)
})

test_that("the corpus target covers the corpus's own slope with narrower intervals", {
  draws <- vapply(1:300, function(seed) {
    data <- simulated_labels(1000, seed)
    corpus_slope <- unname(stats::coef(stats::lm(I(truth == "yes") ~ x, data))[2])
    coded <- review_sample(data, 300, weight = "confidence", seed = seed)
    corpus <- label_regression(yes ~ x, data, coded, truth, seed = seed, target = "corpus")
    population <- label_regression(yes ~ x, data, coded, truth, seed = seed)
    c(covers(summary(corpus)$table, "x", corpus_slope),
      width = sqrt(vcov(corpus)["x", "x"] / vcov(population)["x", "x"]))
  }, numeric(4))
  # measured: corrected 0.950, naive 0.050; the corpus interval 0.73 times the population's
  expect_gte(mean(draws["corrected", ]), 0.92)
  expect_lt(mean(draws["naive", ]), 0.5)
  expect_lt(mean(draws["width", ]), 0.9)
})

test_that("tuned, the interval is never meaningfully wider than the coded rows' alone, and narrower when it can be", {
  ratio <- function(seed, informative) {
    data <- reprobed(simulated_labels(2000, seed), seed, informative)
    coded <- review_sample(data, 200, weight = "uniform", seed = seed)
    fit <- label_regression(yes ~ x, data, coded, truth, seed = seed)
    dsl <- label_regression(yes ~ x, data, coded, truth, seed = seed, lambda = 1)
    alone <- sqrt(diag(fit$vcov$coded_only))
    c(tuned = unname(sqrt(diag(vcov(fit))) / alone), dsl = unname(sqrt(diag(vcov(dsl))) / alone))
  }
  uninformative <- rowMeans(vapply(1:40, ratio, numeric(4), informative = FALSE))
  informative <- rowMeans(vapply(1:40, ratio, numeric(4), informative = TRUE))
  # measured (intercept, slope): uninformative 1.000 and 0.999 tuned, 1.092 and 1.284 at lambda 1 (DSL);
  # informative 0.746 and 0.441
  expect_true(all(uninformative[c("tuned1", "tuned2")] <= 1.02))
  expect_true(any(uninformative[c("dsl1", "dsl2")] > 1.02))
  expect_true(all(informative[c("tuned1", "tuned2")] <= 0.85))
})

test_that("texts nested in speakers: the cluster-robust interval covers the population share, the plain one not", {
  covered <- vapply(1:300, function(seed) {
    data <- clustered(seed)
    coded <- review_sample(data, 300, weight = "uniform", seed = seed)
    robust <- label_shares(data, coded, truth, seed = seed, cluster = "speaker")
    plain <- label_regression(yes ~ 1, data, coded, truth, seed = seed)
    c(covers(transform(robust[robust$label == "yes", ], term = "yes"), "yes", clustered_share),
      plain = covers(summary(plain)$table, "(Intercept)", clustered_share)[["corrected"]])
  }, logical(4))
  # measured: cluster-robust 0.940, the same without clusters 0.810, naive (cluster-robust) 0.050
  expect_gte(mean(covered["corrected", ]), 0.92)
  expect_lt(mean(covered["plain", ]), 0.9)
  expect_lt(mean(covered["naive", ]), 0.5)
})

test_that("speakers drawn whole: exact inclusion probabilities, and intervals that cover", {
  data <- clustered(1)
  coded <- review_sample(data, 12, seed = 1, cluster = "speaker")
  expect_identical(length(unique(coded$speaker)), 12L)
  expect_identical(nrow(coded), 12L * 25L)
  expect_true(all(coded$.sample_prob == 12 / 80))
  expect_identical(attr(coded, "design")$cluster, "speaker")
  # every speaker equally likely to be drawn
  drawn <- table(unlist(lapply(1:400, function(seed) unique(review_sample(data, 12, seed = seed, cluster = "speaker")$speaker))))
  expect_gt(stats::chisq.test(as.vector(drawn))$p.value, 0.001)
  covered <- vapply(1:300, function(seed) {
    data <- clustered(seed)
    coded <- review_sample(data, 12, seed = seed, cluster = "speaker")
    fit <- label_regression(yes ~ 1, data, coded, truth, seed = seed)
    covers(summary(fit)$table, "(Intercept)", clustered_share)
  }, logical(3))
  # measured: corrected 0.953, naive 0.050
  expect_gte(mean(covered["corrected", ]), 0.92)
  expect_error(review_sample(data, 100, cluster = "speaker"), class = "newrllama4_error_invalid_argument")
  expect_error(label_shares(data, coded, truth, cluster = "nobody"), class = "newrllama4_error_invalid_argument")
})

test_that("a group missing on some rows: the estimate is for the domain of rows that have one, and covers it", {
  covered <- vapply(1:300, function(seed) {
    data <- simulated_labels(1000, seed)
    coded <- review_sample(data, 150, weight = "confidence", seed = seed)
    # missing more often on "yes" rows, coded or not: the domain's share is not the corpus's
    data$group[withr::with_seed(seed + 7, stats::runif(1000)) < ifelse(data$truth == "yes", 0.5, 0.1)] <- NA
    coded$group <- data$group[coded$.row]
    shares <- suppressMessages(label_shares(data, coded, truth, by = "group", seed = seed, target = "corpus"))
    shares <- shares[shares$label == "yes" & shares$group == "a", ]
    domain_share <- mean(data$truth[data$group %in% "a"] == "yes")
    stats::setNames(shares$conf.low <= domain_share & domain_share <= shares$conf.high, shares$estimator)
  }, logical(3))
  # measured: corrected 0.950, coded rows alone 0.947
  expect_gte(sum(covered["corrected", ]), 276)
})

# The design travels in the rows' columns (issue 50). These two use 400 draws
# and ask for 370 covered (0.925): a method that covers 95% passes with
# probability 0.989, one that covers 90% with probability 0.052.

test_that("speakers drawn whole, through a CSV file and `[`, keep their interval's coverage", {
  covered <- vapply(1:400, function(seed) {
    data <- clustered(seed)
    coded <- through_csv(review_sample(data, 12, seed = seed, cluster = "speaker"))
    coded <- coded[c(".row", "truth", ".stratum", ".stratum_rows", ".stratum_drawn", ".sample_prob", ".sampling_unit")]
    fit <- label_regression(yes ~ 1, data, coded, truth, seed = seed)
    covers(summary(fit)$table, "(Intercept)", clustered_share)[["corrected"]]
  }, logical(1))
  # measured: 0.945 (0.63-0.70 when the file lost the clusters, issue 50)
  expect_gte(mean(covered), 0.925)
})

test_that("30% of the drawn rows lost, then a CSV file: reweighted within their strata, the interval covers", {
  covered <- vapply(1:400, function(seed) {
    data <- simulated_labels(1000, seed)
    coded <- review_sample(data, 200, weight = "confidence", seed = seed)
    kept <- withr::with_seed(seed, sort(sample.int(nrow(coded), round(0.7 * nrow(coded)))))
    fit <- withCallingHandlers(label_regression(yes ~ 1, data, through_csv(coded[kept, ]), truth, seed = seed),
                               newrllama4_warning_nonresponse = function(w) invokeRestart("muffleWarning"),
                               newrllama4_message_strata_collapsed = function(m) invokeRestart("muffleMessage"))
    covers(summary(fit)$table, "(Intercept)", share_yes)[["corrected"]]
  }, logical(1))
  # measured: 0.953 (0.54 when the file hid the lost rows, issue 50)
  expect_gte(mean(covered), 0.925)
})

test_that("prediction = \"fit\" learns a constant miscalibration through its intercept, and covers", {
  draws <- vapply(1:300, function(seed) {
    data <- simulated_labels(1000, seed)
    data$.prob_yes <- stats::plogis(stats::qlogis(data$.prob_yes) + 1.5)  # leaning toward "yes" throughout
    data$.prob_no <- 1 - data$.prob_yes
    coded <- review_sample(data, 150, weight = "uniform", seed = seed)
    fit <- label_regression(yes ~ x, data, coded, truth, family = "binomial", prediction = "fit", seed = seed)
    table <- summary(fit)$table
    slope <- table[table$term == "x", ]
    c(covers(table, "x", 0.8), width = (slope$conf.high[1] - slope$conf.low[1]) / (slope$conf.high[3] - slope$conf.low[3]))
  }, numeric(4))
  # measured: corrected 0.937, its interval 0.74 of the coded rows' alone (0.927 and 0.89 without the intercept)
  expect_gte(sum(draws["corrected", ]), 276)
  expect_lt(mean(draws["width", ]), 0.85)
})

test_that("labels learned from the coded rows: the learner fitted again in its folds keeps the intervals' coverage", {
  # 100 draws of a learner on 10 features from 100 of 400 coded rows, two estimates each (the slope and the
  # intercept): 200 intervals, of which 184 must cover (0.92). A method that covers 95% passes with probability
  # 0.96 (with independent intervals), one that covers 90% with probability 0.20; tools/bench_findings_validity.R
  # runs the same learner on 1,000 rows 500 times. About a second a draw: the learner's nested choice.
  covered <- vapply(1:100, function(seed) {
    rows <- learnable_rows(400, dim = 10, seed = seed)
    coded <- review_sample(rows$data, 100, weight = "uniform", seed = seed)
    learned <- suppressMessages(learn_labels(rows$data, coded, gold, features = rows$x))
    table <- summary(label_regression(a ~ z, learned, coded, gold, seed = seed))$table
    slope <- learnable_slope()
    c(slope = covers(table, "z", slope)[["corrected"]],
      intercept = covers(table, "(Intercept)", 0.65 - slope * 0.65)[["corrected"]])
  }, logical(2))
  # measured: slope 0.95, intercept 0.96
  expect_gte(sum(covered), 184)
})
