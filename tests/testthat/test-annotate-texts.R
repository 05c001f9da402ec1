test_that("labels become a factor column and one probability column per label, rows in order", {
  out <- annotate_texts(reviews, review, instruction, labels = sentiment, context = tiny_context(), progress = FALSE)
  expect_s3_class(out, "data.frame")
  expect_identical(out[names(reviews)], reviews)
  expect_s3_class(out$.label, "factor")
  expect_identical(levels(out$.label), sentiment)
  expect_false(anyNA(out$.label))
  probs <- as.matrix(out[paste0(".prob_", sentiment)])
  expect_equal(unname(rowSums(probs)), rep(1, 5))
  expect_identical(as.character(out$.label), sentiment[max.col(probs, ties.method = "first")])
  expect_identical(out$.error, rep(NA_character_, 5))
})

test_that("each row's answer is what the model gives its rendered prompt alone", {
  ctx <- tiny_context()
  out <- annotate_texts(reviews, review, instruction, labels = sentiment, context = ctx, progress = FALSE)
  prompt <- render_prompts("chat template", instruction, list(), reviews$review[[4]])[[1]]
  alone <- generate(tiny_context(n_seq_max = 1L), apply_chat_template(ctx$model, prompt), labels = sentiment,
                    temperature = 0)
  expect_identical(as.character(out$.label[[4]]), as.vector(alone))
  expect_equal(unlist(out[4, paste0(".prob_", sentiment)], use.names = FALSE), unname(attr(alone, "probs")))
})

test_that("texts come from a column, an expression, a glue template or a character vector; it pipes", {
  ctx <- tiny_context()
  run <- function(data, ...) annotate_texts(data, ..., instruction = instruction, labels = sentiment, context = ctx,
                                      progress = FALSE)
  by_column <- run(reviews, review)
  by_template <- run(reviews, "{title}: {review}")
  by_expression <- run(reviews, paste0(title, ": ", review))
  by_name <- run(reviews, "review")  # a string naming one column, without braces, is that column
  expect_identical(by_name$.prob_positive, by_column$.prob_positive)
  expect_identical(by_template$.prob_positive, by_expression$.prob_positive)
  expect_false(identical(by_template$.prob_positive, by_column$.prob_positive))
  from_vector <- run(reviews$review)
  expect_identical(from_vector$text, reviews$review)
  expect_identical(from_vector$.label, by_column$.label)
  piped <- reviews |> run(review)
  expect_identical(piped$.label, by_column$.label)
})

test_that("a string naming one column is that column, in the texts and the examples; another says how to name one", {
  expect_identical(row_texts(reviews, rlang::quo("review"), "text"), reviews$review)
  expect_identical(row_texts(reviews, rlang::quo("{review}"), "text"), reviews$review)
  expect_identical(row_texts(reviews, rlang::quo("title"), "text"), reviews$title)
  examples <- data.frame(review = c("Love it.", "Awful."), .label = c("positive", "negative"))
  answer <- answer_shape(sentiment, NULL)
  expect_identical(example_turns(examples, rlang::quo("review"), answer),
                   example_turns(examples, rlang::quo(review), answer))
  # before any model is loaded: the check comes first
  # a column that is not there: the one error of every column argument, listing the columns
  error <- expect_error(annotate_texts(reviews, "reveiw", instruction, labels = sentiment),
                        class = "newrllama4_error_missing_column")
  expect_match(conditionMessage(error), '`text` must name one column of `data`, not "reveiw"', fixed = TRUE)
  expect_match(conditionMessage(error), "The columns of `data`: id, title, and review", fixed = TRUE)
  expect_identical(error$choices, names(reviews))
  expect_error(annotate_texts(reviews, reveiw, instruction, labels = sentiment), 'not "reveiw"', fixed = TRUE,
               class = "newrllama4_error_missing_column")
  expect_error(annotate_texts(reviews, id, instruction, labels = sentiment), "text = review", fixed = TRUE,
               class = "newrllama4_error_invalid_argument")
})

test_that("a row that cannot run gets NA and a reason in .error; the others complete", {
  ctx <- tiny_context(n_ctx = 128L)
  # the engine's own refusal of a row, as a server's that counts its own tokens: past
  # annotate_texts()' early check of lengths (test-context-size.R)
  local_package_binding("check_context_holds", function(...) invisible())
  data <- reviews
  data$review[[2]] <- NA
  data$review[[4]] <- paste(rep("very long", 200), collapse = " ")
  expect_warning(
    out <- annotate_texts(data, review, instruction, labels = sentiment, context = ctx, progress = FALSE),
    "2 of 5 rows have no answer", class = "newrllama4_warning_partial_failure"
  )
  expect_identical(is.na(out$.label), c(FALSE, TRUE, FALSE, TRUE, FALSE))
  expect_identical(out$.error[[2]], "The text is missing.")
  expect_match(out$.error[[4]], "tokens but the context holds at most 128")
  expect_true(all(is.na(out$.error[c(1, 3, 5)])))
  expect_true(is.na(out$.prob_positive[[4]]))
})

