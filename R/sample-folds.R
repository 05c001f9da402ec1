# Cross-fitting folds are the design's, not the learner's: a fold holds whole
# sampling units, the clusters drawn whole (`.sampling_unit`) or the clusters
# whose rows share errors (the estimators' `cluster`). Texts of one speaker are
# alike, so a fit that saw a speaker's other codes predicts that speaker's
# coded rows too well: their residuals, the variance built on them and the
# learner's cross-validated accuracy all come out too small (coverage 0.77
# where the hidden states carry the speaker, issue 58). learn_labels(),
# recalibrate_labels() and the estimators all take their folds from here, so
# a new design changes this file and every fold follows. Here too: whether
# the learners may take a sample as it is (check_uniform_sample()).

# The sampling unit of each coded row of `design` (checked_coded_rows()): its
# value of the column `design$cluster` (the clusters drawn whole, or the
# estimators' `cluster`), or the row itself where rows were drawn one by one.
coded_units <- function(design, data) {
  if (is.null(design$cluster)) design$rows else data[[design$cluster]][design$rows]
}

# Folds of rows whose sampling units are `units` (a value a row): each unit's
# rows in one fold, in `n_folds` folds or as many as there are units, the
# units spread so that the folds' rows are as even as they can be (the
# largest units first, each to the fold with the fewest rows so far). Without
# a `seed` the units go in their order (rows one by one: folds 1, 2, ..., k, 1,
# 2, ...), so that the same coded rows give the same folds and the same
# choice; with one, in an order drawn from it (the session's generator is left
# as it was). With `rounds` (each row's round of a draw by doubt), the units of
# each round are spread over the folds in turn, so that every fold's fit
# learns from every round and predicts rows of each.
unit_folds <- function(units, n_folds, seed = NULL, rounds = NULL) {
  ids <- unique(units)
  unit <- match(units, ids)
  sizes <- tabulate(unit, length(ids))
  order <- if (is.null(seed)) seq_along(ids) else withr::with_seed(seed, sample.int(length(ids)))
  order <- order[order(-sizes[order])]
  if (!is.null(rounds)) order <- order[order(rounds[match(seq_along(ids), unit)][order])]
  k <- min(n_folds, length(ids))
  fold_of <- integer(length(ids))
  if (length(unique(sizes)) <= 1) {
    # units of one size: the greedy spread is a rotation (and rows are many)
    fold_of[order] <- rep_len(seq_len(k), length(ids))
  } else {
    load <- numeric(k)
    for (u in order) {
      fold_of[u] <- which.min(load)
      load[fold_of[u]] <- load[fold_of[u]] + sizes[u]
    }
  }
  fold_of[unit]
}

# The folds of coded rows whose sampling units are `units`: at least
# `min_units` units must have been coded, so that every fold's fit (and, for a
# learner, the choice inside it) has units of its own to learn from.
coded_folds <- function(units, n_folds, seed = NULL, min_units = 2L, call = caller_env(), rounds = NULL) {
  n_units <- length(unique(units))
  if (n_units < min_units) {
    abort_newrllama4("too_few_coded", c(
      "The coded rows come from {n_units} sampling unit{?s} (clusters drawn whole, or sharing errors): cross-fitting
       needs {min_units} at least, since no fold may hold part of a unit.",
      "i" = "Code rows of more clusters (draw more of them with {.fn review_sample}), or drop {.arg cluster}."),
      call = call)
  }
  unit_folds(units, n_folds, seed, rounds)
}

# The estimators' folds of the domain's rows (`units`, each row's sampling
# unit; `coded`, the coded rows' positions). The coded rows' folds first: the
# folds learn_labels() or recalibrate_labels() gave them (`kept`, NA for rows
# it did not see) where they hold whole units of these `units`, in as many
# folds as asked, so that each coded row keeps the prediction it was given and
# each fold's choice is taken again without its cost; else folds of their own.
# Then each other row goes to its unit's fold where that unit was coded, and
# the rest are spread evenly over the folds. `seed` NULL draws one from the
# session's generator; `rounds`, the coded rows' rounds of a draw by doubt.
cross_fit_folds <- function(units, coded, n_folds, seed, kept = NULL, call = caller_env(), rounds = NULL) {
  seed <- seed %||% sample.int(.Machine$integer.max, 1)
  of_coded <- units[coded]
  k <- min(n_folds, length(unique(of_coded)))
  whole <- !is.null(kept) && !anyNA(kept) && length(unique(kept)) == k &&
    all(tapply(kept, as.character(of_coded), function(f) length(unique(f))) == 1)
  fold <- integer(length(units))
  fold[coded] <- if (whole) kept else coded_folds(of_coded, n_folds, seed, call = call, rounds = rounds)
  rest <- setdiff(seq_along(units), coded)
  known <- match(units[rest], of_coded)
  fold[rest[!is.na(known)]] <- fold[coded][known[!is.na(known)]]
  others <- rest[is.na(known)]
  fold[others] <- unit_folds(units[others], k, seed)
  fold
}

# learn_labels() and recalibrate_labels() fit and score their candidates on the
# coded rows weighed by 1 / pi (design_weights()), which describes the rows
# where a uniform draw gave a few of them a larger chance (a tail drawn whole,
# strata's floors). A sample drawn toward doubt (review_sample(weight =
# "confidence"), whose strata are confidence bands) holds too many rows near
# the boundary: weighing them by 1 / pi would count least the doubtful rows
# the sample was drawn for, and unweighted, a fit to it moves the boundary and
# its cross-validated accuracy and the guard built on it understate the
# labels' on the rows. The estimators would stay valid (their correction
# weighs by the design), but the learner's figures would not be honest. So it
# is refused.
# Rounds drawn by the learner's doubt (review_sample(weight = "learned")) are
# not: their first round is uniform, and with each row's probability in its
# round known, the rounds combined (with_rounds()) weigh every row by its
# weight in the estimate, which the estimators' own fits in their folds use
# too; so labels learned from every round so far can draw the next one. Their
# probabilities must be there: without them a round drawn toward doubt would
# count as if drawn from every row.
check_uniform_sample <- function(coded, design, call) {
  if (!is.null(design$stratum) && any(round_of(design$stratum) > 1L) && is.null(design$round)) {
    abort_newrllama4("weighted_sample", c(
      "{.arg coded} holds rounds drawn by the learner's doubt ({.code review_sample(weight = \"learned\")}) without
       their probabilities ({.field .sample_prob}): unweighted, the rows drawn where the labels were unsure would
       move their boundary, and the cross-validated accuracy would understate theirs.",
      "i" = "Keep the column {.field .sample_prob} that {.fn review_sample} gave each row, or learn from the first
             round alone ({.code coded[coded$.draw == 1, ]})."),
      call = call)
  }
  banded <- !is.null(design$stratum) && any(!is.na(stratum_parts(design$stratum)$band))
  if (!banded && !identical(attr(coded, "design", exact = TRUE)$weight, "confidence")) return(invisible())
  abort_newrllama4("weighted_sample", c(
    "{.arg coded} was drawn toward doubt ({.code review_sample(weight = \"confidence\")}), not uniformly: a fit to
     it would move the labels' boundary, and its cross-validated accuracy would understate theirs.",
    "i" = "Learn from a uniform sample: draw one with {.code review_sample(weight = \"uniform\")}. The sample drawn
           toward doubt still serves {.fn agreement} and the estimators."), call = call)
}
