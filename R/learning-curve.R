#' How learned labels and their findings improve with more coded rows
#'
#' Tells a team whether coding more rows is worth it once the labels are
#' learned from them ([learn_labels()]): at each number of coded rows in
#' `sizes`, the learned labels' cross-validated accuracy (beside the labels as
#' annotated, on the same rows) and the width of a corrected share's 95%
#' interval ([label_shares()] on the learned labels, beside the coded rows'
#' alone).
#'
#' Sizes up to the number of rows coded are measured: `draws` subsamples of the
#' coded rows, each stratum of the draw kept in proportion (its rows' inclusion
#' probabilities and drawn counts rewritten to the subsample's, so each
#' subsample is itself a stratified sample of `data`), each learned and
#' estimated anew; the figures are their means. All the coded rows are one
#' draw. Sizes beyond the number coded are projected from the largest measured
#' size: the widths shrink as one over the square root of the rows, at the
#' accuracy already reached (so the projection does not count on the learner
#' improving), and `projected` is `TRUE`. [coded_rows_needed()] on a fit to the
#' learned labels plans a target standard error the same way.
#'
#' @inheritParams learn_labels
#' @param coded Rows drawn by [review_sample()] (rows one by one, not whole
#'   clusters), with their codes.
#' @param sizes Numbers of coded rows at which to measure or project, each at
#'   least 20.
#' @param field `NULL` for the labels, or an enum or boolean field of the
#'   `schema` given to [annotate_texts()] (its column of `data`, bare or as a
#'   string): its values are learned and their shares measured, as
#'   `learn_labels(field =)` and `label_shares(field =)` do.
#' @param truth The column of `coded` that holds the people's labels (or the
#'   field's values), bare (`truth = code`) or as a string (`truth = "code"`).
#' @param label The label (a value of `field`, with `field`) whose share's
#'   interval is measured; `NULL` for the first.
#' @param draws Subsamples of the coded rows at each size below their number.
#' @param seed An integer seed for the subsamples, or `NULL`.
#' @return A data frame of class `newrllama4_learning_curve`, a row per size:
#'   `coded_rows`, `projected`, `accuracy` (the learned labels' cross-validated
#'   accuracy against the codes), `zero_shot` (the labels as annotated, on the
#'   same rows, weighted alike: by the design, for rounds drawn by doubt),
#'   `width` (the corrected share's 95% interval) and `width_coded_only` (the
#'   coded rows' alone). `plot()` draws both panels.
#' @seealso [learn_labels()], [coded_rows_needed()]
#' @export
#' @examples
#' # labels from elsewhere (any data frame with .label and a .prob_ column per
#' # label) that are noise, and ten features of which two carry the label
#' set.seed(1)
#' gold <- sample(c("yes", "no"), 400, replace = TRUE, prob = c(0.35, 0.65))
#' x <- matrix(rnorm(4000), 400, 10)
#' x[, 1:2] <- x[, 1:2] + 1.5 * (gold == "yes")
#' prob_yes <- runif(400)
#' texts <- data.frame(gold = gold, .prob_yes = prob_yes, .prob_no = 1 - prob_yes,
#'                     .label = ifelse(prob_yes > 0.5, "yes", "no"))
#' coded <- review_sample(texts, n = 80, weight = "uniform", seed = 1)
#' curve <- learning_curve(texts, coded, gold, sizes = c(40, 80, 160), features = x,
#'                         draws = 1, seed = 1)
#' curve
#' plot(curve)
learning_curve <- function(data, coded, truth, sizes = c(50, 100, 150, 300), features = TRUE, covariates = NULL,
                           field = NULL, label = NULL, draws = 5L, seed = NULL) {
  call <- current_env()
  if (!is.data.frame(data)) abort_invalid("{.arg data} must be the value of {.fn annotate_texts}.", "data", call)
  truth <- rlang::enquo(truth)
  field <- column_name(rlang::enquo(field), data, "field", "data", call = call)
  covariates <- unname(column_names(rlang::enquo(covariates), data, "covariates", "data", n = "some", call = call))
  seed <- check_seed(seed)
  if (!is.numeric(sizes) || length(sizes) == 0 || anyNA(sizes) || any(sizes < 20) || any(sizes != round(sizes))) {
    abort_invalid("{.arg sizes} must be whole numbers of coded rows, each at least 20.", "sizes", call)
  }
  draws <- check_whole(draws, "draws", min = 1)
  if (!is.data.frame(coded) || !".row" %in% names(coded)) {
    abort_invalid("{.arg coded} must be rows drawn by {.fn review_sample}, with their codes.", "coded", call)
  }
  if (any(coded[[".sampling_unit"]] != ".row")) {
    abort_invalid("{.fn learning_curve} subsamples rows drawn one by one, not whole clusters.", "coded", call)
  }
  annotated <- labels_view(data, field, call)$.label
  labels <- levels(as.factor(annotated))
  label <- label %||% labels[[1]]
  if (!rlang::is_string(label) || !label %in% labels) {
    abort_invalid("{.arg label} must be one of the labels: {.val {labels}}.", "label", call)
  }
  sizes <- sort(unique(sizes))
  measured <- sizes[sizes <= nrow(coded)]
  if (length(measured) == 0) {
    abort_invalid("{.arg sizes} must include a size of at most the {nrow(coded)} rows coded.", "sizes", call)
  }
  at_size <- function(size, draw) {
    sample <- if (size == nrow(coded)) coded else subsample_coded(coded, size)
    learned <- suppressMessages(learn_labels(data, sample, !!truth, features = features, covariates = covariates,
                                             field = field))
    # the rows and codes the learner scored, weighted as its accuracy is (rounds by doubt count by their design)
    learner <- attr(labels_view(learned, field, call), "learner", exact = TRUE)
    right <- as.character(annotated[learner$coded_rows]) == learner$codes
    shares <- suppressMessages(suppressWarnings(label_shares(learned, sample, !!truth, seed = draw, field = field)))
    shares <- shares[shares$label == label, ]
    width <- function(estimator) shares$conf.high[shares$estimator == estimator] - shares$conf.low[shares$estimator == estimator]
    c(accuracy = attr(learned, "manifest", exact = TRUE)$prompt$cross_validated_accuracy,
      zero_shot = stats::weighted.mean(right, learner$code_weights %||% rep(1, length(right))),
      width = width("corrected"), width_coded_only = width("coded_only"))
  }
  curve <- lapply(measured, function(size) {
    seeds <- if (size == nrow(coded)) 1L else seq_len(draws)
    figures <- withr::with_seed(seed %||% sample.int(.Machine$integer.max, 1), {
      vapply(seeds, function(draw) at_size(size, draw), numeric(4))
    })
    data.frame(coded_rows = size, projected = FALSE, t(rowMeans(figures)))
  })
  curve <- do.call(rbind, curve)
  largest <- curve[nrow(curve), ]
  beyond <- sizes[sizes > nrow(coded)]
  if (length(beyond) > 0) {
    shrink <- sqrt(largest$coded_rows / beyond)
    curve <- rbind(curve, data.frame(coded_rows = beyond, projected = TRUE, accuracy = largest$accuracy,
                                     zero_shot = largest$zero_shot, width = largest$width * shrink,
                                     width_coded_only = largest$width_coded_only * shrink))
  }
  rownames(curve) <- NULL
  structure(curve, class = c("newrllama4_learning_curve", "data.frame"), label = label)
}

