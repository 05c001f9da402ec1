reviews <- data.frame(
  id = 1:5,
  title = c("Kettle", "Toaster", "Lamp", "Fan", "Radio"),
  review = c("Boils fast and looks nice.", "Burnt every slice.", "It gives light.",
             "Loud but it works, mostly.", "Stopped after a week."),
  stringsAsFactors = FALSE
)
sentiment <- c("positive", "negative", "neutral")
instruction <- "Is the review positive, negative or neutral?"

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

test_that("a schema gives one typed column per field", {
  # no unbounded number here: the tiny model's random weights may write digits until max_tokens
  schema <- list(stars = list(type = "integer", minimum = 1, maximum = 5),
                 product = list(type = "string", maxLength = 10), recommend = "boolean",
                 mood = c("happy", "angry", "calm"))
  out <- annotate_texts(reviews, review, "Extract the fields.", schema = schema, context = tiny_context(),
                  progress = FALSE, temperature = 0.7)
  expect_true(all(is.na(out$.error)))
  expect_type(out$stars, "integer")
  expect_true(all(out$stars %in% 1:5))
  expect_type(out$product, "character")
  expect_true(all(nchar(out$product) <= 10))
  expect_type(out$recommend, "logical")
  expect_false(anyNA(out$recommend))
  expect_s3_class(out$mood, "factor")
  expect_identical(levels(out$mood), c("happy", "angry", "calm"))
  expect_false(anyNA(out$mood))
  # the categorical and boolean fields have probabilities; the others none
  expect_named(out, c(names(reviews), "stars", "product", "recommend", ".prob_recommend_true",
                      ".prob_recommend_false", ".confidence_recommend", "mood", ".prob_mood_happy",
                      ".prob_mood_angry", ".prob_mood_calm", ".confidence_mood", ".error"))
  expect_identical(manifest(out)$prompt$field_probs, c("recommend", "mood"))
})

# Each field's probability columns sum to 1 and its confidence is its value's probability.
expect_field_probs <- function(out, field, values) {
  probs <- as.matrix(out[paste0(".prob_", field, "_", values)])
  expect_equal(unname(rowSums(probs)), rep(1, nrow(out)))
  written <- as.character(out[[field]])
  if (is.logical(out[[field]])) written <- tolower(written)
  expect_equal(out[[paste0(".confidence_", field)]], unname(probs[cbind(seq_len(nrow(out)), match(written, values))]))
}

test_that("a field's probabilities are its values' probabilities as labels, on the answer up to the value", {
  ctx <- tiny_context()
  schema <- list(recommend = "boolean", mood = c("happy", "angry", "calm"), stars = list(type = "integer", minimum = 1, maximum = 5))
  out <- annotate_texts(reviews, review, "Extract the fields.", schema = schema, context = ctx, progress = FALSE)
  expect_field_probs(out, "recommend", c("true", "false"))
  expect_field_probs(out, "mood", c("happy", "angry", "calm"))
  prompt <- apply_chat_template(ctx$model, render_prompts("chat template", "Extract the fields.", list(),
                                                          reviews$review[[2]])[[1]])
  answer <- generate_parallel(ctx, prompt, json_schema = attr(out, "manifest")$prompt$schema, field_probs = TRUE,
                              max_tokens = 256L, temperature = 0)
  expect_identical(as.vector(answer), sprintf('{"recommend": %s, "mood": "%s", "stars": %d}',
                                              tolower(out$recommend[[2]]), out$mood[[2]], out$stars[[2]]))
  # the mood's values scored as labels after the answer's tokens up to its colon
  tokens <- model_tokenize(ctx$model, paste0(prompt, sub('(.*"mood":).*', "\\1", answer)))
  direct <- generate(ctx, tokens, labels = c('"happy"', '"angry"', '"calm"'), temperature = 0)
  expect_equal(unname(unlist(out[2, paste0(".prob_mood_", c("happy", "angry", "calm"))])),
               unname(attr(direct, "probs")), tolerance = 1e-6)
  expect_equal(unname(field_probs(answer)$mood[1, ]), unname(attr(direct, "probs")), tolerance = 1e-6)
})

test_that("a codebook of three yes/no fields and a category over 40 texts: every row with its probabilities", {
  skip_without_engine()
  model <- model_load("smollm2-135m-instruct")
  ctx <- context_create(model, n_ctx = 512L, n_seq_max = 4L)
  topics <- c("sport", "politics", "weather", "food")
  texts <- sprintf(c("The team won the %s final after extra time.", "Parliament passed the %s bill at night.",
                     "Heavy rain is expected over %s tomorrow.", "This %s restaurant serves great soup."),
                   rep(c("cup", "city", "coast", "new", "old", "river", "north", "south", "east", "west"), each = 4))
  codebook <- list(mentions_place = "boolean", positive = "boolean", about_people = "boolean", topic = topics)
  out <- annotate_texts(texts, instruction = "Code the text.", schema = codebook, context = ctx, progress = FALSE)
  expect_identical(nrow(out), 40L)
  expect_true(all(is.na(out$.error)))
  for (field in c("mentions_place", "positive", "about_people")) expect_field_probs(out, field, c("true", "false"))
  expect_field_probs(out, "topic", topics)
  expect_identical(manifest(out)$prompt$field_probs, names(codebook))
  # each field goes on as labels do: a sample to code by hand, then a refit to it
  coded <- review_sample(out, n = 24, weight = "uniform", seed = 1, field = "positive")
  expect_setequal(unique(coded$.stratum), as.character(unique(tolower(out$positive))))
  coded$truth <- grepl("won|great", coded$text)
  refitted <- suppressWarnings(suppressMessages(recalibrate_labels(out, coded, truth, field = "positive")))
  expect_true(manifest(refitted)$prompt[["refit_model (positive)"]] %in% c("none", refit_models))
  expect_identical(refitted[c("topic", ".prob_topic_sport")], out[c("topic", ".prob_topic_sport")])
})

