# One way to name a column (columns.R): bare or as a string, by tidyselect's rules,
# and one classed error listing the columns when an argument names none.

test_that("a column is named bare or as a string, several with c(), renamed with names", {
  data <- data.frame(truth = 1:2, code = 2:1, tone_code = 3:4)
  pick <- function(x, ...) column_names(rlang::enquo(x), data, "truth", "coded", ...)
  expect_identical(pick(code), c(code = "code"))
  expect_identical(pick("code"), pick(code))
  expect_identical(pick(c(code, "truth"), n = "some"), c(code = "code", truth = "truth"))
  expect_identical(pick(c(tone = tone_code, flag = "code"), n = "some"), c(tone = "tone_code", flag = "code"))
  expect_identical(pick(tidyselect::starts_with("tone")), c(tone_code = "tone_code"))
  expect_null(pick(NULL))
  # a variable holding names, as in a loop over fields: those names, and no tidyselect warning
  column <- "code"
  expect_no_warning(expect_identical(pick(column), c(code = "code")))
  expect_identical(column_name(rlang::quo(column), data, "truth", "coded"), "code")
  # a schema's fields rather than a data frame's columns
  expect_identical(column_name(rlang::quo(tone), c("tone", "flag"), "field", "predicted", what = "field"), "tone")
})

test_that("an argument that names no column is a classed error listing the columns", {
  data <- data.frame(truth = 1:2, code = 2:1)
  wrong <- function(x, ...) {
    err <- expect_error(column_names(rlang::enquo(x), data, "truth", "coded", ...),
                        class = "newrllama4_error_missing_column")
    expect_s3_class(err, "newrllama4_error_invalid_argument")
    expect_identical(err$argument, "truth")
    expect_identical(err$choices, c("truth", "code"))
    expect_match(conditionMessage(err), "The columns of `coded`: truth and code", fixed = TRUE)
    err
  }
  expect_match(conditionMessage(wrong(truht)), "`truth` must name one column of `coded`, not \"truht\"",
               fixed = TRUE)
  wrong("truht")
  wrong(!!new.env())
  expect_match(conditionMessage(wrong(c(truth, code))), "It names 2")
  expect_match(conditionMessage(wrong(NULL, optional = FALSE)), "It is NULL")
  err <- expect_error(column_name(rlang::quo(tne), c("tone", "flag"), "field", "predicted", what = "coded field"),
                      class = "newrllama4_error_missing_column")
  expect_match(conditionMessage(err), "The coded fields of `predicted`: tone and flag", fixed = TRUE)
})

test_that("an argument that may be a column or a vector takes either, and names a column as every column argument", {
  data <- data.frame(truth = c("a", "b"), code = c("b", "b"))
  values <- function(x) column_values(rlang::enquo(x), data, "truth", "predicted")
  expect_identical(values(code), data$code)
  expect_identical(values("code"), data$code)
  codes <- c("a", "a")
  expect_identical(values(codes), codes)
  expect_identical(values(toupper(code)), c("B", "B"))
  expect_error(values(cdoe), "The columns of `predicted`", class = "newrllama4_error_missing_column")
})

test_that("a formula's name that is a label and a column of data takes the label, with a classed warning", {
  data <- simulated_labels(300, 41)
  coded <- review_sample(data, 80, weight = "uniform", seed = 41)
  fit <- label_regression(yes ~ x, data, coded, truth, seed = 1)
  data$yes <- stats::rnorm(300)
  expect_warning(shadowed <- label_regression(yes ~ x, data, coded, truth, seed = 1),
                 "both a label and a column of `data`: the formula takes the label",
                 class = "newrllama4_warning_label_shadows_column")
  expect_equal(coef(shadowed), coef(fit))
})

test_that("numbers with a decimal comma read as text are refused, naming the columns and the fix", {
  # read.csv(sep = ";") of a file saved with a decimal comma: x became a factor of 300 levels ("No coded rows tell
  # apart x-0,03..."), the probabilities missing, and coded rows read so were "not those rows of data"
  data <- simulated_labels(300, 42)
  coded <- review_sample(data, 80, weight = "uniform", seed = 42)
  reread <- function(frame, read = function(file) utils::read.csv(file, sep = ";")) {
    file <- withr::local_tempfile(fileext = ".csv")
    utils::write.csv2(frame, file, row.names = FALSE)
    read(file)
  }
  as_text <- reread(data)
  as_text$.label <- data$.label
  expect_error(label_regression(yes ~ x, as_text, coded, truth), "x of `data` holds numbers written with a decimal comma",
               class = "newrllama4_error_decimal_comma")
  expect_error(label_shares(as_text, coded, truth), ".prob_yes, .prob_no, and .confidence of `data` hold numbers",
               class = "newrllama4_error_decimal_comma")
  coded_text <- reread(coded)
  expect_error(label_shares(data, coded_text, truth), ".sample_prob, x, .prob_yes, .prob_no, and .confidence of `coded` hold",
               class = "newrllama4_error_invalid_argument")
  # read with read.csv2(), the same estimate
  expect_equal(coef(label_regression(yes ~ x, data, reread(coded, utils::read.csv2), truth, seed = 1)),
               coef(label_regression(yes ~ x, data, coded, truth, seed = 1)))
  # text with other commas is no number
  data$note <- rep(c("a, b", "1,5"), 150)
  expect_s3_class(label_regression(yes ~ x + note, data, review_sample(data, 80, weight = "uniform", seed = 42), truth,
                                   seed = 1), "newrllama4_label_regression")
})
