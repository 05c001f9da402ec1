# The small-sample degrees of freedom of the design-based estimates.

# The most coded rows whose small-sample df satterthwaite_df() computes.
small_sample_df_rows <- 500L

# Each coefficient's degrees of freedom for `target`: Bell and McCaffrey's
# (2002) Satterthwaite approximation, as Imbens and Kolesar (2016) advise for
# a robust variance on few rows, in the cluster and stratified form of
# Pustejovsky and Tipton (2018). The variance estimate is a quadratic form in
# the coded rows' errors: were the codes y = E[y | x] + e with e independent
# and of the fit's own variance (the working model: one variance for a linear
# fit, mu (1 - mu) for a logistic one), each coded row's influence on a
# coefficient's estimating function is its direction (x B, with the small-
# sample correction) times its residual, and the residual is e less the fit's
# share of it, (I - H) e for the corpus part (H the derivative of the coded
# rows' fitted values by their codes) and (I - (1 - lambda) H) e for the
# sampling part, whose z nets the predictions' lambda off. Putting these
# linear maps through the variance's own algebra (population_part(), the
# strata's covariances, and what a stratum of few coded units borrows from
# the residuals pooled over the strata, borrowed_cov()) gives the matrix
# Omega of the quadratic form, and the df is tr(Omega)^2 / tr(Omega^2): the
# number of equally weighted squares the estimate is worth. It depends on the
# design matrix, the weights, strata and clusters and lambda, never on the
# residuals. A few rows far out on a skewed covariate carry a slope's
# variance, and the df falls from the design's (units less strata) to a
# handful: a lognormal covariate on 60 coded rows gave about 5-15 (see
# tests). With one stratum of rows drawn alike an intercept's df is the
# units less one, the design's. A logistic fit's rows far out have fitted
# probabilities near 0 or 1 and errors of little variance: taken at one
# variance, they carried a slope's df to about 5 at 60 coded rows, on which
# its intervals covered 0.994; at mu (1 - mu), as its HC2 leverage
# (coded_moments()) already takes them, about 11. The adjusted proportion
# that a stratum of 0/1 codes borrows is its own codes', not pooled, and
# moves little (two to five codes give 0.17-0.25): it counts as known, at the
# working model's variance, adding to Omega's trace and not to its square.
# So does the part of each level whose 0/1 codes agree (`floored`, as
# floored_levels() gave the variance), whose rows' errors Omega then leaves
# out: read, they gave the intercept of a 3% reference level a t on a df
# near 0 where its coded rows were few (width 2.14 where finite, unbounded on
# one coded row; 1.45 and covering 0.986 counted as known). A numeric
# answer's level of few coded rows keeps its rows' errors at their `own`
# weight, the part it borrows counted as known.
#
# Omega is a square of the coded rows, built in n^2 time, not n^3: the
# variance weighs each pair of coded rows' terms by the design alone
# (pair_weights(), once for every coefficient; a stratum's or the corpus
# part's sums hold each coded row once at most, crossprod_sums()), and each
# map from the errors is a diagonal less the hat matrix, of the
# coefficients' rank (error_form()). label_regression() on 150, 300 and 500
# coded rows took 0.068, 0.24 and 1.06 s with Omega formed as products of
# the maps, and takes 0.040, 0.091 and 0.20 s (the same df to 1e-14). Past
# small_sample_df_rows the df is the design's alone (Inf here, capped by the
# caller): at 1,000 and 2,000 coded rows it would cost 1.9 and 4.0 s (19 and
# 141 s before) and move a t quantile little on most designs, the leverage
# of any one row being small; a covariate skewed enough to matter there is
# the leverage check's to flag, not the df's to widen.
satterthwaite_df <- function(fits, sample, target = "population", floored = list()) {
  if (inherits(fits, "newrllama4_moment_fit")) fits <- rep(list(fits), length(fits$coefficients))
  if (length(sample$rows) > small_sample_df_rows) return(rep(Inf, length(fits)))
  rows_drawn <- is.null(sample$unit) && is.null(sample$cluster)
  coded <- stratum_codes(fits[[1]], sample)
  pairs <- pair_weights(sample, coded, target)
  own <- own_weights(floored, length(sample$rows))
  vapply(seq_along(fits), function(j) {
    fit <- fits[[j]]
    moments <- coded_moments(fit, small_sample = rows_drawn)
    codes <- coded_positions(fit)
    on_codes <- fit$x[codes, , drop = FALSE]
    error_variance <- fit$slope[codes]
    direction <- as.vector(moments$on_codes %*% moments$bread[j, ])
    lambda <- fit$lambda[[min(j, length(fit$lambda))]]
    # the hat matrix H = left right'
    left <- on_codes * error_variance
    right <- (on_codes * fit$w[codes]) %*% t(moments$bread)
    # a floored level's errors read at their own weight (none where its 0/1 codes agree), the part it borrows known
    form <- function(pairs, share) error_form(pairs, left, right, share, error_variance * own)
    directions <- outer(direction, direction)
    omega <- form(pairs$sampling * directions, 1 - lambda)
    if (!is.null(pairs$corpus)) omega <- omega + form(pairs$corpus * directions, 1)
    units <- stratum_units(matrix(direction), sample)
    if (!coded$zero_one) {
      borrowed <- sum(vapply(units, function(h) stratum_weight(h) * borrowed_cov(0, h$drawn, mean(h$totals^2)), 0))
      omega <- omega + borrowed * form(pairs$residual, 1)
    }
    # what a stratum of few 0/1 codes borrows: its adjusted proportion's variance, at the working model's, known
    variance <- if (coded$zero_one) tapply(error_variance, coded$stratum, mean)
    known <- sum(vapply(names(units), function(name) {
      if (!name %in% names(variance)) return(0)
      h <- units[[name]]
      stratum_weight(h) * borrowed_cov(0, h$drawn, mean(h$totals^2) * variance[[name]])
    }, 0))
    known <- known + sum(vapply(floored, function(level) {
      units <- stratum_units(matrix(direction * level$rows * sqrt(error_variance * level$borrowed)), sample)
      sum(vapply(units, function(h) stratum_weight(h) * mean(h$totals^2), 0))
    }, 0))
    if (sum(omega^2) <= 0) return(Inf)
    (sum(diag(omega)) + known)^2 / sum(omega^2)
  }, 0)
}

