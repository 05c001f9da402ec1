# Tables for papers: tidy() and glance() of label_regression() and
# label_shares(), the generics' methods that broom and modelsummary call, read
# from the estimate's one record (findings-record.R).

#' Tables for papers from corrected estimates: tidy(), glance(), nobs()
#'
#' `tidy()` gives one row per term (a coefficient of [label_regression()], a
#' group and label of [label_shares()]) of the corrected estimate by default,
#' with numeric columns, as `modelsummary::modelsummary()` and other table
#' makers read them; `estimator` picks the naive estimate (the labels as if
#' true), the coded rows alone, or all three stacked (a term then appears once
#' per estimator). `glance()` gives one row of single values about the
#' estimate, and `nobs()` the rows it is for. They are methods of the
#' `generics` package's `tidy()` and `glance()` (also broom's): load either to
#' call them. A tibble where the tibble package is installed, else a data
#' frame.
#'
#' @param x A [label_regression()] fit or a [label_shares()] table.
#' @param conf.int Whether to give the intervals (`conf.low`, `conf.high`).
#' @param conf.level Their confidence level.
#' @param estimator `"corrected"` (the default), `"naive"`, `"coded_only"` or
#'   `"all"`.
#' @param object As `x`, for `nobs()`.
#' @param ... Unused.
#' @return `tidy()`: `term`, `estimator`, `estimate`, `std.error`,
#'   `statistic`, `p.value` (regressions), `conf.low`, `conf.high`, `df` (the
#'   estimate's small-sample degrees of freedom, at most the design's), `skewness` (regressions: the
#'   estimate's, which bends its interval), `effective_n` (the rows a simple random
#'   sample of codes alone would need for the same variance), `design_effect`
#'   (the coded rows over `effective_n`), `var_corpus` and `var_sampling` (the
#'   variance's parts: how the corpus differs from the population, and which
#'   rows were coded), `lambda` (the weight on the predictions); shares add
#'   the groups' columns, `label`, `rows`, `coded`, and `bound.low` and
#'   `bound.high`: the corrected share were the undecided texts (drawn rows
#'   without a code, or whose coders' codes were split) all of another label
#'   or all of this one (Manski's bounds; `NA` where none is undecided).
#'
#'   `glance()`: `nobs` (the rows), `coded` (the coded rows in the estimate's
#'   domain), `effective_n` (the smallest of the corrected terms'), `df` (the
#'   smallest of theirs), `design_df` (the design's),
#'   `target`, `method`, `interval`, `lambda_min`, `lambda_max`,
#'   `lambda_tuned`, `strata`, `fewest_coded_in_stratum`, `clusters` (drawn
#'   whole and coded, or `NA`), `lost_rows` (drawn rows without a code),
#'   `split_texts` (texts whose coders' codes were split, [read_codes()]),
#'   `undecided_share` (both over the drawn rows), `strata_borrowing` (strata
#'   of few coded units that borrowed the spread of the others),
#'   `variance_floored` (no coded row wrong: each row's error taken as at
#'   least Wilson's centre for none seen), `learner`, `learner_accuracy`
#'   and `learner_kept` (`NA` for labels no learner saw); a regression adds
#'   `family`, `outcome`, `prediction` and `folds`.
#' @name label_regression_tidiers
#' @examples
#' set.seed(1)
#' n <- 1000
#' texts <- data.frame(x = rnorm(n))
#' truth <- rbinom(n, 1, plogis(-0.5 + 0.8 * texts$x))
#' label <- ifelse(runif(n) < 0.85, truth, 1 - truth)
#' prob <- plogis(ifelse(label == 1, 1, -1) * runif(n, 1, 3))
#' texts$.label <- factor(ifelse(label == 1, "yes", "no"), levels = c("yes", "no"))
#' texts$.prob_yes <- prob
#' texts$.prob_no <- 1 - prob
#' texts$.confidence <- pmax(prob, 1 - prob)
#' texts$truth <- ifelse(truth == 1, "yes", "no")
#' coded <- review_sample(texts, n = 150, weight = "uniform", seed = 1)
#' fit <- label_regression(yes ~ x, texts, coded, truth, seed = 1)
#' if (requireNamespace("generics", quietly = TRUE)) {
#'   generics::tidy(fit)
#'   generics::tidy(fit, estimator = "all")
#'   generics::glance(fit)
#' }
#' nobs(fit)
NULL

