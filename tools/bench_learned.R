# Labels learned from the coded rows against the zero-shot labels and the
# refit, and what they do to a finding (issue 53): on three labelled word
# corpora large enough to code 300 rows and score the rest (1,000 Bing lexicon
# words, 700 nouns and verbs, 1,000 words of five parts of speech;
# tools/annotation-corpora.R) and both embedded models. Each corpus is
# annotated once, zero-shot, with features = TRUE (kept in build/bench-learned/
# so that a second run only learns). Then for 50, 100, 150 and 300 coded rows,
# drawn by review_sample(weight = "uniform") with the gold labels standing in
# for the coders', `draws` times: the accuracy on the rows not coded of the
# zero-shot labels, of recalibrate_labels() and of learn_labels(); and the
# width of the corrected 95% interval of the largest label's share
# (label_shares()) with the zero-shot and with the learned labels, each over
# the coded rows' alone.
#
# With `rounds`, the two-round design of issue 61 instead, on the same
# learner: 150 uniform coded rows against 75 uniform and 75 drawn where the
# labels learned from those 75 are unsure about the reported share's label
# (review_sample(weight = "learned", label =); the estimators fit the
# learner again on all 150 in their folds). Per corpus
# and model: the corpus share's 95% interval (target "corpus") in each design,
# its coverage, the widths over the coded rows' alone and the two-round
# width over 150 uniform rows', beside the round's Neyman bound (its sampling
# variance over a uniform round's, drawn in proportion to the learned doubt,
# mean(d)^2 / mean(d^2)), the round's variance by its bands of doubt over a
# uniform round's were each row's error as spread as its doubt says (what the
# bands keep of the bound), the same with each row's error as spread as the
# first round's codes say its doubt is worth (`calibrated`, doubt_variance(),
# as coded_rows_needed() plans), and the design's, sqrt((1 + bound) / 2): the width
# the two rounds would have over 150 uniform rows were the bound reached and
# the rounds' variances alike (the learner the same); and `given_learner`,
# the two rounds' sampling variance over 150 uniform rows', each computed from
# every row's gold label at the learner the estimators fitted in that draw
# (the design's own variance, without the noise of estimating it from the
# coded rows), as a width ratio; `jackknife`, the share of each interval's
# variance that the learner's dependence on the coded rows added
# (learner_dependence()); `best_bands`, the two rounds' variance at that
# learner had the round's rows been shared among its bands by Neyman
# allocation on the errors' own spread (the least any allocation over those
# bands, two rows a band at least, gives), as a width ratio;
# `design_fitted_bound`, the design's bound by the doubt of the learner
# fitted rather than the 75-row learner's (where the rounds fall short of the
# bound: the bands' allocation, or a learner whose doubt flattens as it
# learns); `z_spread`, the root mean square of each
# estimate's error over its standard error (1 where the intervals are as wide
# as the estimates' spread asks). The estimators learn
# again from all 150 rows in their folds, so a learner that learns more from
# rows near its boundary can narrow the interval past that. Each draw's
# figures are appended to build/bench-learned/rounds-draws.csv as they come.
# With `three` instead of `rounds`, three rounds of 50 as well (50 uniform, 50
# by the doubt of labels learned from them, 50 by the doubt of labels learned
# from both rounds) on the same seeds, in build/bench-learned/three-draws.csv.
# An optional corpus name runs that one alone ("all" every corpus), and a
# model's name (as `models` spells it, "gemma3-270m") that model alone.
#   Rscript tools/bench_learned.R [draws|FROM:TO] [rounds|three] [corpus|all] [model]   (default 10: seeds 1-10)
suppressPackageStartupMessages(library(newrllama4))
source(file.path("tools", "annotation-corpora.R"))
arguments <- commandArgs(TRUE)
# draws: a count (seeds 1 to it) or a range of seeds, "11:50"
seeds <- if (length(arguments) >= 1) eval(str2lang(arguments[1])) else 1:10
seeds <- if (length(seeds) == 1) seq_len(seeds) else seeds
draws <- length(seeds)
rounds <- length(arguments) >= 2 && arguments[2] %in% c("rounds", "three")
three <- rounds && arguments[2] == "three"
only <- if (length(arguments) >= 3 && arguments[3] != "all") arguments[3]
only_model <- if (length(arguments) >= 4) arguments[4]
sizes <- c(50, 100, 150, 300)

