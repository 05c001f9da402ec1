# agreement()'s confusion matrix as a heat map.

#' Heat map of an agreement's confusion matrix
#'
#' One tile per pair of truth and predicted labels, hand-coded labels in rows as in
#' the confusion matrix. A tile shows its count of pairs; its colour is the
#' share of its row, so that the diagonal reads as each label's recall
#' whatever its frequency. The title gives accuracy and kappa.
#'
#' Needs the ggplot2 package: in an interactive session, `plot()` offers to
#' install it; otherwise it fails with an error of class
#' `rlib_error_package_not_found` naming it.
#'
#' @param x The value of [agreement()].
#' @param ... Not used.
#' @return A ggplot object: it draws when printed, and takes further layers
#'   and themes with `+`.
#' @export
#' @examples
#' truth <- c("pos", "pos", "pos", "neg", "neg", "neg", "neutral", "neutral")
#' predicted <- c("pos", "pos", "neg", "neg", "neg", "pos", "neutral", "pos")
#' if (requireNamespace("ggplot2", quietly = TRUE)) {
#'   plot(agreement(predicted, truth, n_boot = 0))
#' }
plot.newrllama4_agreement <- function(x, ...) {
  rlang::check_installed("ggplot2", reason = "to plot a confusion matrix.")
  tiles <- as.data.frame(x$confusion, responseName = "n")
  truth_totals <- rowSums(x$confusion)[as.integer(tiles$truth)]
  tiles$share <- ifelse(truth_totals > 0, tiles$n / truth_totals, NA_real_)
  # dark tiles take white text
  tiles$text_colour <- ifelse(!is.na(tiles$share) & tiles$share > 0.6, "white", "black")
  estimates <- x$metrics$estimate
  names(estimates) <- x$metrics$metric

  ggplot2::ggplot(tiles, ggplot2::aes(x = .data$predicted, y = .data$truth)) +
    ggplot2::geom_tile(ggplot2::aes(fill = .data$share), colour = "white") +
    ggplot2::geom_text(ggplot2::aes(label = .data$n, colour = .data$text_colour)) +
    ggplot2::scale_fill_gradient(
      low = "#f7fbff", high = "#08519c", limits = c(0, 1), na.value = "grey90",
      labels = function(share) paste0(round(100 * share), "%")
    ) +
    ggplot2::scale_colour_identity() +
    ggplot2::scale_x_discrete(position = "top") +
    ggplot2::scale_y_discrete(limits = rev(levels(tiles$truth))) +
    ggplot2::coord_equal() +
    ggplot2::labs(
      x = "Predicted", y = "Gold", fill = "Share of\ngold label",
      title = sprintf("Accuracy %s, Cohen's kappa %s (%d pairs)",
                      format_figure(estimates[["accuracy"]], 2),
                      format_figure(estimates[["cohen_kappa"]], 2), x$n)
    ) +
    ggplot2::theme_minimal() +
    ggplot2::theme(panel.grid = ggplot2::element_blank())
}
