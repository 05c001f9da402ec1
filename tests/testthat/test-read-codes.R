test_that("each text gets its decision: agreed, adjudicated, uncodable, in disagreement or not coded", {
  fixture <- coding_fixture(n = 5, overlap = 0)
  file <- fixture$file
  store_write(file, 1, "ana", list(code = "yes"), note = "sure")
  store_write(file, 2, "ana", list(code = "yes"))
  store_write(file, 2, "ben", list(code = "no"))
  store_write(file, 3, "ana", list(code = "yes"))
  store_write(file, 3, "ben", list(code = "no"))
  store_write(file, 3, "eve", list(code = "no"), role = "adjudication")
  store_write(file, 4, "ana", NULL, uncodable = TRUE, reason = "in French")
  expect_warning(codes <- read_codes(file, disagreements = "missing"), "1 of 5 texts (20.0%)", fixed = TRUE,
                 class = "newrllama4_warning_disagreements_missing")
  expect_identical(codes$.row, 1:5)
  expect_identical(codes$code, factor(c("yes", NA, "no", NA, NA), levels = c("yes", "no")))
  expect_identical(codes$.status, c("coded", "disagreement", "adjudicated", "uncodable", "not coded"))
  expect_identical(codes$.how, c("single", "disagreed", "adjudicated", "cannot code", "not coded"))
  expect_identical(codes$.coders, c(1L, 2L, 2L, 1L, 0L))
  expect_identical(codes$.reason[4], "in French")
  expect_identical(codes$.note[1], "sure")
  expect_identical(codes$text, fixture$sample$text)
  expect_true(all(c(".sample_prob", ".stratum") %in% names(codes)))
})

test_that("uncodable texts stay, marked, and the estimators reweight their stratum's coded texts for them", {
  data <- simulated_labels(300, seed = 5)
  sample <- review_sample(data, n = 40, seed = 2)
  fixture <- coding_fixture(sample = sample, overlap = 0)
  for (unit in seq_len(nrow(sample))) store_write(fixture$file, unit, "ana", list(code = sample$truth[[unit]]))
  store_write(fixture$file, 2, "ana", NULL, uncodable = TRUE, reason = "blank")
  codes <- read_codes(fixture$file)
  expect_identical(codes$.row, sample$.row)
  expect_identical(codes$.status[[2]], "uncodable")
  expect_identical(codes$.reason[[2]], "blank")
  expect_true(is.na(codes$code[[2]]))
  expect_identical(codes$.sample_prob, sample$.sample_prob)
  expect_warning(fit <- label_regression(yes ~ x, data, codes, code, seed = 1), class = "newrllama4_warning_nonresponse")
  expect_identical(nobs(fit), nrow(data))
})

test_that("read_codes() feeds label_regression(), label_shares() and agreement() as it is", {
  data <- simulated_labels(300, seed = 3)
  sample <- review_sample(data, n = 40, seed = 1)
  fixture <- coding_fixture(sample = sample, overlap = 0)
  for (unit in seq_len(nrow(sample))) store_write(fixture$file, unit, "ana", list(code = sample$truth[[unit]]))
  codes <- read_codes(fixture$file)
  fit <- label_regression(yes ~ x, data, codes, code, seed = 1)
  expect_equal(coef(fit), coef(label_regression(yes ~ x, data, sample, truth, seed = 1)))
  expect_s3_class(label_shares(data, codes, code), "newrllama4_label_shares")
  expect_identical(agreement(codes$.label, codes$code, n_boot = 0)$n, 40L)
})

test_that("by coder: one row per coder and text, with the time spent", {
  fixture <- coding_fixture(n = 3, overlap = 1)
  store_write(fixture$file, 1, "ana", list(code = "yes"), seconds = 4.5)
  store_write(fixture$file, 1, "ben", list(code = "no"), seconds = 2)
  store_write(fixture$file, 2, "ben", NULL, uncodable = TRUE, reason = "blank")
  codes <- read_codes(fixture$file, by = "coder")
  expect_s3_class(codes, "newrllama4_coder_codes")
  expect_identical(codes$.row, c(1L, 1L, 2L))
  expect_identical(codes$.coder, c("ana", "ben", "ben"))
  expect_identical(as.character(codes$code), c("yes", "no", NA))
  expect_identical(codes$.uncodable, c(FALSE, FALSE, TRUE))
  expect_identical(codes$.seconds, c(4.5, 2, NA))
})

