test_that("tokenize and detokenize round-trip", {
  model <- tiny_model()
  ids <- tokenize(model, "hello how are you")
  expect_type(ids, "integer")
  expect_equal(ids[[1]], 1L)
  expect_equal(tokenize(model, "hello how are you", add_special = FALSE), ids[-1])
  expect_equal(detokenize(model, ids[-1]), "hello how are you")
  expect_equal(detokenize(model, tokenize(model, "café 日本", add_special = FALSE)), "café 日本")
})

test_that("tokenize and detokenize check their arguments", {
  model <- tiny_model()
  expect_error(tokenize(model, c("a", "b")), class = "newrllama4_error_invalid_argument")
  expect_error(tokenize(model, NA_character_), class = "newrllama4_error_invalid_argument")
  expect_error(tokenize("model", "a"), class = "newrllama4_error_invalid_argument")
  expect_error(detokenize(model, c(1, NA)), class = "newrllama4_error_invalid_argument")
  expect_error(detokenize(model, -1L), class = "newrllama4_error_invalid_argument")
  expect_error(detokenize(model, 10^6), class = "newrllama4_error_invalid_argument")
})