corpora <- learned_corpora
models <- c("Gemma 3 270M" = "gemma3-270m", "SmolLM2 135M" = "smollm2-135m-instruct")
kept <- file.path("build", "bench-learned")
dir.create(kept, recursive = TRUE, showWarnings = FALSE)

annotated <- function(model, corpus_name) {
  path <- file.path(kept, sprintf("%s-%s.rds", models[[model]], corpus_name))
  if (file.exists(path)) return(readRDS(path))
  corpus <- corpora[[corpus_name]]()
  ctx <- context_create(model_load(models[[model]]), n_ctx = 1024L, n_seq_max = 8L)
  data <- suppressWarnings(annotate_texts(corpus$data, text, corpus$instruction, labels = corpus$labels,
                                          context = ctx, progress = FALSE, features = TRUE))
  saveRDS(data, path)
  data
}

# One draw of `size` coded rows: accuracies on the rows not coded, and the
# share's interval widths over the coded rows' alone.
one_draw <- function(data, size, seed, share_label) {
  coded <- review_sample(data, size, weight = "uniform", seed = seed)
  rest <- setdiff(seq_len(nrow(data)), coded$.row)
  accuracy <- function(labelled) mean(as.character(labelled$.label[rest]) == data$gold[rest])
  refit <- suppressMessages(suppressWarnings(recalibrate_labels(data, coded, gold)))
  learned <- suppressMessages(learn_labels(data, coded, gold))
  width <- function(labelled) {
    shares <- suppressMessages(suppressWarnings(label_shares(labelled, coded, gold, seed = seed)))
    shares <- shares[shares$label == share_label, ]
    spread <- shares$conf.high - shares$conf.low
    spread[shares$estimator == "corrected"] / spread[shares$estimator == "coded_only"]
  }
  c(zero_shot = accuracy(data), refit = accuracy(refit), learned = accuracy(learned),
    width_zero_shot = width(data), width_learned = width(learned))
}

# The share's sampling variance in the design `rounds` (each a list of its
# strata's rows and draws, and its weight in the combined estimate), were each
# stratum's spread that of the estimate's `errors` over all its rows: every row
# has its gold label here, so this is the design's own variance at the learner
# the draw fitted, without the noise of estimating it from the coded rows.
given_learner <- function(errors, rounds) {
  sum(vapply(rounds, function(round) {
    round$weight^2 * sum(vapply(seq_along(round$rows), function(h) {
      rows <- round$rows[[h]]
      if (length(rows) < 2) return(0)
      newrllama4:::stratum_weight(list(units = length(rows), drawn = round$drawn[[h]])) * stats::var(errors[rows])
    }, 0))
  }, 0)) / length(errors)^2
}

# A uniform sample's strata in `data`: the labels as annotated (review_sample()).
by_label <- function(data, sample, weight) {
  strata <- attr(sample, "design")$strata
  list(rows = lapply(strata$label, function(label) which(as.character(data$.label) == label)), drawn = strata$drawn,
       weight = weight)
}

# The corpus share of `share_label` from the labels `labelled` and the coded
# rows `coded` drawn in the design `rounds` (given_learner()'s): covered,
# width, over the coded rows' alone, given_learner, the jackknife's part, the
# error and its standard error; each row's errors and predictions as attributes.
share_interval <- function(data, labelled, coded, rounds, seed, share_label) {
  value <- mean(data$gold == share_label)
  coded_as <- as.numeric(data$gold == share_label)
  shares <- suppressMessages(suppressWarnings(label_shares(labelled, coded, gold, seed = seed, target = "corpus")))
  estimate <- attr(shares, "estimates")[[share_label]]
  shares <- shares[shares$label == share_label, ]
  corrected <- shares[shares$estimator == "corrected", ]
  coded_only <- shares[shares$estimator == "coded_only", ]
  width <- corrected$conf.high - corrected$conf.low
  errors <- coded_as[estimate$rows] - estimate$lambda[[1]] * estimate$predictions
  by_row <- function(x) stats::setNames(x, estimate$rows)[as.character(seq_len(nrow(data)))]
  structure(
    c(covered = corrected$conf.low <= value && value <= corrected$conf.high, width = width,
      over_coded = width / (coded_only$conf.high - coded_only$conf.low),
      given_learner = given_learner(by_row(errors), rounds),
      jackknife = rlang::`%||%`(estimate$parts$corrected$learner$share[[1]], 0),
      error = corrected$estimate - value, std_error = corrected$std.error),
    errors = by_row(errors), predictions = by_row(estimate$predictions)
  )
}

