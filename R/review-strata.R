# The strata of a draw: the labels and their confidence bands, a covariate's
# tail taken whole, and the rows each stratum gets.

# The strata of `data`'s labelled rows: `stratum`, each row's stratum (NA for
# rows without a label), and `strata`, a table of their names, labels,
# confidence bands, sizes and the doubt that weighs their share. Up to
# `n_bands` bands a label: no more than the first sample can draw from.
sample_design <- function(data, weight, n_bands) {
  labelled <- which(!is.na(data$.label))
  labels <- droplevels(as.factor(data$.label[labelled]))
  confidence <- data$.confidence[labelled]
  band <- integer(length(labelled))
  for (label in levels(labels)) {
    mine <- which(labels == label)
    bands <- max(1L, min(n_bands, length(mine) %/% 2L))
    # thirds by rank, so that ties cannot empty a band; least sure first
    band[mine] <- as.integer(ceiling(rank(confidence[mine], ties.method = "first") * bands / length(mine)))
  }
  key <- interaction(labels, band, drop = TRUE, lex.order = TRUE)
  stratum <- rep(NA_integer_, nrow(data))
  stratum[labelled] <- as.integer(key)
  members <- split(seq_along(labelled), key)
  strata <- data.frame(
    label = vapply(members, function(i) as.character(labels[i[1]]), ""),
    band = vapply(members, function(i) band[i[1]], 1L),
    rows = lengths(members),
    row.names = NULL, stringsAsFactors = FALSE
  )
  n_bands_of <- as.vector(tapply(strata$band, strata$label, max)[strata$label])
  strata$band <- ifelse(n_bands_of == 1, NA_character_,
                               confidence_bands[ifelse(n_bands_of == 2 & strata$band == 2, 3, strata$band)])
  strata$name <- ifelse(is.na(strata$band), strata$label, paste0(strata$label, " (", strata$band, ")"))
  strata$doubt <- if (weight == "uniform") 1 else vapply(members, function(i) mean(doubt_of(confidence[i])), 0) + doubt_floor
  strata$whole <- FALSE

  list(stratum = stratum, strata = strata)
}

confidence_bands <- c("least sure", "middle", "most sure")

# A stratum's label and confidence band (its position among
# `confidence_bands`, NA for a label drawn in one stratum), from its name.
stratum_parts <- function(names) {
  pattern <- paste0("^(.*) \\((", paste(confidence_bands, collapse = "|"), ")\\)$")
  banded <- grepl(pattern, names)
  list(label = ifelse(banded, sub(pattern, "\\1", names), names),
       band = ifelse(banded, match(sub(pattern, "\\2", names), confidence_bands), NA_integer_))
}

# The rows review_sample() draws from each stratum at least, where `n`
# allows: with two or three coded rows a stratum's variance is often 0 by
# chance (its codes alike), and the corrected interval then far too narrow (a
# thin stratum of a coin-flip label, 2 of 50 coded rows: 0.823 coverage; with
# 5 rows 0.970).
stratum_floor <- 5L

# `n` draws shared among strata of `sizes` rows in proportion to size times
# `weights`, none over its size, by largest remainder, after `least` each
# where `n` allows: otherwise the same number each for as many as `n` allows
# (the largest strata first), one at a time.
allocate_sample <- function(n, sizes, weights = rep(1, length(sizes)), least = pmin(sizes, 1L)) {
  least <- pmin(least, sizes)
  share <- integer(length(sizes))
  for (level in seq_len(max(least, 0L))) {
    short <- which(share < least & share < level)
    short <- short[order(-sizes[short])]
    take <- short[seq_len(min(length(short), n - sum(share)))]
    share[take] <- share[take] + 1L
  }
  repeat {
    rest <- n - sum(share)
    room <- sizes - share
    if (rest <= 0 || sum(room) == 0) break
    demand <- ifelse(room > 0, sizes * weights, 0)
    quota <- pmin(rest * demand / sum(demand), room)
    whole <- floor(quota)
    if (sum(whole) == 0) {
      extra <- order(quota, decreasing = TRUE)[seq_len(min(rest, sum(quota > 0)))]
      share[extra] <- share[extra] + 1L
    } else {
      share <- share + as.integer(whole)
    }
  }
  as.integer(share)
}