test_that("each field type has its column type, NA where a row has no answer", {
  expect_identical(typed_column(list(type = "number"), c("1.5", NA)), c(1.5, NA))
  expect_identical(typed_column(list(type = "integer"), c("3", NA)), c(3L, NA))
  expect_identical(typed_column(list(type = "boolean"), c("TRUE", "FALSE")), c(TRUE, FALSE))
  expect_identical(typed_column(list(type = "string"), c("a", NA)), c("a", NA))
  expect_identical(typed_column(list(enum = list("x", "y")), c("y", NA)), factor(c("y", NA), levels = c("x", "y")))
  expect_identical(field_schema("number", "price", NULL), list(type = "number"))
  expect_identical(field_schema(c("a", "b"), "ab", NULL), list(enum = list("a", "b")))
})

test_that("examples are rendered as user and assistant turns, after the instruction", {
  ctx <- tiny_context()
  examples <- data.frame(review = c("Love it.", "Awful."), .label = c("positive", "negative"))
  prompt <- render_prompts("chat template", instruction, example_turns(examples, rlang::quo(review),
                                                                      answer_shape(sentiment, NULL)), "So so.")
  expect_identical(apply_chat_template(ctx$model, prompt[[1]]), paste0(
    "<|im_start|>system\n", instruction, "<|im_end|>\n",
    "<|im_start|>user\nLove it.<|im_end|>\n<|im_start|>assistant\npositive<|im_end|>\n",
    "<|im_start|>user\nAwful.<|im_end|>\n<|im_start|>assistant\nnegative<|im_end|>\n",
    "<|im_start|>user\nSo so.<|im_end|>\n<|im_start|>assistant\n"
  ))
  schema_examples <- data.frame(review = "Two stars.", stars = 2L, mood = factor("angry"))
  turns <- example_turns(schema_examples, rlang::quo(review),
                         answer_shape(NULL, list(stars = "integer", mood = c("happy", "angry"))))
  expect_identical(turns[[1]]$answer, '{"stars":2,"mood":"angry"}')
  out <- annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples, context = ctx,
                  progress = FALSE)
  expect_false(anyNA(out$.label))
  expect_gt(manifest(out)$timings$cached_prompt_tokens, 0)  # the shared instruction and examples, decoded once
})

test_that("a model without a chat template gets the plain layout", {
  skip_without_engine()
  path <- file.path(tempdir(), "newrllama4-tiny-base.gguf")
  testing_module()$write_tiny_model(path, chat_template = FALSE)
  base <- model_load(path)
  examples <- data.frame(review = "Love it.", .label = "positive")
  prompt <- render_prompts("plain", instruction, example_turns(examples, rlang::quo(review),
                                                               answer_shape(sentiment, NULL)), "So so.")
  expect_identical(prompt, paste0(instruction, "\n\nText: Love it.\nAnswer: positive\n\nText: So so.\nAnswer:"))
  out <- annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples,
                  context = context_create(base, n_ctx = 256L, n_seq_max = 2L), progress = FALSE)
  expect_identical(manifest(out)$prompt$layout, "plain")
  expect_false(anyNA(out$.label))
})

test_that("texts come from a column, an expression, a glue template or a character vector; it pipes", {
  ctx <- tiny_context()
  run <- function(data, ...) annotate_texts(data, ..., instruction = instruction, labels = sentiment, context = ctx,
                                      progress = FALSE)
  by_column <- run(reviews, review)
  by_template <- run(reviews, "{title}: {review}")
  by_expression <- run(reviews, paste0(title, ": ", review))
  expect_identical(by_template$.prob_positive, by_expression$.prob_positive)
  expect_false(identical(by_template$.prob_positive, by_column$.prob_positive))
  from_vector <- run(reviews$review)
  expect_identical(from_vector$text, reviews$review)
  expect_identical(from_vector$.label, by_column$.label)
  piped <- reviews |> run(review)
  expect_identical(piped$.label, by_column$.label)
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

test_that("a worked example whose label is not among the labels is refused, named", {
  examples <- data.frame(review = c("Love it.", "Meh.", "Hate it."), .label = c("positive", "so-so", NA))
  err <- expect_error(
    annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples, context = tiny_context(),
                   progress = FALSE),
    class = "newrllama4_error_example_label"
  )
  expect_s3_class(err, "newrllama4_error_invalid_argument")
  expect_identical(err$examples, 2:3)
  expect_match(conditionMessage(err), "so-so")
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