test_that("schema fields come back as typed columns named after the fields; a model's answer moves aside", {
  skip_if_not_installed("RSQLite")
  sample <- data.frame(text = c("a", "b"), topic = factor(c("tax", "crime")))
  file <- withr::local_tempfile(fileext = ".sqlite")
  coding_app(sample, file, schema = list(topic = c("tax", "crime"), urgent = "boolean", count = "integer",
                                         summary = "string"))
  store_write(file, 1, "ana", list(topic = "crime", urgent = TRUE, count = 3, summary = "short"))
  codes <- read_codes(file)
  expect_identical(codes$topic, factor(c("crime", NA), levels = c("tax", "crime")))
  expect_identical(codes$.model_topic, sample$topic)
  expect_identical(codes$urgent, c(TRUE, NA))
  expect_identical(codes$count, c(3L, NA))
  expect_identical(codes$summary, c("short", NA))
})

test_that("a whole-cluster sample read back with read_codes(), or through a CSV file, gives the sample's own interval", {
  data <- clustered(7, clusters = 40, size = 8)
  data$text <- paste("text", seq_len(nrow(data)))
  sample <- review_sample(data, 8, seed = 7, cluster = "speaker")
  fixture <- coding_fixture(sample = sample, overlap = 0)
  for (unit in seq_len(nrow(sample))) store_write(fixture$file, unit, "ana", list(code = sample$truth[[unit]]))
  codes <- read_codes(fixture$file)
  file <- withr::local_tempfile(fileext = ".csv")
  utils::write.csv(codes, file, row.names = FALSE)
  from_file <- utils::read.csv(file)
  itself <- label_regression(yes ~ 1, data, sample, truth, seed = 1)
  expect_identical(attr(itself, "manifest")$estimation$sampling_unit, "clusters of speaker drawn whole")
  for (read in list(codes, from_file, from_file[c(".row", "code", names(from_file)[startsWith(names(from_file), ".s")])])) {
    fit <- label_regression(yes ~ 1, data, read, code, seed = 1)
    expect_equal(confint(fit), confint(itself))
    expect_identical(attr(fit, "manifest")$estimation$sampling_unit, "clusters of speaker drawn whole")
  }
  shares <- label_shares(data, from_file, code, seed = 1)
  expect_equal(shares, label_shares(data, sample, truth, seed = 1), ignore_attr = TRUE)
  # a cluster's row uncodable, another lost, a whole cluster lost: the cluster's coded rows stand for its rows
  store_write(fixture$file, 2, "ana", NULL, uncodable = TRUE, reason = "blank")
  short <- read_codes(fixture$file)
  short <- short[-1, ]
  short <- short[short$speaker != short$speaker[nrow(short)], ]
  expect_warning(fit <- label_regression(yes ~ 1, data, short, code, seed = 1), "all of 1 cluster",
                 class = "newrllama4_warning_nonresponse")
  coded <- !is.na(short$code)
  in_cluster <- table(short$speaker[coded])[as.character(short$speaker[coded])]
  expect_equal(fit$sample_prob, as.vector(7 / 40 * in_cluster / 8))
  expect_error(label_regression(yes ~ 1, data, transform(short, code = NA), code),
               class = "newrllama4_error_empty_stratum")
})

