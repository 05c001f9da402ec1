# One record of an estimate of label_regression() or label_shares(), which
# print(), summary(), tidy(), glance() and the manifest all read: per term and
# estimator the estimate, its standard error, degrees of freedom and interval,
# the effective number of coded rows and the design effect, the variance split
# into its corpus part and its sampling part, and lambda; then the design, the
# interval methods, and the learner behind learned labels. A quantity added
# here appears everywhere.

# The record of `estimate` (an estimate_design_based() value, such as a
# label_regression() fit) at confidence `level`.
findings_record <- function(estimate, level = 0.95) {
  list(estimates = do.call(rbind, lapply(estimators, estimate_table, object = estimate, level = level)),
       level = level, target = estimate$target, rows = length(estimate$rows), data_rows = estimate$data_rows,
       coded = length(estimate$coded_rows), design = estimate$design, learner = estimate$learner,
       naive = naive_name(estimate$learner), prediction_model = estimate$prediction_model,
       lambda_tuned = estimate$lambda_tuned,
       small_sample = isTRUE(estimate$parts$corrected$small_sample), df = min(estimate$df$corrected),
       design_df = estimate$design_df, interval = "t",
       lambda_rule = estimate$lambda_rule, variance_pooled = estimate$variance_pooled %||% character(),
       variance_floored = isTRUE(estimate$variance_floored),
       variance_levels = estimate$variance_levels %||% character(),
       variance_levels_rule = estimate$variance_levels_rule %||% character(),
       beyond_reach = estimate$leverage$covariates %||% character(),
       learner_dependence = estimate$parts$corrected$learner[c("groups", "share")])
}

estimators <- c("corrected", "naive", "coded_only")

# One estimator's terms. The variance of the corrected and coded-only
# estimates is the corpus part (how the corpus differs from the population it
# was drawn from: none for the corpus target) plus the sampling part (which
# rows were coded). `effective_n` is the number of rows a simple random sample
# of codes alone would need for the same variance, the rows of the domain
# times the variance of coding all of them over this one; `design_effect` the
# coded rows over it (Kish's): above 1 the design costs more than the
# predictions give, below 1 the reverse. The naive fit (labels as if true)
# has neither.
estimate_table <- function(object, estimator, level = 0.95) {
  beta <- object$fits[[estimator]]$coefficients
  se <- sqrt(diag(object$vcov[[estimator]]))
  df <- object$df[[estimator]] %||% Inf
  interval <- skewed_interval(beta, se, df, object$skewness[[estimator]] %||% 0, level)
  parts <- object$parts[[estimator]]
  part <- function(value) if (is.null(parts)) rep(NA_real_, length(beta)) else unname(value)
  sampling <- part(if (!is.null(parts)) diag(design_vcov(parts, "corpus")))
  population <- part(if (!is.null(parts)) diag(parts$population))
  effective <- length(object$rows) * population / se^2
  lambda <- switch(estimator, corrected = unname(object$lambda), coded_only = 0, NA_real_)
  data.frame(term = names(beta), estimator = estimator, estimate = unname(beta), std.error = unname(se),
             statistic = unname(beta / se), p.value = unname(interval$p.value),
             conf.low = unname(interval$conf.low), conf.high = unname(interval$conf.high), df = df,
             skewness = unname(object$skewness[[estimator]] %||% rep(0, length(beta))),
             effective_n = effective, design_effect = length(object$coded_rows) / effective,
             var_corpus = if (object$target == "population") population else part(0 * population),
             var_sampling = sampling, lambda = lambda, stringsAsFactors = FALSE, row.names = NULL)
}

# The design the estimate used (checked_coded_rows()'s), as the record keeps
# it: where it was read from, the sampling unit and clusters, the strata and
# the fewest coded rows of one, those collapsed for the variance, the drawn
# rows lost (nonresponse), the texts whose coders' codes were split and the
# weights' range.
design_summary <- function(design) {
  strata <- design$strata
  weights <- range(1 / design$prob)
  drawn <- if (!is.null(strata$drawn)) sum(strata$drawn) else length(design$rows)
  list(read_from = design$read_from, sampling_unit = design$sampling_unit,
       clusters_drawn = if (!is.null(design$unit)) length(unique(design$unit)),
       clusters = design$clusters, cluster = design$cluster,
       strata = if (!is.null(strata)) nrow(strata) else 1L,
       fewest_coded = min(tapply(design$unit %||% design$rows, design$stratum %||% format(design$prob, digits = 15),
                                 function(units) length(unique(units)))),
       collapsed = design$collapsed_strata %||% character(),
       drawn = drawn, lost = drawn - length(design$rows), split = sum(design$rows %in% design$split$rows),
       weights = weights,
       equal_weights = diff(weights) <= 1e-9 * weights[[2]])
}

# The learner behind labels fitted to coded rows, from data's manifest: the
# verb, its model, the cross-validated accuracy and whether its guard let the
# learned labels through (`kept`; FALSE where it kept the labels as
# annotated) and whether the estimators fit it in their folds (`in_folds`:
# learner_in_folds()). NULL for labels no learner saw.
learner_summary <- function(data, in_folds) {
  prompt <- attr(data, "manifest", exact = TRUE)$prompt
  verb <- if (!is.null(prompt$learner)) "learn_labels()" else if (!is.null(prompt$refit_model)) "recalibrate_labels()"
  if (is.null(verb)) return(NULL)
  model <- if (verb == "learn_labels()") prompt$learner else prompt$refit_model
  list(verb = verb, model = model, features = prompt$features %||% "none",
       accuracy = prompt$cross_validated_accuracy %||% NA_real_,
       kept = !is.null(learned_calibration(data)), in_folds = in_folds)
}

# The naive estimate's labels, named for what they are.
naive_name <- function(learner) {
  if (is.null(learner) || !learner$kept) return("the model's labels")
  if (learner$verb == "learn_labels()") "the learned labels" else "the refitted labels"
}

# The record's entries in the manifest's estimation section: each corrected
# term's figures, the design and the methods, and the learner.
record_manifest <- function(manifest, record) {
  corrected <- record$estimates[record$estimates$estimator == "corrected", , drop = FALSE]
  figures <- sprintf("estimate %.4g, std.error %.4g, df %s, effective n %.4g, design effect %.3g, variance %.4g
                     (corpus %.4g, sampling %.4g), lambda %.3f", corrected$estimate, corrected$std.error,
                     format(round(corrected$df, 1)), corrected$effective_n, corrected$design_effect,
                     corrected$std.error^2, corrected$var_corpus, corrected$var_sampling, corrected$lambda)
  figures <- gsub("\\s+", " ", figures)
  entries <- stats::setNames(as.list(figures), paste0("corrected (", corrected$term, ")"))
  manifest$estimation <- c(manifest$estimation, entries, list(
    naive = paste(record$naive, "as if true"),
    weights = weights_words(record$design),
    fewest_coded_rows_in_a_stratum = record$design$fewest_coded,
    lost_rows = lost_words(record$design),
    variance_method = variance_words(record),
    interval_method = interval_words(record),
    learner = learner_words(record$learner) %||% "none"
  ))
  manifest
}
