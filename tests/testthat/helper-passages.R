# Fixtures of the passages tests (test-passages-*.R).

# Paragraphs of sentences that each end in a full stop, of 4 to 12 words.
prose <- function(n_paragraphs, seed, sentences = 3:7) {
  words <- c("the", "river", "rose", "past", "an", "old", "mill", "and", "nobody", "saw", "it", "water",
             "morning", "village", "bridge", "quietly")
  withr::with_seed(seed, paste(vapply(seq_len(n_paragraphs), function(p) {
    paste(vapply(seq_len(sample(sentences, 1)), function(s) {
      sentence <- paste(sample(words, sample(4:12, 1), replace = TRUE), collapse = " ")
      paste0(toupper(substr(sentence, 1, 1)), substring(sentence, 2), ".")
    }, ""), collapse = " ")
  }, ""), collapse = "\n\n"))
}

# Every passage's prompt, counted whole by the engine, fits the context with its answer.
expect_passages_fit <- function(ctx, result, instruction, answer_tokens) {
  passages <- passage_answers(result)
  layout <- prompts_layout(ctx)
  prompts <- as.list(render_prompts(layout, instruction, list(), passages$.text))
  lengths <- unlist(ctx$model$py$prompt_lengths(prompts))
  expect_true(all(lengths + answer_tokens <= ctx$py$n_ctx))
  expect_identical(passages$.tokens, text_tokens(ctx$model, passages$.text))
  expect_true(all(passages$.tokens <= manifest(result)$passages$size))
}