test_that("an empty text is not labelled as if it were one: NA, and .error says it is empty", {
  data <- reviews
  data$review[c(2, 4)] <- c("", " \n\t")
  expect_warning(
    out <- annotate_texts(data, review, instruction, labels = sentiment, context = tiny_context(), progress = FALSE),
    "2 of 5 rows", class = "newrllama4_warning_partial_failure"
  )
  expect_identical(out$.error[c(2, 4)], rep("The text is empty.", 2))
  expect_identical(which(is.na(out$.label)), c(2L, 4L))
  expect_identical(manifest(out)$rows, list(total = 5L, skipped_missing_text = 2L, answered = 3L, failed = 0L))
})

test_that("a data frame without rows gives one without rows, with the answer columns", {
  ctx <- tiny_context()
  none <- reviews[reviews$id > 99, ]
  labelled <- annotate_texts(none, review, instruction, labels = sentiment, context = ctx, progress = FALSE)
  expect_identical(nrow(labelled), 0L)
  expect_identical(names(labelled), c(names(reviews), ".label", paste0(".prob_", sentiment), ".confidence", ".error"))
  expect_identical(levels(labelled$.label), sentiment)
  fields <- annotate_texts(none, review, "x", schema = list(stars = "integer", ok = "boolean"), context = ctx,
                           progress = FALSE)
  expect_identical(vapply(fields[c("stars", "ok")], class, ""), c(stars = "integer", ok = "logical"))
  expect_identical(manifest(fields)$rows$total, 0L)
  # a column of missing texts runs nothing either
  all_missing <- suppressWarnings(annotate_texts(data.frame(t = c(NA, "")), t, "x", labels = sentiment,
                                                 context = ctx, progress = FALSE))
  expect_identical(all_missing$.error, c("The text is missing.", "The text is empty."))
})

test_that("bad arguments are classed errors", {
  ctx <- tiny_context()
  bad <- function(...) expect_error(annotate_texts(..., context = ctx, progress = FALSE),
                                    class = "newrllama4_error_invalid_argument")
  bad(list(1, 2), instruction = "x")
  bad(reviews, no_such_column, instruction = "x")
  bad(reviews, id, instruction = "x")
  bad(reviews, review, instruction = NA_character_)
  bad(reviews, review, instruction = "x", labels = "only one")
  bad(reviews, review, instruction = "x", labels = sentiment, schema = list(a = "string"))
  bad(reviews, review, instruction = "x", schema = list(a = "date"))
  bad(reviews, review, instruction = "x", schema = list("string"))
  bad(reviews, review, instruction = "x", labels = sentiment, examples = data.frame(review = "a"))
  expect_error(annotate_texts(reviews, review, "x", context = "not a context"), class = "newrllama4_error_invalid_argument")
})

test_that("an annotation killed with SIGKILL resumes from its cache: only the missing rows run, same result", {
  skip_on_os("windows")  # no SIGKILL
  data <- data.frame(id = 1:20, note = prompts_of_mixed_length(20))
  input <- tempfile(fileext = ".rds")
  saveRDS(data, input)
  cache <- tempfile(fileext = ".sqlite")
  output <- run_child_killed_after(7, c(
    "ctx <- context_create(model_load(args[[1]]), n_ctx = 256L, n_seq_max = 4L, n_threads = 1L)",
    "annotate_texts(readRDS(args[[2]]), note, 'Label the note.', labels = c('king', 'queen', 'river'),",
    "         context = ctx, cache = args[[3]], temperature = 0.8, seed = 3L, progress = FALSE)"
  ), c(tiny_model_path(), input, cache))
  expect_false("finished" %in% output)
  expect_gt(attr(output, "status"), 0)
  ctx <- tiny_context()
  run <- function(cache) {
    annotate_texts(data, note, "Label the note.", labels = c("king", "queen", "river"), context = ctx, cache = cache,
             temperature = 0.8, seed = 3L, progress = FALSE)
  }
  resumed <- run(cache)
  expect_identical(manifest(resumed)$prompts[c("from_cache", "computed", "failed")],
                   list(from_cache = 7L, computed = 13L, failed = 0L))
  uninterrupted <- run(NULL)
  expect_identical(resumed[names(resumed) != ".error"], uninterrupted[names(uninterrupted) != ".error"])
  expect_identical(manifest(run(cache))$prompts$from_cache, 20L)
})

test_that("an annotation carries its call's counters and timings, which generation_stats() shows", {
  ctx <- tiny_context()
  out <- annotate_texts(reviews, review, instruction, labels = sentiment, context = ctx, progress = FALSE)
  stats <- generation_stats(out)
  expect_identical(as.integer(stats$prompts), nrow(reviews))
  expect_gt(stats$prompt_tokens, 0)
  expect_identical(stats$failures, 0L)
  # two example orders: a prompt per row and order
  examples <- data.frame(review = c("Great.", "Awful."), .label = c("positive", "negative"))
  ordered <- annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples,
                            example_orders = 2L, context = ctx, progress = FALSE)
  expect_identical(as.integer(generation_stats(ordered)$prompts), 2L * nrow(reviews))
  expect_error(generation_stats(data.frame(label = out$.label)), "annotate_texts",
               class = "newrllama4_error_invalid_argument")
})
