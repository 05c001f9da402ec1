test_that("a numeric answer far beyond the coded rows' answers warns, naming the tail to draw whole", {
  # a count answered ten times too large on 1% of rows covered 0.737 (0.569 heavy-tailed), 0.03 and 0.00 where the
  # coded rows caught none of those errors, and nothing said so
  data <- counted_world(1, heavy = TRUE)
  coded <- review_sample(data, 150, weight = "uniform", seed = 1)
  expect_false(any(coded$wild))
  expect_warning(suppressMessages(label_regression(count ~ 1, data, coded, truth, seed = 1, target = "corpus")),
                 "tail = count", class = "newrllama4_warning_answer_reach")
  # with the answers' tail drawn whole, or answers within the coded rows' reach, it does not
  tail <- review_sample(data, 150, weight = "uniform", seed = 1, tail = "count")
  expect_no_warning(suppressMessages(label_regression(count ~ 1, data, tail, truth, seed = 1, target = "corpus")),
                    class = "newrllama4_warning_answer_reach")
  near <- counted_world(1, wild = 0)
  expect_no_warning(suppressMessages(label_regression(count ~ 1, near, review_sample(near, 150, weight = "uniform",
                                                                                       seed = 1), truth, seed = 1)),
                    class = "newrllama4_warning_answer_reach")
})
