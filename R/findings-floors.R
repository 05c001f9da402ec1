# The variance's floors: what a stratum of few coded units borrows, and the
# least residual variance a coded row is taken to have where the coded rows
# show no error of the predictions.

# Strata with fewer coded units than this borrow part of their variance.
few_coded_units <- 10L

# Each stratum's units, drawn units and covariance of the unit totals of z
# (the first `p` columns of its totals). A stratum with fewer than
# few_coded_units coded units cannot be trusted with its own spread: two or
# three alike codes give a variance of 0 by chance, and the interval then
# rests on an effective n near the corpus size (a thin stratum with 2 coded
# rows: 0.823 coverage, 0.605 where they agreed). It takes its own spread
# for its k - 1 degrees of freedom and the spread z would have were each
# unit's residual of variance `residual` (borrowed_variance()), with its
# direction on the coefficients (the last `p` columns), for the other
# few_coded_units - k (borrowed_cov()): never 0, and unbiased where the
# strata's residuals have one variance. Raising the variance to that spread
# where below (the rule before) overstated it on average wherever strata are
# small, as in rounds and at 40-60 coded rows: a label as a covariate on a
# thin stratum at 40 rows, the variance 1.41x the estimate's spread and
# coverage 0.990; pooled, 1.00x. `pooled`: whether borrowing raised any
# coefficient's variance (the printout names these strata). `alike`: per
# stratum, whether its codes are all one value (codes_alike()). `levels`:
# how many floored_levels()' scaled directions follow in the totals' columns,
# whose spread is the stratum's `level` part (design_vcov() adds it).
# Clusters drawn whole (`cluster_spreads`, cluster_row_spreads()) borrow as
# each row's residual would, independent of its cluster's others, and keep at
# least their own spread: a cluster's total borrowed as one row's times its
# rows (their errors all alike) made 8 of 80 speakers' corpus share 1.72x as
# wide as their own spread gives, covering 1.000; their own alone covered
# 0.943-0.948 at 4-8 speakers of 20, and so does this rule, 0.973 and 0.950
# at 4 and 8 (1,000 draws each). Their own alone is not enough for a slope on
# 6 speakers of 10 (the coverage matrix's, population): 0.908, as borrowed
# before 0.956, by this rule 0.970; a logistic slope on 4 speakers 0.948,
# 0.992 and 1.000 (500 draws each).
pooled_strata <- function(units, residual, p, alike, least = NULL, levels = 0, cluster_spreads = NULL) {
  Map(function(h, s2, same, rows_spread) {
    totals <- h$totals[, seq_len(p), drop = FALSE]
    own <- stratum_cov(totals)
    direction <- h$totals[, p + seq_len(p), drop = FALSE]
    spread <- if (is.null(rows_spread)) crossprod(direction) / nrow(direction) else rows_spread / h$drawn
    cov <- borrowed_cov(own, h$drawn, if (!is.na(s2)) s2 * spread)
    if (!is.null(rows_spread)) cov <- at_least(cov, own)
    # floored_levels()' directions follow, each times the sd its rows borrow
    level <- lapply(seq_len(levels), function(l) {
      scaled <- h$totals[, (l + 1) * p + seq_len(p), drop = FALSE]
      crossprod(scaled) / nrow(scaled)
    })
    c(h[c("units", "drawn")], list(cov = cov, pooled = any(diag(cov) > diag(own) * (1 + 1e-12)), alike = same,
                                   third = stratum_third(h, totals),
                                   least = if (!is.null(least) && !is.na(least)) least * spread,
                                   level = if (levels > 0) Reduce(`+`, level)))
  }, units, residual[names(units)], alike[names(units)], cluster_spreads[names(units)] %||% list(NULL))
}

