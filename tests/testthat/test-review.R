labelled <- data.frame(
  id = 1:30,
  .label = factor(c(rep("a", 20), rep("b", 8), rep("c", 1), NA), levels = c("a", "b", "c")),
  .confidence = c(seq(0.99, 0.6, length.out = 20), seq(0.9, 0.5, length.out = 8), 0.8, NA)
)

test_that("every label gets its share, at least one, and rows without a label are never drawn", {
  drawn <- review_sample(labelled, n = 16, seed = 1)
  expect_identical(nrow(drawn), 16L)
  expect_identical(as.vector(table(drawn$.label)), c(9L, 6L, 1L))  # 5, 5 and 1, then 5 in proportion to 15:3:0
  expect_identical(allocate_sample(16, c(20, 8, 1), least = c(5, 5, 1)), c(9L, 6L, 1L))
  expect_identical(drawn$.row, drawn$id)
  expect_false(is.unsorted(drawn$.row))
  expect_identical(allocate_sample(3, c(20, 8, 1)), c(1L, 1L, 1L))
  expect_identical(allocate_sample(2, c(20, 8, 1)), c(1L, 1L, 0L))
  expect_identical(sum(allocate_sample(29, c(20, 8, 1))), 29L)
  expect_identical(allocate_sample(29, c(20, 8, 1)), c(20L, 8L, 1L))
})

test_that("weighted by confidence, doubtful rows are drawn more often; uniform draws all alike", {
  rows <- data.frame(.label = factor(rep("a", 300)), .confidence = seq(0.999, 0.5, length.out = 300))
  counts <- function(weight) {
    drawn <- unlist(lapply(1:100, function(seed) review_sample(rows, n = 90, weight = weight, seed = seed)$.row))
    tabulate(drawn, 300)
  }
  doubtful <- counts("confidence")
  # confidence 0.5-0.58 against 0.92-1, beyond the floor of five rows a band
  expect_gt(sum(doubtful[251:300]), 1.3 * sum(doubtful[1:50]))
  uniform <- counts("uniform")
  expect_lt(abs(sum(uniform[251:300]) - sum(uniform[1:50])), 0.3 * sum(uniform[1:50]))
})

test_that("a seed makes the draw reproducible and leaves the session's generator alone", {
  set.seed(5)
  state <- .Random.seed
  first <- review_sample(labelled, n = 11, seed = 42)
  expect_identical(.Random.seed, state)
  expect_identical(review_sample(labelled, n = 11, seed = 42), first)
})

test_that("bad arguments are classed errors", {
  bad <- function(...) expect_error(review_sample(...), class = "newrllama4_error_invalid_argument")
  bad(data.frame(x = 1), n = 1)
  bad(labelled, n = 0)
  bad(labelled, n = 30)
  bad(labelled, n = 2, seed = -1)
  expect_error(review_sample(labelled, n = 2, weight = "most"))
})

test_that(".sample_prob is each row's inclusion probability, for either weight", {
  skip_on_cran()  # a simulation of 20-50 s: make test runs it, CRAN's checks skip it
  data <- simulated_labels(60, 29)
  for (weight in c("uniform", "confidence")) {
    first <- review_sample(data, n = 12, weight = weight, seed = 1)
    design <- attr(first, "design")
    expect_s3_class(design, "newrllama4_sample_design")
    expect_identical(sum(design$strata$drawn), 12L)
    expect_equal(design$strata$prob, design$strata$drawn / design$strata$rows)
    # every row's probability, from the strata of the rows drawn
    prob <- rep(NA_real_, 60)
    draws <- 3000
    counts <- tabulate(unlist(lapply(seq_len(draws), function(seed) {
      drawn <- review_sample(data, n = 12, weight = weight, seed = seed)
      prob[drawn$.row] <<- drawn$.sample_prob
      drawn$.row
    })), 60)
    expect_false(anyNA(prob))
    # within 4.5 binomial standard errors, row by row
    expect_lt(max(abs(counts / draws - prob) / sqrt(prob * (1 - prob) / draws + 1e-12)), 4.5)
  }
})

