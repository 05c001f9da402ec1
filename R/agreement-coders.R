# agreement() of people with each other, from read_codes(file, by = "coder"):
# Krippendorff's alpha among the coders, with a bootstrap interval over the
# texts, the yardstick for the model's agreement with each coder beside it.

#' @section Coders with each other:
#' Give `predicted` as `read_codes(file, by = "coder")` ([read_codes()]), without `truth`:
#' the result, of class `newrllama4_coder_agreement`, has in `humans`
#' Krippendorff's alpha among the people (nominal, any number of coders, over
#' the texts two or more coded, with a percentile bootstrap interval over
#' those texts), and, when the sample carries the model's labels, the model's
#' agreement with each coder in `annotators` and `each`, as above; `pairwise`
#' compares each pair of coders. `field` picks a field of a schema (the
#' labels' `code` otherwise).
#'
#' @name agreement
#' @rdname agreement
NULL

agreement_of_coders <- function(codes, field, level, n_boot, seed, call = caller_env()) {
  column <- field %||% attr(codes, "codes", exact = TRUE)[[1]]
  if (!rlang::is_string(column) || !column %in% attr(codes, "codes", exact = TRUE)) {
    abort_invalid("{.arg field} must name a coded field of {.arg predicted}: {.val {attr(codes, 'codes')}}.",
                  "field", call)
  }
  level <- check_number(level, "level", min = 0, max = 1, open_min = TRUE, call = call)
  n_boot <- check_whole(n_boot, "n_boot", min = 0, call = call)
  if (!is.null(seed)) seed <- check_whole(seed, "seed", min = 0, max = .Machine$integer.max, call = call)
  rows <- sort(unique(codes$.row))
  coders <- sort(unique(codes$.coder))
  wide <- matrix(NA_character_, length(rows), length(coders), dimnames = list(rows, coders))
  wide[cbind(match(codes$.row, rows), match(codes$.coder, coders))] <- field_codes(codes[[column]])
  model_column <- if (column == "code") ".label" else paste0(".model_", column)
  each <- if (model_column %in% names(codes)) {
    model <- field_labels(codes[[model_column]][match(rows, codes$.row)])
    lapply(stats::setNames(nm = coders), function(coder) {
      mine <- !is.na(wide[, coder])
      agreement(model[mine], wide[mine, coder], level = level, n_boot = n_boot, seed = seed)
    })
  }
  structure(
    list(
      humans = coders_alpha(wide, level, n_boot, seed),
      annotators = if (!is.null(each)) annotators_table(each),
      pairwise = pairwise_agreement(lapply(stats::setNames(nm = coders), function(coder) wide[, coder])),
      each = each, level = level, n_boot = n_boot, seed = seed
    ),
    class = c("newrllama4_coder_agreement", "newrllama4_agreements")
  )
}

# Nominal alpha for any number of coders and missing codes, over the texts
# that two or more coded, with a percentile bootstrap over those texts.
coders_alpha <- function(wide, level, n_boot, seed) {
  labels <- sort(unique(stats::na.omit(c(wide))), method = "radix")
  counts <- vapply(labels, function(label) rowSums(wide == label, na.rm = TRUE), numeric(nrow(wide)))
  counts <- matrix(counts, nrow(wide))
  counts <- counts[rowSums(counts) >= 2, , drop = FALSE]
  bounds <- c(NA_real_, NA_real_)
  if (n_boot > 0 && nrow(counts) > 0) {
    resample <- function() {
      replicates <- vapply(seq_len(n_boot), function(i) {
        nominal_alpha(counts[sample.int(nrow(counts), replace = TRUE), , drop = FALSE])
      }, 0)
      stats::quantile(replicates, (1 + c(-1, 1) * level) / 2, na.rm = TRUE, names = FALSE)
    }
    bounds <- with_optional_seed(seed, resample())
  }
  data.frame(coders = ncol(wide), texts = nrow(counts), krippendorff_alpha = nominal_alpha(counts),
             lower = bounds[[1]], upper = bounds[[2]])
}

# 1 - D_o / D_e over the coincidence matrix: each text's m values give
# m (m - 1) ordered pairs, each counted 1 / (m - 1).
nominal_alpha <- function(counts) {
  if (nrow(counts) == 0) return(NA_real_)
  weighted <- counts / (rowSums(counts) - 1)
  coincidences <- crossprod(weighted, counts) - diag(colSums(weighted), ncol(counts))
  n <- sum(coincidences)
  nan_to_na(1 - (n - 1) * (n - sum(diag(coincidences))) / (n^2 - sum(rowSums(coincidences)^2)))
}

#' @export
format.newrllama4_coder_agreement <- function(x, digits = 3, ...) {
  humans <- x$humans
  interval <- if (is.na(humans$lower)) "" else {
    sprintf(" [%s, %s]", format_figure(humans$lower, digits), format_figure(humans$upper, digits))
  }
  lines <- c(
    cli::format_inline("{.cls newrllama4_coder_agreement}: {humans$coders} coder{?s}, {humans$texts} text{?s} coded by two or more"),
    paste0("Krippendorff's alpha between the coders: ", format_figure(humans$krippendorff_alpha, digits), interval),
    cli::col_grey(sub("of the pairs", "of the texts", bootstrap_note(x)))
  )
  if (is.null(x$annotators)) return(within_width(lines))
  model <- utils::tail(NextMethod(), -2)
  within_width(c(lines, "", "The model against each coder:", model))
}