# A round of `n` rows drawn by the doubt of `share_label` in the labels
# `learned` after the rows of `previous`: the sample with every round, the
# round's design (given_learner()'s, at `weight`) and the Neyman bound of the
# learner's doubt over the rows not drawn.
doubt_round <- function(learned, previous, n, seed, share_label, weight) {
  rest <- setdiff(which(!is.na(learned$.label)), previous$.row)
  doubt <- newrllama4:::row_doubt(learned, share_label)[rest]
  sample <- review_sample(learned, n, weight = "learned", previous = previous, seed = seed, label = share_label)
  # the round's bands, as review_sample() cut them
  bands <- newrllama4:::doubt_allocation(doubt, n)
  list(sample = sample, design = list(rows = split(rest, bands$band), drawn = bands$draws, weight = weight),
       rest = rest, doubt = doubt, bound = newrllama4:::doubt_variance_ratio(doubt))
}

# The figures of one draw of the two-round design: covered, width, over_coded,
# given_learner, jackknife, error and std_error for each design, best_bands,
# fitted_bound, the bound, banded, calibrated.
two_round_figures <- 19L

# One draw of the two-round design against 150 uniform rows: for each, the
# corpus share's interval (covered, width, width over the coded rows'
# alone), and the round's Neyman bound.
two_rounds <- function(data, seed, share_label) {
  interval <- function(labelled, coded, rounds) share_interval(data, labelled, coded, rounds, seed, share_label)
  uniform <- review_sample(data, 150, weight = "uniform", seed = seed)
  one_round <- interval(suppressMessages(learn_labels(data, uniform, gold)), uniform, list(by_label(data, uniform, 1)))
  first <- review_sample(data, 75, weight = "uniform", seed = seed)
  learned <- suppressMessages(learn_labels(data, first, gold))
  # drawn by the doubt of the reported label (review_sample(label =)): for five labels the top label's
  # doubt draws rows torn between two other labels (1.058x against a bound of 0.970x over 14 draws at 9f9b20e)
  round <- doubt_round(learned, first, 75, seed + 1e6, share_label, 0.5)
  rest <- round$rest
  # each row's error variance as the first round's codes say the doubt is worth (coded_rows_needed() plans by it)
  variance <- newrllama4:::doubt_variance(learned, share_label)[rest]
  second <- round$design
  design <- list(by_label(data, first, 0.5), second)
  two <- interval(learned, round$sample, design)
  # best_bands and fitted_bound (the header): the same bands at the learner fitted, their draws by Neyman
  # allocation on its errors' spread
  errors <- attr(two, "errors")
  best <- second
  best$drawn <- newrllama4:::allocate_sample(75, lengths(second$rows),
                                             vapply(second$rows, function(rows) stats::sd(errors[rows]), 0),
                                             least = pmin(lengths(second$rows), 2L))
  c(uniform = one_round, rounds = two,
    best_bands = given_learner(errors, list(design[[1]], best)),
    fitted_bound = newrllama4:::doubt_variance_ratio(newrllama4:::doubt_of(attr(two, "predictions")[rest])),
    bound = round$bound,
    banded = newrllama4:::doubt_variance_ratio(round$doubt, 75),
    calibrated = newrllama4:::doubt_variance_ratio(round$doubt, 75, variance))
}

# One draw of three rounds of 50 (uniform, then by the doubt of labels learned
# from 50 rows, then from 100) beside two_rounds()' designs on the same seed:
# its interval's figures, the two rounds by doubt's bounds, and the design's
# bound sqrt((1 + bound_2 + bound_3) / 3), the width three rounds would have
# over 150 uniform rows were each round's bound reached.
three_round_figures <- two_round_figures + 9L
three_rounds <- function(data, seed, share_label) {
  two <- two_rounds(data, seed, share_label)
  first <- review_sample(data, 50, weight = "uniform", seed = seed)
  second <- doubt_round(suppressMessages(learn_labels(data, first, gold)), first, 50, seed + 1e6, share_label, 1 / 3)
  learned <- suppressMessages(learn_labels(data, second$sample, gold))
  third <- doubt_round(learned, second$sample, 50, seed + 2e6, share_label, 1 / 3)
  design <- list(by_label(data, first, 1 / 3), second$design, third$design)
  three <- share_interval(data, learned, third$sample, design, seed, share_label)
  c(two, three = three, bound_2 = second$bound, bound_3 = third$bound)
}

# The root mean square of a design's errors over their standard errors, over the draws (columns of `figures`).
z_spread <- function(figures, design) {
  sqrt(mean((figures[paste0(design, ".error"), ] / figures[paste0(design, ".std_error"), ])^2, na.rm = TRUE))
}

