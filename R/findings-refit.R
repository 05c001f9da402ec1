# Labels learned from the coded rows depend on them twice: a coded row's code
# enters the estimate as a code, and again through the learner of every other
# fold, fitted on it. The design's variance (design_parts()) takes the
# cross-fitted predictions as given, as if the learners did not move with the
# rows coded; they do, and the folds' errors are correlated through them (the
# estimate's variance 1.32x what the intervals took, on Gemma's five parts of
# speech from 150 uniform coded rows: coverage 0.867-0.900 on three word
# corpora of six, issue 58; docs/benchmarks.md). A delete-a-group jackknife
# (Kott 2001) measures the part that is missed: the coded units are spread over
# groups, each replicate drops one group and reweights its strata's other units,
# and estimates again twice, with each fold's learner fitted again on what is
# left (at the setting that fold chose, so that nothing is chosen again) and
# with the predictions as they were. The difference of the two replicate
# variances is the learner's dependence on the coded rows; it is added to each
# coefficient's variance, never taken from it, its covariances scaled alike.
# On those corpora (tools/bench_learned_coverage.R, 60-120 draws each) it
# covered 0.950, 0.925 and 0.983 where the intervals without it covered 0.867,
# 0.900 and 0.900, adding about a fifth of the variance.

# Groups of the jackknife: each costs a refit of every fold's learner; fewer
# make the difference noisier (its standard error is about 1.6x its mean on
# Gemma's nouns and verbs at 15).
learner_jackknife_groups <- 15L

# The rows not coded that the replicates predict, at most: a replicate's sum
# over the corpus's rows is estimated from a sample of them, drawn once, so
# that the jackknife costs what it does at this many rows. On 30,000 rows of
# learnable_rows() (150 coded, 50 features) the difference moved by 1-2% of the
# variance it is added to, and label_shares() took 3.4-4.3 CPU s against
# 9.3-10 reading every row.
jackknife_rows <- 10000L

# The variance the learner's dependence on the coded rows adds to the corrected
# estimate whose variance for its target is `v` (design_vcov()), fitted at
# `lambda` (one a coefficient) on the model matrices `x` with the codes `y` of
# `sample`'s coded rows and the predictions `g`. `refit(replicate, y, read)`:
# the predictions of the rows `read` with the fold learners fitted again on a
# replicate's coded rows (replicate_sample()). Returns the variance to add
# (`variance`), the groups, each coefficient's added share of `v`, and for the
# benchmarks the two replicate variances' difference before it is cut at 0, its
# standard error and `v`'s diagonal; NULL where the coded units are too few to
# drop a group.
learner_dependence <- function(x, y, g, sample, binary, lambda, v, refit, seed) {
  group <- jackknife_groups(sample$units, stratum_of(sample), seed)
  groups <- sort(setdiff(unique(group), 0L))
  if (length(groups) < 3) return(NULL)
  others <- setdiff(seq_along(g), sample$rows)
  drawn <- if (length(others) <= jackknife_rows) others else {
    sort(with_optional_seed(seed, others[sample.int(length(others), jackknife_rows)]))
  }
  read <- sort(c(sample$rows, drawn))
  rows_weight <- ifelse(read %in% sample$rows, 1, length(others) / length(drawn))
  on_read <- list(predicted = x$predicted[read, , drop = FALSE])
  coefficients <- function(replicate, keep, predictions) {
    replicate$rows <- match(replicate$rows, read)
    on_read$coded <- x$coded[keep, , drop = FALSE]
    own <- fits_at_own_lambda(on_read, predictions[read], y[keep], replicate, binary, lambda, rows_weight)
    ifelse(vapply(own, `[[`, NA, "converged"), own_coefficients(own), NA_real_)
  }
  replicates <- lapply(groups, function(dropped) {
    keep <- group != dropped
    replicate <- replicate_sample(sample, keep)
    rbind(refit = coefficients(replicate, keep, refit(replicate, y[keep], read)),
          fixed = coefficients(replicate, keep, g))
  })
  estimates <- lapply(c(refit = "refit", fixed = "fixed"), function(kind) {
    do.call(rbind, lapply(replicates, function(r) r[kind, ]))
  })
  complete <- stats::complete.cases(estimates$refit, estimates$fixed)
  n <- sum(complete)
  # each replicate's term of the refitted variance less the fixed one's, and their sum's standard error
  terms <- (n - 1) / n * (centred(estimates$refit[complete, , drop = FALSE])^2 -
                            centred(estimates$fixed[complete, , drop = FALSE])^2)
  # the replicates vary as the coded rows do, drawn without replacement
  finite <- 1 - mean(sample$unit_prob %||% sample$prob)
  difference <- colSums(terms) * finite
  difference_se <- sqrt(n * apply(terms, 2, stats::var)) * finite
  added <- pmax(difference, 0)
  share <- ifelse(diag(v) > 0, added / diag(v), 0)
  scale <- diag(sqrt(1 + share), length(share))
  list(variance = scale %*% v %*% scale - v, groups = length(groups), share = stats::setNames(share, colnames(v)),
       difference = difference, difference_se = difference_se, before = diag(v))
}