# The rows of `rows` that review_sample(tail =) takes whole, drawing `n`: the
# values farthest from their median, as few as leave the rest's skewness
# within skew_limit, the bound past which covariate_reach() calls a
# covariate's tail long; and where the tail is long, also every row that a
# draw of `n` for a slope would take with certainty: Neyman allocation for a
# slope draws a row in proportion to its distance from the mean (its
# influence on the slope), and a row whose share reaches one is taken whole
# (the take-all stratum of skewed populations, Hidiroglou 1986). A few rows
# far out carry a slope on such a covariate, and a uniform draw that misses
# them gives an estimate off to one side with a standard error too small: a
# lognormal covariate, 1,000 uniform coded rows of 2,000, the corpus's slope
# covered 0.85; its 14 or so rows farthest out taken whole, 0.946 over 1,000
# draws; with the rows a draw of 1,000 takes with certainty too (about 200),
# 0.955, the interval 0.68x as wide (docs/benchmarks.md). At 150 coded rows
# the skewness's rows are the more (the certainty rows are 1-5). Rows taken
# whole are known exactly: they add nothing to the sampling variance, and the
# rest is a stratum of rows drawn alike.
tail_rows <- function(values, rows, n = 0L) {
  v <- values[rows]
  order_out <- order(abs(v - stats::median(v)), decreasing = TRUE)
  centred <- (v - mean(v))[order_out]
  # the rest's moments after taking the first k, for k = 0, 1, ...
  left <- function(power) sum(centred^power) - c(0, cumsum(centred^power))
  count <- length(v) - seq(0, length(v))
  mean_left <- left(1) / count
  second <- left(2) / count - mean_left^2
  third <- left(3) / count - 3 * mean_left * left(2) / count + 2 * mean_left^3
  skewness <- ifelse(count > 2 & second > 0, third / pmax(second, 1e-300)^1.5, 0)
  taken <- which(abs(skewness) <= skew_limit)[1] - 1L
  if (taken == 0) return(rows[integer()])
  size <- abs(v - mean(v))
  by_size <- order(size, decreasing = TRUE)
  sorted <- size[by_size]
  # the first k rows taken, is the next one's share of the n - k draws left below one?
  k <- seq_along(sorted) - 1L
  certain <- which((n - k) * sorted < sum(sorted) - c(0, cumsum(sorted))[seq_along(sorted)])[1] - 1L
  if (is.na(certain)) certain <- length(sorted)
  rows[union(order_out[seq_len(taken)], by_size[seq_len(certain)])]
}

# `design` (sample_design()'s) with the rows tail_rows() picks of the column
# `tail` for a draw of `n` moved into a stratum of their own, named "tail of
# <column>", which review_sample() draws whole; strata left empty are dropped.
# A further round keeps the first draw's tail (`previous`'s rows in it): its
# rows were all drawn then.
with_tail_stratum <- function(design, data, tail, n, previous, call) {
  values <- data[[tail]]
  labelled <- which(!is.na(design$stratum))
  if (!is.numeric(values) || anyNA(values[labelled])) {
    abort_invalid("{.arg tail} must name a numeric column of {.arg data} without missing values in its labelled
                   rows, not {.field {tail}}.", "tail", call)
  }
  name <- paste("tail of", tail)
  kept <- if (is.data.frame(previous) && all(c(".row", ".stratum") %in% names(previous))) {
    as.integer(previous$.row[as.character(previous$.stratum) == name])
  }
  # a first draw without the tail differs from this design: previous_rows() says so
  taken <- if (length(kept) > 0) kept else tail_rows(values, labelled, if (is.null(previous)) n else NROW(previous))
  if (length(taken) == 0) return(design)
  stratum <- design$stratum
  stratum[taken] <- 0L
  kept <- which(tabulate(stratum[stratum > 0], nrow(design$strata)) > 0)
  strata <- design$strata[kept, , drop = FALSE]
  strata$rows <- tabulate(match(stratum, kept), length(kept))
  strata <- rbind(strata, data.frame(label = NA_character_, band = NA_character_, rows = length(taken),
                                     name = name, doubt = 1, whole = TRUE))
  stratum <- ifelse(stratum == 0L, nrow(strata), match(stratum, kept))
  list(stratum = stratum, strata = strata)
}

# `n` draws shared among `strata` with `room` rows not drawn yet: every row
# left of a stratum drawn whole, and the rest by allocate_sample(), at least
# one a stratum.
allocate_strata <- function(n, room, strata, least, call = caller_env()) {
  draws <- ifelse(strata$whole, room, 0L)
  others <- !strata$whole
  if (any(strata$whole) && n < sum(draws) + sum(others & room > 0)) {
    abort_invalid(c("{.arg n} is {n}, too few to take {.val {strata$name[strata$whole]}} whole ({sum(draws)} row{?s}
                     left) and draw from the {sum(others & room > 0)} other strat{?um/a}.",
                    "i" = "Draw at least {sum(draws) + sum(others & room > 0)} rows."), "n", call)
  }
  draws[others] <- allocate_sample(n - sum(draws), room[others], strata$doubt[others], least[others])
  as.integer(draws)
}

# The rows each stratum gets before the rest is shared: all of a stratum drawn
# whole, else stratum_floor (or all its rows, where fewer).
stratum_least <- function(strata) ifelse(strata$whole, strata$rows, pmin(strata$rows, stratum_floor))

# The clusters a draw of `n` in proportion to their `sizes` would take with
# certainty, largest first: each whose share of the rows left, times the
# draws left, reaches one (the take-all stratum of skewed populations,
# Hidiroglou 1986), at most n - 2 so that two are drawn at random and their
# spread estimates the rest's variance. A few speakers holding much of the
# corpus otherwise carry the estimate when drawn and leave it off with a small
# standard error when not: 60 speakers of lognormal sizes (sd of the log 1.5),
# 10 drawn, the corpus's share covered 0.902 drawn uniformly, 0.948 with the
# 2 largest or so taken whole and the draws still too skewed stopped (500
# draws; findings-cluster-sizes.R has the rest).
largest_clusters <- function(sizes, n) {
  if (n >= length(sizes) || n < 3) return(character())
  sorted <- sort(sizes, decreasing = TRUE)
  taken <- seq_along(sorted) - 1L
  left <- sum(sorted) - c(0, cumsum(sorted))[seq_along(sorted)]
  certain <- which((n - taken) * sorted < left)[1] - 1L
  names(sorted)[seq_len(min(certain, n - 2L))]
}
