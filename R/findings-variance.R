# The corrected estimate at a weight lambda on the predictions, its variance
# under the sampling design, and the lambda that makes it smallest.
#
# With R the coded indicator and pi the inclusion probability, each row's
# estimating function is that of PPI++ (Angelopoulos et al. 2023) in the
# design-weighted form of DSL (Egami et al. 2023):
#
#   psi_i = lambda x (g - mu) + R / pi x (y - mu) - lambda R / pi x (g - mu)
#
# lambda = 1 is DSL's pseudo-outcome g + R / pi (y - g); lambda = 0 is the
# coded rows alone, weighted by 1 / pi. Its sum splits into two uncorrelated
# parts: sum_i x (y - mu), how the corpus differs from the population it was
# drawn from, and sum_i (R / pi - 1) z_i, z = x {(y - mu) - lambda (g - mu)},
# which rows were coded. The first is estimated from the coded rows weighted by
# 1 / pi; the second is the variance of a stratified sample without
# replacement (each stratum's rows coded with the same probability, as
# review_sample() draws them), with each stratum's finite-population
# correction. The corpus target (the value every row coded would give) has the
# second part only. lambda enters only the second part, so the lambda that
# minimises it is PPI++'s power tuning for this design; it is cut to [0, 1],
# where 0 is the coded rows alone: the tuned interval is not meaningfully wider
# than theirs whatever the predictions are worth.

# The fit at `lambda`: the estimating function summed over every row on its
# predictions (weight lambda), the coded rows on their codes (weight 1 / pi)
# and the coded rows on their predictions (weight -lambda / pi), stacked in
# that order. `x` holds the model matrices on the predictions (every row) and
# on the codes (the coded rows); `rows_weight`, each row's count among the
# rows (learner_dependence() sums over a sample of them).
design_fit <- function(x, g, y, sample, binary, lambda, rows_weight = 1) {
  inverse <- 1 / sample$prob
  fit <- moment_fit(rbind(x$predicted, x$coded, x$predicted[sample$rows, , drop = FALSE]), c(g, y, g[sample$rows]),
                    c(lambda * rep_len(rows_weight, nrow(x$predicted)), inverse, -lambda * inverse), binary)
  fit$lambda <- lambda
  fit$n_rows <- nrow(x$predicted)
  fit
}

# Each coefficient's fit at its own `lambda` (one a coefficient), one fit a
# distinct lambda: the fits in the coefficients' order (design_fit()'s
# arguments otherwise), and own_coefficients() each coefficient from its own.
fits_at_own_lambda <- function(x, g, y, sample, binary, lambda, rows_weight = 1) {
  at_lambda <- lapply(stats::setNames(nm = unique(lambda)), function(l) {
    design_fit(x, g, y, sample, binary, l, rows_weight)
  })
  unname(at_lambda[as.character(lambda)])
}

own_coefficients <- function(own) vapply(seq_along(own), function(j) own[[j]]$coefficients[[j]], 0)

# The estimating function on the coded rows: on their codes (`a`) and on their
# predictions (`b`), from the stacked fit. With `small_sample`, each coded
# row's two terms are divided by sqrt(1 - h), h the leverage of its code on the
# fit (its weight times x' B x, B the bread): the HC2 correction, unbiased
# under equal variances, which Imbens and Kolesar (2016) pair with Bell and
# McCaffrey's degrees of freedom (satterthwaite_df()). The raw terms
# underestimate the variance by about the share p / n of the coded rows the fit
# spends on its p coefficients. HC2, not HC3 (1 - h): on those df HC3 covered
# too much, a slope on a lognormal covariate at 60 coded rows 0.972 (the
# coded rows alone 0.968) with intervals 26% wider than HC2's, which covered
# 0.950 (0.936), over 500 draws; on a normal covariate HC2 on those df is
# 0.6% wider than HC3 was on the design's df (0.964 both). The leverage is
# cut at 0.5, so that no row's terms are more than doubled: a coded row far
# out on a skewed covariate has a leverage near 1, and HC3 cut at 0.99 made
# the se explode (rms 3.15 against a median 0.082 over 150 draws of a
# lognormal covariate on 60 coded rows; cut at 0.5, 0.105 and 0.072). Rows
# drawn in whole clusters keep the raw terms: their leverage is a cluster's
# block, not a row's.
coded_moments <- function(fit, small_sample = FALSE) {
  codes <- coded_positions(fit)
  n <- length(codes)
  bread <- solve(crossprod(fit$x, fit$x * (fit$w * fit$slope)))
  moment <- function(at) fit$x[at, , drop = FALSE] * (fit$y[at] - fit$mu[at])
  a <- moment(codes)
  b <- moment(codes + n)
  on_codes <- fit$x[codes, , drop = FALSE]
  if (small_sample) {
    leverage <- rowSums((on_codes %*% bread) * on_codes) * fit$w[codes] * fit$slope[codes]
    correction <- 1 / sqrt(1 - pmin(leverage, 0.5))
    a <- a * correction
    b <- b * correction
    on_codes <- on_codes * correction
  }
  list(a = a, b = b, bread = bread, on_codes = on_codes)
}