#' @rdname label_regression
#' @section A level whose coded rows agree: Where the coded rows of a factor's
#'   level (or of a binary covariate's ones or zeros) have 0/1 codes all of one
#'   value, their residuals are near 0 by chance, and the level's coefficient
#'   with them (a level of 3% of 3,000 rows with 4-9 coded rows: its interval
#'   covered 0.35-0.66 where they agreed); where it is the reference level (a
#'   text column's first level in the alphabet), the intercept and every
#'   contrast with them; where factors interact, each cell of the
#'   interaction is such a level. Their part of the sampling variance
#'   is then added at least at the variance of Agresti and Coull's adjusted
#'   proportion of their \eqn{n}{n} codes, \eqn{(k + 2) / (n + 4)}{(k + 2) /
#'   (n + 4)} for \eqn{k}{k} codes of 1;
#'   the printout names the levels, and the fit's `variance_levels` holds
#'   them. The coded rows' own interval (`coded_only`, printed beside) takes
#'   the same floor. A numeric answer (a rating coded by hand) is floored
#'   where a level has fewer than 10 coded rows, as a thin stratum is: their
#'   own residuals count for their \eqn{k - 1}{k - 1} degrees of freedom, the
#'   spread of all coded rows' residuals for the rest. A rating's group of 3%
#'   of 3,000 rows with 150 coded rows had an interval of no width where its
#'   few residuals were all 0; it covered 0.932, now 0.981 with intervals
#'   0.73x as wide; where the model errs twice as much in that group as in the
#'   others, 0.836, now 0.922: the spread of all rows cannot show it.
#'   [label_shares()]' groups keep Wilson's interval, which holds them.
#' @name label_regression
NULL

# The levels of the coded rows' design (a factor's, a binary covariate's 1s
# and 0s) whose variance takes a floor. Those whose 0/1 codes are all one
# value: their coefficients rest on residuals near 0 by chance, wherever the
# level's rows fall among the strata (a level of 3-5% of 3,000 rows, 150
# rows by confidence: where its 4-9 coded rows agreed, its slope covered
# 0.35-0.66, where they differed 0.94-0.97).
# The reference level among them, on which the intercept and every contrast
# rest: a character column's levels are alphabetical, and where the first was
# that 3% level, the intercept covered 0.756 and the 20% level's contrast
# 0.921 over 1,000 draws (0.255 and 0.796 over 400 where its codes agreed).
# Where main effects interact (`yes ~ group * gender`), each cell of the
# interaction instead: the 3% group's contrast in the reference gender
# covered 0.888 over 1,000 draws (0.636 over 300 where that cell's codes
# agreed and the group's did not).
# Each such level's coded rows and the residual variance they are taken to
# add at least: that of Agresti and Coull's adjusted proportion of their codes,
# as a thin stratum borrows (borrowed_variance()). `levels`: factor_levels().
# Not label_shares()' groups (`.group`), whose Wilson interval holds them
# already (a group of 3% of the same rows: 0.953; with this floor 0.997).
# A numeric answer's (`answer`) levels of fewer than few_coded_units coded
# rows instead, as a thin stratum (borrowed_cov()): their own residuals
# weighed for their k - 1 df, the residuals' spread of all coded rows for the
# rest (residual_spread()). A rating's group of 3% of 3,000 rows, 150 uniform
# coded rows: where its few residuals were all 0 its interval had no width;
# its coefficient covered 0.932 over 1,000 draws, now 0.981, 0.73x as wide
# (the t on a few rows' df had widened the rest); where the model's errors
# in that group are twice the others' 0.836, now 0.922 (the spread pooled
# over all rows cannot see it), 0.65x as wide. Each level: its
# rows, the `variance` its rows are taken to add, the weights on their `own`
# residuals and on that `borrowed` part (at the working model's variance, for
# satterthwaite_df()), and its `rule` for the printout.
floored_levels <- function(fits, codes, levels = NULL, answer = FALSE) {
  if ((!codes$zero_one && !answer) || length(levels$mains) == 0) return(list())
  x <- fits[[1]]$x[coded_positions(fits[[1]]), , drop = FALSE]
  mains <- Filter(function(main) all(x[, main$columns] %in% c(0, 1)), levels$mains)
  # each coded row's level of each main effect: its column of 1, or the reference
  level_of <- lapply(mains, function(main) {
    on <- x[, main$columns, drop = FALSE] == 1
    ifelse(rowSums(on) == 0, main$reference, main$columns[max.col(on, ties.method = "first")])
  })
  interactions <- Filter(function(v) all(v %in% names(mains)), levels$interactions)
  interactions <- Filter(function(v) !any(vapply(interactions, function(w) all(v %in% w) && length(w) > length(v), NA)),
                         interactions)
  # the cells of the largest interactions, and the levels of the main effects in none
  sets <- c(unname(level_of[setdiff(names(level_of), unlist(interactions))]),
            lapply(interactions, function(v) do.call(paste, c(unname(level_of[v]), sep = ":"))))
  rows <- unlist(lapply(sets, function(set) lapply(stats::setNames(nm = unique(set)), `==`, set)), recursive = FALSE)
  pooled <- if (!codes$zero_one) residual_spread(fits, codes)
  levels <- lapply(rows, function(inside) {
    if (!codes$zero_one) {
      k <- sum(inside)
      if (k >= few_coded_units) return(NULL)
      borrowed <- (few_coded_units - k) / (few_coded_units - 1)
      return(list(rows = inside, variance = pooled * borrowed, own = (k - 1) / (few_coded_units - 1),
                  borrowed = borrowed, rule = "few"))
    }
    if (length(unique(codes$y[inside])) > 1) return(NULL)
    adjusted <- (sum(codes$y[inside]) + 2) / (sum(inside) + 4)
    list(rows = inside, variance = adjusted * (1 - adjusted), own = 0, borrowed = 1, rule = "alike")
  })
  Filter(Negate(is.null), levels)
}

