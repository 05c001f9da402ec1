test_that("a second call reads the answers back from the result cache", {
  ctx <- tiny_context()
  path <- tempfile(fileext = ".sqlite")
  prompts <- c(a = "hello how are you", b = "once upon a time", c = "the king")
  first <- generate_parallel(ctx, prompts, max_tokens = 6L, temperature = 0, cache = path, progress = FALSE)
  expect_equal(generation_stats(first)$result_cache_hits, 0L)
  again <- generate_parallel(ctx, rev(prompts), max_tokens = 6L, temperature = 0, cache = path, progress = FALSE)
  expect_equal(generation_stats(again)$result_cache_hits, 3L)
  expect_identical(c(again)[names(prompts)], c(first))
  expect_match(answers_summary(again), "^# 3 prompts, 0 failed, 3 from the result cache, ")
  expect_equal(as.vector(generate(ctx, "the king", max_tokens = 6L, temperature = 0, cache = path)), first[["c"]])
})

test_that("a bad cache argument or a file that is not a result cache is a classed error", {
  ctx <- tiny_context()
  for (bad in list(1, NA_character_, c("a", "b"), "")) {
    expect_error(generate(ctx, "hello", cache = bad), class = "newrllama4_error_invalid_argument")
  }
  notes <- tempfile(fileext = ".txt")
  writeLines(strrep("not a database ", 100), notes)
  err <- expect_error(generate_parallel(ctx, "hello", cache = notes, progress = FALSE), class = "newrllama4_error_cache")
  expect_equal(err$path, notes)
  expect_match(conditionMessage(err), "not a usable SQLite database")
})

test_that("an Rscript killed with SIGKILL mid-run loses nothing it finished; the re-run computes only the rest", {
  skip_on_os("windows")  # no SIGKILL
  dir <- tempfile("killed-")
  dir.create(dir)
  prompts <- prompts_of_mixed_length(20)
  saveRDS(prompts, file.path(dir, "prompts.rds"))
  cache <- file.path(dir, "answers.sqlite")
  output <- run_child_killed_after(7, c(
    "ctx <- context_create(model_load(args[[1]]), n_ctx = 256L, n_seq_max = 4L, n_threads = 1L)",
    "generate_parallel(ctx, readRDS(args[[2]]), max_tokens = 10L, temperature = 0.8, seed = 5L,",
    "                  cache = args[[3]], progress = FALSE)"
  ), c(tiny_model_path(), file.path(dir, "prompts.rds"), cache))
  expect_false("finished" %in% output)
  expect_gt(attr(output, "status"), 0)  # 137 from the shell: killed by signal 9
  ctx <- tiny_context()
  rerun <- generate_parallel(ctx, prompts, max_tokens = 10L, temperature = 0.8, seed = 5L, cache = cache,
                             progress = FALSE)
  expect_equal(generation_stats(rerun)$result_cache_hits, 7L)
  uninterrupted <- generate_parallel(ctx, prompts, max_tokens = 10L, temperature = 0.8, seed = 5L, progress = FALSE)
  expect_identical(c(rerun), c(uninterrupted))
})
