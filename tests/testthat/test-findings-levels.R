test_that("a level whose coded rows all come from one cluster stops, naming it", {
  # a party of 3 of 60 speakers, 10 drawn whole, one of them of that party: its residuals sum to 0 within that
  # speaker, so the coded rows' own interval covered 0.746 (a share 0.115, 0.07 wide) and the corrected one was
  # eight times the scale wide
  data <- speakers_in_parties(1)
  coded <- review_sample(data, 10, weight = "uniform", seed = 1, cluster = "speaker")
  expect_length(unique(coded$speaker[coded$party == "small"]), 1)
  expect_error(quietly(label_regression(yes ~ party, data, coded, truth, seed = 1, target = "corpus")),
               "partysmall.*one cluster", class = "newrllama4_error_too_few_coded")
  expect_error(quietly(label_shares(data, coded, truth, by = party, seed = 1)), "small.*one cluster",
               class = "newrllama4_error_too_few_coded")
  # the same rows drawn one by one, their speakers named as clusters
  rows <- review_sample(data, nrow(coded), weight = "uniform", seed = 1)
  one_speaker <- rows[rows$party != "small" | rows$speaker == rows$speaker[rows$party == "small"][1], ]
  expect_error(quietly(label_regression(yes ~ party, data, one_speaker, truth, seed = 1, cluster = speaker)),
               "partysmall", class = "newrllama4_error_too_few_coded")
  rows_alone <- quietly(label_regression(yes ~ party, data, one_speaker, truth, seed = 1))
  expect_s3_class(rows_alone, "newrllama4_label_regression")
})

test_that("a level seen through two clusters estimates", {
  data <- speakers_in_parties(6)
  coded <- review_sample(data, 10, weight = "uniform", seed = 6, cluster = "speaker")
  expect_length(unique(coded$speaker[coded$party == "small"]), 2)
  fit <- quietly(label_regression(yes ~ party, data, coded, truth, seed = 6, target = "corpus"))
  expect_true(all(is.finite(confint(fit)["partysmall", ])))
  expect_true(all(is.finite(quietly(label_shares(data, coded, truth, by = party, seed = 6))$conf.low)))
})
