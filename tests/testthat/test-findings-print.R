# The printout gives what a methods section reports (issue 58, item 8).
test_that("print() shows each estimate's se, df, effective n, design effect, variance split and lambda, the design,
           the methods and the learner", {
  rows <- learnable_rows(600)
  coded <- review_sample(rows$data, n = 150, weight = "confidence", seed = 1)
  coded$gold[1:3] <- NA
  # labels learned from a uniform sample (learn_labels() refuses one drawn toward doubt), estimated with both
  uniform <- review_sample(rows$data, n = 150, weight = "uniform", seed = 1)
  learned <- suppressWarnings(learn_labels(rows$data, uniform, gold, features = rows$x))
  fit <- suppressWarnings(label_regression(a ~ z, learned, coded, gold, seed = 2))
  printed <- capture.output(print(fit))
  text <- gsub("\\s+", " ", paste(printed, collapse = " "))
  header <- grep("^ +term", printed, value = TRUE)[[1]]
  expect_match(header, "estimate +se +df +95% interval +eff\\. n +deff +sampling +lambda")
  z <- fit$record$estimates[fit$record$estimates$term == "z" & fit$record$estimates$estimator == "corrected", ]
  expect_true(any(grepl(sprintf("^ +z +%.3f +%.3f +%d ", z$estimate, z$std.error, round(z$df)), printed)))
  expect_match(text, "naive (the learned labels as if true)", fixed = TRUE)
  expect_match(text, "weights unequal (1 / pi from", fixed = TRUE)
  expect_match(text, sprintf("strata, the fewest coded rows in one %d", fit$record$design$fewest_coded), fixed = TRUE)
  expect_match(text, "lost rows: 3 of 150 drawn (2.0%)", fixed = TRUE)
  expect_match(text, "the corpus part (the population around the corpus) plus the sampling part", fixed = TRUE)
  expect_match(text, paste("HC2 on the coded rows, plus the predictions' dependence on the coded rows (a",
                           "delete-a-group jackknife over 15 groups, the folds' learners fitted again:"), fixed = TRUE)
  expect_match(text, paste("; intervals: t on each estimate's small-sample degrees of freedom (Bell and",
                     "McCaffrey's, as Imbens and Kolesar advise: the df column), at most the design's 141, bent by each",
                     "estimate's skew (Hall's transformation: the skewness column)"), fixed = TRUE)
  expect_match(text, sprintf("learned by learn_labels() (ridge logistic on the features; features: a matrix given),
                              cross-validated accuracy %.3f, let through by its guard",
                             manifest(learned)$prompt$cross_validated_accuracy) |> gsub(pattern = "\\s+", replacement = " "),
               fixed = TRUE)
  # summary() is the three estimators side by side and the design in full, not print()'s
  summarised <- capture.output(print(summary(fit)))
  expect_false(identical(summarised, printed))
  expect_true(any(grepl("corrected +naive", summarised)))
  expect_true(any(grepl("clusters sharing errors: none", summarised)))
  expect_identical(colnames(summary(fit)$coefficients)[1:3], c("corrected.estimate", "corrected.std.error",
                                                               "corrected.p.value"))
})

test_that("shares print Wilson's interval at the effective n, and a stratum whose sampling part is nothing", {
  data <- simulated_labels(1000, 41)
  coded <- review_sample(data, 150, weight = "confidence", seed = 41)
  shares <- label_shares(data, coded, truth, by = "group", seed = 1)
  text <- gsub("\\s+", " ", paste(capture.output(print(shares)), collapse = " "))
  expect_match(text, "share se df 95% interval eff. n deff sampling lambda naive", fixed = TRUE)
  expect_match(text, "intervals: Wilson's score at the effective n, t on each estimate's small-sample degrees", fixed = TRUE)
  expect_match(text, "beside the model's labels (naive)", fixed = TRUE)
  # sure labels that the codes all agree with: no residual, but the errors the sample missed keep a sampling part,
  # which the printout shows and says why
  data$.prob_yes <- as.numeric(data$.label == "yes")
  data$.prob_no <- 1 - data$.prob_yes
  coded <- review_sample(data, 100, weight = "uniform", seed = 41)
  coded$truth <- as.character(coded$.label)
  agreeing <- suppressMessages(label_shares(data, coded, truth, seed = 1, lambda = 1))
  printed <- capture.output(print(agreeing))
  expect_true(any(grepl("^ +yes +[0-9.]+ +[0-9.]+ +[0-9]+ +\\[.*\\] +[0-9,]+ +[0-9.]+ +[1-9][0-9]*% ", printed)))
  expect_match(gsub("\\s+", " ", paste(printed, collapse = " ")), "Wilson's centre for no error among the coded rows")
})

