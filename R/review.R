#' Rows to code by hand: a stratified sample, weighted toward doubtful labels
#'
#' Draws `n` labelled rows of an [annotate_texts()] result for people to code,
#' so that [agreement()] can compare the model with them. Every label the
#' model gave is a stratum, with a share of the sample in proportion to its
#' rows (at least one each, when `n` allows), so that rare labels are checked
#' too. Within a label, `weight = "confidence"` favours the rows the model was
#' least sure of (weight `1 - .confidence`, plus 0.05 so that no row is left
#' out for certain), where its errors gather; `"uniform"` draws every row
#' alike.
#'
#' A sample weighted toward doubt finds errors quickly, but its accuracy is
#' lower than the annotation's: to estimate how good the whole annotation is,
#' draw with `weight = "uniform"`.
#'
#' @param data The value of [annotate_texts()] with `labels`.
#' @param n How many rows to draw.
#' @param weight `"confidence"` or `"uniform"`: see Details.
#' @param seed `NULL` to draw from R's random number generator as it stands,
#'   or a whole number to draw from this seed alone (reproducible, and the
#'   session's generator is left as it was).
#' @return The drawn rows of `data`, in their order there, with `.row`, their
#'   row numbers in `data`. Rows without a label (`.error`) are never drawn.
#' @export
#' @examples
#' labelled <- data.frame(
#'   text = paste("text", 1:12),
#'   .label = factor(rep(c("yes", "no", "no"), 4), levels = c("yes", "no")),
#'   .confidence = c(0.99, 0.51, 0.97, 0.62, 0.98, 0.55, 0.93, 0.99, 0.58, 0.96, 0.9, 0.52)
#' )
#' review_sample(labelled, n = 4, seed = 1)
review_sample <- function(data, n, weight = c("confidence", "uniform"), seed = NULL) {
  if (!is.data.frame(data) || !all(c(".label", ".confidence") %in% names(data))) {
    abort_invalid("{.arg data} must be the value of {.fn annotate_texts} with {.arg labels}: it needs
                   {.field .label} and {.field .confidence}.", "data", current_env())
  }
  n <- check_whole(n, "n", min = 1)
  weight <- rlang::arg_match(weight)
  if (!is.null(seed)) seed <- check_whole(seed, "seed", min = 0, max = .Machine$integer.max)
  labelled <- which(!is.na(data$.label))
  if (n > length(labelled)) {
    abort_invalid("{.arg n} is {n}, but {.arg data} has {length(labelled)} labelled row{?s}.", "n", current_env())
  }
  strata <- split(labelled, droplevels(as.factor(data$.label[labelled])))
  sizes <- allocate_sample(n, lengths(strata))
  draw <- function() {
    unlist(Map(function(rows, size) {
      weights <- if (weight == "uniform") rep(1, length(rows)) else 1 - data$.confidence[rows] + 0.05
      rows[sample.int(length(rows), size, prob = weights)]
    }, strata, sizes), use.names = FALSE)
  }
  drawn <- sort(if (is.null(seed)) draw() else withr::with_seed(seed, draw()))
  sample <- data[drawn, , drop = FALSE]
  sample$.row <- drawn
  sample
}

# `n` draws shared among strata in proportion to their sizes, by largest
# remainder, after one each for as many strata as `n` allows (largest first).
allocate_sample <- function(n, sizes) {
  guaranteed <- as.integer(rank(-sizes, ties.method = "first") <= min(n, length(sizes)))
  rest <- n - sum(guaranteed)
  room <- sizes - guaranteed
  quota <- if (sum(room) > 0) rest * room / sum(room) else room
  share <- floor(quota)
  left <- rest - sum(share)
  extra <- order(quota - share, decreasing = TRUE)[seq_len(left)]
  share[extra] <- share[extra] + 1
  guaranteed + as.integer(share)
}
