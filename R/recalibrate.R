#' Labels refitted to a sample coded by hand
#'
#' Learns from rows that people coded how far to trust each order of the worked
#' examples and how much each label is favoured, then labels every row of an
#' [annotate_texts()] result again. Calibration without labels (`calibrate`)
#' has to guess the model's bias: batch calibration assumes that the rows are
#' an even mix of the labels, and costs accuracy where one label dominates; a
#' sample coded by hand shows both the bias and the mix.
#'
#' Each row's score for a label is an offset for that label plus a weighted sum,
#' over the orders of the examples, of the log-probability the model gave the
#' label under that order (the orders' raw probabilities, before `calibrate`);
#' its probabilities are the scores' softmax. The offsets (the first label's is
#' 0) and the weights are fitted to the coded rows by maximum likelihood, with
#' a weak ridge (toward no offsets and equal weights) that keeps them finite
#' when the coded rows are told apart perfectly. With one order this is
#' temperature scaling with label offsets; with several it also learns which
#' order to believe, so an order whose examples misled the model counts less.
#'
#' How much to fit is chosen on the coded rows themselves, so that a refit never
#' makes the labels worse than they were by more than the noise of that choice:
#' the candidates, from the fewest parameters to the most, are offsets alone
#' (the orders weighed equally, as they are), offsets with a temperature, and
#' offsets with a weight per order, each with a ridge of strength 0.01, 0.1, 1
#' or 10; each is scored on the coded rows it was not fitted to (5-fold
#' cross-validation, in the coded rows' order, so that the same rows give the
#' same choice), and so are the labels as they are. A candidate qualifies when
#' its held-out accuracy beats the labels' as they are by more than one
#' standard error of the paired difference; the qualified one with the lowest
#' held-out log-loss wins. Log-loss alone is not enough: offsets that make the
#' probabilities more honest can move the labels of a model that tells the
#' labels apart poorly the wrong way (on five parts of speech, Gemma 3 270M's
#' labels lost 3.5 points of accuracy to offsets fitted to all 200 rows, while
#' their log-loss fell from 1.44 to 1.33). Where no refit qualifies, the labels
#' are kept, with a message (class `newrllama4_message_refit_declined`). Fewer than about 10 coded rows
#' per parameter of the largest candidate (labels - 1 + orders) make that
#' choice noisy: a warning (class `newrllama4_warning_few_coded`) says how many
#' rows would do.
#'
#' The fit describes the coded rows, so they must be a random sample of the
#' rows: draw them with `review_sample(weight = "uniform")`. A sample drawn
#' toward doubt holds too many rows near the boundary and would move it. For
#' the same reason [agreement()] on the coded rows overstates the refitted
#' labels' accuracy: the manifest gives their cross-validated accuracy instead.
#' [label_regression()] and [label_shares()] on the refitted labels refit them
#' fold by fold, with the same choice of model.
#'
#' @param data The value of [annotate_texts()] with `labels`, or with a
#'   `schema` and `field`.
#' @param coded Rows of `data` coded by hand, with `.row` (their row numbers in
#'   `data`, as [review_sample()] gives them) and the people's labels.
#' @param truth The column of `coded` that holds the people's labels (one of the
#'   labels for every row).
#' @param field `NULL` for the labels, or the name of an enum or boolean field
#'   of the `schema` given to [annotate_texts()]: its values are refitted as
#'   labels (one order: offsets, or offsets and a temperature), and its column,
#'   `.prob_<field>_<value>` and `.confidence_<field>` change; the manifest's
#'   entries of the refit carry the field's name, such as
#'   `"refit_model (tone)"`.
#' @return `data` with `.label`, the `.prob_` columns, `.confidence` and
#'   `.agreement_orders` (each order's own label, under the fitted offsets)
#'   from the fit. The manifest's `calibration` becomes `"hand-coded"`, with
#'   the number of coded rows, the chosen `refit_model` and `refit_penalty`,
#'   the fitted offsets and order weights, the chosen refit's cross-validated
#'   accuracy and `refit_cross_validation`: every candidate's cross-validated
#'   accuracy and log-loss, beside those of the labels as they are. Where no
#'   refit is chosen, `data` as it was, with `refit_model` `"none"` and the
#'   candidates' figures in its manifest.
#' @export
#' @examplesIf engine_available()
#' reviews <- data.frame(review = c(
#'   "Broke after a day.", "Works well.", "Too loud and too slow.", "Great value.", "Arrived broken.",
#'   "Does the job.", "Never again.", "Lovely design."
#' ))
#' reviews$gold <- rep(c("negative", "positive"), 4)
#' examples <- data.frame(review = c("Awful.", "Love it."), .label = c("negative", "positive"))
#' labelled <- annotate_texts(reviews, review, "Is the review positive or negative?",
#'                            labels = c("positive", "negative"), examples = examples,
#'                            example_orders = 2L, progress = FALSE)
#' coded <- review_sample(labelled, n = 6, weight = "uniform", seed = 1)
#' refitted <- recalibrate_labels(labelled, coded, gold)
#' fit <- manifest(refitted)$prompt
#' fit[c("calibration", "refit_model", "label_offsets", "order_weights", "cross_validated_accuracy")]
#' fit$refit_cross_validation
recalibrate_labels <- function(data, coded, truth, field = NULL) {
  if (!is.null(field)) {
    if (!is.data.frame(data)) abort_invalid("{.arg data} must be the value of {.fn annotate_texts}.", "data", current_env())
    refitted <- recalibrate_labels(labels_view(data, field), coded, !!rlang::enquo(truth))
    return(from_labels_view(data, refitted, field))
  }
  record <- attr(data, "order_probs", exact = TRUE)
  if (!is.data.frame(data) || is.null(record) || !identical(record$confidence, data$.confidence)) {
    abort_invalid(c("{.arg data} must be the value of {.fn annotate_texts} with {.arg labels}, as it returned it.",
                    "i" = "Each order's probabilities are kept for its rows in their order: refit before
                           subsetting, sorting or changing them."),
                  "data", current_env())
  }
  order_probs <- record$probs
  labels <- levels(data$.label)
  sample <- checked_coded_rows(data, coded, rlang::enquo(truth), current_env(), labels = labels,
                               probabilities = FALSE)
  rows <- sample$rows
  truth <- sample$truth
  n_parameters <- length(labels) - 1 + length(order_probs)
  if (length(unique(truth)) < 2 || length(rows) <= n_parameters) {
    abort_invalid(c("{.arg coded} needs more than {n_parameters} rows, with at least two labels among them.",
                    "i" = "It has {length(rows)} row{?s} and {length(unique(truth))} label{?s}."),
                  "coded", current_env())
  }

  answered <- which(!is.na(data$.label))
  if (any(vapply(order_probs, function(probs) anyNA(probs[answered, ]), NA))) {
    abort_newrllama4("calibration", "The label probabilities of some labelled rows are missing (a server that gave
                     none), so nothing can be refitted.", call = current_env())
  }
  log_probs <- lapply(order_probs, order_log_probs)
  y <- match(truth, labels)
  coded_log_probs <- lapply(log_probs, function(l) l[rows, , drop = FALSE])
  as_given <- as.matrix(data[rows, paste0(".prob_", labels), drop = FALSE])
  choice <- choose_refit(coded_log_probs, y, as_given)
  record <- attr(data, "manifest", exact = TRUE)
  record$prompt$hand_coded_rows <- length(rows)
  record$prompt$refit_cross_validation <- choice$table$summary
  warn_few_coded(length(rows), length(labels), length(order_probs))
  if (choice$model == "none") {
    inform_newrllama4("refit_declined", c(
      "No refit labels the coded rows better than the labels as they are: they are kept.",
      "i" = "Cross-validated on the {length(rows)} coded rows; {.code manifest()$prompt$refit_cross_validation} has
             every candidate's figures."))
    record$prompt$refit_model <- "none"
    attr(data, "manifest") <- record
    return(data)
  }
  fit <- fit_label_model(coded_log_probs, y, choice$model, choice$penalty)

  answered_log_probs <- lapply(log_probs, function(l) l[answered, , drop = FALSE])
  probs <- softmax_rows(label_scores(answered_log_probs, fit))
  label <- most_likely(probs, labels)
  data$.label[answered] <- label
  for (k in seq_along(labels)) data[[paste0(".prob_", labels[k])]][answered] <- probs[, k]
  data$.confidence[answered] <- apply(probs, 1, max)
  if (".agreement_orders" %in% names(data)) {
    # each order alone, weighted as all of them together
    alone <- list(offsets = fit$offsets, weights = sum(fit$weights))
    order_labels <- vapply(answered_log_probs, function(l) most_likely(label_scores(list(l), alone), labels),
                           character(length(answered)))
    data$.agreement_orders[answered] <- rowMeans(matrix(order_labels == label, length(answered)))
  }
  attr(data, "order_probs") <- order_probs_record(order_probs, data)
  record$prompt$calibration <- "hand-coded"
  record$prompt$refit_model <- choice$model
  record$prompt$refit_penalty <- choice$penalty
  record$prompt$label_offsets <- paste(labels, formatC(fit$offsets, digits = 3, format = "f"), collapse = ", ")
  record$prompt$order_weights <- paste0(record$prompt$example_orders %||% "1", ": ",
                                        formatC(fit$weights, digits = 3, format = "f"), collapse = ", ")
  record$prompt$cross_validated_accuracy <- choice$accuracy
  attr(data, "manifest") <- record
  data
}

# The refit's candidates, from the fewest parameters to the most: an offset per
# label (the orders' mean log-probability as it is), then a temperature, then a
# weight per order; each with a ridge of one of `refit_penalties`.
refit_models <- c("offsets", "offsets and temperature", "offsets and order weights")
refit_penalties <- c(0.01, 0.1, 1, 10)

# The refit that labels the coded rows better out of sample, by more than the noise
# of 5-fold cross-validation (deterministic folds, so that the same coded rows give
# the same choice): among the candidates whose held-out accuracy beats that of the
# labels as they are (`as_given`, the probabilities of `data`) by more than one
# standard error of the paired difference, the lowest held-out log-loss; "none"
# keeps the labels.
choose_refit <- function(log_probs, y, as_given) {
  n <- length(y)
  fold <- rep_len(seq_len(min(5L, n)), n)
  models <- if (length(log_probs) == 1) refit_models[1:2] else refit_models
  candidates <- expand.grid(penalty = refit_penalties, model = models, stringsAsFactors = FALSE)
  held_out <- lapply(seq_len(nrow(candidates)), function(i) {
    probs <- matrix(NA_real_, n, ncol(log_probs[[1]]))
    for (k in unique(fold)) {
      train <- fold != k
      fit <- fit_label_model(lapply(log_probs, function(l) l[train, , drop = FALSE]), y[train],
                             candidates$model[i], candidates$penalty[i])
      probs[!train, ] <- softmax_rows(label_scores(lapply(log_probs, function(l) l[!train, , drop = FALSE]), fit))
    }
    probs
  })
  all_probs <- c(list(as_given / rowSums(as_given)), held_out)
  losses <- vapply(all_probs, function(probs) -log(pmax(probs[cbind(seq_len(n), y)], 1e-12)), numeric(n))
  correct <- vapply(all_probs, function(probs) {
    max.col(replace(probs, is.na(probs), 0), ties.method = "first") == y
  }, logical(n))
  gain <- apply(correct - correct[, 1], 2, function(d) if (all(d == 0)) 0 else mean(d) - stats::sd(d) / sqrt(n))
  table <- data.frame(model = c("none", candidates$model), penalty = c(NA, candidates$penalty),
                      log_loss = colMeans(losses), accuracy = colMeans(correct),
                      stringsAsFactors = FALSE)
  qualified <- which(gain > 0)
  best <- if (length(qualified) == 0) 1L else qualified[which.min(table$log_loss[qualified])]
  table$summary <- sprintf("%s%s: accuracy %.3f, log-loss %.3f", table$model,
                           ifelse(is.na(table$penalty), " (the labels as they are)",
                                  sprintf(" (ridge %g)", table$penalty)), table$accuracy, table$log_loss)
  table$summary[best] <- paste(table$summary[best], "(chosen)")
  list(model = table$model[best], penalty = table$penalty[best], accuracy = table$accuracy[best], table = table)
}

# Coded rows per parameter of the largest refit below which the choice among
# refits is itself noisy: checked in simulation (tools/bench_annotation.R's
# five-label corpus and test-recalibrate.R).
rows_per_refit_parameter <- 10

warn_few_coded <- function(n_coded, n_labels, n_orders) {
  needed <- rows_per_refit_parameter * (n_labels - 1 + n_orders)
  if (n_coded < needed) {
    warn_newrllama4("few_coded", c(
      "{n_coded} coded row{?s} are few for a refit of {n_labels} labels and {n_orders} order{?s}.",
      "i" = "About {needed} would make the choice among refits reliable; the refit is kept only where it labels the
             coded rows better than the labels as they are."))
  }
}

# Each order's label probabilities (a matrix per order, a row per row of
# `data`), with the rows' `.confidence`, which tells whether `data` still has
# those rows in that order.
order_probs_record <- function(order_probs, data) list(probs = order_probs, confidence = data$.confidence)

# An order's label probabilities (a row each) as normalised log-probabilities,
# floored so that a label the model ruled out still has a finite score.
order_log_probs <- function(probs) {
  probs <- pmax(probs / rowSums(probs), 1e-12)
  log(probs / rowSums(probs))
}

label_scores <- function(log_probs, fit) {
  scores <- Reduce(`+`, Map(`*`, log_probs, fit$weights))
  sweep(scores, 2, fit$offsets, "+")
}

# Label offsets (the first 0) and order weights that maximise the likelihood of
# the coded labels `y`, less a ridge of `penalty` toward no offsets and equal
# weights (their sum 1: the orders' mean log-probability). `model` sets what is
# free: the offsets alone (equal weights), a temperature (equal weights of any
# sum) or each order's weight.
fit_label_model <- function(log_probs, y, model = "offsets and order weights", penalty = 0.01) {
  n_labels <- ncol(log_probs[[1]])
  n_orders <- length(log_probs)
  equal <- rep(1 / n_orders, n_orders)
  observed <- diag(n_labels)[y, , drop = FALSE]
  n_offsets <- n_labels - 1
  # the order weights from the parameters after the offsets, and back (the gradient)
  weights_of <- switch(model,
    "offsets" = function(rest) equal,
    "offsets and temperature" = function(rest) equal * rest,
    "offsets and order weights" = function(rest) rest
  )
  weight_gradient <- switch(model,
    "offsets" = function(g) numeric(),
    "offsets and temperature" = function(g) sum(g * equal),
    "offsets and order weights" = function(g) g
  )
  start <- switch(model, "offsets" = numeric(), "offsets and temperature" = 1, "offsets and order weights" = equal)
  unpack <- function(theta) {
    list(offsets = c(0, theta[seq_len(n_offsets)]), weights = weights_of(theta[-seq_len(n_offsets)]))
  }
  loss <- function(theta) {
    fit <- unpack(theta)
    scores <- label_scores(log_probs, fit)
    top <- apply(scores, 1, max)
    -sum(rowSums(scores * observed) - top - log(rowSums(exp(scores - top)))) +
      penalty * (sum(fit$offsets^2) + sum((fit$weights - equal)^2))
  }
  gradient <- function(theta) {
    fit <- unpack(theta)
    residual <- softmax_rows(label_scores(log_probs, fit)) - observed
    c(colSums(residual)[-1] + 2 * penalty * fit$offsets[-1],
      weight_gradient(vapply(log_probs, function(l) sum(residual * l), 0) + 2 * penalty * (fit$weights - equal)))
  }
  best <- stats::optim(c(rep(0, n_offsets), start), loss, gradient, method = "BFGS", control = list(maxit = 500))
  unpack(best$par)
}
