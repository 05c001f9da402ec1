test_that("the manifest records the model, the prompt, every parameter, the rows and the versions", {
  ctx <- tiny_context()
  data <- data.frame(text = c("hello how are you", NA, "once upon a time"))
  out <- suppressWarnings(annotate(data, text, "Label it.", labels = c("king", "queen"), context = ctx,
                                   seed = 9L, progress = FALSE))
  record <- manifest(out)
  expect_s3_class(record, "newrllama_manifest")
  expect_identical(record$model$file, basename(tiny_model_path()))
  expect_identical(record$model$sha256, reticulate::import("newrllama4.model")$file_sha256(tiny_model_path()))
  expect_match(record$prompt$chat_template_sha256, "^[0-9a-f]{64}$")
  expect_identical(record$prompt$layout, "chat template")
  expect_identical(record$prompt$instruction, "Label it.")
  expect_identical(record$prompt$labels, c("king", "queen"))
  expect_identical(record$prompt$examples, 0L)
  expect_identical(record$parameters$seed, 9L)
  expect_identical(record$parameters$temperature, 0)
  expect_identical(record$parameters$top_k, 40L)
  expect_identical(record$parameters$n_seq_max, 4L)
  expect_identical(record$rows, list(total = 3L, skipped_missing_text = 1L, from_cache = 0L, computed = 2L,
                                     failed = 0L, cache = NA_character_))
  expect_gt(record$timings$total_seconds, 0)
  expect_named(record$versions, c("R", "newrllama4", "llama-cpp-python", "llama.cpp", "llama.cpp system",
                                  "llguidance", "numpy", "python", "platform"))
  table <- as.data.frame(record)
  expect_named(table, c("section", "item", "value"))
  expect_true(all(c("model", "prompt", "parameters", "rows", "timings", "versions") %in% table$section))
  expect_identical(table$value[table$item == "sha256"], record$model$sha256)
  expect_match(paste(cli::cli_fmt(print(record)), collapse = "\n"), record$model$sha256, fixed = TRUE)
})

test_that("a schema is recorded as the JSON sent to the engine", {
  out <- annotate("hello", instruction = "Count.", schema = list(n = list(type = "integer", minimum = 0, maximum = 9)),
                  context = tiny_context(), progress = FALSE)
  expect_identical(manifest(out)$prompt$schema, paste0(
    '{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":9}},',
    '"required":["n"],"additionalProperties":false}'
  ))
})

test_that("manifest() of anything but an annotation is a classed error", {
  expect_error(manifest(data.frame(x = 1)), class = "newrllama4_error_invalid_argument")
})
