# agreement() of several annotators (models, prompts, coders) against one truth
# coding: each annotator's agreement, side by side, and how the annotators
# agree with each other.

agreement_of_annotators <- function(predicted, truth, level, n_boot, seed, weights = NULL, call = caller_env()) {
  check_annotators(predicted, truth, call)
  if (!is.null(weights)) weights_design(weights, length(truth), call)
  each <- lapply(stats::setNames(nm = names(predicted)), function(annotator) {
    withCallingHandlers(
      agreement(predicted[[annotator]], truth, level = level, n_boot = n_boot, seed = seed, weights = weights),
      newrllama4_error_invalid_argument = function(e) {
        abort_invalid("Annotator {.val {annotator}} of {.arg predicted} cannot be compared with {.arg truth}.",
                      "predicted", call, parent = e)
      }
    )
  })
  structure(
    list(
      annotators = annotators_table(each),
      pairwise = pairwise_agreement(predicted, weights),
      each = each,
      level = level,
      n_boot = n_boot,
      seed = seed,
      weighted = !is.null(weights)
    ),
    class = "newrllama4_agreements"
  )
}

check_annotators <- function(predicted, truth, call) {
  if (length(predicted) == 0 || !rlang::is_named(predicted) || anyDuplicated(names(predicted))) {
    abort_invalid(c(
      "{.arg predicted} must be a label vector, or a data frame or a list of them with one distinct name per annotator.",
      "i" = "For example {.code list(model_a = out_a$.label, model_b = out_b$.label)}."
    ), "predicted", call)
  }
  for (annotator in names(predicted)) {
    labels <- predicted[[annotator]]
    if (!is.factor(labels) && !is.character(labels) || length(labels) != length(truth)) {
      abort_invalid(
        "Annotator {.val {annotator}} of {.arg predicted} must be {length(truth)} label{?s} (a factor or character vector, as {.arg truth}), not {.obj_type_friendly {labels}}.",
        "predicted", call
      )
    }
  }
}

# One row per annotator: n, then each metric's estimate and bounds.
annotators_table <- function(each) {
  rows <- lapply(names(each), function(annotator) {
    metrics <- each[[annotator]]$metrics
    figures <- c(rbind(metrics$estimate, metrics$lower, metrics$upper))
    names(figures) <- c(rbind(metrics$metric, paste0(metrics$metric, "_lower"), paste0(metrics$metric, "_upper")))
    data.frame(annotator = annotator, n = each[[annotator]]$n, as.list(figures), row.names = NULL)
  })
  do.call(rbind, rows)
}

# Each pair of annotators over the units both labelled: the share that agree
# and Krippendorff's alpha (symmetric in the two, as neither is the reference),
# each unit counted `weights` times (scaled to a mean of one over the pair's
# units, so that weights all alike count each once).
pairwise_agreement <- function(predicted, weights = NULL) {
  pairs <- if (length(predicted) < 2) matrix(character(), 2, 0) else utils::combn(names(predicted), 2)
  rows <- lapply(seq_len(ncol(pairs)), function(i) {
    a <- predicted[[pairs[1, i]]]
    b <- predicted[[pairs[2, i]]]
    both <- !is.na(a) & !is.na(b)
    labels <- agreement_labels(a[both], b[both])
    confusion <- weighted_confusion(factor(as.character(a[both]), levels = labels),
                                    factor(as.character(b[both]), levels = labels),
                                    if (is.null(weights)) rep(1, sum(both)) else mean_one(weights[both]))
    metrics <- agreement_metrics(unclass(confusion))
    data.frame(annotator_1 = pairs[1, i], annotator_2 = pairs[2, i], n = sum(both),
               agreement = if (any(both)) metrics[["accuracy"]] else NA_real_,
               krippendorff_alpha = if (any(both)) metrics[["krippendorff_alpha"]] else NA_real_)
  })
  empty <- data.frame(annotator_1 = character(), annotator_2 = character(), n = integer(),
                      agreement = double(), krippendorff_alpha = double())
  do.call(rbind, c(list(empty), rows))
}

