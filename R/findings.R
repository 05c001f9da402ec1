# The design-based correction behind label_regression() and label_shares():
# model labels for every row, codes by hand for a sample of known inclusion
# probabilities, combined in the doubly robust moment of DSL (Egami et al.
# 2023). Each row's pseudo-outcome is its prediction plus, for a coded row, the
# prediction's error weighted by 1 / pi:
#
#   y~ = g + R / pi * (y - g)
#
# Its expectation is the truth's whatever g is, as long as a coded row's
# prediction does not use its own code: predictions fitted on coded rows are
# cross-fitted (each fold's rows predicted by a fit to the coded rows of the
# other folds). A regression of y~ on the covariates, solved as an M-estimator,
# is then valid for the regression of the truth. findings-variance.R weighs the
# predictions by a tuned lambda (PPI++) and gives the design's variance; the
# naive fit keeps the sandwich variance (sandwich::sandwich() through estfun()
# and bread() methods).

# A labelled variable of `data`: a label of the annotation (its indicator,
# predicted by `.prob_<label>`), a boolean field of a schema annotation (its
# TRUE, predicted by `.prob_<field>_true`), or an enum field (a covariate: its
# levels' indicators, predicted by `.prob_<field>_<value>`); NULL for anything
# else. `positive` is the code that counts as 1, `label` the model's own.
variable_spec <- function(name, data) {
  labels <- if (".label" %in% names(data)) levels(as.factor(data$.label)) else character()
  prob_column <- paste0(".prob_", name)
  if (name %in% labels && prob_column %in% names(data)) {
    return(list(kind = "label", name = name, positive = name, labels = labels,
                prediction = as.numeric(data[[prob_column]]), label = as.numeric(as.character(data$.label) == name)))
  }
  prob_column <- paste0(".prob_", name, "_true")
  if (is.logical(data[[name]]) && prob_column %in% names(data)) {
    if (refitted_field(name, data)) return(NULL)
    return(list(kind = "field", name = name, positive = "true", labels = c("true", "false"),
                prediction = as.numeric(data[[prob_column]]), label = as.numeric(data[[name]])))
  }
  prob_columns <- paste0(".prob_", name, "_", levels(data[[name]]))
  if (is.factor(data[[name]]) && all(prob_columns %in% names(data))) {
    if (refitted_field(name, data)) return(NULL)
    return(list(kind = "enum", name = name, labels = levels(data[[name]]),
                prediction = `colnames<-`(as.matrix(data[prob_columns]), levels(data[[name]])), label = data[[name]]))
  }
  NULL
}

