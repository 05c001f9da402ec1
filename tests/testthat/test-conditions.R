errors <- function() reticulate::import("newrllama4.errors")

test_that("every engine exception class has an R class, specific to general", {
  skip_without_engine()
  py_classes <- Filter(function(name) grepl("Error$", name), names(errors()))
  expect_setequal(py_classes, c(
    "NewrllamaError", "InvalidArgumentError", "ModelLoadError", "ContextError", "ContextTooLargeError", "ClosedError",
    "ChatTemplateError", "CacheError", "PromptError", "EmptyPromptError", "InvalidTokenError", "PromptTooLongError",
    "DecodeError", "ConstraintError", "IncompleteOutputError", "EndpointError", "NoEmbeddingsError", "RemoteError",
    "RemoteConnectionError", "RemoteTimeoutError", "RemoteHTTPError", "RemoteResponseError", "NotGgufError",
    "ModelSourceError", "ModelNotFoundError", "AmbiguousModelError", "GatedModelError", "DownloadError", "ChecksumMismatchError"
  ))
  expect_equal(r_condition_class("newrllama4.errors.PromptTooLongError"), "newrllama4_error_prompt_too_long")
  expect_equal(r_condition_class("newrllama4.errors.NewrllamaError"), "newrllama4_error")
})

expect_mapped <- function(exception, classes, fields = list()) {
  cnd <- engine_condition(exception)
  expect_equal(class(cnd), c(classes, "newrllama4_error", "rlang_error", "error", "condition"))
  for (name in names(fields)) expect_equal(cnd[[name]], fields[[name]])
  cnd
}

test_that("each engine exception maps to its condition with its fields", {
  skip_without_engine()
  e <- errors()
  expect_mapped(e$InvalidArgumentError("max_tokens", -1L, "a whole number >= 1"),
                "newrllama4_error_invalid_argument", list(argument = "max_tokens", value = "-1"))
  expect_mapped(e$ModelLoadError("bad file", "/x.gguf"), "newrllama4_error_model_load", list(path = "/x.gguf"))
  expect_mapped(e$ModelNotFoundError("ollama:llama3.2", "No such model.", list("tiny:latest", "tiny:chat")),
                c("newrllama4_error_model_not_found", "newrllama4_error_model_source", "newrllama4_error_model_load"),
                list(source = "ollama:llama3.2", candidates = c("tiny:latest", "tiny:chat")))
  expect_mapped(e$NotGgufError("/x.gguf", "https://h/x.gguf"), c("newrllama4_error_not_gguf", "newrllama4_error_model_load"),
                list(path = "/x.gguf", origin = "https://h/x.gguf"))
  expect_mapped(e$ContextError("no memory"), "newrllama4_error_context")
  expect_mapped(e$ContextTooLargeError(4096L, 8L, 3e9, 2e9),
                c("newrllama4_error_context_too_large", "newrllama4_error_context"),
                list(n_ctx = 4096L, n_seq_max = 8L, needed_bytes = 3e9, available_bytes = 2e9))
  expect_mapped(e$ClosedError("context"), "newrllama4_error_closed", list(what = "context"))
  expect_mapped(e$ChatTemplateError("none"), "newrllama4_error_chat_template")
  expect_mapped(e$CacheError("/x.sqlite", "is not a database"), "newrllama4_error_cache", list(path = "/x.sqlite"))
  expect_mapped(e$NewrllamaError("base"), character())
  cnd <- expect_mapped(e$PromptTooLongError(2L, 700L, 512L),
                       c("newrllama4_error_prompt_too_long", "newrllama4_error_prompt"),
                       list(index = 3L, n_tokens = 700L, limit = 512L))
  expect_match(conditionMessage(cnd), "^Prompt 3 has 700 tokens")
  expect_mapped(e$EmptyPromptError(0L), c("newrllama4_error_empty_prompt", "newrllama4_error_prompt"),
                list(index = 1L))
  expect_mapped(e$InvalidTokenError(4L, 999L, 300L), c("newrllama4_error_invalid_token", "newrllama4_error_prompt"),
                list(index = 5L, token = 999L, n_vocab = 300L))
  expect_mapped(e$DecodeError(1L, -3L), c("newrllama4_error_decode", "newrllama4_error_prompt"),
                list(index = 2L, code = -3L))
  expect_mapped(e$IncompleteOutputError(0L, "json_schema", 8L, "length"),
                c("newrllama4_error_incomplete_output", "newrllama4_error_constraint", "newrllama4_error_prompt"),
                list(index = 1L, constraint = "json_schema", n_tokens = 8L))
  expect_mapped(e$EndpointError("http://gpu-1:8000/v1", "does not answer."), "newrllama4_error_endpoint",
                list(endpoint = "http://gpu-1:8000/v1"))
  cnd <- expect_mapped(e$NoEmbeddingsError("http://gpu-1:8000/v1", 501L, "Start it with `--embeddings`"),
                       c("newrllama4_error_no_embeddings", "newrllama4_error_endpoint"),
                       list(endpoint = "http://gpu-1:8000/v1", status = 501L,
                            server_message = "Start it with `--embeddings`"))
  expect_match(conditionMessage(cnd), "--pooling mean", fixed = TRUE)
  cnd <- expect_mapped(e$RemoteHTTPError(0L, "http://gpu-1:8000/v1", 4L, 503L, "overloaded"),
                       c("newrllama4_error_remote_http", "newrllama4_error_remote", "newrllama4_error_prompt"),
                       list(index = 1L, endpoint = "http://gpu-1:8000/v1", attempts = 4L, status = 503L,
                            server_message = "overloaded"))
  expect_match(conditionMessage(cnd), "^Prompt 1 failed on http://gpu-1:8000/v1 after 4 attempts: HTTP 503")
  for (name in c("RemoteConnectionError", "RemoteTimeoutError", "RemoteResponseError")) {
    class <- r_condition_class(paste0("newrllama4.errors.", name))
    expect_mapped(e[[name]](2L, "http://h/v1", 1L, "why"), c(class, "newrllama4_error_remote", "newrllama4_error_prompt"),
                  list(index = 3L, attempts = 1L))
  }
})

