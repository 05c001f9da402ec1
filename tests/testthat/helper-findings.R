# The simulations behind the findings tests and tools/bench_findings.R, each
# with the truth known.

# Labelled rows whose labels are right about 85% of the time, wrong more often
# where x is high (so a regression on the labels is biased); x is drawn by
# `covariate` (skewed(): a lognormal one).
simulated_labels <- function(n, seed, slope = 0.8, covariate = stats::rnorm) {
  withr::with_seed(seed, {
    x <- covariate(n)
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
    speaker <- rep(seq_len(clusters), times = rep_len(size, clusters))
    n <- length(speaker)
    truth <- stats::rbinom(n, 1, stats::plogis(-0.3 + stats::rnorm(clusters, sd = sqrt(1.41))[speaker]))
    wrong <- stats::rbinom(n, 1, stats::plogis(-2.5 + 1.5 * truth + stats::rnorm(clusters)[speaker]))
    label <- ifelse(wrong == 1, 1 - truth, truth)
    sure <- ifelse(wrong == 1, stats::runif(n, 0.5, 0.8), stats::runif(n, 0.6, 0.99))
    prob <- ifelse(label == 1, sure, 1 - sure)
    data.frame(speaker = speaker, .label = factor(ifelse(label == 1, "yes", "no"), levels = c("yes", "no")),
               .prob_yes = prob, .prob_no = 1 - prob, .confidence = sure, truth = ifelse(truth == 1, "yes", "no"))
  })
}
# clustered() by 60 speakers whose texts number as a lognormal's draws (median 20, at least 2), `spread` the sd of
# its log: a few speak much, as in parliaments and on social media.
speakers_of_sizes <- function(seed, spread, speakers = 60) clustered(seed, speakers, speaker_sizes(seed, spread, speakers))
speaker_sizes <- function(seed, spread, speakers = 60) {
  withr::with_seed(seed + 1e6, pmax(2, round(exp(stats::rnorm(speakers, log(20), spread)))))
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

# `n` speakers of `data` drawn whole and uniformly from seed `seed`, as review_sample(cluster = "speaker") drew them
# before it took the largest whole: the design columns of one stratum of every row.
speakers_drawn_uniformly <- function(data, n, seed) {
  speakers <- unique(data$speaker)
  drawn <- withr::with_seed(seed, sample(speakers, n))
  coded <- coded_at(data, which(data$speaker %in% drawn), n / length(speakers))
  coded$.stratum_rows <- nrow(data)
  coded$.sampling_unit <- "speaker"
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
# fit (stats::hatvalues()): the HC2 correction the estimators make for rows
# drawn one by one, around survey's variance of the scores' total.
survey_vcov_hc2 <- function(reference, design) {
  x <- stats::model.matrix(reference)
  mu <- stats::fitted(reference)
  slope <- if (reference$family$family == "gaussian") 1 else mu * (1 - mu)
  scores <- x * (reference$y - mu) / sqrt(1 - stats::hatvalues(reference))
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

# Rows a learner gets right but for 2% of them, coin flips its features
# cannot tell (learnable_rows(), strongly told apart): 150 coded rows of 700
# see none of its errors in about a fifth of draws.
rarely_wrong <- function(seed, n = 700, flips = 14) {
  rows <- learnable_rows(n, dim = 10, strength = 6, seed = seed)
  hard <- withr::with_seed(seed + 1e5, sample(n, flips))
  rows$data$gold[hard] <- withr::with_seed(seed + 2e5, sample(c("a", "b"), flips, replace = TRUE))
  rows
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

# `expr` without its messages and warnings: the benchmarks' draws, whose
# estimators say what they do (collapsed strata, nonresponse) every time.
quietly <- function(expr) suppressMessages(suppressWarnings(expr))

# A skewed covariate: lognormal, standardised in the population (mean 0, sd 1),
# so a few rows lie far out in its right tail.
standardised_lognormal <- function(z) (exp(z) - exp(0.5)) / sqrt((exp(1) - 1) * exp(1))
skewed <- function(n) standardised_lognormal(stats::rnorm(n))

# the superpopulation slope of a linear probability model of "yes" on x in
# simulated_labels(covariate = skewed): Cov(x, plogis(-0.3 + 0.8 x)), Var(x) = 1
skewed_slope_yes <- stats::integrate(function(z) {
  x <- standardised_lognormal(z)
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

# Texts as users have them, for tools/bench_coverage_matrix.R: `speakers` of
# `size` texts each, a skewed covariate x, whether a text is "yes" (truth; its
# logit 0.8 x, plus a speaker effect of sd `speaker_sd`), an observed outcome y
# (1 + 2 yes + 0.5 x + noise), and a model whose labels lean toward "yes" (+1 on
# the logit) and err more where x is high and on some speakers. With `thin`,
# the model says "yes" on 4% of the rows, a coin flip there, and "yes" is rare
# (2.5%). With `orders = 2` a second example order, confident noise, is averaged
# into the labels as annotated. `dim` features (0 for none, to compute the
# population's values fast): two carry the label, five the speaker. A list
# (data, features), as learnable_rows(); exported functions only.
speaker_rows <- function(speakers, size, seed, speaker_sd = 0, thin = FALSE, orders = 1, dim = 20) {
  speaker <- rep(seq_len(speakers), times = rep_len(size, speakers))
  n <- length(speaker)
  withr::with_seed(seed, {
    x <- skewed(n)
    effect <- stats::rnorm(speakers, sd = speaker_sd)[speaker]
    if (thin) {
      said <- stats::runif(n) < 0.04
      truth <- stats::rbinom(n, 1, stats::plogis(ifelse(said, 0, -5.3) + 0.8 * x + effect))
      odds <- ifelse(said, 1, -1) * ifelse(said, stats::qlogis(stats::runif(n, 0.5, 0.7)), 4)
    } else {
      truth <- stats::rbinom(n, 1, stats::plogis(-0.6 + 0.8 * x + effect))
      wrong <- stats::rbinom(n, 1, stats::plogis(-2 + 0.8 * x + stats::rnorm(speakers, sd = speaker_sd)[speaker]))
      sure <- ifelse(wrong == 1, stats::runif(n, 0.5, 0.8), stats::runif(n, 0.6, 0.99))
      odds <- 1 + ifelse(xor(truth == 1, wrong == 1), 1, -1) * stats::qlogis(sure)
    }
    y <- 1 + 2 * truth + 0.5 * x + stats::rnorm(n)
    noise <- stats::rnorm(n, sd = 3)
    features <- matrix(stats::rnorm(n * dim), n, dim)
    voices <- matrix(stats::rnorm(speakers * min(5, max(dim - 2, 0))), speakers)
  })
  order_probs <- lapply(list(odds, noise)[seq_len(orders)],
                        function(z) cbind(yes = stats::plogis(z), no = stats::plogis(-z)))
  mean_odds <- Reduce(`+`, lapply(order_probs, function(p) stats::qlogis(p[, 1]))) / orders
  prob <- stats::plogis(mean_odds)
  if (dim > 0) {
    features[, 1:2] <- features[, 1:2] + 1.2 * cbind(truth, 1 - truth)
    features[, 2 + seq_len(ncol(voices))] <- features[, 2 + seq_len(ncol(voices))] * 0.3 + voices[speaker, ]
  }
  data <- data.frame(speaker = speaker, x = x, y = y, truth = ifelse(truth == 1, "yes", "no"),
                     .label = factor(ifelse(prob > 0.5, "yes", "no"), levels = c("yes", "no")),
                     .prob_yes = prob, .prob_no = 1 - prob, .confidence = pmax(prob, 1 - prob))
  attr(data, "order_probs") <- list(probs = order_probs, confidence = data$.confidence)
  attr(data, "manifest") <- structure(list(prompt = list(calibration = "none")), class = "newrllama4_manifest")
  list(data = data, features = features)
}

# `labelled` (a labels annotation with one order) as annotate_texts() gives the
# same answers for a schema field: a logical column for labels yes/no, else a
# factor, with `.prob_<field>_<value>`, `.confidence_<field>` and the field's
# record of probabilities.
as_field <- function(labelled, field, boolean = FALSE) {
  labels <- levels(labelled$.label)
  values <- if (boolean) c("true", "false") else labels
  data <- labelled[!names(labelled) %in% c(".label", ".confidence", paste0(".prob_", labels))]
  data[[field]] <- if (boolean) as.character(labelled$.label) == labels[1] else labelled$.label
  for (k in seq_along(labels)) data[[paste0(".prob_", field, "_", values[k])]] <- labelled[[paste0(".prob_", labels[k])]]
  data[[paste0(".confidence_", field)]] <- labelled$.confidence
  record <- attr(labelled, "order_probs")
  record$probs <- lapply(record$probs, function(p) `colnames<-`(p, values))
  attr(data, "field_order_probs") <- stats::setNames(list(record), field)
  attr(data, "manifest") <- attr(labelled, "manifest")
  data
}

# Texts by speakers whose hidden states carry the speaker: `speakers` of `size`
# texts each, two labels, whether a text is "a" with a speaker effect of sd 1.5
# on the logit (texts of one speaker alike, as they are), and 12 features: ten
# a speaker's texts share (its voice, plus a little noise of each text's) and
# two that carry the label. The model's own probabilities are noise around the
# labels' shares (a weak annotator). Exported functions only, as
# learnable_rows(): tools/bench_findings_validity.R uses it too.
speakers_learnable <- function(seed, speakers = 60, size = 25) {
  n <- speakers * size
  withr::with_seed(seed, {
    speaker <- rep(seq_len(speakers), each = size)
    gold <- ifelse(stats::runif(n) < stats::plogis(0.5 + stats::rnorm(speakers, sd = 1.5)[speaker]), "a", "b")
    voice <- matrix(stats::rnorm(speakers * 10), speakers, 10)[speaker, ] + matrix(stats::rnorm(n * 10, sd = 0.3), n)
    x <- cbind(voice, matrix(stats::rnorm(n * 2), n) + 1.2 * (gold == "a"))
    scores <- matrix(stats::rnorm(n * 2, sd = 0.5), n, 2)
  })
  probs <- exp(scores) / rowSums(exp(scores))
  data <- data.frame(speaker = speaker, gold = gold,
                     .label = factor(c("a", "b")[max.col(probs, ties.method = "first")], levels = c("a", "b")),
                     .prob_a = probs[, 1], .prob_b = probs[, 2], .confidence = apply(probs, 1, max))
  attr(data, "order_probs") <- list(probs = list(unname(probs)), confidence = data$.confidence)
  attr(data, "manifest") <- structure(list(prompt = list(calibration = "none")), class = "newrllama4_manifest")
  list(data = data, x = x)
}

# the superpopulation share of "a" in speakers_learnable()
speakers_share <- stats::integrate(function(v) stats::plogis(0.5 + v) * stats::dnorm(v, sd = 1.5), -Inf, Inf)$value

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

# Coded rows whose texts at positions `disputed` had two coders, one of them
# coding the other label ("yes" for "no", and the reverse), as
# read_codes(disagreements = "split") gives them: each code a row weighted 1 / 2.
split_between_coders <- function(coded, disputed) {
  coded$.code_weight <- 1
  coded$.code_weight[disputed] <- 0.5
  other <- coded[disputed, ]
  other$truth <- ifelse(other$truth == "yes", "no", "yes")
  coded <- rbind(coded, other)
  coded[order(coded$.row), ]
}

# learnable_rows() whose features column keeps several kinds of state (`kinds`,
# 20 dimensions each), of which `informative` carries learnable_rows()'
# features and the others noise.
rows_with_feature_kinds <- function(n, informative = "middle", kinds = c("last", "middle"), seed = 1, ...) {
  rows <- learnable_rows(n, majority = 0.5, seed = seed, ...)
  values <- withr::with_seed(seed + 1000, matrix(stats::rnorm(n * 20 * length(kinds)), n))
  k <- match(informative, kinds)
  values[, (k - 1) * 20 + 1:20] <- rows$x
  states <- c(last = "last_token", middle = "last_token_layer_1", mean = "text_mean_layer_1")[kinds]
  rows$data$.features <- features_from_matrix(values, list(model = "simulated", state = unname(states)))
  rows$data
}

# Eight groups, one of 3% of 3,000 rows: 150 rows drawn by confidence give it a few coded rows, whose codes often
# agree.
small_level_world <- function(seed) {
  withr::with_seed(seed, {
    shares <- c(0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.2, 0.2)
    group <- sample(paste0("g", 1:8), 3000, replace = TRUE, prob = shares)
    truth <- stats::rbinom(3000, 1, stats::plogis(-0.3 + seq(-0.8, 0.8, length.out = 8)[as.integer(factor(group))]))
    wrong <- stats::rbinom(3000, 1, stats::plogis(-1.5 + 0.5 * (group %in% c("g1", "g2"))))
    label <- ifelse(wrong == 1, 1 - truth, truth)
    sure <- ifelse(wrong == 1, stats::runif(3000, 0.5, 0.8), stats::runif(3000, 0.6, 0.99))
    prob <- ifelse(label == 1, sure, 1 - sure)
    data.frame(group = factor(group, levels = paste0("g", 8:1)),
               .label = factor(ifelse(label == 1, "yes", "no"), levels = c("yes", "no")), .prob_yes = prob,
               .prob_no = 1 - prob, .confidence = sure, truth = ifelse(truth == 1, "yes", "no"))
  })
}

# A rating from 1 to 5 answered for 3,000 rows in eight groups, one of 3%, the model's answer a step off the coder's in
# 40% of rows (`steps` in that group): 150 coded rows give the small group a few, whose residuals are often all 0.
rated_world <- function(seed, steps = 1) {
  withr::with_seed(seed, {
    shares <- c(0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.2, 0.2)
    group <- factor(sample(paste0("g", 1:8), 3000, replace = TRUE, prob = shares), levels = paste0("g", 8:1))
    centre <- c(g1 = 4.3, g2 = 3.5, g3 = 3, g4 = 3, g5 = 3.2, g6 = 3.4, g7 = 2.8, g8 = 3)[as.character(group)]
    rating <- pmin(pmax(round(centre + stats::rnorm(3000, 0, ifelse(group == "g1", 0.6, 1.1))), 1), 5)
    step <- sample(c(-1, 0, 1), 3000, replace = TRUE, prob = c(0.2, 0.6, 0.2)) * ifelse(group == "g1", steps, 1)
    answer <- pmin(pmax(rating + step, 1), 5)
    data.frame(group = group, rating = answer, .label = factor(ifelse(answer >= 4, "high", "low")),
               .prob_high = 0.5, .prob_low = 0.5, .confidence = stats::runif(3000, 0.5, 1), truth = rating)
  })
}

# A rating from 1 to 5 of `speakers` x `size` texts, whose speakers differ (sd 0.7 on the scale) and whose model's
# answers lean by speaker (`lean`, sd on the scale) and err by 0.6 on each text: coded by drawing speakers whole.
rated_speakers <- function(seed, speakers = 60, size = 25, lean = 0.5) {
  withr::with_seed(seed, {
    speaker <- rep(seq_len(speakers), each = size)
    x <- stats::rnorm(speakers * size)
    on_scale <- function(value) pmin(pmax(round(value), 1), 5)
    rating <- on_scale(3 + 0.4 * x + stats::rnorm(speakers, 0, 0.7)[speaker] + stats::rnorm(length(x), 0, 0.8))
    answer <- on_scale(rating + 0.3 + stats::rnorm(speakers, 0, lean)[speaker] + stats::rnorm(length(x), 0, 0.6))
    data.frame(speaker = speaker, x = x, rating = answer, .label = factor(ifelse(answer >= 4, "high", "low")),
               .prob_high = 0.5, .prob_low = 0.5, .confidence = stats::runif(length(x), 0.5, 1), truth = rating)
  })
}

# speaker_rows()' 60 speakers of 25 texts (speaker effects of sd 1, no features) in parties: "small" the first 3.
speakers_in_parties <- function(seed) {
  data <- speaker_rows(60, 25, seed, speaker_sd = 1, dim = 0)$data
  data$party <- factor(ifelse(data$speaker <= 3, "small", ifelse(data$speaker %% 2 == 0, "a", "b")))
  data
}

# A count the model answers for 3,000 rows (Poisson with mean about 3, or `heavy`: negative binomial of size 0.5),
# within one of the truth on most rows and ten times it on a share `wild` of them, as a model that misreads a
# unit would be.
counted_world <- function(seed, wild = 0.01, heavy = FALSE) {
  withr::with_seed(seed, {
    x <- stats::rnorm(3000)
    mean <- exp(1 + 0.3 * x)
    truth <- if (heavy) stats::rnbinom(3000, size = 0.5, mu = mean) else stats::rpois(3000, mean)
    off <- stats::runif(3000) < wild
    answer <- ifelse(off, truth * 10, pmax(truth + sample(c(-1, 0, 1), 3000, TRUE, c(0.15, 0.7, 0.15)), 0))
    data.frame(x = x, count = answer, .label = factor(ifelse(answer > 2, "many", "few")), .prob_many = 0.5,
               .prob_few = 0.5, .confidence = stats::runif(3000, 0.5, 1), truth = truth, wild = off & truth > 0)
  })
}
