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
# on the codes (the coded rows).
design_fit <- function(x, g, y, sample, binary, lambda) {
  inverse <- 1 / sample$prob
  fit <- moment_fit(rbind(x$predicted, x$coded, x$predicted[sample$rows, , drop = FALSE]), c(g, y, g[sample$rows]),
                    c(rep(lambda, nrow(x$predicted)), inverse, -lambda * inverse), binary)
  fit$lambda <- lambda
  fit$n_rows <- nrow(x$predicted)
  fit
}

# The estimating function on the coded rows: on their codes (`a`) and on their
# predictions (`b`), from the stacked fit.
coded_moments <- function(fit) {
  n <- (nrow(fit$x) - fit$n_rows) / 2
  moment <- function(at) fit$x[at, , drop = FALSE] * (fit$y[at] - fit$mu[at])
  list(a = moment(fit$n_rows + seq_len(n)), b = moment(fit$n_rows + n + seq_len(n)),
       bread = solve(crossprod(fit$x, fit$x * (fit$w * fit$slope))))
}

# Each coded row's stratum: `.stratum` where the sample has it, else the rows
# drawn with the same probability.
stratum_of <- function(sample) {
  if (!is.null(sample$stratum)) as.character(sample$stratum) else format(sample$prob, digits = 15)
}

# Within-stratum covariance of the rows of `m` (a stratum's coded rows); a
# stratum of one row has none to centre on, so its row counts uncentred.
stratum_cov <- function(m) {
  if (nrow(m) < 2) return(crossprod(m))
  crossprod(sweep(m, 2, colMeans(m))) / (nrow(m) - 1)
}

# The variance's parts at `fit`: the bread (the estimating equation's
# Jacobian, inverted), the corpus-to-population part and each stratum's rows,
# coded rows and covariance of z.
design_parts <- function(fit, sample) {
  moments <- coded_moments(fit)
  z <- moments$a - fit$lambda * moments$b
  members <- split(seq_along(sample$rows), stratum_of(sample))
  list(
    bread = moments$bread,
    population = crossprod(moments$a, moments$a / sample$prob),
    strata = lapply(members, function(i) {
      list(rows = sum(1 / sample$prob[i]), coded = length(i), cov = stratum_cov(z[i, , drop = FALSE]))
    })
  )
}

# The variance for `target`, were each stratum's coded rows `scale` times as
# many (at most all its rows): coded_rows_needed() plans with it.
design_vcov <- function(parts, target = "population", scale = 1) {
  sampling <- Reduce(`+`, lapply(parts$strata, function(h) {
    coded <- min(h$coded * scale, h$rows)
    h$rows^2 * max(1 / coded - 1 / h$rows, 0) * h$cov
  }))
  meat <- if (target == "population") parts$population + sampling else sampling
  v <- parts$bread %*% meat %*% parts$bread
  dimnames(v) <- list(colnames(parts$bread), colnames(parts$bread))
  v
}

# PPI++'s lambda for this design, from a first fit: the minimiser of the
# trace of the sampling part's variance, tr(B (S_a - 2 lambda C_ab + lambda^2
# S_b) B), with a = x (y - mu), b = x (g - mu) and S, C summed over strata with
# their weights N_h^2 (1 / n_h - 1 / N_h); cut to [0, 1].
tuned_lambda <- function(fit, sample) {
  moments <- coded_moments(fit)
  a <- moments$a
  b <- moments$b
  bread <- moments$bread
  members <- split(seq_along(sample$rows), stratum_of(sample))
  parts <- lapply(members, function(i) {
    size <- sum(1 / sample$prob[i])
    weight <- if (length(i) < 2) 0 else size^2 * max(1 / length(i) - 1 / size, 0)
    centre <- function(m) sweep(m[i, , drop = FALSE], 2, colMeans(m[i, , drop = FALSE]))
    list(cross = weight * crossprod(centre(a), centre(b)) / max(length(i) - 1, 1),
         spread = weight * crossprod(centre(b)) / max(length(i) - 1, 1))
  })
  cross <- Reduce(`+`, lapply(parts, `[[`, "cross"))
  spread <- Reduce(`+`, lapply(parts, `[[`, "spread"))
  trace <- function(m) sum(diag(bread %*% m %*% bread))
  denominator <- trace(spread)
  if (!is.finite(denominator) || denominator <= 0) return(1)
  min(max(trace((cross + t(cross)) / 2) / denominator, 0), 1)
}

target_words <- c(population = "population the texts were drawn from", corpus = "corpus itself (every row coded)")

# The weight on the predictions (one, or one a label), as print() tells it.
lambda_line <- function(lambda, tuned) {
  values <- if (is.null(names(lambda))) sprintf("%.3f", lambda) else paste(names(lambda), sprintf("%.3f", lambda))
  sprintf("Weight on the predictions (lambda): %s%s.", paste(values, collapse = ", "),
          if (tuned) ", tuned to the data (1 is DSL, 0 the coded rows alone)" else ", as given")
}