#' @export
as.data.frame.newrllama4_agreements <- function(x, ...) {
  rows <- lapply(names(x$each), function(annotator) {
    data.frame(annotator = annotator, n = x$each[[annotator]]$n, x$each[[annotator]]$metrics)
  })
  do.call(rbind, rows)
}

#' @export
format.newrllama4_agreements <- function(x, digits = 3, ...) {
  table <- data.frame(annotator = x$annotators$annotator, n = x$annotators$n)
  for (metric in names(metric_names)) {
    estimate <- format_figure(x$annotators[[metric]], digits)
    lower <- x$annotators[[paste0(metric, "_lower")]]
    interval <- ifelse(is.na(lower), "",
                       sprintf(" [%s, %s]", format_figure(lower, digits),
                               format_figure(x$annotators[[paste0(metric, "_upper")]], digits)))
    table[[metric_names[[metric]]]] <- paste0(estimate, interval)
  }
  pairwise <- x$pairwise
  pairwise[c("agreement", "krippendorff_alpha")] <- lapply(pairwise[c("agreement", "krippendorff_alpha")],
                                                            format_figure, digits = digits)
  names(pairwise) <- c("annotator", "annotator", "n", "agreement", "Krippendorff's alpha")
  n_annotators <- nrow(x$annotators)
  within_width(c(
    cli::format_inline("{.cls newrllama4_agreements}: {n_annotators} annotator{?s} against one hand coding"),
    "",
    utils::capture.output(print(table, right = FALSE, row.names = FALSE)),
    cli::col_grey(bootstrap_note(x)),
    if (nrow(pairwise) > 0) {
      c("", "Between annotators (units both labelled):",
        utils::capture.output(print(pairwise, right = FALSE, row.names = FALSE)))
    }
  ))
}

#' @export
print.newrllama4_agreements <- function(x, ...) print_lines(x, ...)

#' Metrics of several annotators, side by side
#'
#' One panel per metric, one row per annotator: the estimate as a point and
#' its bootstrap interval as a line.
#'
#' Needs the ggplot2 package, as [plot.newrllama4_agreement()] does.
#'
#' @param x The value of [agreement()] with several annotators.
#' @param ... Not used.
#' @return A ggplot object.
#' @export
#' @examples
#' truth <- c("pos", "pos", "neg", "neg", "neutral", "neutral", "pos", "neg")
#' annotators <- list(
#'   a = c("pos", "pos", "neg", "pos", "neutral", "pos", "pos", "neg"),
#'   b = c("pos", "neg", "neg", "neg", "neutral", "neutral", "neg", "neg")
#' )
#' if (requireNamespace("ggplot2", quietly = TRUE)) {
#'   plot(agreement(annotators, truth, n_boot = 200, seed = 1))
#' }
plot.newrllama4_agreements <- function(x, ...) {
  rlang::check_installed("ggplot2", reason = "to plot agreement.")
  points <- as.data.frame(x)
  points$metric <- factor(metric_names[points$metric], levels = metric_names)
  points$annotator <- factor(points$annotator, levels = rev(x$annotators$annotator))
  ggplot2::ggplot(points, ggplot2::aes(x = .data$estimate, y = .data$annotator)) +
    ggplot2::geom_linerange(ggplot2::aes(xmin = .data$lower, xmax = .data$upper), na.rm = TRUE,
                            colour = "grey40", linewidth = 0.8) +
    ggplot2::geom_point(size = 2.5, colour = "#08519c", na.rm = TRUE) +
    ggplot2::facet_wrap(ggplot2::vars(.data$metric), nrow = 1) +
    ggplot2::labs(x = if (x$n_boot > 0) sprintf("Estimate and %s%% interval", format(100 * x$level)) else "Estimate",
                  y = NULL, title = "Agreement with the hand-coded labels") +
    ggplot2::theme_minimal()
}
