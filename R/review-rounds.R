# Rounds drawn by the learner's doubt: review_sample(weight = "learned") draws
# a further round from the rows not drawn yet, in bands of the learned labels'
# doubt, and the estimators read each round as drawn given the rounds before.
#
# A round is a stratified sample of the rows not drawn before, its strata
# named "round r: ..." (round_of()), each row's `.sample_prob` its probability
# of being drawn in its round. The estimators combine one estimate a round
# (the first sample, whatever its own draws, is round 1): round r's estimate
# takes the rows coded before it as known (drawn with certainty) and its own
# rows weighted by 1 / their round's probability, so it is unbiased given the
# past; the rounds' estimates, weighted by their shares of the rows drawn,
# are then unbiased, and their errors uncorrelated (each has mean zero given
# the rounds before), so the sampling variance is the sum of each round's
# stratified variance times its weight squared. This is the batched form of
# active inference (Zrnic and Candes 2024, section 4: one estimate a batch,
# each unbiased given the past, averaged); the sequential design's exact
# inclusion probabilities, the other road, cannot be known after more than
# one round of sampling without replacement from bands that the codes moved.

# Bands of doubt a round is drawn in, at most. The bands hold equal shares of
# the round's total doubt (plus doubt_floor), so that Neyman allocation gives
# each about as many rows, and there are as many as give each few_coded_units
# rows: no band is thin enough for its variance to borrow the spread of
# pooled_strata(), which for 0/1 codes is the codes' own, not the learner's
# residuals. Bands of equal size instead (the sure ones much larger than the
# unsure) had to be few (3 for 75 rows, no more than half the round at
# few_coded_units rows each) and kept 0.63-0.68 of the continuous Neyman
# allocation's gain; bands of 5 rows lost it to their floor. On
# tools/bench_coverage_matrix.R's rows (75 rows by doubt after 75 uniform,
# seeds 1-15) the round's model variance over a uniform round's was 0.832
# with 3 equal-size bands, 0.780 with 7 equal-doubt bands, against the
# bound's 0.760; with each row's actual squared residual for its variance
# 0.836 and 0.785.
doubt_bands <- 10L

# Added to a stratum's doubt when the sample is shared among strata, so that
# no stratum (no row) is left without a chance of being drawn.
doubt_floor <- 0.05

# The rows in order of their doubt plus doubt_floor, the most unsure first
# (ties by position): the order doubt_allocation() cuts its bands in.
doubt_ranks <- function(doubt) order(-(doubt + doubt_floor))

# The standard deviation of whether a label that is right with probability
# `confidence` is right: the doubt Neyman allocation weighs.
doubt_of <- function(confidence) sqrt(pmax(confidence * (1 - confidence), 0))

# Each row's doubt in `labelled` (a labels view): whether its label is right
# (its confidence), or with `label`, whether it has that label (its
# probability): the spread of a share of `label`'s error at that row. With
# five labels a row torn between two others is sure not to be `label`.
row_doubt <- function(labelled, label = NULL) {
  doubt_of(if (is.null(label)) labelled$.confidence else labelled[[paste0(".prob_", label)]])
}

round_pattern <- "^round ([0-9]+): "

# The round each stratum (by name) was drawn in: 1 for the first sample's.
round_of <- function(stratum) {
  round <- rep(1L, length(stratum))
  later <- grepl(round_pattern, stratum)
  round[later] <- as.integer(sub(paste0(round_pattern, ".*$"), "\\1", stratum[later]))
  round
}