test_that("every line of the printouts is within getOption(\"width\")", {
  data <- simulated_labels(800, 19)
  coded <- review_sample(data, 100, weight = "confidence", seed = 19)
  fit <- label_regression(yes ~ x + group, data, coded, truth, family = "binomial", seed = 19)
  shares <- label_shares(data, coded, truth, by = "group", seed = 1)
  for (width in c(60, 80)) {
    withr::local_options(width = width)
    for (lines in list(format(fit), format(summary(fit)), format(shares))) {
      expect_lte(max(nchar(cli::ansi_strip(lines))), width)
    }
  }
})

test_that("the width ratio reads the terms whose intervals are finite, and says so", {
  data <- simulated_labels(800, 19)
  fit <- quietly(label_regression(yes ~ x, data, review_sample(data, 100, seed = 19), truth, seed = 19))
  widths <- with(fit$record$estimates, tapply(conf.high - conf.low, list(term, estimator), identity))
  expect_output(print(fit), sprintf("are %.2f times as wide as the coded rows' alone\\.",
                                    mean(widths[, "corrected"]) / mean(widths[, "coded_only"])))
  unbounded <- fit$record$estimates$estimator == "coded_only" & fit$record$estimates$term == "x"
  fit$record$estimates[unbounded, c("conf.low", "conf.high")] <- c(-Inf, Inf)
  expect_output(print(fit), sprintf("are %.2f times as wide as the coded rows' alone \\(where both\\s+are finite\\)",
                                    widths["(Intercept)", "corrected"] / widths["(Intercept)", "coded_only"]))
})

test_that("undecided texts print: their share, and for shares Manski's bounds beside the estimate", {
  data <- simulated_labels(1000, 41)
  coded <- review_sample(data, 150, weight = "uniform", seed = 41)
  coded$truth[1:3] <- NA
  # two texts whose coders disagree, split between their codes
  coded <- split_between_coders(coded, 4:5)
  shares <- suppressWarnings(label_shares(data, coded, truth, by = "group", seed = 1))
  printed <- capture.output(print(shares))
  text <- gsub("\\s+", " ", paste(printed, collapse = " "))
  expect_match(text, "lost rows: 3 of 150 drawn (2.0%), reweighted as if missing at random", fixed = TRUE)
  expect_match(text, "2 (1.3%) whose coders disagree, each coder's code weighted 1 / their number", fixed = TRUE)
  expect_match(text, "Undecided texts: 5 of 150 drawn (3.3%)", fixed = TRUE)
  expect_match(text, "Manski's bounds", fixed = TRUE)
  corrected <- shares[shares$estimator == "corrected", ]
  row <- corrected[corrected$group == "a" & corrected$label == "yes", ]
  expect_true(any(grepl(sprintf("^ +a +yes +%.3f +\\[%.3f, %.3f\\] ", row$estimate, row$bound.low, row$bound.high),
                        printed)))
  expect_true(all(corrected$bound.low <= corrected$estimate & corrected$estimate <= corrected$bound.high))
  glanced <- generics::glance(shares)
  expect_identical(c(glanced$lost_rows, glanced$split_texts), c(3L, 2L))
  expect_equal(glanced$undecided_share, 5 / 150)
  expect_identical(generics::tidy(shares)$bound.low, corrected$bound.low)
  # a slope's bounds are not made up: the printout says why there are none
  fit <- suppressWarnings(label_regression(yes ~ x, data, coded, truth, seed = 1))
  expect_match(gsub("\\s+", " ", paste(capture.output(print(fit)), collapse = " ")),
               "Bounds for a coefficient were they all of one label are not simple", fixed = TRUE)
  expect_false(any(grepl("Undecided", capture.output(print(label_shares(data, review_sample(data, 150, "uniform",
                                                                                            seed = 41), truth))))))
  # rows deleted from the coded rows cannot be bounded, and the printout says so
  dropped <- suppressWarnings(label_shares(data, coded[!is.na(coded$truth) & coded$.code_weight == 1, ], truth))
  expect_match(paste(capture.output(print(dropped)), collapse = " "), "no bounds are given")
})