# Each coefficient's residual spread on the coded rows pooled within the
# strata, at its fit's lambda: the errors its sampling variance sums
# (design_parts()' z), y - mu - lambda (prediction - mu).
residual_spread <- function(fits, codes) {
  vapply(seq_along(fits), function(j) {
    fit <- fits[[j]]
    mu <- fit$mu[coded_positions(fit)]
    lambda <- fit$lambda[[min(j, length(fit$lambda))]]
    pooled_within_strata(matrix(codes$y - mu - lambda * (codes$prediction - mu)), codes$stratum)[[1]]
  }, 0)
}

# Each coded row's weight on its own residual: 1, or its level's `own`
# (floored_levels()).
own_weights <- function(levels, n) {
  own <- rep(1, n)
  for (level in levels) own[level$rows] <- level$own
  own
}

# The model matrix `x`'s main effects (of `terms`, read from `frame`) other
# than label_shares()' groups, by label: their columns and the name of their
# rows of all 0, the reference level where it has rows (a factor's first
# level, FALSE, or "= 0" for a number); and the interactions of main effects
# alone, as their labels.
factor_levels <- function(x, terms, frame) {
  labels <- attr(terms, "term.labels")
  if (length(labels) == 0) return(list())
  main <- labels[!grepl(":", labels, fixed = TRUE) & !startsWith(labels, ".group")]
  first <- stats::.getXlevels(terms, frame)
  mains <- lapply(stats::setNames(nm = main), function(label) {
    list(columns = colnames(x)[attr(x, "assign") == match(label, labels)],
         reference = if (!is.null(first[[label]])) paste0(label, first[[label]][[1]])
                     else if (is.logical(frame[[label]])) paste0(label, "FALSE") else paste(label, "= 0"))
  })
  variables <- attr(terms, "factors")
  interactions <- lapply(labels[grepl(":", labels, fixed = TRUE)], function(label) {
    rownames(variables)[variables[, label] > 0]
  })
  list(mains = mains, interactions = Filter(function(v) all(v %in% main), interactions))
}

# Per stratum of the coded rows, whether their codes (stratum_codes()) are all
# one value.
codes_alike <- function(codes) tapply(codes$y, codes$stratum, function(y) length(unique(y)) == 1)

# A stratum's covariance `own` from its `drawn` units, and where they are
# fewer than few_coded_units, the covariance `borrowed` had it the rest:
# weighted by their degrees of freedom.
borrowed_cov <- function(own, drawn, borrowed) {
  if (drawn >= few_coded_units || is.null(borrowed)) return(own)
  ((drawn - 1) * own + (few_coded_units - drawn) * borrowed) / (few_coded_units - 1)
}