# A further round drawn by the learned labels' doubt (review_sample(weight =
# "learned")): `n` rows of the labelled rows of `data` not in `previous`, in
# bands of their doubt (row_doubt(), of `label` where given;
# doubt_allocation()).
doubt_round <- function(data, labelled, n, seed, previous, cluster, field, label, call) {
  if (!is.null(cluster)) {
    abort_invalid("{.arg cluster} cannot be drawn by doubt: draw the clusters whole in one round.", "cluster", call)
  }
  if (is.null(previous)) {
    abort_invalid(c("{.code weight = \"learned\"} draws a further round where labels learned from a first round are
                     unsure: give that first round as {.arg previous}.",
                    "i" = "Draw the first round with {.code review_sample(weight = \"uniform\")}, code it, and learn the
                           labels from it with {.fn learn_labels}."), "previous", call)
  }
  record <- attr(data, "manifest", exact = TRUE)$prompt
  of_field <- function(key) record[[if (is.null(field)) key else paste0(key, " (", field, ")")]]
  # where learn_labels()'s guard kept the labels as annotated, their doubt is the learner's
  if (!identical(of_field("calibration"), "learned") && !identical(of_field("learner"), "none")) {
    abort_invalid("{.arg data} must be the value of {.fn learn_labels}: {.code weight = \"learned\"} draws where its
                   labels are unsure.", "data", call)
  }
  if (!is.data.frame(previous) || !all(c(".row", design_columns) %in% names(previous)) ||
      !is.numeric(previous$.row) || !all(previous$.row %in% seq_len(nrow(data))) || anyDuplicated(previous$.row)) {
    abort_invalid("{.arg previous} must be the rows drawn from {.arg data} by {.fn review_sample}, with their design
                   columns ({.field {c('.row', design_columns)}}).", "previous", call)
  }
  labels <- levels(as.factor(labelled$.label))
  if (!is.null(label) && (!rlang::is_string(label) || !label %in% labels ||
                          !paste0(".prob_", label) %in% names(labelled))) {
    abort_invalid(c("{.arg label} must be {.code NULL} or one of the learned labels, a string: {.val {labels}}.",
                    "i" = if (rlang::is_string(label) && label %in% labels) "{.arg data} has no {.field .prob_{label}}."),
                  "label", call)
  }
  if (!is.null(seed)) seed <- check_whole(seed, "seed", min = 0, max = .Machine$integer.max)
  warn_lost_rows(previous)
  rest <- setdiff(which(!is.na(labelled$.label)), previous$.row)
  if (n > length(rest)) {
    abort_invalid("{.arg n} is {n}, but {.arg data} has {length(rest)} labelled row{?s} not drawn yet.", "n", call)
  }
  allocation <- doubt_allocation(row_doubt(labelled, label)[rest], n)
  band <- allocation$band
  sizes <- allocation$sizes
  draws <- allocation$draws
  bands <- length(sizes)
  round <- max(previous[[".draw"]] %||% 1L) + 1L
  whose <- if (is.null(label)) "doubt" else paste0("doubt of ", label, ",")
  strata <- data.frame(name = sprintf("round %d: %s band %d of %d", round, whose, seq_len(bands), bands),
                       label = NA_character_, band = NA_character_, rows = sizes, drawn = draws, prob = draws / sizes,
                       stringsAsFactors = FALSE)
  draw <- function() {
    unlist(lapply(which(draws > 0), function(h) {
      rows <- rest[band == h]
      rows[sample.int(length(rows), draws[h])]
    }), use.names = FALSE)
  }
  drawn <- sort(with_optional_seed(seed, draw()))
  sample <- data[drawn, , drop = FALSE]
  sample$.row <- drawn
  sample$.draw <- rep(round, length(drawn))
  sample <- with_design_columns(sample, strata, band[match(drawn, rest)])
  previous$.draw <- previous[[".draw"]] %||% rep(1L, nrow(previous))
  sample <- bind_rows_filled(previous, sample)
  sample <- sample[order(sample$.row), , drop = FALSE]
  rownames(sample) <- NULL
  before <- attr(previous, "design", exact = TRUE)$strata
  attr(sample, "design") <- structure(
    list(weight = "learned", field = field %||% ".label", label = label, n_bands = bands,
         strata = rbind(before[names(strata)], strata), rounds = round),
    class = "newrllama4_sample_design"
  )
  sample
}

# A round of `n` rows drawn by `doubt` (each row's, of the rows not drawn
# yet): each row's band (1 the most unsure; cut in the order of doubt, ties by
# position, where the doubt plus doubt_floor summed from the most unsure row
# passes each band's share of its total), the bands' sizes and their draws,
# shared by Neyman allocation on the bands' mean doubt plus doubt_floor,
# few_coded_units rows a band at least. `ranked`: the rows from the most
# unsure (doubt_ranks()), given where many rounds of one doubt are tried.
doubt_allocation <- function(doubt, n, ranked = doubt_ranks(doubt)) {
  weight <- doubt + doubt_floor
  bands <- max(1L, min(doubt_bands, n %/% few_coded_units, length(doubt) %/% 2L))
  passed <- cumsum(weight[ranked]) / sum(weight)
  band <- integer(length(doubt))
  band[ranked] <- pmin(bands, pmax(1L, as.integer(ceiling(passed * bands - 1e-9))))
  # a row heavier than a band's share leaves the band after it empty
  band <- match(band, sort(unique(band)))
  sizes <- tabulate(band)
  draws <- allocate_sample(n, sizes, as.vector(tapply(weight, band, mean)), least = pmin(sizes, few_coded_units))
  list(band = band, sizes = sizes, draws = draws)
}

# The sampling variance of a round of `n` rows drawn by `doubt` over that of
# `n` uniform rows from the same rows, were each row's error variance
# `variance` (by default as a label right with its confidence says, doubt^2;
# doubt_variance() for what the coded rows say): with `n` NULL, the Neyman
# bound, the round drawn in proportion to each row's error sd itself (no
# bands, no floor, no finite-population correction), mean(sd)^2 / mean(sd^2).
doubt_variance_ratio <- function(doubt, n = NULL, variance = doubt^2, ranked = doubt_ranks(doubt)) {
  if (is.null(n)) return(mean(sqrt(variance))^2 / mean(variance))
  allocation <- doubt_allocation(doubt, n, ranked)
  spread <- as.vector(tapply(variance, allocation$band, mean))
  sizes <- allocation$sizes
  draws <- allocation$draws
  by_doubt <- sum(sizes^2 * spread * (1 / draws - 1 / sizes))
  uniform <- length(doubt)^2 * mean(variance) * (1 / n - 1 / length(doubt))
  if (uniform > 0) by_doubt / uniform else 1
}

# Each row's error variance for a round by doubt (row_doubt(), of `label`
# where given), as the coded rows the labels were learned from say it is:
# their squared errors (cross-fitted probabilities against their codes, a
# split text's codes at their shares) fitted by weighted least squares on the
# variance their doubt promised, a + b d^2 with a and b at least 0, at every
# row's doubt d. An overconfident learner's sure rows err more often than
# their doubt says (a > 0), and its doubt ranks the rows less sharply than it
# claims (b < 1). Gemma 3 270M's learner on 75 coded words promised a round
# 0.50 of a uniform round's variance where its codes said 0.80, and two
# rounds came out 0.972 of 150 uniform rows' width over 50 draws: 0.948 by
# the codes, 0.866 by the doubt (tools/bench_learned.R). Labels with no
# learner's codes: the doubt as it promises, d^2.
doubt_variance <- function(labelled, label = NULL) {
  doubt <- row_doubt(labelled, label)
  learner <- attr(labelled, "learner", exact = TRUE)
  known <- !is.na(learner$coded_rows %||% NA) & !is.na(learner$codes %||% NA)
  if (sum(known) < 3) return(doubt^2)
  rows <- learner$coded_rows[known]
  right <- if (is.null(label)) learner$codes[known] == as.character(labelled$.label[rows]) else
    learner$codes[known] == label
  probability <- if (is.null(label)) labelled$.confidence[rows] else labelled[[paste0(".prob_", label)]][rows]
  errors <- (right - probability)^2
  weights <- learner$code_weights[known] %||% rep(1, length(rows))
  promised <- doubt[rows]^2
  fit <- if (stats::var(promised) > 0) stats::coef(stats::lm.wfit(cbind(1, promised), errors, weights)) else c(0, 0)
  if (!(fit[[2]] > 0)) return(rep(stats::weighted.mean(errors, weights), length(doubt)))
  if (fit[[1]] < 0) fit <- c(0, sum(weights * errors * promised) / sum(weights * promised^2))
  fit[[1]] + fit[[2]] * doubt^2
}

# The coded rows' design (coded_design(), after responding()) with rounds
# drawn by doubt combined: each row's `round` (1 for the first sample), its
# round's probability (`round_prob`) and the round's weight in the combined
# estimate (`round_weight`: its share of the rows drawn), and `prob` the
# inverse of the row's weight in it, 1 / (w_r / pi + the later rounds' w),
# since round s takes the rows coded before it as known. The point estimates
# read `prob` as any design's; the sampling variance reads each round's
# strata with its own probabilities, each row's terms times its round's
# weight (stratum_units()). Without rounds, the design as it was.
with_rounds <- function(design) {
  if (is.null(design$prob) || is.null(design$stratum)) return(design)
  round <- round_of(design$stratum)
  if (all(round == 1L)) return(design)
  drawn <- as.vector(tapply(design$strata$drawn, round_of(design$strata$name), sum))
  rounds <- sort(unique(round_of(design$strata$name)))
  weight <- drawn / sum(drawn)
  later <- rev(cumsum(rev(weight))) - weight
  position <- match(round, rounds)
  design$round <- round
  design$round_prob <- design$prob
  design$round_weight <- unname(weight[position])
  design$prob <- unname(1 / (weight[position] / design$prob + later[position]))
  design$round_weights <- stats::setNames(weight, rounds)
  design
}
