# The coded rows, checked once (findings-coded.R): rows without a label, and rows short of
# their design, which are nonresponse.

test_that("rows without a label are left out with a message saying the estimate is for the labelled rows", {
  data <- simulated_labels(800, 33)
  coded <- review_sample(data, 150, weight = "uniform", seed = 33)
  data[setdiff(1:40, coded$.row), c(".label", ".prob_yes", ".prob_no", ".confidence")] <- NA
  expect_message(fit <- label_regression(yes ~ x, data, coded, truth, seed = 1), "labelled|have them",
                 class = "newrllama4_message_rows_left_out")
  expect_lt(nobs(fit), 800)
  expect_message(shares <- label_shares(data, coded, truth, seed = 1), class = "newrllama4_message_rows_left_out")
  expect_true(all(is.finite(shares$estimate)))
})

test_that("coded rows short of the design are reweighted within their stratum; an uncoded stratum is an error", {
  data <- simulated_labels(1500, 34)
  coded <- review_sample(data, 200, weight = "confidence", seed = 34)
  strata <- attr(coded, "design")$strata
  # rows deleted, then a file: the design columns still count the rows drawn
  file <- withr::local_tempfile(fileext = ".csv")
  utils::write.csv(coded[-(1:12), ], file, row.names = FALSE)
  dropped <- utils::read.csv(file)
  expect_warning(fit <- label_regression(yes ~ x, data, dropped, truth, seed = 1), "12 drawn rows",
                 class = "newrllama4_warning_nonresponse")
  answered <- table(dropped$.stratum)[strata$name]
  expected_prob <- as.vector(answered / strata$rows)[match(dropped$.stratum, strata$name)]
  expect_equal(fit$sample_prob, expected_prob)
  expect_match(attr(fit, "manifest")$estimation$strata, "coded of")
  # a missing code is the same nonresponse as a dropped row
  missing_codes <- coded
  missing_codes$truth[1:12] <- NA
  expect_warning(same <- label_regression(yes ~ x, data, missing_codes, truth, seed = 1),
                 class = "newrllama4_warning_nonresponse")
  expect_equal(coef(same), coef(fit))
  # a stratum with no coded row, present or gone
  uncoded <- transform(coded, truth = ifelse(.stratum == .stratum[1], NA, truth))
  expect_error(suppressWarnings(label_regression(yes ~ x, data, uncoded, truth)), coded$.stratum[1], fixed = TRUE,
               class = "newrllama4_error_empty_stratum")
  gone <- coded[coded$.stratum != coded$.stratum[1], ]
  expect_error(suppressWarnings(label_regression(yes ~ x, data, gone, truth)),
               class = "newrllama4_error_empty_stratum")
  # several strata: "strata", as English has it
  two <- transform(coded, truth = ifelse(.stratum %in% unique(.stratum)[1:2], NA, truth))
  err <- expect_error(suppressWarnings(label_regression(yes ~ x, data, two, truth)),
                      class = "newrllama4_error_empty_stratum")
  expect_match(conditionMessage(err), "No coded rows in strata ")
})

test_that("a sample nobody has coded yet says so, not which strata lack codes", {
  data <- simulated_labels(600, 36)
  coded <- transform(review_sample(data, 80, weight = "confidence", seed = 36), truth = NA)
  for (estimate in list(function() label_regression(yes ~ x, data, coded, truth),
                        function() label_shares(data, coded, truth))) {
    err <- expect_error(estimate(), class = "newrllama4_error_no_codes")
    expect_s3_class(err, "newrllama4_error_empty_stratum")
    expect_match(conditionMessage(err), "None of the 80 drawn rows has a code")
    expect_no_match(conditionMessage(err), "stratum")
  }
})

test_that("the design is read from the rows' columns, the attribute of an older sample, or assumed and said so", {
  data <- simulated_labels(800, 35)
  coded <- review_sample(data, 120, weight = "confidence", seed = 35)
  expect_true(all(c(".stratum", ".stratum_rows", ".stratum_drawn", ".sample_prob", ".sampling_unit", ".draw") %in%
                    names(coded)))
  fit <- label_regression(yes ~ x, data, coded, truth, seed = 1)
  expect_identical(attr(fit, "manifest")$estimation$design_read_from, "the coded rows' columns")
  expect_identical(attr(fit, "manifest")$estimation$sampling_unit, "rows drawn one by one")
  # a spreadsheet's types: text as factors, whole numbers as doubles, no attribute
  typed <- as.data.frame(lapply(coded, function(column) {
    if (is.character(column)) factor(column) else if (is.integer(column)) as.double(column) else column
  }))
  expect_equal(vcov(label_regression(yes ~ x, data, typed, truth, seed = 1)), vcov(fit))
  # a sample of an older version: the attribute, no new columns
  older <- coded[setdiff(names(coded), c(".stratum_rows", ".stratum_drawn", ".sampling_unit"))]
  attr(older, "design") <- attr(coded, "design")
  expect_equal(vcov(label_regression(yes ~ x, data, older, truth, seed = 1)), vcov(fit))
  # someone's own sample: assumed, and told
  own <- older
  attr(own, "design") <- NULL
  expect_message(label_regression(yes ~ x, data, own, truth, seed = 1), "assumed",
                 class = "newrllama4_message_design_assumed")
  expect_error(label_regression(yes ~ x, data, coded[names(coded) != ".stratum_drawn"], truth),
               ".stratum_drawn", class = "newrllama4_error_coded_rows")
  expect_error(label_regression(yes ~ x, data, transform(coded, .stratum_rows = 5), truth),
               class = "newrllama4_error_coded_rows")
})