# The residual variance a stratum with few coded units borrows, by stratum.
# For codes of 0 and 1, that of Agresti and Coull's adjusted proportion of
# its codes, (ones + 2) / (rows + 4), which is never 0 (two alike codes give
# 0.222, and the coin flip's truth 0.25); else the residuals' variance pooled
# within the strata.
borrowed_variance <- function(codes) {
  if (codes$zero_one) {
    adjusted <- (tapply(codes$y, codes$stratum, sum) + 2) / (tapply(codes$y, codes$stratum, length) + 4)
    return(adjusted * (1 - adjusted))
  }
  pooled <- pooled_within_strata(matrix(codes$y - codes$mu), codes$stratum)[[1]]
  tapply(codes$y, codes$stratum, function(r) pooled)
}

# The covariance of the columns of `m` (a row a coded row) pooled within the
# strata: each row centred in its stratum (centred_within()), over the rows
# less the strata (pooled_df()). Of the residuals, the variance a stratum of
# few units borrows; satterthwaite_df() weighs the errors through it.
pooled_within_strata <- function(m, stratum) crossprod(centred_within(m, stratum)) / pooled_df(stratum)
centred_within <- function(m, stratum) {
  key <- match(stratum, unique(stratum))
  m - rowsum(m, key, reorder = FALSE)[key, , drop = FALSE] / tabulate(key)[key]
}
pooled_df <- function(stratum) max(length(stratum) - length(unique(stratum)), 1)

#' @rdname label_regression
#' @section Predictions right on every coded row: Where no coded row of 0/1
#'   codes is wrong (each prediction within 0.5 of its code), the residuals,
#'   and the corrected estimate's sampling variance with them, are near 0,
#'   while the predictions may err on rows the sample missed (a learner 99%
#'   right saw no error among 150 coded rows in a fifth of draws, and its
#'   intervals then covered 0.32). Each row's residual variance is then taken
#'   to be at least Wilson's centre for no error among the \eqn{n}{n} coded
#'   rows, \eqn{(z^2 / 2) / (n + z^2)}{(z^2 / 2) / (n + z^2)}; a message
#'   (`newrllama4_message_variance_floored`) says so, and the fit's
#'   `variance_floored` records it. The same holds for [label_shares()].
#' @name label_regression
NULL

# The least residual variance a coded row of 0/1 codes is taken to have
# where the predictions are right on every coded row (within 0.5 of its code):
# Wilson's centre for an error rate seen in none of the n coded rows, (z^2 /
# 2) / (n + z^2). Such predictions leave residuals of nearly 0, and the
# corrected estimate's variance with them, while they err on rows the sample
# missed: Gemma 3 270M's learner on 150 coded nouns and verbs was right on all
# of them (cross-fitted), wrong on 29 of the 550 others, and the corpus
# share's interval was [0.586, 0.591] for a truth of 0.620. On learnable rows
# with 2% of them a coin flip (a learner 99% right), 56 draws of 300 saw no
# error among 150 coded rows, and covered 0.32 (all draws 0.857; with the
# floor 1.0 and 0.983). One error seen, the residuals' own spread stands. NA where
# there is one, or for codes not of 0 and 1.
rare_error_variance <- function(codes) {
  if (!codes$zero_one || any(abs(codes$y - codes$prediction) >= 0.5)) return(NA_real_)
  z2 <- stats::qnorm(0.975)^2
  (z2 / 2) / (length(codes$y) + z2)
}

# The sampling covariance `sampling` with each coefficient's variance raised
# to `least`'s where below (rare_error_variance()), its correlations kept.
at_least <- function(sampling, least) {
  if (identical(least, 0)) return(sampling)
  raise <- ifelse(diag(sampling) > 0, pmax(1, diag(least) / diag(sampling)), 1)
  sampling <- sampling * sqrt(outer(raise, raise))
  zero <- diag(sampling) <= 0
  diag(sampling)[zero] <- diag(least)[zero]
  sampling
}

# Whether rare_error_variance() raised any coefficient's sampling variance.
variance_floored <- function(parts) {
  least <- strata_sum(parts, "least")
  !identical(least, 0) && any(diag(least) > diag(strata_sum(parts, "cov")))
}

# The strata's `part` ("cov", or "least" where rare_error_variance() gives one) weighted into the estimated total's.
strata_sum <- function(parts, part, scale = 1) {
  Reduce(`+`, lapply(parts$strata, function(h) stratum_weight(h, scale) * (h[[part]] %||% 0)))
}
