# A remote context against llama-cpp-python's OpenAI-compatible server of the tiny model.

test_that("a remote context prints its model and endpoints, never its API key", {
  Sys.setenv(NEWRLLAMA4_API_KEY = "sk-do-not-show")
  on.exit(Sys.unsetenv("NEWRLLAMA4_API_KEY"))
  server <- tiny_server()
  ctx <- context_remote(server$url, max_concurrency = 2L)
  expect_s3_class(ctx, c("newrllama4_remote_context", "newrllama4_context"))
  out <- utils::capture.output(print(ctx))
  expect_true(any(grepl(server$url, out, fixed = TRUE)))
  expect_true(any(grepl("llama-cpp-python", out, fixed = TRUE)))
  expect_true(any(grepl("2 requests at once", out, fixed = TRUE)))
  everything <- c(out, capture.output(str(ctx)), capture.output(print(unclass(ctx))), deparse(ctx))
  expect_false(any(grepl("sk-do-not-show", everything, fixed = TRUE)))
  context_free(ctx)
  expect_true(any(grepl("freed", utils::capture.output(print(ctx)))))
  expect_error(generate(ctx, "hello"), class = "newrllama4_error_closed")
})

test_that("generate_parallel() and generate() take a remote context", {
  ctx <- context_remote(tiny_server()$url)
  prompts <- c(a = "hello how are you", b = "once upon a time", c = "the king")
  answers <- generate_parallel(ctx, prompts, max_tokens = 5L, temperature = 0, progress = FALSE)
  expect_s3_class(answers, "newrllama4_answers")
  expect_named(answers, names(prompts))
  expect_false(anyNA(answers))
  stats <- generation_stats(answers)
  expect_equal(stats$prompts, 3)
  expect_equal(stats$failures, 0)
  expect_gt(stats$request_seconds, 0)
  expect_identical(as.vector(generate(ctx, prompts[["b"]], max_tokens = 5L, temperature = 0)), unname(answers[["b"]]))
  record <- manifest(answers)  # the server's record: its model id, kind and endpoint, no file
  expect_identical(record$model[c("id", "server", "endpoints")],
                   list(id = tiny_model_path(), server = "llama-cpp-python", endpoints = tiny_server()$url))
  expect_true(is.na(record$model$sha256))
  expect_identical(record$parameters$max_concurrency, 16L)
})

test_that("labels restrict answers from a server", {
  ctx <- context_remote(tiny_server()$url)
  labels <- c("yes", "no")
  answers <- generate_parallel(ctx, c("hello how are you", "the king"), labels = labels, temperature = 0,
                               progress = FALSE)
  expect_true(all(answers %in% labels))
  expect_true(generate(ctx, "once upon a time", labels = labels, temperature = 0) %in% labels)
})

test_that("a JSON schema and a grammar go to the server, and answers parse", {
  ctx <- context_remote(tiny_server()$url)
  schema <- list(type = "object", properties = list(answer = list(enum = c("yes", "no"))), required = "answer")
  out <- generate_parallel(ctx, c(a = "hello", b = "the king"), json_schema = schema, max_tokens = 40L,
                           temperature = 0, progress = FALSE)
  expect_true(all(vapply(parsed_answers(out), function(value) value$answer %in% c("yes", "no"), NA)))
  expect_true(generate(ctx, "hello", grammar = 'root ::= "cat" | "dog"', max_tokens = 4L) %in% c("cat", "dog"))
  expect_error(generate(ctx, "hello", json_schema = schema, max_tokens = 2L),
               class = "newrllama4_error_incomplete_output")
})

test_that("an answer a server let through against the schema fails alone, classed", {
  # llama-cpp-python's server drops the bounds; the tiny model writes numbers past them
  bounded <- list(type = "object", properties = list(n = list(type = "integer", minimum = 1, maximum = 5)),
                  required = "n")
  expect_warning(
    out <- generate_parallel(context_remote(tiny_server()$url), rep(c("hello", "the king"), 3),
                             json_schema = bounded, max_tokens = 40L, temperature = 1, seed = 3L, progress = FALSE),
    class = "newrllama4_warning_partial_failure"
  )
  errors <- generation_errors(out)
  expect_gt(nrow(errors), 0)
  expect_true(all(errors$class == "newrllama4_error_constraint"))
  kept <- Filter(Negate(is.null), parsed_answers(out))
  expect_true(all(vapply(kept, function(value) value$n >= 1 && value$n <= 5, NA)))
})

