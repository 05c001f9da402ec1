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
# with the predictions as they were. How far the refitted learners move each
# replicate's estimate from the other's (the shift) is the learner's part; the
# variance of the shifts over the replicates is added to the coefficients'
# variance, a matrix of their covariances. On those corpora
# (tools/bench_learned_coverage.R, 60-120 draws each) the intervals covered
# 0.950, 0.925 and 0.983 with it where they covered 0.867, 0.900 and 0.900
# without.
#
# The learner's part is of second order in the coded units: a learner moved by
# a coded row moves the estimate only through the sampling error of the other
# coded rows' mean of that move (the cross-fitted estimate is unbiased for any
# fixed learner), so it is uncorrelated with the first-order part, the codes'
# own (Hoeffding's decomposition). Two things follow. The two replicate
# variances' difference, used before, adds to the shifts' variance twice their
# covariance with the fixed replicates, zero in expectation and three times as
# noisy as the shifts' variance, which it was cut at 0 to hide (2026-12-06, 100
# draws of each of four word corpora: the covariance term's mean -7e-6 to 1e-5,
# each within one of its standard errors, against the shifts' 5e-5 to 9e-5).
# And a jackknife counts a term of second order more than once (Efron and
# Stein 1981: a delete-one jackknife twice); second_order_factor() is how
# often, and the shifts' variance is divided by it. On the four corpora the
# errors over their standard errors then spread 0.91-1.01 (0.86-0.96 before)
# and the intervals are about 5% narrower; docs/benchmarks.md.

# Groups of the jackknife: each costs a refit of every fold's learner; fewer
# make its part noisier (at 15, over 100 draws of Gemma's nouns and verbs, the
# shifts' variance spread 0.6 of its mean from draw to draw; the replicate
# variances' difference, 2.2).
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
# benchmarks the shifts' variance before second_order_factor(), the two
# replicate variances' difference (the rule it replaced) and its standard
# error, and `v`'s diagonal; NULL where the coded units are too few to drop a
# group.
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
  refitted <- estimates$refit[complete, , drop = FALSE]
  fixed <- estimates$fixed[complete, , drop = FALSE]
  # how far each replicate's learners, fitted again, move its estimate from the one at the predictions as they were
  shift <- refitted - fixed
  # the replicates vary as the coded rows do, drawn without replacement
  finite <- 1 - mean(sample$unit_prob %||% sample$prob)
  shifts <- (n - 1) / n * crossprod(centred(shift)) * finite
  dimnames(shifts) <- dimnames(v)
  variance <- shifts / second_order_factor(length(unique(sample$units[group > 0])), n)
  share <- ifelse(diag(v) > 0, diag(variance) / diag(v), 0)
  terms <- (n - 1) / n * (centred(refitted)^2 - centred(fixed)^2)
  list(variance = variance, groups = length(groups), share = stats::setNames(share, colnames(v)),
       shift_variance = diag(shifts), difference = colSums(terms) * finite,
       difference_se = sqrt(n * apply(terms, 2, stats::var)) * finite, before = diag(v))
}

# How many times a delete-a-group jackknife of `groups` groups over `units`
# units counts the variance of a statistic's second-order part: for a sum over
# pairs of units, each pair's term of mean zero given either unit, the
# replicates' variance has the expectation (G - 1)^2 ((m - 1) + 2 (G - 2) m) /
# (G^2 (G m - 1)) times the sum's, m = units / G units a group; 2 (G - 1) (G -
# 2) / G^2 for the delete-one jackknife (m = 1, Efron and Stein 1981), 1.57
# for 150 units in 15 groups (the package's tests simulate it). Never
# under 1: below it (five units or fewer) the jackknife is too coarse to be
# scaled up on a model of its error.
second_order_factor <- function(units, groups) {
  m <- units / groups
  max((groups - 1)^2 * ((m - 1) + 2 * (groups - 2) * m) / (groups^2 * (groups * m - 1)), 1)
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
