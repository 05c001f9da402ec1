# What the coded rows hold of each level of the formula's factors (and each
# group of label_shares()): a level the coded rows miss, or see through one
# cluster only, has no variance the design can estimate.

# The model matrix's columns must each vary among the coded rows (`coded`, on
# their codes), or the correction has nothing to learn their errors from: a
# level with no coded rows (a main effect's reference level among them, of
# factor_levels()' `levels`) is an error naming it, one with fewer than 10 a
# warning. `clusters`: the coded rows' clusters (drawn whole or named), NULL
# where rows were drawn one by one; a level whose coded rows share one of
# several is an error too (check_level_clusters()).
check_coded_columns <- function(x, coded, levels, call, clusters = NULL) {
  if (qr(x)$rank < ncol(x)) {
    # a factor filtered (dplyr::filter(), subset()) keeps the levels it no longer has
    unused <- colnames(x)[colSums(x != 0) == 0]
    abort_invalid(c(if (length(unused) > 0) "{.field {unused}} {?has/have} no rows in {.arg data}."
                    else "The formula's covariates are collinear: drop or merge them.",
                    "i" = if (length(unused) > 0) "Drop the levels the data no longer have: {.code droplevels(data)}."),
                  "formula", call)
  }
  indicator <- apply(x, 2, function(column) all(column %in% c(0, 1))) & colnames(x) != "(Intercept)"
  references <- stats::setNames(lapply(levels$mains, `[[`, "columns"), vapply(levels$mains, `[[`, "", "reference"))
  references <- Filter(function(columns) all(indicator[columns]) && any(rowSums(x[, columns, drop = FALSE]) == 0),
                       references)
  # each level's coded rows: an indicator's ones, a reference's rows of all 0
  in_level <- c(lapply(which(indicator), function(j) coded[, j] != 0),
                lapply(references, function(columns) rowSums(coded[, columns, drop = FALSE]) == 0))
  coded_ones <- vapply(in_level, sum, 0)
  empty <- names(coded_ones)[coded_ones == 0]
  if (length(empty) > 0 || qr(coded)$rank < ncol(x)) {
    what <- if (length(empty) > 0) cli::format_inline("{.field {empty}}") else "the covariates"
    abort_newrllama4("too_few_coded", c(
      "No coded rows tell apart {what}.",
      "i" = "Code rows of each level (draw more with {.code review_sample(previous =)}), or merge levels."),
      call = call)
  }
  if (!is.null(clusters)) check_level_clusters(lapply(in_level, function(inside) clusters[inside]), clusters, call)
  thin <- names(coded_ones)[coded_ones < 10]
  if (length(thin) > 0) {
    warn_newrllama4("few_coded", c("Fewer than 10 coded rows in {.field {thin}}.",
                                   "i" = "Their intervals rest on too few rows to be trusted."))
  }
}

# Where the coded rows come in clusters (`clusters`, each coded row's), a level
# or group whose coded rows (`level_clusters`, their clusters by level) all
# share one has no spread between clusters to estimate its variance from:
# its residuals sum to 0 within that cluster. A party of 3 of 60 speakers, 10
# drawn whole, one of them of that party: its coefficient's interval from the
# coded rows alone covered 0.746 (a rating 0.770), its share's 0.115 at 0.07
# wide, and the corrected ones were 8-15 times the scale wide (t on 1 df).
check_level_clusters <- function(level_clusters, clusters, call) {
  if (length(unique(clusters)) < 2) return(invisible())
  lonely <- names(level_clusters)[lengths(lapply(level_clusters, unique)) == 1]
  if (length(lonely) == 0) return(invisible())
  abort_newrllama4("too_few_coded", c(
    "The coded rows of {.field {lonely}} all come from one cluster each: {cli::qty(length(lonely))}{?its/their}
     variance cannot be told from {?that cluster's/those clusters'} own.",
    "i" = "Code rows of more of {cli::qty(length(lonely))}{?its/their} clusters (draw more with
           {.code review_sample(previous =)}), or merge levels."), call = call)
}
