skewness_of <- function(v) mean((v - mean(v))^3) / mean((v - mean(v))^2)^1.5

test_that("a long tail's rows farthest out are the fewest that leave the rest within the skewness limit", {
  v <- withr::with_seed(1, skewed(2000))
  taken <- tail_rows(v, seq_along(v))
  rest <- v[-taken]
  expect_lte(abs(skewness_of(rest)), skew_limit)
  # one row fewer would not do, and every row taken lies farther from the median than every row left
  fewer <- taken[-length(taken)]
  expect_gt(abs(skewness_of(v[-fewer])), skew_limit)
  expect_gt(min(abs(v[taken] - stats::median(v))), max(abs(rest - stats::median(v))))
  expect_gt(length(taken), 3)
  expect_lt(length(taken), 40)
  # rows given as a subset: the subset's tail, as row numbers of the whole
  subset <- seq(1, 2000, by = 2)
  expect_identical(tail_rows(v, subset), subset[tail_rows(v[subset], seq_along(subset))])
  # no tail, nothing taken
  expect_length(tail_rows(withr::with_seed(1, stats::rnorm(2000)), 1:2000), 0)
  expect_length(tail_rows(withr::with_seed(1, stats::runif(500)), 1:500), 0)
})

test_that("a long tail also gives up the rows a draw of n for a slope would take with certainty", {
  v <- withr::with_seed(1, skewed(2000))
  rows <- seq_along(v)
  few <- tail_rows(v, rows)
  for (n in c(150, 400, 1000)) {
    taken <- tail_rows(v, rows, n)
    expect_true(all(few %in% taken))
    # Neyman allocation for a slope on the rows left (in proportion to the distance from the mean) gives none a share
    # of one; the rows taken beyond the skewness's are those farthest from the mean
    size <- abs(v - mean(v))
    left <- setdiff(rows, taken)
    expect_lt(max((n - length(taken)) * size[left] / sum(size[left])), 1)
    beyond <- setdiff(taken, few)
    if (length(beyond) > 0) expect_gt(min(size[beyond]), max(size[left]))
  }
  expect_lt(length(tail_rows(v, rows, 150)), 40)
  expect_gt(length(tail_rows(v, rows, 1000)), 150)
  # no long tail, nothing taken, however many rows are drawn
  expect_length(tail_rows(withr::with_seed(1, stats::rnorm(2000)), 1:2000, 1000), 0)
})

test_that("review_sample(tail =) takes the tail whole, with probability 1, and the rest as weight says", {
  data <- simulated_labels(2000, 1, covariate = skewed)
  taken <- tail_rows(data$x, seq_len(nrow(data)), 300)
  coded <- review_sample(data, 300, weight = "uniform", seed = 1, tail = x)
  expect_identical(nrow(coded), 300L)
  expect_true(all(taken %in% coded$.row))
  whole <- coded$.stratum == "tail of x"
  expect_setequal(coded$.row[whole], taken)
  expect_true(all(coded$.sample_prob[whole] == 1))
  expect_true(all(coded$.stratum_rows[whole] == length(taken)))
  # the rest: the labels' strata over the rows not taken, each row's probability its stratum's draws over rows
  rest <- coded[!whole, ]
  expect_equal(rest$.sample_prob, rest$.stratum_drawn / rest$.stratum_rows)
  expect_equal(sum(1 / coded$.sample_prob), 2000)
  expect_equal(sum(tapply(rest$.stratum_rows, rest$.stratum, max)), 2000 - length(taken))
  expect_identical(attr(coded, "design")$tail, "x")
  expect_match(format(attr(coded, "design")), "tail of x: \\d+ of \\d+ rows \\(probability 1.000\\)", all = FALSE)
  # the same as a string; a second round keeps the tail's stratum and draws only from the rest
  expect_identical(review_sample(data, 300, weight = "uniform", seed = 1, tail = "x")$.row, coded$.row)
  more <- review_sample(data, 100, weight = "uniform", seed = 2, previous = coded, tail = x)
  expect_identical(nrow(more), 400L)
  expect_identical(sum(more$.stratum == "tail of x"), length(taken))
  expect_equal(sum(1 / more$.sample_prob), 2000)
  expect_error(review_sample(data, 100, weight = "uniform", seed = 2, previous = coded), "same .*tail",
               class = "newrllama4_error_invalid_argument")
  # confidence strata beside the tail
  banded <- review_sample(data, 300, seed = 1, tail = x)
  expect_true(all(taken %in% banded$.row))
  expect_gt(length(unique(banded$.stratum)), 3)
})

test_that("review_sample(tail =) says what it cannot do", {
  data <- simulated_labels(2000, 1, covariate = skewed)
  taken <- length(tail_rows(data$x, seq_len(nrow(data))))
  expect_error(review_sample(data, taken, weight = "uniform", tail = x), "too few to take .*tail of x.* whole",
               class = "newrllama4_error_invalid_argument")
  expect_error(review_sample(data, 300, tail = text), "numeric column", class = "newrllama4_error_invalid_argument")
  expect_error(review_sample(data, 300, tail = nope), class = "newrllama4_error_invalid_argument")
  expect_error(review_sample(data, 10, tail = x, cluster = group), "not with .*cluster",
               class = "newrllama4_error_invalid_argument")
  # no tail on a normal covariate: the draw is the one without `tail`
  normal <- simulated_labels(2000, 1)
  expect_identical(review_sample(normal, 200, weight = "uniform", seed = 1, tail = x)$.row,
                   review_sample(normal, 200, weight = "uniform", seed = 1)$.row)
})

test_that("a tail drawn whole travels through a CSV file, and the corpus's slope counts its rows as reached", {
  data <- simulated_labels(2000, 1, covariate = skewed)
  coded <- review_sample(data, 150, weight = "uniform", seed = 1, tail = x)
  file <- withr::local_tempfile(fileext = ".csv")
  utils::write.csv(coded, file, row.names = FALSE)
  back <- utils::read.csv(file)
  # no leverage warning: the rows far out were coded with certainty (counted as unreached, they warned and set lambda 0)
  expect_no_warning(fit <- suppressMessages(label_regression(yes ~ x, data, back, truth, seed = 1, target = "corpus")))
  expect_lt(fit$leverage$leverage[["x"]], 1)
  expect_equal(coef(fit), coef(suppressMessages(label_regression(yes ~ x, data, coded, truth, seed = 1,
                                                                 target = "corpus"))))
  # the labels kept out all the same (lambda tuned there: 0.910 at 150 rows, the coded rows alone 0.940)
  expect_equal(unname(fit$lambda), c(0, 0))
  expect_identical(fit$leverage$covariates, "x")
})