test_that("prompts on a server that went away fail alone with classed errors", {
  server <- new_tiny_server()
  ctx <- context_remote(server$url, retries = 0L)
  server$stop()
  expect_warning(
    answers <- generate_parallel(ctx, c("hello", "the king"), max_tokens = 3L, progress = FALSE),
    class = "newrllama4_warning_partial_failure"
  )
  expect_true(all(is.na(answers)))
  expect_equal(generation_errors(answers)$class, rep("newrllama4_error_remote_connection", 2))
  error <- expect_error(generate(ctx, "hello", max_tokens = 3L), class = "newrllama4_error_remote_connection")
  expect_s3_class(error, c("newrllama4_error_remote", "newrllama4_error_prompt", "newrllama4_error"))
  expect_equal(error$index, 1L)
  expect_equal(error$endpoint, server$url)
  expect_equal(error$attempts, 1L)
  expect_match(conditionMessage(error), "^Prompt 1 failed on")
})

test_that("servers that cannot be used, and bad arguments, are refused at creation", {
  skip_without_engine()
  unused <- sprintf("http://127.0.0.1:%d/v1", testing_module()$free_port())
  error <- expect_error(context_remote(unused), class = "newrllama4_error_endpoint")
  expect_equal(error$endpoint, unused)
  expect_error(context_remote(tiny_server()$url, model = "another"), class = "newrllama4_error_endpoint")
  expect_error(context_remote(NA_character_), class = "newrllama4_error_invalid_argument")
  expect_error(context_remote("ftp://example.org"), class = "newrllama4_error_invalid_argument")
  expect_error(context_remote(tiny_server()$url, max_concurrency = 0L), class = "newrllama4_error_invalid_argument")
  error <- expect_error(context_remote(tiny_server()$url, api_key = 123456789), class = "newrllama4_error_invalid_argument")
  expect_no_match(conditionMessage(error), "123456789")
})

test_that("context_remote()'s defaults are the engine's (RemoteContext)", {
  skip_without_engine()
  signature <- reticulate::import("inspect", convert = FALSE)$signature(engine()$RemoteContext)
  parameters <- reticulate::py_to_r(reticulate::import_builtins(convert = FALSE)$dict(signature$parameters))
  r_defaults <- lapply(as.list(formals(context_remote))[-1], eval)
  # backoff, the wait after a failed request, is left to the engine in R
  expect_setequal(c("base_url", names(r_defaults)), setdiff(names(parameters), "backoff"))
  expect_equal(r_defaults, lapply(parameters[names(r_defaults)], function(p) p$default))
})

test_that("a remote context has no prefix cache to clear", {
  expect_error(context_clear_cache(context_remote(tiny_server()$url)), class = "newrllama4_error_invalid_argument")
})

test_that("a remote run is cached: the second computes nothing and gives the same answers", {
  ctx <- context_remote(tiny_server()$url)
  cache <- tempfile(fileext = ".sqlite")
  prompts <- c(a = "hello how are you", b = "once upon a time", c = "the king")
  first <- generate_parallel(ctx, prompts, max_tokens = 5L, temperature = 0, cache = cache, progress = FALSE)
  expect_equal(generation_stats(first)$result_cache_hits, 0)
  again <- generate_parallel(ctx, prompts, max_tokens = 5L, temperature = 0, cache = cache, progress = FALSE)
  expect_equal(generation_stats(again)$result_cache_hits, 3)
  expect_equal(generation_stats(again)$request_seconds, 0)
  expect_identical(as.vector(again), as.vector(first))
  expect_named(again, names(prompts))
  # a local model of the very file the server serves has answers of its own in the file
  local <- generate_parallel(tiny_context(), prompts, max_tokens = 5L, temperature = 0, cache = cache,
                             progress = FALSE)
  expect_equal(generation_stats(local)$result_cache_hits, 0)
})

reviews <- data.frame(review = c("Boils fast and looks nice.", "Burnt every slice.", NA, "It gives light."))
sentiment <- c("positive", "negative", "neutral")

