test_that("without a context, annotate_texts() makes one that holds a text past 2,048 tokens", {
  skip_without_engine()
  withr::defer(if (!is.null(the$annotation_context)) context_free(the$annotation_context))
  # 2,217 tokens: just past the 2,048 it gives short texts, as attention makes its
  # prefill time grow with the square of the length (3,800 tokens took 34 s a pass)
  long <- words_of_length(1450, 3)
  expect_message(
    out <- annotate_texts(c("A short one.", long), instruction = "Is the text about a river? Answer yes or no.",
                          labels = c("yes", "no"), progress = FALSE),
    class = "newrllama4_message_context_size"
  )
  expect_true(all(is.na(out$.error)))
  n_ctx <- the$annotation_context$py$n_ctx
  expect_gt(n_ctx, 2048L)
  expect_identical(n_ctx %% 256L, 0L)
  # the same rows again reuse that context, without a message
  expect_no_message(annotate_texts(long, instruction = "Is the text about a river? Answer yes or no.",
                                   labels = c("yes", "no"), progress = FALSE))
  expect_identical(the$annotation_context$py$n_ctx, n_ctx)
  # the labels are what a context sized by hand gives
  by_hand <- context_create(model_load("smollm2-135m-instruct"), n_ctx = n_ctx, n_seq_max = 2L)
  on.exit(context_free(by_hand))
  again <- annotate_texts(c("A short one.", long), instruction = "Is the text about a river? Answer yes or no.",
                          labels = c("yes", "no"), context = by_hand, progress = FALSE)
  expect_identical(again$.label, out$.label)
  expect_equal(again$.confidence, out$.confidence, tolerance = 1e-6)
})