# Each coded row's stratum: `.stratum` where the sample has it, else the rows
# drawn with the same probability.
stratum_of <- function(sample) {
  if (!is.null(sample$stratum)) as.character(sample$stratum) else format(sample$prob, digits = 15)
}

# The sampling units of each stratum: the coded rows, or the clusters drawn
# whole (`sample$unit`), with the unit totals of the rows of `m` (one row of
# `m` a coded row in the estimate's domain; those outside it, `sample$outside`,
# add rows of zeros), the stratum's units and the units drawn. Rounds drawn by
# doubt are read as each drew them, a round's rows weighted by its weight.
stratum_units <- function(m, sample) {
  if (!is.null(sample$round_weight)) {
    # rounds drawn by doubt (with_rounds()): each round's strata as it drew them, its terms times its weight
    m <- m * sample$round_weight
    sample$prob <- sample$round_prob
    if (!is.null(sample$outside)) sample$outside$prob <- sample$outside$round_prob
  }
  if (!is.null(sample$outside)) {
    # coded rows outside the estimate's domain: drawn in their strata, adding nothing
    m <- rbind(m, matrix(0, length(sample$outside$prob), ncol(m)))
    outside <- sample$outside
    sample <- list(rows = c(sample$rows, rep(NA_integer_, length(outside$prob))), prob = c(sample$prob, outside$prob),
                   stratum = if (!is.null(sample$stratum)) c(as.character(sample$stratum), as.character(outside$stratum)),
                   unit = if (!is.null(sample$unit)) c(sample$unit, outside$unit),
                   unit_prob = if (!is.null(sample$unit_prob)) c(sample$unit_prob, outside$unit_prob))
  }
  unit <- sample$unit %||% seq_along(sample$rows)
  unit_prob <- sample$unit_prob %||% sample$prob
  members <- split(seq_along(sample$rows), stratum_of(sample))
  lapply(members, function(i) {
    key <- factor(unit[i], levels = unique(unit[i]))
    prob <- unit_prob[i][!duplicated(key)]
    units <- sum(1 / prob)
    # a cluster's coded rows stand for its rows not coded (responding_clusters())
    rows <- m[i, , drop = FALSE] * (unit_prob[i] / sample$prob[i])
    # strata collapsed for the variance (with_variance_strata()): each unit
    # weighted as drawn with the collapsed stratum's probability, so that
    # its units times their mean is the strata's estimated total
    if (length(unique(prob)) > 1) rows <- rows * (length(prob) / units / unit_prob[i])
    list(totals = rowsum(rows, key, reorder = FALSE), units = units, drawn = length(prob))
  })
}

# Within-stratum covariance of the unit totals; a stratum of one unit has none
# to centre on, so its unit counts uncentred.
centred <- function(m) if (nrow(m) < 2) m else sweep(m, 2, colMeans(m))
stratum_cov <- function(a, b = a) crossprod(centred(a), centred(b)) / max(nrow(a) - 1, 1)

# The weight of a stratum's covariance in the variance of its estimated total,
# N_h^2 (1 / n_h - 1 / N_h) in units, were its units drawn `scale` times as
# many (at most all).
stratum_weight <- function(h, scale = 1) h$units^2 * max(1 / min(h$drawn * scale, h$units) - 1 / h$units, 0)

