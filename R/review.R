#' Rows to code by hand: a stratified sample with known inclusion probabilities
#'
#' Draws `n` labelled rows of an [annotate_texts()] result for people to code,
#' so that [agreement()] can compare the model with them and
#' [label_regression()] and [label_shares()] can correct estimates made from
#' the labels. The sample is stratified, and within a stratum every row is
#' equally likely to be drawn (simple random sampling without replacement), so
#' each drawn row's inclusion probability is known exactly: `.sample_prob`,
#' the stratum's draws over its rows.
#'
#' With `weight = "uniform"` the strata are the labels the model gave, each
#' with five rows (or all its rows, if fewer) and a share of the rest of the
#' sample in proportion to its rows, so that rare labels are checked too and
#' each stratum's variance can be estimated: with two or three rows it is
#' often 0 by chance. Where `n` is too small for five a stratum, the strata
#' get as many each as it allows, and a warning
#' (`newrllama4_warning_thin_strata`) says how many rows would give five. With
#' `weight = "confidence"` each label is split further into up to three bands
#' of the model's confidence (its rows' thirds, from the least sure; no more
#' bands than `n` can give five rows each), and, beyond their five rows, the
#' sample is shared among the strata in proportion to their rows times their
#' doubt, the mean of \eqn{\sqrt{c(1 - c)}}{sqrt(c (1 - c))} over their
#' confidences \eqn{c} (Neyman allocation for a label that is right with
#' probability \eqn{c}), plus 0.05 so that no stratum is left out. Doubtful
#' rows are where the model's errors gather: drawing more of them finds
#' errors sooner and, weighted by `1 / .sample_prob`, estimates corrected
#' from them are as valid as from a uniform sample, often with fewer rows.
#'
#' Unweighted, a sample drawn toward doubt understates the annotation's
#' accuracy, and [learn_labels()] needs a uniform one: use
#' `weight = "uniform"` for both.
#'
#' Coding can come in rounds: pass the rows drawn before as `previous` to draw
#' `n` more from the rows not drawn yet, in the same strata. Together they are
#' again a stratified random sample, and every row's `.sample_prob` is its
#' probability of being in the combined sample.
#'
#' With `weight = "learned"`, a further round is drawn where labels learned
#' from the rows coded so far are unsure: `data` is the value of
#' [learn_labels()] (learned from `previous`), and the `n` new rows are drawn
#' from the rows not drawn yet in bands of equal total doubt
#' \eqn{\sqrt{c(1 - c)}}{sqrt(c (1 - c))} + 0.05 of the learned labels
#' (cross-fitted; `n` / 10 bands, at most 10), or with `label` the doubt
#' \eqn{\sqrt{p(1 - p)}}{sqrt(p (1 - p))} of that label's learned probability,
#' by Neyman allocation, at least 10
#' rows a band, so that every row keeps a chance and every band's variance is
#' estimated. Its strata are named `"round r: doubt band b of k"`
#' (`"round r: doubt of <label>, band b of k"` with `label`;
#' band 1 the most unsure), and each new row's `.sample_prob` is its
#' probability of being drawn in its round. The estimators
#' ([label_regression()], [label_shares()]) combine one estimate a round: the
#' first sample's, and each later round's, which takes the rows coded before it
#' as known and weights its own rows by 1 / their round's probability, so it is
#' unbiased given what was coded before; the rounds' estimates, weighted by
#' their shares of the rows drawn, are then unbiased, and their errors are
#' uncorrelated, so the sampling variance is the sum of the rounds' stratified
#' variances times their weights squared. That is the batched form of active
#' inference (Zrnic and Candes 2024), with a round drawn as confidence-driven
#' inference draws (Gligoric et al. 2025), rather than the exact inclusion
#' probabilities of the sequential design, which after rounds drawn without
#' replacement in bands that the codes moved are not known. The learner that
#' drew a round is not the one that predicts its rows: the estimators fit the
#' learner again in their folds, each fold holding rows of every round, so a
#' coded row is predicted by a fit that never saw its code. Learn the labels
#' from the rounds coded so far (`learn_labels()` weighs each row as the
#' combined estimate does) to draw the next round, give the estimators every
#' round, and plan a round's size with
#' [coded_rows_needed()]'s `doubt`. Keep the rounds' weights fixed: decide the
#' rounds' sizes before seeing the estimates. [agreement()] given the rounds
#' weighs their rows the same way, each round's variance from its own strata.
#' Where `learn_labels()`'s guard kept the
#' labels as annotated, their own confidence is the doubt drawn by.
#'
#' Zrnic, T. and Candes, E. J. (2024). Active statistical inference.
#' *Proceedings of the 41st International Conference on Machine Learning*.
#'
#' Gligoric, K., Zrnic, T., Lee, C., Candes, E. J. and Jurafsky, D. (2025).
#' Can unconfident LLM annotations be used for confident conclusions?
#' *Proceedings of NAACL 2025*.
#'
#' @param data The value of [annotate_texts()] with `labels`, or with a
#'   `schema` and `field`.
#' @param n How many rows to draw.
#' @param weight `"confidence"`, `"uniform"` or, for a further round where
#'   learned labels are unsure, `"learned"`: see Details.
#' @param seed `NULL` to draw from R's random number generator as it stands,
#'   or a whole number to draw from this seed alone (reproducible, and the
#'   session's generator is left as it was).
#' @param previous `NULL`, or the rows drawn from `data` before (a value of
#'   `review_sample()` with the same `weight`, perhaps coded since), to add `n`
#'   rows to them.
#' @param field `NULL` for the labels, or an enum or boolean field of the
#'   `schema` given to [annotate_texts()] (its column of `data`, bare or as a
#'   string, as in `dplyr::select()`): the strata are then its values
#'   and the confidence bands those of `.confidence_<field>`.
#' @param cluster `NULL`, or a column of `data` (speaker, outlet, day), bare or
#'   as a string, whose clusters are drawn whole: `n` is then the number of clusters,
#'   drawn uniformly (simple random sampling of the clusters with labelled
#'   rows, `weight` unused), and every labelled row of a drawn cluster is coded;
#'   each row's `.sample_prob` is its cluster's, `n` over the clusters. Texts
#'   of one speaker share errors, so [label_regression()] and [label_shares()]
#'   then give a cluster-robust variance. Where a few clusters hold much of
#'   the rows (the speakers who speak most), those that a draw of `n` in
#'   proportion to size would take with certainty are among the `n`, taken
#'   whole in a stratum `"largest clusters"` (`.sample_prob` 1), and the rest
#'   are drawn uniformly from the others: drawn at random, they would carry
#'   the estimate when drawn and leave it off with a small standard error
#'   when not. Where the clusters drawn at random still differ too much in
#'   size, the corpus's estimate stops (`newrllama4_error_skewed_clusters`).
#' @param tail `NULL`, or a numeric column of `data` (bare or as a string)
#'   whose tail is taken whole: its rows farthest from the median, as few as
#'   leave the rest's skewness at most 2.5, and where there are any, also the
#'   rows a draw of `n` for a slope would take with certainty (Neyman
#'   allocation in proportion to the distance from the mean gives them a
#'   share of one: about 200 of 2,000 lognormal rows at `n = 1000`, 45 at 400,
#'   a few at 150), form a stratum `"tail of <column>"`
#'   drawn with probability 1, and the other `n` rows are drawn as `weight`
#'   says from the rest. A slope on a covariate with a long tail (word counts,
#'   followers, prices) rests on a few rows far out; a uniform draw misses
#'   them in most samples, and its interval is then too narrow, which
#'   [label_regression()] refuses for the corpus (`target = "corpus"`) and,
#'   past 500 coded rows (60 for a straight line through codes of 0 and 1),
#'   for the population (`newrllama4_error_skewed_covariate`). Taken whole,
#'   they are known exactly, and the corpus's slope covers. Pass the same
#'   `tail` with `previous`, which keeps the first draw's tail; a round by
#'   doubt (`weight = "learned"`) draws from the rest.
#' @param label With `weight = "learned"`, `NULL` to draw where the learned
#'   labels are unsure (the doubt of the top label's confidence \eqn{c}), or a
#'   label (a string) to draw where it is unsure whether a row has that label
#'   (the doubt of its learned probability \eqn{p}, \eqn{\sqrt{p(1 - p)}}{sqrt(p
#'   (1 - p))}). With two labels they are the same; with more, the share of
#'   one label (or a regression of it) is estimated best from a round drawn by
#'   its own doubt, since a row sure to be one of two other labels is as sure
#'   not to be this one.
#' @return The drawn rows of `data`, in their order there, with the design
#'   in columns of their own: `.row`, their row numbers in `data`; `.draw`,
#'   the round in which each was drawn; `.stratum`; `.stratum_rows`, the
#'   stratum's labelled rows in `data`; `.stratum_drawn`, the rows drawn from
#'   it (in every round so far); `.sample_prob`, the row's inclusion
#'   probability; and `.sampling_unit`, the column whose values were drawn
#'   (`".row"` for rows drawn one by one, or the `cluster` column). Being
#'   columns, they survive [read_codes()], a CSV or spreadsheet file, `dplyr`
#'   verbs and `[`: keep them when the codes come back, and the estimators
#'   find there everything about the draw, rows drawn but lost included
#'   (for rows drawn one by one, `.sample_prob` is `.stratum_drawn /
#'   .stratum_rows`: where a spreadsheet saved it rounded, the estimators read
#'   the exact ratio, and refuse one that no rounding explains). With
#'   `previous`, its rows (and their columns, such as the codes) and the new
#'   ones. Rows without a label (`.error`) are never drawn. The attribute
#'   `"design"` describes the strata for reading: their labels, confidence
#'   bands, rows, draws and inclusion probabilities.
#' @seealso [code_sample()] and [write_codes()] to code the drawn rows; [read_codes()] to read them back; [coded_rows_needed()] for how many to draw.
#' @export
#' @examples
#' labelled <- data.frame(
#'   text = paste("text", 1:12),
#'   .label = factor(rep(c("yes", "no", "no"), 4), levels = c("yes", "no")),
#'   .confidence = c(0.99, 0.51, 0.97, 0.62, 0.98, 0.55,
#'                   0.93, 0.99, 0.58, 0.96, 0.9, 0.52)
#' )
#' first <- review_sample(labelled, n = 4, seed = 1)
#' first
#' attr(first, "design")
#' review_sample(labelled, n = 3, seed = 2, previous = first)
review_sample <- function(data, n, weight = c("confidence", "uniform", "learned"), seed = NULL, previous = NULL,
                          field = NULL, cluster = NULL, tail = NULL, label = NULL) {
  if (!is.data.frame(data)) {
    abort_invalid("{.arg data} must be the value of {.fn annotate_texts}, not {.obj_type_friendly {data}}.", "data",
                  current_env())
  }
  field <- column_name(rlang::enquo(field), data, "field", "data")
  cluster <- column_name(rlang::enquo(cluster), data, "cluster", "data")
  tail <- column_name(rlang::enquo(tail), data, "tail", "data")
  labelled <- labels_view(data, field)
  if (!all(c(".label", ".confidence") %in% names(labelled))) {
    abort_invalid("{.arg data} must be the value of {.fn annotate_texts} with {.arg labels}, or {.arg field} must
                   name one of its schema's fields: it needs {.field .label} and {.field .confidence}.", "data",
                  current_env())
  }
  n <- check_whole(n, "n", min = 1)
  weight <- check_choice(weight, c("confidence", "uniform", "learned"), "weight")
  if (!is.null(tail) && (weight == "learned" || !is.null(cluster))) {
    abort_invalid("{.arg tail} takes rows whole in a draw of rows by label, not with
                   {if (is.null(cluster)) '{.code weight = \"learned\"}' else '{.arg cluster}'}.", "tail", current_env())
  }
  if (!is.null(label) && weight != "learned") {
    abort_invalid("{.arg label} chooses whose doubt a round by the learner's doubt is drawn by: give it with
                   {.code weight = \"learned\"}.", "label", current_env())
  }
  if (weight == "learned") {
    return(doubt_round(data, labelled, n, seed, previous, cluster, field, label, current_env()))
  }
  if (!is.null(cluster)) return(cluster_sample(data, labelled, n, seed, previous, cluster, field))
  if (!is.null(seed)) seed <- check_whole(seed, "seed", min = 0, max = .Machine$integer.max)
  # no more bands than the first sample can give stratum_floor rows each
  n_bands <- if (weight == "uniform") 1L else if (is.null(previous)) {
    max(1L, min(3L, n %/% (stratum_floor * nlevels(droplevels(as.factor(labelled$.label))))))
  } else {
    previous_bands(previous)
  }
  design <- sample_design(labelled, weight, n_bands)
  if (!is.null(tail)) design <- with_tail_stratum(design, data, tail, n, previous, current_env())
  drawn_before <- if (is.null(previous)) integer() else previous_rows(previous, data, design, weight)
  if (!is.null(previous)) warn_lost_rows(previous)
  available <- sum(!is.na(design$stratum)) - length(drawn_before)
  if (n > available) {
    abort_invalid("{.arg n} is {n}, but {.arg data} has {available} labelled row{?s} not drawn yet.", "n",
                  current_env())
  }
  strata <- design$strata
  before <- tabulate(design$stratum[drawn_before], nrow(strata))
  room <- strata$rows - before
  wanted <- stratum_least(strata)
  new_draws <- allocate_strata(n, room, strata, least = pmax(wanted - before, 0), current_env())
  never <- before + new_draws == 0
  thin <- before + new_draws < wanted
  needed <- sum(pmax(wanted - before, 0)) - n
  if (any(never)) {
    warn_newrllama4("empty_strata", c(
      "{.arg n} is too small to draw from every stratum: rows of {.val {strata$name[never]}} can never be drawn.",
      "i" = "Estimates corrected with this sample do not cover those rows; draw at least {nrow(strata)} rows
             ({needed + n} to give each stratum {stratum_floor})."))
  } else if (any(thin)) {
    warn_newrllama4("thin_strata", c(
      "{.arg n} is too small to draw {stratum_floor} rows from every stratum: {.val {strata$name[thin]}} get{?s/}
       fewer, and a stratum's variance is poorly estimated from so few rows.",
      "i" = "Draw {needed} more row{?s} ({.arg n} = {n + needed}{if (!is.null(previous)) ' in this round'}), or use
             {.code weight = \"uniform\"} for fewer strata."))
  }
  draw <- function() {
    unlist(lapply(which(new_draws > 0), function(h) {
      rows <- setdiff(which(design$stratum == h), drawn_before)
      rows[sample.int(length(rows), new_draws[h])]
    }), use.names = FALSE)
  }
  drawn <- sort(with_optional_seed(seed, draw()))
  strata$drawn <- before + new_draws
  strata$prob <- strata$drawn / strata$rows

  sample <- data[drawn, , drop = FALSE]
  sample$.row <- drawn
  if (!is.null(previous)) {
    round <- max(previous[[".draw"]] %||% 1L)
    sample$.draw <- rep(round + 1L, length(drawn))
    previous$.draw <- previous[[".draw"]] %||% rep(1L, nrow(previous))
    sample <- bind_rows_filled(previous, sample)
    sample <- sample[order(sample$.row), , drop = FALSE]
  }
  if (is.null(previous)) sample$.draw <- rep(1L, nrow(sample))
  sample <- with_design_columns(sample, strata, design$stratum[sample$.row])
  rownames(sample) <- NULL
  attr(sample, "design") <- structure(
    list(weight = weight, field = field %||% ".label", n_bands = n_bands, tail = tail, strata = strata[c("name", "label", "band", "rows", "drawn", "prob")],
         rounds = if (is.null(previous)) 1L else round + 1L),
    class = "newrllama4_sample_design"
  )
  sample
}

# The design in the drawn rows' own columns, so that it survives read_codes(),
# files, spreadsheets, dplyr and `[`: each row's stratum (`position` among
# `strata`), the stratum's labelled rows in `data` and rows drawn from it, the
# row's inclusion probability, and the column whose values were drawn (`.row`
# for rows one by one, or the cluster column): the estimators read these, and
# find lost rows as those drawn but absent.
with_design_columns <- function(sample, strata, position, unit = ".row") {
  sample$.stratum <- strata$name[position]
  sample$.stratum_rows <- strata$rows[position]
  sample$.stratum_drawn <- strata$drawn[position]
  sample$.sample_prob <- strata$prob[position]
  sample$.sampling_unit <- rep(unit, length(position))
  sample
}

# The row numbers of the rows drawn before, checked against this design.
previous_rows <- function(previous, data, design, weight, call = caller_env()) {
  if (!is.data.frame(previous) || !all(c(".row", ".stratum") %in% names(previous))) {
    abort_invalid("{.arg previous} must be rows drawn by {.fn review_sample}, with {.field .row} and
                   {.field .stratum}.", "previous", call)
  }
  rows <- previous$.row
  weight_before <- attr(previous, "design", exact = TRUE)$weight
  same <- (is.null(weight_before) || identical(weight_before, weight)) && is.numeric(rows) && all(rows %in% seq_len(nrow(data))) && !anyDuplicated(rows) &&
    identical(as.character(previous$.stratum), as.character(design$strata$name[design$stratum[rows]]))
  if (!same) {
    abort_invalid(c("{.arg previous} was not drawn from {.arg data} with this {.arg weight} and {.arg tail}.",
                    "i" = "Its rows' strata differ: draw again from the same {.arg data} (before any refit changes
                           its labels), the same {.arg weight} and the same {.arg tail}."), "previous", call)
  }
  as.integer(rows)
}

# Rows drawn before but no longer among `previous` (its design columns count
# them) are unknown now, so they may be drawn again: that keeps the combined
# sample a stratified random one only if they were lost at random.
warn_lost_rows <- function(previous) {
  if (!all(c(".stratum", ".stratum_drawn") %in% names(previous))) return(invisible())
  stratum <- as.character(previous$.stratum)
  recorded <- tapply(previous$.stratum_drawn, stratum, max)
  lost <- sum(recorded - table(stratum)[names(recorded)])
  if (lost > 0) {
    warn_newrllama4("nonresponse", c(
      "{.arg previous} has lost {lost} of the rows drawn before: they are drawn from again, as if never drawn.",
      "i" = "That is valid only if they were lost at random: keep every drawn row, coded or not."))
  }
}

# The bands a label of the first draw had: later draws keep its strata.
previous_bands <- function(previous) {
  design <- attr(previous, "design", exact = TRUE)
  if (!is.null(design$n_bands)) return(design$n_bands)
  stratum <- as.character(previous$.stratum)
  if (any(grepl("(middle)", stratum, fixed = TRUE))) 3L else if (any(grepl("sure)", stratum, fixed = TRUE))) 2L else 1L
}

# Two data frames stacked, each given the other's columns (as NA).
bind_rows_filled <- function(a, b) {
  for (column in setdiff(names(b), names(a))) a[[column]] <- rep(b[[column]][NA_integer_], nrow(a))
  for (column in setdiff(names(a), names(b))) b[[column]] <- rep(a[[column]][NA_integer_], nrow(b))
  # a round read back from a CSV file holds its features as their placeholder text: so then does the whole
  # sample, which rbind() would otherwise make a list that no CSV file can hold
  for (column in names(a)) {
    if (inherits(a[[column]], "newrllama4_features") != inherits(b[[column]], "newrllama4_features")) {
      a[[column]] <- as.character(a[[column]])
      b[[column]] <- as.character(b[[column]])
    }
  }
  rbind(a, b[names(a)])
}

#' @export
format.newrllama4_sample_design <- function(x, ...) {
  strata <- x$strata
  # a later round's strata hold rows of the first's again: the rows are the first's
  rows <- sum(strata$rows[round_of(strata$name) == 1L])
  within_width(c(paste0(cli::format_inline("{.cls newrllama4_sample_design}: "),
                        cli::pluralize("{x$weight} weights, {sum(strata$drawn)} of {rows} rows in ",
                                       "{nrow(strata)} strat{?um/a}, {x$rounds} round{?s}")),
                 bullet_lines(sprintf("%s: %d of %d rows (probability %.3f)", strata$name, strata$drawn, strata$rows,
                                      strata$prob))))
}

#' @export
print.newrllama4_sample_design <- function(x, ...) print_lines(x, ...)

# Whole clusters drawn by simple random sampling: every labelled row of a drawn
# cluster, each with its cluster's inclusion probability. The clusters that a
# draw of `n` in proportion to size would take with certainty are taken whole
# first, in a stratum of their own (largest_clusters()), and the rest drawn
# uniformly from the others.
cluster_sample <- function(data, labelled, n, seed, previous, cluster, field, call = caller_env()) {
  if (!rlang::is_string(cluster) || !cluster %in% names(data) || anyNA(data[[cluster]])) {
    abort_invalid("{.arg cluster} must name a column of {.arg data} without missing values.", "cluster", call)
  }
  if (!is.null(previous)) {
    abort_invalid("{.arg previous} cannot be added to by clusters: draw the clusters in one round.", "previous", call)
  }
  rows <- which(!is.na(labelled$.label))
  ids <- as.character(data[[cluster]][rows])
  sizes <- table(ids)
  clusters <- unique(ids)
  if (n > length(clusters)) {
    abort_invalid("{.arg n} is {n}, but {.arg data} has {length(clusters)} cluster{?s} with labelled rows.", "n", call)
  }
  largest <- largest_clusters(sizes[clusters], n)
  others <- setdiff(clusters, largest)
  pick <- function() others[sample.int(length(others), n - length(largest))]
  in_sample <- ids %in% c(largest, with_optional_seed(seed, pick()))
  drawn <- rows[in_sample]
  sample <- data[drawn, , drop = FALSE]
  sample$.row <- drawn
  sample$.draw <- rep(1L, length(drawn))
  whole <- ids[in_sample] %in% largest
  strata <- data.frame(name = c("largest clusters", "clusters"), label = NA_character_, band = NA_character_,
                       rows = c(sum(sizes[largest]), sum(sizes[others])), drawn = c(sum(whole), sum(!whole)),
                       prob = c(1, (n - length(largest)) / length(others)), stringsAsFactors = FALSE)
  strata <- strata[strata$drawn > 0, ]
  sample <- with_design_columns(sample, strata, match(ifelse(whole, "largest clusters", "clusters"), strata$name),
                                unit = cluster)
  rownames(sample) <- NULL
  attr(sample, "design") <- structure(
    list(weight = "uniform", field = field %||% ".label", n_bands = 1L, strata = strata, rounds = 1L,
         cluster = cluster, clusters = length(clusters), clusters_drawn = n, largest_clusters = largest),
    class = "newrllama4_sample_design"
  )
  sample
}
