test_that("context_create makes a context that prints its settings", {
  ctx <- context_create(tiny_model(), n_ctx = 128L, n_threads = 1L, n_seq_max = 3L)
  expect_s3_class(ctx, "newrllama_context")
  out <- paste(cli::cli_fmt(print(ctx)), collapse = "\n")
  expect_match(out, "n_ctx: 128")
  expect_match(out, "n_seq_max: 3")
  expect_match(out, "threads: 1")
})

test_that("context_create checks its arguments in R", {
  model <- tiny_model()
  expect_error(context_create("model"), class = "newrllama4_error_invalid_argument")
  expect_error(context_create(model, n_ctx = 0L), class = "newrllama4_error_invalid_argument")
  expect_error(context_create(model, n_seq_max = 0L), class = "newrllama4_error_invalid_argument")
  expect_error(context_create(model, n_seq_max = NA), class = "newrllama4_error_invalid_argument")
  expect_error(context_create(model, n_threads = 1.5), class = "newrllama4_error_invalid_argument")
})

test_that("a freed context raises a classed error and frees only once", {
  ctx <- tiny_context()
  context_free(ctx)
  expect_no_error(context_free(ctx))
  expect_error(generate_parallel(ctx, "hello", progress = FALSE), class = "newrllama4_error_closed")
  expect_match(paste(cli::cli_fmt(print(ctx)), collapse = ""), "freed")
})
