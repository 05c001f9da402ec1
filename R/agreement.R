# agreement(): how well predicted labels match labels coded by people (the truth).
#
# Every figure is a function of the confusion matrix, so the estimates and each
# bootstrap replicate are computed from one: a replicate resamples the pairs,
# tabulates their cells and recomputes the four metrics.

#' Agreement of predicted labels with hand-coded labels
#'
#' Compares labels from a model (such as the `.label` column of an annotated
#' data frame) with the labels coded by people (`truth`), pair by pair: accuracy,
#' macro-F1, Cohen's kappa and Krippendorff's alpha, each with a confidence
#' interval (Wilson's for the accuracy, a bootstrap at its scale for the
#' others), the confusion matrix, and precision, recall and F1 for each
#' label.
#'
#' @section Labels:
#' The labels are the levels of `truth` then those of `predicted` (for factors,
#' in their level order), then any other label found in a complete pair, in
#' alphabetical order (C locale). A level of a factor is a label even when no
#' pair uses it: it gets a row and a column of zeros in the confusion matrix.
#' Labels match only when they are equal strings. Labels that differ only in
#' case or spaces (a coder's `"Yes "` beside the model's `"yes"`) are refused
#' with an error of class `newrllama4_error_label_spelling`, since each would
#' count as a label of its own; when the two sides share no label at all
#' (often a difference of spelling), a warning of class
#' `newrllama4_warning_no_common_label` says so.
#'
#' @section Missing labels:
#' A blank label (`""`, as `read.csv()` reads an empty cell of a file, where
#' `readr` reads `NA`) is a missing one. A pair with `NA` on either side is left
#' out of every figure, and counted:
#' the result reports how many pairs were dropped, how many of them lack a
#' prediction and how many lack a hand-coded label (a failed row of an annotation has
#' a missing prediction). To count a failed prediction as an error instead,
#' give it a label of its own first, for example
#' `replace(as.character(predicted), is.na(predicted), "(failed)")`.
#'
#' @section Metrics:
#' With \eqn{n} complete pairs, \eqn{n_{ij}} of them with hand-coded label \eqn{i}
#' and predicted label \eqn{j}, and row and column totals \eqn{g_i} and
#' \eqn{p_j}:
#' * **Accuracy**: the share of pairs that agree, \eqn{\sum_i n_{ii} / n}.
#' * **Per label**: precision \eqn{n_{ii} / p_i} (`NA` for a label never
#'   predicted), recall \eqn{n_{ii} / g_i} (`NA` for a label absent from the
#'   hand-coded labels) and F1 \eqn{2 n_{ii} / (g_i + p_i)}, the harmonic mean of the
#'   two. F1 is therefore 0, not `NA`, for a label that is never predicted but
#'   occurs in the hand-coded labels, or the reverse; it is `NA` only for a label
#'   that no pair uses on either side.
#' * **Macro-F1**: the mean F1 over the labels that at least one pair uses,
#'   on either side: each label counts equally, however rare.
#' * **Cohen's kappa**: \eqn{(p_o - p_e) / (1 - p_e)}, with \eqn{p_o} the
#'   accuracy and \eqn{p_e = \sum_i g_i p_i / n^2} the agreement expected by
#'   chance from the two sides' label frequencies.
#' * **Krippendorff's alpha** (nominal, two coders): \eqn{1 - D_o / D_e} over
#'   the coincidence matrix, which counts each pair both ways: with
#'   \eqn{N = 2n} values and \eqn{N_c = g_c + p_c} of them for label \eqn{c},
#'   \eqn{\alpha = 1 - (N - 1) (N - 2 \sum_i n_{ii}) / (N^2 - \sum_c N_c^2)}.
#'   It pools the two sides' frequencies where kappa keeps them apart, and
#'   corrects for small samples.
#'
#' Kappa and alpha are `NA` when both sides use one and the same label
#' throughout: agreement by chance is then certain, and the ratio undefined.
#'
#' @section Intervals:
#' The accuracy's interval is Wilson's for a share at the `n` pairs, with the
#' t quantile on \eqn{n - 1}{n - 1} degrees of freedom, and Brown, Cai and
#' DasGupta's (2001) one-sided Poisson bound on a side with one or two pairs
#' (three past 50 pairs): its exact coverage over accuracies of 0.5-0.999 is
#' at least 0.926 at 10-300 pairs, where Wilson's alone falls to 0.86 at 20
#' pairs, just above the upper bound of 19 agreeing pairs. The other figures'
#' come from a percentile bootstrap: `n_boot` times, `n` pairs are drawn with
#' replacement from the complete pairs and the metrics recomputed; the bounds
#' are the quantiles of those replicates at \eqn{(1 - c)/2} and
#' \eqn{(1 + c)/2}, with \eqn{c} the `level`: 2.5% and 97.5% for 0.95
#' (replicates where a metric is undefined are left out for that metric).
#' Each side is then put at the accuracy's scale: stretched or shrunk by as
#' much as the accuracy's interval reaches past the accuracy's own percentile
#' bound on that side (the replicates say how far the figures move with the
#' accuracy, Wilson's interval how far the accuracy moves). Where every pair
#' agrees every replicate does too, and a side the replicates leave at the
#' estimate is each figure's at the confusion matrix moved toward errors
#' (each label's pairs spread over the others as they are predicted) until
#' its accuracy is at the bound. A percentile bootstrap alone gives 20 pairs
#' that all agree an accuracy and a kappa of 1 with intervals of `[1, 1]`,
#' and over 20 pairs of labels 97% right it covered in 39% of draws. With
#' few pairs or rare labels the intervals are wide, which is the point: they
#' show how much a figure from a small hand-coded sample can be trusted.
#'
#' @section Rows drawn with unequal probabilities:
#' Rows drawn by [review_sample()] toward the model's doubt (its default,
#' `weight = "confidence"`) over-represent the texts the model labels worst,
#' so their own accuracy understates the population's. Give the drawn rows
#' themselves (`predicted` a data frame with `field`, such as
#' `agreement(codes, code, field = ".label")`), with the columns
#' [review_sample()] wrote (`.sample_prob`, `.stratum`, ...), or give
#' `weights`: each pair then counts the inverse of its inclusion probability
#' (Horvitz-Thompson's weights, as a ratio), every figure is the
#' population's, and the accuracy's interval is the design's: its variance
#' linearised within the strata with their finite-population corrections (as
#' `survey::svymean()` gives it), the interval Wilson's at the effective
#' number of pairs, as [label_shares()] gives shares. The other metrics'
#' intervals resample the sampling units within their strata as Rao and Wu's
#' rescaled bootstrap does (\eqn{n - 1} of a stratum's \eqn{n} units, the
#' weights rescaled by its finite-population correction), so that a figure
#' that is a weighted mean varies as the accuracy's linearised variance says;
#' in rounds, a replicate moves the part of each row's weight that its own
#' round's draw gives; their bounds are put at the scale of the accuracy's
#' design interval as under "Intervals". Drawn rows whose
#' pair is incomplete count as not coded: their stratum's complete pairs stand
#' for its rows. Drawn rows without `.sample_prob` get a warning of class
#' `newrllama4_warning_unweighted_sample`: their figures are the sample's own.
#' Rounds drawn by the learned labels' doubt (`review_sample(weight =
#' "learned")`) are combined as the estimators combine them: each round's
#' rows weigh its share of the rows drawn over their probability in the round,
#' plus the later rounds' shares (which took them as known), and the
#' accuracy's variance is the sum of the rounds' stratified variances, each
#' from its own strata and probabilities.
#'
#' @section Several annotators:
#' Give `predicted` as a data frame or a named list of label vectors (models,
#' prompts, human coders), each compared with the one `truth`: the result, of
#' class `newrllama4_agreements`, has one row per annotator in `annotators`
#' (`n`, then each metric's estimate and its interval bounds, such as
#' `accuracy`, `accuracy_lower`, `accuracy_upper`), the agreement between each
#' pair of annotators in `pairwise` (the pairs where both gave a label: their
#' `n`, the share that agree and Krippendorff's alpha), and each annotator's
#' own `newrllama4_agreement` in `each`. Every annotator's intervals are drawn
#' from the same `seed`. `as.data.frame()` gives a tidy table (one row per
#' annotator and metric), and `plot()` the metrics with their intervals side
#' by side.
#'
#' @param predicted,truth Labels, one per unit: factors or character vectors of
#'   the same length. `predicted` comes from the model, `truth` from the
#'   reference coding. `predicted` can also be a data frame or a named list of
#'   such vectors, one per annotator (see "Several annotators").
#' @param field `NULL`, or an answer column, bare or as a string: `predicted`
#'   is then a data frame, such as the value of [annotate_texts()] or the coded
#'   rows of [review_sample()], and `field` its column to compare (`".label"`
#'   for labels, or an enum or boolean field of a schema); `truth` may then be a
#'   column of `predicted`, bare or as a string, as well as a vector. A boolean's values compare as `"true"`
#'   and `"false"`, so logical codes match them.
#' @param weights `NULL`, or the inverse of each unit's inclusion probability
#'   (see "Rows drawn with unequal probabilities"), shared by every annotator
#'   of several; the pairs are then taken as drawn one by one with
#'   replacement (no finite-population correction). Drawn rows given with
#'   `field` carry theirs, and their design's.
#' @param level Confidence level of the intervals, in (0, 1].
#' @param n_boot Number of bootstrap resamples; `0` skips the bootstrap (the
#'   bounds of every figure but the accuracy are then `NA`).
#' @param seed `NULL` to draw the resamples from R's random number generator
#'   as it stands (so that an earlier [set.seed()] fixes them), or a whole
#'   number to draw them from this seed alone: the result is then
#'   reproducible, and the session's random number generator is left exactly
#'   as it was.
#' @return An object of class `newrllama4_agreement`, a list with
#'   * `metrics`: a data frame with one row per metric (`accuracy`,
#'     `macro_f1`, `cohen_kappa`, `krippendorff_alpha`) and columns `metric`,
#'     `estimate`, `lower` and `upper`; also given by `as.data.frame()`.
#'   * `confusion`: the confusion matrix, a [table] with hand-coded labels in rows
#'     and predicted labels in columns.
#'   * `per_label`: a data frame with one row per label: `label`, `n_truth`,
#'     `n_predicted`, `precision`, `recall` and `f1`.
#'   * `n`: the number of complete pairs; `n_dropped`: the number of pairs left
#'     out; `n_missing`: how many pairs lack a label, by side (`predicted`,
#'     `truth`; a pair that lacks both counts on each side).
#'   * `level`, `n_boot` and `seed`, as given.
#'
#'   It prints the metrics, the confusion matrix and the per-label figures;
#'   `plot()` draws the confusion matrix as a heat map.
#' @seealso [plot.newrllama4_agreement()] for the heat map.
#' @export
#' @examples
#' truth <- c("pos", "pos", "pos", "neg", "neg", "neg", "neutral", "neutral", NA)
#' predicted <- c("pos", "pos", "neg", "neg", "neg", "pos", "neutral", NA, "pos")
#' result <- agreement(predicted, truth, seed = 1)
#' result
#' result$metrics
#' result$confusion
#'
#' # a factor keeps its level order, and every level is a label
#' agreement(factor(predicted, levels = c("neg", "neutral", "pos", "mixed")), truth,
#'           n_boot = 0)
#'
#' # several annotators against one hand coding
#' annotators <- list(
#'   model_a = predicted,
#'   model_b = c("pos", "neg", "neg", "neg", "pos", "neg", "neutral", "pos", "pos")
#' )
#' compared <- agreement(annotators, truth, n_boot = 200, seed = 1)
#' compared
#' as.data.frame(compared)
agreement <- function(predicted, truth, level = 0.95, n_boot = 1000, seed = NULL, field = NULL, weights = NULL) {
  call <- rlang::current_env()
  field <- rlang::enquo(field)
  if (inherits(predicted, "newrllama4_coder_codes")) {
    field <- column_name(field, attr(predicted, "codes", exact = TRUE), "field", "predicted", what = "coded field")
    return(agreement_of_coders(predicted, field, level, n_boot, seed))
  }
  design <- NULL
  if (!rlang::quo_is_null(field)) {
    if (!is.data.frame(predicted)) {
      abort_invalid("With {.arg field}, {.arg predicted} must be a data frame with that column, such as the value of
                     {.fn annotate_texts} or of {.fn review_sample}.", "field", call)
    }
    field <- column_name(field, predicted, "field", "predicted")
    refuse_split_texts(predicted, call)
    truth <- field_codes(column_values(rlang::enquo(truth), predicted, "truth", "predicted"))
    if (is.null(weights)) design <- drawn_design(predicted, call)
    predicted <- field_labels(predicted[[field]])
  }
  if (is.list(predicted)) return(agreement_of_annotators(predicted, truth, level, n_boot, seed, weights))
  check_labels_vector(predicted, "predicted")
  check_labels_vector(truth, "truth")
  predicted <- blank_as_missing(predicted)
  truth <- blank_as_missing(truth)
  check_label_spelling(predicted, truth)
  if (length(predicted) != length(truth)) {
    abort_invalid(
      "{.arg predicted} and {.arg truth} must have the same length, not {length(predicted)} and {length(truth)}.",
      "truth", rlang::current_env()
    )
  }
  level <- check_number(level, "level", min = 0, max = 1, open_min = TRUE)
  n_boot <- check_whole(n_boot, "n_boot", min = 0)
  seed <- check_seed(seed)

  n_missing <- c(predicted = sum(is.na(predicted)), truth = sum(is.na(truth)))
  complete <- !is.na(predicted) & !is.na(truth)
  if (!any(complete)) {
    problem <- if (length(truth) == 0) {
      "{.arg predicted} and {.arg truth} hold no labels."
    } else {
      "No pair has both a predicted and a hand-coded label: each of the {length(truth)} pair{?s} has a missing value."
    }
    abort_invalid(problem, "predicted", rlang::current_env())
  }
  warn_if_no_common_label(predicted[complete], truth[complete])
  labels <- agreement_labels(predicted[complete], truth[complete])
  truth <- factor(as.character(truth[complete]), levels = labels)
  predicted <- factor(as.character(predicted[complete]), levels = labels)
  confusion <- table(truth = truth, predicted = predicted)
  if (!is.null(weights)) design <- weights_design(weights, length(complete), call)
  weighted <- NULL
  if (!is.null(design)) {
    weighted <- weighted_agreement(truth, predicted, complete_design(design, complete), level, n_boot, seed)
    estimates <- weighted$estimates
    bounds <- weighted$bounds
  } else {
    estimates <- agreement_metrics(unclass(confusion))
    agree <- as.character(truth) == as.character(predicted)
    accuracy <- design_accuracy(agree, weights_design(rep(1, length(agree)), length(agree), call), level)
    bounds <- at_accuracy_scale(bootstrap_bounds(truth, predicted, level, n_boot, seed), estimates,
                                pairs_bounds(c(accuracy$lower, accuracy$upper), sum(agree), length(agree), level),
                                unclass(confusion))
  }
  structure(
    list(
      metrics = data.frame(
        metric = names(estimates),
        estimate = unname(estimates),
        lower = bounds[, 1],
        upper = bounds[, 2]
      ),
      confusion = confusion,
      per_label = weighted$per_label %||% per_label_figures(unclass(confusion)),
      n = sum(complete),
      n_dropped = sum(!complete),
      n_missing = n_missing,
      level = level,
      n_boot = n_boot,
      seed = seed,
      # rows drawn with unequal probabilities: the weighted confusion matrix and the accuracy's design
      confusion_weighted = weighted$confusion,
      design = weighted$design
    ),
    class = "newrllama4_agreement"
  )
}

check_labels_vector <- function(x, arg, call = caller_env()) {
  if (!is.factor(x) && !is.character(x)) {
    abort_invalid(c(
      "{.arg {arg}} must be a factor or a character vector of labels, not {.obj_type_friendly {x}}.",
      "i" = "Labels coded as numbers can be turned into labels with {.fn factor} or {.fn as.character}."
    ), arg, call)
  }
  invisible(x)
}

# "Positive" against "positive": agreement is then 0, which is more likely a
# coding mismatch than a finding.
warn_if_no_common_label <- function(predicted, truth) {
  predicted_labels <- unique(as.character(predicted))
  truth_labels <- unique(as.character(truth))
  if (length(intersect(predicted_labels, truth_labels)) == 0) {
    warn_newrllama4(
      "no_common_label",
      c("{.arg predicted} and {.arg truth} have no label in common, so no pair agrees.",
        "i" = "Predicted labels: {.val {predicted_labels}}; hand-coded labels: {.val {truth_labels}}.",
        "i" = "Labels must match exactly, case and spaces included.")
    )
  }
}

# The levels of the factors (truth first: it is the reference coding), then the
# other labels found, in an order that does not depend on the locale.
agreement_labels <- function(predicted, truth) {
  found <- unique(c(as.character(truth), as.character(predicted)))
  union(union(levels(truth), levels(predicted)), sort(found, method = "radix"))
}

#' @export
as.data.frame.newrllama4_agreement <- function(x, ...) {
  x$metrics
}

#' @export
print.newrllama4_agreement <- function(x, ...) print_lines(x, ...)

#' @export
format.newrllama4_agreement <- function(x, digits = 3, ...) {
  n_labels <- nrow(x$confusion)
  dropped <- if (x$n_dropped > 0) {
    paste(cli::col_yellow("!"), cli::format_inline(
      "{x$n_dropped} pair{?s} with a missing label left out: ",
      "{x$n_missing[['predicted']]} without a prediction, {x$n_missing[['truth']]} without a hand-coded label."
    ))
  }
  per_label <- x$per_label
  figures <- c("precision", "recall", "f1")
  per_label[figures] <- lapply(per_label[figures], format_figure, digits = digits, missing = "-")
  within_width(c(
    cli::format_inline("{.cls newrllama4_agreement}: {x$n} pair{?s} of labels, {n_labels} label{?s}"),
    dropped,
    "",
    utils::capture.output(print(metrics_table(x, digits), right = FALSE, row.names = FALSE)),
    cli::col_grey(bootstrap_note(x)),
    if (!is.null(x$design)) cli::col_grey(wrapped(weighted_note(x))),
    "",
    "Confusion matrix (rows: truth, columns: predicted):",
    utils::capture.output(print(x$confusion)),
    "",
    "Per label:",
    utils::capture.output(print(per_label, right = FALSE, row.names = FALSE))
  ))
}

metrics_table <- function(x, digits) {
  metrics <- x$metrics
  table <- data.frame(unname(metric_names[metrics$metric]), format_figure(metrics$estimate, digits))
  names(table) <- c("", "estimate")
  # without the bootstrap the accuracy keeps its interval (Wilson's, or the design's)
  if (any(!is.na(metrics$lower))) {
    interval_name <- sprintf("%s%% interval", format(100 * x$level))
    table[[interval_name]] <- ifelse(
      is.na(metrics$lower),
      "",
      sprintf("[%s, %s]", format_figure(metrics$lower, digits), format_figure(metrics$upper, digits))
    )
  }
  table
}

metric_names <- c(
  accuracy = "Accuracy",
  macro_f1 = "Macro-F1",
  cohen_kappa = "Cohen's kappa",
  krippendorff_alpha = "Krippendorff's alpha"
)

format_figure <- function(x, digits, missing = "undefined") {
  ifelse(is.na(x), missing, formatC(x, digits = digits, format = "f"))
}

# `scale`: the share whose Wilson interval sets the figures' scale (at_accuracy_scale()).
bootstrap_note <- function(x, scale = "the accuracy") {
  if (x$n_boot == 0) {
    # the accuracy's interval needs no bootstrap; the coders' alpha has none without it
    kept <- if (identical(scale, "the accuracy")) ": the accuracy's is Wilson's" else ""
    return(sprintf("No bootstrap intervals (n_boot = 0)%s.", kept))
  }
  seed <- if (is.null(x$seed)) "" else sprintf(", seed %d", x$seed)
  resampled <- if (is.null(x$design) && !isTRUE(x$weighted)) "the pairs" else "the units within their strata"
  sprintf("Percentile bootstrap, %d resamples of %s%s, at the scale of %s's interval (Wilson's).", x$n_boot,
          resampled, seed, scale)
}
