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