# What an outcome means in `data`: a labelled variable, or a numeric or
# logical column: an answer coded by hand (`coded`), or observed for every row.
outcome_spec <- function(outcome, data, call, coded = TRUE) {
  spec <- variable_spec(outcome, data)
  if (identical(spec$kind, "enum")) {
    abort_invalid("The enum field {.field {outcome}} is an outcome through one of its values: give
                   {.code field = \"{outcome}\"} and put the value on the left.", "formula", call)
  }
  if (!is.null(spec)) return(spec)
  if (outcome %in% names(data) && (is.numeric(data[[outcome]]) || is.logical(data[[outcome]]))) {
    value <- as.numeric(data[[outcome]])
    return(list(kind = if (coded) "answer" else "observed", name = outcome, prediction = value, label = value))
  }
  labels <- if (".label" %in% names(data)) levels(as.factor(data$.label)) else character()
  abort_invalid(c("The outcome {.val {outcome}} is neither a label with a {.field {paste0('.prob_', outcome)}} column
                   nor a numeric answer column of {.arg data}.",
                  "i" = if (length(labels) > 0) "Its labels: {.val {labels}}."),
                "formula", call, subclass = "missing_column")
}

# The coded rows' truth on a variable's scale: a label's indicator (the codes
# already spelled as labels), or the answer's number.
variable_truth <- function(spec, truth, call) {
  if (spec$kind == "enum") return(factor(truth, levels = spec$labels))
  if (!is.null(spec$positive)) return(as.numeric(truth == spec$positive))
  if (!is.numeric(truth) && !is.logical(truth)) {
    abort_newrllama4("coded_truth", "{.arg truth} must be numeric or logical, as the answer {.field {spec$name}} is.",
                     call = call)
  }
  as.numeric(truth)
}

# Labels that learn_labels() learned or recalibrate_labels() refitted from
# coded rows, with the learner that did it.
learned_by_hand <- function(data) {
  !is.null(learned_calibration(data)) && !is.null(attr(data, "learner", exact = TRUE))
}

# Whether the estimators fit learn_labels()' learner in their folds, given
# the coded rows' `design` (or a sample of it, with its `round`): where it
# learned the labels, and where its guard kept them as annotated but rounds
# were drawn since, whose codes it never saw (its decision on the first round
# would otherwise leave every later round's codes to the labels as annotated:
# two rounds of 75 on SmolLM2's words then used the learner in 4 draws of 8,
# 150 uniform rows in all 8). Each fold's choice may still keep the labels as
# they are. Not where the rows no longer match what it learned from.
learner_in_folds <- function(data, design) {
  if (learned_by_hand(data)) return(TRUE)
  declined <- identical(attr(data, "manifest", exact = TRUE)$prompt$learner, "none")
  declined && any(design$round > 1) && learner_matches_rows(data)
}

# A boolean or enum field of `data` that recalibrate_labels(field =) refitted
# or learn_labels(field =) learned.
refitted_field <- function(name, data) {
  record <- attr(data, "manifest", exact = TRUE)$prompt
  name %in% names(data) && isTRUE(record[[paste0("calibration (", name, ")")]] %in% fitted_to_codes)
}

# Labels that recalibrate_labels() refitted or learn_labels() learned saw the
# codes, so each fold's predictions come from the refit or the learner chosen
# and fitted again on the other folds' coded rows. NULL for labels as
# annotated; else the model's name and probability(sample, train, at, choice):
# the probability of the label of the rows `at` from the coded rows at
# positions `train` of `sample` (whose sampling units, `sample$units`, the
# learner's own choice folds keep whole), by the setting `choice` (NULL: chosen
# there), which the value keeps in its attribute `choice`.
# `in_folds`: learner_in_folds(), decided once by the estimator for its folds too.
refitted_on_folds <- function(spec, data, in_folds) {
  if (!in_folds) return(NULL)
  column <- match(spec$name, spec$labels)
  learner <- learner_of(data, NULL, spec$labels)
  refit <- identical(learned_calibration(data), "hand-coded")
  list(name = paste(if (refit) "recalibrate_labels()'s refit" else "learn_labels()'s learner",
                    "chosen and fitted again in each fold", sep = ", "),
       probability = function(sample, train, at, choice = NULL) {
         codes <- match(as.character(sample$truth_labels[train]), spec$labels)
         probs <- learner(sample$rows[train], codes, sample$units[train], at, sample$prob[train],
                          split_shares(sample$split, spec$name), choice)
         structure(probs[, column], choice = attr(probs, "choice"))
       })
}

# Each row's prediction for the pseudo-outcome, cross-fitted wherever codes were
# used. `prediction = "probs"` takes the model's probability (or answer) as it
# is; `"fit"` fits, on the coded rows of the other folds, a model of the truth
# on the probability's logit (or the answer) and the covariates `x`, weighted
# by 1 / pi: it corrects a model whose errors follow the covariates.
# `refitted`: the labels' learner (refitted_on_folds()), NULL for labels as
# annotated; `choices`, each fold's setting for it (NULL: chosen in the fold),
# which the value returns; `read`, the rows to predict (the others keep the
# model's probabilities).
cross_fitted_predictions <- function(spec, x, sample, y, folds, prediction, binary, refitted, choices = NULL,
                                     read = seq_along(folds)) {
  if (is.null(refitted) && prediction == "probs") return(list(g = spec$prediction, model = "the model's probabilities"))
  g <- spec$prediction
  choices <- choices %||% vector("list", max(folds))
  for (k in sort(unique(folds))) {
    train <- which(folds[sample$rows] != k)
    at <- intersect(which(folds == k), read)
    base <- spec$prediction
    if (!is.null(refitted)) {
      # a fold's learner predicts only the rows it is used on (at 100,000 rows, predicting every row in every
      # fold was most of label_shares()' time)
      used <- if (prediction == "probs") at else union(sample$rows[train], at)
      probability <- refitted$probability(sample, train, used, choices[[k]])
      base[used] <- probability
      choices[[k]] <- attr(probability, "choice")
    }
    g[at] <- if (prediction == "probs") base[at] else {
      # an intercept beside the probability, so that a constant miscalibration is learnt
      features <- cbind(1, if (binary) stats::qlogis(pmin(pmax(base, 1e-4), 1 - 1e-4)) else base, x)
      fitted <- moment_fit(features[sample$rows[train], , drop = FALSE], y[train], 1 / sample$prob[train],
                           binary = binary, penalty = 1, free = 2)
      moment_mean(features[at, , drop = FALSE] %*% fitted$coefficients, binary)
    }
  }
  model <- paste0(
    refitted$name %||% "the model's probabilities",
    if (prediction == "fit") ", with the covariates, in a regression of the truth on the coded rows",
    ", cross-fitted in ", length(unique(folds)), " folds"
  )
  list(g = g, model = model, choices = choices)
}

moment_mean <- function(eta, binary) as.vector(if (binary) stats::plogis(eta) else eta)

# Each row's residual y - mean(eta) and the mean's slope, from the rarer
# side's probability, exact however far out the row: in doubles plogis(38) is
# 1, and a row that far out would add exactly nothing to Newton's steps, so
# that a separated fit would stop there as though converged.
moment_terms <- function(eta, y, binary) {
  if (!binary) return(list(residual = y - eta, slope = rep(1, length(eta))))
  far <- exp(-abs(eta))
  rarer <- far / (1 + far)
  above <- eta > 0
  list(residual = y - above + (2 * above - 1) * rarer, slope = rarer * (1 - rarer))
}

# The M-estimator of E[y | x] = mean(x b) (identity or logit link) from
# sum_i w_i x_i (y_i - mean(x_i b)) = 0; a ridge `penalty` on all but the first
# `free` columns (for the prediction models of cross-fitting, kept finite on
# few rows).
# `y` may lie outside [0, 1] for the logit: the pseudo-outcomes do. The logit's
# equation is the gradient of a concave quasi-likelihood, so Newton's steps are
# halved until it rises; where it has no finite maximum (a cell whose weighted
# mean of y is not inside (0, 1), or separation) the steps along the direction
# that separates do not shrink, and 100 of them end with `converged` FALSE.
# That needs each row's residual and slope without a fitted 0 or 1 rounded
# (moment_terms()). A large linear predictor is no sign of separation: a row
# of weight 0 (the predictions' rows at lambda 0) says nothing, and a tail
# drawn whole (review_sample(tail =)) is rightly fitted near 0 or 1; read as
# one, it stopped fits that glm() finds finite (4-12% of the coverage matrix's
# logistic draws at 40-60 coded rows).
moment_fit <- function(x, y, w = rep(1, length(y)), binary = FALSE, penalty = 0, free = 1) {
  x <- as.matrix(x)
  ridge <- diag(penalty * (seq_len(ncol(x)) > free), ncol(x))
  objective <- function(beta) {
    eta <- as.vector(x %*% beta)
    fit <- if (binary) sum(w * (y * eta - log1p(exp(-abs(eta))) - pmax(eta, 0))) else -sum(w * (y - eta)^2) / 2
    fit - sum(beta * (ridge %*% beta)) / 2
  }
  beta <- rep(0, ncol(x))
  current <- objective(beta)
  converged <- FALSE
  for (iteration in 1:100) {
    terms <- moment_terms(as.vector(x %*% beta), y, binary)
    step <- tryCatch(solve(crossprod(x, x * (w * terms$slope)) + ridge,
                           crossprod(x, w * terms$residual) - ridge %*% beta), error = function(e) NULL)
    if (is.null(step)) break
    step <- as.vector(step)
    for (halving in 0:30) {
      proposed <- objective(beta + step)
      if (is.finite(proposed) && proposed >= current - 1e-12 * abs(current)) break
      step <- step / 2
    }
    beta <- beta + step
    current <- proposed
    if (max(abs(step)) < 1e-9) {
      converged <- TRUE
      break
    }
  }
  names(beta) <- colnames(x)
  eta <- as.vector(x %*% beta)
  structure(list(coefficients = beta, x = x, y = y, w = w, mu = moment_mean(eta, binary),
                 slope = moment_terms(eta, y, binary)$slope, converged = converged),
            class = "newrllama4_moment_fit")
}

# sandwich's generics: the estimating functions and the bread, so that
# sandwich::sandwich() gives the robust variance of moment_fit().
#' @exportS3Method sandwich::estfun
estfun.newrllama4_moment_fit <- function(x, ...) x$x * (x$w * (x$y - x$mu))

#' @exportS3Method sandwich::bread
bread.newrllama4_moment_fit <- function(x, ...) {
  nrow(x$x) * solve(crossprod(x$x, x$x * (x$w * x$slope)))
}

# The sandwich variance, cluster-robust (sandwich::vcovCL) where rows share
# clusters.
moment_vcov <- function(fit, cluster = NULL) {
  v <- if (is.null(cluster)) sandwich::sandwich(fit) else
    sandwich::vcovCL(fit, cluster = cluster, type = "HC0", cadjust = FALSE)
  dimnames(v) <- list(names(fit$coefficients), names(fit$coefficients))
  v
}

# The three estimates of one regression, from `x`'s model matrices on the
# predictions, on the coded rows' codes and on the model's labels: corrected
# (the predictions at the weight `lambda`, one for all coefficients or one
# each, NULL to tune each coefficient's, and the coded rows), naive (the model's
# labels as if true, with the sandwich variance) and the coded rows alone
# (weighted by 1 / pi: the corrected estimate at lambda 0, so that both have
# the design's variance for `target`). The corrected fit must exist; the other
# two are only for comparison, so one that does not converge is left out with
# a warning. `dependence(lambda, v)`: the variance that the predictions'
# dependence on the coded rows adds to the corrected estimate's `v`
# (learner_dependence()), NULL where they do not depend on them.
three_estimates <- function(x, spec, sample, y, g, binary, call, lambda = NULL, target = "population",
                            dependence = NULL) {
  units <- independent_units(sample)
  rule <- if (!is.null(lambda)) "as given" else if (units < lambda_tuning_units) {
    sprintf("1 (DSL): fewer than %d %s to tune it on", lambda_tuning_units,
            if (units < length(sample$rows)) "coded clusters" else "coded rows")
  } else {
    "tuned to the data (PPI++)"
  }
  if (is.null(lambda) && units < lambda_tuning_units) lambda <- 1
  tuned <- is.null(lambda)
  if (tuned) {
    first <- design_fit(x, g, y, sample, binary, 1)
    if (!first$converged) abort_degenerate(call)
    lambda_terms <- tuned_lambda(first, sample)
    lambda <- lambda_from(lambda_terms)
  }
  columns <- colnames(x$predicted)
  lambda <- stats::setNames(rep_len(lambda, length(columns)), columns)
  corrected_at <- function(lambda) {
    own <- fits_at_own_lambda(x, g, y, sample, binary, lambda)
    corrected <- own[[1]]
    corrected$coefficients <- stats::setNames(own_coefficients(own), columns)
    corrected$converged <- all(vapply(own, `[[`, NA, "converged"))
    corrected$lambda <- lambda
    list(own = own, fit = corrected)
  }
  corrected <- corrected_at(lambda)
  fits <- list(
    corrected = corrected$fit,
    naive = moment_fit(x$naive, spec$label, binary = binary),
    coded_only = design_fit(x, g, y, sample, binary, 0)
  )
  if (!fits$corrected$converged) abort_degenerate(call)
  failed <- names(fits)[!vapply(fits, `[[`, NA, "converged")]
  if (length(failed) > 0) {
    warn_newrllama4("degenerate_fit", c(
      "The {.val {failed}} logistic fit{?s} did not converge (separation, or a cell with all codes or labels alike):
       left out.", "i" = "The corrected estimate stands; it is the one to report."))
  }
  parts <- list(corrected = design_parts(corrected$own, sample, c("errors", "levels")),
                coded_only = if (fits$coded_only$converged) design_parts(fits$coded_only, sample, "levels"))
  if (!is.null(dependence)) {
    learner <- dependence(lambda, design_vcov(parts$corrected, target))
    worse <- no_gain_left(learner, parts, target)
    if (any(worse) && rule != "as given") {
      lambda[worse] <- 0
      rule <- paste0(rule, "; 0 (the coded rows alone) where the learner's dependence on them left no gain")
      corrected <- corrected_at(lambda)
      fits$corrected <- corrected$fit
      parts$corrected <- design_parts(corrected$own, sample, c("errors", "levels"))
      learner <- dependence(lambda, design_vcov(parts$corrected, target))
    }
    parts$corrected$learner <- learner
  }
  vcov <- list(corrected = design_vcov(parts$corrected, target),
               naive = if (fits$naive$converged) moment_vcov(fits$naive, sample$clusters),
               coded_only = if (fits$coded_only$converged) design_vcov(parts$coded_only, target))
  for (name in failed) {
    fits[[name]]$coefficients[] <- NA_real_
    vcov[[name]] <- matrix(NA_real_, length(columns), length(columns), dimnames = list(columns, columns))
  }
  skewness <- lapply(stats::setNames(nm = c("corrected", "coded_only")), function(name) {
    if (is.null(parts[[name]])) rep(0, length(columns)) else design_skewness(parts[[name]], diag(vcov[[name]]), target)
  })
  pooled <- names(Filter(function(h) h$pooled, parts$corrected$strata))
  if (length(pooled) > 0) {
    inform_newrllama4("variance_pooled", c(
      "{cli::qty(length(pooled))}{?Stratum/Strata} {.val {pooled}} {?has/have} too few coded rows (under
       {few_coded_units}) to trust {cli::qty(length(pooled))}{?its/their} spread alone: {?its/their} variance borrows
       the spread of codes in general, which is larger.",
      "i" = "Code more rows of {cli::qty(length(pooled))}{?it/them} (draw more with {.code review_sample(previous =)})."))
  }
  floored <- variance_floored(parts$corrected)
  if (floored) {
    inform_newrllama4("variance_floored", c(
      "The predictions are right on every coded row, so their errors elsewhere are unseen: the sampling
       variance is taken at least as that of an error rate of {signif(parts$corrected$least_rate, 2)} (Wilson's
       centre for no error among the coded rows).",
      "i" = "Code more rows: the interval needs some of the rows the predictions get wrong."))
  }
  df_of <- function(fit, levels = list()) {
    stats::setNames(pmin(satterthwaite_df(fit, sample, target, levels), design_df(sample)), columns)
  }
  list(fits = fits, vcov = vcov, parts = parts, skewness = skewness, lambda = lambda, lambda_tuned = tuned,
       lambda_rule = rule,
       variance_pooled = pooled, variance_floored = floored, variance_levels = names(parts$corrected$floored_levels),
       variance_levels_rule = unique(vapply(parts$corrected$floored_levels, `[[`, "", "rule")),
       lambda_terms = if (tuned) lambda_terms, target = target, design_df = design_df(sample),
       df = list(corrected = df_of(corrected$own, parts$corrected$floored_levels),
                 naive = if (is.null(sample$clusters)) Inf else length(unique(sample$clusters)) - 1,
                 coded_only = if (fits$coded_only$converged) df_of(fits$coded_only, parts$coded_only$floored_levels)
                              else design_df(sample)))
}

# How many coded units the design's variance sees as independent: the coded
# rows, or the clusters drawn whole or named by `cluster =` where there are
# fewer of them. Lambda is tuned on these units, not on the rows within them.
independent_units <- function(sample) {
  units <- length(unique(sample$unit %||% seq_along(sample$rows)))
  if (is.null(sample$cluster)) units else min(units, length(unique(sample$cluster)))
}

# The design variance's degrees of freedom, as survey's degf(): the sampling
# units coded (rows, or clusters drawn whole) less the strata, or with
# clusters sharing errors the clusters coded less one, whichever is fewer.
# Each estimate's df (satterthwaite_df()) is at most this.
design_df <- function(sample) {
  units <- sample$unit %||% seq_along(sample$rows)
  df <- length(unique(units)) - length(unique(stratum_of(sample)))
  if (!is.null(sample$cluster)) df <- min(df, length(unique(sample$cluster)) - 1)
  max(df, 1)
}

abort_degenerate <- function(call) {
  abort_newrllama4("degenerate_fit", c(
    "The corrected logistic regression has no finite estimate: in some cell of the covariates the corrected share of
     the outcome is not between 0 and 1 (or the covariates separate it).",
    "i" = "Merge sparse levels, code more rows in them, or use {.code family = \"gaussian\"}."), call = call)
}
