test_that("model_load loads a GGUF and prints what it is", {
  model <- tiny_model()
  expect_s3_class(model, "newrllama4_model")
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
  expect_identical(err$argument, "source")  # the engine's `path`
  expect_match(conditionMessage(err), "^`source` must be .*gemma3-270m.*smollm2-135m-instruct")
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

# -- where a model comes from: servers and stores on 127.0.0.1 and in temporary folders --

# A Python bytes object of a file, for the test servers.
file_bytes <- function(path) reticulate::import_builtins()$open(path, "rb")$read()

tiny_generates <- function(model) {
  ctx <- context_create(model, n_ctx = 128L, n_seq_max = 1L)
  nchar(generate(ctx, "hello how", max_tokens = 4L, temperature = 0)) > 0
}

test_that("a model from a URL loads, says so, and a second load makes no request", {
  withr::local_envvar(NEWRLLAMA4_CACHE = withr::local_tempdir())
  server <- testing_module()$FileServer()
  on.exit(server$stop(), add = TRUE)
  bytes <- file_bytes(tiny_model_path())
  url <- server$add("tiny.gguf", bytes)
  size <- format_bytes(length(bytes))
  expect_message(model <- model_load(url, progress = TRUE), paste0("Downloading .*tiny.gguf.* \\(", size, "\\) into"))
  on.exit(model_free(model), add = TRUE)
  expect_true(tiny_generates(model))
  expect_equal(model$py$source, list(source = url, url = url))
  err <- expect_error(model_load(sub("tiny", "missing", url)), class = "newrllama4_error_model_not_found")
  expect_s3_class(err, "newrllama4_error_model_load")
  server$stop()
  expect_no_message(again <- model_load(url, progress = TRUE))
  expect_true(tiny_generates(again))
  expect_length(server$requests, 2L)  # the file, and the missing one
})

test_that("a URL download that breaks is resumed, and one that does not match sha256 is refused", {
  withr::local_envvar(NEWRLLAMA4_CACHE = withr::local_tempdir())
  server <- testing_module()$FileServer()
  on.exit(server$stop(), add = TRUE)
  url <- server$add("tiny.gguf", file_bytes(tiny_model_path()))
  err <- expect_error(model_load(url, sha256 = strrep("0", 64)), class = "newrllama4_error_checksum_mismatch")
  expect_equal(err$expected, strrep("0", 64))
  server$drop_after[["tiny.gguf"]] <- list(50000L, 50000L, 50000L)
  err <- expect_error(model_load(url), class = "newrllama4_error_download")
  expect_equal(err$bytes_done, 150000)
  digest <- reticulate::import("newrllama4.sources")$file_sha256(tiny_model_path())
  model <- model_load(url, sha256 = toupper(digest))
  on.exit(model_free(model), add = TRUE)
  expect_equal(server$requests[[length(server$requests)]][[3]], "bytes=150000-")
  expect_true(tiny_generates(model))
})

test_that("an hf:// model comes through the Hub's API and loads offline the second time", {
  testing <- testing_module()
  hub <- testing$StandInHub()
  on.exit(hub$stop(), add = TRUE)
  hub$add_to_repo("someone/tiny-GGUF", "tiny-Q4_K_M.gguf", file_bytes(tiny_model_path()))
  hub$add_to_repo("someone/tiny-GGUF", "tiny-Q8_0.gguf", file_bytes(tiny_model_path()))
  withr::local_envvar(HF_ENDPOINT = hub$url, HF_HUB_CACHE = withr::local_tempdir(), HF_HUB_OFFLINE = NA,
                      HF_TOKEN = NA)
  model <- model_load("hf://someone/tiny-GGUF/*Q4_K_M.gguf", progress = FALSE)
  on.exit(model_free(model), add = TRUE)
  expect_true(tiny_generates(model))
  expect_equal(model$py$source$hub_revision, hub$commits[["someone/tiny-GGUF"]])

  err <- expect_error(model_load("hf://someone/tiny-GGUF/*.gguf"), class = "newrllama4_error_ambiguous_model")
  expect_equal(unlist(err$candidates), c("tiny-Q4_K_M.gguf", "tiny-Q8_0.gguf"))
  err <- expect_error(model_load("hf://someone/tiny-GGUF/tiny-Q5_K_M.gguf"), class = "newrllama4_error_model_not_found")
  expect_equal(unlist(err$candidates), c("tiny-Q4_K_M.gguf", "tiny-Q8_0.gguf"))
  expect_error(model_load("hf://someone/missing/tiny.gguf"), class = "newrllama4_error_model_not_found")

  hub$stop()
  withr::local_envvar(HF_HUB_OFFLINE = "1")
  offline <- model_load("hf://someone/tiny-GGUF/*Q4_K_M.gguf")
  expect_true(tiny_generates(offline))
  expect_error(model_load("hf://someone/tiny-GGUF/other.gguf"), class = "newrllama4_error_download")
})

test_that("an ollama: model is read in place from the store", {
  store <- withr::local_tempdir()
  digest <- testing_module()$write_ollama_model(store, "tiny", "latest", tiny_model_path())
  withr::local_envvar(OLLAMA_MODELS = store)
  model <- model_load("ollama:tiny")
  on.exit(model_free(model), add = TRUE)
  expect_true(tiny_generates(model))
  expect_equal(normalizePath(model$py$path), normalizePath(file.path(store, "blobs", sub(":", "-", digest))))
  expect_equal(model$py$source$ollama_digest, digest)
  err <- expect_error(model_load("ollama:llama3.2:3b"), class = "newrllama4_error_model_not_found")
  expect_true("tiny:latest" %in% unlist(err$candidates))
})

test_that("model_load refuses a bad sha256, or one for a model that is not a URL, before any download", {
  for (bad in list(list("https://127.0.0.1:9/x.gguf", "abc"), list("https://127.0.0.1:9/x.gguf", 42),
                   list(tiny_model_path(), strrep("a", 64)))) {
    err <- expect_error(model_load(bad[[1]], sha256 = bad[[2]]), class = "newrllama4_error_invalid_argument")
    expect_identical(err$argument, "sha256")
  }
  expect_error(model_load(tiny_model_path(), progress = NA), class = "newrllama4_error_invalid_argument")
  expect_true(all(vapply(c("hf://a/b/c.gguf", "https://a/b.gguf", "http://a/b.gguf", "ollama:tiny"), is_model_source, NA)))
  expect_false(is_model_source("models/hf.gguf"))
})

test_that("where llama-cpp-python's Llama ran first, model_load warns once with a class and manifests say so", {
  # a session as a user who tried llama-cpp-python through reticulate first would have
  script <- tempfile("llama-first-", fileext = ".R")
  writeLines(c(
    "library(newrllama4)",
    "path <- commandArgs(TRUE)[1]",
    "llama_cpp <- reticulate::import('llama_cpp')",
    "invisible(llama_cpp$Llama(model_path = path, n_ctx = 64L, verbose = FALSE))",
    "caught <- NULL",
    "model <- withCallingHandlers(model_load(path), newrllama4_warning_identity = function(w) {",
    "  caught <<- w; invokeRestart('muffleWarning')",
    "})",
    "cat('first:', class(caught)[1], caught$problems, '\\n')",
    "again <- tryCatch({model_load(path); 'none'}, warning = function(w) class(w)[1])",
    "cat('second:', again, '\\n')",
    "ctx <- context_create(model, n_ctx = 64L, n_seq_max = 2L)",
    "out <- generate_parallel(ctx, c('hello', 'river'), max_tokens = 2L, temperature = 0)",
    "cat('manifest:', manifest(out)$parameters$identity_guaranteed, '\\n')"
  ), script)
  out <- system2(file.path(R.home("bin"), "Rscript"), shQuote(c(script, tiny_model_path())),
                 stdout = TRUE, stderr = TRUE,
                 env = paste0("R_LIBS=", shQuote(paste(.libPaths(), collapse = .Platform$path.sep))))
  said <- paste(out, collapse = "\n")
  expect_match(said, "first: newrllama4_warning_identity llama_cpp's Llama ran in this process", fixed = TRUE)
  expect_match(said, "second: none", fixed = TRUE)
  expect_match(said, "manifest: FALSE", fixed = TRUE)
  expect_no_match(said, "IdentityWarning")  # R's warning, not also the engine's Python one
})
