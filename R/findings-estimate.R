# The estimate behind label_regression() and label_shares(): the formula's
# model matrix on the rows' predictions and on the coded rows' codes, the
# outcome's cross-fitted predictions, and the three fits.

# The corrected, naive and coded-only fits of `terms` on one outcome, for the
# domain of the rows of `data` that have a prediction and every covariate:
# the prediction part sums over the domain's rows, the coded part over the
# coded rows in it, and coded rows outside it count in their strata as zeros,
# so the estimate is consistent for the domain whatever its size. `covariates`: the
# specs of the labelled covariates (variable_spec()), each in the model as its
# probability on every row, its code on coded rows and its label in the naive
# fit; `design$truth` then lists the codes by variable. `design`: the coded
# rows' design and codes (checked_coded_rows()).
estimate_design_based <- function(spec, terms, data, design, family, prediction, folds, seed, call, lambda = NULL,
                                  target = "population", covariates = list()) {
  codes <- if (is.list(design$truth)) design$truth else stats::setNames(list(design$truth), spec$name)
  versions <- covariate_versions(data, covariates, design$rows, codes, call)
  frame <- stats::model.frame(terms, versions$predicted, na.action = stats::na.pass)
  x_all <- with_enum_probabilities(stats::model.matrix(terms, frame), covariates, call)
  matrix_of <- function(version) {
    stats::model.matrix(terms, stats::model.frame(terms, version, na.action = stats::na.pass,
                                                  xlev = stats::.getXlevels(terms, frame)))
  }
  # the estimate's domain: rows with a label, a prediction and every covariate
  in_domain <- stats::complete.cases(x_all) & !is.na(spec$prediction) & !is.na(spec$label)
  usable <- which(in_domain)
  inside <- in_domain[design$rows]
  check_domain_drawn(data, in_domain, inside, call)
  binary <- family == "binomial"
  y <- if (spec$kind == "observed") spec$label[design$rows] else variable_truth(spec, codes[[spec$name]], call)
  y <- split_truth(y, spec, design, call)[inside]
  for (covariate in covariates) split_truth(NULL, covariate, design, call, covariate = TRUE)
  # a text whose codes were split counts its share of the label, between 0 and 1
  if (binary && !all(y %in% c(0, 1) | (design$rows[inside] %in% design$split$rows & y > 0 & y < 1))) {
    abort_newrllama4("coded_truth", "{.arg family} {.val binomial} needs codes of 0 or 1 (or a label).", call = call)
  }
  x <- x_all[usable, , drop = FALSE]
  x_coded <- matrix_of(versions$coded)[inside, , drop = FALSE]
  n_coefficients <- ncol(x)
  if (sum(inside) < 2 * n_coefficients + 2) {
    abort_newrllama4("too_few_coded", c(
      "{sum(inside)} coded row{?s} in the estimate's domain are too few for {n_coefficients} coefficient{?s}.",
      "i" = "Code at least {2 * n_coefficients + 2} rows (more for intervals worth having: see {.fn coded_rows_needed})."),
      call = call)
  }
  levels <- factor_levels(x_all, terms, frame)
  coded_clusters <- if (!is.null(design$cluster)) data[[design$cluster]][design$rows[inside]]
  check_coded_columns(x, x_coded, levels, call, coded_clusters)
  if (length(usable) < nrow(data)) {
    inform_newrllama4("rows_left_out", c(
      "{nrow(data) - length(usable)} row{?s} without a label, prediction or covariate {?is/are} outside the
       estimate's domain: it is for the {length(usable)} rows that have them.",
      "i" = if (any(!inside)) "{sum(!inside)} coded row{?s} among them count{?s/} as drawn, adding nothing."))
  }
  # positions among the domain's rows; coded rows outside it stay in their
  # strata's variance, adding nothing (a domain estimator)
  cluster <- design$cluster
  clusters <- if (!is.null(cluster)) data[[cluster]][usable]
  local <- list(rows = match(design$rows[inside], usable), prob = design$prob[inside],
                truth_labels = as.character(codes[[spec$name]])[inside], stratum = design$variance_stratum[inside],
                unit = design$unit[inside], unit_prob = design$unit_prob[inside], clusters = clusters)
  if (!is.null(design$round)) {
    local[c("round", "round_prob", "round_weight")] <- lapply(design[c("round", "round_prob", "round_weight")],
                                                              `[`, inside)
  }
  if (any(!inside)) {
    local$outside <- list(prob = design$prob[!inside], stratum = design$variance_stratum[!inside],
                          unit = design$unit[!inside], unit_prob = design$unit_prob[!inside],
                          round_prob = design$round_prob[!inside])
  }
  local$cluster <- clusters[local$rows]
  local$levels <- levels
  local$answer <- spec$kind == "answer"
  if (!is.null(design$split)) {
    # split texts by their positions too: a learner learns from each code (coded_entries())
    at <- match(design$split$rows, usable)
    local$split <- list(rows = at[!is.na(at)],
                        values = lapply(design$split$values, function(v) v[!is.na(at), , drop = FALSE]))
  }
  local_spec <- spec
  local_spec$prediction <- spec$prediction[usable]
  local_spec$label <- spec$label[usable]
  # folds of whole sampling units (sample-folds.R), the learner's where they are
  units <- clusters %||% seq_along(usable)
  local$units <- units[local$rows]
  learner <- if (learner_in_folds(data, design)) attr(data, "learner", exact = TRUE)
  kept <- if (!is.null(learner)) learner$folds[match(usable[local$rows], learner$coded_rows)]
  fold <- cross_fit_folds(units, local$rows, folds, seed, kept, call, rounds = local$round)
  covariate_columns <- x[, colnames(x) != "(Intercept)", drop = FALSE]
  refitted <- if (spec$kind == "label") refitted_on_folds(local_spec, subset_rows(data, usable), !is.null(learner))
  predicted <- cross_fitted_predictions(local_spec, covariate_columns, local, y, fold, prediction, binary, refitted)
  dependence <- if (!is.null(refitted)) function(lambda, v) {
    refit <- function(replicate, y, read) {
      cross_fitted_predictions(local_spec, covariate_columns, replicate, y, fold, prediction, binary, refitted,
                               predicted$choices, read)$g
    }
    learner_dependence(list(predicted = x, coded = x_coded), y, predicted$g, local, binary, lambda, v, refit, seed)
  }
  x_naive <- matrix_of(versions$naive)[usable, , drop = FALSE]
  reach <- covariate_reach(x, local, y, target, binary, call)
  check_cluster_sizes(x, local, target, cluster, call)
  if (local$answer) warn_answer_reach(local_spec$prediction, local, target, spec$name)
  # beyond the coded rows' reach, no tuning toward the labels: the coded rows alone
  if (length(reach$covariates) > 0 && is.null(lambda)) lambda <- 0
  estimate <- three_estimates(list(predicted = x, coded = x_coded, naive = x_naive), local_spec, local, y, predicted$g,
                              binary, call, lambda, target, dependence)
  if (length(reach$covariates) > 0) estimate$lambda_rule <- "coded rows alone: a covariate beyond their reach or with a long tail"
  c(estimate, list(leverage = reach,
    rows = usable, coded_rows = design$rows[inside], coded_outside = sum(!inside), data_rows = nrow(data), sample_prob = design$prob,
    folds = fold,
    prediction_model = predicted$model, prediction = prediction, outcome = spec$name, outcome_kind = spec$kind,
    labelled_covariates = names(covariates), cluster = cluster, predictions = predicted$g,
    design = design_summary(design), learner = learner_summary(data, !is.null(learner)),
    manifest = findings_manifest(data, spec$name, design, fold[local$rows], length(unique(fold)), predicted$model,
                                 c(estimate, list(cluster = cluster, labelled_covariates = names(covariates),
                                                   domain_rows = length(usable))))
  ))
}

