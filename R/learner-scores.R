# How learn_labels() and recalibrate_labels() score their candidates on the
# coded rows and decide between them: each coded row weighed by its design
# where the rows were drawn with unequal probabilities, so that accuracy, the
# choice and the guard describe the rows the labels are for.

# Each coded row's weight in a learner's fit, its scores and its guard: 1 / pi
# of the coded rows' design (checked_coded_rows()), so that they describe the
# rows as the estimators do wherever the coded rows were drawn with unequal
# probabilities: a tail drawn whole, and the rows each stratum gets at least
# (review_sample() gives every stratum five before sharing the rest in
# proportion, so most uniform draws give a small stratum a larger chance).
# NULL where the probabilities are equal or not recorded: the rows count
# alike.
design_weights <- function(design) {
  prob <- design$prob
  if (is.null(prob) || max(prob) - min(prob) <= 1e-9 * max(prob)) return(NULL)
  1 / prob
}

# The split texts of split_texts() on the variable `name` (the only one, or
# one of several): their rows and their codes' shares (a matrix, a column a
# label); NULL where no text's codes were split.
split_shares <- function(split, name = NULL) {
  if (is.null(split)) return(NULL)
  values <- if (length(split$values) == 1) split$values[[1]] else split$values[[name]]
  if (is.null(values)) NULL else list(rows = split$rows, values = values)
}

# The coded rows as a learner learns from them and is scored on: an entry a
# row, or for a text whose coders' codes were split (read_codes(disagreements
# = "split"), `shares` from split_shares()), an entry for each label its
# coders gave, weighted by that label's share of the text, so that the
# learner learns from every code as the estimators count them, and its
# accuracy is its expected agreement with the text's coders. `y`: the rows'
# codes (numbers among `labels`), the first coder's for a split text;
# `weights`: design_weights()' (NULL: alike). Returns each entry's coded row
# (`at`, an index into `rows`), code `y` and weight (NULL where all alike).
coded_entries <- function(rows, y, weights, shares, labels) {
  split <- if (is.null(shares)) rep(NA_integer_, length(rows)) else match(rows, shares$rows)
  if (all(is.na(split))) return(list(at = seq_along(rows), y = y, weights = weights))
  entries <- do.call(rbind, lapply(seq_along(rows), function(i) {
    if (is.na(split[i])) return(cbind(i, y[i], 1))
    share <- shares$values[split[i], labels]
    given <- which(share > 0)
    cbind(i, given, share[given])
  }))
  list(at = entries[, 1], y = as.integer(entries[, 2]),
       weights = (if (is.null(weights)) 1 else weights[entries[, 1]]) * entries[, 3])
}

# Each coded row's fold, named by its row of the data: a split text's entries
# (coded_entries()) share theirs.
row_folds <- function(folds, rows) stats::setNames(folds, rows)[!duplicated(rows)]

# What the manifest says of a learner whose coded rows were weighed.
weighed_by_design <- "1 / each coded row's inclusion probability (drawn with unequal probabilities)"

# Weights scaled to a mean of one, as the refit's likelihood takes them; 1 for
# none (NULL).
mean_one <- function(weights) if (is.null(weights)) 1 else weights / mean(weights)

# The mean of `x` with each value counted by its weight (NULL: alike).
weighted_average <- function(x, weights = NULL) if (is.null(weights)) mean(x) else stats::weighted.mean(x, weights)

# Each candidate's probabilities of the coded rows (labels `y`) scored: its
# mean log-loss, whether it labels each row right (a column a candidate) and
# its accuracy, the means weighted by the rows' `weights` (NULL: equally).
scored <- function(probs, y, weights = NULL) {
  rows <- seq_along(y)
  average <- function(x) weighted_average(x, weights)
  correct <- vapply(probs, function(p) max.col(p, ties.method = "first") == y, logical(length(y)))
  list(log_loss = vapply(probs, function(p) average(-log(pmax(p[cbind(rows, y)], 1e-12))), numeric(1)),
       correct = correct, accuracy = apply(correct, 2, average), weights = weights)
}

# Among the candidates `among`, those that beat the `baseline` candidate (see
# beats()), the lowest log-loss; else the baseline.
lowest_loss_beating <- function(scores, among, baseline) {
  qualified <- among[apply(scores$correct[, among, drop = FALSE], 2, beats, scores$correct[, baseline],
                           scores$weights)]
  if (length(qualified) == 0) baseline else qualified[which.min(scores$log_loss[qualified])]
}

# Whether labels right where `correct` is beat those right where `baseline` is
# by more than one standard error of the paired difference (the guard). With
# `weights`, the weighted mean difference and its linearised standard error
# (the same as the unweighted one's where the weights are equal).
beats <- function(correct, baseline, weights = NULL) {
  d <- correct - baseline
  if (all(d == 0)) return(FALSE)
  if (is.null(weights)) return(mean(d) - stats::sd(d) / sqrt(length(d)) > 0)
  n <- length(d)
  mean_d <- weighted_average(d, weights)
  mean_d - sqrt(n / (n - 1) * sum(weights^2 * (d - mean_d)^2)) / sum(weights) > 0
}
