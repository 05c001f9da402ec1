# Learned labels in the estimators: label_regression() and label_shares() fit
# learn_labels()'s learner again in their cross-fitting folds (findings.R's
# refitted_on_folds()), from what learn_labels() kept in the data.

# The learner of labels that learn_labels() learned, to be chosen and fitted
# again on part of the coded rows: the estimators cross-fit it in their folds
# (DSL's supervised learner), each fold choosing its setting among the same
# candidates by the same rule, as learn_labels() did inside its own folds.
# Returns function(rows, y, units, at, prob, shares, choice): the probabilities of the
# rows `at` (a column a label; every row by default) from the setting chosen
# and fitted on the coded rows `rows` with labels `y` (their numbers), chosen
# in folds that keep their sampling units `units` whole; the labels as
# annotated where nothing beats them there. Where learn_labels() weighed its
# coded rows by their design (design_weights()), so does each fold, by 1 /
# `prob`, the rows' inclusion probabilities in the estimator's design; split
# texts (`shares`, split_shares()') are learned from every code, as
# learn_labels() learned them (coded_entries()). The setting chosen is kept
# in the value's attribute `choice`; a `choice` given is fitted without choosing.
learner_of <- function(data, call, labels = levels(data$.label)) {
  learner <- attr(data, "learner", exact = TRUE)
  log_probs <- lapply(attr(data, "order_probs", exact = TRUE)$probs, order_log_probs)
  x <- learner_features(data, learner$features, learner$covariates, call)
  families <- learner_families(log_probs, x, learner$as_given, learner$families %||% "learner")
  everyone <- seq_len(nrow(data))
  inputs <- NULL
  function(rows, y, units = rows, at = everyone, prob = NULL, shares = NULL, choice = NULL) {
    entries <- coded_entries(rows, y, if (isTRUE(learner$by_design)) 1 / prob, shares, labels)
    rows <- rows[entries$at]
    y <- entries$y
    units <- units[entries$at]
    weights <- entries$weights
    choice <- choice %||% fold_choice(learner, families, x, log_probs, rows, y, units, weights)[c("family", "setting")]
    # the features by their shape, source and coded rows: hashing every row's read them all at once (2.5 GB more
    # at 100,000 rows), and the probabilities tell the data apart
    if (is.null(inputs)) {
      inputs <<- rlang::hash(list(dim(x), attr(x, "source"), attr(x, "sets"), x[learner$coded_rows, , drop = FALSE],
                                  log_probs, learner$as_given, labels))
    }
    fitted <- remembered(fold_fits, list(inputs, choice, rows, y, at, weights), function() {
      setting_probs(families, choice, rows, y, at, learner$as_given, weights)
    })
    structure(fitted, choice = choice)
  }
}

# The setting learner_of()'s fold chooses on its coded rows `rows` (labels
# `y`, units `units`, weights `weights`). Where `rows` are the training rows of
# one of learn_labels()'s own folds (the folds the estimators share) and the
# baseline chosen on them is the one it chose on all coded rows, the setting it
# chose there is the same choice, taken again without its cost; else it is
# chosen by the same rule, once (remembered()).
fold_choice <- function(learner, families, x, log_probs, rows, y, units, weights) {
  baseline <- baseline_choice(families, rows, y, learner$as_given, weights)
  same_fold <- Filter(function(k) {
    train <- learner$folds != k
    identical(rows, learner$coded_rows[train]) &&
      isTRUE(all.equal(mean_one(weights), mean_one(learner$weights[train])))
  }, seq_along(learner$inner_choices))
  if (length(same_fold) == 1 && identical(baseline, learner$baseline)) return(learner$inner_choices[[same_fold]])
  read <- list(x = if (!is.null(x)) x[rows, , drop = FALSE], sets = attr(x, "sets"), kind = learner$families,
               log_probs = lapply(log_probs, function(l) l[rows, , drop = FALSE]),
               as_given = learner$as_given[rows, , drop = FALSE], y = y, units = units, weights = weights,
               baseline = baseline)
  remembered(fold_choices, read, function() {
    choose_setting(families, rows, y, learner$as_given, baseline = baseline, units = units, weights = weights)
  })
}

# The settings the estimators' folds chose (choose_setting()), by everything
# the choice reads: label_shares() estimates each label's share from the same
# folds, and a study estimates shares, then slopes, on the same coded rows.
# Where the folds are not learn_labels()' own (rounds drawn since), each choice
# costs about 1.3 CPU s on 600 coded rows of 1,920 features: label_shares() by
# group on two rounds of 300 took 14 s choosing each twice, 8 s now, and a
# slope after it 6.4 s, 0.3 s now.
fold_choices <- new.env(parent = emptyenv())

# The fits of the estimators' folds (setting_probs()), by everything they read:
# a learner predicts every label at once, and label_shares() fits each label's
# folds, and the jackknife's replicates (learner_dependence()) in them, alike
# (43 s for five labels on 150 coded rows, 9 s remembered).
fold_fits <- new.env(parent = emptyenv())

# What `compute()` gives on what it reads (`read`, all of it), computed once
# and kept in `store` (of at most `kept` values: each fit holds its rows'
# probabilities, 0.8 MB for 20,000 rows of five labels).
remembered <- function(store, read, compute, kept = 100L) {
  key <- rlang::hash(read)
  if (is.null(store[[key]])) {
    if (length(store) >= kept) rm(list = ls(store), envir = store)
    store[[key]] <- compute()
  }
  store[[key]]
}

# The manifest's calibration of labels fitted to coded rows: "learned" by
# learn_labels(), "hand-coded" by recalibrate_labels().
fitted_to_codes <- c("learned", "hand-coded")

# How labels were fitted to coded rows (one of fitted_to_codes); NULL for
# labels as annotated.
learned_calibration <- function(data) {
  calibration <- attr(data, "manifest", exact = TRUE)$prompt[["calibration"]]
  if (isTRUE(calibration %in% fitted_to_codes)) calibration
}

# Learned or refitted labels lose what they were learned from where their rows
# are subset or written to a file; the estimators fit the learner again from
# it, so they stop with a classed error saying so.
check_learner_kept <- function(data, call) {
  calibration <- learned_calibration(data)
  if (is.null(calibration)) return(invisible())
  if (!learner_matches_rows(data)) {
    verb <- if (calibration == "learned") "learn_labels" else "recalibrate_labels"
    abort_invalid(c("Labels from {.fn {verb}} are corrected by choosing and fitting its learner again in the
                     estimator's folds, and {.arg data} no longer has what it learned from for its rows (the
                     features and each order's probabilities: lost to a subset, a file or a join).",
                    "i" = "Give the value of {.fn {verb}} as it returned it, or the labels as annotated."),
                  "data", call)
  }
}

# Whether data still has what its learner learned from for every row (the
# record and each order's probabilities): not after a subset, a file or a join.
learner_matches_rows <- function(data) {
  learner <- attr(data, "learner", exact = TRUE)
  !is.null(learner) && order_probs_kept(data) && nrow(learner$as_given) == nrow(data)
}

# The learner's record for the rows `rows` of its data.
learner_rows <- function(learner, rows) {
  learner$as_given <- learner$as_given[rows, , drop = FALSE]
  learner$coded_rows <- match(learner$coded_rows, rows)
  if (is.matrix(learner$features)) learner$features <- learner$features[rows, , drop = FALSE]
  learner
}
