# agreement() of people with each other, from read_codes(file, by = "coder"):
# Krippendorff's alpha among the coders, with an interval over the texts,
# the yardstick for the model's agreement with each coder beside it.

#' @section Coders with each other:
#' Give `predicted` as `read_codes(file, by = "coder")` ([read_codes()]), without `truth`:
#' the result, of class `newrllama4_coder_agreement`, has in `humans`
#' Krippendorff's alpha among the people (nominal, any number of coders, over
#' the texts two or more coded, with a percentile bootstrap interval over
#' those texts put at the scale of the coders' observed agreement, as the
#' figures above are put at the accuracy's: its Wilson interval over the
#' texts, and where they agree on every text, alpha's lower bound at the
#' coincidences moved toward disagreement until that agreement is at its
#' bound), and, when the sample carries the model's labels, the model's
#' agreement with each coder in `annotators` and `each`, as above; `pairwise`
#' compares each pair of coders. `field` picks a field of a schema (the
#' labels' `code` otherwise). Where the sample was drawn by [review_sample()]
#' with unequal probabilities (its default draws toward the model's doubt,
#' where texts are harder for people too), each text counts the inverse of its
#' inclusion probability in alpha (its coincidences weighted, the bootstrap
#' resampling texts within their strata), between each pair of coders, and
#' in the model's agreement with each coder (as for drawn rows, above, each
#' coder's texts standing for their strata): the population's figures, not
#' the sample's.
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
  texts <- sampled_texts(codes, rows)
  design <- drawn_design(texts, call)
  model_column <- if (column == "code") ".label" else paste0(".model_", column)
  each <- if (model_column %in% names(codes)) {
    model <- field_labels(texts[[model_column]])
    lapply(stats::setNames(nm = coders), function(coder) {
      mine <- !is.na(wide[, coder])
      if (is.null(design)) {
        return(agreement(model[mine], wide[mine, coder], level = level, n_boot = n_boot, seed = seed))
      }
      agreement(texts[mine, , drop = FALSE], wide[mine, coder], field = model_column, level = level,
                n_boot = n_boot, seed = seed)
    })
  }
  texts_design <- if (!is.null(design)) complete_design(design, rep(TRUE, nrow(wide)))
  structure(
    list(
      humans = coders_alpha(wide, level, n_boot, seed, texts_design),
      annotators = if (!is.null(each)) annotators_table(each),
      pairwise = pairwise_agreement(lapply(stats::setNames(nm = coders), function(coder) wide[, coder]),
                                    if (!is.null(texts_design)) 1 / texts_design$prob),
      each = each, level = level, n_boot = n_boot, seed = seed, weighted = !is.null(design)
    ),
    class = c("newrllama4_coder_agreement", "newrllama4_agreements")
  )
}

# The coded texts, one row each (`rows`, their `.row`s), with the sample's
# columns; read_codes() gives `.sample_prob` and `.stratum` as NA where the
# sample had none, which is no design.
sampled_texts <- function(codes, rows) {
  texts <- as.data.frame(codes)[match(rows, codes$.row), , drop = FALSE]
  for (column in c(".sample_prob", ".stratum")) if (all(is.na(texts[[column]]))) texts[[column]] <- NULL
  rownames(texts) <- NULL
  texts
}

