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
# times: rows drawn with unequal probabilities (agreement-weighted.R). Drawn
# by a design (`fraction`, each pair's unit's inclusion probability in its
# round), a replicate is Rao and Wu's (stratum_draw()), on the part of each
# weight its round's draw gives (`drawn_share`; the rest is later rounds'
# share, which no draw of this round moves). Units that add the same counts
# to the confusion matrix (for pairs drawn one by one, those of one cell and
# one weight) are one kind, and how many of each kind a stratum's replicate
# takes is multinomial: so a replicate costs the kinds, not the pairs
# (100,000 pairs took 10 s at 1,000 replicates drawn pair by pair).
bootstrap_bounds <- function(truth, predicted, level, n_boot, seed, weights = NULL, units = NULL, strata = NULL,
                             fraction = NULL, drawn_share = NULL) {
  n_metrics <- length(metric_names)
  if (n_boot == 0) return(matrix(NA_real_, n_metrics, 2))
  n_labels <- nlevels(truth)
  # each pair as the index of its cell in the (column-major) confusion matrix
  cells <- (as.integer(predicted) - 1L) * n_labels + as.integer(truth)
  weights <- weights %||% rep(1, length(cells))
  drawn_share <- drawn_share %||% rep(1, length(cells))
  units <- units %||% as.list(seq_along(cells))
  first <- vapply(units, `[[`, 1L, 1L)
  kind <- if (all(lengths(units) == 1L)) paste(cells[first], weights[first], drawn_share[first]) else {
    vapply(units, function(u) paste(sort(paste(cells[u], weights[u], drawn_share[u])), collapse = " "), "")
  }
  count <- function(u, w) as.vector(tapply(w[u], factor(cells[u], levels = seq_len(n_labels^2)), sum, default = 0))
  kinds <- lapply(split(seq_along(units), strata[first] %||% rep(1L, length(units))), function(members) {
    key <- kind[members]
    alike <- match(key, unique(key))
    kept <- members[!duplicated(key)]
    list(units = length(members), frequency = tabulate(alike),
         draw = stratum_draw(length(members), fraction[first[members[[1]]]]),
         counts = vapply(kept, function(u) count(units[[u]], weights), numeric(n_labels^2)),
         drawn = vapply(kept, function(u) count(units[[u]], weights * drawn_share), numeric(n_labels^2)))
  })
  resample <- function() {
    confusions <- Reduce(`+`, lapply(kinds, function(k) {
      taken <- if (k$draw$draws > 0) stats::rmultinom(n_boot, k$draw$draws, k$frequency) else
        matrix(0, length(k$frequency), n_boot)
      as.vector(k$counts %*% k$frequency) +
        k$drawn %*% ((k$draw$keep - 1) * k$frequency + k$draw$each * taken)
    }))
    replicates <- apply(confusions, 2, function(cells) agreement_metrics(matrix(cells, n_labels)))
    probs <- (1 + c(-1, 1) * level) / 2
    t(apply(replicates, 1, stats::quantile, probs = probs, na.rm = TRUE, names = FALSE))
  }
  with_optional_seed(seed, resample())
}

# The accuracy's interval of `agreeing` pairs of `n` drawn one by one
# (`bounds`, Wilson's at the pairs with t on n - 1 df) with Brown, Cai and
# DasGupta's (2001) modification: where one or two pairs (up to three past 50
# pairs) lie on one side, that side's bound is Poisson's one-sided one: half
# the chi-squared quantile at 1 - level on 2 x df, over n. Wilson's interval
# of 19 agreeing pairs of 20 ends at 0.992, so for an accuracy just above it
# only 20 of 20 covers: its exact coverage over accuracies of 0.5-0.999 fell
# to 0.85-0.93 at 10-300 pairs, 0.926-0.95 so modified (the mean unchanged,
# 0.952-0.983).
pairs_bounds <- function(bounds, agreeing, n, level) {
  few <- if (n <= 50) 2 else 3
  poisson <- function(x) stats::qchisq(1 - level, 2 * x) / 2 / n
  disagreeing <- n - agreeing
  if (agreeing >= 1 && agreeing <= few) bounds[[1]] <- poisson(agreeing)
  if (disagreeing >= 1 && disagreeing <= few) bounds[[2]] <- 1 - poisson(disagreeing)
  bounds
}

