test_that("a .sample_prob rounded by a spreadsheet is read as the ratio it rounds; one edited is refused", {
  data <- simulated_labels(2000, seed = 7)
  coded <- review_sample(data, 150, seed = 7)
  path <- withr::local_tempfile(fileext = ".csv")
  exact <- label_shares(data, coded, truth, seed = 7)
  for (rounding in list(function(p) signif(p, 1), function(p) round(p, 3), function(p) signif(p, 6))) {
    shown <- coded
    shown$.sample_prob <- rounding(shown$.sample_prob)
    utils::write.csv(shown, path, row.names = FALSE)
    back <- utils::read.csv(path)
    expect_false(isTRUE(all.equal(back$.sample_prob, coded$.sample_prob, tolerance = 1e-12)))
    expect_equal(label_shares(data, back, truth, seed = 7)$estimate, exact$estimate, tolerance = 1e-12)
    expect_equal(agreement(back, truth, field = .label, n_boot = 0)$metrics$estimate,
                 agreement(coded, truth, field = .label, n_boot = 0)$metrics$estimate, tolerance = 1e-12)
  }
  # weights moved by a tenth in one stratum: no rounding of the counts' ratio, refused before any estimate
  edited <- coded
  first <- edited$.stratum == edited$.stratum[[1]]
  edited$.sample_prob[first] <- edited$.sample_prob[first] * 1.1
  for (fit in list(function(x) label_shares(data, x, truth), function(x) label_regression(yes ~ x, data, x, truth),
                   function(x) agreement(x, truth, field = .label, n_boot = 0))) {
    err <- expect_error(fit(edited), class = "newrllama4_error_coded_rows")
    expect_match(conditionMessage(err), "rows drawn over its rows", fixed = TRUE)
  }
})

test_that("every design of rows drawn one by one has .sample_prob its stratum's rows drawn over its rows", {
  data <- simulated_labels(600, seed = 8)
  data$speaker <- rep(seq_len(60), each = 10)
  data$length <- exp(data$x)
  samples <- list(
    review_sample(data, 100, seed = 1), review_sample(data, 100, weight = "uniform", seed = 1),
    review_sample(data, 60, previous = review_sample(data, 60, seed = 1), seed = 2),
    review_sample(data, 100, tail = length, seed = 1)
  )
  for (drawn in samples) expect_equal(drawn$.sample_prob, drawn$.stratum_drawn / drawn$.stratum_rows, tolerance = 1e-15)
  # speakers of unequal sizes drawn whole: the clusters' probability, which the rows' counts do not give, is read
  # (none so large that review_sample() takes it whole)
  data$speaker <- rep(seq_len(60), rep(c(5, 15), 30))
  speakers <- review_sample(data, 10, cluster = speaker, seed = 2)
  expect_false(isTRUE(all.equal(speakers$.sample_prob, speakers$.stratum_drawn / speakers$.stratum_rows)))
  expect_identical(checked_probabilities(speakers, NULL), speakers$.sample_prob)
  # so does a learning curve's subsample, though drawn rows were lost
  lost <- samples[[1]][-(1:5), ]
  sub <- withr::with_seed(1, subsample_coded(lost, 60))
  expect_equal(sub$.sample_prob, sub$.stratum_drawn / sub$.stratum_rows)
})
