# The simulations behind the findings tests and tools/bench_findings.R, each
# with the truth known.

# Labelled rows whose labels are right about 85% of the time, wrong more often
# where x is high (so a regression on the labels is biased).
simulated_labels <- function(n, seed, slope = 0.8, skewed = FALSE) {
  withr::with_seed(seed, {
    x <- stats::rnorm(n)
    # lognormal, standardised (issue 58)
    if (skewed) x <- (exp(x) - exp(0.5)) / sqrt((exp(1) - 1) * exp(1))
    group <- sample(c("a", "b"), n, replace = TRUE)
    truth <- stats::rbinom(n, 1, stats::plogis(-0.3 + slope * x))
    wrong <- stats::rbinom(n, 1, stats::plogis(-2.5 + x))
    label <- ifelse(wrong == 1, 1 - truth, truth)
    sure <- ifelse(wrong == 1, stats::runif(n, 0.5, 0.8), stats::runif(n, 0.6, 0.99))
    prob <- ifelse(label == 1, sure, 1 - sure)
    data.frame(x = x, group = group, text = paste("text", seq_len(n)),
               .label = factor(ifelse(label == 1, "yes", "no"), levels = c("yes", "no")),
               .prob_yes = prob, .prob_no = 1 - prob, .confidence = sure,
               truth = ifelse(truth == 1, "yes", "no"), stringsAsFactors = FALSE)
  })
}

# An observed outcome (applause) driven by the true label, whose model labels
# err more where x is high.
with_applause <- function(seed, n = 1000) {
  data <- simulated_labels(n, seed)
  withr::with_seed(seed + 1e6, data$applause <- 1 + 2 * (data$truth == "yes") + 0.5 * data$x + stats::rnorm(n))
  data
}

# Two labelled variables of the same rows: the annotation's label ("yes") and
# a boolean field ("negative"), each with its own codes. The truth: P(yes) =
# 0.3 + 0.3 negative, a linear probability model exactly; the model's labels of
# "yes" err more on negative rows, so the naive slope is biased.
two_labels <- function(seed, n = 1000) {
  withr::with_seed(seed, {
    negative <- stats::rbinom(n, 1, 0.4)
    yes <- stats::rbinom(n, 1, 0.3 + 0.3 * negative)
    wrong <- stats::rbinom(n, 1, 0.1 + 0.2 * negative)
    label <- ifelse(wrong == 1, 1 - yes, yes)
    sure <- ifelse(wrong == 1, stats::runif(n, 0.5, 0.8), stats::runif(n, 0.6, 0.99))
    field_wrong <- stats::rbinom(n, 1, 0.15)
    field <- ifelse(field_wrong == 1, 1 - negative, negative)
    field_sure <- ifelse(field_wrong == 1, stats::runif(n, 0.5, 0.8), stats::runif(n, 0.6, 0.99))
    prob_yes <- ifelse(label == 1, sure, 1 - sure)
    prob_negative <- ifelse(field == 1, field_sure, 1 - field_sure)
    data.frame(.label = factor(ifelse(label == 1, "yes", "no"), levels = c("yes", "no")), .prob_yes = prob_yes,
               .prob_no = 1 - prob_yes, .confidence = sure, negative = field == 1,
               .prob_negative_true = prob_negative, .prob_negative_false = 1 - prob_negative,
               truth = ifelse(yes == 1, "yes", "no"), negative_code = negative == 1)
  })
}

# 2,000 texts by 80 speakers of 25 each: whether a text is "yes" has an
# intraclass correlation of 0.3 within speakers (a speaker effect of variance
# 1.41 on the logit), and the model errs more on some speakers and on "yes".
clustered <- function(seed, clusters = 80, size = 25) {
  withr::with_seed(seed, {
    n <- clusters * size
    speaker <- rep(seq_len(clusters), each = size)
    truth <- stats::rbinom(n, 1, stats::plogis(-0.3 + stats::rnorm(clusters, sd = sqrt(1.41))[speaker]))
    wrong <- stats::rbinom(n, 1, stats::plogis(-2.5 + 1.5 * truth + stats::rnorm(clusters)[speaker]))
    label <- ifelse(wrong == 1, 1 - truth, truth)
    sure <- ifelse(wrong == 1, stats::runif(n, 0.5, 0.8), stats::runif(n, 0.6, 0.99))
    prob <- ifelse(label == 1, sure, 1 - sure)
    data.frame(speaker = speaker, .label = factor(ifelse(label == 1, "yes", "no"), levels = c("yes", "no")),
               .prob_yes = prob, .prob_no = 1 - prob, .confidence = sure, truth = ifelse(truth == 1, "yes", "no"))
  })
}
clustered_share <- stats::integrate(function(v) stats::plogis(-0.3 + v) * stats::dnorm(v, sd = sqrt(1.41)),
                                    -Inf, Inf)$value

