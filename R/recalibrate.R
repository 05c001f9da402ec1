#' Labels refitted to a sample coded by hand (deprecated)
#'
#' Deprecated: call [learn_labels()] instead, whose candidates include this
#' refit, chosen by the same rule and guard. `recalibrate_labels(data, coded,
#' truth)` becomes `learn_labels(data, coded, truth, features = FALSE)` (its
#' features-free case, which adds each example order's labels alone and a ridge
#' logistic on the orders' probabilities to the refits), or `features = TRUE`
#' for the model's hidden states. Measured on four corpora and two small models
#' with two example orders (`docs/benchmarks.md`), the refit alone stayed 0.117
#' under the better order on one of the eight cells, while `learn_labels()` on
#' 30 coded rows came within 0.05 of the better order, or above it, on all
#' eight. `recalibrate_labels()`
#' still works, with a warning of class `newrllama4_warning_deprecated` once a
#' session.
#'
#' It learns from rows that people coded how far to trust each order of the worked
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
#' their log-loss fell from 1.44 to 1.33).
#'
#' With few coded rows that choice is itself noisy, so it is made inside the
#' folds too: each fold of coded rows is relabelled by the candidate chosen and
#' fitted on the other folds alone, so that a coded row's new label never saw
#' its own code, and the accuracy of those cross-fitted labels counts the
#' choice's noise. Where they do not beat the labels as they are by more than
#' one standard error of the paired difference, the labels are kept, with a
#' message (class `newrllama4_message_refit_declined`); otherwise the other rows
#' get the candidate chosen on all coded rows. This is [learn_labels()]'s
#' smallest case: its candidates without the classifier, the same rule and
#' guard (a choice between two valid estimates: report the interval whatever
#' it decided, as [learn_labels()] says). Fewer than about 10 coded rows
#' per parameter of the largest candidate (labels - 1 + orders) make the choice
#' noisy: a warning (class `newrllama4_warning_few_coded`) says how many rows
#' would do.
#'
#' The fit describes the coded rows, so they must be a uniform random sample
#' of the rows (or of their clusters): draw them with
#' `review_sample(weight = "uniform")`. A sample drawn toward doubt holds too
#' many rows near the boundary and would move it: it is refused (class
#' `newrllama4_error_weighted_sample`). The folds hold whole clusters where
#' they were drawn whole. For
#' the same reason the coded rows' labels are cross-fitted: [agreement()] on
#' them is the cross-validated accuracy of the refit, choice included.
#' [label_regression()] and [label_shares()] on the refitted labels choose and
#' fit the refit again in their cross-fitting folds, which are the refit's own,
#' so each coded row's prediction is the one given here and no choice saw the
#' code of a row it predicts. Keep the value whole: a subset or a file loses
#' what it was refitted from, and the estimators then stop with a classed
#' error.
#'
#' @param data The value of [annotate_texts()] with `labels`, or with a
#'   `schema` and `field`; or labels from another tool (ellmer, a fine-tuned
#'   classifier): a data frame with `.label` and a `.prob_<label>` column for
#'   each label, taken as one example order (`.confidence`, where absent, is the
#'   largest probability).
#' @param coded Rows of `data` coded by hand, with `.row` (their row numbers in
#'   `data`, as [review_sample()] gives them) and the people's labels.
#' @param truth The column of `coded` that holds the people's labels (one of the
#'   labels for every row), bare (`truth = code`) or as a string
#'   (`truth = "code"`).
#' @param field `NULL` for the labels, or an enum or boolean field of the
#'   `schema` given to [annotate_texts()] (its column of `data`, bare or as a
#'   string): its values are refitted as
#'   labels (one order: offsets, or offsets and a temperature), and its column,
#'   `.prob_<field>_<value>` and `.confidence_<field>` change; the manifest's
#'   entries of the refit carry the field's name, such as
#'   `"refit_model (tone)"`.
#' @return `data` with `.label`, the `.prob_` columns, `.confidence` and
#'   `.agreement_orders` (each order's own label, under the fitted offsets)
#'   from the fit, cross-fitted on the coded rows. The manifest's
#'   `calibration` becomes `"hand-coded"`, with the number of coded rows, the chosen `refit_model` and `refit_penalty`,
#'   the fitted offsets and order weights, the cross-validated accuracy of the
#'   cross-fitted labels (the choice made inside the folds) and
#'   `refit_cross_validation`: every candidate's cross-validated
#'   accuracy and log-loss, beside those of the labels as they are, and
#'   `refit_folds`: each coded row's fold (1-5), named by its row of `data`.
#'   Where no
#'   refit is chosen, `data` as it was, with `refit_model` `"none"` and the
#'   candidates' figures in its manifest.
#' @seealso [learn_labels()], the verb to call instead.
#' @export
#' @examplesIf engine_available()
#' reviews <- data.frame(review = c(
#'   "Broke after a day.", "Works well.", "Too loud and too slow.", "Great value.",
#'   "Arrived broken.", "Does the job.", "Never again.", "Lovely design."
#' ))
#' reviews$gold <- rep(c("negative", "positive"), 4)
#' examples <- data.frame(review = c("Awful.", "Love it."),
#'                        .label = c("negative", "positive"))
#' labelled <- annotate_texts(reviews, review, "Is the review positive or negative?",
#'                            labels = c("positive", "negative"), examples = examples,
#'                            example_orders = 2L, progress = FALSE)
#' coded <- review_sample(labelled, n = 6, weight = "uniform", seed = 1)
#' # deprecated: learn_labels(labelled, coded, gold, features = FALSE) is the call
#' refitted <- recalibrate_labels(labelled, coded, gold)
#' fit <- manifest(refitted)$prompt
#' fit[c("calibration", "refit_model", "label_offsets", "order_weights",
#'       "cross_validated_accuracy")]
#' fit$refit_cross_validation
recalibrate_labels <- function(data, coded, truth, field = NULL) {
  warn_newrllama4("deprecated", c(
    "{.fn recalibrate_labels} is deprecated: call {.fn learn_labels} instead.",
    "i" = "{.code learn_labels(data, coded, truth, features = FALSE)} chooses among this refit and more, by the same
           rule and guard; {.code features = TRUE} adds the model's hidden states."),
    .frequency = "once", .frequency_id = "recalibrate_labels")
  field <- rlang::enquo(field)
  if (!rlang::quo_is_null(field)) {
    if (!is.data.frame(data)) abort_invalid("{.arg data} must be the value of {.fn annotate_texts}.", "data", current_env())
    field <- column_name(field, data, "field", "data")
    refitted <- recalibrate_labels(labels_view(data, field), coded, !!rlang::enquo(truth))
    return(from_labels_view(data, refitted, field))
  }
  data <- labels_view(data, NULL)
  problem <- checked_refit_data(data, coded, rlang::enquo(truth), current_env())
  labels <- problem$labels
  families <- learner_families(problem$log_probs, kind = "refit")
  refit <- learned_by_folds(families, problem$rows, problem$y, problem$as_given, units = problem$units,
                            weights = problem$weights, rounds = problem$rounds)
  record <- attr(data, "manifest", exact = TRUE)
  record$prompt$hand_coded_rows <- problem$texts
  if (problem$by_design) record$prompt$learner_weights <- weighed_by_design
  record$prompt$refit_cross_validation <- refit$choice$table$summary
  warn_few_coded(problem$texts, length(labels), length(problem$order_probs))
  if (!refit$kept) {
    decline(problem$texts, "refit_cross_validation")
    record$prompt$refit_model <- "none"
    attr(data, "manifest") <- record
    return(data)
  }
  setting <- families[[1]]$settings[refit$choice$setting, ]
  fit <- fit_label_model(lapply(problem$log_probs, function(l) l[problem$rows, , drop = FALSE]), problem$y,
                         setting$model, setting$penalty, row_weights = mean_one(problem$weights))
  data <- with_probabilities(data, problem, refit)
  # the estimators choose and fit the refit again in its own folds, as they do the learner
  attr(data, "learner") <- c(list(families = "refit", features = FALSE, covariates = NULL, as_given = problem$as_given,
                                  coded_rows = problem$rows, by_design = problem$by_design), refit$choices)
  answered <- problem$answered
  if (".agreement_orders" %in% names(data)) {
    # each order alone, weighted as all of them together
    alone <- list(offsets = fit$offsets, weights = sum(fit$weights))
    order_labels <- vapply(problem$log_probs, function(l) most_likely(label_scores(list(l[answered, , drop = FALSE]),
                                                                                   alone), labels),
                           character(length(answered)))
    data$.agreement_orders[answered] <- rowMeans(matrix(order_labels == data$.label[answered], length(answered)))
  }
  record$prompt$calibration <- "hand-coded"
  record$prompt$refit_model <- setting$model
  record$prompt$refit_penalty <- setting$penalty
  record$prompt$label_offsets <- paste(labels, formatC(fit$offsets, digits = 3, format = "f"), collapse = ", ")
  record$prompt$order_weights <- paste0(record$prompt$example_orders %||% "1", ": ",
                                        formatC(fit$weights, digits = 3, format = "f"), collapse = ", ")
  record$prompt$cross_validated_accuracy <- refit$accuracy
  record$prompt$refit_folds <- row_folds(refit$choices$folds, problem$rows)
  attr(data, "manifest") <- record
  data
}

# The refit's candidates, from the fewest parameters to the most: an offset per
# label (the orders' mean log-probability as it is), then a temperature, then a
# weight per order; each with a ridge of one of `refit_penalties`.
refit_models <- c("offsets", "offsets and temperature", "offsets and order weights")
refit_penalties <- c(0.01, 0.1, 1, 10)

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
  scores + rep(fit$offsets, each = nrow(scores))
}

