labelled <- data.frame(
  id = 1:30,
  .label = factor(c(rep("a", 20), rep("b", 8), rep("c", 1), NA), levels = c("a", "b", "c")),
  .confidence = c(seq(0.99, 0.6, length.out = 20), seq(0.9, 0.5, length.out = 8), 0.8, NA)
)

test_that("every label gets its share, at least one, and rows without a label are never drawn", {
  drawn <- review_sample(labelled, n = 10, seed = 1)
  expect_identical(nrow(drawn), 10L)
  expect_identical(as.vector(table(drawn$.label)), c(6L, 3L, 1L))  # 1 each, then 7 in proportion to 19:7:0
  expect_identical(drawn$.row, drawn$id)
  expect_false(is.unsorted(drawn$.row))
  expect_identical(allocate_sample(3, c(20, 8, 1)), c(1L, 1L, 1L))
  expect_identical(allocate_sample(2, c(20, 8, 1)), c(1L, 1L, 0L))
  expect_identical(sum(allocate_sample(29, c(20, 8, 1))), 29L)
  expect_identical(allocate_sample(29, c(20, 8, 1)), c(20L, 8L, 1L))
})

test_that("weighted by confidence, doubtful rows are drawn more often; uniform draws all alike", {
  counts <- function(weight) {
    drawn <- unlist(lapply(1:300, function(seed) review_sample(labelled[1:20, ], n = 5, weight = weight,
                                                               seed = seed)$.row))
    tabulate(drawn, 20)
  }
  doubtful <- counts("confidence")
  expect_gt(sum(doubtful[16:20]), 2 * sum(doubtful[1:5]))  # confidence 0.6-0.68 against 0.91-0.99
  uniform <- counts("uniform")
  expect_lt(abs(sum(uniform[16:20]) - sum(uniform[1:5])), 0.3 * sum(uniform[1:5]))
})

test_that("a seed makes the draw reproducible and leaves the session's generator alone", {
  set.seed(5)
  state <- .Random.seed
  first <- review_sample(labelled, n = 6, seed = 42)
  expect_identical(.Random.seed, state)
  expect_identical(review_sample(labelled, n = 6, seed = 42), first)
})

test_that("bad arguments are classed errors", {
  bad <- function(...) expect_error(review_sample(...), class = "newrllama4_error_invalid_argument")
  bad(data.frame(x = 1), n = 1)
  bad(labelled, n = 0)
  bad(labelled, n = 30)
  bad(labelled, n = 2, seed = -1)
  expect_error(review_sample(labelled, n = 2, weight = "most"))
})
