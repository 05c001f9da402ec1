# The candidates among which learn_labels() and recalibrate_labels() choose,
# in families that fit all their settings at once: `settings` (a data frame of
# `model` and `penalty`), and `predict(train, y, at, which, weights)`, the
# probabilities of the rows `at` (a matrix per setting of `which`) from a fit
# to the rows `train` with labels `y` (their numbers), each training row
# weighted by `weights` (NULL: equally; see design_weights()).

# The candidates of `kind`: "refit", recalibrate_labels()' refits alone;
# "learner", learn_labels()' refits, ridge logistic on each feature set of `x`
# (its attribute `sets`, from feature_sets(): a family a set, so that the set
# is chosen as the penalty is, inside the folds; all of `x` where it has none)
# and, with several example orders, each order alone. A feature set's family
# names its states in `features`, for the learner's record.
learner_families <- function(log_probs, x = NULL, as_given = NULL, kind = "learner") {
  if (kind == "refit") return(list(refit_family(log_probs)))
  sets <- attr(x, "sets")
  learners <- if (length(sets) == 0) {
    list(glmnet_family(log_probs, x, as_given))
  } else {
    lapply(names(sets), function(name) {
      family <- glmnet_family(log_probs, x, as_given, if (length(sets) > 1) name, columns = sets[[name]])
      family$features <- attr(sets[[name]], "source")
      family
    })
  }
  families <- c(list(refit_family(log_probs)), learners)
  if (length(log_probs) > 1) families <- c(families, list(orders_family(log_probs)))
  families
}

# recalibrate_labels()'s refit: label offsets and order weights.
refit_family <- function(log_probs) {
  models <- if (length(log_probs) == 1) refit_models[1:2] else refit_models
  settings <- expand.grid(penalty = refit_penalties, model = models, stringsAsFactors = FALSE)[c("model", "penalty")]
  list(settings = settings, predict = function(train, y, at, which = seq_len(nrow(settings)), weights = NULL) {
    # each model's fit starts from the one at the penalty before it (the nested
    # choice fits hundreds of them: a tenth off the refit's time)
    previous <- NULL
    lapply(which, function(i) {
      start <- if (!is.null(previous) && previous$model == settings$model[i]) previous$fit$theta
      fit <- fit_label_model(lapply(log_probs, function(l) l[train, , drop = FALSE]), y, settings$model[i],
                             settings$penalty[i], start, row_weights = mean_one(weights))
      previous <<- list(model = settings$model[i], fit = fit)
      softmax_rows(label_scores(lapply(log_probs, function(l) l[at, , drop = FALSE]), fit))
    })
  })
}

# Ridge penalties of the learner: glmnet's lambda, on standardised features.
learner_penalties <- 10^seq(1, -3, by = -0.5)

# The learner: a ridge-penalised multinomial logistic (glmnet) on each order's
# log-probabilities and the `columns` of the features `x`, the feature set `set`
# (its name, such as "middle + mean", in the model's; NULL where there is one
# set). A penalty whose fit glmnet could not reach (it stops at the first
# lambda that does not converge) gives the labels as they are (`as_given`) in
# that fold, so the choice cannot prefer it. The rows a fit or a prediction
# reads are put together when it reads them, and predicted in chunks: a copy
# of every row's features a set took gigabytes at 100,000 rows.
glmnet_family <- function(log_probs, x, as_given, set = NULL, columns = seq_len(NCOL(x))) {
  rows_of <- function(rows) {
    cbind(do.call(cbind, lapply(log_probs, function(l) l[rows, , drop = FALSE])),
          if (!is.null(x)) x[rows, columns, drop = FALSE])
  }
  n_labels <- ncol(as_given)
  model <- paste0("ridge logistic on the features", if (!is.null(set)) paste(":", set))
  settings <- data.frame(model = model, penalty = learner_penalties, stringsAsFactors = FALSE)
  list(settings = settings, predict = function(train, y, at, which = seq_len(nrow(settings)), weights = NULL) {
    as_they_are <- rep(list(as_given[at, , drop = FALSE]), length(which))
    # glmnet needs two rows of every label it fits: a label with fewer among the rows learnt from is left out of
    # the fit and given its add-one share of them, so that one rare label does not leave all the others to the
    # labels as they are (Gemma 3 270M's five parts of speech: a fold with one coded adverb fell back to labels
    # 0.44 accurate where its fits reached 0.72, and two rounds of 75 rows came out 2.3x as wide as 150 uniform)
    counts <- tabulate(y, n_labels)
    fitted <- which(counts >= 2)
    if (length(fitted) < 2) return(as_they_are)
    learnt <- y %in% fitted
    fit <- quietly_glmnet(rows_of(train[learnt]), factor(match(y[learnt], fitted), levels = seq_along(fitted)),
                          weights[learnt])
    reached <- match(settings$penalty[which], fit$lambda)
    if (all(is.na(reached))) return(as_they_are)
    rare <- setdiff(seq_len(n_labels), fitted)
    # its rows counted as the fit weighs them (the design's weights, scaled to a mean of one): a rare label drawn
    # with a small chance stands for more rows than its count
    weight <- rep_len(mean_one(weights), length(y))
    counted <- vapply(rare, function(k) sum(weight[y == k]), 0)
    rare_share <- (counted + 1) / (length(y) + n_labels)
    probs <- array(NA_real_, c(length(at), n_labels, length(fit$lambda)))
    probs[, rare, ] <- rep(rare_share, each = length(at))
    # predicted a chunk of rows at a time: a prediction copies the rows it is given once more
    for (chunk in row_chunks(seq_along(at))) {
      probs[chunk, fitted, ] <- (1 - sum(rare_share)) * multinomial_probs(fit, rows_of(at[chunk]))
    }
    lapply(seq_along(which), function(i) {
      if (is.na(reached[i])) as_they_are[[i]] else matrix(probs[, , reached[i]], length(at), n_labels)
    })
  })
}

