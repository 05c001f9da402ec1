test_that("one answer per prompt, in order, with names kept", {
  ctx <- tiny_context()
  prompts <- c(first = "hello how are you", second = "once upon a time", third = "the king")
  out <- generate_parallel(ctx, prompts, max_tokens = 6L, temperature = 0, progress = FALSE)
  expect_type(out, "character")
  expect_named(out, names(prompts))
  solo <- vapply(prompts, function(p) generate(ctx, p, max_tokens = 6L, temperature = 0), "")
  expect_equal(unname(out[names(prompts)]), unname(solo))
})

test_that("generate()'s answer prints as its text, its manifest kept for manifest()", {
  one <- generate(tiny_context(n_seq_max = 1L), "hello how are you", max_tokens = 4L, temperature = 0)
  expect_type(one, "character")
  printed <- capture.output(print(one))
  expect_identical(printed, capture.output(print(as.vector(one))))
  expect_identical(format(one), format(as.vector(one)))
  expect_identical(manifest(one)$parameters$max_tokens, 4L)
})

test_that("batch answers equal solo answers for many prompts and any n_seq_max", {
  prompts <- prompts_of_mixed_length(30)
  solo <- generate_parallel(tiny_context(n_seq_max = 1L), prompts, max_tokens = 10L, temperature = 0, progress = FALSE)
  for (n in c(3L, 8L)) {
    out <- generate_parallel(tiny_context(n_seq_max = n), prompts, max_tokens = 10L, temperature = 0,
                             progress = FALSE)
    expect_identical(c(out), c(solo))  # c() drops the timing stats
  }
})

test_that("successive calls on one context give identical answers", {
  ctx <- tiny_context()
  prompts <- prompts_of_mixed_length(8)
  first <- generate_parallel(ctx, prompts, max_tokens = 8L, seed = 7L, progress = FALSE)
  for (i in 1:5) {
    expect_identical(c(generate_parallel(ctx, prompts, max_tokens = 8L, seed = 7L, progress = FALSE)), c(first))
  }
})

test_that("a fixed seed reproduces sampled answers; seed -1 draws one and reports it", {
  ctx <- tiny_context()
  prompts <- prompts_of_mixed_length(4)
  a <- generate_parallel(ctx, prompts, max_tokens = 8L, temperature = 1, seed = 99L, progress = FALSE)
  expect_identical(c(generate_parallel(ctx, prompts, max_tokens = 8L, temperature = 1, seed = 99L,
                                       progress = FALSE)), c(a))
  random <- generate_parallel(ctx, prompts, max_tokens = 8L, temperature = 1, seed = -1L, progress = FALSE)
  replay <- generate_parallel(ctx, prompts, max_tokens = 8L, temperature = 1,
                              seed = attr(random, "stats")$seed, progress = FALSE)
  expect_identical(c(replay), c(random))
})

test_that("a bad prompt among good ones is NA with an errors attribute and one warning", {
  ctx <- tiny_context(n_ctx = 64L)
  long <- paste(rep("hello", 200), collapse = " ")
  prompts <- c("hello how are you", "", long, "once upon a time")
  expect_warning(
    out <- generate_parallel(ctx, prompts, max_tokens = 5L, temperature = 0, progress = FALSE),
    "2 of 4 prompts failed",
    class = "newrllama4_warning_partial_failure"
  )
  expect_equal(is.na(out), c(FALSE, TRUE, TRUE, FALSE))
  errors <- attr(out, "errors")
  expect_equal(errors$index, c(2L, 3L))
  expect_equal(errors$class, c("newrllama4_error_empty_prompt", "newrllama4_error_prompt_too_long"))
  expect_match(errors$message[[2]], "^Prompt 3 has [0-9]+ tokens")
  expect_equal(out[[1]], as.vector(generate(ctx, prompts[[1]], max_tokens = 5L, temperature = 0)))
})

test_that("on_error = 'stop' raises the first failure with the partial results attached", {
  ctx <- tiny_context(n_ctx = 64L)
  err <- expect_error(
    generate_parallel(ctx, c(ok = "hello", bad = ""), max_tokens = 3L, progress = FALSE, on_error = "stop"),
    class = "newrllama4_error_empty_prompt"
  )
  expect_equal(err$index, 2L)
  expect_named(err$result, c("ok", "bad"))
  expect_true(is.na(err$result[["bad"]]))
  expect_false(is.na(err$result[["ok"]]))
})

