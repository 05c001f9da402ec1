test_that("every code is checked where it is written: the codebook's labels and each field's kind", {
  fixture <- coding_fixture(n = 2)
  refused <- function(...) {
    err <- expect_error(store_write(fixture$file, ...), class = "newrllama4_error_code_refused")
    err$problems
  }
  expect_match(refused(1, "ana", list(code = "maybe")), "not one of the codebook")
  expect_match(refused(1, "ana", list(code = list("yes"))), "not one of the codebook")
  expect_match(refused(1, "ana", NULL), "no code")
  expect_match(refused(3, "ana", list(code = "yes")), "not for a text")
  expect_match(refused(1.5, "ana", list(code = "yes")), "not for a text")
  expect_match(refused(1, "ana", NULL, uncodable = TRUE, reason = " "), "why it cannot be coded")
  expect_match(refused(1, "ana", list(code = "yes"), note = strrep("x", 2001)), "note")
  expect_match(refused(1, "ana", list(code = "yes"), role = "lead"), "role")
  expect_identical(nrow(store_codes(fixture$file)), 0L)
  store_write(fixture$file, 1, "ana", NULL, uncodable = TRUE, reason = "cut off")
  store_write(fixture$file, 2, "ana", list(code = "no"), note = strrep("x", 2000))
  expect_identical(nrow(store_codes(fixture$file)), 2L)

  sample <- data.frame(text = c("a", "b"))
  file <- withr::local_tempfile(fileext = ".sqlite")
  coding_app(sample, file, schema = list(stance = c("for", "against"), local = "boolean", n = "integer",
                                         share = "number", gist = "string"), seed = 1)
  code <- function(...) utils::modifyList(list(stance = "for", local = TRUE, n = 3, share = 0.5, gist = "ok"),
                                          list(...))
  refused <- function(value) {
    err <- expect_error(store_write(file, 1, "ana", value), class = "newrllama4_error_code_refused")
    err$problems
  }
  expect_match(refused(code(stance = "maybe")), "stance must be one of for, against")
  expect_match(refused(code(local = "yes")), "local must be yes or no")
  expect_match(refused(code(n = 2.7)), "n must be a whole number")
  expect_match(refused(code(share = Inf)), "share must be a number")
  expect_match(refused(code(gist = list("a", "b"))), "gist must be a text")
  expect_match(refused(code(gist = strrep("x", 2001))), "gist must be a text")
  expect_identical(refused(list(stance = NULL, local = NULL, n = 3, share = 0.5, gist = "ok")), c("Choose stance.", "Choose local."))
  expect_match(refused(list(stance = "for")), "fields are not the codebook")
  expect_identical(nrow(store_codes(file)), 0L)
  # numbers and texts may be left empty
  store_write(file, 1, "ana", list(stance = "for", local = FALSE, n = NULL, share = NULL, gist = NULL))
  expect_identical(read_codes(file)$local, c(FALSE, NA))
})

test_that("a schema's bounds hold on the server: numbers' limits, texts' lengths and pattern", {
  skip_if_not_installed("RSQLite")
  file <- withr::local_tempfile(fileext = ".sqlite")
  coding_app(data.frame(text = c("a", "b")), file, seed = 1, schema = list(
    n = list(type = "integer", minimum = 0, maximum = 10),
    share = list(type = "number", exclusiveMinimum = 0, exclusiveMaximum = 1),
    old = list(type = "number", minimum = 1, exclusiveMinimum = TRUE),  # JSON Schema's draft 4
    code = list(type = "string", minLength = 2, maxLength = 4, pattern = "^[A-Z]+$"),
    tone = list(enum = c("calm", "angry"))
  ))
  code <- function(...) utils::modifyList(list(n = 3, share = 0.5, old = 2, code = "AB", tone = "calm"), list(...))
  refused <- function(value) {
    err <- expect_error(store_write(file, 1, "ana", value), class = "newrllama4_error_code_refused")
    err$problems
  }
  expect_identical(refused(code(n = -7)), "n must be at least 0.")
  expect_identical(refused(code(n = 11)), "n must be at most 10.")
  expect_identical(refused(code(share = 0)), "share must be more than 0.")
  expect_identical(refused(code(share = 1)), "share must be less than 1.")
  expect_identical(refused(code(old = 1)), "old must be more than 1.")
  expect_identical(refused(code(code = "A")), "code must have at least 2 characters.")
  expect_identical(refused(code(code = "ABCDE")), "code must have at most 4 characters.")
  expect_identical(refused(code(code = "ab")), "code must match the pattern ^[A-Z]+$.")
  expect_identical(refused(code(tone = "sad")), "tone must be one of calm, angry.")
  expect_identical(nrow(store_codes(file)), 0L)
  store_write(file, 1, "ana", code(n = 0, share = 0.999, old = 1.01, code = "ABCD"))
  store_write(file, 2, "ana", code(n = 10, code = NA))  # a text left empty is no text to bound
  expect_identical(read_codes(file)$n, c(0L, 10L))
  # the page's inputs carry the bounds they can
  html <- as.character(code_form(store_meta(file)$task, NULL))
  expect_match(html, 'type="number" step="1" min="0" max="10"', fixed = TRUE)
  expect_match(html, 'type="text" maxlength="4"', fixed = TRUE)
})
