test_that("codes written for a drawn sample come back from read_codes() as the app's would, ready for the estimators", {
  skip_if_not_installed("RSQLite")
  skip_if_not_installed("shiny")
  data <- simulated_labels(300, seed = 3)
  sample <- review_sample(data, n = 40, seed = 1)
  file <- withr::local_tempfile(fileext = ".sqlite")
  expect_identical(write_codes(file, sample, sample$truth, labels = c("yes", "no"), instruction = "Yes?"), file)
  codes <- read_codes(file)
  expect_identical(codes$.row, sample$.row)
  expect_identical(as.character(codes$code), as.character(sample$truth))
  expect_identical(unique(codes$.status), "coded")
  expect_identical(unique(read_codes(file, by = "coder")$.coder), "coder")
  expect_equal(coef(label_regression(yes ~ x, data, codes, code, seed = 1)),
               coef(label_regression(yes ~ x, data, sample, truth, seed = 1)))
})

test_that("a file is made as coding_app() makes it: the task from the annotation's manifest, the texts from `text`", {
  skip_if_not_installed("RSQLite")
  skip_if_not_installed("shiny")
  sample <- data.frame(body = c("Great film.", "Dull.", "Fine."), .label = factor(c("yes", "no", "yes")))
  attr(sample, "manifest") <- list(prompt = list(labels = c("yes", "no"), instruction = "Does the reviewer like it?"))
  file <- withr::local_tempfile(fileext = ".sqlite")
  write_codes(file, sample, c("yes", "no", "no"), text = "body")
  made <- withr::local_tempfile(fileext = ".sqlite")
  coding_app(sample, made, text = "body")
  expect_identical(store_meta(file)[c("sample", "texts", "task")], store_meta(made)[c("sample", "texts", "task")])
  expect_identical(read_codes(file)$code, factor(c("yes", "no", "no"), levels = c("yes", "no")))
})

test_that("some rows, uncodable ones, seconds, several coders and an adjudication, as in the app", {
  fixture <- coding_fixture(n = 4, overlap = 0)
  file <- fixture$file
  write_codes(file, fixture$sample, c("yes", "yes", NA, NA), coder = "ana", reason = c(NA, NA, "in French", NA),
              seconds = c(3, 4, 5, NA))
  write_codes(file, fixture$sample[2, ], "no", coder = "ben")
  expect_warning(codes <- read_codes(file, disagreements = "missing"), class = "newrllama4_warning_disagreements_missing")
  expect_identical(codes$.status, c("coded", "disagreement", "uncodable", "not coded"))
  expect_identical(codes$.reason[[3]], "in French")
  by_coder <- read_codes(file, by = "coder")
  expect_identical(by_coder$.coder, c("ana", "ana", "ben", "ana"))
  expect_identical(by_coder$.seconds, c(3, 4, NA, 5))
  write_codes(file, fixture$sample[2, ], "no", coder = "eve", role = "adjudication")
  expect_identical(read_codes(file)$.status[[2]], "adjudicated")
  expect_identical(as.character(read_codes(file)$code), c("yes", "no", NA, NA))
})

test_that("schema codes: a data frame with a column per field, each of its kind", {
  skip_if_not_installed("RSQLite")
  skip_if_not_installed("shiny")
  sample <- data.frame(text = c("Cut taxes now.", "Lock them up.", "Hm."))
  file <- withr::local_tempfile(fileext = ".sqlite")
  schema <- list(topic = c("tax", "crime"), urgent = "boolean", count = "integer")
  codes <- data.frame(topic = factor(c("tax", "crime", NA)), urgent = c(TRUE, FALSE, NA), count = c(2L, NA, NA))
  write_codes(file, sample, codes, schema = schema, instruction = "Code it.")
  read <- read_codes(file)
  expect_identical(read$topic, factor(c("tax", "crime", NA), levels = c("tax", "crime")))
  expect_identical(read$urgent, c(TRUE, FALSE, NA))
  expect_identical(read$count, c(2L, NA, NA))
  expect_identical(read$.status, c("coded", "coded", "not coded"))
  expect_error(write_codes(file, sample, c("tax", "crime", "tax")), "column per field",
               class = "newrllama4_error_invalid_argument")
})

