test_that("scalar checks accept good values and name the argument otherwise", {
  expect_identical(check_whole(3, "n", min = 1), 3L)
  expect_identical(check_number(0.5, "p", min = 0, max = 1), 0.5)
  for (bad in list(NA, -1, 2.5, c(1, 2), "3", NULL, Inf)) {
    err <- expect_error(check_whole(bad, "max_tokens", min = 0), class = "newrllama4_error_invalid_argument")
    expect_equal(err$argument, "max_tokens")
    expect_match(conditionMessage(err), "max_tokens")
  }
  expect_error(check_number(0, "top_p", min = 0, max = 1, open_min = TRUE), class = "newrllama4_error_invalid_argument")
  expect_error(check_flag(NA, "use_mmap"), class = "newrllama4_error_invalid_argument")
  expect_error(check_string(c("a", "b"), "text"), class = "newrllama4_error_invalid_argument")
})

test_that("seeds: -1 and NULL mean random, others pass through", {
  expect_null(check_seed(-1L))
  expect_null(check_seed(NULL))
  expect_identical(check_seed(42), 42L)
  expect_identical(check_seed(2^33), 2^33)
  expect_error(check_seed(-5), class = "newrllama4_error_invalid_argument")
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
