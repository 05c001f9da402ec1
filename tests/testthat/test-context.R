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
  expect_error(context_create(model, prefix_cache = "yes"), class = "newrllama4_error_invalid_argument")
  expect_error(context_create(model, prefix_cache_mb = -1), class = "newrllama4_error_invalid_argument")
})

test_that("a shared instruction is decoded once, reused by the next call, and cleared on request", {
  instruction <- paste(rep("tell me a story about the king and the queen of the river", 4), collapse = " ")
  prompts <- paste(instruction, c("once", "upon", "a", "time"))
  ctx <- tiny_context(n_seq_max = 2L)
  first <- generate_parallel(ctx, prompts, max_tokens = 6L, temperature = 0, progress = FALSE)
  again <- generate_parallel(ctx, prompts, max_tokens = 6L, temperature = 0, progress = FALSE)
  context_clear_cache(ctx)
  cleared <- generate_parallel(ctx, prompts, max_tokens = 6L, temperature = 0, progress = FALSE)
  without <- generate_parallel(
    context_create(tiny_model(), n_ctx = 256L, n_seq_max = 2L, prefix_cache = FALSE),
    prompts, max_tokens = 6L, temperature = 0, progress = FALSE
  )
  stats <- function(x, field) attr(x, "stats")[[field]]
  expect_identical(as.vector(first), as.vector(without))
  expect_identical(as.vector(again), as.vector(without))
  expect_gt(stats(first, "cached_prompt_tokens"), 0)
  expect_gt(stats(again, "cached_prompt_tokens"), stats(first, "cached_prompt_tokens"))
  expect_identical(stats(cleared, "cached_prompt_tokens"), stats(first, "cached_prompt_tokens"))
  expect_identical(stats(without, "cached_prompt_tokens"), 0L)
})

test_that("a freed context raises a classed error and frees only once", {
  ctx <- tiny_context()
  context_free(ctx)
  expect_no_error(context_free(ctx))
  expect_error(generate_parallel(ctx, "hello", progress = FALSE), class = "newrllama4_error_closed")
  expect_match(paste(cli::cli_fmt(print(ctx)), collapse = ""), "freed")
})
