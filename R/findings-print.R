# How label_regression() and label_shares() print, and summary(): every line
# read from the estimate's one record (findings-record.R), within
# getOption("width"). print() gives what a methods section reports (per
# estimate its standard error, degrees of freedom, effective n, design effect,
# the variance's split and lambda; the design, the interval methods and the
# learner); summary() the three estimators side by side and the design in full.

# The record at `level`: the fit's own, or built again at another level.
record_of <- function(x, level = 0.95) {
  if (isTRUE(all.equal(x$record$level, level))) x$record else findings_record(x, level)
}

#' @export
format.newrllama4_label_regression <- function(x, ...) {
  record <- x$record
  corrected <- record$estimates[record$estimates$estimator == "corrected", , drop = FALSE]
  table <- data.frame(term = corrected$term, figure_columns(corrected, record$level), check.names = FALSE)
  ratio <- width_ratio(record)
  c(wrapped(paste0(cli::format_inline("{.cls newrllama4_label_regression}: "), paste(format(x$formula), x$family, sep = ", "))),
    wrapped(paste0(rows_words(record), ".")),
    "", "Corrected estimates (labels and codes, design-based):", table_lines(table),
    "", wrapped(sprintf("Beside them: naive (%s as if true) and coded_only (the coded rows alone, weighted by 1 / their
                         sampling probability):", record$naive)),
    table_lines(side_by_side(record, c("naive", "coded_only"), interval_cell)),
    if (!is.nan(ratio)) {
      wrapped(sprintf("Corrected intervals are %.2f times as wide as the coded rows' alone%s.", ratio,
                      if (any(!is.finite(record$estimates$conf.high))) " (where both are finite)" else ""))
    },
    "", method_lines(record), wrapped(lambda_line(x$lambda, x$lambda_tuned, x$lambda_rule)), undecided_lines(record))
}

#' @export
print.newrllama4_label_regression <- function(x, ...) print_lines(x, ...)

#' @export
summary.newrllama4_label_regression <- function(object, level = 0.95, ...) {
  record <- record_of(object, level)
  structure(list(table = record$estimates, coefficients = coefficient_matrix(record), record = record,
                 formula = object$formula, family = object$family, level = level),
            class = "summary.newrllama4_label_regression")
}

#' @export
format.summary.newrllama4_label_regression <- function(x, ...) {
  record <- x$record
  c(wrapped(paste0(cli::format_inline("{.cls summary.newrllama4_label_regression}: "), paste(format(x$formula), x$family, sep = ", "))),
    wrapped(paste0(rows_words(record), ".")),
    "", wrapped(sprintf("Estimates (standard errors) [%g%% intervals]: corrected (labels and codes, design-based), naive
                         (%s as if true), coded_only (the coded rows alone, weighted by 1 / their sampling
                         probability):", 100 * x$level, record$naive)),
    table_lines(side_by_side(record, estimators, function(rows) {
      sprintf("%.3f (%.3f) [%.3f, %.3f]", rows$estimate, rows$std.error, rows$conf.low, rows$conf.high)
    })),
    "", "Design:", wrapped(bullet_lines(design_lines(record))), "", method_lines(record, design = FALSE))
}

#' @export
print.summary.newrllama4_label_regression <- function(x, ...) print_lines(x, ...)

#' @export
format.newrllama4_label_shares <- function(x, ...) {
  record <- attr(x, "record", exact = TRUE)
  table <- record$estimates
  corrected <- table[table$estimator == "corrected", , drop = FALSE]
  keys <- corrected[seq_len(match("label", names(corrected)))]
  keys$term <- NULL
  coded <- table[table$estimator == "coded_only", , drop = FALSE]
  shown <- cbind(keys, figure_columns(corrected, record$level, share = TRUE),
                 naive = sprintf("%.3f", table$estimate[table$estimator == "naive"]), coded_only = interval_cell(coded))
  estimates <- attr(x, "estimates", exact = TRUE)
  # each group's lambda, the same for every label
  lambdas <- estimates[[1]]$lambda
  names(lambdas) <- sub("^\\.group", "", names(lambdas))
  c(wrapped(paste0(cli::format_inline("{.cls newrllama4_label_shares}: "),
                   sprintf("corrected shares with %g%% intervals for the %s, beside %s (naive) and the coded rows
                            alone", 100 * record$level, target_words[[record$target]], record$naive))),
    table_lines(shown, row.names = FALSE),
    wrapped(paste0(rows_words(record), ".")), "", method_lines(record),
    wrapped(lambda_line(lambdas, estimates[[1]]$lambda_tuned, estimates[[1]]$lambda_rule)),
    undecided_lines(record, table))
}

#' @export
print.newrllama4_label_shares <- function(x, ...) print_lines(x, ...)

# The corrected estimates' columns as print() shows them: the estimate, its
# standard error, degrees of freedom and interval, the effective n, the design
# effect, the sampling part's share of the variance and lambda.
figure_columns <- function(rows, level, share = FALSE) {
  variance <- rows$var_corpus + rows$var_sampling
  columns <- data.frame(sprintf("%.3f", rows$estimate), sprintf("%.3f", rows$std.error), format_df(rows$df),
                        interval_cell(rows, estimate = FALSE), format_count(round(rows$effective_n)),
                        sprintf("%.2f", rows$design_effect),
                        ifelse(variance > 0, sprintf("%.0f%%", 100 * rows$var_sampling / variance), "-"),
                        sprintf("%.2f", rows$lambda), stringsAsFactors = FALSE)
  names(columns) <- c(if (share) "share" else "estimate", "se", "df", sprintf("%g%% interval", 100 * level), "eff. n",
                      "deff", "sampling", "lambda")
  columns
}

interval_cell <- function(rows, estimate = TRUE) {
  cells <- sprintf("%s[%.3f, %.3f]", if (estimate) sprintf("%.3f ", rows$estimate) else "", rows$conf.low,
                   rows$conf.high)
  ifelse(is.na(rows$estimate), "(did not converge)", cells)
}

format_df <- function(df) ifelse(is.finite(df), format(round(df)), "Inf")

# A table of the terms (rows) by `which` estimators (columns), each cell `cell`
# of that estimator's rows.
side_by_side <- function(record, which, cell) {
  table <- record$estimates
  cells <- lapply(stats::setNames(nm = which), function(estimator) cell(table[table$estimator == estimator, ]))
  data.frame(term = unique(table$term), cells, check.names = FALSE)
}

# A coefficient matrix, a row a term and for each estimator its estimate,
# standard error and p-value (summary()'s `coefficients`).
coefficient_matrix <- function(record) {
  table <- record$estimates
  columns <- lapply(estimators, function(estimator) {
    rows <- table[table$estimator == estimator, c("estimate", "std.error", "p.value")]
    stats::setNames(rows, paste(estimator, names(rows), sep = "."))
  })
  out <- as.matrix(do.call(cbind, columns))
  rownames(out) <- unique(table$term)
  out
}

# The corrected intervals' mean width over the coded rows' alone, over the
# terms where both are finite (a level of one coded row gives its terms none).
width_ratio <- function(record) {
  width <- function(e) with(record$estimates[record$estimates$estimator == e, ], conf.high - conf.low)
  finite <- is.finite(width("corrected")) & is.finite(width("coded_only"))
  mean(width("corrected")[finite]) / mean(width("coded_only")[finite])
}

table_lines <- function(table, row.names = FALSE) {
  utils::capture.output(print(table, row.names = row.names, right = TRUE))
}

# a message written over several source lines, as one line wrapped to the width
wrapped <- function(text) within_width(gsub("\\s+", " ", text), exdent = 2)

# The rows, the domain, the coded rows and the target.
rows_words <- function(record) {
  domain <- if (!is.null(record$data_rows) && record$data_rows != record$rows) {
    sprintf(" in the domain (of %s; rows without a label, prediction or covariate are outside it)",
            format_count(record$data_rows))
  }
  sprintf("%s rows%s, %d coded by hand; intervals for the %s", format_count(record$rows), domain %||% "",
          record$coded, target_words[[record$target]])
}

# The design, the variance and intervals, the predictions and the learner.
method_lines <- function(record, design = TRUE) {
  wrapped(c(if (design) paste0("Design: ", paste(design_lines(record)[1:3], collapse = "; "), "."),
            paste0("Variance: ", variance_words(record), "; intervals: ", interval_words(record), "."),
            paste0("Predictions: ", record$prediction_model, "."),
            if (!is.null(record$learner)) paste0("Labels: ", learner_words(record$learner), ".")))
}

design_lines <- function(record) {
  design <- record$design
  unit <- if (design$sampling_unit == ".row") "rows drawn one by one" else
    sprintf("clusters of %s drawn whole (%d coded of %d)", design$sampling_unit, design$clusters_drawn,
            design$clusters)
  c(sprintf("%s, weights %s", unit, weights_words(design)),
    sprintf("%d strat%s, the fewest coded %s in one %d%s", design$strata, if (design$strata == 1) "um" else "a",
            if (design$sampling_unit == ".row") "rows" else "clusters", design$fewest_coded, if (length(design$collapsed) > 0) {
              paste0(" (collapsed for the variance: ", paste(design$collapsed, collapse = ", "), ")")
            } else ""),
    paste("lost rows:", lost_words(design)),
    paste("clusters sharing errors:", design$cluster %||% "none"),
    paste("read from", design$read_from))
}

weights_words <- function(design) {
  if (design$equal_weights) return(sprintf("equal (1 / pi = %.3g)", design$weights[[1]]))
  # strata of one probability but for their rounding
  sprintf("%s (1 / pi from %.3g to %.3g)", if (design$weights[[2]] < 1.05 * design$weights[[1]]) "nearly equal" else
    "unequal", design$weights[[1]], design$weights[[2]])
}

lost_words <- function(design) {
  split <- design$split %||% 0L
  if (design$lost == 0 && split == 0) return(sprintf("none of %d drawn", design$drawn))
  paste(c(if (design$lost > 0) {
    sprintf("%d of %d drawn (%.1f%%), reweighted as if missing at random within their stratum or cluster",
            design$lost, design$drawn, 100 * design$lost / design$drawn)
  } else sprintf("none of %d drawn", design$drawn),
  if (split > 0) {
    sprintf("%d (%.1f%%) whose coders disagree, each coder's code weighted 1 / their number", split,
            100 * split / design$drawn)
  }), collapse = "; ")
}

# The texts without one decided code (lost, or their coders' codes split),
# and what they could do: for shares, Manski's bounds were they all of one
# label beside the estimate; for a regression, that its bounds are not
# simple, not a made-up pair.
undecided_lines <- function(record, table = NULL) {
  design <- record$design
  undecided <- design$lost + (design$split %||% 0L)
  if (undecided == 0) return(character())
  split <- design$split %||% 0L
  words <- sprintf("Undecided texts: %d of %d drawn (%.1f%%), %s", undecided, design$drawn, 100 * undecided / design$drawn,
                   if (split == 0) "without a code" else if (design$lost == 0) "split between their coders' codes" else
                     sprintf("%d without a code, %d split between their coders' codes", design$lost, split))
  if (is.null(table)) {
    return(c("", wrapped(paste0(words, ". Bounds for a coefficient were they all of one label are not simple (a slope
                                 moves with where those texts lie, not only with how many they are), so none is given
                                 here: adjudicate them, or see label_shares() for the bounds of a share."))))
  }
  bounds <- record$lost_bounds
  if (is.null(bounds)) {
    return(c("", wrapped(paste0(words, ". They were left out of the coded rows, so no bounds are given: keep every
                                 drawn row, its code NA where it has none."))))
  }
  corrected <- table[table$estimator == "corrected", , drop = FALSE]
  keys <- corrected[seq_len(match("label", names(corrected)))]
  keys$term <- NULL
  # the bounds' terms as the table's: the label, or the group and the label
  at <- match(corrected$term, ifelse(bounds$term == "(Intercept)", bounds$label, paste(bounds$term, bounds$label,
                                                                                       sep = ": ")))
  shown <- data.frame(keys, corrected = sprintf("%.3f", corrected$estimate),
                 bounds = sprintf("[%.3f, %.3f]", corrected$bound.low, corrected$bound.high),
                 `their interval` = sprintf("[%.3f, %.3f]", bounds$conf.low[at], bounds$conf.high[at]),
                 check.names = FALSE)
  c("", wrapped(paste0(words, ". Were they all of one label, or none of it, the corrected shares would be (Manski's
                         bounds):")), table_lines(shown))
}

variance_words <- function(record) {
  parts <- if (record$target == "population") {
    "the corpus part (the population around the corpus) plus the sampling part (which rows were coded; \"sampling\":
     its share)"
  } else {
    "the sampling part alone (which rows were coded), for the corpus"
  }
  paste0("design-based, ", parts, if (record$small_sample) ", HC2 on the coded rows",
         if (!is.null(record$design$cluster)) paste0(", cluster-robust by ", record$design$cluster),
         if (length(record$variance_pooled) > 0) {
           paste0(", the spread of codes in general borrowed by strata with few and alike coded rows (",
                  paste(record$variance_pooled, collapse = ", "), ")")
         },
         if (length(record$variance_levels) > 0) {
           paste0(if (identical(record$variance_levels_rule, "few")) {
             ", for a level of fewer than 10 coded rows their residuals' spread weighed with all coded rows' ("
           } else {
             ", at least that of the adjusted proportion of their codes where the coded rows of a level agree ("
           }, paste(record$variance_levels, collapse = ", "), ")")
         },
         if (isTRUE(record$variance_floored)) {
           paste(", at least that of an error rate of (z^2 / 2) / (n + z^2) (Wilson's centre for no error among the",
                 "coded rows)")
         },
         if (length(record$beyond_reach) > 0) {
           paste0(", the coded rows alone where ", paste(record$beyond_reach, collapse = ", "),
                  " lies beyond their reach or has a long tail")
         },
         if (!is.null(record$learner_dependence)) {
           sprintf(paste(", plus the predictions' dependence on the coded rows (a delete-a-group jackknife over %d",
                         "groups, the folds' learners fitted again: %s of the variance)"),
                   record$learner_dependence$groups, added_words(record$learner_dependence$share))
         })
}

# The share of the variance that was added (`share`, of the variance before,
# one an estimate): "12%", or "0-31%" over several estimates.
added_words <- function(share) {
  percent <- unique(round(100 * range(share / (1 + share))))
  paste0(paste(percent, collapse = "-"), "%")
}

interval_words <- function(record) {
  quantile <- if (!is.finite(record$df)) "normal" else {
    sprintf(paste("t on each estimate's small-sample degrees of freedom (Bell and McCaffrey's, as Imbens and Kolesar",
                  "advise: the df column), at most the design's %d"), round(record$design_df))
  }
  if (record$interval == "wilson") return(paste("Wilson's score at the effective n,", quantile))
  paste0(quantile, ", bent by each estimate's skew (Hall's transformation: the skewness column)")
}

learner_words <- function(learner) {
  if (is.null(learner)) return(NULL)
  accuracy <- if (!is.na(learner$accuracy)) sprintf(", cross-validated accuracy %.3f", learner$accuracy) else ""
  if (!learner$kept) {
    return(sprintf("%s's guard kept the labels as annotated%s%s", learner$verb, accuracy,
                   if (isTRUE(learner$in_folds)) {
                     "; with rounds drawn since, its learner is fitted in each fold on every round's codes"
                   } else ""))
  }
  sprintf("learned by %s (%s; features: %s)%s, let through by its guard", learner$verb, learner$model,
          learner$features, accuracy)
}