test_that("generate raises the error of a failing prompt and accepts token ids", {
  ctx <- tiny_context(n_ctx = 16L)
  expect_error(generate(ctx, paste(rep("river", 40), collapse = " ")), class = "newrllama4_error_prompt_too_long")
  ids <- model_tokenize(tiny_model(), "once upon a time")
  expect_equal(as.vector(generate(ctx, ids, max_tokens = 4L, temperature = 0)),
               as.vector(generate(ctx, "once upon a time", max_tokens = 4L, temperature = 0)))
  expect_error(generate(ctx, c(ids, -1), max_tokens = 2L), class = "newrllama4_error_invalid_argument")
  expect_error(generate(ctx, c(ids, 100000L), max_tokens = 2L), class = "newrllama4_error_invalid_token")
})

test_that("stats come back as a named list", {
  out <- generate_parallel(tiny_context(), prompts_of_mixed_length(5), max_tokens = 4L, progress = FALSE)
  stats <- attr(out, "stats")
  expect_true(is.list(stats))
  expect_true(all(c("prompts", "failures", "prompt_tokens", "generated_tokens", "prefill_seconds",
                    "decode_seconds", "generation_tokens_per_s", "llama_decode_calls", "decoded_tokens", "retries",
                    "peak_active_sequences", "seed") %in% names(stats)))
  expect_equal(stats$prompts, 5L)
  expect_equal(stats$failures, 0L)
  expect_equal(nrow(attr(out, "errors")), 0L)
})

test_that("stop strings end an answer and are left out", {
  ctx <- tiny_context()
  full <- as.vector(generate(ctx, "hello how are you", max_tokens = 20L, temperature = 0, penalty_repeat = 1))
  stop_at <- substr(full, 4, 5)
  cut <- generate(ctx, "hello how are you", max_tokens = 20L, temperature = 0, penalty_repeat = 1, stop = stop_at)
  expect_equal(as.vector(cut), substr(full, 1, regexpr(stop_at, full, fixed = TRUE) - 1))
})

test_that("bad arguments are classed errors naming the argument, in R or from the engine's range checks", {
  ctx <- tiny_context()
  bad_calls <- list(
    list(prompts = NULL), list(prompts = list("a")), list(prompts = 1:3), list(prompts = c("a", NA)),
    list(max_tokens = NA), list(max_tokens = -1L), list(max_tokens = 2.5), list(max_tokens = Inf),
    list(max_tokens = 1:2), list(temperature = NA), list(temperature = -1), list(top_p = 0), list(top_k = -1L),
    list(min_p = 1.5), list(min_p = -0.1), list(min_p = "0"), list(repeat_last_n = -1L), list(penalty_repeat = 0),
    list(seed = "x"), list(seed = -5), list(stop = NA_character_), list(stop = ""), list(progress = NA)
  )
  for (args in bad_calls) {
    call_args <- utils::modifyList(list(context = ctx, prompts = "hello", progress = FALSE), args)
    if ("prompts" %in% names(args) && is.null(args$prompts)) call_args["prompts"] <- list(NULL)
    err <- expect_error(do.call(generate_parallel, call_args), class = "newrllama4_error_invalid_argument")
    expect_match(err$argument, paste0("^", names(args)), info = deparse(args))  # prompts[[1]] for a bad conversation
    expect_match(conditionMessage(err), paste0("`", err$argument, "` must"), fixed = TRUE, info = deparse(args))
  }
  err <- expect_error(generate(ctx, "hello", min_p = 2), class = "newrllama4_error_invalid_argument")
  expect_match(conditionMessage(err), "`min_p` must be a number in [0.0, 1.0], not 2.0.", fixed = TRUE)
  expect_identical(err$call[[1]], quote(generate))
  expect_error(generate_parallel("ctx", "hello"), class = "newrllama4_error_invalid_argument")
  expect_error(generate_parallel(ctx, "hello", on_error = "ignore"))
})

test_that("works inside data-frame code", {
  ctx <- tiny_context()
  df <- data.frame(text = c("hello", "once upon", "the king"))
  df$answer <- generate_parallel(ctx, df$text, max_tokens = 4L, temperature = 0, progress = FALSE)
  expect_equal(nrow(df), 3)
  expect_type(df$answer, "character")
})

test_that("the progress bar is fed once per prompt", {
  ctx <- tiny_context()
  withr_opts <- options(cli.progress_show_after = 0, cli.dynamic = FALSE)
  on.exit(options(withr_opts))
  out <- cli::cli_fmt(generate_parallel(ctx, prompts_of_mixed_length(6), max_tokens = 3L, progress = TRUE))
  expect_true(any(grepl("Generating", out)))
})