# `data` labelled again by a model whose probabilities carry no information
# (uniform noise) or much (the truth's logit +-2.5 plus noise).
reprobed <- function(data, seed, informative) {
  withr::with_seed(seed, {
    yes <- data$truth == "yes"
    data$.prob_yes <- if (informative) stats::plogis(ifelse(yes, 2.5, -2.5) + stats::rnorm(nrow(data))) else
      stats::runif(nrow(data))
  })
  data$.prob_no <- 1 - data$.prob_yes
  data$.label <- factor(ifelse(data$.prob_yes > 0.5, "yes", "no"), levels = c("yes", "no"))
  data$.confidence <- pmax(data$.prob_yes, data$.prob_no)
  data
}

# `coded` rows of `data` drawn uniformly, one by one, in one stratum. They carry
# the design columns review_sample() writes, so the estimators read the design
# rather than assume it and say so (newrllama4_message_design_assumed, tested
# in test-findings-coded.R) in every test that uses them.
coded_at <- function(data, rows, prob = length(rows) / nrow(data)) {
  coded <- data[rows, , drop = FALSE]
  coded$.row <- rows
  coded$.sample_prob <- prob
  coded$.stratum <- "all"
  coded$.stratum_rows <- round(length(rows) / prob)
  coded$.stratum_drawn <- length(rows)
  coded$.sampling_unit <- ".row"
  coded
}

# survey's design for `coded` (drawn by review_sample()): strata and their rows.
survey_design <- function(coded, columns) {
  strata <- attr(coded, "design")$strata
  columns$stratum <- coded$.stratum
  columns$rows <- strata$rows[match(coded$.stratum, strata$name)]
  survey::svydesign(ids = ~1, strata = ~stratum, fpc = ~rows, data = columns)
}

# The variance of survey's weighted regression `reference` (svyglm() on
# `design`), each coded row's score divided by 1 - h, h its leverage in that
# fit (stats::hatvalues()): the HC3 correction the estimators make for rows
# drawn one by one, around survey's variance of the scores' total.
survey_vcov_hc3 <- function(reference, design) {
  x <- stats::model.matrix(reference)
  mu <- stats::fitted(reference)
  slope <- if (reference$family$family == "gaussian") 1 else mu * (1 - mu)
  scores <- x * (reference$y - mu) / (1 - stats::hatvalues(reference))
  colnames(scores) <- paste0("score", seq_len(ncol(x)))
  design$variables <- cbind(design$variables, scores)
  totals <- survey::svytotal(stats::reformulate(colnames(scores)), design)
  bread <- solve(crossprod(x, x * (stats::weights(design) * slope)))
  bread %*% stats::vcov(totals) %*% bread
}

# A stand-in for annotate_texts(features = TRUE): `n` rows of `labels` (the
# first a share `majority`), one example order whose probabilities are noise
# around the labels' shares (a weak zero-shot annotator), and `dim` features of
# which the first `informative` carry the label (a signal of `strength` each),
# and a covariate `z`, normal around 1 for the first label and 0 for the others.
# Exported functions only: tools/bench_findings_validity.R uses it too.
learnable_rows <- function(n, labels = c("a", "b"), majority = 0.65, dim = 20, informative = 2, strength = 1.2,
                           seed = 1) {
  k <- length(labels)
  withr::with_seed(seed, {
    gold <- sample(labels, n, replace = TRUE, prob = c(majority, rep((1 - majority) / (k - 1), k - 1)))
    scores <- matrix(stats::rnorm(n * k, sd = 0.5), n, k)
    x <- matrix(stats::rnorm(n * dim), n, dim)
    for (j in seq_len(informative)) x[, j] <- x[, j] + strength * (match(gold, labels) == (j - 1) %% k + 1)
    z <- stats::rnorm(n) + (gold == labels[1])
  })
  probs <- exp(scores - apply(scores, 1, max))
  probs <- probs / rowSums(probs)
  colnames(probs) <- labels
  data <- data.frame(id = seq_len(n), gold = gold, z = z,
                     .label = factor(labels[max.col(probs, ties.method = "first")], levels = labels),
                     .confidence = apply(probs, 1, max))
  for (j in seq_len(k)) data[[paste0(".prob_", labels[j])]] <- probs[, j]
  attr(data, "order_probs") <- list(probs = list(probs), confidence = data$.confidence)
  attr(data, "manifest") <- structure(list(prompt = list(calibration = "none")), class = "newrllama4_manifest")
  list(data = data, x = x)
}

# The slope of a linear probability model of the first label on z in
# learnable_rows() at `majority`: Cov(1, z) / Var(z), with z's means 1 apart.
learnable_slope <- function(majority = 0.65) majority * (1 - majority) / (1 + majority * (1 - majority))

