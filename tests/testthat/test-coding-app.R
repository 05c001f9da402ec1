test_that("coding_app() makes a Shiny app and checks its arguments", {
  fixture <- coding_fixture(n = 4)
  expect_s3_class(fixture$app, "shiny.appobj")
  bad <- function(...) expect_error(coding_app(...), class = "newrllama4_error_invalid_argument")
  bad(fixture$sample, fixture$file, overlap = 2)
  bad(fixture$sample[0, ], fixture$file)
  bad(list(text = "a"), fixture$file)
  bad(fixture$sample, fixture$file, labels = "yes")
  bad(fixture$sample, fixture$file, labels = c("a", "b"), schema = list(x = "string"))
  bad(data.frame(text = "a"), withr::local_tempfile(), seed = 1)  # neither labels nor schema
  bad(fixture$sample, fixture$file, uncodable = c("other"))
  bad(fixture$sample, fixture$file, uncodable = c("too short", "too short"))
  expect_error(coding_app(data.frame(body = "a"), withr::local_tempfile(), labels = c("a", "b")),
               class = "newrllama4_error_missing_column")
})

test_that("coding_app() and code_sample() take a string naming the texts' column as that column", {
  skip_if_not_installed("RSQLite")
  skip_if_not_installed("shiny")
  sample <- data.frame(body = c("first", "second"), .label = factor(c("a", "b")))
  by_name <- withr::local_tempfile(fileext = ".sqlite")
  coding_app(sample, by_name, text = "body")
  expect_identical(store_meta(by_name)$texts, sample$body)
  expect_error(coding_app(sample, withr::local_tempfile(fileext = ".sqlite"), text = "bdy"),
               "The columns of `sample`: body and .label", fixed = TRUE, class = "newrllama4_error_missing_column")
  # code_sample() passes `text` on to coding_app(), which makes the file before the
  # server starts: another machine's address without coders named ends the call right after
  through_code_sample <- withr::local_tempfile(fileext = ".sqlite")
  expect_error(code_sample(sample, through_code_sample, text = "body", host = "256.0.0.1", port = 8765L,
                           launch.browser = FALSE), class = "newrllama4_error_coding_access")
  expect_identical(store_meta(through_code_sample)$texts, sample$body)
})

test_that("labels, schema and instruction come from the annotation's manifest, else from .label", {
  skip_if_not_installed("RSQLite")
  sample <- data.frame(body = c("first", "second"), .label = factor(c("b", "a"), levels = c("b", "a")))
  attr(sample, "manifest") <- structure(list(prompt = list(instruction = "Which?", labels = c("a", "b"))),
                                        class = "newrllama4_manifest")
  task <- coding_task(sample, NULL, NULL, NULL, current_env())
  expect_identical(task$instruction, "Which?")
  expect_identical(task$labels$label, c("a", "b"))
  attr(sample, "manifest") <- NULL
  expect_identical(coding_task(sample, NULL, NULL, NULL, current_env())$labels$label, c("b", "a"))
  schema <- jsonlite::toJSON(list(type = "object", properties = list(
    tone = list(enum = list("calm", "angry")), n = list(type = "integer", description = "How many"))), auto_unbox = TRUE)
  attr(sample, "manifest") <- structure(list(prompt = list(instruction = "Fields", schema = as.character(schema))),
                                        class = "newrllama4_manifest")
  fields <- coding_task(sample, NULL, NULL, NULL, current_env())$fields
  expect_identical(vapply(fields, `[[`, "", "kind"), c("enum", "integer"))
  expect_identical(fields[[1]]$values, c("calm", "angry"))
  expect_identical(fields[[2]]$description, "How many")
  file <- withr::local_tempfile(fileext = ".sqlite")
  expect_s3_class(coding_app(sample, file, text = toupper(body)), "shiny.appobj")
  expect_identical(store_meta(file)$texts, c("FIRST", "SECOND"))
})

test_that("named labels are the codebook: each label with its description", {
  labels <- coding_labels(c(yes = "Says yes", no = "Says no", "unsure"), current_env())
  expect_identical(labels$label, c("yes", "no", "unsure"))
  expect_identical(labels$description, c("Says yes", "Says no", ""))
})