# Rows outside the domain must be so whether or not they were coded: a
# covariate filled in for the coded rows alone leaves far fewer coded rows
# outside it than the draw gives (a one-sided binomial test at 1e-6, which a
# design with unequal probabilities does not reach by chance), and the coded
# rows then stand for rows that are not in the domain.
check_domain_drawn <- function(data, in_domain, inside, call) {
  drawable <- if (".label" %in% names(data)) !is.na(data$.label) else rep(TRUE, nrow(data))
  share <- mean(!in_domain[drawable])
  if (share == 0 || stats::pbinom(sum(!inside), length(inside), share) >= 1e-6) return(invisible())
  abort_newrllama4("coded_rows", c(
    "{sum(!inside)} of {length(inside)} coded rows lack a label, prediction or covariate, against
     {round(100 * share)}% of the rows: the coded rows were completed where the others were not.",
    "i" = "Fill in the missing values for every row, or leave them missing on the coded rows as on the others."),
    call = call)
}

# `data` three ways: each labelled covariate as its probability (every row),
# as its code (the coded rows, in their order) and as the model's label.
covariate_versions <- function(data, covariates, rows, codes, call) {
  predicted <- naive <- data
  coded <- data[rows, , drop = FALSE]
  for (spec in covariates) {
    # an enum field's levels get their probabilities in the model matrix
    if (spec$kind != "enum") predicted[[spec$name]] <- spec$prediction
    naive[[spec$name]] <- spec$label
    coded[[spec$name]] <- variable_truth(spec, codes[[spec$name]], call)
  }
  list(predicted = predicted, coded = coded, naive = naive)
}