test_that("texts whose coders disagree are split by default: a row per coder's code, weighted 1 / k", {
  fixture <- coding_fixture(n = 4, overlap = 0)
  file <- fixture$file
  store_write(file, 1, "ana", list(code = "yes"))
  for (coder in c("ana", "ben", "cal")) store_write(file, 2, coder, list(code = if (coder == "ana") "yes" else "no"))
  # a coder who could not code gives no code to split
  store_write(file, 3, "ana", list(code = "yes"))
  store_write(file, 3, "ben", NULL, uncodable = TRUE, reason = "blank")
  store_write(file, 4, "ana", list(code = "yes"))
  store_write(file, 4, "ben", list(code = "no"))
  store_write(file, 4, "eve", list(code = "no"), role = "adjudication")  # an adjudication always wins
  expect_message(codes <- read_codes(file), "2 of 4 texts (50.0%)", fixed = TRUE,
                 class = "newrllama4_message_disagreements_split")
  expect_identical(codes$.row, c(1L, 2L, 2L, 2L, 3L, 4L))
  expect_identical(as.character(codes$code), c("yes", "yes", "no", "no", "yes", "no"))
  expect_equal(codes$.code_weight, c(1, 1 / 3, 1 / 3, 1 / 3, 1, 1))
  expect_identical(codes$.how, c("single", rep("disagreed", 4), "adjudicated"))
  expect_identical(codes$.codes[[2]], "ana (code: yes); ben (code: no); cal (code: no)")
  expect_error(read_codes(file, disagreements = "both"), class = "newrllama4_error_invalid_argument")
})

test_that("a split text is one unit of the design: its share of each label, between the bounds, its se the text's", {
  data <- simulated_labels(2000, 3)
  sample <- review_sample(data, 200, weight = "uniform", seed = 3)
  fixture <- coding_fixture(sample = sample, overlap = 0)
  hard <- sample$truth == "yes" & sample$.label == "no"
  write_codes(fixture$file, sample, sample$truth, coder = "ana")
  write_codes(fixture$file, sample, ifelse(hard, "no", sample$truth), coder = "ben")
  codes <- read_codes(fixture$file)
  expect_identical(nrow(codes), 200L + sum(hard))
  shares <- label_shares(data, codes, code, seed = 1)
  yes <- shares[shares$label == "yes" & shares$estimator == "corrected", ]
  # linear in the codes: halfway between all "yes" and all "no", at the same lambda
  expect_equal(yes$estimate, (yes$bound.low + yes$bound.high) / 2)
  expect_identical(generics::glance(shares)$coded, 200L)
  expect_identical(generics::glance(shares)$split_texts, sum(hard))
  # through a CSV file, as they are
  csv <- withr::local_tempfile(fileext = ".csv")
  utils::write.csv(codes, csv, row.names = FALSE)
  expect_equal(label_shares(data, utils::read.csv(csv), code, seed = 1), shares, ignore_attr = TRUE)
  # the hard texts lost (issue 58: 0.800 coverage over draws): reweighted as if at random, the interval misses the
  # share; split between the coders' codes, it covers it (tools/bench_findings_validity.R "hard texts")
  expect_warning(missing <- read_codes(fixture$file, disagreements = "missing"),
                 class = "newrllama4_warning_disagreements_missing")
  reweighted <- suppressWarnings(label_shares(data, missing, code, seed = 1))
  expect_lt(reweighted$conf.high[reweighted$label == "yes" & reweighted$estimator == "corrected"], share_yes)
  expect_lte(yes$conf.low, share_yes)
  expect_gte(yes$conf.high, share_yes)
  # a text split into two rows of one code is that text: the same estimate and standard error
  same <- transform(codes[!duplicated(codes$.row), ], .code_weight = 1)
  twice <- same[c(seq_len(nrow(same)), 1L), ]
  twice$.code_weight[c(1L, nrow(twice))] <- 0.5
  fit <- label_regression(yes ~ x, data, twice, code, seed = 1)
  expect_equal(fit$vcov$corrected, label_regression(yes ~ x, data, same, code, seed = 1)$vcov$corrected)
  twice$.code_weight[1L] <- 0.4
  expect_error(label_regression(yes ~ x, data, twice, code), class = "newrllama4_error_coded_rows")
})