# Each coded row's jackknife group: its sampling unit's (`units`), the units
# of each stratum (`stratum`) shuffled from `seed` and dealt to the groups in
# turn across the strata, so that every group takes units of every stratum it
# can; 0 (never dropped) for the unit of a stratum that has one, whose rows no
# replicate could reweight.
jackknife_groups <- function(units, stratum, seed, groups = learner_jackknife_groups) {
  first <- !duplicated(units)
  unit_stratum <- stratum[first]
  alone <- unit_stratum %in% names(which(table(unit_stratum) < 2))
  shuffled <- with_optional_seed(seed, sample.int(sum(first)))
  # strata in the order the coded rows meet them, not by their names, which a field's view words otherwise
  dealt <- shuffled[order(match(unit_stratum, unique(unit_stratum))[shuffled])]
  dealt <- dealt[!alone[dealt]]
  group <- integer(sum(first))
  group[dealt] <- rep_len(seq_len(min(groups, length(dealt))), length(dealt))
  group[match(units, units[first])]
}

# The coded rows `keep` of `sample`, as a replicate of the delete-a-group
# jackknife: each stratum's kept rows stand for its dropped ones, their
# inclusion probabilities scaled by the share of its units kept.
replicate_sample <- function(sample, keep) {
  stratum <- stratum_of(sample)
  units_in <- function(rows) tapply(sample$units[rows], stratum[rows], function(u) length(unique(u)))
  kept <- units_in(keep)
  kept_share <- kept / units_in(rep(TRUE, length(keep)))[names(kept)]
  list(rows = sample$rows[keep], prob = sample$prob[keep] * as.vector(kept_share[stratum[keep]]),
       truth_labels = sample$truth_labels[keep], units = sample$units[keep], split = sample$split)
}

# Whether each coefficient, its variance counting the learner's dependence on
# the coded rows (`learner`, learner_dependence()), is less precise than the
# coded rows alone (`parts`, three_estimates()'): there the estimate is
# theirs (lambda 0), which no learner moves. A learner refitted without a
# group that held most of a rare label's few coded rows moves a lot, and its
# jackknife with it: on the thin world's corpus share at 60 coded rows
# (tools/bench_coverage_matrix.R), 12 draws of 200 came out 1.2-3.9x as wide as
# the coded rows alone, and are theirs now.
no_gain_left <- function(learner, parts, target) {
  if (is.null(learner) || is.null(parts$coded_only)) return(FALSE)
  before <- diag(design_vcov(parts$corrected, target))
  before * (1 + learner$share) > diag(design_vcov(parts$coded_only, target))
}