test_that("the progress bar is on by default only in an interactive session, never while knitting", {
  # rlang::is_interactive() is FALSE while knitr renders, even from an interactive console
  expect_identical(formals(generate_parallel)$progress, quote(rlang::is_interactive()))
  expect_false(eval(formals(generate_parallel)$progress))  # testthat, as Rscript, is not interactive
  rlang::local_interactive(TRUE)
  expect_true(eval(formals(generate_parallel)$progress))
})

for (lane in c("batch-invariant", "fast")) {
  test_that(sprintf("an interrupt returns control to R and the context works afterwards (%s lane)", lane), {
    out <- interrupted_script_output(c(
      "library(newrllama4)",
      sprintf("model <- model_load(%s)", deparse(tiny_model_path())),
      sprintf("ctx <- context_create(model, n_ctx = 4096L, n_seq_max = 2L, batch_invariant = %s)", lane != "fast"),
      "prompts <- rep('hello how are you', 4000)",
      "cat('started\\n'); flush(stdout())",
      "res <- tryCatch(generate_parallel(ctx, prompts, max_tokens = 4000L, progress = FALSE),",
      "                interrupt = function(e) 'interrupted')",
      "cat(if (identical(res, 'interrupted')) 'interrupted' else 'finished', '\\n')",
      "cat(generate(ctx, 'once upon a time', max_tokens = 5L, temperature = 0), '\\n', sep = '')",
      sprintf("cat('after', generate(context_create(model, n_ctx = 64L, n_seq_max = 1L, batch_invariant = %s),",
              lane != "fast"),
      "    'once upon a time', max_tokens = 5L, temperature = 0), '\\n', sep = '')"
    ))
    expect_true("interrupted " %in% out, info = paste(out, collapse = "\n"))
    answer <- sub("^after", "", grep("^after", out, value = TRUE))
    expect_length(answer, 1)
    expect_true(answer %in% out[-length(out)], info = paste(out, collapse = "\n"))
  })
}

test_that("answers holding NUL arrive with U+FFFD in its place, and no answer is lost", {
  ctx <- tiny_context()
  nul <- reticulate::py_eval("chr(0)", convert = FALSE)
  found <- testing_module()$call_emitting(ctx$py, nul, max_tokens = 32L, temperature = 1)
  prompts <- found[[1]]
  params <- list(max_tokens = 32L, temperature = 1, seed = found[[2]])
  out <- do.call(generate_parallel, c(list(ctx, prompts, progress = FALSE), params))
  raw <- do.call(ctx$py$generate_parallel, c(list(prompts), params))
  count_in_python <- reticulate::py_eval("lambda result, char: [c.text.count(chr(char)) for c in result]")
  n_nul <- unlist(count_in_python(raw, 0L))
  expect_gt(sum(n_nul), 0)
  expect_false(anyNA(out))
  expect_equal(nchar(out), unlist(reticulate::py_eval("lambda result: [len(c.text) for c in result]")(raw)))
  n_replacement <- lengths(regmatches(out, gregexpr("\uFFFD", out, fixed = TRUE)))
  expect_equal(n_replacement, n_nul + unlist(count_in_python(raw, 0xFFFDL)))
})

# Strings of pseudo-random bytes (1 to 255: R strings cannot hold NUL), without
# touching the session's RNG.
random_byte_strings <- function(n, salt) {
  vapply(seq_len(n), function(i) {
    bytes <- (seq_len((i * 7 + salt) %% 24 + 1) * 97 + i * 53 + salt * 31)^2 %% 255 + 1
    rawToChar(as.raw(bytes))
  }, "")
}

test_that("random bytes in any declared encoding give answers or a classed argument error", {
  ctx <- tiny_context()
  outcomes <- list()
  for (encoding in c("unknown", "UTF-8", "latin1", "bytes")) {
    for (salt in 1:3) {
      prompts <- random_byte_strings(6, salt)
      Encoding(prompts) <- encoding
      outcome <- tryCatch(
        generate_parallel(ctx, prompts, max_tokens = 16L, temperature = 1.5, seed = salt, progress = FALSE),
        newrllama4_error_invalid_argument = function(e) e
      )
      if (inherits(outcome, "newrllama4_error")) {
        expect_equal(outcome$argument, "prompts")
        expect_false(all(validUTF8(prompts)))
      } else {
        expect_s3_class(outcome, "newrllama4_answers")
        expect_false(anyNA(outcome))
        expect_true(all(validUTF8(outcome)))
      }
      outcomes[[length(outcomes) + 1]] <- class(outcome)[[1]]
    }
  }
  # latin1 reads any bytes, and these bytes are rarely valid UTF-8: both outcomes occur
  expect_setequal(unique(unlist(outcomes)), c("newrllama4_answers", "newrllama4_error_invalid_argument"))
})

