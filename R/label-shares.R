#' The share of each label, corrected with a sample coded by hand
#'
#' Estimates what share of the rows truly has each label, overall or within
#' groups, from the model's labels for every row and people's codes for a
#' sample drawn by [review_sample()], with confidence intervals. It is the
#' simplest [label_regression()]: the mean of each label's pseudo-outcome
#' \eqn{g + (y - g) / \pi}{g + (y - g) / pi} within each group (design-based
#' supervised learning, Egami et al. 2023), beside the share of the model's
#' labels (naive) and that of the coded rows alone (weighted by
#' \eqn{1/\pi}{1/pi}).
#'
#' Every group needs coded rows of its own: a group with none is an error
#' naming it (its share cannot be corrected), one with few gets a wide
#' interval, and one with fewer than 10 a warning, since its interval then
#' rests on too few rows to be trusted. Draw enough rows for the groups that
#' matter, or stratify the drawing by them (annotate and draw each group on its
#' own, with the same probability). Shares and their intervals are kept within
#' \[0, 1\], the intervals score-type (see Value), so that rare labels get
#' intervals that cover. As in [label_regression()], the weight on the predictions is
#' tuned (`lambda`), the target is the population or the corpus (`target`),
#' and `cluster` gives a cluster-robust variance. Rows whose `by` group or
#' probabilities are missing are outside the estimate's domain, as in
#' [label_regression()]: the shares are those of the rows that have them.
#'
#' @inheritParams label_regression
#' @param by `NULL` for the shares of all rows, or columns of `data` whose
#'   combinations are the groups: bare or as strings, as in `dplyr::select()`
#'   (`by = outlet`, `by = "outlet"`, `by = c(outlet, year)`).
#' @param level The confidence level of the intervals.
#' @return A data frame, a row per group, label and estimator (`corrected`,
#'   `naive`, `coded_only`), with the groups' columns, `label`, `estimator`,
#'   `estimate`, `std.error`, `df` (the estimate's degrees of freedom: Bell and McCaffrey's, at most the
#'   design's; see [label_regression()]),
#'   `conf.low`, `conf.high`, `effective_n` and `design_effect` (the
#'   interval's effective number of rows, below, and the rows it rests on over
#'   it), `var_corpus` and `var_sampling` (the variance's corpus and sampling
#'   parts), `lambda`, `rows` and `coded`
#'   (the group's rows and coded rows), `bound.low` and `bound.high` (the
#'   corrected share were the undecided texts all of another label or all of
#'   this one; `NA` where none is undecided, and for the other estimators). It prints with the design, the
#'   interval methods and the learner behind learned labels; `tidy()` gives
#'   one row per group and label, `glance()` one row about the estimate
#'   ([label_regression_tidiers]). `std.error` is the estimate's standard
#'   error under the design; the interval is a score-type one (Wilson's, at
#'   the effective number of rows that standard error implies,
#'   \eqn{p(1 - p) / se^2}{p (1 - p) / se^2}), so near 0 or 1 it is not
#'   symmetric about the estimate: it has the binomial's skew, covers as it
#'   should for rare labels and is never of zero width. Far from 0 and 1 it is
#'   close to `estimate` plus or minus 1.96 `std.error`. Texts whose coders'
#'   codes [read_codes()] split count each code at its weight (`.code_weight`),
#'   the text one unit of the design. Drawn rows without a code (`NA`: texts
#'   nobody coded or could code, or whose coders disagree, read with
#'   `disagreements = "missing"`) are reweighted as missing at random within
#'   their stratum (with a warning). Where texts are undecided either way, the
#'   printout and the attribute `"lost_bounds"` give Manski's bounds beside the
#'   estimate: each group's corrected share of each label were every such text
#'   of that label (`high`) or of another (`low`), the interval from the lower
#'   end of the low one's to the upper end of the high one's (`conf.low`,
#'   `conf.high`), and how many rows were `lost` and texts `split`.
#'   [manifest()] records how it was made,
#'   and [coded_rows_needed()] tells how many rows to code for a target
#'   standard error.
#' @references Wilson, E. B. (1927). Probable inference, the law of
#'   succession, and statistical inference. *Journal of the American
#'   Statistical Association* 22(158), 209-212.
#' @seealso [label_regression()]
#' @export
#' @examples
#' set.seed(2)
#' n <- 3000
#' texts <- data.frame(outlet = sample(c("Daily", "Weekly"), n, replace = TRUE))
#' truth <- ifelse(runif(n) < ifelse(texts$outlet == "Daily", 0.3, 0.5),
#'                 "negative", "positive")
#' label <- ifelse(runif(n) < 0.85, truth,
#'                 ifelse(truth == "negative", "positive", "negative"))
#' sure <- runif(n, 0.6, 0.99)
#' texts$.label <- factor(label, levels = c("negative", "positive"))
#' texts$.prob_negative <- ifelse(label == "negative", sure, 1 - sure)
#' texts$.prob_positive <- 1 - texts$.prob_negative
#' texts$.confidence <- sure
#' texts$truth <- truth  # known here, for the example
#'
#' coded <- review_sample(texts, n = 300, weight = "confidence", seed = 1)
#' label_shares(texts, coded, truth, by = "outlet")
label_shares <- function(data, coded, truth, by = NULL, prediction = c("probs", "fit"), folds = 5L, seed = NULL,
                         level = 0.95, field = NULL, lambda = NULL, target = c("population", "corpus"),
                         cluster = NULL) {
  call <- current_env()
  if (is.data.frame(data)) {
    data <- labels_view(data, column_name(rlang::enquo(field), data, "field", "data", call = call), call)
  }
  check_learner_kept(data, call)
  if (!is.data.frame(data) || !".label" %in% names(data)) {
    abort_invalid("{.arg data} must be labelled rows: the value of {.fn annotate_texts} with {.arg labels}, or a data
                   frame with {.field .label} and {.field .prob_<label>} columns.", "data", call)
  }
  by <- unname(column_names(rlang::enquo(by), data, "by", "data", n = "some", call = call))
  cluster <- column_name(rlang::enquo(cluster), data, "cluster", "data", call = call)
  prediction <- check_choice(prediction, c("probs", "fit"), "prediction")
  folds <- check_whole(folds, "folds", min = 2)
  level <- check_number(level, "level", min = 0, max = 1)
  if (!is.null(lambda)) lambda <- check_number(lambda, "lambda", min = 0, max = 1)
  target <- check_choice(target, c("population", "corpus"), "target")
  # one seed for every label's folds, so that each label is cross-fitted alike
  seed <- if (is.null(seed)) sample.int(.Machine$integer.max, 1) else
    check_whole(seed, "seed", min = 0, max = .Machine$integer.max)
  labels <- levels(as.factor(data$.label))
  missing <- labels[!paste0(".prob_", labels) %in% names(data)]
  if (length(missing) > 0) {
    abort_invalid("{.arg data} has no {.field {paste0('.prob_', missing)}} column{?s}.", "data", call,
                  subclass = "missing_column")
  }
  design <- checked_coded_rows(data, coded, rlang::enquo(truth), call, labels = labels, cluster = cluster)
  groups <- if (is.null(by)) factor(rep("all", nrow(data))) else interaction(data[by], drop = TRUE, sep = " / ")
  data$.group <- groups
  coded_per_group <- table(groups[design$rows])
  empty <- names(coded_per_group)[coded_per_group == 0]
  if (length(empty) > 0) {
    abort_newrllama4("too_few_coded", c(
      "No coded rows in {cli::qty(length(empty))}group{?s} {.val {empty}}: {?its share/their shares} cannot be corrected.",
      "i" = "Code rows of {cli::qty(length(empty))}{?it/them} (draw more with {.code review_sample(previous =)}), or merge groups."),
      call = call)
  }
  if (!is.null(design$cluster)) {
    clusters <- data[[design$cluster]][design$rows]
    check_level_clusters(split(clusters, groups[design$rows]), clusters, call)
  }
  thin <- names(coded_per_group)[coded_per_group < 10]
  if (length(thin) > 0) {
    warn_newrllama4("few_coded", c("Fewer than 10 coded rows in {length(thin)} group{?s}: {.val {thin}}.",
                                   "i" = "Their intervals rest on too few rows to be trusted."))
  }
  terms <- stats::terms(if (nlevels(groups) == 1) ~ 1 else ~ 0 + .group)
  estimate_all <- function(lambda) {
    quiet_repeats(lapply(stats::setNames(nm = labels), function(label) {
      estimate_design_based(outcome_spec(label, data, call), terms, data, design, "gaussian", prediction, folds,
                            seed, call, lambda, target)
    }))
  }
  estimates <- estimate_all(lambda)
  if (is.null(lambda) && length(labels) > 2 && estimates[[1]]$lambda_tuned) {
    # one lambda a group for every label, so that the shares add to one
    pooled <- lambda_from(Reduce(`+`, lapply(estimates, `[[`, "lambda_terms")))
    estimates <- lapply(estimate_all(pooled), function(estimate) {
      utils::modifyList(estimate, list(lambda_tuned = TRUE, lambda_rule = "tuned to the data (PPI++)"))
    })
  }
  group_of <- function(term) sub("^\\.group", "", term)
  table <- do.call(rbind, lapply(labels, function(label) {
    estimate <- estimates[[label]]
    rows <- findings_record(estimate, level)$estimates
    group <- if (nlevels(groups) == 1) rep(levels(groups), nrow(rows)) else group_of(rows$term)
    used <- groups[estimate$rows]
    in_group <- as.vector(table(used)[group])
    coded_in_group <- as.vector(table(used[match(estimate$coded_rows, estimate$rows)])[group])
    # the naive share rests on every row of its group, the others on its coded rows
    n <- ifelse(rows$estimator == "naive", in_group, coded_in_group)
    pooled <- ifelse(rows$estimator == "corrected",
                     pooled_share(estimate$parts$corrected, diag(estimate$vcov$corrected))[rows$term], 0)
    rows[c("estimate", "conf.low", "conf.high", "effective_n")] <- share_interval(rows$estimate, rows$std.error, n,
                                                                                   level, rows$df, pooled = pooled)
    rows$design_effect <- n / rows$effective_n
    data.frame(.group = group, label = label, rows[share_columns], rows = in_group, coded = coded_in_group,
               stringsAsFactors = FALSE)
  }))
  if (!is.null(by)) {
    keys <- unique(data[by])
    keys <- keys[match(table$.group, as.character(interaction(keys, drop = TRUE, sep = " / "))), , drop = FALSE]
    table <- cbind(keys, table)
  }
  bounds <- lost_bounds(data, coded, rlang::enquo(truth), labels, terms, estimates, prediction, folds, seed, target,
                        cluster, level, call)
  # each corrected share's bounds were its undecided texts all of its label, or none
  at <- if (!is.null(bounds)) match(paste(table$.group, table$label, table$estimator),
                                    paste(if (nlevels(groups) == 1) levels(groups) else bounds$term, bounds$label,
                                          "corrected"))
  table$bound.low <- if (is.null(bounds)) NA_real_ else bounds$low[at]
  table$bound.high <- if (is.null(bounds)) NA_real_ else bounds$high[at]
  # a term a group and label, unique as tables for papers need
  table$term <- if (is.null(by)) table$label else paste(table$.group, table$label, sep = ": ")
  table$.group <- NULL
  rownames(table) <- NULL
  record <- utils::modifyList(findings_record(estimates[[1]], level), list(interval = "wilson"))
  record$estimates <- table
  record$lost_bounds <- bounds
  structure(table[names(table) != "term"], class = c("newrllama4_label_shares", "data.frame"), estimates = estimates,
            level = level, record = record, manifest = record_manifest(estimates[[1]]$manifest, record),
            lost_bounds = bounds)
}

# A subset of the shares (rows, columns, or a dplyr verb) is a plain data
# frame of what was kept: the printout, glance() and coded_rows_needed()
# describe the whole estimate, so they stay with the whole (a filtered
# share printed every label's, a column subset failed to print).
#' @export
`[.newrllama4_label_shares` <- function(x, ...) plain_shares(NextMethod())

#' @exportS3Method dplyr::dplyr_reconstruct
dplyr_reconstruct.newrllama4_label_shares <- function(data, template) plain_shares(data)

plain_shares <- function(x) {
  if (!is.data.frame(x)) return(x)
  attributes(x)[c("estimates", "level", "record", "manifest", "lost_bounds")] <- NULL
  class(x) <- setdiff(class(x), "newrllama4_label_shares")
  x
}

# Drawn rows without a code (read_codes(disagreements = "missing"), texts
# nobody coded or could code: NA) are reweighted as missing at random within
# their stratum, which they need not be (where the hard texts were lost, a
# share covered 0.800); texts whose coders' codes were split count halfway.
# Beside that estimate, Manski's bounds over these undecided texts: each
# label's corrected share were every one of them of that label (high) or of
# another (low), at the estimate's lambda, and the interval from the low
# one's lower end to the high one's upper end; `lost` and `split` count them.
# NULL where every drawn row has one decided code (rows deleted from `coded`
# cannot be filled in, and are not bounded).
lost_bounds <- function(data, coded, truth, labels, terms, estimates, prediction, folds, seed, target, cluster, level,
                        call) {
  if (!rlang::quo_is_symbol(truth)) return(NULL)
  codes <- rlang::eval_tidy(truth, coded)
  texts <- coded$.row
  split <- if (!is.null(coded[[".code_weight"]]) && anyDuplicated(texts)) texts %in% texts[duplicated(texts)] else
    rep(FALSE, nrow(coded))
  undecided <- is.na(codes) | split
  if (!any(undecided)) return(NULL)
  column <- rlang::as_name(truth)
  filled <- coded[!duplicated(texts), , drop = FALSE]
  undecided <- undecided[!duplicated(texts)]
  share_if <- function(label, code) {
    filled[[column]] <- as.character(filled[[column]])
    filled[[column]][undecided] <- code
    design <- checked_coded_rows(data, filled, truth, call, labels = labels, cluster = cluster)
    estimate <- estimate_design_based(outcome_spec(label, data, call), terms, data, design, "gaussian", prediction,
                                      folds, seed, call, estimates[[label]]$lambda, target)
    # the bounds' intervals stay symmetric, as tools/bench_findings_validity.R measured them; the skew bends the
    # regressions' (skewed_interval())
    estimate_table(utils::modifyList(estimate, list(skewness = NULL)), "corrected", level)
  }
  do.call(rbind, lapply(labels, function(label) {
    high <- suppressMessages(suppressWarnings(share_if(label, label)))
    low <- suppressMessages(suppressWarnings(share_if(label, setdiff(labels, label)[[1]])))
    data.frame(term = sub("^\\.group", "", high$term), label = label, lost = sum(is.na(codes)),
               split = length(unique(texts[split])), low = pmax(low$estimate, 0), high = pmin(high$estimate, 1),
               conf.low = pmax(low$conf.low, 0), conf.high = pmin(high$conf.high, 1), stringsAsFactors = FALSE)
  }))
}

share_columns <- c("estimator", "estimate", "std.error", "df", "conf.low", "conf.high", "effective_n", "design_effect",
                   "var_corpus", "var_sampling", "lambda")

# A share's interval: Wilson's score interval at the design's effective
# number of rows p (1 - p) / se^2 (Kish's design effect), so that it has the
# binomial's skew near 0 and 1, where the normal interval cut to [0, 1] misses;
# far from them it is the normal interval. Agresti and Coull's wider version
# was conservative on the corrected shares (a 3% label on 150 uniform coded
# rows covered 0.973; Wilson's 0.946, and 0.939 on 60 rows drawn by
# confidence: tools/bench_findings_validity.R). The effective rows are taken
# at a share kept half a row of `n` (the rows the estimate rests on) from 0 and
# 1, and are `n` where the standard error is 0 (no coded row has the label and
# the predictions get no weight): the interval is never of zero width. The
# estimate is cut to [0, 1], where its truth is. `df`: the variance's degrees
# of freedom (its quantile a t's, as for the regressions). `pooled`: the
# share of the variance from strata whose variance borrowing raised (too few
# coded rows) and whose codes are all alike (pooled_share()); the effective
# rows are then at most `n` over it: the coded rows where those strata make
# all of the variance (the estimate rests on their few codes, and Wilson's
# skew at more rows than were coded pulled it off the truth: a thin stratum's
# two codes both "yes", 0.78 coverage), no cap where they make none. Capping
# at `n` wherever any stratum was raised made a share learned well elsewhere
# Wilson's on the coded rows alone (a rare stratum of Gemma's nouns and verbs
# in a first round of 75: 3.02x as wide as its standard error gave), and a
# thin stratum whose five codes differ over-cover (the coverage matrix's thin
# cell 0.980 over 300 draws; capped only where alike, 0.963). A thin stratum
# (4% of 2,000 rows, a coin flip; 300 draws), its variance borrowed
# (pooled_strata()): 2 of 50 coded rows there cover 0.953 (width 0.098;
# uncapped 0.940, and 0.888 where its two codes agree against 0.913), 50
# uniform rows with review_sample()'s floor of five 0.970 (capped wherever a
# stratum borrowed 0.977, uncapped 0.967).

share_interval <- function(estimate, se, n, level, df = Inf, pooled = 0) {
  z <- stats::qt((1 + level) / 2, df)
  p <- pmin(pmax(estimate, 0), 1)
  at <- pmin(pmax(p, 0.5 / n), 1 - 0.5 / n)
  effective <- ifelse(se > 0, at * (1 - at) / se^2, n)
  pooled <- rep_len(pooled, length(effective))
  effective <- ifelse(pooled > 0, pmin(effective, n / pooled), effective)
  centre <- (p * effective + z^2 / 2) / (effective + z^2)
  half <- z / (effective + z^2) * sqrt(effective * p * (1 - p) + z^2 / 4)
  list(estimate = p, conf.low = pmax(centre - half, 0), conf.high = pmin(centre + half, 1), effective = effective)
}

# The groups' few coded rows were warned of by group name, not again by each
# label's model column; rows left out and strata whose variance borrowed are
# told once, not once a label.
quiet_repeats <- function(expr) {
  told <- character()
  once <- function(m) {
    kind <- class(m)[[1]]
    if (kind %in% told) invokeRestart("muffleMessage") else told <<- c(told, kind)
  }
  withCallingHandlers(expr,
    newrllama4_warning_few_coded = function(w) invokeRestart("muffleWarning"),
    newrllama4_message_rows_left_out = once,
    newrllama4_message_variance_pooled = once,
    newrllama4_message_variance_floored = once
  )
}