# A rare label: 3% of the rows are truly "yes", and the model's probabilities
# tell them apart by `signal` on the logit (weakly at the default).
rare_labels <- function(n, seed, share = 0.03, signal = -2) {
  withr::with_seed(seed, {
    truth <- stats::rbinom(n, 1, share)
    prob <- stats::plogis(ifelse(truth == 1, signal, -3) + stats::rnorm(n, sd = 1.5))
    data.frame(.label = factor(ifelse(prob > 0.5, "yes", "no"), levels = c("yes", "no")), .prob_yes = prob,
               .prob_no = 1 - prob, .confidence = pmax(prob, 1 - prob), truth = ifelse(truth == 1, "yes", "no"))
  })
}

# `rows` through a CSV file, as a spreadsheet user's would come back:
# factors as text, whole numbers as integers or doubles, no attributes.
through_csv <- function(rows) {
  file <- tempfile(fileext = ".csv")
  on.exit(unlink(file))
  utils::write.csv(rows, file, row.names = FALSE)
  utils::read.csv(file)
}

# the superpopulation slope of a linear probability model of "yes" on x in
# simulated_labels(skewed = TRUE): Cov(x, plogis(-0.3 + 0.8 x)), Var(x) = 1
skewed_slope_yes <- stats::integrate(function(z) {
  x <- (exp(z) - exp(0.5)) / sqrt((exp(1) - 1) * exp(1))
  x * stats::plogis(-0.3 + 0.8 * x) * stats::dnorm(z)
}, -12, 12)$value

# the superpopulation share of "yes" in simulated_labels()
share_yes <- stats::integrate(function(x) stats::plogis(-0.3 + 0.8 * x) * stats::dnorm(x), -Inf, Inf)$value

# Two orders of two labels, a share 0.7 of them "a": order 1 is confident noise,
# order 2 tells the labels apart; their average (the labels as annotated) is
# dragged toward order 1's noise. Exported functions only, as learnable_rows().
one_good_order <- function(n, seed) {
  withr::with_seed(seed, {
    gold <- ifelse(stats::runif(n) < 0.7, "a", "b")
    odds <- list(stats::rnorm(n, sd = 3), ifelse(gold == "a", 1.2, -1.2) + stats::rnorm(n))
  })
  order_probs <- lapply(odds, function(z) cbind(a = stats::plogis(z), b = stats::plogis(-z)))
  mean_odds <- (stats::qlogis(order_probs[[1]][, 1]) + stats::qlogis(order_probs[[2]][, 1])) / 2
  mean_probs <- cbind(stats::plogis(mean_odds), stats::plogis(-mean_odds))
  data <- data.frame(id = seq_len(n), gold = gold,
                     .label = factor(c("a", "b")[max.col(mean_probs, "first")], levels = c("a", "b")),
                     .prob_a = mean_probs[, 1], .prob_b = mean_probs[, 2], .confidence = apply(mean_probs, 1, max))
  # what annotate_texts(example_orders = 2) keeps: each order's probabilities
  attr(data, "order_probs") <- list(probs = order_probs, confidence = data$.confidence)
  attr(data, "manifest") <- structure(list(prompt = list(calibration = "none")), class = "newrllama4_manifest")
  data
}

# A thin stratum (issue 58): the model says "yes" on 4% of the rows and is a
# coin flip there (half of them truly "yes"); among its "no" rows 0.52% are
# "yes", so that the share of "yes" is 0.025 in the population.
thin_stratum <- function(n, seed) {
  withr::with_seed(seed, {
    label <- stats::runif(n) < 0.04
    truth <- stats::rbinom(n, 1, ifelse(label, 0.5, 0.005 / 0.96))
    prob <- ifelse(label, stats::runif(n, 0.5, 0.65), stats::runif(n, 0.01, 0.2))
  })
  data.frame(.label = factor(ifelse(label, "yes", "no"), levels = c("yes", "no")), .prob_yes = prob,
             .prob_no = 1 - prob, .confidence = pmax(prob, 1 - prob), truth = ifelse(truth == 1, "yes", "no"))
}

# Rows of `data` drawn in the strata of its labels, `draws` a named count per
# label, with the design columns review_sample() writes: a sample drawn by
# hand, such as one drawn before review_sample() had a floor per stratum.
coded_in_strata <- function(data, draws, seed) {
  rows <- withr::with_seed(seed, sort(unlist(lapply(names(draws), function(label) {
    mine <- which(data$.label == label)
    mine[sample.int(length(mine), draws[[label]])]
  }))))
  coded <- data[rows, , drop = FALSE]
  stratum <- as.character(coded$.label)
  sizes <- table(as.character(data$.label))
  coded$.row <- rows
  coded$.stratum <- stratum
  coded$.stratum_rows <- as.vector(sizes[stratum])
  coded$.stratum_drawn <- unlist(draws)[stratum]
  coded$.sample_prob <- coded$.stratum_drawn / coded$.stratum_rows
  coded$.sampling_unit <- ".row"
  coded
}
