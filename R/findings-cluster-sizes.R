# Clusters drawn whole whose sizes differ much. The corpus's estimate adds to
# the predictions each drawn cluster's total of residuals over its probability
# (Horvitz-Thompson), and a cluster's total grows with its rows: where a few
# speakers hold much of the corpus, the estimate rests on whether they are
# drawn, its distribution is skewed, and its standard error is small just
# where it is off. 60 speakers of lognormal sizes (median 20 texts, sd of the
# log 0.75-2), 10 drawn whole, the corpus's share of a label the model
# undercounts: 0.975, 0.945, 0.930, 0.895, 0.830, 0.765 as the sizes spread
# (200 draws each; the coded rows alone 0.930 to 0.630). The skewness the
# design gives each coefficient, were every row's residual alike
# (cluster_total_skewness() of the clusters' totals of its direction), reads
# the risk off the corpus's known sizes; it stops where the sizes' own total
# and a coefficient are both past the limit. With the largest taken whole
# (review_sample()), 10 drawn, sd of the log 1-2 (1,200 draws), coverage was
# 0.963 and 0.939 where it was 0.3-0.5 and 0.5-0.6, 0.905 at 0.6-0.7, 0.858 at
# 0.7-0.8 and 0.788 past 1 (drawn uniformly, 2,400 draws: 0.943-0.983 up to
# 0.7, 0.894 at 0.7-0.8); under cluster_skew_limit it covered 0.935, 0.944 and
# 0.937 at sd 1, 1.5 and 2, stopping 11%, 33% and 69% of the draws. Past it
# the estimate stops with a classed error. With 20 drawn, the largest taken
# whole (4-10 of them), it seldom stops: 0.933, 0.947, 0.923 (300 draws; 0.832
# at sd 1.5 drawn uniformly). The population's estimate adds the corpus's own
# spread, which counts the clusters' sizes (0.950 where the corpus's covered
# 0.895), and is not held to it; nor are clusters taken whole with certainty,
# which add no variance. Sizes are not the whole of it: where the model's
# error rate differs between speakers as much as the truth does (the coverage
# matrix's speakers), 10 or 20 drawn cover 0.82-0.87 in every band of the
# sizes' skewness (docs/benchmarks.md).
cluster_skew_limit <- 0.65

#' @rdname label_regression
#' @section Clusters of very unequal sizes: Where clusters are drawn whole
#'   and a few hold much of the rows (speakers who speak most), the corpus's
#'   estimate rests on whether they are drawn: drawn at random, its interval
#'   misses more often than it says (60 speakers of lognormal sizes, 10 drawn,
#'   the corpus's share: 0.902 where the sd of the log is 1.5, 0.780 at 2).
#'   [review_sample()] takes whole the clusters a draw in proportion to size
#'   would take with certainty; where those drawn at random still differ too
#'   much (the design's skewness of each coefficient, were every row's
#'   residual alike, over 0.65), the corpus's estimate stops with
#'   `newrllama4_error_skewed_clusters`: draw more clusters, or rows one by one
#'   naming `cluster`. The population's estimate counts the clusters' sizes
#'   in its spread and is not held to it. The same holds for [label_shares()].
#' @name label_regression
NULL

check_cluster_sizes <- function(x, sample, target, cluster, call) {
  if (target != "corpus" || is.null(sample$unit) || is.null(sample$clusters)) return(invisible())
  prob <- sample$unit_prob %||% sample$prob
  whole <- taken_whole(prob)
  drawn <- unique(sample$unit[!whole])
  # a design of one stratum of clusters beside those taken whole is the one review_sample() draws
  if (length(drawn) < 2 || length(unique(signif(prob[!whole], 9))) != 1) return(invisible())
  bread <- tryCatch(solve(crossprod(x)), error = function(e) NULL)
  if (is.null(bread)) return(invisible())
  rest <- !sample$clusters %in% sample$unit[whole]
  # the clusters' sizes first: a level of a few speakers of one size skews its own coefficient's totals, which a
  # level seen through few clusters answers for (check_level_clusters()), and a slope on a covariate that varies
  # within speakers is not skewed by their sizes (0.94 where the share covered 0.895)
  totals <- rowsum(cbind(1, x[rest, , drop = FALSE] %*% bread), as.character(sample$clusters[rest]))
  skewness <- cluster_total_skewness(totals, length(drawn))
  if (abs(skewness[[1]]) <= cluster_skew_limit || all(abs(skewness[-1]) <= cluster_skew_limit)) return(invisible())
  skewness <- skewness[-1]
  sizes <- sort(table(as.character(sample$clusters[rest])), decreasing = TRUE)
  terms <- sub("^\\.group", "share in ", colnames(x)[abs(skewness) > cluster_skew_limit])
  terms[terms == "(Intercept)"] <- "share or intercept"
  abort_newrllama4("skewed_clusters", c(
    "The clusters of {.field {cluster}} differ much in size (the largest of those drawn at random holds
     {sizes[[1]]} of {sum(sizes)} rows, the median {stats::median(sizes)}): the corpus's {.field {terms}}
     {?rests/rest} on which of the largest are among the {length(drawn)} drawn, and
     {cli::qty(length(terms))}{?its/their} interval{?s} would miss more often than {?it says/they say} (the
     design's skewness {format(max(abs(skewness)), digits = 2)}, over {cluster_skew_limit}).",
    "i" = "Draw the clusters again with {.code review_sample(data, n, cluster = {cluster})}, which takes the largest
           whole, and more of them; or draw rows one by one ({.code review_sample(data, n)}) and name
           {.code cluster = {cluster}} to the estimator."), call = call)
}

# The skewness of the Horvitz-Thompson estimate of the sum of each column of
# `totals` (one row a cluster, every cluster known), drawn n of them without
# replacement: its third cumulant (total_third()) over its variance (a
# stratum's, stratum_weight() times the clusters' covariance) to the power 1.5.
cluster_total_skewness <- function(totals, n) {
  units <- nrow(totals)
  if (units < 3 || n >= units) return(rep(0, ncol(totals)))
  second <- stratum_weight(list(units = units, drawn = n)) * diag(stratum_cov(totals))
  ifelse(second > 0, total_third(units, n, totals) / pmax(second, 1e-300)^1.5, 0)
}
