#' A regression on model labels, corrected with a sample coded by hand
#'
#' Regresses a label (its indicator) or a numeric answer on covariates for
#' every row of an annotation, with the model's errors corrected by a sample of
#' rows that people coded, so that the estimate and its confidence interval are
#' valid for the regression of the true codes. A regression on the labels as if
#' they were true (`lm(.label == "x" ~ ...)`) inherits the model's errors: where
#' they follow a covariate its slope is biased, and its interval, narrow from
#' the many rows, misses the truth.
#'
#' The correction is the doubly robust estimator of design-based supervised
#' learning (DSL; Egami et al. 2023): each row's outcome is its prediction
#' \eqn{g} (the label's `.prob_` column, or the answer), plus, for a coded
#' row, the prediction's error over its inclusion probability,
#' \eqn{\tilde y = g + (y - g) / \pi}{y~ = g + (y - g) / pi}. Its expectation
#' is the truth's, so the regression of \eqn{\tilde y}{y~} on the covariates
#' (least squares, or the logistic regression's estimating equation) estimates
#' the regression of the truth, with a sandwich variance (the `sandwich`
#' package). How good the model is only changes the width: the better its
#' predictions, the narrower the interval, down to that of coding every row.
#'
#' A labelled variable may also be a covariate: a label of the annotation (its
#' indicator), a boolean field (logical, with `.prob_<field>_true`) or an enum
#' field (a factor, with `.prob_<field>_<value>`: each level's indicator
#' predicted by its probability) on the
#' right of the formula, such as `applause ~ populist + log(words)` where
#' `applause` is observed for every row and `populist` is a label. The
#' correction is then DSL's general doubly robust moment (Egami et al. 2023,
#' predicted covariates): each row's estimating function is computed on its
#' predictions (a labelled covariate's probability), plus, for a coded row,
#' \eqn{1/\pi}{1/pi} times the difference between the estimating function on
#' its codes and on its predictions (weighted by \eqn{\lambda}{lambda}, below).
#' The naive fit puts the model's labels in their place. Several labelled
#' variables, of one annotation or of two joined by the user, go in one model,
#' each with its own codes (`truth`). A numeric outcome beside labelled
#' covariates is taken as observed, unless `truth` names its codes.
#'
#' Validity rests only on the known inclusion probabilities of the coded rows,
#' never on how good the predictions are: those change the width alone.
#'
#' Rows without a label, a prediction or a covariate are outside the
#' estimate's domain, coded or not: the estimate is for the rows that have
#' them (a domain estimate: the coded rows outside the domain count in their
#' strata as drawn, adding nothing, so the domain's size is estimated as the
#' design estimates everything else), and print says how many rows it has. A
#' covariate filled in for the coded rows alone would make them stand for rows
#' outside the domain: that is a classed error. Labels and fields learned by
#' [learn_labels()] saw the codes, so they cannot be covariates.
#'
#' This needs the coded rows to be a probability sample of `data` with known
#' inclusion probabilities: draw them with [review_sample()] (either weight)
#' and keep its columns when the codes come back. The design is read from
#' them (`.row`, `.stratum`, `.stratum_rows`, `.stratum_drawn`,
#' `.sample_prob`, `.sampling_unit`), so it survives [read_codes()], CSV and
#' spreadsheet files, `dplyr` and `[`. Drawn rows that did not come back (a
#' missing code, or a row deleted) are found there too: each stratum's coded
#' rows are reweighted to stand for its rows, with a warning
#' (`newrllama4_warning_nonresponse`), and a stratum with none is an error.
#' In a sample of whole clusters, each cluster's coded rows stand for its
#' rows, and the clusters with a coded row for the clusters drawn.
#' Coded rows without these columns (a sample drawn elsewhere) need
#' `.sample_prob`; their design is then assumed (rows drawn one by one, the
#' strata of `.stratum` or of equal probabilities, none lost) and a message
#' (`newrllama4_message_design_assumed`) says so. The manifest records the
#' design the estimate used.
#'
#' A stratum with one coded row has no spread of its own to estimate its
#' variance from, and confidence-weighted samples make such strata common for
#' rare labels. For the variance, each is collapsed with the adjacent
#' confidence band of its label (the one whose inclusion probability is
#' closer), the two taken as one stratum, each row still weighted by its own
#' probability: the collapsed-strata estimator, which can only overstate the
#' variance where the two bands differ. A message
#' (`newrllama4_message_strata_collapsed`) names them, and the manifest
#' records them. A stratum with no band to join (its label's only one, or a
#' single cluster drawn) keeps its one row, taken uncentred, with a warning
#' (`newrllama4_warning_single_coded_unit`): code more of it.
#'
#' With `prediction = "fit"`, each row's prediction comes from a regression of
#' the truth on an intercept, the model's probability (its logit) and the
#' formula's covariates (their slopes with a small ridge penalty), fitted on
#' the coded rows weighted by \eqn{1/\pi}{1/pi}: it narrows the interval where
#' the model's errors follow the covariates or it is miscalibrated throughout. Such a
#' fit, and [learn_labels()]'s learner when `data` is its value, use the
#' codes, so they are cross-fitted: the rows are split into `folds`, and each
#' fold's predictions come from fits to the coded rows of the other folds, so
#' that no coded row's prediction depends on its own code. A fold holds whole
#' sampling units: the clusters drawn whole, or those of `cluster`, so that no
#' fit predicts a row from the codes of its own speaker's other rows.
#'
#' The predictions are weighted by \eqn{\lambda}{lambda}, as in PPI++
#' (Angelopoulos et al. 2023): each row's estimating function is
#' \eqn{\lambda}{lambda} times that of its prediction, plus for a coded row
#' \eqn{1/\pi}{1/pi} times the difference between that of its code and
#' \eqn{\lambda}{lambda} times that of its prediction. \eqn{\lambda = 1}{lambda
#' = 1} is DSL; \eqn{\lambda = 0}{lambda = 0} the coded rows alone. By default
#' \eqn{\lambda}{lambda} is chosen from the data for each coefficient, to make
#' that coefficient's variance smallest (cut to \[0, 1\]; ppi-python's
#' `coord`, for every coefficient), and each coefficient is taken from the
#' estimate at its own \eqn{\lambda}{lambda}; in [label_shares()] that is one
#' \eqn{\lambda}{lambda} a group. So no corrected interval is meaningfully
#' wider than the coded rows' alone however poor the predictions, and
#' predictions that are good for one coefficient or group are used there even
#' where they are noise for another: with probabilities that carry no
#' information \eqn{\lambda}{lambda} falls toward 0. The chosen values are
#' printed and kept in the manifest. Either way the estimate's validity rests
#' only on the known inclusion probabilities; how good the predictions are
#' changes the width.
#'
#' The variance treats the tuned \eqn{\lambda}{lambda} as if it were fixed.
#' The estimate is consistent at every fixed \eqn{\lambda}{lambda}, and the
#' tuned one converges to a constant, so its own error moves the estimate by
#' a term of smaller order than the standard error (as PPI++, Angelopoulos et
#' al. 2023, shows for its tuned lambda). On few coded rows it does not: tuned
#' on the rows it is applied to, \eqn{\lambda}{lambda} falls where their own
#' estimate is off, and the interval misses (60 coded rows: 0.942, 0.866 where
#' the tuned \eqn{\lambda \le 0.5}{lambda <= 0.5}). So with fewer than 100
#' coded rows, or clusters where they are drawn whole or named by `cluster`,
#' \eqn{\lambda}{lambda} is 1 (DSL: 0.964), tuned from 100 on (`lambda_rule`).
#'
#' A stratum with \eqn{k}{k} < 10 coded rows (two or three alike codes give a variance of 0 by
#' chance) takes its own spread for \eqn{k - 1}{k - 1} of 9 degrees of freedom and borrows the
#' rest: the variance of Agresti and Coull's adjusted proportion of its codes, \eqn{(ones + 2) /
#' (rows + 4)}{(ones + 2) / (rows + 4)}, for codes of 0 and 1, else the residuals' variance pooled
#' within strata. A message (`newrllama4_message_variance_pooled`) names the
#' strata whose variance borrowing raised, and the fit's `variance_pooled` and the `pooled` of
#' each stratum in `parts` record them. Clusters drawn whole borrow as their rows would, each
#' independent of the others, and keep at least their own spread.
#'
#' Where the coded rows do not reach a covariate's range (a row of `data`
#' would have a leverage above 1 on the coded rows' fit, as a long tail
#' gives), no code checks the labels there: the corrected estimate is the
#' coded rows' alone (\eqn{\lambda = 0}{lambda = 0}), with a warning
#' (`newrllama4_warning_leverage`) that names the covariate and says about how
#' many coded rows would reach it (the fit's `leverage`). Even that interval can
#' be too narrow: code more rows or transform the covariate. The same holds
#' for a covariate with a long tail over all the rows of `data` (skewness above
#' 2.5: a lognormal one, not a normal, uniform or gamma one of shape 4), which
#' the coded rows can miss however many they are: the warning
#' (`newrllama4_warning_skewed_covariate`) gives the rows Cochran's rule asks
#' (\eqn{25 G_1^2}{25 G1^2}). Where the coded rows' rarer code is under a
#' tenth of them, no interval covers the slope, and the estimate stops
#' (`newrllama4_error_skewed_covariate`): transform the covariate (its log, or
#' ranks). It stops too
#' for the corpus (`target = "corpus"`) unless the rows far out were drawn
#' whole (`review_sample(tail =)`; the skewness is then that of the rest): a
#' uniform draw misses them in most samples (a lognormal covariate, uniform
#' rows of 2,000: 0.93 at 150 rows, 0.90 at 400, 0.85 at 1,000; its tail
#' drawn whole about 0.94). And it stops for the population past 500 coded
#' rows (past 60 for a straight line through codes of 0 and 1: 0.91 at 100),
#' where the small-sample df no longer widen the interval: its slope rests on
#' the corpus's own tail (0.86 at 1,000 rows of 2,000, 0.86-0.88 all coded).
#' A numeric answer's values that far beyond the coded rows' warn, the estimate
#' unchanged (`newrllama4_warning_answer_reach`): draw its tail whole.
#'
#' The variance is that of the design: a stratified random sample without
#' replacement within each stratum (`.stratum`, or the rows drawn with the same
#' probability), with each stratum's finite-population correction, as
#' [review_sample()] draws. With `target = "population"` (the default) the
#' interval is for the regression in the population the texts are a sample of,
#' and adds the variance of the corpus around it; with `target = "corpus"` it
#' is for the value coding every row of `data` would give, and counts only
#' which rows were coded, so it is narrower. Print says which.
#' Coded rows drawn one by one have each one's terms of the variance divided
#' by \eqn{\sqrt{1 - h}}{sqrt(1 - h)}, h its leverage (HC2). Intervals take
#' the quantile of a t distribution on each estimate's own degrees of freedom:
#' Bell and McCaffrey's small-sample approximation (Satterthwaite's, from the
#' design matrix, the weights, strata and clusters and
#' \eqn{\lambda}{lambda}, not the residuals), as Imbens and Kolesar (2016)
#' advise with HC2, at most the design's (as `survey`'s `degf()`: the sampling
#' units coded, rows or clusters drawn whole, less the strata; with `cluster`,
#' the clusters coded less one, if fewer). So an interval resting on a dozen
#' clusters, or a slope whose variance a few rows far out on a skewed
#' covariate carry, is not too narrow (a lognormal covariate on 60 coded rows:
#' about 5 df, and 0.950 coverage where the design's 58 gave 0.904); an
#' intercept or a share on many coded rows keeps about the design's df.
#'
#' Where a few rows carry a coefficient (far out on a skewed covariate), the
#' estimate and its standard error move together: coded rows that miss the
#' tail give an estimate off to one side with a small standard error, and a
#' symmetric interval misses on that side, however many its df. So the
#' interval is bent by the estimate's skewness (the third cumulant of its
#' influence values under the design, over the variance to the 3/2: the
#' `skewness` column of `tidy()` and the record), through Hall's (1992)
#' transformation of the t statistic; without skew it is the t interval. A
#' lognormal covariate's slope on 150 uniform coded rows covered 0.908 with
#' the symmetric interval, every miss above the truth, and covers about 0.94
#' bent (docs/benchmarks.md).
#'
#' @param formula A formula: on the left, one of the labels (its indicator is
#'   the outcome; backquote names that are not syntactic), a boolean field of
#'   a schema annotation, or a numeric or logical column of `data`; on the
#'   right, columns of `data`, labels, boolean fields and enum fields (as
#'   main effects; labelled covariates: see Details).
#' @param data Labelled rows: the value of [annotate_texts()] with labels, or
#'   any data frame with `.label` and `.prob_<label>` columns, or with the
#'   answer column.
#' @param coded The rows of `data` coded by hand: [review_sample()]'s rows,
#'   with its design columns and the codes.
#' @param truth The column of `coded` that holds the codes: labels, or the
#'   answer's true values; bare (`truth = code`) or as a string
#'   (`truth = "code"`), as in `dplyr::select()`. With several labelled
#'   variables (a labelled outcome and labelled covariates, or several labelled
#'   covariates), each one's column of `coded`, named by the variable, such as
#'   `c(positive = tone_code, negative = "negative_code")`; a boolean field's
#'   codes are logical, or "TRUE" and "FALSE". A name that is not a column of
#'   `coded` is an error of class `newrllama4_error_missing_column` listing its
#'   columns.
#' @param field `NULL` for the labels, or an enum or boolean field of the
#'   `schema` given to [annotate_texts()] (its column of `data`, bare or as a
#'   string): its values are then the
#'   labels (`.prob_<field>_<value>` their predictions), and the outcome is one
#'   of them, or for a boolean field the field itself (its `TRUE`). Its codes
#'   in `truth` are its values (logical for a boolean).
#' @param family `"gaussian"` (least squares: a linear probability model for a
#'   label) or `"binomial"` (logistic regression).
#' @param prediction `"probs"` to predict each row by the model's probability
#'   (or answer) as it is, or `"fit"`: see Details.
#' @param folds The number of folds for cross-fitting (at most the sampling
#'   units coded). With labels from [learn_labels()] (or the deprecated
#'   [recalibrate_labels()]), the default keeps their folds; another number
#'   cuts new ones, in which the learner is chosen and fitted again.
#' @param seed `NULL`, or a whole number that makes the folds reproducible
#'   (the session's random number generator is left as it was).
#' @param lambda `NULL` to choose the weight on the predictions from the data
#'   for each coefficient (PPI++'s power tuning), or a number in \[0, 1\] for
#'   all of them: 1 is DSL's estimator, 0 the coded rows alone.
#' @param cluster `NULL`, or a column of `data` (speaker, outlet, day), bare or
#'   as a string, whose rows share errors: the variance is then cluster-robust, the
#'   estimating function summed within each cluster (and the naive fit's by
#'   `sandwich::vcovCL()`). By default the clusters that [review_sample()]
#'   drew whole, if it did.
#' @param target `"population"` (the regression in the population the texts are
#'   drawn from) or `"corpus"` (the value every row of `data` coded would
#'   give).

