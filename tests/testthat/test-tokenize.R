test_that("tokenize and detokenize round-trip", {
  model <- tiny_model()
  ids <- model_tokenize(model, "hello how are you")
  expect_type(ids, "integer")
  expect_equal(ids[[1]], 1L)
  expect_equal(model_tokenize(model, "hello how are you", add_special = FALSE), ids[-1])
  expect_equal(model_detokenize(model, ids[-1]), "hello how are you")
  expect_equal(model_detokenize(model, model_tokenize(model, "café 日本", add_special = FALSE)), "café 日本")
})

test_that("tokenize and detokenize check their arguments", {
  model <- tiny_model()
  expect_error(model_tokenize(model, c("a", "b")), class = "newrllama4_error_invalid_argument")
  expect_error(model_tokenize(model, NA_character_), class = "newrllama4_error_invalid_argument")
  expect_error(model_tokenize("model", "a"), class = "newrllama4_error_invalid_argument")
  expect_error(model_detokenize(model, c(1, NA)), class = "newrllama4_error_invalid_argument")
  expect_error(model_detokenize(model, -1L), class = "newrllama4_error_invalid_argument")
  expect_error(model_detokenize(model, 10^6), class = "newrllama4_error_invalid_argument")
})

test_that("detokenizing a NUL byte token gives U+FFFD, and other text is kept", {
  model <- tiny_model()
  nul_tokens <- unlist(model$py$tokenize(reticulate::py_eval("chr(0)", convert = FALSE), add_special = FALSE))
  hello <- model_tokenize(model, "hello", add_special = FALSE)
  # the tokenizer spells a lone NUL as a word-start marker and the byte token <0x00>
  expect_equal(model_detokenize(model, c(hello, nul_tokens, hello)), "hello \uFFFD hello")
})

test_that("text in latin1 tokenizes as its UTF-8 spelling; invalid text is an argument error", {
  model <- tiny_model()
  expect_identical(model_tokenize(model, iconv("café", "UTF-8", "latin1")), model_tokenize(model, "café"))
  expect_error(model_tokenize(model, "caf\xe9"), class = "newrllama4_error_invalid_argument")
})
