test_that("apply_chat_template uses the model's template", {
  model <- tiny_model()
  messages <- list(list(role = "user", content = "hello"))
  expect_equal(apply_chat_template(model, messages),
               "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
  expect_equal(apply_chat_template(model, messages, add_assistant = FALSE), "<|im_start|>user\nhello<|im_end|>\n")
})

test_that("apply_chat_template checks messages", {
  model <- tiny_model()
  expect_error(apply_chat_template(model, list()), class = "newrllama4_error_invalid_argument")
  expect_error(apply_chat_template(model, "hello"), class = "newrllama4_error_invalid_argument")
  expect_error(apply_chat_template(model, list(list(role = "user"))), class = "newrllama4_error_invalid_argument")
})

test_that("apply_chat_template reads latin1 messages and refuses invalid UTF-8", {
  model <- tiny_model()
  latin1 <- list(list(role = "user", content = iconv("café", "UTF-8", "latin1")))
  expect_equal(apply_chat_template(model, latin1), apply_chat_template(model, list(list(role = "user", content = "café"))))
  expect_error(apply_chat_template(model, list(list(role = "user", content = "caf\xe9"))),
               class = "newrllama4_error_invalid_argument")
})

test_that("a message check names every bad message", {
  err <- expect_error(apply_chat_template(tiny_model(), list(list(role = "user"), list(content = "x"))),
                      class = "newrllama4_error_invalid_argument")
  expect_match(conditionMessage(err), "messages 1 and 2 do not")
})

test_that("generate_parallel() and generate() take conversations, laid out with the model's template", {
  ctx <- tiny_context()
  conversation <- list(list(role = "system", content = "Answer."), list(role = "user", content = "hello"))
  answers <- generate_parallel(ctx, list(a = conversation, b = conversation[2]), max_tokens = 6L, temperature = 0,
                               progress = FALSE)
  expect_named(answers, c("a", "b"))
  rendered <- apply_chat_template(tiny_model(), conversation)
  expect_identical(answers[["a"]], as.vector(generate(ctx, rendered, max_tokens = 6L, temperature = 0)))
  expect_identical(as.vector(generate(ctx, conversation, max_tokens = 6L, temperature = 0)), answers[["a"]])
  error <- expect_error(generate_parallel(ctx, list(conversation, list(list(role = "user")))),
                        class = "newrllama4_error_invalid_argument")
  expect_match(conditionMessage(error), "prompts[[2]]", fixed = TRUE)
})