#' @rdname label_regression_tidiers
#' @exportS3Method generics::tidy
tidy.newrllama4_label_regression <- function(x, conf.int = TRUE, conf.level = 0.95,
                                             estimator = c("corrected", "naive", "coded_only", "all"), ...) {
  tidy_record(record_of(x, check_number(conf.level, "conf.level", min = 0, max = 1, open_min = TRUE)), conf.int,
              estimator)
}

#' @rdname label_regression_tidiers
#' @exportS3Method generics::tidy
tidy.newrllama4_label_shares <- function(x, conf.int = TRUE, conf.level = 0.95,
                                         estimator = c("corrected", "naive", "coded_only", "all"), ...) {
  record <- attr(x, "record", exact = TRUE)
  conf.level <- check_number(conf.level, "conf.level", min = 0, max = 1, open_min = TRUE)
  if (!isTRUE(all.equal(conf.level, record$level))) {
    abort_invalid("{.arg conf.level} must be the {.arg level} the shares were estimated at ({record$level}): call
                   {.fn label_shares} with {.code level = {conf.level}}.", "conf.level", current_env())
  }
  record$estimates <- record$estimates[c("term", setdiff(names(record$estimates), "term"))]
  tidy_record(record, conf.int, estimator)
}

tidy_record <- function(record, conf.int, estimator) {
  estimator <- check_choice(estimator, c("corrected", "naive", "coded_only", "all"), "estimator")
  table <- record$estimates
  if (estimator != "all") table <- table[table$estimator == estimator, , drop = FALSE]
  if (!isTRUE(conf.int)) table <- table[setdiff(names(table), c("conf.low", "conf.high"))]
  rownames(table) <- NULL
  as_table(table)
}

#' @rdname label_regression_tidiers
#' @exportS3Method generics::glance
glance.newrllama4_label_regression <- function(x, ...) {
  as_table(cbind(glance_record(x$record), data.frame(
    family = x$family, outcome = x$outcome, prediction = x$prediction, folds = length(unique(x$folds)),
    stringsAsFactors = FALSE)))
}

#' @rdname label_regression_tidiers
#' @exportS3Method generics::glance
glance.newrllama4_label_shares <- function(x, ...) as_table(glance_record(attr(x, "record", exact = TRUE)))

# The record's one row of single values.
glance_record <- function(record) {
  corrected <- record$estimates[record$estimates$estimator == "corrected", , drop = FALSE]
  design <- record$design
  learner <- record$learner
  data.frame(nobs = record$rows, coded = record$coded, effective_n = min(corrected$effective_n), df = record$df,
             design_df = record$design_df,
             target = record$target, method = "design-based (DSL, PPI++'s lambda)", interval = interval_words(record),
             lambda_min = min(corrected$lambda), lambda_max = max(corrected$lambda), lambda_tuned = record$lambda_tuned,
             strata = as.integer(design$strata), fewest_coded_in_stratum = as.integer(design$fewest_coded),
             clusters = as.integer(design$clusters_drawn %||% NA_integer_), lost_rows = as.integer(design$lost),
             split_texts = as.integer(design$split %||% 0L),
             strata_borrowing = length(record$variance_pooled), variance_floored = isTRUE(record$variance_floored),
             undecided_share = (design$lost + (design$split %||% 0L)) / design$drawn,
             learner = if (is.null(learner)) NA_character_ else paste(learner$verb, learner$model),
             learner_accuracy = learner$accuracy %||% NA_real_, learner_kept = learner$kept %||% NA,
             stringsAsFactors = FALSE)
}

as_table <- function(table) if (requireNamespace("tibble", quietly = TRUE)) tibble::as_tibble(table) else table

#' @rdname label_regression_tidiers
#' @export
nobs.newrllama4_label_regression <- function(object, ...) object$record$rows

#' @rdname label_regression_tidiers
#' @export
nobs.newrllama4_label_shares <- function(object, ...) attr(object, "record", exact = TRUE)$rows