started <- Sys.time()
rows <- list()
for (model in if (is.null(only_model)) names(models) else names(models)[models == only_model]) {
  for (corpus_name in if (is.null(only)) names(corpora) else only) {
    data <- annotated(model, corpus_name)
    if (rounds) {
      share_label <- names(which.max(table(data$gold)))
      figures <- vapply(seeds, function(seed) {
        draw <- tryCatch(if (three) three_rounds(data, seed, share_label) else two_rounds(data, seed, share_label),
                         newrllama4_error = function(e) rep(NA_real_, if (three) three_round_figures else
                           two_round_figures))
        log <- file.path(kept, if (three) "three-draws.csv" else "rounds-draws.csv")
        line <- data.frame(model = model, corpus = corpus_name, seed = seed, t(draw))
        # a log of other columns (an older run's) is kept aside, not appended to
        if (file.exists(log) && !identical(names(utils::read.csv(log, nrows = 1)), names(line))) {
          file.rename(log, file.path(kept, format(Sys.time(), "rounds-draws-before-%Y%m%d%H%M%S.csv")))
        }
        utils::write.table(line, log, sep = ",", append = file.exists(log), col.names = !file.exists(log),
                           row.names = FALSE)
        draw
      }, numeric(if (three) three_round_figures else two_round_figures))
      means <- rowMeans(figures, na.rm = TRUE)
      rows[[length(rows) + 1]] <- data.frame(
        model = model, corpus = corpus_name, rows = nrow(data), draws = sum(!is.na(figures[1, ])),
        coverage_uniform = means[["uniform.covered"]], coverage_rounds = means[["rounds.covered"]],
        over_coded_uniform = means[["uniform.over_coded"]], over_coded_rounds = means[["rounds.over_coded"]],
        rounds_over_uniform = means[["rounds.width"]] / means[["uniform.width"]],
        given_learner = sqrt(means[["rounds.given_learner"]] / means[["uniform.given_learner"]]),
        best_bands = sqrt(means[["best_bands"]] / means[["uniform.given_learner"]]),
        design_fitted_bound = sqrt((1 + means[["fitted_bound"]]) / 2),
        jackknife_uniform = means[["uniform.jackknife"]], jackknife_rounds = means[["rounds.jackknife"]],
        z_spread_uniform = z_spread(figures, "uniform"), z_spread_rounds = z_spread(figures, "rounds"),
        neyman_bound = means[["bound"]], banded = means[["banded"]], design_bound = sqrt((1 + means[["bound"]]) / 2),
        design_banded = sqrt((1 + means[["banded"]]) / 2), calibrated = means[["calibrated"]],
        design_calibrated = sqrt((1 + means[["calibrated"]]) / 2)
      )
      if (three) {
        rows[[length(rows)]] <- cbind(rows[[length(rows)]], coverage_three = means[["three.covered"]],
          three_over_uniform = means[["three.width"]] / means[["uniform.width"]],
          three_over_rounds = means[["three.width"]] / means[["rounds.width"]],
          three_design_bound = sqrt((1 + means[["bound_2"]] + means[["bound_3"]]) / 3),
          three_given_learner = sqrt(means[["three.given_learner"]] / means[["uniform.given_learner"]]),
          jackknife_three = means[["three.jackknife"]], z_spread_three = z_spread(figures, "three"))
      }
      message(paste(utils::capture.output(print(rows[[length(rows)]], row.names = FALSE, digits = 3)),
                    collapse = "\n"))
      next
    }
    share_label <- names(which.max(table(data$gold)))
    for (size in sizes) {
      figures <- vapply(seeds, function(seed) one_draw(data, size, seed, share_label), numeric(5))
      rows[[length(rows) + 1]] <- data.frame(
        model = model, corpus = corpus_name, rows = nrow(data), coded = size,
        majority = max(table(data$gold)) / nrow(data), t(rowMeans(figures))
      )
      message(paste(utils::capture.output(print(rows[[length(rows)]], row.names = FALSE, digits = 3)),
                    collapse = "\n"))
    }
  }
}
cat(sprintf(if (rounds) "Two rounds by doubt against 150 uniform rows (issue 61), %d draws\n\n" else
  "Learned labels (issue 53), %d draws of each size\n\n", draws))
print(do.call(rbind, rows), row.names = FALSE, digits = 3)
cat(sprintf("\n%.0f s\n", as.numeric(Sys.time() - started, units = "secs")))