test_that("a latin1 prompt is the same prompt as its UTF-8 spelling", {
  ctx <- tiny_context()
  latin1 <- iconv("café au lait", "UTF-8", "latin1")
  expect_equal(Encoding(latin1), "latin1")
  expect_identical(c(generate_parallel(ctx, latin1, max_tokens = 5L, temperature = 0, progress = FALSE)),
                   c(generate_parallel(ctx, "café au lait", max_tokens = 5L, temperature = 0, progress = FALSE)))
})

test_that("labels give labels and a matrix of their probabilities, identical alone and in a batch", {
  labels <- c("king", "queen", "river mountain")
  prompts <- c(a = "once upon a time", b = "hello how are you", c = "tell me a story")
  out <- generate_parallel(tiny_context(n_seq_max = 3L), prompts, labels = labels, temperature = 0,
                           progress = FALSE)
  probs <- label_probs(out)
  expect_true(all(out %in% labels))
  expect_identical(dim(probs), c(3L, 3L))
  expect_identical(dimnames(probs), list(names(prompts), labels))
  expect_equal(unname(rowSums(probs)), rep(1, 3))
  expect_identical(unname(as.vector(out)), colnames(probs)[max.col(probs, ties.method = "first")])
  alone <- generate(tiny_context(n_seq_max = 1L), prompts[["b"]], labels = labels, temperature = 0)
  expect_identical(as.vector(alone), as.vector(out[["b"]]))
  expect_identical(attr(alone, "probs"), probs["b", ])
})

test_that("labels per prompt leave free-text prompts alone, and bad labels are refused, named", {
  ctx <- tiny_context()
  out <- generate_parallel(ctx, c("once upon a time", "hello"), labels = list(c("yes", "no"), NULL),
                           max_tokens = 4L, temperature = 0, progress = FALSE)
  free <- generate(ctx, "hello", max_tokens = 4L, temperature = 0)
  expect_true(out[[1]] %in% c("yes", "no"))
  expect_identical(out[[2]], as.vector(free))
  expect_true(is.na(label_probs(out)[2, "yes"]))
  expect_null(label_probs(generate_parallel(ctx, "hello", max_tokens = 2L, progress = FALSE)))
  for (bad in list("yes", c("a", "a"), c("a", ""), c("a", NA), list(c("a", "b")), 3)) {
    err <- expect_error(generate_parallel(ctx, c("x", "y"), labels = bad, progress = FALSE),
                        class = "newrllama4_error_invalid_argument")
    expect_identical(err$argument, "labels")
    expect_match(conditionMessage(err), "`labels` must", fixed = TRUE)
  }
  err <- expect_error(generate_parallel(ctx, c("x", "y"), labels = list(NULL, c("a", "a")), progress = FALSE),
                      class = "newrllama4_error_invalid_argument")
  expect_identical(err$argument, "labels[[2]]")
  expect_match(conditionMessage(err), "`labels[[2]]` must be at least two distinct, non-empty labels", fixed = TRUE)
})

survey_schema <- list(
  type = "object",
  properties = list(
    stance = list(enum = c("for", "against", "neutral")),
    year = list(type = "integer", minimum = 1900, maximum = 2030),
    party = list(type = "string", maxLength = 12),
    sure = list(type = "boolean")
  ),
  required = c("stance", "year", "party", "sure"),
  additionalProperties = FALSE
)

expect_survey_answer <- function(value) {
  expect_setequal(names(value), c("stance", "year", "party", "sure"))
  expect_true(value$stance %in% c("for", "against", "neutral"))
  expect_true(is.integer(value$year) && value$year >= 1900 && value$year <= 2030)
  expect_true(is.character(value$party) && nchar(value$party) <= 12)
  expect_true(is.logical(value$sure))
}

