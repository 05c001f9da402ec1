test_that("context_create makes a context that prints its settings", {
  ctx <- context_create(tiny_model(), n_ctx = 128L, n_threads = 1L, n_seq_max = 3L)
  expect_s3_class(ctx, "newrllama4_context")
  out <- paste(utils::capture.output(print(ctx)), collapse = "\n")
  expect_match(out, "n_ctx: 128")
  expect_match(out, "n_seq_max: 3")
  expect_match(out, "threads: 1")
  expect_match(out, "batch-invariant")
})

test_that("batch_invariant = FALSE is the fast lane, recorded in the stats and the manifest", {
  ctx <- context_create(tiny_model(), n_ctx = 128L, n_seq_max = 2L, batch_invariant = FALSE)
  expect_match(paste(utils::capture.output(print(ctx)), collapse = "\n"), "fast lane.*runs in worker process [0-9]+")
  out <- generate_parallel(ctx, c("once upon a time", "the river"), max_tokens = 4L, temperature = 0, progress = FALSE)
  expect_length(out, 2L)
  expect_false(attr(out, "stats")$batch_invariant)
  expect_false(attr(out, "stats")$identity_guaranteed)
  expect_identical(manifest(out)$parameters$batch_invariant, FALSE)
  expect_error(context_create(tiny_model(), batch_invariant = NA), class = "newrllama4_error_invalid_argument")
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

test_that("context_create()'s defaults are the engine's (ContextSettings)", {
  skip_without_engine()
  fields <- reticulate::import("dataclasses")$fields(engine()$context_settings$ContextSettings)
  engine_defaults <- stats::setNames(lapply(fields, function(f) f$default), vapply(fields, function(f) f$name, ""))
  r_defaults <- lapply(as.list(formals(context_create))[-1], eval)
  # R gives the engine n_batch = max(512, n_seq_max) rather than an argument
  expect_setequal(names(r_defaults), setdiff(names(engine_defaults), "n_batch"))
  expect_equal(r_defaults, engine_defaults[names(r_defaults)])
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
  err <- expect_error(generate_parallel(ctx, "hello", progress = FALSE), class = "newrllama4_error_closed")
  expect_match(conditionMessage(err), "freed.*context_create")
  expect_match(paste(utils::capture.output(print(ctx)), collapse = ""), "freed")
})

test_that("n_ctx beyond the model's trained length is refused, not lowered", {
  err <- expect_error(context_create(tiny_model(), n_ctx = 1e9), class = "newrllama4_error_invalid_argument")
  expect_equal(err$argument, "n_ctx")
  expect_match(conditionMessage(err), "at most 4096, the context length the model was trained for")
})

test_that("a context saved and read back is one classed error that says to create it again", {
  ctx <- tiny_context()
  path <- tempfile(fileext = ".rds")
  saveRDS(ctx, path)
  restored <- readRDS(path)
  for (use in list(function() generate_parallel(restored, "hello", progress = FALSE),
                   function() generate(restored, "hello"))) {
    err <- expect_error(use(), class = "newrllama4_error_closed")
    expect_equal(err$what, "context")
    expect_match(conditionMessage(err), "another R session")
    expect_match(conditionMessage(err), "context_create()", fixed = TRUE)
  }
  expect_match(paste(utils::capture.output(print(restored)), collapse = ""), "another R session")
  expect_no_error(context_free(restored))
  expect_identical(c(generate(ctx, "hello", max_tokens = 3L, temperature = 0)),
                   c(generate(tiny_context(), "hello", max_tokens = 3L, temperature = 0)))
})
