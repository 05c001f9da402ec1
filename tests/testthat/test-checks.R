test_that("scalar checks accept good values and name the argument otherwise", {
  expect_identical(check_whole(3, "n", min = 1), 3L)
  expect_identical(check_number(0.5, "p", min = 0, max = 1), 0.5)
  for (bad in list(NA, -1, 2.5, c(1, 2), "3", NULL, Inf)) {
    err <- expect_error(check_whole(bad, "max_tokens", min = 0), class = "newrllama4_error_invalid_argument")
    expect_equal(err$argument, "max_tokens")
    expect_match(conditionMessage(err), "max_tokens")
  }
  expect_error(check_number(0, "top_p", min = 0, max = 1, open_min = TRUE), class = "newrllama4_error_invalid_argument")
  expect_identical(check_whole(10, "n", min = 0, max = 10), 10L)
  expect_error(check_whole(11, "n", min = 0, max = 10), "in \\[0, 10\\]", class = "newrllama4_error_invalid_argument")
  expect_error(check_flag(NA, "use_mmap"), class = "newrllama4_error_invalid_argument")
  expect_error(check_string(c("a", "b"), "text"), class = "newrllama4_error_invalid_argument")
})

test_that("model paths must exist, be files and be GGUF", {
  expect_error(check_model_path(file.path(tempdir(), "nope.gguf")), "does not exist",
               class = "newrllama4_error_invalid_argument")
  expect_error(check_model_path(tempdir()), "directory", class = "newrllama4_error_invalid_argument")
  not_gguf <- tempfile(fileext = ".gguf")
  writeLines("hello", not_gguf)
  expect_error(check_model_path(not_gguf), "not a GGUF", class = "newrllama4_error_invalid_argument")
  expect_equal(check_model_path(tiny_model_path()), normalizePath(tiny_model_path()))
})

test_that("strings become UTF-8: latin1 translated, bytes and native strings kept if valid", {
  latin1 <- iconv("café", "UTF-8", "latin1")
  expect_identical(charToRaw(as_utf8(latin1, "x")), charToRaw("café"))
  valid_bytes <- "café"
  Encoding(valid_bytes) <- "bytes"
  expect_equal(Encoding(as_utf8(valid_bytes, "x")), "UTF-8")
  expect_identical(as_utf8(c(a = "x", b = "y"), "x"), c(a = "x", b = "y"))
  invalid <- c("ok", "caf\xe9", "ok", "a\xed\xa0\x80b")  # latin1 é, then an encoded surrogate
  for (encoding in c("unknown", "bytes")) {
    Encoding(invalid) <- encoding
    err <- expect_error(as_utf8(invalid, "prompts"), class = "newrllama4_error_invalid_argument")
    expect_equal(err$argument, "prompts")
    expect_match(conditionMessage(err), "Elements 2 and 4 are not valid UTF-8 text in `prompts`")
  }
})
