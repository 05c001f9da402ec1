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
#
# Omega is a square of the coded rows, so its cost grows with their cube (19 s
# at 1,000 coded rows, 141 s at 2,000): past small_sample_df_rows the df is
# the design's alone (Inf here, capped by the caller). There the correction
# would move a t quantile little on most designs, the leverage of any one row
# being small; a covariate skewed enough to matter there is the leverage
# check's to flag, not the df's to widen.
satterthwaite_df <- function(fits, sample, target = "population") {
  if (inherits(fits, "newrllama4_moment_fit")) fits <- rep(list(fits), length(fits$coefficients))
  if (length(sample$rows) > small_sample_df_rows) return(rep(Inf, length(fits)))
  rows_drawn <- is.null(sample$unit) && is.null(sample$cluster)
  coded <- stratum_codes(fits[[1]], sample)
  vapply(seq_along(fits), function(j) {
    fit <- fits[[j]]
    moments <- coded_moments(fit, small_sample = rows_drawn)
    n <- nrow(moments$a)
    codes <- coded_positions(fit)
    on_codes <- fit$x[codes, , drop = FALSE]
    hat <- (on_codes * fit$slope[codes]) %*% moments$bread %*% t(on_codes * fit$w[codes])
    # each map times the working model's sd of each code's error
    per_error <- rep(sqrt(fit$slope[codes]), each = n)
    residual <- (diag(n) - hat) * per_error
    direction <- as.vector(moments$on_codes %*% moments$bread[j, ])
    lambda <- fit$lambda[[min(j, length(fit$lambda))]]
    # what a stratum of few units borrows: the pooled residuals' spread, a quadratic form in the errors; or for 0/1
    # codes its adjusted proportion's, taken as known (a few alike codes move it little), at the working model's
    zero_one <- coded$zero_one
    pooled <- if (!zero_one) pooled_within_strata(residual, coded$stratum) else 0
    variance <- if (zero_one) tapply(fit$slope[codes], coded$stratum, mean)
    units <- stratum_units(cbind(direction * (diag(n) - (1 - lambda) * hat) * per_error, direction), sample)
    strata <- Map(function(h, name) {
      own <- stratum_cov(h$totals[, seq_len(n), drop = FALSE])
      spread <- mean(h$totals[, n + 1]^2)
      cov <- borrowed_cov(own, h$drawn, pooled * spread)
      known <- if (zero_one && name %in% names(variance)) borrowed_cov(0, h$drawn, spread * variance[[name]]) else 0
      c(h, list(cov = cov, known = known))
    }, units, names(units))
    omega <- design_vcov(list(population = population_part(direction * residual, sample), strata = strata), target)
    known <- sum(vapply(strata, function(h) stratum_weight(h) * h$known, 0))
    if (sum(omega^2) <= 0) return(Inf)
    (sum(diag(omega)) + known)^2 / sum(omega^2)
  }, 0)
}