# A multinomial glmnet fit's probabilities of each label (rows x labels x its
# penalties), as predict(fit, x, s = fit$lambda, type = "response") gives
# them, to rounding: its S4 sparse matrices cost 4 ms a call where this
# takes well under one, and the learner's choice, folds and jackknife call
# it thousands of times.
multinomial_probs <- function(fit, x) {
  links <- lapply(seq_along(fit$beta), function(k) {
    x %*% as.matrix(fit$beta[[k]]) + rep(fit$a0[k, ], each = nrow(x))
  })
  top <- do.call(pmax, links)
  odds <- lapply(links, function(link) exp(link - top))
  total <- Reduce(`+`, odds)
  aperm(array(unlist(lapply(odds, `/`, total)), c(nrow(x), length(fit$lambda), length(odds))), c(1, 3, 2))
}

# glmnet warns of "dangerous ground" below 8 rows of a label, and of a penalty
# it could not reach: the cross-validated choice, not the warning, decides
# whether a fit is trusted. A fit that reached no penalty has no lambda.
# glmnet scales the `weights` (NULL: equal) to sum to one, so that the penalty
# means the same whatever their scale.
quietly_glmnet <- function(x, y, weights = NULL) {
  tryCatch(
    withCallingHandlers(
      glmnet::glmnet(x, y, family = "multinomial", alpha = 0, lambda = learner_penalties, weights = weights),
      warning = function(w) invokeRestart("muffleWarning")
    ),
    error = function(e) list(lambda = numeric())
  )
}

# Each example order's labels alone, as they are: candidates with nothing to
# fit (`fitted = FALSE`: the fitted candidates must beat them), so their
# held-out accuracy carries no fitting noise. Where a confidently wrong order
# drags the orders' average far below the other order, a few dozen coded rows
# show it, while the refit's order weights, fitted on the same few rows, are
# too noisy to find it.
orders_family <- function(log_probs) {
  settings <- data.frame(model = sprintf("example order %d alone, as it is", seq_along(log_probs)),
                         penalty = NA_real_, stringsAsFactors = FALSE)
  list(settings = settings, fitted = FALSE, predict = function(train, y, at, which = seq_len(nrow(settings)),
                                                              weights = NULL) {
    lapply(which, function(i) exp(log_probs[[i]][at, , drop = FALSE]))
  })
}

# The learner's feature matrix: the model's hidden states, a matrix given, and
# the covariates' columns; NULL for none. Of the hidden states, the attribute
# `sets` holds the feature sets to choose among (feature_sets(), each with the
# covariates), whose families learner_families() makes.
learner_features <- function(data, features, covariates, call) {
  x <- if (isFALSE(features)) {
    NULL
  } else if (is.matrix(features) && is.numeric(features) && nrow(features) == nrow(data)) {
    structure(features, source = "a matrix given")
  } else if (isTRUE(features) || is.character(features) || is.list(features)) {
    # kinds no data can keep are refused before the data are read
    if (!isTRUE(features)) check_feature_sets(features, feature_kinds, call)
    states <- row_features(data, call)
    sets <- feature_sets(states, features, call)
    structure(states, source = paste(unlist(attr(states, "source")), collapse = ", "), sets = sets)
  } else {
    abort_invalid("{.arg features} must be TRUE, FALSE, sets of the kinds of features the data keep, or a numeric
                  matrix with a row per row of {.arg data}.", "features", call)
  }
  # the type first: a list or a function has a length too
  if (!is.null(covariates) && !is.character(covariates)) {
    abort_invalid("{.arg covariates} must be the names of columns of {.arg data}.", "covariates", call)
  }
  if (length(covariates) > 0) {
    if (anyNA(covariates) || !all(covariates %in% names(data))) {
      abort_invalid("{.arg covariates} must name columns of {.arg data}.", "covariates", call,
                    subclass = "missing_column")
    }
    columns <- stats::model.matrix(~ ., data[covariates], na.action = stats::na.pass)[, -1, drop = FALSE]
    named <- paste("covariates", paste(covariates, collapse = ", "))
    # every feature set goes with the covariates
    sets <- lapply(attr(x, "sets"), function(set) {
      structure(c(set, ncol(x) + seq_len(ncol(columns))), source = paste(attr(set, "source"), named, sep = "; "))
    })
    x <- structure(cbind(x, columns), source = paste(c(attr(x, "source"), named), collapse = "; "),
                   sets = if (length(sets) > 0) sets)
  }
  answered <- !is.na(data$.label)
  if (!is.null(x) && anyNA(x[answered, ])) {
    abort_invalid("Every labelled row needs its features and covariates: some are missing.", "features", call)
  }
  x
}
