# The longest prompt counted by tokens_needed(), against every prompt counted whole.
expect_exact_longest <- function(model, layout, texts, turns = list(), orders = list(integer()), answer) {
  needed <- tokens_needed(model, layout, "Label the text.", turns, texts, seq_along(texts), orders, "none",
                          answer, list(max_tokens = 7L))
  prompts <- ensemble_prompts(layout, "Label the text.", turns, texts, orders, "none")
  whole <- unlist(model$py$prompt_lengths(as.list(prompts)))
  expect_identical(needed$prompt, as.integer(max(whole)))
  expect_identical(whole[[needed$row]], max(whole[seq_along(texts)]))
  needed
}

test_that("the longest prompt is counted exactly, on texts whose tokens merge with the template's", {
  texts <- vapply(1:60, function(i) words_of_length(i %% 17 + 1, i), "")
  # a space, a newline or punctuation where the text meets the template
  texts <- c(texts, paste0(" ", texts[1:5]), paste0(texts[6:10], "\n"), paste0(".", texts[11:15]))
  answer <- list(kind = "text")
  expect_exact_longest(tiny_model(), "plain", "one text alone", answer = answer)
  expect_exact_longest(tiny_model(), "chat template", texts, answer = answer)
  expect_exact_longest(tiny_model(), "plain", texts, answer = answer)
  expect_exact_longest(model_load("gemma3-270m"), "plain", texts, answer = answer)
  needed <- expect_exact_longest(model_load("smollm2-135m-instruct"), "chat template", texts, answer = answer)
  expect_identical(needed$total, needed$prompt + 7L)
  expect_identical(needed$must_fit, needed$prompt)  # a generated answer may stop at the window's end
})

test_that("every example order counts, and a label's answer is its longest spelling", {
  skip_without_engine()
  model <- model_load("smollm2-135m-instruct")
  examples <- list(list(text = words_of_length(40, 1), answer = "yes"), list(text = "short", answer = "no"))
  texts <- vapply(1:20, function(i) words_of_length(i, i), "")
  answer <- list(kind = "labels", labels = c("yes", "unsure"))
  needed <- expect_exact_longest(model, "chat template", texts, turns = examples, orders = list(1:2, 2:1),
                                 answer = answer)
  spellings <- lengths(lapply(c("yes", "unsure", " yes", " unsure"), model_tokenize, model = model,
                              add_special = FALSE))
  expect_identical(needed$total - needed$prompt, max(spellings))
  expect_identical(needed$must_fit, needed$total)
})

test_that("a schema's max_tokens may outgrow a given context: rows run, and one the window cuts off fails alone", {
  ctx <- tiny_context(n_ctx = 256L, n_seq_max = 2L)
  on.exit(context_free(ctx))
  # max_tokens past n_ctx is no reason to refuse: a short answer completes
  short <- annotate_texts(c("one", "two"), instruction = "Extract the fields.", schema = list(ok = "boolean"),
                          context = ctx, progress = FALSE, max_tokens = 400L)
  expect_true(all(is.na(short$.error)))
  expect_type(short$ok, "logical")
  # the random model's free string runs to the window's end: that row fails with the engine's reason
  long <- suppressWarnings(annotate_texts(c("one", "two"), instruction = "Extract the fields.",
                                          schema = list(word = "string"), context = ctx, progress = FALSE,
                                          max_tokens = 400L))
  expect_identical(nrow(long), 2L)
  cut_off <- !is.na(long$.error)
  expect_true(any(cut_off))
  expect_match(long$.error[cut_off], "cut off by max_tokens or the context size")
})

test_that("a given context that cannot hold the longest row fails before any row runs, naming it", {
  ctx <- tiny_context(n_ctx = 256L, n_seq_max = 2L)
  on.exit(context_free(ctx))
  texts <- c("short", words_of_length(400, 2), "also short")
  cache <- withr::local_tempfile(fileext = ".sqlite")
  err <- expect_error(annotate_texts(texts, instruction = "Label it.", labels = c("a", "b"), context = ctx,
                                     cache = cache, progress = FALSE),
                      class = "newrllama4_error_context_too_small")
  expect_identical(err$row, 2L)
  expect_identical(err$n_ctx, 256L)
  expect_gt(err$needed, 256L)
  expect_match(conditionMessage(err), "row 2 needs")
  expect_false(file.exists(cache))  # nothing ran
  # the size it names holds the row
  bigger <- context_create(tiny_model(), n_ctx = context_size(err$needed), n_seq_max = 2L)
  on.exit(context_free(bigger), add = TRUE)
  out <- annotate_texts(texts, instruction = "Label it.", labels = c("a", "b"), context = bigger, progress = FALSE)
  expect_true(all(is.na(out$.error)))
})

test_that("a context is sized to the need, in llama.cpp's steps, within the model's window", {
  expect_identical(context_size(100), 2048L)
  expect_identical(context_size(2049), 2304L)
  expect_identical(context_size(3038), 3072L)
  expect_identical(context_size(20000, trained = 8192), 8192L)
})

test_that("rows longer than the model's window fail one by one, and the message says so", {
  skip_without_engine()
  model <- tiny_model()  # trained for 4096 tokens
  withr::defer(if (!is.null(the$annotation_context)) context_free(the$annotation_context))
  the$annotation_context <- NULL
  expect_message(ctx <- annotation_context(model, list(row = 3L, prompt = 5000L, must_fit = 5001L, total = 5001L)),
                 "longer than the model's window", class = "newrllama4_message_context_size")
  expect_identical(ctx$py$n_ctx, 4096L)
  # a need within the window is met by the context already made
  expect_identical(annotation_context(model, list(row = 1L, prompt = 3000L, must_fit = 3001L, total = 3001L)), ctx)
})
