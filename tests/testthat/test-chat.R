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