# Nominal alpha for any number of coders and missing codes, over the texts
# that two or more coded, with a percentile bootstrap over those texts. With
# a `design` (drawn_design() of the texts), each text weighs 1 / its
# inclusion probability, scaled to a mean of one so that equal weights give
# the unweighted alpha, and a replicate draws the sampling units within their
# strata as bootstrap_bounds() does (complete_design(): its coded texts
# standing for each stratum's rows, and rounds drawn by doubt combined). The
# interval is at the scale of the coders' observed agreement (the share of
# the coincidences that agree), as agreement() puts its figures at the
# accuracy's (at_accuracy_scale()): Wilson's interval for that share over the
# texts, each text's share of its pairs that agree weighed by its values.
# Two coders agreeing on 20 texts of 20 had alpha [1, 1]; where each is right
# on 99% of texts the percentile interval covered 0.345 of 200 draws.
coders_alpha <- function(wide, level, n_boot, seed, design = NULL) {
  labels <- sort(unique(stats::na.omit(c(wide))), method = "radix")
  counts <- vapply(labels, function(label) rowSums(wide == label, na.rm = TRUE), numeric(nrow(wide)))
  counts <- matrix(counts, nrow(wide))
  pairable <- rowSums(counts) >= 2
  counts <- counts[pairable, , drop = FALSE]
  texts <- if (!is.null(design)) design_rows(design, pairable)
  weights <- if (is.null(texts)) rep(1, nrow(counts)) else mean_one(1 / texts$prob)
  values <- rowSums(counts)
  agreeing <- rowSums(counts * (counts - 1)) / (values * (values - 1))
  observed_share <- function(w) sum(w * values * agreeing) / sum(w * values)
  # the observed agreement in the accuracy's place: the share of agreeing pairs, as at_accuracy_scale() reads it
  estimates <- c(accuracy = observed_share(weights), krippendorff_alpha = nominal_alpha(counts, weights))
  bounds <- matrix(NA_real_, 2, 2)
  if (n_boot > 0 && nrow(counts) > 0) {
    units <- if (is.null(texts)) as.list(seq_len(nrow(counts))) else {
      unname(split(seq_len(nrow(counts)), paste(texts$stratum, texts$unit, sep = "\r")))
    }
    strata <- if (is.null(texts)) rep("all", length(units)) else texts$stratum[vapply(units, `[[`, 1L, 1L)]
    parts <- if (is.null(texts)) list(drawn_share = 1) else round_parts(texts)
    replicate_weights <- text_replicates(weights, units, strata, parts$fraction, parts$drawn_share)
    resample <- function() {
      replicates <- vapply(seq_len(n_boot), function(i) {
        w <- replicate_weights()
        c(observed_share(w), nominal_alpha(counts, w))
      }, numeric(2))
      t(apply(replicates, 1, stats::quantile, probs = (1 + c(-1, 1) * level) / 2, na.rm = TRUE, names = FALSE))
    }
    bounds <- with_optional_seed(seed, resample())
  }
  if (nrow(counts) > 0) {
    observed <- design_accuracy(agreeing, texts %||% weights_design(rep(1, nrow(counts)), nrow(counts), NULL), level,
                                size = values)
    bounds <- at_accuracy_scale(bounds, estimates, c(observed$lower, observed$upper),
                                coincidence_matrix(counts, weights) / 2)
  }
  data.frame(coders = ncol(wide), texts = nrow(counts), krippendorff_alpha = estimates[["krippendorff_alpha"]],
             lower = bounds[2, 1], upper = bounds[2, 2])
}

# A function giving one bootstrap replicate's weights of the texts of
# coders_alpha() (`weights`), its units' texts `units` drawn within their
# `strata` as bootstrap_bounds() draws them (stratum_draw(), each unit's
# stratum's `fraction` in its round, on the part `drawn_share` of each weight
# that its round's draw gives).
text_replicates <- function(weights, units, strata, fraction, drawn_share) {
  by_stratum <- split(seq_along(units), strata)
  unit_of <- integer(length(weights))
  unit_of[unlist(units)] <- rep(seq_along(units), lengths(units))
  draws <- lapply(by_stratum, function(members) stratum_draw(length(members), fraction[units[[members[[1]]]][[1]]]))
  function() {
    factor <- numeric(length(units))
    for (h in seq_along(by_stratum)) {
      members <- by_stratum[[h]]
      taken <- tabulate(sample.int(length(members), draws[[h]]$draws, replace = TRUE), length(members))
      factor[members] <- draws[[h]]$keep + draws[[h]]$each * taken
    }
    weights * (1 + drawn_share * (factor[unit_of] - 1))
  }
}

# 1 - D_o / D_e over the coincidence matrix (coincidence_matrix()).
nominal_alpha <- function(counts, weights = rep(1, nrow(counts))) {
  if (nrow(counts) == 0) return(NA_real_)
  coincidences <- coincidence_matrix(counts, weights)
  n <- sum(coincidences)
  nan_to_na(1 - (n - 1) * (n - sum(diag(coincidences))) / (n^2 - sum(rowSums(coincidences)^2)))
}

# The coincidence matrix: each text's m values give m (m - 1) ordered pairs,
# each counted 1 / (m - 1), and the text's `weights` times.
coincidence_matrix <- function(counts, weights) {
  weighted <- counts * (weights / (rowSums(counts) - 1))
  crossprod(weighted, counts) - diag(colSums(weighted), ncol(counts))
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
    cli::col_grey(sub("of the pairs", "of the texts", bootstrap_note(x, scale = "their observed agreement"))),
    if (isTRUE(x$weighted)) {
      cli::col_grey(wrapped("Weighted by 1 / each text's inclusion probability in the sample drawn: the population's
                             figures."))
    }
  )
  if (is.null(x$annotators)) return(within_width(lines))
  model <- utils::tail(NextMethod(), -2)
  within_width(c(lines, "", "The model against each coder:", model))
}
