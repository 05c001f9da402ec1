# What the coded rows reach: a covariate's range and tail (covariate_reach()),
# and a numeric answer's values (warn_answer_reach()), beyond which the
# predictions go unchecked.

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
  n <- length(sample$rows)
  sampled <- sampled_rows(sample, target, nrow(x))
  leverage <- vapply(continuous, function(column) reach_leverage(x[, column], sample, sampled), 0)
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

# The rows a draw can miss: for the corpus's estimate the rows not drawn whole
# (review_sample(tail =)), whose codes are known; the population's rests on
# every row's (a round's rows by their round's probability: their combined
# one is a weight).
sampled_rows <- function(sample, target, n_rows) {
  whole <- sample$rows[taken_whole(sample$round_prob %||% sample$prob)]
  if (target == "corpus") setdiff(seq_len(n_rows), whole) else seq_len(n_rows)
}

# The largest leverage one of the `sampled` rows would have on the coded rows'
# fit of `values` (every row's): (1 + z^2) / n, z its distance from the coded
# rows' mean in their standard deviations, both weighted by 1 / pi.
reach_leverage <- function(values, sample, sampled) {
  w <- 1 / sample$prob
  coded <- values[sample$rows]
  centre <- sum(w * coded) / sum(w)
  spread <- sum(w * (coded - centre)^2) / sum(w)
  (1 + max((values[sampled] - centre)^2) / spread) / length(sample$rows)
}

# A numeric answer's values far beyond the coded rows' answers (a leverage
# over leverage_limit, as a covariate's) are answers whose errors no code
# checks. A count the model answers ten times too large on 1% of 3,000 rows,
# 150 uniform coded rows: the corpus's mean covered 0.737 (0.569
# heavy-tailed), 0.03 and 0.00 in the draws whose coded rows caught none of
# those errors, and 0.868 with the answers' tail drawn whole. Warned, the
# estimate as it is: the same heavy-tailed count answered within one on every
# row covers 0.948 at 0.12x the coded rows' width, and its coded rows look
# like those of the draws that miss.
warn_answer_reach <- function(answers, sample, target, name) {
  sampled <- sampled_rows(sample, target, length(answers))
  if (length(unique(answers[sample$rows])) < 2 || reach_leverage(answers, sample, sampled) <= leverage_limit) {
    return(invisible())
  }
  warn_newrllama4("answer_reach", c(
    "The model's answers of {.field {name}} reach {format(max(abs(answers[sampled])), digits = 3)}, far beyond the
     coded rows' ({format(max(abs(answers[sample$rows])), digits = 3)}): errors there are unchecked, and where a few
     are large the interval misses.",
    "i" = "Draw the answers' tail whole ({.code review_sample(data, n, tail = {name})}), or code more rows."))
}
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