# The variance's parts, on the scale of the coefficients (each coded row's
# estimating function times the bread, the estimating equation's Jacobian
# inverted): the corpus-to-population part and each stratum's units and
# covariance of the unit totals of z. `fits` gives each coefficient's fit (its
# own lambda), or is one fit for all. The population part sums the estimating
# function's products over pairs of coded rows in one cluster of
# `sample$cluster` (each row its own where there is none), each pair weighted
# by the inverse of its probability of being coded together: 1 / pi within a
# drawn unit, 1 / (pi_i pi_j) across units (exact for clusters drawn whole,
# close for rows drawn without replacement). `floors`: which floors the
# variance takes, "errors" (rare_error_variance(), where the predictions are
# right on every coded row: the corrected estimate's alone) and "levels"
# (floored_levels(): a level whose codes agree, on which the coded rows' own
# estimate rests as well; without it their intercept on a 3% reference level
# covered 0.704 over 1,000 draws, 0.066 over 400 where its codes agreed).
design_parts <- function(fits, sample, floors = character()) {
  if (inherits(fits, "newrllama4_moment_fit")) fits <- rep(list(fits), length(fits$coefficients))
  rows_drawn <- is.null(sample$unit) && is.null(sample$cluster)
  influence <- lapply(seq_along(fits), function(j) {
    moments <- coded_moments(fits[[j]], small_sample = rows_drawn)
    row <- moments$bread[j, ]
    list(a = moments$a %*% row, z = (moments$a - fits[[j]]$lambda * moments$b) %*% row,
         direction = moments$on_codes %*% row)
  })
  a <- do.call(cbind, lapply(influence, `[[`, "a"))
  z <- do.call(cbind, lapply(influence, `[[`, "z"))
  direction <- do.call(cbind, lapply(influence, `[[`, "direction"))
  colnames(a) <- colnames(z) <- names(fits[[1]]$coefficients)
  codes <- stratum_codes(fits[[1]], sample)
  least <- if ("errors" %in% floors) rare_error_variance(codes)
  floored <- if ("levels" %in% floors) floored_levels(fits, codes, sample$levels, isTRUE(sample$answer)) else list()
  # a level's variance: one, or one a coefficient (a numeric answer's, residual_spread())
  scaled <- lapply(floored, function(level) {
    direction * outer(level$rows, sqrt(rep_len(level$variance, ncol(direction))))
  })
  z <- z * sqrt(own_weights(floored, nrow(z)))
  list(
    population = population_part(a, sample),
    population_third = population_third(a, sample),
    strata = pooled_strata(stratum_units(do.call(cbind, c(list(z, direction), scaled)), sample),
                           borrowed_variance(codes), ncol(z), codes_alike(codes), least, length(floored),
                           cluster_row_spreads(direction, sample)),
    small_sample = rows_drawn, least_rate = least, floored_levels = floored
  )
}

# For clusters drawn whole, each stratum's sum over its coded rows of their
# directions' products (weighted as stratum_units() weighs a cluster's rows):
# what a cluster's total borrows (pooled_strata()) with its rows' residuals
# independent. NULL for rows drawn one by one.
cluster_row_spreads <- function(direction, sample) {
  if (is.null(sample$unit)) return(NULL)
  weight <- (sample$unit_prob %||% sample$prob) / sample$prob
  lapply(split(seq_len(nrow(direction)), stratum_of(sample)), function(i) {
    crossprod(direction[i, , drop = FALSE] * sqrt(weight[i]))
  })
}

# The third cumulant of the corpus-to-population part, by coefficient: each
# cluster's total of a / pi cubed, weighted by pi^2 (the Horvitz-Thompson
# estimate of the sum of the clusters' cubed totals; each row its own cluster
# where there is none). Like a stratum's third (stratum_third()), it only
# bends the interval (skewed_interval()), a term of the next order, so a
# cluster's rows drawn one by one take their mean probability.
population_third <- function(a, sample) {
  cluster <- sample$cluster %||% sample$unit %||% seq_along(sample$rows)
  prob <- sample$unit_prob %||% sample$prob
  across <- rowsum(a / sample$prob, cluster)
  colSums(across^3 * as.vector(tapply(prob, cluster, mean)[rownames(across)])^2)
}

# The third cumulant of a stratum's estimated total of the unit totals `t`
# (one column a coefficient), drawn without replacement.
stratum_third <- function(h, t) total_third(h$units, nrow(t), t)

# The third cumulant of the estimated total of `units` units' values, `n` of
# them drawn without replacement: N^3 (1 - f) (1 - 2 f) / n^2 times the units'
# third central moment (k3, unbiased), f = n / N, read off the rows of `t`
# (the drawn units', or every unit's where all are known). None from fewer
# than three rows.
total_third <- function(units, n, t) {
  k <- nrow(t)
  if (k < 3) return(rep(0, ncol(t)))
  f <- min(n / units, 1)
  units^3 * (1 - f) * (1 - 2 * f) / n^2 * colSums(centred(t)^3) * k / ((k - 1) * (k - 2))
}

# The corpus-to-population part of the variance from the coded rows'
# estimating functions `a` (one column a coefficient), as design_parts()
# describes it.
population_part <- function(a, sample) {
  Reduce(`+`, lapply(population_sums(sample), function(sums) {
    total <- sums$of(a)
    crossprod(total, total * sums$weight)
  }))
}