test_that("a stratum with one coded row is collapsed with its label's adjacent band, as survey's collapsed strata", {
  skip_if_not_installed("survey")
  data <- simulated_labels(1000, 3)
  coded <- review_sample(data, 150, weight = "confidence", seed = 3)
  thin <- "yes (middle)"
  coded <- coded[coded$.stratum != thin | !duplicated(coded$.stratum), ]
  expect_message(expect_warning(fit <- label_regression(yes ~ x, data, coded, truth, seed = 3, target = "corpus"),
                                class = "newrllama4_warning_nonresponse"),
                 thin, fixed = TRUE, class = "newrllama4_message_strata_collapsed")
  collapsed <- strsplit(attr(fit, "manifest")$estimation$strata_collapsed_for_variance, ", ")[[1]]
  expect_length(collapsed, 2)
  expect_true(thin %in% collapsed && all(grepl("^yes ", collapsed)))
  # survey's design with the two strata as one, each row weighted by its own probability
  coded$y <- as.numeric(coded$truth == "yes")
  coded$w <- 1 / fit$sample_prob
  coded$group <- ifelse(coded$.stratum %in% collapsed, "collapsed", coded$.stratum)
  sizes <- unique(coded[c(".stratum", ".stratum_rows", "group")])
  coded$group_rows <- tapply(sizes$.stratum_rows, sizes$group, sum)[coded$group]
  design <- survey::svydesign(ids = ~1, strata = ~group, fpc = ~group_rows, weights = ~w, data = coded)
  reference <- survey::svyglm(y ~ x, design)
  expect_equal(unname(fit$fits$coded_only$coefficients), unname(coef(reference)), tolerance = 1e-6)
  expect_equal(unname(fit$vcov$coded_only), unname(survey_vcov_hc2(reference, design)), tolerance = 1e-5)
  # a label drawn in one stratum has no band to join: warned about
  one <- review_sample(data, 60, weight = "uniform", seed = 3)
  one <- one[one$.label == "no" | !duplicated(one$.label), ]
  expect_warning(expect_warning(label_regression(yes ~ x, data, one, truth, seed = 3),
                                class = "newrllama4_warning_nonresponse"),
                 "one coded row", class = "newrllama4_warning_single_coded_unit")
})

test_that("a text's codes split between coders count as its shares for the outcome; a covariate's are refused", {
  data <- two_labels(5)
  coded <- review_sample(data, 200, weight = "uniform", seed = 5)
  # the coders disagree on the outcome of texts 1 and 2: allowed, each text once
  split <- split_between_coders(coded, 1:2)
  fit <- label_regression(yes ~ negative, data, split, c(yes = "truth", negative = "negative_code"), seed = 5)
  expect_identical(length(fit$coded_rows), 200L)
  # and on the covariate of text 3: refused, with what to do
  third <- coded[c(3, 3), ]
  third$.code_weight <- 0.5
  third$negative_code <- c(TRUE, FALSE)
  split <- rbind(split[split$.row != coded$.row[[3]], ], third)
  err <- expect_error(label_regression(yes ~ negative, data, split, c(yes = "truth", negative = "negative_code"),
                                       seed = 5), class = "newrllama4_error_coded_truth")
  expect_match(conditionMessage(err), "a covariate's code cannot be split")
})

test_that("a factor's level with no rows in the data is named, and droplevels() suggested", {
  # a factor filtered keeps its levels: the error had said "collinear (or a factor has a level without rows)"
  data <- small_level_world(1)
  data <- data[data$group != "g3", ]
  coded <- review_sample(data, 150, seed = 1)
  expect_error(label_regression(yes ~ group, data, coded, truth, seed = 1), "groupg3.*has no rows in `data`.*droplevels",
               class = "newrllama4_error_invalid_argument")
  expect_no_error(quietly(label_regression(yes ~ group, droplevels(data), coded, truth, seed = 1)))
  data$twice <- data$.confidence * 2
  expect_error(label_regression(yes ~ .confidence + twice, data, coded, truth, seed = 1), "collinear: drop or merge",
               class = "newrllama4_error_invalid_argument")
})