# What the variance weighs each pair of coded rows' terms by, as it sums them
# (design_vcov()): `corpus` the corpus part's (population_part(); for the
# population), `sampling` the strata's, each weighted by its own df's share
# where it borrows (borrowed_cov()), and `residual` the residuals' spread
# pooled within the strata (pooled_within_strata()), which a stratum of few
# units borrows. Each is a square matrix of the coded rows; the coefficients'
# directions and the maps from the errors come in by coefficient.
pair_weights <- function(sample, coded, target) {
  each <- diag(length(sample$rows))
  # centring is a projection, its own square: crossprod(centred(m)) = crossprod(m, centred(m))
  strata <- lapply(stratum_units(each, sample), function(h) {
    own <- crossprod_sums(h$totals, centred(h$totals)) / max(h$drawn - 1, 1)
    stratum_weight(h) * borrowed_cov(own, h$drawn, 0)
  })
  corpus <- if (target == "population") {
    Reduce(`+`, lapply(population_sums(sample), function(sums) {
      total <- sums$of(each)
      crossprod_sums(total, total * sums$weight)
    }))
  }
  residual <- if (!coded$zero_one) centred_within(each, coded$stratum) / pooled_df(coded$stratum)
  list(sampling = Reduce(`+`, strata), corpus = corpus, residual = residual)
}

# crossprod(m, x) where each column of `m` (a coded row) is nonzero in one
# row at most (the sum it is in): its value times that row of `x`, n^2 time.
crossprod_sums <- function(m, x) {
  at <- which(m != 0, arr.ind = TRUE)
  stopifnot(!anyDuplicated(at[, "col"]))
  in_sum <- rep(1L, ncol(m))
  value <- numeric(ncol(m))
  in_sum[at[, "col"]] <- at[, "row"]
  value[at[, "col"]] <- m[at]
  value * x[in_sum, , drop = FALSE]
}

# M' P M for the map M = (I - share H) S from the coded rows' errors to a
# coefficient's terms, P the terms' pair weights (times the coefficient's
# direction), H = left right' (the coefficients' rank) and S^2 the errors'
# `variance`: of the coded rows' square, but in n^2 time.
error_form <- function(pairs, left, right, share, variance) {
  through <- pairs %*% left
  ph <- through %*% t(right)
  hph <- right %*% crossprod(left, through) %*% t(right)
  form <- pairs - share * (ph + t(ph)) + share^2 * hph
  sd <- sqrt(variance)
  form * sd * rep(sd, each = length(sd))
}