# `size` of the coded rows, each stratum of the draw in proportion (at least
# two rows of each, so none is collapsed), with the inclusion probabilities and
# drawn counts of that subsample: itself a stratified sample of the data.
subsample_coded <- function(coded, size) {
  stratum <- if (is.null(coded[[".stratum"]])) rep("all", nrow(coded)) else as.character(coded$.stratum)
  members <- split(seq_len(nrow(coded)), stratum)
  wanted <- pmin(lengths(members), pmax(2, round(lengths(members) * size / nrow(coded))))
  kept <- sort(unlist(Map(function(rows, n) rows[sample.int(length(rows), n)], members, wanted), use.names = FALSE))
  out <- coded[kept, , drop = FALSE]
  if (is.null(out[[".stratum_drawn"]])) {
    out$.sample_prob <- out$.sample_prob * (wanted / lengths(members))[stratum[kept]]
  } else {
    # as review_sample() writes them, drawn rows lost or not: the subsample's drawn rows over the stratum's rows
    out$.stratum_drawn <- as.integer(wanted[stratum[kept]])
    out$.sample_prob <- out$.stratum_drawn / out$.stratum_rows
  }
  out
}

#' @export
print.newrllama4_learning_curve <- function(x, ...) {
  cat(within_width(sprintf("<newrllama4_learning_curve>: learned labels and the share of %s by coded rows",
                           attr(x, "label", exact = TRUE))), sep = "\n")
  shown <- data.frame(
    coded_rows = ifelse(x$projected, paste0(x$coded_rows, " (projected)"), x$coded_rows),
    accuracy = sprintf("%.3f", x$accuracy), zero_shot = sprintf("%.3f", x$zero_shot),
    width = sprintf("%.3f", x$width), coded_only = sprintf("%.3f", x$width_coded_only),
    ratio = sprintf("%.2fx", x$width / x$width_coded_only)
  )
  print(shown, row.names = FALSE, right = TRUE)
  cat(within_width(paste("accuracy: cross-validated on the coded rows; width: the corrected share's 95% interval,",
                         "beside the coded rows' alone (coded_only). Projected rows keep the accuracy reached and",
                         "shrink the widths as 1 / sqrt(rows).")), sep = "\n")
  invisible(x)
}

#' @export
plot.newrllama4_learning_curve <- function(x, ...) {
  old <- graphics::par(mfrow = c(1, 2), mar = c(4, 4, 2, 1))
  on.exit(graphics::par(old))
  point <- ifelse(x$projected, 1, 19)
  graphics::matplot(x$coded_rows, cbind(x$accuracy, x$zero_shot), type = "l", lty = c(1, 2), col = c(1, 8),
                    xlab = "coded rows", ylab = "accuracy", ylim = c(min(0.5, x$zero_shot), 1), main = "Labels")
  graphics::points(x$coded_rows, x$accuracy, pch = point)
  graphics::legend("bottomright", c("learned", "as annotated"), lty = c(1, 2), col = c(1, 8), bty = "n")
  graphics::matplot(x$coded_rows, cbind(x$width, x$width_coded_only), type = "l", lty = c(1, 2), col = c(1, 8),
                    xlab = "coded rows", ylab = "width of the 95% interval", ylim = c(0, max(x$width_coded_only)),
                    main = sprintf("Share of %s", attr(x, "label", exact = TRUE)))
  graphics::points(x$coded_rows, x$width, pch = point)
  graphics::legend("topright", c("corrected", "coded rows alone"), lty = c(1, 2), col = c(1, 8), bty = "n")
  invisible(x)
}