test_that("a JSON schema given as an R list constrains every answer, parsed into R values", {
  prompts <- stats::setNames(prompts_of_mixed_length(6), letters[1:6])
  out <- generate_parallel(tiny_context(), prompts, json_schema = survey_schema, max_tokens = 120L,
                           temperature = 1, progress = FALSE)
  parsed <- parsed_answers(out)
  expect_identical(names(parsed), letters[1:6])
  for (i in seq_along(out)) {
    expect_identical(parsed[[i]], jsonlite::fromJSON(out[[i]], simplifyVector = TRUE))
    expect_survey_answer(parsed[[i]])
  }
  as_text <- generate_parallel(tiny_context(), prompts, max_tokens = 120L, temperature = 1, progress = FALSE,
                               json_schema = as.character(jsonlite::toJSON(survey_schema, auto_unbox = TRUE)))
  expect_identical(as.vector(as_text), as.vector(out))
  greedy <- generate_parallel(tiny_context(), prompts, json_schema = survey_schema, max_tokens = 120L,
                              temperature = 0, progress = FALSE)
  alone <- generate(tiny_context(n_seq_max = 1L), prompts[["c"]], json_schema = survey_schema,
                    max_tokens = 120L, temperature = 0)
  expect_identical(as.vector(alone), greedy[["c"]])
  expect_identical(attr(alone, "parsed"), parsed_answers(greedy)[["c"]])
})

test_that("one-element required and enum vectors stay JSON arrays", {
  schema <- list(type = "object", properties = list(k = list(enum = "only")), required = "k",
                 additionalProperties = FALSE)
  out <- generate(tiny_context(), "hello", json_schema = schema, max_tokens = 20L, temperature = 0)
  expect_identical(attr(out, "parsed"), list(k = "only"))
})

test_that("a grammar constrains answers; constraints may differ per prompt", {
  ctx <- tiny_context()
  out <- generate_parallel(ctx, prompts_of_mixed_length(4), max_tokens = 120L, temperature = 1, progress = FALSE,
                           grammar = list('root ::= "yes" | "no"', NULL, NULL, NULL),
                           json_schema = list(NULL, survey_schema, NULL, NULL),
                           labels = list(NULL, NULL, c("left", "right"), NULL))
  expect_true(out[[1]] %in% c("yes", "no"))
  expect_survey_answer(parsed_answers(out)[[2]])
  expect_true(out[[3]] %in% c("left", "right"))
  expect_null(parsed_answers(out)[[1]])
  expect_null(parsed_answers(generate_parallel(ctx, "hello", max_tokens = 2L, progress = FALSE)))
})

test_that("an answer cut off before its JSON is complete fails alone", {
  expect_warning(
    out <- generate_parallel(tiny_context(), c("one", "two"), json_schema = list(survey_schema, NULL),
                             max_tokens = 4L, temperature = 0, progress = FALSE),
    class = "newrllama4_warning_partial_failure"
  )
  expect_true(is.na(out[[1]]) && !is.na(out[[2]]))
  expect_identical(generation_errors(out)$class, "newrllama4_error_incomplete_output")
  expect_null(parsed_answers(out)[[1]])
  expect_error(generate(tiny_context(), "one", json_schema = survey_schema, max_tokens = 4L),
               class = "newrllama4_error_constraint")
})

test_that("bad schemas and grammars are classed errors naming the argument, prompts numbered from 1", {
  ctx <- tiny_context()
  run <- function(...) generate_parallel(ctx, c("x", "y"), max_tokens = 4L, progress = FALSE, ...)
  expect_error(run(json_schema = list(type = "objekt")), class = "newrllama4_error_invalid_argument")
  expect_error(run(json_schema = "{not json"), "json_schema", class = "newrllama4_error_invalid_argument")
  expect_error(run(grammar = "root ::= missing"), "missing", class = "newrllama4_error_invalid_argument")
  expect_error(run(json_schema = 42), "one per prompt", class = "newrllama4_error_invalid_argument")
  expect_error(run(grammar = list("root ::= \"a\"")), "one per prompt", class = "newrllama4_error_invalid_argument")
  expect_error(run(labels = c("a", "b"), grammar = 'root ::= "a"'), "one constraint per prompt",
               class = "newrllama4_error_invalid_argument")
  err <- expect_error(run(json_schema = list(NULL, list(type = "objekt"))), class = "newrllama4_error_invalid_argument")
  expect_identical(err$argument, "json_schema[[2]]")
  expect_match(conditionMessage(err), "`json_schema[[2]]` must be a valid JSON schema", fixed = TRUE)
})