test_that("weighted by confidence, the least sure band of each label is oversampled", {
  data <- simulated_labels(600, 31)
  drawn <- review_sample(data, n = 60, weight = "confidence", seed = 3)
  strata <- attr(drawn, "design")$strata
  expect_identical(nrow(strata), 6L)
  expect_setequal(strata$band, c("least sure", "middle", "most sure"))
  least <- strata$prob[strata$band == "least sure"]
  most <- strata$prob[strata$band == "most sure"]
  expect_true(all(least > most))
  expect_true(all(strata$prob > 0))
  expect_identical(drawn$.stratum, strata$name[match(drawn$.stratum, strata$name)])
})

test_that("a second draw adds rows with the combined sample's probabilities", {
  skip_on_cran()  # a simulation of 20-50 s: make test runs it, CRAN's checks skip it
  data <- simulated_labels(90, 37)
  for (weight in c("uniform", "confidence")) {
    first <- review_sample(data, n = 15, weight = weight, seed = 1)
    first$code <- first$truth
    both <- review_sample(data, n = 10, weight = weight, seed = 2, previous = first)
    expect_identical(nrow(both), 25L)
    expect_false(anyDuplicated(both$.row) > 0)
    expect_identical(sum(both$.draw == 2), 10L)
    expect_identical(both$code[both$.draw == 1], first$code)
    expect_true(all(is.na(both$code[both$.draw == 2])))
    strata <- attr(both, "design")$strata
    expect_identical(sum(strata$drawn), 25L)
    expect_equal(both$.sample_prob, strata$prob[match(both$.stratum, strata$name)])
  }
  # the combined sample is a stratified random sample: its rows' frequencies match
  prob <- rep(NA_real_, 90)
  counts <- tabulate(unlist(lapply(1:2000, function(seed) {
    first <- review_sample(data, n = 10, weight = "uniform", seed = seed)
    both <- review_sample(data, n = 8, weight = "uniform", seed = seed + 10000, previous = first)
    prob[both$.row] <<- both$.sample_prob
    both$.row
  })), 90)
  expect_lt(max(abs(counts / 2000 - prob) / sqrt(prob * (1 - prob) / 2000)), 4.5)
  expect_error(review_sample(data, 5, weight = "confidence", previous = review_sample(data, 10, "uniform", seed = 1)),
               class = "newrllama4_error_invalid_argument")
})

test_that("a second draw from rows read back from a file keeps the combined design in every row's columns", {
  data <- simulated_labels(300, 38)
  first <- review_sample(data, n = 30, weight = "confidence", seed = 1)
  file <- withr::local_tempfile(fileext = ".csv")
  utils::write.csv(first, file, row.names = FALSE)
  from_file <- utils::read.csv(file)
  both <- review_sample(data, n = 20, weight = "confidence", seed = 2, previous = from_file)
  expect_identical(both$.row, review_sample(data, n = 20, weight = "confidence", seed = 2, previous = first)$.row)
  strata <- attr(both, "design")$strata
  at <- match(both$.stratum, strata$name)
  expect_identical(both$.stratum_drawn, strata$drawn[at])
  expect_identical(both$.stratum_rows, strata$rows[at])
  expect_identical(sort(unique(both$.draw)), 1:2)
  expect_true(all(both$.sampling_unit == ".row"))
  # rows lost since the first draw are said to be drawn from again
  expect_warning(review_sample(data, n = 5, weight = "confidence", seed = 3, previous = from_file[-1, ]),
                 "lost 1", class = "newrllama4_warning_nonresponse")
})

test_that("too small a sample for every stratum warns", {
  expect_warning(review_sample(labelled, n = 2, weight = "uniform", seed = 1),
                 class = "newrllama4_warning_empty_strata")
})

test_that("each stratum gets five rows where n allows, and a warning says how many rows that needs where not", {
  # issue 58: a label on 4% of 2,000 rows got 2 of 50 uniform rows, too few for its variance
  data <- thin_stratum(2000, 1)
  drawn <- review_sample(data, n = 50, weight = "uniform", seed = 1)
  expect_gte(min(table(drawn$.label)), 5L)
  expect_equal(drawn$.sample_prob, drawn$.stratum_drawn / drawn$.stratum_rows)
  expect_warning(review_sample(labelled, n = 8, weight = "uniform", seed = 1), "Draw 3 more rows",
                 class = "newrllama4_warning_thin_strata")
  # a later round tops the strata up to five
  first <- suppressWarnings(review_sample(labelled, n = 4, weight = "uniform", seed = 1))
  both <- review_sample(labelled, n = 8, weight = "uniform", seed = 2, previous = first)
  expect_identical(as.vector(table(both$.label)), c(6L, 5L, 1L))
})
