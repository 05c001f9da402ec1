#' How many rows to code by hand for a target standard error
#'
#' From a pilot: a [label_regression()] or [label_shares()] estimate on a first
#' sample of coded rows, the number of coded rows that would bring each
#' corrected estimate's standard error down to `se`. The corrected estimate's
#' variance has a part that coding more rows cannot remove (the spread of the
#' predictions over the rows) and a part that falls as the coded rows grow
#' (the model's errors, weighted by the inverse of the inclusion probabilities);
#' both are estimated from the pilot, and the sample is taken to grow in the
#' same design (every inclusion probability scaled alike, at most 1). Draw the
#' extra rows with `review_sample(previous =)`; clusters drawn whole are drawn
#' in one round, so a cluster sample's plan (`clusters_needed`) is for a
#' sample drawn anew.
#'
#' The answer is as good as the pilot's estimate of the model's errors: with
#' a few dozen coded rows it is rough, so plan with a margin.
#'
#' Rounds by doubt: give `doubt`, the labels learned from the pilot
#' ([learn_labels()]), to plan a further round drawn where they are unsure
#' (`review_sample(weight = "learned")`) against one drawn uniformly. The
#' round is drawn by the doubt of the learned confidence \eqn{c},
#' \eqn{d = \sqrt{c (1 - c)}}{d = sqrt(c (1 - c))}; the plan takes each row's
#' error variance from what the pilot's codes say that doubt is worth: the
#' coded rows' squared errors (their cross-fitted confidence against their
#' codes) fitted as \eqn{a + b d^2}{a + b d^2}. A learner as sure as its codes
#' bear out gives \eqn{d^2}{d^2} itself; an overconfident one, whose sure rows
#' err more often than they claim, is planned for the smaller gain it will
#' give. The round's sampling variance is that of the pilot's design at its
#' size times the ratio the round's bands of doubt give under those variances;
#' the rounds are combined as the estimators combine them (see
#' [review_sample()]). `neyman_bound` is that ratio at its best, the round
#' drawn in proportion to each row's error sd \eqn{s}{s} as planned (no bands):
#' \eqn{\bar{s}^2 / \overline{s^2}}{mean(s)^2 / mean(s^2)}, which for a learner as
#' sure as its codes is \eqn{\bar{d}^2 / \overline{d^2}}{mean(d)^2 / mean(d^2)}. A
#' label's share ([label_shares()]), or a regression with a label as its
#' outcome, is planned for a round drawn by that label's own doubt
#' (`review_sample(label =)`, the doubt of its learned probability \eqn{p},
#' \eqn{\sqrt{p (1 - p)}}{sqrt(p (1 - p))}); with two labels it is the same
#' round.
#'
#' Several annotators (models, or instructions) can be compared on one pilot:
#' annotate the same texts with each, code one pilot sample, fit the same
#' estimate on each annotation, and pass the fits as a named list. Each then
#' gets its plan, ranked by the coded rows it needs, beside its annotation
#' time per row: the planner for choosing a model, since a better annotator
#' needs fewer coded rows but may take longer to run.
#'
#' @param x A [label_regression()] or [label_shares()] value, or a named list
#'   of them, one an annotator, all on one pilot sample coded by hand.
#' @param se The target standard error.
#' @param terms For a regression, the coefficients (by name) to plan for: by
#'   default all but the intercept.
#' @param doubt `NULL`, or the value of [learn_labels()] on the pilot's rows
#'   (the labels that `x` estimated with), to plan a further round drawn by
#'   their doubt.
#' @param seconds_per_row For a list of annotators, `NULL` to take each one's
#'   annotation time per row from its manifest (total seconds over prompts),
#'   or a numeric vector named by annotator.
#' @return A data frame, a row per coefficient (or per label and group):
#'   `term`, `std.error` (now), `coded` (now), `target` and `coded_needed`:
#'   the coded rows that reach the target, or `NA` where coding every row
#'   would not (the rows themselves are then too few) or where the estimate
#'   stops before it (a slope on a covariate with a long tail:
#'   [label_regression()]'s `newrllama4_error_skewed_covariate`). For
#'   clusters drawn whole, `clusters_needed`: the clusters a sample of the
#'   same design draws to reach it, as many more in proportion as the rows
#'   (`review_sample(cluster =)` counts clusters, and draws them in one
#'   round). For a list of
#'   annotators, `annotator` first and `seconds_per_row` last, ranked within
#'   each term by `coded_needed`. With `doubt`, three more columns: the rows to
#'   add uniformly (`more_uniform`) and in a round by doubt (`more_by_doubt`),
#'   `NA` where the rows not coded would not reach the target, and the round's
#'   `neyman_bound` (its sampling variance over a uniform round's, at best).
#' @seealso [label_regression()] and [label_shares()], whose estimates it plans for; [review_sample()] to draw the rows.
#' @export
#' @examples
#' set.seed(3)
#' n <- 5000
#' texts <- data.frame(x = rnorm(n))
#' truth <- rbinom(n, 1, plogis(0.5 * texts$x))
#' label <- ifelse(runif(n) < 0.85, truth, 1 - truth)
#' texts$.label <- factor(ifelse(label == 1, "yes", "no"), levels = c("yes", "no"))
#' texts$.prob_yes <- ifelse(label == 1, 0.85, 0.15)
#' texts$.prob_no <- 1 - texts$.prob_yes
#' texts$.confidence <- 0.85
#' texts$truth <- ifelse(truth == 1, "yes", "no")
#'
#' pilot <- review_sample(texts, n = 100, weight = "uniform", seed = 1)
#' coded_rows_needed(label_regression(yes ~ x, texts, pilot, truth, seed = 1), se = 0.01)
coded_rows_needed <- function(x, se, terms = NULL, seconds_per_row = NULL, doubt = NULL) {
  fits <- c("newrllama4_label_regression", "newrllama4_label_shares")
  se <- check_number(se, "se", min = 0, open_min = TRUE)
  if (!is.null(terms) && (!is.character(terms) || anyNA(terms) || length(terms) == 0)) {
    abort_invalid("{.arg terms} must be {.code NULL} or names of coefficients, not {.obj_type_friendly {terms}}.",
                  "terms", current_env())
  }
  annotators <- is.list(x) && !inherits(x, fits)
  if (!is.null(seconds_per_row) &&
      (!annotators || !is.numeric(seconds_per_row) || anyNA(seconds_per_row) || any(seconds_per_row < 0) ||
       !rlang::is_named(seconds_per_row))) {
    abort_invalid("{.arg seconds_per_row} must be {.code NULL} or, for a list of annotators, their seconds per row
                   named by annotator.", "seconds_per_row", current_env())
  }
  if (!is.null(doubt) && (!is.data.frame(doubt) || !all(c(".label", ".confidence") %in% names(doubt)) ||
                          !identical(learned_calibration(doubt), "learned"))) {
    abort_invalid("{.arg doubt} must be {.code NULL} or the value of {.fn learn_labels}: the labels whose doubt would
                   draw the next round.", "doubt", current_env())
  }
  if (annotators && length(x) > 0 && all(vapply(x, inherits, NA, fits)) &&
      rlang::is_named(x)) {
    return(annotators_needed(x, se, terms, seconds_per_row, current_env()))
  }
  if (!inherits(x, fits)) {
    abort_invalid("{.arg x} must be the value of {.fn label_regression} or {.fn label_shares}, or a named list of them
                   (one an annotator).", "x", current_env())
  }
  estimates <- if (inherits(x, "newrllama4_label_shares")) attr(x, "estimates", exact = TRUE) else list(x)
  rows <- do.call(rbind, lapply(names(estimates) %||% "", function(label) {
    estimate <- estimates[[if (nzchar(label)) label else 1]]
    coefficient_names <- names(estimate$fits$corrected$coefficients)
    chosen <- terms %||% (if (length(coefficient_names) > 1) setdiff(coefficient_names, "(Intercept)") else
      coefficient_names)
    if (!all(chosen %in% coefficient_names)) {
      abort_invalid("{.arg terms} must name coefficients: {.val {coefficient_names}}.", "terms", current_env())
    }
    coded <- length(estimate$coded_rows)
    se_at <- function(scale) sqrt(diag(design_vcov(estimate$parts$corrected, estimate$target, scale)))[chosen]
    most <- 1 / min(estimate$sample_prob)  # every row coded
    needed <- vapply(seq_along(chosen), function(j) {
      gap <- function(log_scale) se_at(exp(log_scale))[j] - se
      if (gap(log(most)) > 0) return(NA_real_)
      if (gap(log(1e-3)) <= 0) return(1)
      ceiling(coded * exp(stats::uniroot(gap, c(log(1e-3), log(most)), tol = 1e-6)$root))
    }, 0)
    term <- if (nzchar(label)) paste(label, sub("^\\.group", "", chosen), sep = ": ") else chosen
    # past the rows at which a slope on a long tail stops (covariate_reach()), no plan reaches the target
    needed[needed > (estimate$leverage$rows_limit %||% Inf)] <- NA
    plan <- data.frame(term = term, std.error = unname(se_at(1)), coded = coded, target = se,
                       coded_needed = as.integer(pmin(needed, length(estimate$rows))), stringsAsFactors = FALSE)
    design <- estimate$design
    if (!identical(design$sampling_unit, ".row")) {
      # clusters drawn whole grow as the rows do; review_sample(cluster =) counts them, not rows
      grown <- ceiling(design$clusters_drawn * plan$coded_needed / coded)
      plan$clusters_needed <- as.integer(pmin(grown, design$clusters))
    }
    if (!is.null(doubt)) {
      # an outcome that is a label (a share, or a regression of it) by its own doubt, where `doubt` has its
      # probabilities (its labels those of `x`)
      own <- if (identical(estimate$outcome_kind, "label") && paste0(".prob_", estimate$outcome) %in% names(doubt)) {
        estimate$outcome
      }
      plan <- cbind(plan, round_by_doubt(estimate, chosen, se, doubt, plan$coded_needed, own))
    }
    plan
  }))
  rownames(rows) <- NULL
  rows
}

# The plan for each annotator's pilot fit (on one coded sample), ranked by the
# coded rows each needs, then by its time per row: `seconds_per_row` as given,
# else its annotation's manifest (total seconds over prompts).
annotators_needed <- function(fits, se, terms, seconds_per_row, call) {
  samples <- lapply(fits, function(fit) sort((attr(fit, "estimates", exact = TRUE)[[1]] %||% fit)$coded_rows))
  if (length(unique(samples)) > 1) {
    abort_invalid("The annotators' fits must use one pilot sample coded by hand: the same rows of the same texts.",
                  "x", call)
  }
  plans <- do.call(rbind, lapply(names(fits), function(annotator) {
    record <- attr(fits[[annotator]], "manifest", exact = TRUE)
    seconds <- seconds_per_row[annotator] %||% NA_real_
    if (is.na(seconds) && !is.null(record$timings$total_seconds) && !is.null(record$prompts$total)) {
      seconds <- record$timings$total_seconds / record$prompts$total
    }
    cbind(annotator = annotator, coded_rows_needed(fits[[annotator]], se, terms), seconds_per_row = unname(seconds),
          stringsAsFactors = FALSE)
  }))
  plans <- plans[order(plans$term, plans$coded_needed, plans$seconds_per_row, na.last = TRUE), , drop = FALSE]
  rownames(plans) <- NULL
  plans
}

# A further round planned (coded_rows_needed(doubt =)): the rows to add
# uniformly (the pilot's design grown, as review_sample(previous =) grows it)
# and by the doubt of the learned labels `doubt` for each coefficient of
# `chosen` to reach `se`, and the round's Neyman bound. The round by doubt is
# combined with the pilot as the estimators combine rounds (with_rounds()):
# weights n1 / (n1 + n2) and n2 / (n1 + n2) on the pilot's sampling variance
# and the round's, the round's that of the pilot's design at n2 rows times
# doubt_variance_ratio() at the variances the pilot's codes give the doubt
# (doubt_variance()); the population part as it is. With `label`, the
# round drawn by that label's doubt (review_sample(label =)).
round_by_doubt <- function(estimate, chosen, se, doubt, coded_needed, label = NULL) {
  rest <- setdiff(which(!is.na(doubt$.label)), estimate$coded_rows)
  spread <- row_doubt(doubt, label)[rest]
  variance <- doubt_variance(doubt, label)[rest]
  parts <- estimate$parts$corrected
  n1 <- length(estimate$coded_rows)
  population <- if (estimate$target == "population") parts$population else 0
  pilot <- design_vcov(parts, "corpus")
  # ranked once: the bisection below tries some 17 round sizes a term over the same rows
  ranked <- doubt_ranks(spread)
  se_after <- function(n2) {
    share <- n2 / (n1 + n2)
    round <- doubt_variance_ratio(spread, n2, variance, ranked) * design_vcov(parts, "corpus", n2 / n1)
    sqrt(diag(population + (1 - share)^2 * pilot + share^2 * round))[chosen]
  }
  now <- sqrt(diag(population + pilot))[chosen]
  by_doubt <- vapply(seq_along(chosen), function(j) {
    if (now[j] <= se) return(0L)
    if (se_after(length(rest))[j] > se) return(NA_integer_)
    low <- 0L
    high <- length(rest)
    # the fewest rows that reach `se`, by bisection (the se falls as the round grows)
    while (high - low > 1L) {
      middle <- (low + high) %/% 2L
      if (se_after(middle)[j] <= se) high <- middle else low <- middle
    }
    high
  }, 0L)
  by_doubt[n1 + by_doubt > (estimate$leverage$rows_limit %||% Inf)] <- NA_integer_  # the estimate stops there
  data.frame(more_uniform = pmax(coded_needed - n1, 0L), more_by_doubt = by_doubt,
             neyman_bound = doubt_variance_ratio(spread, variance = variance))
}