# The sums whose weighted squares make population_part(): of each row's terms
# over its probability, by cluster (pairs across units), and of each unit's
# (pairs within it, weighted by 1 / pi - 1 / pi^2). `of(m)` sums the rows of
# `m`, one a coded row; satterthwaite_df() takes them apart.
population_sums <- function(sample) {
  unit <- sample$unit %||% seq_along(sample$rows)
  cluster <- sample$cluster %||% unit
  # a cluster's coded rows stand for its rows not coded (responding_clusters())
  unit_prob <- sample$unit_prob %||% sample$prob
  drawn <- unit_prob[!duplicated(unit)]
  list(across = list(of = function(m) rowsum(m / sample$prob, cluster), weight = 1),
       within = list(of = function(m) rowsum(m * (unit_prob / sample$prob), unit, reorder = FALSE),
                     weight = 1 / drawn - 1 / drawn^2))
}

# The positions of the codes in a stacked fit (after its predicted rows).
coded_positions <- function(fit) fit$n_rows + seq_len((nrow(fit$x) - fit$n_rows) / 2)

# The coded rows' codes in a stacked fit, their fitted values and strata, and
# whether the codes are 0 and 1 (a label's: their strata borrow their own
# adjusted proportion's variance, not one pooled over the strata), as what a
# stratum of few units borrows is read from them. A text split between its
# coders (read_codes()) has its label's share between them, and is a label's
# code still: read as not 0/1, four split texts among 150 took every 0/1 floor
# away, and a 3% level whose codes agreed covered 0.847 (0.969 without them).
stratum_codes <- function(fit, sample) {
  at <- coded_positions(fit)
  y <- fit$y[at]
  split <- sample$rows %in% sample$split$rows
  list(y = y, mu = fit$mu[at], prediction = fit$y[at + length(at)], stratum = stratum_of(sample),
       zero_one = all(y %in% c(0, 1) | (split & y > 0 & y < 1)))
}

# The variance for `target`, were each stratum's units `scale` times as many
# (at most all of them): coded_rows_needed() plans with it. The learner's
# dependence on the coded rows (learner_dependence()) is part of the sampling
# part, shrinking as it does.
design_vcov <- function(parts, target = "population", scale = 1) {
  sampling <- at_least(strata_sum(parts, "cov", scale), strata_sum(parts, "least", scale))
  # levels of few or alike codes (floored_levels()): their rows' part added at the variance they borrow
  sampling <- at_least(sampling, sampling + strata_sum(parts, "level", scale)) +
    (parts$learner$variance %||% 0) / scale
  if (target == "population") parts$population + sampling else sampling
}

# Each coefficient's share of its variance `v` that comes from strata whose
# variance borrowing raised (pooled_strata()) and whose codes are all alike:
# share_interval() counts that part at no more rows than were coded.
pooled_share <- function(parts, v) {
  pooled <- Filter(function(h) h$pooled && h$alike, parts$strata)
  part <- Reduce(`+`, lapply(pooled, function(h) stratum_weight(h) * diag(h$cov)), 0 * v)
  ifelse(v > 0, pmin(part / v, 1), 0)
}

# Each coefficient's skewness for `target`: the third cumulant of its
# estimating function's total (the strata's, and the corpus part's for the
# population) over its variance `v` (the diagonal of design_vcov()) to the 3/2.
design_skewness <- function(parts, v, target = "population") {
  third <- Reduce(`+`, lapply(parts$strata, `[[`, "third"))
  if (target == "population") third <- third + parts$population_third
  ifelse(v > 0, third / v^1.5, 0)
}

