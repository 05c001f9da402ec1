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
# other folds). A regression of y~ on the covariates, solved as an M-estimator
# with a sandwich variance (sandwich::sandwich() through estfun() and bread()
# methods), is then valid for the regression of the truth.

# The rows and codes behind an estimate: `coded` checked against `data`, with
# each coded row's position among `data`'s rows, its inclusion probability and
# its code (as character).
coded_sample <- function(data, coded, truth, call) {
  if (!is.data.frame(coded) || !".row" %in% names(coded)) {
    abort_coded("{.arg coded} must be a data frame of rows coded by hand with {.field .row} (their row numbers in
                 {.arg data}), as {.fn review_sample} gives them.", call)
  }
  if (!".sample_prob" %in% names(coded)) {
    abort_coded(c("{.arg coded} has no {.field .sample_prob}: each coded row's probability of being drawn.",
                  "i" = "Draw the rows to code with {.fn review_sample}, which records it, and keep the column
                         when the codes come back."), call)
  }
  rows <- coded$.row
  if (!is.numeric(rows) || anyNA(rows) || !all(rows %in% seq_len(nrow(data))) || anyDuplicated(rows)) {
    abort_coded("{.field .row} of {.arg coded} must name distinct rows of {.arg data}.", call)
  }
  rows <- as.integer(rows)
  prob <- coded$.sample_prob
  if (!is.numeric(prob) || anyNA(prob) || any(prob <= 0 | prob > 1)) {
    abort_coded("{.field .sample_prob} of {.arg coded} must be probabilities above 0.", call)
  }
  # columns copied from data by review_sample(), not the codes
  shared <- setdiff(intersect(names(coded), names(data)),
                    c(names(coded)[startsWith(names(coded), ".")], all.vars(rlang::quo_get_expr(truth))))
  differs <- shared[vapply(shared, function(column) {
    !identical(as.character(coded[[column]]), as.character(data[[column]][rows]))
  }, NA)]
  if (length(differs) > 0) {
    abort_coded(c("The coded rows are not those rows of {.arg data}: {.field {differs}} differ{?s/}.",
                  "i" = "{.field .row} numbers the rows of {.arg data} as it was drawn from: do not sort, filter or
                         reorder it in between."), call)
  }
  truth <- rlang::eval_tidy(truth, coded)
  if (length(truth) != nrow(coded) || anyNA(truth)) {
    abort_coded(c("{.arg truth} must give a code for every coded row.",
                  "i" = "Rows left out of a drawn sample bias the correction: code them, or draw again."), call,
                class = "newrllama4_error_coded_truth")
  }
  list(rows = rows, prob = prob, truth = truth)
}

abort_coded <- function(message, call, class = NULL) {
  cli::cli_abort(message, class = c(class, "newrllama4_error_coded_rows", "newrllama4_error_invalid_argument",
                                    "newrllama4_error"), call = call, .envir = parent.frame())
}

# What an outcome means in `data`: a label (its indicator, predicted by its
# `.prob_` column) or a numeric or logical answer column (predicted by itself).
outcome_spec <- function(outcome, data, call) {
  labels <- if (".label" %in% names(data)) levels(as.factor(data$.label)) else character()
  prob_column <- paste0(".prob_", outcome)
  if (outcome %in% labels && prob_column %in% names(data)) {
    return(list(kind = "label", name = outcome, labels = labels, prediction = as.numeric(data[[prob_column]]),
                label = as.numeric(as.character(data$.label) == outcome)))
  }
  if (outcome %in% names(data) && (is.numeric(data[[outcome]]) || is.logical(data[[outcome]]))) {
    value <- as.numeric(data[[outcome]])
    return(list(kind = "answer", name = outcome, prediction = value, label = value))
  }
  cli::cli_abort(
    c("The outcome {.val {outcome}} is neither a label with a {.field {prob_column}} column nor a numeric answer
       column of {.arg data}.",
      "i" = if (length(labels) > 0) "Its labels: {.val {labels}}."),
    class = c("newrllama4_error_missing_column", "newrllama4_error_invalid_argument", "newrllama4_error"),
    argument = "formula", call = call
  )
}

# The coded rows' truth on the outcome's scale: a label's indicator, or the
# answer's number.
outcome_truth <- function(spec, truth, call) {
  if (spec$kind == "label") {
    truth <- field_codes(truth)
    if (!all(truth %in% spec$labels)) {
      outside <- unique(truth[!truth %in% spec$labels])
      abort_coded(c("{.arg truth} must be one of the labels ({.val {spec$labels}}) for every coded row.",
                    "x" = "It has {.val {outside}}."), call, class = "newrllama4_error_coded_truth")
    }
    return(as.numeric(truth == spec$name))
  }
  if (!is.numeric(truth) && !is.logical(truth)) {
    abort_coded("{.arg truth} must be numeric or logical, as the answer {.field {spec$name}} is.", call,
                class = "newrllama4_error_coded_truth")
  }
  as.numeric(truth)
}

# Data that recalibrate_labels() refitted on coded rows: its probabilities saw
# those codes, so they are refitted again fold by fold (from the orders'
# probabilities it keeps) before use.
refitted_by_hand <- function(data) {
  record <- attr(data, "manifest", exact = TRUE)
  identical(record$prompt$calibration, "hand-coded") && !is.null(attr(data, "order_probs", exact = TRUE))
}

# Folds for cross-fitting: coded and other rows each spread evenly over the folds.
cross_fit_folds <- function(n_rows, coded_rows, k, seed) {
  assign <- function() {
    fold <- integer(n_rows)
    others <- setdiff(seq_len(n_rows), coded_rows)
    fold[coded_rows] <- sample(rep_len(seq_len(k), length(coded_rows)))
    fold[others] <- sample(rep_len(seq_len(k), length(others)))
    fold
  }
  if (is.null(seed)) assign() else withr::with_seed(seed, assign())
}

# Each row's prediction for the pseudo-outcome, cross-fitted wherever codes were
# used. `prediction = "probs"` takes the model's probability (or answer) as it
# is; `"fit"` fits, on the coded rows of the other folds, a model of the truth
# on the probability's logit (or the answer) and the covariates `x`, weighted
# by 1 / pi: it corrects a model whose errors follow the covariates.
cross_fitted_predictions <- function(spec, x, sample, y, folds, prediction, data, binary) {
  refit <- spec$kind == "label" && refitted_by_hand(data)
  if (!refit && prediction == "probs") return(list(g = spec$prediction, model = "the model's probabilities"))
  if (refit) {
    log_probs <- lapply(attr(data, "order_probs", exact = TRUE)$probs, order_log_probs)
    codes <- match(as.character(sample$truth_labels), spec$labels)
    # the refit recalibrate_labels() chose
    chosen <- attr(data, "manifest", exact = TRUE)$prompt
    refit_model <- chosen$refit_model %||% "offsets and order weights"
    refit_penalty <- chosen$refit_penalty %||% 0.01
  }
  g <- spec$prediction
  for (k in sort(unique(folds))) {
    train <- which(folds[sample$rows] != k)
    at <- which(folds == k)
    base <- spec$prediction
    if (refit) {
      fit <- fit_label_model(lapply(log_probs, function(l) l[sample$rows[train], , drop = FALSE]), codes[train],
                             refit_model, refit_penalty)
      base <- softmax_rows(label_scores(log_probs, fit))[, match(spec$name, spec$labels)]
    }
    g[at] <- if (prediction == "probs") base[at] else {
      features <- cbind(if (binary) stats::qlogis(pmin(pmax(base, 1e-4), 1 - 1e-4)) else base, x)
      fitted <- moment_fit(features[sample$rows[train], , drop = FALSE], y[train], 1 / sample$prob[train],
                           binary = binary, penalty = 1)
      moment_mean(features[at, , drop = FALSE] %*% fitted$coefficients, binary)
    }
  }
  model <- paste0(
    if (refit) "recalibrate_labels()'s refit" else "the model's probabilities",
    if (prediction == "fit") ", with the covariates, in a regression of the truth on the coded rows",
    ", cross-fitted in ", length(unique(folds)), " folds"
  )
  list(g = g, model = model)
}

moment_mean <- function(eta, binary) as.vector(if (binary) stats::plogis(eta) else eta)

# The M-estimator of E[y | x] = mean(x b) (identity or logit link) from
# sum_i w_i x_i (y_i - mean(x_i b)) = 0, by Newton's method; a ridge `penalty`
# on all but the first column (for the prediction models of cross-fitting, kept
# finite on few rows). `y` may lie outside [0, 1] for the logit: the
# pseudo-outcomes do.
moment_fit <- function(x, y, w = rep(1, length(y)), binary = FALSE, penalty = 0) {
  x <- as.matrix(x)
  ridge <- diag(penalty * c(0, rep(1, ncol(x) - 1)), ncol(x))
  beta <- rep(0, ncol(x))
  for (iteration in 1:100) {
    mu <- moment_mean(x %*% beta, binary)
    slope <- if (binary) mu * (1 - mu) else rep(1, length(mu))
    hessian <- crossprod(x, x * (w * slope)) + ridge
    step <- solve(hessian, crossprod(x, w * (y - mu)) - ridge %*% beta)
    beta <- beta + as.vector(step)
    if (max(abs(step)) < 1e-10) break
  }
  names(beta) <- colnames(x)
  mu <- moment_mean(x %*% beta, binary)
  slope <- if (binary) mu * (1 - mu) else rep(1, length(mu))
  structure(list(coefficients = beta, x = x, y = y, w = w, mu = mu, slope = slope),
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

moment_vcov <- function(fit) {
  v <- sandwich::sandwich(fit)
  dimnames(v) <- list(names(fit$coefficients), names(fit$coefficients))
  v
}

# The three estimates of one regression: corrected (the pseudo-outcomes on
# every row), naive (the model's labels as if true) and the coded rows alone
# (weighted by 1 / pi).
three_estimates <- function(x, spec, sample, y, g, binary) {
  rows <- sample$rows
  coded <- numeric(nrow(x))
  coded[rows] <- 1 / sample$prob
  pseudo <- g + coded * (replace(numeric(nrow(x)), rows, y) - g)
  fits <- list(
    corrected = moment_fit(x, pseudo, binary = binary),
    naive = moment_fit(x, spec$label, binary = binary),
    coded_only = moment_fit(x[rows, , drop = FALSE], y, 1 / sample$prob, binary = binary)
  )
  list(fits = fits, vcov = lapply(fits, moment_vcov), pseudo = pseudo, g = g, weights = coded)
}

# The corrected estimate's variance were the sample `scale` times as large
# (each row's inclusion probability scaled, at most 1): the pseudo-outcomes'
# errors split into a part that does not depend on the sample and one that
# falls with 1 / pi.
scaled_vcov <- function(estimate, scale) {
  fit <- estimate$fits$corrected
  g_error <- estimate$g - fit$mu
  weight <- estimate$weights  # R / pi
  prob <- ifelse(weight > 0, 1 / weight, 1)
  residual <- ifelse(weight > 0, (fit$y - estimate$g) / weight, 0)  # y - g on coded rows
  per_row <- g_error^2 + 2 * g_error * weight * residual + weight * residual^2 / pmin(prob * scale, 1)
  n <- nrow(fit$x)
  bread <- bread.newrllama4_moment_fit(fit)
  meat <- crossprod(fit$x, fit$x * per_row) / n
  bread %*% meat %*% bread / n
}
