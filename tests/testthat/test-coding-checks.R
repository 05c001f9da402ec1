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
