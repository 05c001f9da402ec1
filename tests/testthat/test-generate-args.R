# The conversions of generate_parallel()'s arguments, without the engine; the
# engine's range checks are in test-generate.R.

sampling_frame <- function(...) {
  env <- rlang::env(!!!sampling_defaults)
  rlang::env_bind(env, ...)
  env
}

test_that("sampling arguments become the engine's types: whole numbers integers, the others doubles", {
  params <- sampling_params(sampling_frame())
  expect_named(params, names(sampling_defaults))
  expect_identical(params, sampling_defaults)
  params <- sampling_params(sampling_frame(max_tokens = 5, top_k = 0, top_p = 1L, min_p = 0L, temperature = 1L,
                                           seed = 7, stop = c("a", "b")))
  expect_identical(params[c("max_tokens", "top_k", "seed")], list(max_tokens = 5L, top_k = 0L, seed = 7L))
  expect_identical(params[c("top_p", "min_p", "temperature")], list(top_p = 1, min_p = 0, temperature = 1))
  expect_identical(params$stop, list("a", "b"))
  # what does not fit an integer, or is not whole, goes as it is: the engine says what is wrong with it
  expect_identical(sampling_params(sampling_frame(seed = 2^33))$seed, 2^33)
  expect_identical(sampling_params(sampling_frame(max_tokens = 2.5))$max_tokens, 2.5)
  expect_identical(sampling_params(sampling_frame(top_k = -1))$top_k, -1L)
  expect_null(sampling_params(sampling_frame(seed = NULL))$seed)
  expect_identical(sampling_params(sampling_frame(seed = -1))$seed, -1L)
})

test_that("a sampling argument that cannot be converted is a classed error naming it", {
  bad <- list(max_tokens = NA, max_tokens = 1:2, max_tokens = "3", top_p = NULL, min_p = NA_real_, temperature = TRUE,
              seed = "x", seed = NA, stop = NA_character_, stop = 1, stop = list("a"))
  for (i in seq_along(bad)) {
    name <- names(bad)[[i]]
    frame <- sampling_frame()
    frame[[name]] <- bad[[i]]
    err <- expect_error(sampling_params(frame), class = "newrllama4_error_invalid_argument", info = name)
    expect_identical(err$argument, name)
    expect_match(conditionMessage(err), paste0("`", name, "` must"), fixed = TRUE)
  }
})

test_that("one value or one per prompt: a value for all, a list (or vector) of n with NULLs, else an error", {
  convert <- function(x, arg) paste(arg, x)
  one_per_prompt <- function(x) per_prompt(x, 3, rlang::is_string, convert, "a string", "thing", current_env())
  expect_null(one_per_prompt(NULL))
  expect_identical(one_per_prompt("a"), "thing a")
  expect_identical(one_per_prompt(list("a", NULL, "c")), list("thing[[1]] a", NULL, "thing[[3]] c"))
  expect_identical(one_per_prompt(c(x = "a", y = "b", z = "c")), list("thing[[1]] a", "thing[[2]] b", "thing[[3]] c"))
  for (bad in list(list("a", "b"), c("a", "b"), list("a", 2, "c"), 3)) {
    err <- expect_error(one_per_prompt(bad), class = "newrllama4_error_invalid_argument")
    expect_identical(err$argument, "thing")
    expect_match(conditionMessage(err), "`thing` must be a string, or a list of 3 of them (or `NULL`), one per prompt.",
                 fixed = TRUE)
  }
})

test_that("labels go as lists, one set for all or one per prompt; NA is refused, the rest is the engine's to check", {
  expect_identical(engine_labels(c("yes", "no"), 2), list("yes", "no"))
  expect_identical(engine_labels("yes", 2), list("yes"))  # a list, or reticulate would send a string
  expect_identical(engine_labels(list(a = c("x", "y"), b = NULL), 2), list(list("x", "y"), NULL))
  latin1 <- iconv("café", "UTF-8", "latin1")
  expect_identical(engine_labels(c(latin1, "thé"), 1), list("café", "thé"))
  err <- expect_error(engine_labels(list(NULL, c("a", NA)), 2), class = "newrllama4_error_invalid_argument")
  expect_identical(err$argument, "labels[[2]]")
  expect_error(engine_labels(list(c("a", "b")), 2), "one per prompt", class = "newrllama4_error_invalid_argument")
  expect_error(engine_labels(1:2, 2), "character vector of labels", class = "newrllama4_error_invalid_argument")
})

test_that("a schema as a list becomes JSON whose required and enum stay arrays; a grammar is a string", {
  schema <- list(type = "object", properties = list(k = list(enum = "only")), required = "k")
  expect_identical(engine_json_schema(schema, 2),
                   '{"type":"object","properties":{"k":{"enum":["only"]}},"required":["k"]}')
  expect_identical(engine_json_schema('{"type": "string"}', 1), '{"type": "string"}')
  expect_identical(engine_json_schema(list(NULL, schema), 2)[[1]], NULL)
  expect_error(engine_json_schema(42, 2), "JSON schema", class = "newrllama4_error_invalid_argument")
  expect_identical(engine_grammar('root ::= "a"', 3), 'root ::= "a"')
  expect_identical(engine_grammar(list(NULL, 'root ::= "a"'), 2), list(NULL, 'root ::= "a"'))
  err <- expect_error(engine_grammar(list('root ::= "a"'), 2), class = "newrllama4_error_invalid_argument")
  expect_identical(err$argument, "grammar")
})

test_that("prompts: a character vector without NA, or a list of conversations; every NA is named", {
  expect_identical(check_prompts(c(a = "x", b = "y")), c(a = "x", b = "y"))
  err <- expect_error(check_prompts(c("a", NA, "b", NA)), class = "newrllama4_error_invalid_argument")
  expect_match(conditionMessage(err), "positions 2 and 4")
  expect_error(check_prompts(1:3), "character vector or a list of conversations",
               class = "newrllama4_error_invalid_argument")
  conversation <- list(list(role = "user", content = "hi"))
  expect_length(check_prompts(list(conversation, conversation)), 2)
})

test_that("a cache is NULL or a path, with ~ expanded; an empty one is the engine's to refuse", {
  expect_null(check_cache(NULL))
  expect_identical(check_cache("~/answers.sqlite"), path.expand("~/answers.sqlite"))
  expect_identical(check_cache(""), "")
  for (bad in list(1, NA_character_, c("a", "b"))) {
    expect_error(check_cache(bad), class = "newrllama4_error_invalid_argument")
  }
})