test_that("annotate_texts() sends chat messages to a server: a label for every row, a manifest of the server", {
  Sys.setenv(NEWRLLAMA4_API_KEY = "sk-not-in-the-manifest")
  on.exit(Sys.unsetenv("NEWRLLAMA4_API_KEY"))
  server <- tiny_server()
  ctx <- context_remote(server$url)
  examples <- data.frame(review = "Love it.", .label = "positive")
  out <- suppressWarnings(annotate_texts(reviews, review, "Sentiment?", labels = sentiment, examples = examples,
                                   context = ctx, progress = FALSE))
  expect_s3_class(out$.label, "factor")
  expect_identical(levels(out$.label), sentiment)
  expect_identical(is.na(out$.label), c(FALSE, FALSE, TRUE, FALSE))
  expect_identical(out$.error[[3]], "The text is missing.")
  record <- manifest(out)
  expect_identical(record$model$id, tiny_model_path())
  expect_identical(record$model$server, "llama-cpp-python")
  expect_identical(record$model$endpoints, server$url)
  expect_true(is.na(record$model$sha256) && is.na(record$model$file) && is.na(record$prompt$chat_template_sha256))
  expect_identical(record$prompt$layout, "server chat template")
  expect_identical(record$prompt$examples, 1L)
  expect_identical(record$parameters$max_concurrency, 16L)
  expect_identical(record$rows[c("total", "skipped_missing_text", "answered")],
                   list(total = 4L, skipped_missing_text = 1L, answered = 3L))
  everything <- c(utils::capture.output(print(record)), unlist(as.data.frame(record)))
  expect_false(any(grepl("sk-not-in-the-manifest", everything, fixed = TRUE)))
  # the server lays the messages out with the tiny model's template, as the engine does locally
  prompt_tokens <- function(context) {
    manifest(annotate_texts(reviews$review[[1]], instruction = "Sentiment?", context = context, max_tokens = 1L,
                      progress = FALSE))$timings$prompt_tokens
  }
  expect_equal(prompt_tokens(ctx), prompt_tokens(tiny_context()))
})

test_that("annotate_texts() with a schema on a server gives typed columns", {
  # no numeric bounds or free strings: llama-cpp-python's server drops bounds and lets raw
  # control characters into strings, and such answers fail (newrllama4_error_constraint)
  schema <- list(score = "number", recommend = "boolean", mood = c("happy", "angry"))
  # llama-cpp-python's server cannot score fields: said once, their probability columns NA
  expect_warning(
    out <- annotate_texts(reviews[c(1, 2, 4), , drop = FALSE], review, "Extract.", schema = schema,
                          context = context_remote(tiny_server()$url), progress = FALSE),
    class = "newrllama4_warning_field_probs"
  )
  expect_true(all(is.na(out[c(".prob_recommend_true", ".prob_mood_happy", ".confidence_mood")])))
  expect_true(all(is.na(out$.error)))
  expect_type(out$score, "double")
  expect_false(anyNA(out$score))
  expect_type(out$recommend, "logical")
  expect_false(anyNA(out$recommend))
  expect_s3_class(out$mood, "factor")
  expect_false(anyNA(out$mood))
})

test_that("annotate_texts() on a server resumes from its cache", {
  ctx <- context_remote(tiny_server()$url)
  cache <- tempfile(fileext = ".sqlite")
  run <- function(data) {
    suppressWarnings(annotate_texts(data, review, "Sentiment?", labels = sentiment, context = ctx, cache = cache,
                              progress = FALSE))
  }
  first <- run(reviews[1:2, , drop = FALSE])
  again <- run(reviews)
  expect_identical(manifest(again)$prompts[c("from_cache", "computed")], list(from_cache = 2L, computed = 1L))
  # a subset keeps the whole call's records (R keeps a data frame's attributes): compare the rows alone
  rows_alone <- function(x) {
    for (record in c("manifest", "order_probs", "stats")) attr(x, record) <- NULL
    x
  }
  expect_identical(rows_alone(again[1:2, ]), rows_alone(first))
})

test_that("an interrupt cancels a remote call and returns control to R", {
  server <- new_tiny_server()
  on.exit(server$stop(), add = TRUE)
  out <- interrupted_script_output(c(
    "library(newrllama4)",
    sprintf("ctx <- context_remote(%s)", deparse(server$url)),
    "prompts <- rep('hello how are you', 5000)",
    "cat('started\\n'); flush(stdout())",
    "res <- tryCatch(generate_parallel(ctx, prompts, max_tokens = 400L, progress = FALSE),",
    "                interrupt = function(e) 'interrupted')",
    "cat(if (identical(res, 'interrupted')) 'interrupted' else 'finished', '\\n')",
    "cat('after', generate(ctx, 'once upon a time', max_tokens = 5L, temperature = 0), '\\n', sep = '')"
  ))
  expect_true("interrupted " %in% out, info = paste(out, collapse = "\n"))
  expect_length(grep("^after", out), 1)
})
