test_that("examples are rendered as user and assistant turns, after the instruction", {
  ctx <- tiny_context()
  examples <- data.frame(review = c("Love it.", "Awful."), .label = c("positive", "negative"))
  prompt <- render_prompts("chat template", instruction, example_turns(examples, rlang::quo(review),
                                                                      answer_shape(sentiment, NULL)), "So so.")
  expect_identical(apply_chat_template(ctx$model, prompt[[1]]), paste0(
    "<|im_start|>system\n", instruction, "<|im_end|>\n",
    "<|im_start|>user\nLove it.<|im_end|>\n<|im_start|>assistant\npositive<|im_end|>\n",
    "<|im_start|>user\nAwful.<|im_end|>\n<|im_start|>assistant\nnegative<|im_end|>\n",
    "<|im_start|>user\nSo so.<|im_end|>\n<|im_start|>assistant\n"
  ))
  schema_examples <- data.frame(review = "Two stars.", stars = 2L, mood = factor("angry"))
  turns <- example_turns(schema_examples, rlang::quo(review),
                         answer_shape(NULL, list(stars = "integer", mood = c("happy", "angry"))))
  expect_identical(turns[[1]]$answer, '{"stars":2,"mood":"angry"}')
  out <- annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples, context = ctx,
                  progress = FALSE)
  expect_false(anyNA(out$.label))
  expect_gt(manifest(out)$timings$cached_prompt_tokens, 0)  # the shared instruction and examples, decoded once
})

test_that("a model without a chat template gets the plain layout", {
  skip_without_engine()
  path <- file.path(tempdir(), "newrllama4-tiny-base.gguf")
  testing_module()$write_tiny_model(path, chat_template = FALSE)
  base <- model_load(path)
  examples <- data.frame(review = "Love it.", .label = "positive")
  prompt <- render_prompts("plain", instruction, example_turns(examples, rlang::quo(review),
                                                               answer_shape(sentiment, NULL)), "So so.")
  expect_identical(prompt, paste0(instruction, "\n\nText: Love it.\nAnswer: positive\n\nText: So so.\nAnswer:"))
  out <- annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples,
                  context = context_create(base, n_ctx = 256L, n_seq_max = 2L), progress = FALSE)
  expect_identical(manifest(out)$prompt$layout, "plain")
  expect_false(anyNA(out$.label))
})

test_that("a worked example whose label is not among the labels is refused, named", {
  examples <- data.frame(review = c("Love it.", "Meh.", "Hate it."), .label = c("positive", "so-so", NA))
  err <- expect_error(
    annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples, context = tiny_context(),
                   progress = FALSE),
    class = "newrllama4_error_example_label"
  )
  expect_s3_class(err, "newrllama4_error_invalid_argument")
  expect_identical(err$examples, 2:3)
  expect_match(conditionMessage(err), "so-so")
})
