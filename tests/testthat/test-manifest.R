test_that("the manifest records the model, the prompt, every parameter, the rows and the versions", {
  ctx <- tiny_context()
  data <- data.frame(text = c("hello how are you", NA, "once upon a time"))
  out <- suppressWarnings(annotate_texts(data, text, "Label it.", labels = c("king", "queen"), context = ctx,
                                   seed = 9L, min_p = 0.05, progress = FALSE))
  record <- manifest(out)
  expect_s3_class(record, "newrllama4_manifest")
  expect_identical(record$model$file, basename(tiny_model_path()))
  expect_identical(record$model$sha256, reticulate::import("newrllama4.sources")$file_sha256(tiny_model_path()))
  expect_match(record$prompt$chat_template_sha256, "^[0-9a-f]{64}$")
  expect_identical(record$prompt$layout, "chat template")
  expect_identical(record$prompt$instruction, "Label it.")
  expect_identical(record$prompt$labels, c("king", "queen"))
  expect_identical(record$prompt$examples, 0L)
  expect_identical(record$parameters$seed, 9L)
  expect_identical(record$parameters$temperature, 0)
  expect_identical(record$parameters$top_k, 40L)
  expect_identical(record$parameters$min_p, 0.05)  # passed through annotate_texts()'s ...
  expect_identical(record$parameters$n_seq_max, 4L)
  expect_identical(record$parameters[c("batch_invariant", "identity_guaranteed")],
                   list(batch_invariant = TRUE, identity_guaranteed = TRUE))
  expect_equal(record$parameters$kv_cache, "f16/f16")
  expect_identical(record$rows, list(total = 3L, skipped_missing_text = 1L, answered = 2L, failed = 0L))
  expect_identical(record$prompts, list(total = 2L, from_cache = 0L, computed = 2L, failed = 0L, cache = NA_character_))
  expect_gt(record$timings$total_seconds, 0)
  expect_named(record$versions, c("R", "newrllama4", "llama-cpp-python", "llama.cpp", "llama.cpp system",
                                  "llguidance", "numpy", "python", "platform"))
  table <- as.data.frame(record)
  expect_named(table, c("section", "item", "value"))
  expect_true(all(c("model", "prompt", "parameters", "rows", "prompts", "timings", "versions") %in% table$section))
  expect_identical(table$value[table$item == "sha256"], record$model$sha256)
  expect_match(paste(utils::capture.output(print(record)), collapse = "\n"), record$model$sha256, fixed = TRUE)
})

test_that("a schema is recorded as the JSON sent to the engine", {
  out <- annotate_texts("hello", instruction = "Count.", schema = list(n = list(type = "integer", minimum = 0, maximum = 9)),
                  context = tiny_context(), progress = FALSE)
  expect_identical(manifest(out)$prompt$schema, paste0(
    '{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":9}},',
    '"required":["n"],"additionalProperties":false}'
  ))
})

test_that("answers of generate_parallel() and generate() carry their manifest: model, parameters, constraints", {
  ctx <- tiny_context()
  answers <- generate_parallel(ctx, c("hello how are you", "once upon a time"), max_tokens = 3L, temperature = 0.5,
                               seed = 7L, stop = "\n", labels = c("king", "queen"), progress = FALSE)
  record <- manifest(answers)
  expect_identical(record$model$sha256, reticulate::import("newrllama4.sources")$file_sha256(tiny_model_path()))
  expect_identical(record$prompt$labels, c("king", "queen"))
  expect_identical(record$parameters[c("max_tokens", "temperature", "seed", "stop", "n_seq_max")],
                   list(max_tokens = 3L, temperature = 0.5, seed = 7L, stop = "\n", n_seq_max = 4L))
  expect_identical(record$prompts, list(total = 2L, from_cache = 0L, computed = 2L, failed = 0L, cache = NA_character_))
  expect_gt(record$timings$total_seconds, 0)
  expect_identical(record$versions$newrllama4, format(utils::packageVersion("newrllama4")))

  one <- generate(ctx, "hello", grammar = 'root ::= "yes" | "no"', temperature = 0)
  expect_identical(manifest(one)$prompt$grammar, 'root ::= "yes" | "no"')
  per_prompt <- generate_parallel(ctx, c("a", "b"), grammar = list('root ::= "x"', NULL), progress = FALSE)
  expect_identical(manifest(per_prompt)$prompt$grammar, "per prompt")
})

test_that("the model file is hashed when the manifest is asked for, as it was when it answered", {
  path <- tempfile(fileext = ".gguf")
  file.copy(tiny_model_path(), path)
  model <- model_load(path)
  answers <- generate_parallel(context_create(model, n_ctx = 64L, n_seq_max = 1L), "hello", max_tokens = 1L,
                               progress = FALSE)
  expect_true(is.na(attr(answers, "manifest")$model$sha256))  # not read by the call
  expect_identical(manifest(answers)$model$sha256, reticulate::import("newrllama4.sources")$file_sha256(path))
  model_free(model)
  cat("changed", file = path, append = TRUE)
  expect_warning(record <- manifest(answers), class = "newrllama4_warning_model_changed")
  expect_true(is.na(record$model$sha256))
})

test_that("manifest() of anything but answers or an annotation is a classed error", {
  expect_error(manifest(data.frame(x = 1)), class = "newrllama4_error_invalid_argument")
  expect_error(manifest("hello"), class = "newrllama4_error_invalid_argument")
})