# Every figure's interval at the accuracy's scale: each side of its bootstrap
# `bounds` stretched or shrunk by as much as the accuracy's interval
# (`accuracy_bounds`: Wilson's, at the pairs or the design's effective pairs,
# with t) reaches past the accuracy's own bootstrap bound on that side. The
# replicates say how far macro-F1, kappa and alpha move as the accuracy does;
# Wilson's interval says how far the accuracy moves, without the
# percentile bootstrap's Monte Carlo error or its normal quantile. Three
# rounds of 50 by doubt (tools/bench_findings_validity.R, 2,000 draws): the
# percentile intervals covered 0.932-0.934, these 0.940-0.943 at the same
# width, as the accuracy's own 0.944. A side the replicates leave at the
# estimate (every pair agrees, so every replicate does) is each figure's at
# the `confusion` matrix moved until its accuracy is at the bound
# (confusion_at_accuracy()): 20 pairs that all agree gave kappa [1, 1].
at_accuracy_scale <- function(bounds, estimates, accuracy_bounds, confusion) {
  accuracy <- which(names(estimates) == "accuracy")
  side <- c(-1, 1)
  reach <- side * (accuracy_bounds - estimates[[accuracy]])
  drawn <- side * (bounds[accuracy, ] - estimates[[accuracy]])
  for (s in 1:2) {
    if (isTRUE(drawn[[s]] > 0) && is.finite(reach[[s]])) {
      bounds[, s] <- estimates + reach[[s]] / drawn[[s]] * (bounds[, s] - estimates)
    } else if (isTRUE(drawn[[s]] == 0 && reach[[s]] > 0) && nrow(confusion) > 1) {
      moved <- agreement_metrics(confusion_at_accuracy(confusion, accuracy_bounds[[s]]))[names(estimates)]
      bounds[, s] <- if (s == 1) pmin(moved, estimates) else pmax(moved, estimates)
    }
  }
  bounds[accuracy, ] <- accuracy_bounds
  bounds
}

# `confusion` (truth in rows) moved toward all its pairs wrong, or all right,
# each truth label's count held, until its accuracy is `target`: wrong, a
# label's pairs are spread over the other labels as those are predicted (over
# them alike where none is).
confusion_at_accuracy <- function(confusion, target) {
  confusion <- unclass(confusion)
  n <- sum(confusion)
  current <- sum(diag(confusion)) / n
  truths <- rowSums(confusion)
  predicted <- colSums(confusion)
  toward <- if (target > current) diag(truths, length(truths)) else {
    t(vapply(seq_along(truths), function(r) {
      share <- replace(predicted, r, 0)
      if (sum(share) == 0) share <- replace(rep(1, length(share)), r, 0)
      truths[[r]] * share / sum(share)
    }, numeric(length(truths))))
  }
  step <- (target - current) / (sum(diag(toward)) / n - current)
  confusion + step * (toward - confusion)
}

# How a bootstrap replicate draws a stratum's `n` units: `draws` of them with
# replacement, a unit drawn r times keeping `keep` + r `each` of its weight.
# Pairs not drawn by a design (`fraction` NULL) are drawn n times, as they
# are. Units drawn by one, a share `fraction` of the stratum's units drawn
# without replacement, are drawn as Rao and Wu's (1988) rescaled bootstrap
# does: n - 1 draws, keep = 1 - lambda, each = lambda n / (n - 1), lambda =
# sqrt(1 - fraction). A linear statistic's replicates then vary as the
# design's variance says, each stratum's spread over its n - 1 with its
# finite-population correction, where drawing n units understates it by (n -
# 1) / n and leaves out the correction (on rows drawn toward doubt, whose
# strata take up to a third of their rows, kappa's interval was 8% too wide:
# tools/bench_findings_validity.R). A stratum of one unit stays as drawn.
stratum_draw <- function(n, fraction = NULL) {
  if (is.null(fraction)) return(list(draws = n, keep = 0, each = 1))
  if (n < 2) return(list(draws = 0L, keep = 1, each = 0))
  lambda <- sqrt(1 - min(fraction, 1))
  list(draws = n - 1L, keep = 1 - lambda, each = lambda * n / (n - 1))
}

# 2 TP / (2 TP + FP + FN): 0 for a label on one side only, NaN for one on neither.
label_f1 <- function(confusion) {
  2 * diag(confusion) / (rowSums(confusion) + colSums(confusion))
}