test_that("a per-prompt argument is named as R numbers prompts, from 1", {
  skip_without_engine()
  cnd <- expect_mapped(errors()$InvalidArgumentError("grammar[0]", "x", "a valid GBNF grammar"),
                       "newrllama4_error_invalid_argument", list(argument = "grammar[[1]]"))
  expect_identical(conditionMessage(cnd), "`grammar[[1]]` must be a valid GBNF grammar, not 'x'.")
})

test_that("an argument the engine names otherwise has its R name, in the field and the message", {
  expect_identical(r_argument("max_tokens"), "max_tokens")
  expect_identical(r_argument("json_schema[0]"), "json_schema[[1]]")
  expect_identical(r_argument("labels"), "labels")
  expect_identical(r_argument("labels[2]"), "labels[[3]]")
  expect_identical(r_argument("path"), "source")
  expect_identical(r_argument("prompts[0][1]"), "prompts[0][1]")  # not one prompt's argument: as the engine says
  skip_without_engine()
  cnd <- expect_mapped(errors()$InvalidArgumentError("labels[1]", list("a", "a"), "two distinct labels"),
                       "newrllama4_error_invalid_argument", list(argument = "labels[[2]]"))
  expect_identical(conditionMessage(cnd), "`labels[[2]]` must be two distinct labels, not ['a', 'a'].")
  cnd <- expect_mapped(errors()$InvalidArgumentError("path", "gemma", "a path or a model name: {a}"),
                       "newrllama4_error_invalid_argument", list(argument = "source"))
  expect_identical(conditionMessage(cnd), "`source` must be a path or a model name: {a}, not 'gemma'.")
  cnd <- engine_condition(errors()$InvalidArgumentError("top_p", 0, "a number in (0.0, 1.0]"))
  expect_identical(conditionMessage(cnd), "`top_p` must be a number in (0.0, 1.0], not 0.0.")
})

test_that("what the engine expects is said in R's words: NULL, TRUE and FALSE", {
  expect_identical(r_words("None or the path of a cache file"), "`NULL` or the path of a cache file")
  expect_identical(r_words("True or False"), "`TRUE` or `FALSE`")
  expect_identical(r_words("a Nonesuch, not Truer"), "a Nonesuch, not Truer")
  skip_without_engine()
  cnd <- engine_condition(errors()$InvalidArgumentError("cache", "", "None or the path of a cache file"))
  expect_identical(conditionMessage(cnd), "`cache` must be `NULL` or the path of a cache file, not ''.")
  expect_identical(cnd$expected, "None or the path of a cache file")  # the field is the engine's
})

test_that("a raised engine exception becomes its R condition", {
  skip_without_engine()
  raise <- reticulate::py_run_string("def raise_it(e):\n    raise e", convert = FALSE)$raise_it
  err <- expect_error(with_engine(raise(errors()$ContextError("out of memory"))), class = "newrllama4_error_context")
  expect_match(conditionMessage(err), "out of memory")
})

test_that("an unexpected Python error keeps its traceback in a field, not in the message", {
  skip_without_engine()
  err <- expect_error(with_engine(reticulate::py_eval("1/0")), class = "newrllama4_error_engine")
  expect_equal(err$python_class, "ZeroDivisionError")
  expect_match(err$traceback, "ZeroDivisionError")
  expect_match(conditionMessage(err), "traceback")
})

test_that("messages with braces survive cli formatting", {
  skip_without_engine()
  cnd <- engine_condition(errors()$ModelLoadError("odd {name} here"))
  expect_match(conditionMessage(cnd), "odd {name} here", fixed = TRUE)
})

test_that("R errors that are not from Python pass through unchanged", {
  expect_error(with_engine(stop("plain R")), "plain R", class = "simpleError")
})