# Label offsets (the first 0) and order weights that maximise the likelihood of
# the coded labels `y`, less a ridge of `penalty` toward no offsets and equal
# weights (their sum 1: the orders' mean log-probability). `model` sets what is
# free: the offsets alone (equal weights), a temperature (equal weights of any
# sum) or each order's weight. `row_weights`: each coded row's weight in the
# likelihood, of mean one (design_weights()), or 1 for all.
fit_label_model <- function(log_probs, y, model = "offsets and order weights", penalty = 0.01, start = NULL,
                            row_weights = 1) {
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
  start <- start %||% c(rep(0, n_offsets),
                      switch(model, "offsets" = numeric(), "offsets and temperature" = 1, "offsets and order weights" = equal))
  unpack <- function(theta) {
    list(offsets = c(0, theta[seq_len(n_offsets)]), weights = weights_of(theta[-seq_len(n_offsets)]))
  }
  # optim() asks for the loss and the gradient at the same points: the scores
  # and their softmax are computed once for both
  last <- NULL
  state <- NULL
  at <- function(theta) {
    if (!identical(theta, last)) {
      last <<- theta
      scores <- label_scores(log_probs, unpack(theta))
      top <- row_max(scores)
      e <- exp(scores - top)
      total <- rowSums(e)
      state <<- list(scores = scores, log_total = top + log(total), probs = e / total)
    }
    state
  }
  loss <- function(theta) {
    fit <- unpack(theta)
    -sum(row_weights * (rowSums(at(theta)$scores * observed) - at(theta)$log_total)) +
      penalty * (sum(fit$offsets^2) + sum((fit$weights - equal)^2))
  }
  gradient <- function(theta) {
    fit <- unpack(theta)
    residual <- row_weights * (at(theta)$probs - observed)
    c(colSums(residual)[-1] + 2 * penalty * fit$offsets[-1],
      weight_gradient(vapply(log_probs, function(l) sum(residual * l), 0) + 2 * penalty * (fit$weights - equal)))
  }
  best <- stats::optim(start, loss, gradient, method = "BFGS", control = list(maxit = 500))
  c(unpack(best$par), list(theta = best$par))
}
