#' Labels learned from a sample coded by hand
#'
#' Learns, from rows that people coded, a classifier of the labels on what the
#' model knows of each row: its hidden states (`features`), each example
#' order's label probabilities and optional covariates; then labels every row
#' again. Small local models are weak annotators zero-shot, but their hidden
#' states often tell the labels apart well: a penalised logistic regression on
#' them, fitted to 100-150 coded rows, can label the other rows far better than
#' the model's own answer (Buckmann and Hill 2024).
#'
#' It is the one verb for labels learned from coded rows. With
#' `features = FALSE` it refits the labels on each example order's
#' probabilities (what the deprecated [recalibrate_labels()] did, among more
#' candidates); with several example orders it finds the order to believe,
#' which the refit alone can miss (`docs/benchmarks.md`: on 30 coded rows,
#' within 0.05 of the better of two orders, or above it, on all eight cells
#' measured). Labels from another tool (ellmer, a fine-tuned classifier) work
#' too: a data frame with `.label` and a `.prob_<label>` column for each label
#' is taken as one example order, with no features unless you give them.
#'
#' The classifier is a ridge-penalised multinomial logistic regression (two
#' labels are its smallest case), fitted with \pkg{glmnet}, on the features
#' beside each example order's log-probabilities (not as an offset: glmnet's
#' multinomial fit does not converge against the extreme offsets of a confident
#' small model; the refit, which keeps the labels as they are, is a candidate of
#' its own). Its penalty is chosen among
#' `10^(1, 0.5, ..., -3)`, and its feature set among those `features` gives,
#' beside the refits of the labels (label offsets, a
#' temperature and, with several orders, order weights, as the deprecated
#' [recalibrate_labels()] fitted them: with `features = FALSE` this function
#' is the refit and more) and, with several
#' example orders, each order's labels alone as they are (nothing to fit: where
#' one order is confidently wrong, a few dozen coded rows find the other), by
#' the same rule: each
#' candidate is scored on the coded rows it was not fitted to (5-fold
#' cross-validation in the coded rows' order, so that the same rows give the
#' same choice; each fold holds whole clusters where they were drawn whole, so
#' that no fit sees the codes of a held-out row's speaker); one qualifies when its held-out accuracy beats that of the
#' labels as they are by more than one standard error of the paired difference,
#' and the qualified one with the lowest held-out log-loss wins. The orders
#' alone, with nothing to fit, are weighed first: where one qualifies, a fitted
#' candidate must beat it by the same margin, not only the labels as they are
#' (from a few dozen rows the best of many fits often wins by luck).
#'
#' That choice is itself made inside the folds: each fold of coded rows is
#' labelled by a candidate chosen and fitted on the other folds alone. So a
#' coded row's new label and probabilities come from a model that never saw its
#' code (they are cross-fitted), and their accuracy against the codes is an
#' honest estimate of the whole procedure's, choice included. One step is
#' taken on all coded rows: which order alone (or none) the fits must beat.
#' Nothing is fitted there, and a fold's few rows often miss an order that all
#' of them show; the estimators choose it again in their own folds. The guard: where
#' that cross-validated accuracy does not beat the labels as they are by more
#' than one standard error of the paired difference, the labels are kept, with a
#' message (class `newrllama4_message_refit_declined`). The other rows are
#' labelled by the candidate chosen on all coded rows.
#'
#' The guard is a choice between two estimates, each valid on its own: where
#' it declines, the estimators correct the labels as annotated, which no code
#' made; where it keeps the learner, they choose and fit it again in each of
#' their folds, and each fold's choice may keep the labels as they are (the
#' guard inside the folds). The decision itself reads every coded row's code,
#' so the intervals hold over all samples, the learner kept or not, and not
#' over those where it was kept alone: report the interval whatever the guard
#' decided.
#'
#' The value goes to [label_regression()] and [label_shares()] as it is, with
#' the same coded rows: they fit the learner again in their cross-fitting
#' folds, which are the learner's own, so each coded row's prediction is the
#' one given here and never one that saw its code, and the intervals stay
#' valid while they shrink with a better learner (DSL's supervised learner).
#' Keep the value whole: a subset or a file loses what it was learned from,
#' and the estimators then stop with a classed error.
#'
#' The coded rows must be a uniform random sample of the rows, or of their
#' clusters: draw them with `review_sample(weight = "uniform")` or
#' `review_sample(cluster =)`; a sample drawn toward doubt is refused (class
#' `newrllama4_error_weighted_sample`), since a fit to it would move the
#' labels' boundary and its accuracy would understate theirs. Where a uniform
#' draw gave some rows a larger chance (a tail drawn whole with
#' `review_sample(tail =)`, the rows each stratum gets at least), each coded
#' row counts by 1 / its inclusion probability (`.sample_prob`, after lost
#' rows) in every fit, score, choice and guard, and in the cross-validated
#' accuracy, so that they describe the rows rather than the sample; the
#' manifest's `learner_weights` says so, and the estimators weigh the rows
#' alike in their folds. Rounds drawn by the learned labels' doubt
#' (`review_sample(weight = "learned")`) are learned from as the estimators
#' combine them: each row by 1 / its weight in the combined estimate, the
#' folds holding rows of every round, so that labels learned from two rounds
#' can draw a third (their `.sample_prob` must be kept: without it they are
#' refused, class `newrllama4_error_weighted_sample`). A text whose coders
#' disagree, read with `read_codes(disagreements = "split")`, is learned from
#' each of its codes, weighted by that code's share of the text, and scored by its expected
#' agreement with them, as the estimators count it. Each label needs at least
#' two coded rows in the training part of a fold for the classifier to be fitted there; where
#' one has fewer, that fold keeps the refit's candidates alone.
#'
#' @inheritParams recalibrate_labels
#' @param truth The column of `coded` that holds the people's labels, bare
#'   (`truth = code`) or as a string (`truth = "code"`). With several fields,
#'   each field's column, named by the field:
#'   `c(tone = tone_code, topic = "topic_code")`.
#' @param features `TRUE` for the model's hidden states that
#'   `annotate_texts(features =)` or `embed_texts()` kept (the `.features`
#'   column). Where they keep several kinds (`"last"`, `"middle"`, `"mean"`),
#'   each kind alone and all of them together is a candidate of its own
#'   (a ridge fit a set), so that the feature set is chosen as the penalty is:
#'   by the same rule, inside the folds, its choice charged to the
#'   cross-validated accuracy. Some of the kinds kept (`c("middle", "mean")`)
#'   for that set alone, or a list of such sets
#'   (`list("last", c("middle", "mean"))`) to choose among; `FALSE` for none
#'   (the example orders' probabilities and `covariates` alone), or a numeric
#'   matrix with a row per row of `data` (embeddings from elsewhere).
#' @param covariates Columns of `data` (numbers, factors or logicals) that the
#'   classifier may also use, bare or as strings (`covariates = c(party, year)`).
#' @param field `NULL` for the labels, or enum or boolean fields of the `schema`
#'   given to [annotate_texts()] (their columns of `data`, bare or as strings,
#'   as in `dplyr::select()`: `field = c(tone, topic)`): each gets its own classifier, and
#'   its column, `.prob_<field>_<value>` and `.confidence_<field>` change; the
#'   manifest's entries carry the field's name, such as `"learner (tone)"`.
#' @return `data` with `.label`, the `.prob_` columns and `.confidence` from the
#'   classifier, cross-fitted on the coded rows. The manifest's `calibration`
#'   becomes `"learned"`, with `learner` (the chosen candidate),
#'   `learner_penalty`, `features` (their source: the model and the states of
#'   the feature set chosen), `learner_feature_sets` (the sets chosen among,
#'   where there were several), `hand_coded_rows`,
#'   `cross_validated_accuracy`, `learned_agreement` and `zero_shot_agreement`
#'   (accuracy and Cohen's kappa of the cross-fitted and of the given labels
#'   against the codes), and `learner_cross_validation` (every candidate's
#'   cross-validated accuracy and log-loss on all coded rows), and
#'   `learner_folds`: each coded row's fold (1-5, whole clusters), named by its row of `data`.
#'   Where the guard
#'   keeps the labels, `data` as it was, with `learner` `"none"` and those
#'   figures in its manifest; given rounds drawn later
#'   (`review_sample(weight = "learned")`), the estimators still fit the
#'   learner in their folds on every round's codes, each fold free to keep the
#'   labels as they are.
#' @seealso [annotate_texts()] for the labels and their probabilities; [review_sample()] to draw the coded rows (`weight = "uniform"`); [learning_curve()] for how many rows to code; [label_regression()] and [label_shares()] to use the learned labels.
#' @export
#' @examplesIf engine_available()
#' reviews <- data.frame(review = rep(c(
#'   "Broke after a day.", "Works well.", "Too loud and too slow.", "Great value.",
#'   "Arrived broken.", "Does the job.", "Never again.", "Lovely design."
#' ), 5))
#' reviews$gold <- rep(c("negative", "positive"), 20)
#' labelled <- annotate_texts(reviews, review, "Is the review positive or negative?",
#'                            labels = c("positive", "negative"), progress = FALSE)
#' coded <- review_sample(labelled, n = 30, weight = "uniform", seed = 1)
#' # the label probabilities alone here; features = TRUE adds the model's hidden
#' # states that annotate_texts(features = TRUE) keeps
#' learned <- learn_labels(labelled, coded, gold, features = FALSE)
#' record <- manifest(learned)$prompt
#' record[c("learner", "cross_validated_accuracy", "learned_agreement",
#'          "zero_shot_agreement")]
learn_labels <- function(data, coded, truth, features = TRUE, covariates = NULL, field = NULL) {
  call <- current_env()
  if (!is.data.frame(data)) abort_invalid("{.arg data} must be the value of {.fn annotate_texts}.", "data", call)
  truth <- rlang::enquo(truth)
  field <- unname(column_names(rlang::enquo(field), data, "field", "data", n = "some", call = call))
  covariates <- unname(column_names(rlang::enquo(covariates), data, "covariates", "data", n = "some", call = call))
  check_decimal_commas(data, covariates, "data", call)
  # the rows answered are those of any field's view: one answer gave every field
  x <- learner_features(labels_view(data, field[1], call), features, covariates, call)
  recipe <- list(features = features, covariates = covariates)
  if (!is.null(field)) {
    columns <- if (length(field) == 1) list(truth) else truth_mapping(truth, coded)
    if (length(field) > 1 && (is.null(columns) || !setequal(names(columns), field))) {
      abort_invalid("With several fields, {.arg truth} must name the column of {.arg coded} that codes each:
                     {.code truth = c({paste0(field, ' = \"...\"', collapse = ', ')})}.", "truth", call)
    }
    # each field learned from the data as annotated, which the coded rows were drawn from
    learned <- data
    for (name in field) {
      column <- if (length(field) == 1) columns[[1]] else rlang::quo(!!rlang::sym(columns[[name]]))
      learned <- from_labels_view(learned, learned_labels(labels_view(data, name, call), coded, column, x, recipe, call),
                                  name)
    }
    return(learned)
  }
  learned_labels(labels_view(data, NULL), coded, truth, x, recipe, call)
}

# learn_labels() on the labels of `data` (or a field's view), with the feature
# matrix `x` (NULL for none) that `recipe` (its `features` and `covariates`)
# makes again where the estimators fit the learner in their folds.
learned_labels <- function(data, coded, truth, x, recipe, call) {
  problem <- checked_refit_data(data, coded, truth, call)
  families <- learner_families(problem$log_probs, x, problem$as_given)
  learned <- learned_by_folds(families, problem$rows, problem$y, problem$as_given, units = problem$units,
                              weights = problem$weights, rounds = problem$rounds)
  record <- manifest_of(data)
  record$prompt$hand_coded_rows <- problem$texts
  if (problem$by_design) record$prompt$learner_weights <- weighed_by_design
  record$prompt$features <- attr(x, "source") %||% "none"
  sets <- names(attr(x, "sets"))
  if (length(sets) > 1) record$prompt$learner_feature_sets <- sets
  record$prompt$learner_cross_validation <- learned$choice$table$summary
  record$prompt$cross_validated_accuracy <- learned$accuracy
  # each coded row's fold, named by its row of `data`: the estimators can cross-fit in the same folds
  record$prompt$learner_folds <- row_folds(learned$choices$folds, problem$rows)
  labels <- problem$labels
  # agreement() takes inverse probabilities, at least 1; its figures are ratios, whatever the weights' scale
  agreement_weights <- if (!is.null(problem$weights)) problem$weights / min(problem$weights)
  report <- function(probs) {
    metrics <- agreement(factor(most_likely(probs, labels), levels = labels), factor(problem$truth, levels = labels),
                         n_boot = 0, weights = agreement_weights)$metrics
    sprintf("accuracy %.3f, Cohen's kappa %.3f", metrics$estimate[metrics$metric == "accuracy"],
            metrics$estimate[metrics$metric == "cohen_kappa"])
  }
  record$prompt$learned_agreement <- report(learned$cross_fitted)
  record$prompt$zero_shot_agreement <- report(problem$as_given[problem$rows, , drop = FALSE])
  # kept where the guard declines too: rounds drawn later give the estimators more codes to fit it on
  # the codes beside their rows: a round by doubt is planned by what they say of it (doubt_variance())
  attr(data, "learner") <- c(recipe, list(as_given = problem$as_given, coded_rows = problem$rows, codes = problem$truth,
                                          code_weights = problem$weights, by_design = problem$by_design),
                             learned$choices)
  if (!learned$kept) {
    decline(problem$texts, "learner_cross_validation")
    record$prompt$learner <- "none"
    attr(data, "manifest") <- record
    return(data)
  }
  family <- families[[learned$choice$family]]
  setting <- family$settings[learned$choice$setting, ]
  # the states of the feature set chosen, where it chose among several
  record$prompt$features <- family$features %||% record$prompt$features
  data <- with_probabilities(data, problem, learned)
  record$prompt$calibration <- "learned"
  record$prompt$learner <- setting$model
  record$prompt$learner_penalty <- setting$penalty
  attr(data, "manifest") <- record
  data
}

# The labels as they are and each example order's log-probabilities, checked
# against the coded rows, for a refit or a learner.
checked_refit_data <- function(data, coded, truth, call) {
  order_probs <- kept_order_probs(data, call)
  labels <- levels(data$.label)
  # the design's probabilities where the sample records them: a learner weighs its coded rows by them
  sample <- checked_coded_rows(data, coded, truth, call, labels = labels,
                               probabilities = is.data.frame(coded) && ".sample_prob" %in% names(coded))
  n_parameters <- length(labels) - 1 + length(order_probs)
  if (length(unique(sample$truth)) < 2 || length(sample$rows) <= n_parameters) {
    abort_invalid(c("{.arg coded} needs more than {n_parameters} rows, with at least two labels among them.",
                    "i" = "It has {length(sample$rows)} row{?s} and {length(unique(sample$truth))} label{?s}."),
                  "coded", call)
  }
  check_uniform_sample(coded, sample, call)
  units <- coded_units(sample, data)
  # each fold's choice is made in folds of its own: two units at least in each
  coded_folds(units, 5L, min_units = 3L, call = call)
  answered <- which(!is.na(data$.label))
  if (any(vapply(order_probs, function(probs) anyNA(probs[answered, ]), NA))) {
    abort_newrllama4("calibration", "The label probabilities of some labelled rows are missing (a server that gave
                     none), so nothing can be refitted.", call = call)
  }
  as_given <- as.matrix(data[paste0(".prob_", labels)])
  by_design <- design_weights(sample)
  entries <- coded_entries(sample$rows, match(sample$truth, labels), by_design, split_shares(sample$split), labels)
  list(labels = labels, rows = sample$rows[entries$at], units = units[entries$at], rounds = sample$round[entries$at],
       truth = labels[entries$y], y = entries$y, weights = entries$weights, by_design = !is.null(by_design),
       texts = length(sample$rows), answered = answered, order_probs = order_probs,
       log_probs = lapply(order_probs, order_log_probs), as_given = unname(as_given / rowSums(as_given)))
}

decline <- function(n_coded, table) {
  inform_newrllama4("refit_declined", c(
    "Nothing labels the coded rows better than the labels as they are: they are kept.",
    "i" = "Cross-validated on the {n_coded} coded rows; {.code manifest()$prompt${table}} has every candidate's
           figures."))
}

# `data` with the new labels of its answered rows: the chosen candidate's
# everywhere, the cross-fitted ones on the coded rows.
with_probabilities <- function(data, problem, learned) {
  probs <- learned$predict(problem$answered)
  probs[match(problem$rows, problem$answered), ] <- learned$cross_fitted
  labels <- problem$labels
  data$.label[problem$answered] <- most_likely(probs, labels)
  for (k in seq_along(labels)) data[[paste0(".prob_", labels[k])]][problem$answered] <- probs[, k]
  data$.confidence[problem$answered] <- apply(probs, 1, max)
  attr(data, "order_probs") <- order_probs_record(problem$order_probs, data)
  data
}

# Every family's settings scored on the coded rows (`rows`, labels `y`) they
# were not fitted to, in `n_folds` folds in the rows' order; the labels as they
# are (`as_given`) first. The choice: among the fitted settings whose held-out
# accuracy beats the `baseline`'s (a family and setting with nothing to fit) by
# more than one standard error of the paired difference, the lowest held-out
# log-loss, else the baseline. A fit must earn its place against what needs
# none: from a few dozen rows the best of many noisy fits is often chosen by
# luck, while a candidate with nothing to fit has no fitting noise.
choose_setting <- function(families, rows, y, as_given, n_folds = 5L,
                           baseline = baseline_choice(families, rows, y, as_given, weights), units = rows,
                           weights = NULL, rounds = NULL) {
  n <- length(y)
  fold <- unit_folds(units, n_folds, rounds = rounds)
  held_out <- lapply(families, function(family) {
    probs <- rep(list(matrix(NA_real_, n, ncol(as_given))), nrow(family$settings))
    for (k in unique(fold)) {
      test <- fold == k
      fitted <- family$predict(rows[!test], y[!test], rows[test], weights = weights[!test])
      for (i in seq_along(probs)) probs[[i]][test, ] <- fitted[[i]]
    }
    probs
  })
  scores <- scored(c(list(as_given[rows, , drop = FALSE]), unlist(held_out, recursive = FALSE)), y, weights)
  settings <- do.call(rbind, lapply(seq_along(families), function(f) {
    cbind(family = f, setting = seq_len(nrow(families[[f]]$settings)), families[[f]]$settings)
  }))
  table <- data.frame(family = c(0L, settings$family), setting = c(0L, settings$setting),
                      model = c("none", settings$model), penalty = c(NA, settings$penalty),
                      log_loss = scores$log_loss, accuracy = scores$accuracy, stringsAsFactors = FALSE)
  fitted <- c(FALSE, vapply(families, function(family) !isFALSE(family$fitted), NA)[settings$family])
  best <- lowest_loss_beating(scores, which(fitted),
                              which(table$family == baseline$family & table$setting == baseline$setting))
  table$summary <- sprintf("%s%s: accuracy %.3f, log-loss %.3f", table$model,
                           ifelse(table$family == 0, " (the labels as they are)",
                                  ifelse(is.na(table$penalty), "", sprintf(" (ridge %g)", table$penalty))),
                           table$accuracy, table$log_loss)
  table$summary[best] <- paste(table$summary[best], "(chosen)")
  list(family = table$family[best], setting = table$setting[best], accuracy = table$accuracy[best], table = table,
       baseline = baseline)
}

# The baseline of the choice on the coded rows `rows`: among the settings with
# nothing to fit (`fitted = FALSE`, such as each example order alone) whose
# accuracy beats the labels' as they are by more than one standard error of the
# paired difference, the lowest log-loss; else the labels as they are (family
# 0). Nothing is fitted, so they are scored on all the rows at once, without
# folds: learned_by_folds() chooses it on all coded rows, where a fold's few
# rows would often miss an order that all of them show.
baseline_choice <- function(families, rows, y, as_given, weights = NULL) {
  free <- which(vapply(families, function(family) isFALSE(family$fitted), NA))
  candidates <- do.call(rbind, c(list(c(0L, 0L)), lapply(free, function(f) {
    cbind(f, seq_len(nrow(families[[f]]$settings)))
  })))
  probs <- c(list(as_given[rows, , drop = FALSE]),
             unlist(lapply(families[free], function(family) family$predict(rows, y, rows)), recursive = FALSE))
  chosen <- lowest_loss_beating(scored(probs, y, weights), seq_along(probs)[-1], 1L)
  list(family = as.integer(candidates[chosen, 1]), setting = as.integer(candidates[chosen, 2]))
}

# The probabilities of the rows `at` under the setting `choice` (its family
# and setting; family 0 the labels as they are, `as_given`) fitted on the
# coded rows `rows` with labels `y`.
setting_probs <- function(families, choice, rows, y, at, as_given, weights = NULL) {
  if (choice$family == 0) return(as_given[at, , drop = FALSE])
  families[[choice$family]]$predict(rows, y, at, choice$setting, weights = weights)[[1]]
}

# The choice made inside the folds: each fold of coded rows labelled by the
# setting chosen and fitted on the other folds, so that the cross-fitted
# probabilities of the coded rows and their accuracy include the fits' own
# noise. The baseline that fitted settings must beat has nothing to fit and is
# chosen once, on all coded rows (its selection among a few orders is the one
# step not nested: the estimators, which need the honest figure, choose it
# again in their folds). The guard keeps the labels unless those cross-fitted
# labels beat them. `predict(at)`: the rows `at` under the setting chosen on
# all coded rows. `choices`: the folds and what was chosen, for the learner's
# record (learner_of() takes a fold's choice again).
learned_by_folds <- function(families, rows, y, as_given, n_folds = 5L, units = rows, weights = NULL, rounds = NULL) {
  n <- length(y)
  fold <- unit_folds(units, n_folds, rounds = rounds)
  chosen_probs <- function(choice, train, at) {
    setting_probs(families, choice, rows[train], y[train], at, as_given, weights[train])
  }
  choice <- choose_setting(families, rows, y, as_given, n_folds, units = units, weights = weights, rounds = rounds)
  cross_fitted <- matrix(NA_real_, n, ncol(as_given))
  inner_choices <- list()
  for (k in unique(fold)) {
    train <- fold != k
    inner <- choose_setting(families, rows[train], y[train], as_given, n_folds, baseline = choice$baseline,
                            units = units[train], weights = weights[train], rounds = rounds[train])
    inner_choices[[k]] <- inner[c("family", "setting")]
    cross_fitted[!train, ] <- chosen_probs(inner, train, rows[!train])
  }
  correct <- max.col(cross_fitted, ties.method = "first") == y
  list(choice = choice, cross_fitted = cross_fitted, accuracy = weighted_average(correct, weights),
       choices = list(folds = fold, inner_choices = inner_choices, baseline = choice$baseline, weights = weights),
       kept = choice$family != 0 && beats(correct, max.col(as_given[rows, , drop = FALSE], ties.method = "first") == y,
                                          weights),
       predict = function(at) chosen_probs(choice, rep(TRUE, n), at))
}
