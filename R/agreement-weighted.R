# agreement() on rows drawn with unequal probabilities: review_sample()'s
# default draws toward the model's doubt, where its labels are wrong more
# often, so the sample's own accuracy understates the population's. Each pair
# is weighted by the inverse of its inclusion probability (Horvitz-Thompson's
# weights, in Hajek's ratio), and the accuracy's variance is the stratified
# design's (Taylor linearisation, each stratum's finite-population
# correction), as survey's svymean() gives it.

# The drawn rows' design: each row's inclusion probability, stratum and
# sampling unit, from review_sample()'s columns; NULL for rows without
# `.sample_prob`, with a classed warning where review_sample()'s other columns
# show they were drawn by it (the figures are then the sample's own).
drawn_design <- function(rows, call) {
  if (!".sample_prob" %in% names(rows)) {
    if (any(c(".stratum", ".stratum_rows") %in% names(rows)) || !is.null(attr(rows, "design", exact = TRUE))) {
      warn_newrllama4("unweighted_sample", c(
        "{.arg predicted} holds rows drawn by {.fn review_sample} without {.field .sample_prob}: the figures are the
         sample's own, not the population's.",
        "i" = "A sample drawn toward doubt ({.code weight = \"confidence\"}, the default) understates the accuracy: keep
               {.field .sample_prob} (and {.field .stratum}) to have it weighted."))
    }
    return(NULL)
  }
  prob <- checked_probabilities(rows, call)
  unit_column <- unique(as.character(rows[[".sampling_unit"]] %||% ".row"))
  clusters <- length(unit_column) == 1 && unit_column != ".row" && unit_column %in% names(rows)
  stratum <- as.character(rows[[".stratum"]] %||% format(prob, digits = 15))
  list(prob = prob, stratum = stratum,
       unit = if (clusters) as.character(rows[[unit_column]]) else as.character(seq_len(nrow(rows))),
       stratum_rows = if (!clusters) rows[[".stratum_rows"]], strata = round_strata(rows, stratum, call))
}

# Rounds drawn by the learner's doubt (review_sample(weight = "learned")):
# each row's `.sample_prob` is its probability in its round, given the rows
# coded before, so the rows are weighed as the estimators combine the rounds
# (with_rounds(): the rounds' estimates, each unbiased given the rounds before
# it, weighted by their shares of the rows drawn). The strata's rows drawn,
# from `.stratum_drawn` (else the rows given), for those shares; NULL for a
# sample of one round.
round_strata <- function(rows, stratum, call) {
  if (all(round_of(stratum) == 1L)) return(NULL)
  if (!is.null(rows[[".stratum_rows"]]) && !is.null(rows[[".stratum_drawn"]])) return(design_strata(rows, call))
  data.frame(name = unique(stratum), drawn = as.vector(table(stratum)[unique(stratum)]), stringsAsFactors = FALSE)
}

# The design of pairs given `weights` (the inverse of their inclusion
# probabilities, rows drawn one by one in one stratum, with replacement).
weights_design <- function(weights, n, call) {
  if (!is.numeric(weights) || length(weights) != n || anyNA(weights) || any(weights < 1)) {
    abort_invalid("{.arg weights} must be the inverse of each pair's inclusion probability: numbers of at least 1, one
                   a pair.", "weights", call)
  }
  list(prob = 1 / weights, stratum = rep("all", n), unit = as.character(seq_len(n)), stratum_rows = NULL,
       with_replacement = TRUE)
}

# The rows kept (`keep`) of a design: each row's fields, the rest as they are.
design_rows <- function(design, keep) {
  each_row <- intersect(names(design), c("prob", "stratum", "unit", "stratum_rows", "round", "round_prob",
                                         "round_weight"))
  design[each_row] <- lapply(design[each_row], `[`, keep)
  design
}

# The design of the complete pairs: rows drawn one by one whose pair is
# incomplete are nonresponse, their stratum's complete pairs standing for its
# rows (its probability the share of its rows with a complete pair).
complete_design <- function(design, complete) {
  design <- design_rows(design, complete)
  if (!is.null(design$stratum_rows)) {
    answered <- table(design$stratum)[design$stratum]
    design$prob <- as.vector(answered) / design$stratum_rows
  }
  if (is.null(design$strata)) design else with_rounds(design)
}

# The population's accuracy from pairs that `agree` (logical) under `design`,
# or the coders' observed agreement from each text's share of agreeing pairs
# (`agree`) and its number of values (`size`, w its multiple):
# the weighted share, its linearised variance (each stratum's units' totals of
# w (agree - accuracy) / sum(w), centred, times n_h / (n_h - 1) and the finite
# population correction 1 - pi_h (round_parts(); none for pairs given
# `weights`); a stratum of one unit uncentred), and a
# Wilson interval at the effective number of pairs with a t quantile on the
# units less the strata, as label_shares() gives its shares. Rounds combined
# (with_rounds()) add their variances: each round's strata with its own
# probabilities, its rows' w its weight over their probability in it.
design_accuracy <- function(agree, design, level, size = 1) {
  w <- size / design$prob
  estimate <- sum(w * agree) / sum(w)
  parts <- round_parts(design)
  z <- parts$drawn_share * w * (agree - estimate) / sum(w)
  key <- paste(design$stratum, design$unit, sep = "\r")
  totals <- rowsum(z, key, reorder = FALSE)[, 1]
  first <- !duplicated(key)
  stratum <- design$stratum[first]
  fraction <- parts$fraction[first]
  variance <- sum(vapply(split(seq_along(totals), stratum), function(i) {
    n <- length(i)
    spread <- if (n < 2) sum(totals[i]^2) else n / (n - 1) * sum((totals[i] - mean(totals[i]))^2)
    (1 - fraction[i[[1]]]) * spread
  }, 0))
  df <- max(length(totals) - length(unique(stratum)), 1L)
  interval <- share_interval(estimate, sqrt(variance), length(agree), level, df)
  list(estimate = estimate, lower = interval$conf.low, upper = interval$conf.high, std.error = sqrt(variance),
       effective = interval$effective, df = df, units = length(totals), strata = length(unique(stratum)),
       rounds = length(design$round_weights %||% 1))
}

# Each drawn row's share of its stratum's rows drawn in its own round
# (`fraction`, its inclusion probability there; 0 for pairs given `weights`,
# drawn one by one with replacement, whose probabilities differ within their
# one stratum) and the part of
# its weight 1 / prob that its round's draw gives (`drawn_share`: 1 but in a
# round that later rounds followed, whose shares took its rows as known). The
# accuracy's linearised variance (design_accuracy()) and the bootstraps'
# replicates (stratum_draw()) take them alike.
round_parts <- function(design) {
  in_round <- design$round_prob %||% design$prob
  list(fraction = if (isTRUE(design$with_replacement)) numeric(length(in_round)) else pmin(in_round, 1),
       drawn_share = (design$round_weight %||% 1) * design$prob / in_round)
}

# The confusion matrix of `truth` and `predicted` (factors), each pair
# counted `weights` times.
weighted_confusion <- function(truth, predicted, weights) {
  confusion <- table(truth = truth, predicted = predicted)
  confusion[] <- tapply(weights, list(truth, predicted), sum, default = 0)
  confusion
}

# The weighted figures of agreement(): the metrics of the weighted confusion
# matrix, the accuracy's interval from the design, the others' from
# bootstrap_bounds() resampling the units within their strata as Rao and Wu
# do, each stratum's fraction and each round's part of the weights as
# design_accuracy() takes them, at the accuracy's scale (at_accuracy_scale()).
weighted_agreement <- function(truth, predicted, design, level, n_boot, seed) {
  weights <- 1 / design$prob
  confusion <- weighted_confusion(truth, predicted, weights)
  estimates <- agreement_metrics(unclass(confusion))
  parts <- round_parts(design)
  bounds <- bootstrap_bounds(truth, predicted, level, n_boot, seed, weights = weights,
                             units = split(seq_along(truth), paste(design$stratum, design$unit, sep = "\r")),
                             strata = design$stratum, fraction = parts$fraction, drawn_share = parts$drawn_share)
  accuracy <- design_accuracy(as.character(truth) == as.character(predicted), design, level)
  bounds <- at_accuracy_scale(bounds, estimates, c(accuracy$lower, accuracy$upper), unclass(confusion))
  per_label <- per_label_figures(unclass(table(truth = truth, predicted = predicted)))
  figures <- c("precision", "recall", "f1")
  per_label[figures] <- per_label_figures(unclass(confusion))[figures]
  list(estimates = estimates, bounds = bounds, per_label = per_label, confusion = confusion,
       design = accuracy[c("std.error", "effective", "df", "units", "strata", "rounds")])
}

# What print() says of a weighted agreement.
weighted_note <- function(x) {
  design <- x$design
  weighted <- if ((design$rounds %||% 1) > 1) {
    sprintf("Weighted as the estimators combine the %d rounds drawn by doubt (each round's rows by 1 / their
             probability in it): the population's figures.", design$rounds)
  } else {
    "Weighted by 1 / each pair's inclusion probability: the population's figures."
  }
  paste(weighted, sprintf(paste("The accuracy's interval is the design's: se %.3f on %d units in %d strata, %g",
                                "effective pairs, Wilson's at them with t on %d df."),
                          design$std.error, design$units, design$strata, signif(design$effective, 3), design$df))
}

# Texts split between their coders' codes (read_codes(disagreements =
# "split")) have no one code for a label to match.
refuse_split_texts <- function(predicted, call) {
  if (is.null(predicted[[".code_weight"]]) || !anyDuplicated(predicted[[".row"]])) return(invisible())
  abort_newrllama4("coded_rows", c(
    "{.arg predicted} holds texts split between their coders' codes (what {.fn read_codes} gives where coders
     disagree): the model's label can match one of a text's codes, not the text's.",
    "i" = "Adjudicate them, or compare with {.code read_codes(file, disagreements = \"missing\")};
           {.code read_codes(file, by = \"coder\")} compares the coders with each other."), call = call)
}
