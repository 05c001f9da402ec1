test_that("model_load loads a GGUF and prints what it is", {
  model <- tiny_model()
  expect_s3_class(model, "newrllama_model")
  out <- utils::capture.output(print(model))
  expect_match(paste(out, collapse = "\n"), "newrllama4-tiny.gguf")
  expect_match(paste(out, collapse = "\n"), "parameters")
})

test_that("model_load checks its arguments in R", {
  expect_error(model_load(file.path(tempdir(), "missing.gguf")), class = "newrllama4_error_invalid_argument")
  expect_error(model_load(tempdir()), class = "newrllama4_error_invalid_argument")
  expect_error(model_load(42), class = "newrllama4_error_invalid_argument")
  expect_error(model_load(tiny_model_path(), n_gpu_layers = "all"), class = "newrllama4_error_invalid_argument")
  expect_error(model_load(tiny_model_path(), use_mmap = NA), class = "newrllama4_error_invalid_argument")
})

test_that("a model name loads the model its package carries; an unknown name lists the known ones", {
  expect_true(is_model_name("smollm2-135m-instruct"))
  expect_false(is_model_name("./smollm2-135m-instruct"))
  expect_false(is_model_name("dir\\model"))
  expect_false(is_model_name("model.GGUF"))
  expect_false(is_model_name(NULL))
  skip_without_engine()
  model <- model_load("smollm2-135m-instruct")
  on.exit(model_free(model))
  expect_match(basename(model$py$path), "^SmolLM2-135M-Instruct")
  messages <- list(list(role = "system", content = "Label the sentiment."),
                   list(role = "user", content = "I love it"),
                   list(role = "assistant", content = "positive"),
                   list(role = "user", content = "I hate it"))
  expect_equal(apply_chat_template(model, messages), paste0(
    "<|im_start|>system\nLabel the sentiment.<|im_end|>\n<|im_start|>user\nI love it<|im_end|>\n",
    "<|im_start|>assistant\npositive<|im_end|>\n<|im_start|>user\nI hate it<|im_end|>\n<|im_start|>assistant\n"
  ))
  err <- expect_error(model_load("smollm2"), class = "newrllama4_error_invalid_argument")
  expect_match(conditionMessage(err), "gemma3-270m.*smollm2-135m-instruct")
})

test_that("a corrupt GGUF is a model_load error, not a crash", {
  broken <- tempfile(fileext = ".gguf")
  writeBin(readBin(tiny_model_path(), "raw", 5000), broken)
  expect_error(model_load(broken), class = "newrllama4_error_model_load")
})

test_that("a freed model raises a classed error, and so do its contexts", {
  model <- model_load(tiny_model_path())
  ctx <- context_create(model, n_ctx = 64L, n_seq_max = 1L)
  model_free(model)
  expect_no_error(model_free(model))
  expect_error(model_tokenize(model, "hello"), class = "newrllama4_error_closed")
  expect_error(generate(ctx, "hello"), class = "newrllama4_error_closed")
  expect_error(context_create(model), class = "newrllama4_error_closed")
  expect_match(paste(utils::capture.output(print(model)), collapse = ""), "freed")
})

test_that("a model saved and read back is one classed error that says to load it again", {
  path <- tempfile(fileext = ".rds")
  saveRDS(tiny_model(), path)
  restored <- readRDS(path)
  for (use in list(function() model_tokenize(restored, "hello"), function() context_create(restored),
                   function() apply_chat_template(restored, list(list(role = "user", content = "hi"))))) {
    err <- expect_error(use(), class = "newrllama4_error_closed")
    expect_equal(err$what, "model")
    expect_match(conditionMessage(err), "another R session.*model_load")
  }
  expect_match(paste(utils::capture.output(print(restored)), collapse = ""), "another R session")
  expect_no_error(model_free(restored))
  expect_type(model_tokenize(tiny_model(), "hello"), "integer")
})

test_that("the default model loads and answers", {
  skip_without_engine()
  model <- model_load()
  on.exit(model_free(model))
  ctx <- context_create(model, n_ctx = 256L, n_seq_max = 2L)
  answers <- generate_parallel(ctx, c("The capital of France is the city of", "Water is made of hydrogen and"),
                               max_tokens = 12L, temperature = 0, progress = FALSE)
  expect_match(answers[[1]], "Paris")
  expect_match(tolower(answers[[2]]), "oxygen")
  # a KV cache of 256 x 32768 cells is tens of GB: refused before any is allocated
  err <- expect_error(context_create(model, n_ctx = 32768L, n_seq_max = 256L),
                      class = "newrllama4_error_context_too_large")
  expect_s3_class(err, "newrllama4_error_context")
  expect_gt(err$needed_bytes, 80e9)  # more than R's 32-bit integers hold: a double
  expect_gt(err$needed_bytes, err$available_bytes)
  expect_match(conditionMessage(err), "GB of KV cache, but only")
})
