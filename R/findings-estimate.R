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

# The largest leverage a row of the domain would have on the coded rows' fit,
# covariate by covariate (each continuous column of `x`, from the coded rows'
# mean and spread weighted by 1 / pi): (1 + z^2) / n, z the row's distance
# from their mean in their standard deviations. Above leverage_limit the coded
# rows miss a tail that the corpus has (a skewed covariate: a lognormal one on
# 60 coded rows reached 2.8 and covered 0.785; a normal one reaches about
# 0.3): the corrected estimate then moves with the labels where no code checks
# them. Returns the covariates beyond reach or with a long tail, every
# covariate's leverage and skewness over the domain, and the coded rows that
# would bring the leverage to the limit or meet Cochran's rule; warns or stops.
#
# The leverage fades as coded rows are added, the tail does not: a
# standardised lognormal covariate, 400 uniform coded rows of 2,000, the
# population's slope covered 0.922 over 500 draws with lambda tuned (leverage
# above 1 in 15%), and where "yes" is rare too (the coverage matrix's thin
# world) 0.848, at 150 rows 0.717. The coded rows' own third moment is small
# in just the draws that miss (0.80 coverage in the quarter whose coded
# skewness is lowest), so the check reads the covariate over every row of the
# domain: where its skewness G1 exceeds skew_limit it has a long tail, the
# estimate is the coded rows' alone and a warning names it with Cochran's
# (1977) n > 25 G1^2 rows for a mean of so skewed a variable. Where the coded
# rows' rarer code (a 0/1 outcome) is under a tenth of them, no interval built
# here covers (the coded rows alone 0.733 and 0.870 with about 4 and 10 of it
# at 150 and 400 rows) and the estimate stops with a classed error. A count
# of 20 of the rarer code let through the draws of 400 rows that hold 20-39
# (3% of them), and those covered 0.883 over 111 draws (3,500 seeds), their
# misses all but one above: a draw rich in the rarer code by chance is the
# draw whose slope is steep by chance. 60 rows of a balanced code hold more
# than a tenth of either in every draw, and their small df cover. Measured
# over 300 draws (tools/bench_findings_validity.R, bench_coverage_matrix.R):
# the lognormal slope at 400 rows 0.940 (0.923 tuned on the same seeds), at
# 150 0.937, at 60 0.960 (population and corpus);
# the thin world stops in 97% of draws at 400 rows, all at 150. Over 300
# corpora of 2,000 rows a normal, uniform, gamma(4) or log-lognormal covariate
# never fired at 60-1,000 coded rows (binary and factor ones are not
# continuous), an exponential one in 1%. The corpus's slope reads the
# skewness of the rows not drawn whole, and stops on a long tail there: uniform
# rows of 2,000 covered 0.93 at 150 rows, 0.897 at 400 and 0.85 at 1,000 with
# the coded rows alone (300 draws each); a draw that takes the tail whole
# (review_sample(tail =)) 0.960, 0.967, 0.953 and 0.937 at 60, 150, 400 and
# 1,000 rows (the coded rows alone still). The population's slope rests on every
# row (all 2,000 coded, the sandwich covered 0.86-0.88), whatever the draw: it
# covers through the small-sample df up to small_sample_df_rows coded rows, and
# a straight line through a 0/1 code up to skewed_code_rows (simulated
# labels 0.934 at 100 rows, 0.922-0.926 at 150-400, and the coverage matrix's
# speakers' rows 0.908 at 100 and 0.890-0.920 at 150-400, 500 draws each),
# and stops past them (0.86 at 1,000), every miss above. `y`: the coded
# rows' codes.
covariate_reach <- function(x, sample, y, target, binary, call) {
  continuous <- colnames(x)[apply(x, 2, function(column) length(unique(column)) > 2)]
  w <- 1 / sample$prob
  n <- length(sample$rows)
  # the corpus's slope: rows drawn whole (review_sample(tail =)) are known, the
  # rest is what the draw can miss; the population's rests on every row's
  # (a round's rows by their round's probability: their combined one is a weight)
  whole <- sample$rows[(sample$round_prob %||% sample$prob) >= 1 - 1e-9]
  sampled <- if (target == "corpus") setdiff(seq_len(nrow(x)), whole) else seq_len(nrow(x))
  leverage <- vapply(continuous, function(column) {
    coded <- x[sample$rows, column]
    centre <- sum(w * coded) / sum(w)
    spread <- sum(w * (coded - centre)^2) / sum(w)
    (1 + max((x[sampled, column] - centre)^2) / spread) / n
  }, 0)
  skewness_over <- function(rows) vapply(continuous, function(column) {
    values <- x[rows, column]
    # an interaction with a factor is zero off its level, whose rows carry its slope: their tail is its tail (x by
    # a group of 5%, normal there, read with the zeros reached |G1| > 2.5 in 6% of corpora of 3,000 rows)
    if (grepl(":", column, fixed = TRUE) && any(values != 0)) values <- values[values != 0]
    centred <- values - mean(values)
    if (length(centred) < 3 || mean(centred^2) == 0) 0 else mean(centred^3) / mean(centred^2)^1.5
  }, 0)
  skewness <- skewness_over(sampled)
  # a tail drawn whole still keeps the labels out (lambda 0): tuned there, the
  # corpus's slope at 150 rows covered 0.910, the coded rows alone 0.940
  corpus_tail <- continuous[abs(skewness_over(seq_len(nrow(x)))) > skew_limit]
  beyond <- continuous[leverage > leverage_limit]
  needed <- ceiling(n * max(leverage, 0) / leverage_limit)
  long_tail <- continuous[abs(skewness) > skew_limit]
  tail_rows <- if (length(long_tail) > 0) ceiling(25 * max(skewness[long_tail]^2))
  corpus_rows <- format(nrow(x), big.mark = ",")
  rarer <- if (all(y >= 0 & y <= 1, na.rm = TRUE)) min(sum(y, na.rm = TRUE), sum(1 - y, na.rm = TRUE)) else Inf
  # a straight line through codes of 0 and 1 bends in the tail; past these rows nothing here widens its interval
  straight_code <- is.finite(rarer) && !binary
  population_rows <- if (straight_code) skewed_code_rows else small_sample_df_rows
  covered_past <- if (straight_code) "0.91 at 100 coded rows, a straight line through codes of 0 and 1" else
    "0.86 at 1,000 rows of 2,000"
  # coding more rows is then no way out of a long tail: the warnings below say what is
  straight_tail <- straight_code && length(long_tail) > 0
  if (length(long_tail) > 0 && rarer < n / 10) {
    abort_newrllama4("skewed_covariate", c(
      "{.field {long_tail}} {cli::qty(length(long_tail))}{?has a/have} long tail{?s} (skewness
       {format(skewness[long_tail], digits = 2)} over the {corpus_rows} rows) and the {n} coded rows hold only
       {round(rarer, 1)} of their rarer code (under a tenth): the slope rests on a few rows far out that no interval
       here reaches (such data covered 0.73-0.88 in simulations).",
      "i" = "Transform {.field {long_tail}} (its log, or ranks) so that its tail is not so long: more coded rows drawn
             alike keep the rarer code as rare (Cochran's rule alone asks {tail_rows} rows for so skewed a covariate)."),
      call = call)
  }
  if (length(long_tail) > 0 && (target == "corpus" || n > population_rows)) {
    abort_newrllama4("skewed_covariate", c(
      if (target == "corpus") "{.field {long_tail}} {cli::qty(length(long_tail))}{?has a/have} long tail{?s} among
        the rows not drawn whole (skewness {format(skewness[long_tail], digits = 2)}): the few rows far out that carry
        the corpus's slope are missed by most draws, and the interval with them (a lognormal covariate, uniform
        rows of 2,000: 0.93 at 150 rows, 0.90 at 400, 0.85 at 1,000)." else "{.field {long_tail}}
        {cli::qty(length(long_tail))}{?has a/have} long tail{?s} (skewness {format(skewness[long_tail], digits = 2)}
        over the {corpus_rows} rows): past {population_rows} coded rows nothing widens the interval for the few
        rows far out that carry the slope (such data covered {covered_past}).",
      "i" = if (target == "corpus" && !is.null(sample$cluster)) "Clusters drawn whole cannot take the tail whole:
        estimate the population's ({.code target = \"population\"}, up to {population_rows} coded rows)," else
        if (target == "corpus") "Draw the tail whole: {.code review_sample(data, n, tail = {long_tail[[1]]})}
                                     takes its rows farthest out with certainty (there: 0.94 at 1,000 rows)," else
        "The population's slope rests on the corpus's own tail (every row coded: 0.86-0.88): estimate the corpus's
         ({.code target = \"corpus\"}) with the tail drawn whole ({.code review_sample(tail = )}),",
      "i" = "or transform {.field {long_tail}} (its log, or ranks) so that its tail is not so long."), call = call)
  }
  if (length(beyond) > 0) {
    warn_newrllama4("leverage", c(
      "The coded rows do not reach the range of {.field {beyond}}: some rows lie so far out that a row there would
       have a leverage of {format(max(leverage[beyond]), digits = 2)} on the coded rows' fit.",
      "i" = "The corrected estimate is the coded rows' alone (lambda 0): the labels are not trusted where no code
             checks them, and even this interval can be too narrow.",
      "i" = if (straight_tail) "Fit a logistic slope ({.code family = \"binomial\"}) or transform {.field {beyond}} (its
             log, or ranks): past {population_rows} coded rows this straight line through codes of 0 and 1 stops."
      else "Code about {needed - n} more rows (drawing more from the tail), or transform {.field {beyond}} (its
             log, or ranks) so that its tail is not so long."))
  }
  tail_only <- setdiff(long_tail, beyond)
  if (length(tail_only) > 0) {
    warn_newrllama4("skewed_covariate", c(
      "{.field {tail_only}} {cli::qty(length(tail_only))}{?has a/have} long tail{?s} (skewness
       {format(skewness[tail_only], digits = 2)} over the {corpus_rows} rows): a few rows far out carry
       {cli::qty(length(tail_only))}{?its/their} slope, and the coded rows can miss them.",
      "i" = "The corrected estimate is the coded rows' alone (lambda 0); its interval can still be too narrow.",
      "i" = if (straight_tail) "Past {population_rows} coded rows this straight line through codes of 0 and 1 stops: fit
                                  a logistic slope ({.code family = \"binomial\"})," else
        if (n < tail_rows) "Code about {tail_rows - n} more rows (Cochran's rule asks {tail_rows}), drawing more
                            from the tail," else "Code more rows from the tail,",
      "i" = "or transform {.field {tail_only}} (its log, or ranks) so that its tail is not so long."))
  }
  list(covariates = union(union(beyond, long_tail), corpus_tail), leverage = leverage, skewness = skewness,
       rows_needed = if (length(beyond) > 0 || length(long_tail) > 0) max(needed * (length(beyond) > 0), tail_rows),
       rows_limit = if (length(long_tail) > 0) population_rows)
}
leverage_limit <- 1
# The most coded rows at which the population's slope of a straight line
# through codes of 0 and 1 (a linear probability model) on a covariate with a
# long tail estimates: their small-sample df widen its interval enough up to
# here (a lognormal covariate: 0.934-0.958 at 40 and 60 coded rows, uniform,
# clusters and rounds by doubt), not past it (0.908 at 100 uniform rows,
# 0.922 at 150 in two rounds by doubt; 0.86 with every row of 2,000 coded):
# the line is fitted to a probability that bends most where the few rows far
# out are, and the corpus's own tail moves its slope. A logistic slope is not
# held to it.
skewed_code_rows <- 60L
# An exponential covariate's skewness (2) is under 2.5 over 2,000 rows in 99% of
# corpora, a lognormal's (6.2) above 2.7 in all; gamma(4) (1) never reaches 1.3.
skew_limit <- 2.5

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