test_that("R's sampling defaults are the engine's, in both signatures, and R has every sampling parameter", {
  skip_without_engine()
  engine_defaults <- reticulate::import("dataclasses")$asdict(engine()$SamplingParams())
  expect_setequal(names(sampling_defaults), names(engine_defaults))
  expect_length(engine_defaults$stop, 0)  # the engine's empty tuple is R's NULL
  engine_defaults["stop"] <- list(NULL)
  expect_equal(sampling_defaults, engine_defaults[names(sampling_defaults)])
  for (f in list(generate_parallel, generate)) {
    expect_identical(as.list(formals(f))[names(sampling_defaults)], sampling_defaults)
  }
})

test_that("min_p drops the tokens less likely than min_p times the most likely one", {
  ctx <- tiny_context()
  prompts <- prompts_of_mixed_length(6)
  greedy <- generate_parallel(ctx, prompts, max_tokens = 8L, temperature = 0, progress = FALSE)
  sampled <- generate_parallel(ctx, prompts, max_tokens = 8L, temperature = 1.5, seed = 3L, progress = FALSE)
  # min_p = 1 keeps only the most likely token: sampling at any temperature is then greedy
  only_best <- generate_parallel(ctx, prompts, max_tokens = 8L, temperature = 1.5, seed = 3L, min_p = 1,
                                 progress = FALSE)
  expect_identical(c(only_best), c(greedy))
  expect_false(identical(c(sampled), c(greedy)))
  expect_identical(manifest(only_best)$parameters$min_p, 1)
  expect_identical(manifest(sampled)$parameters$min_p, 0)
})

# -- the result cache (cache =) --

test_that("a second call reads the answers back from the result cache", {
  ctx <- tiny_context()
  path <- tempfile(fileext = ".sqlite")
  prompts <- c(a = "hello how are you", b = "once upon a time", c = "the king")
  first <- generate_parallel(ctx, prompts, max_tokens = 6L, temperature = 0, cache = path, progress = FALSE)
  expect_equal(generation_stats(first)$result_cache_hits, 0L)
  again <- generate_parallel(ctx, rev(prompts), max_tokens = 6L, temperature = 0, cache = path, progress = FALSE)
  expect_equal(generation_stats(again)$result_cache_hits, 3L)
  expect_identical(c(again)[names(prompts)], c(first))
  expect_match(answers_summary(again), "^# 3 prompts, 0 failed, 3 from the result cache, ")
  expect_equal(as.vector(generate(ctx, "the king", max_tokens = 6L, temperature = 0, cache = path)), first[["c"]])
})

test_that("a bad cache argument or a file that is not a result cache is a classed error", {
  ctx <- tiny_context()
  for (bad in list(1, NA_character_, c("a", "b"), "")) {
    err <- expect_error(generate(ctx, "hello", cache = bad), class = "newrllama4_error_invalid_argument")
    expect_identical(err$argument, "cache")
  }
  notes <- tempfile(fileext = ".txt")
  writeLines(strrep("not a database ", 100), notes)
  err <- expect_error(generate_parallel(ctx, "hello", cache = notes, progress = FALSE), class = "newrllama4_error_cache")
  expect_equal(err$path, notes)
  expect_match(conditionMessage(err), "not a usable SQLite database")
})

test_that("an Rscript killed with SIGKILL mid-run loses nothing it finished; the re-run computes only the rest", {
  skip_on_os("windows")  # no SIGKILL
  dir <- tempfile("killed-")
  dir.create(dir)
  prompts <- prompts_of_mixed_length(20)
  saveRDS(prompts, file.path(dir, "prompts.rds"))
  cache <- file.path(dir, "answers.sqlite")
  output <- run_child_killed_after(7, c(
    "ctx <- context_create(model_load(args[[1]]), n_ctx = 256L, n_seq_max = 4L, n_threads = 1L)",
    "generate_parallel(ctx, readRDS(args[[2]]), max_tokens = 10L, temperature = 0.8, seed = 5L,",
    "                  cache = args[[3]], progress = FALSE)"
  ), c(tiny_model_path(), file.path(dir, "prompts.rds"), cache))
  expect_false("finished" %in% output)
  expect_gt(attr(output, "status"), 0)  # 137 from the shell: killed by signal 9
  ctx <- tiny_context()
  rerun <- generate_parallel(ctx, prompts, max_tokens = 10L, temperature = 0.8, seed = 5L, cache = cache,
                             progress = FALSE)
  expect_equal(generation_stats(rerun)$result_cache_hits, 7L)
  uninterrupted <- generate_parallel(ctx, prompts, max_tokens = 10L, temperature = 0.8, seed = 5L, progress = FALSE)
  expect_identical(c(rerun), c(uninterrupted))
})