# The rows `rows` of `data`, with the refit's record of each order's
# probabilities cut to them.
subset_rows <- function(data, rows) {
  record <- attr(data, "order_probs", exact = TRUE)
  out <- data[rows, , drop = FALSE]
  attr(out, "manifest") <- attr(data, "manifest", exact = TRUE)
  if (!is.null(record)) {
    attr(out, "order_probs") <- order_probs_record(lapply(record$probs, function(p) p[rows, , drop = FALSE]), out)
  }
  learner <- attr(data, "learner", exact = TRUE)
  if (!is.null(learner)) attr(out, "learner") <- learner_rows(learner, rows)
  out
}

# data's manifest (a new one for labels made elsewhere) with the estimate's
# design: where it was read from, the sampling unit, the strata's rows, draws
# and coded rows, the coded rows, their probabilities, the folds, the prediction
# model, lambda, the target, the labelled covariates and the clusters.
findings_manifest <- function(data, outcome, design, coded_folds, n_folds, model, estimate) {
  record <- manifest_of(data)
  record$estimation <- list(
    estimator = paste("design-based (DSL with PPI++'s power tuning): lambda * prediction + R / pi * (truth - lambda *",
                      "prediction), variance of the stratified sample"),
    lambda = estimate$lambda,
    target = estimate$target,
    labelled_covariates = paste(estimate$labelled_covariates, collapse = ", "),
    cluster = estimate$cluster %||% "none",
    domain_rows = estimate$domain_rows,
    outcome = outcome,
    design_read_from = design$read_from,
    sampling_unit = if (design$sampling_unit == ".row") "rows drawn one by one" else
      paste("clusters of", design$sampling_unit, "drawn whole"),
    strata = design_strata_line(design$strata),
    strata_collapsed_for_variance = paste(design$collapsed_strata, collapse = ", ") %|% "none",
    coded_rows = length(design$rows),
    coded_row_numbers = paste(design$rows, collapse = " "),
    sample_probs = paste(unique(signif(sort(design$prob), 4)), collapse = ", "),
    folds = n_folds,
    fold_of_coded_rows = paste(coded_folds, collapse = " "),
    prediction_model = model
  )
  record
}

# Each stratum's coded, drawn and labelled rows, as the manifest records them.
design_strata_line <- function(strata) {
  paste(sprintf("%s: %d coded of %d drawn of %d rows", strata$name, as.integer(strata$coded), as.integer(strata$drawn),
                as.integer(strata$rows)), collapse = "; ")
}


# The model matrix on the predictions, each enum field's level indicators
# replaced by the level's probability; a field only as a main effect, since an
# interaction's columns would keep the model's labels.
with_enum_probabilities <- function(x, covariates, call) {
  for (spec in Filter(function(spec) spec$kind == "enum", covariates)) {
    columns <- paste0(spec$name, spec$labels)
    if (any(grepl(":", colnames(x), fixed = TRUE) & grepl(spec$name, colnames(x), fixed = TRUE))) {
      abort_invalid("The enum field {.field {spec$name}} can be a covariate only as a main effect, not in an
                     interaction.", "formula", call)
    }
    present <- intersect(columns, colnames(x))
    x[, present] <- spec$prediction[, substring(present, nchar(spec$name) + 1)]
  }
  x
}