test_that("a code that is not the codebook's refuses them all, naming the rows, and nothing is written", {
  fixture <- coding_fixture(n = 3, overlap = 0)
  err <- expect_error(write_codes(fixture$file, fixture$sample, c("yes", "maybe", NA), reason = c(NA, NA, " ")),
                      class = "newrllama4_error_code_refused")
  expect_identical(sub(":.*", "", err$problems), c("Row 2", "Row 3"))
  expect_match(err$problems[[1]], "not one of the codebook's")
  expect_match(err$problems[[2]], "Say why")
  expect_error(write_codes(fixture$file, fixture$sample, c("yes", "no", "no"), reason = c(NA, NA, "blank")),
               "not both: row 3", class = "newrllama4_error_invalid_argument")
  expect_identical(read_codes(fixture$file)$.status, rep("not coded", 3))
})

test_that("codes from a CSV file: empty cells leave rows uncoded, a slip of case or spaces is named", {
  skip_if_not_installed("RSQLite")
  skip_if_not_installed("shiny")
  sample <- data.frame(text = c("Cut taxes now.", "Lock them up.", "Hm.", "Tax crime."))
  file <- withr::local_tempfile(fileext = ".sqlite")
  schema <- list(topic = c("tax", "crime"), urgent = "boolean")
  typed <- utils::read.csv(text = "topic,urgent,label\ntax,TRUE,yes\ncrime,FALSE,\n,,no\n,,", strip.white = FALSE)
  write_codes(file, sample, typed[c("topic", "urgent")], schema = schema, instruction = "Code it.")
  expect_identical(read_codes(file)$.status, c("coded", "coded", "not coded", "not coded"))
  labelled <- withr::local_tempfile(fileext = ".sqlite")
  write_codes(labelled, sample, typed$label, labels = c("yes", "no"), instruction = "Yes?")
  expect_identical(read_codes(labelled)$.status, c("coded", "not coded", "coded", "not coded"))

  slips <- withr::local_tempfile(fileext = ".sqlite")
  err <- expect_error(write_codes(slips, sample, c("Yes", "no ", "maybe", NA), labels = c("yes", "no"),
                                  instruction = "Yes?"), class = "newrllama4_error_code_refused")
  slip <- "Row %d: Its label is not one of the codebook's: \"%s\" differs from one only in case or spaces."
  expect_identical(err$problems[1:2], sprintf(slip, 1:2, c("Yes", "no ")))
  expect_identical(err$problems[[3]], "Row 3: Its label is not one of the codebook's.")
  err <- expect_error(write_codes(file, sample[1, , drop = FALSE], data.frame(topic = "Tax", urgent = TRUE)),
                      class = "newrllama4_error_code_refused")
  expect_match(err$problems, "topic must be one of tax, crime: \"Tax\" differs", fixed = TRUE)
})

test_that("arguments are checked before anything is written; rows of another sample are refused", {
  fixture <- coding_fixture(n = 3, overlap = 0)
  file <- fixture$file
  expect_error(write_codes(file, fixture$sample, c("yes", "no")), "one code per row",
               class = "newrllama4_error_invalid_argument")
  expect_error(write_codes(file, fixture$sample, list("yes", "no", "no")), class = "newrllama4_error_invalid_argument")
  expect_error(write_codes(file, fixture$sample, c("yes", "no", "no"), seconds = "3"),
               class = "newrllama4_error_invalid_argument")
  expect_error(write_codes(file, fixture$sample, c("yes", "no", "no"), labels = c("yes", "no")), "is fixed",
               class = "newrllama4_error_invalid_argument")
  other <- data.frame(text = "Another.", .row = 9L)
  expect_error(write_codes(file, other, "yes"), "not in the sample", class = "newrllama4_error_invalid_argument")
  expect_error(write_codes(tempfile(), fixture$sample[0, ], character()), class = "newrllama4_error_invalid_argument")
  expect_identical(read_codes(file)$.status, rep("not coded", 3))
})
