# The figures of agreement(): the metrics of a confusion matrix, per label and
# overall, and their bootstrap intervals.

# Accuracy, macro-F1, kappa and alpha of a confusion matrix (truth in rows).
agreement_metrics <- function(confusion) {
  n <- sum(confusion)
  agreeing <- sum(diag(confusion))
  truth_totals <- rowSums(confusion)
  predicted_totals <- colSums(confusion)
  accuracy <- agreeing / n
  chance <- sum(truth_totals * predicted_totals) / n^2
  # Krippendorff's coincidence matrix holds each pair twice, once each way
  n_values <- 2 * n
  value_totals <- truth_totals + predicted_totals
  c(
    accuracy = accuracy,
    macro_f1 = mean(label_f1(confusion), na.rm = TRUE),
    cohen_kappa = nan_to_na((accuracy - chance) / (1 - chance)),
    krippendorff_alpha = nan_to_na(
      1 - (n_values - 1) * (n_values - 2 * agreeing) / (n_values^2 - sum(value_totals^2))
    )
  )
}

# An undefined ratio (0/0: chance agreement certain, a label on neither side)
# is reported as a plain NA.
nan_to_na <- function(x) {
  x[is.nan(x)] <- NA_real_
  x
}

per_label_figures <- function(confusion) {
  correct <- diag(confusion)
  n_truth <- rowSums(confusion)
  n_predicted <- colSums(confusion)
  data.frame(
    label = rownames(confusion),
    n_truth = as.integer(n_truth),
    n_predicted = as.integer(n_predicted),
    precision = nan_to_na(correct / n_predicted),
    recall = nan_to_na(correct / n_truth),
    f1 = nan_to_na(label_f1(confusion)),
    row.names = NULL
  )
}

# Percentile bootstrap bounds: a matrix with one row per metric, columns lower
# and upper (NA without resamples). A replicate draws the pairs with
# replacement, or with `units` (a list of the pairs' positions, a unit each)
# the units within their `strata` (each pair's), each pair counted `weights`
# times: rows drawn with unequal probabilities (agreement-weighted.R).
bootstrap_bounds <- function(truth, predicted, level, n_boot, seed, weights = NULL, units = NULL, strata = NULL) {
  n_metrics <- length(metric_names)
  if (n_boot == 0) return(matrix(NA_real_, n_metrics, 2))
  n_labels <- nlevels(truth)
  # each pair as the index of its cell in the (column-major) confusion matrix
  cells <- (as.integer(predicted) - 1L) * n_labels + as.integer(truth)
  units <- units %||% as.list(seq_along(cells))
  by_stratum <- split(seq_along(units), strata[vapply(units, `[[`, 1L, 1L)] %||% rep(1L, length(units)))
  count <- if (is.null(weights)) function(drawn) tabulate(cells[drawn], n_labels^2) else function(drawn) {
    tapply(weights[drawn], factor(cells[drawn], levels = seq_len(n_labels^2)), sum, default = 0)
  }
  resample <- function() {
    replicates <- vapply(seq_len(n_boot), function(i) {
      chosen <- unlist(lapply(by_stratum, function(u) u[sample.int(length(u), replace = TRUE)]), use.names = FALSE)
      agreement_metrics(matrix(count(unlist(units[chosen], use.names = FALSE)), n_labels))
    }, numeric(n_metrics))
    probs <- (1 + c(-1, 1) * level) / 2
    t(apply(replicates, 1, stats::quantile, probs = probs, na.rm = TRUE, names = FALSE))
  }
  with_optional_seed(seed, resample())
}

# 2 TP / (2 TP + FP + FN): 0 for a label on one side only, NaN for one on neither.
label_f1 <- function(confusion) {
  2 * diag(confusion) / (rowSums(confusion) + colSums(confusion))
}