# The interval of `level` for estimates with standard errors `se`, degrees of
# freedom `df` and skewness `skew` (design_skewness()): Hall's (1992)
# transformation of the t statistic T = (estimate - value) / se, g(T) = T +
# a T^2 + a^2 T^3 / 3 + b with a = skew / 3 and b = skew / 6, which is
# increasing and removes the first-order skew of T, its quantiles taken from a
# t on `df` (an expansion about Student's t, as Boik 2008). The estimate and
# its variance move together when a few rows carry a coefficient, as rows far
# out on a skewed covariate do (or a rare label): coded rows that miss that
# tail give an estimate off to one side with a small standard error, and the
# symmetric interval misses on that side (a lognormal covariate, 150 uniform
# coded rows, the population's slope: 0.908 over 500 draws, every miss above
# the truth; this interval 0.940, tools/bench_findings_validity.R). Where the
# coded rows' own third moment is small because they missed the tail, the
# bend is small too: at 400 rows it covered 0.922 (the t 0.913). Where the
# skew is 0 it is the symmetric t interval. Returns the bounds and the
# two-sided p-value of the value 0.
skewed_interval <- function(estimate, se, df, skew, level = 0.95) {
  # one skew a coefficient: inverse()'s ifelse() takes its length from it, and a
  # single 0 beside several df gave every coefficient the first one's t quantile
  skew <- rep_len(skew, length(estimate))
  a <- skew / 3
  b <- skew / 6
  inverse <- function(u) {
    inside <- 1 + 3 * a * (u - b)
    ifelse(abs(a) < 1e-8, u - b, (sign(inside) * abs(inside)^(1 / 3) - 1) / ifelse(abs(a) < 1e-8, 1, a))
  }
  q <- stats::qt((1 + level) / 2, df)
  statistic <- estimate / se
  transformed <- statistic + a * statistic^2 + a^2 * statistic^3 / 3 + b
  list(conf.low = estimate - se * inverse(q), conf.high = estimate - se * inverse(-q),
       p.value = 2 * stats::pt(-abs(transformed), df))
}

# PPI++'s lambda for this design, from a first fit, for each coefficient: the
# minimiser of its sampling variance, [B (S_a - 2 lambda C_ab + lambda^2 S_b)
# B]_jj, with a = x (y - mu), b = x (g - mu) and S, C summed over strata with
# their weights (ppi-python's `coord`, for every coordinate). Returns the two
# terms for each coefficient, "cross" and "spread", whose ratio lambda_from()
# takes: a coefficient's interval is then never meaningfully wider than the
# coded rows' alone, whatever the predictions are worth for the others.
tuned_lambda <- function(fit, sample) {
  moments <- coded_moments(fit)
  both <- stratum_units(cbind(moments$a, moments$b), sample)
  p <- ncol(moments$a)
  sum_over <- function(part) {
    Reduce(`+`, lapply(both, function(h) {
      if (h$drawn < 2) return(matrix(0, p, p))
      stratum_weight(h) * part(h$totals[, seq_len(p), drop = FALSE], h$totals[, p + seq_len(p), drop = FALSE])
    }))
  }
  cross <- sum_over(stratum_cov)
  spread <- sum_over(function(a, b) stratum_cov(b))
  on_coefficients <- function(m) diag(moments$bread %*% m %*% moments$bread)
  rbind(cross = on_coefficients((cross + t(cross)) / 2), spread = on_coefficients(spread))
}

# Below this many coded rows lambda is 1 (DSL), not tuned. Tuned on the rows
# it is then applied to, lambda falls where those rows' own estimate is off,
# and the interval, which takes it as fixed, misses: with 60 uniform coded rows
# a slope's 95% interval covered 0.942 tuned (0.866 where lambda <= 0.5) and
# 0.964 at 1, over 500 draws. Cross-fitting it (each fold's lambda from the
# other folds) did not help (0.944; 0.879). From 150 rows tuning covers (0.935
# and 0.950 over 200 draws, a slope and a share) and keeps predictions that
# are noise from widening the interval beyond the coded rows' alone. Where
# clusters are drawn whole the units are the clusters (independent_units()):
# a rating's slope from 10 of 60 speakers drawn whole covered 0.917 tuned on
# them and 0.940 at 1 (1,000 draws); 20 of 300, 0.920 and 0.938.
lambda_tuning_units <- 100L

# The lambda of each coefficient that minimises the variance whose terms
# tuned_lambda() gave (or their sum, over several estimates that share their
# lambdas); cut to [0, 1].
lambda_from <- function(terms) {
  spread <- terms["spread", ]
  ratio <- pmin(pmax(terms["cross", ] / spread, 0), 1)
  stats::setNames(ifelse(is.finite(spread) & spread > 0, ratio, 1), colnames(terms))
}

target_words <- c(population = "population the texts were drawn from", corpus = "corpus itself (every row coded)")

# The weight on the predictions (one, or one a coefficient or group), as
# print() tells it.
lambda_line <- function(lambda, tuned, rule = NULL) {
  values <- if (length(unique(lambda)) == 1) sprintf("%.3f", lambda[[1]]) else
    paste(names(lambda), sprintf("%.3f", lambda))
  sprintf("Weight on the predictions (lambda): %s%s.", paste(values, collapse = ", "),
          if (tuned) ", tuned to the data (1 is DSL, 0 the coded rows alone)" else paste0(", ", rule %||% "as given"))
}
