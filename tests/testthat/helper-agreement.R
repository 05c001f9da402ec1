# Fixtures of the agreement() tests (test-agreement*.R).

estimate_of <- function(result, metric) result$metrics$estimate[result$metrics$metric == metric]

# A small table worked out by hand: 10 pairs, labels a, b, c.
#
#              predicted
#   truth       a  b  c   truth totals g
#     a        4  1  1   6
#     b        0  2  0   2
#     c        1  1  0   2
#   predicted totals p:
#              5  4  1   n = 10, agreeing pairs 4 + 2 + 0 = 6
hand_truth <- c("a", "a", "a", "a", "a", "a", "b", "b", "c", "c")
hand_predicted <- c("a", "a", "a", "a", "b", "c", "b", "b", "a", "b")

# A population whose labels are wrong mostly where the model doubts them: a
# sample drawn toward doubt understates its accuracy unless weighted.
doubtful_labels <- function(n = 2000, seed = 3) {
  withr::with_seed(seed, {
    sure <- stats::runif(n, 0.5, 1)
    truth <- sample(c("a", "b"), n, replace = TRUE)
    right <- stats::runif(n) < ifelse(sure > 0.75, 0.99, 0.4)
  })
  label <- ifelse(right, truth, ifelse(truth == "a", "b", "a"))
  data.frame(.label = factor(label, levels = c("a", "b")), .confidence = sure,
             .prob_a = ifelse(label == "a", sure, 1 - sure), .prob_b = ifelse(label == "a", 1 - sure, sure),
             truth = truth, speaker = rep(seq_len(n / 20), each = 20))
}

# Rows drawn in rounds: a uniform first round of `first` rows, then rounds of
# `sizes` drawn where the labels are in doubt (review_sample(weight =
# "learned")), each given every round before it.
drawn_in_rounds <- function(data, first, sizes, seed) {
  learned <- data
  attr(learned, "manifest") <- structure(list(prompt = list(calibration = "learned")), class = "newrllama4_manifest")
  drawn <- review_sample(data, first, weight = "uniform", seed = seed)
  for (r in seq_along(sizes)) drawn <- review_sample(learned, sizes[[r]], weight = "learned", previous = drawn,
                                                     seed = seed + 1000 * r)
  drawn
}

# Two coders of doubtful_labels()' texts, each right on 97% of the texts the
# model is sure of and 75% of the others: people find hard what the model
# doubts, so a sample drawn toward its doubt understates their agreement.
doubtful_coders <- function(data) {
  codes <- function(seed) withr::with_seed(seed, {
    right <- stats::runif(nrow(data)) < ifelse(data$.confidence > 0.75, 0.97, 0.75)
    ifelse(right, data$truth, ifelse(data$truth == "a", "b", "a"))
  })
  list(ana = codes(11), ben = codes(12))
}

# Each text's codes of `people` (doubtful_coders()), a column a label, as
# coders_alpha() counts them.
code_counts <- function(people) {
  cbind(a = (people$ana == "a") + (people$ben == "a"), b = (people$ana == "b") + (people$ben == "b"))
}

# The drawn rows coded by every coder of `people`, as read_codes(by = "coder")
# gives them.
coded_by_each <- function(drawn, people) {
  long <- do.call(rbind, lapply(names(people), function(coder) {
    drawn$.coder <- coder
    drawn$code <- factor(people[[coder]][drawn$.row], levels = c("a", "b"))
    drawn
  }))
  structure(long, class = c("newrllama4_coder_codes", "data.frame"), codes = "code")
}

# A coding file of `drawn` (rows of doubtful_labels()) in which every coder of
# `people` coded every text, as the coding app would have written it.
coding_file_of <- function(drawn, people, envir = parent.frame()) {
  drawn$text <- paste("Text", drawn$.row)
  file <- coding_fixture(sample = drawn, overlap = 1, labels = c("a", "b"), envir = envir)$file
  for (unit in seq_len(nrow(drawn))) {
    for (coder in names(people)) store_write(file, unit, coder, list(code = people[[coder]][drawn$.row[unit]]))
  }
  file
}