#' @return A `newrllama4_label_regression` object: [coef()], [vcov()] and
#'   [confint()] give the corrected estimate; [print()] shows each corrected
#'   coefficient with its standard error, degrees of freedom, interval,
#'   effective number of coded rows, design effect, the sampling part's share
#'   of its variance and \eqn{\lambda}{lambda}, beside the naive fit (the
#'   labels as if true: the model's, or the learned labels) and the coded rows
#'   alone (weighted by \eqn{1/\pi}{1/pi}), then the design, the variance and
#'   interval methods and the learner; [summary()] the three estimators side by
#'   side and the design in full; [plot()] draws the three; `tidy()`,
#'   `glance()` and [nobs()] give tables for papers
#'   ([label_regression_tidiers]); [manifest()] records how it was made, with
#'   the same figures. Its `predictions` are the rows' cross-fitted
#'   predictions, `rows` the rows of `data` used, `record` the figures that
#'   all of these read.
#' @references Angelopoulos, A. N., Duchi, J. C. and Zrnic, T. (2023). PPI++:
#'   efficient prediction-powered inference. arXiv:2311.01453.
#'
#'   Bell, R. M. and McCaffrey, D. F. (2002). Bias reduction in standard errors
#'   for linear regression with multi-stage samples. *Survey Methodology* 28,
#'   169-181.
#'
#'   Boik, R. J. (2008). Accurate confidence intervals in regression analyses
#'   of non-normal data. *Annals of the Institute of Statistical Mathematics*
#'   60, 61-83.
#'
#'   Egami, N., Hinck, M., Stewart, B. M. and Wei, H. (2023). Using
#'   imperfect surrogates for downstream inference: design-based supervised
#'   learning for social science applications of large language models.
#'   *Advances in Neural Information Processing Systems 36*.
#'
#'   Hall, P. (1992). On the removal of skewness by transformation. *Journal
#'   of the Royal Statistical Society B* 54, 221-228.
#'
#'   Imbens, G. W. and Kolesar, M. (2016). Robust standard errors in small
#'   samples: some practical advice. *Review of Economics and Statistics* 98,
#'   701-712.
#'
#'   Pustejovsky, J. E. and Tipton, E. (2018). Small-sample methods for
#'   cluster-robust variance estimation and hypothesis testing in fixed effects
#'   models. *Journal of Business & Economic Statistics* 36, 672-683.
#' @seealso [label_shares()] for the share of each label, [coded_rows_needed()]
#'   for how many rows to code.
#' @export
#' @examples
#' # 2,000 texts, labels right 85% of the time, wrong more often where x is high
#' set.seed(1)
#' n <- 2000
#' texts <- data.frame(x = rnorm(n))
#' truth <- rbinom(n, 1, plogis(-0.5 + 0.8 * texts$x))
#' wrong <- rbinom(n, 1, plogis(-2.2 + 0.6 * texts$x))
#' label <- ifelse(wrong == 1, 1 - truth, truth)
#' prob <- plogis(ifelse(label == 1, 1, -1) * runif(n, 1, 3))
#' texts$.label <- factor(ifelse(label == 1, "yes", "no"), levels = c("yes", "no"))
#' texts$.prob_yes <- prob
#' texts$.prob_no <- 1 - prob
#' texts$.confidence <- pmax(prob, 1 - prob)
#' texts$truth <- ifelse(truth == 1, "yes", "no")  # known here, for the example
#'
#' coded <- review_sample(texts, n = 300, weight = "uniform", seed = 1)
#' fit <- label_regression(yes ~ x, texts, coded, truth, family = "binomial", seed = 1)
#' fit
#' confint(fit)
label_regression <- function(formula, data, coded, truth, family = c("gaussian", "binomial"),
                             prediction = c("probs", "fit"), folds = 5L, seed = NULL, field = NULL, lambda = NULL,
                             target = c("population", "corpus"), cluster = NULL) {
  call <- current_env()
  if (is.data.frame(formula)) {
    abort_invalid(c("{.arg formula} comes first and {.arg data} second: {.arg formula} is a data frame.",
                    "i" = "Name the formula to pipe the data in: {.code data |> label_regression(formula = positive ~
                           party, coded = coded, truth = code)}."), "formula", call, subclass = "argument_order")
  }
  if (!inherits(formula, "formula") || length(formula) != 3 || length(all.vars(formula[[2]])) != 1) {
    abort_invalid("{.arg formula} must be a formula with one label or answer column on its left, such as
                   {.code positive ~ party + year}.", "formula", call)
  }
  if (!is.data.frame(data)) abort_invalid("{.arg data} must be a data frame of labelled rows.", "data", call)
  field <- column_name(rlang::enquo(field), data, "field", "data", call = call)
  outcome <- all.vars(formula[[2]])
  # a boolean field is its own outcome: TRUE
  if (!is.null(field) && identical(outcome, field) && is.logical(data[[field]])) outcome <- "true"
  data <- labels_view(data, field, call)
  check_learner_kept(data, call)
  family <- check_choice(family, c("gaussian", "binomial"), "family")
  prediction <- check_choice(prediction, c("probs", "fit"), "prediction")
  folds <- check_whole(folds, "folds", min = 2)
  if (!is.null(seed)) seed <- check_whole(seed, "seed", min = 0, max = .Machine$integer.max)
  if (!is.null(lambda)) lambda <- check_number(lambda, "lambda", min = 0, max = 1)
  target <- check_choice(target, c("population", "corpus"), "target")
  cluster <- column_name(rlang::enquo(cluster), data, "cluster", "data", call = call)
  right <- all.vars(formula[[3]])
  warn_label_shadows(c(outcome, right), data)
  covariates <- Filter(Negate(is.null), lapply(stats::setNames(nm = right), variable_spec, data = data))
  missing <- setdiff(right, c(names(data), names(covariates)))
  if (length(missing) > 0) {
    abort_invalid("{.arg formula} names {.field {missing}}, not {?a column/columns} of {.arg data} nor
                   {?a label/labels}.", "formula", call, subclass = "missing_column")
  }
  check_decimal_commas(data, c(outcome, right), "data", call)
  # a refitted or learned label or field's probabilities saw the coded rows'
  # codes: as a covariate its errors would no longer be those the codes correct
  label_covariates <- unlist(lapply(covariates, function(variable) if (variable$kind == "label") variable$name))
  refitted <- c(if (!is.null(learned_calibration(data))) label_covariates,
                right[vapply(right, refitted_field, NA, data = data)])
  if (length(refitted) > 0) {
    abort_invalid(c("{.field {refitted}} {?was/were} fitted to the codes by {.fn recalibrate_labels} or
                     {.fn learn_labels}, so {?it/they} cannot be {?a covariate/covariates}.",
                    "i" = "Use {cli::qty(length(refitted))}{?it/them} as annotated (the value of {.fn annotate_texts}): the correction does not
                           need {?it/them} calibrated."), "data", call)
  }
  truth <- rlang::enquo(truth)
  # a numeric outcome beside labelled covariates is observed, unless `truth` names its codes
  spec <- outcome_spec(outcome, data, call,
                       coded = length(covariates) == 0 || outcome %in% names(truth_mapping(truth, coded)))
  coded_variables <- c(if (spec$kind != "observed") stats::setNames(list(spec), outcome), covariates)
  labels <- lapply(coded_variables, function(variable) variable$labels)
  if (length(coded_variables) == 1) {
    design <- checked_coded_rows(data, coded, truth, call, labels = labels[[1]], cluster = cluster)
    design$truth <- stats::setNames(list(design$truth), names(coded_variables))
  } else {
    design <- checked_coded_rows(data, coded, truth, call, labels = labels, cluster = cluster)
  }
  estimate <- estimate_design_based(spec, stats::delete.response(stats::terms(formula)), data, design, family,
                                    prediction, folds, seed, call, lambda, target, covariates)
  estimate$formula <- formula
  estimate$family <- family
  estimate$record <- findings_record(estimate)
  record <- record_manifest(estimate$manifest, estimate$record)
  estimate$manifest <- NULL
  structure(estimate, class = "newrllama4_label_regression", manifest = record)
}

#' @export
coef.newrllama4_label_regression <- function(object, ...) object$fits$corrected$coefficients

#' @export
vcov.newrllama4_label_regression <- function(object, ...) object$vcov$corrected

#' @export
confint.newrllama4_label_regression <- function(object, parm, level = 0.95, ...) {
  table <- estimate_table(object, "corrected", level)
  out <- cbind(table$conf.low, table$conf.high)
  dimnames(out) <- list(table$term, sprintf("%g %%", 100 * c((1 - level) / 2, (1 + level) / 2)))
  if (missing(parm)) out else out[parm, , drop = FALSE]
}

#' @export
plot.newrllama4_label_regression <- function(x, y = NULL, level = 0.95, ...) {
  table <- summary(x, level = level)$table
  table <- table[table$term != "(Intercept)" | all(table$term == "(Intercept)"), ]
  terms <- unique(table$term)
  offset <- c(corrected = 0.15, naive = 0, coded_only = -0.15)[table$estimator]
  y <- match(table$term, rev(terms)) + offset
  colours <- c(corrected = "black", naive = "firebrick", coded_only = "steelblue")[table$estimator]
  # a row above the terms for the legend, which would otherwise cover the intervals
  graphics::plot(table$estimate, y, xlim = range(table$conf.low, table$conf.high), ylim = c(0.5, length(terms) + 1),
                 yaxt = "n", pch = 19, col = colours, xlab = sprintf("estimate with %g%% interval", 100 * level),
                 ylab = "", ...)
  graphics::segments(table$conf.low, y, table$conf.high, y, col = colours)
  graphics::axis(2, at = seq_along(terms), labels = rev(terms), las = 1)
  graphics::legend("top", legend = estimators, col = c("black", "firebrick", "steelblue"), pch = 19,
                   bty = "n", horiz = TRUE)
  invisible(x)
}
