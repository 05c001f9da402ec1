# Texts longer than the context: split into passages that fit it.

test_that("passage_options() and passages refuse bad specifications early, with classed errors", {
  expect_error(passage_options(size = 0), class = "newrllama4_error_invalid_argument")
  expect_error(passage_options(size = 10.5), class = "newrllama4_error_invalid_argument")
  expect_error(passage_options(overlap = -1), class = "newrllama4_error_invalid_argument")
  expect_error(passage_options(combine = "median"), class = "newrllama4_error_invalid_argument")
  expect_error(passage_options(booleans = c("any", "all", "none")), class = "newrllama4_error_invalid_argument")
  options <- passage_options()
  expect_identical(options[c("overlap", "combine", "booleans")], list(overlap = 0L, combine = "mean", booleans = "any"))
  expect_null(options$size)
  expect_output(print(passage_options(size = 300, overlap = 1, combine = "max")), "size: 300 tokens")
  expect_error(annotate_texts("a text", instruction = "Label it.", labels = c("a", "b"), passages = "yes"),
               class = "newrllama4_error_invalid_argument")
  expect_error(passage_answers(data.frame(x = 1)), class = "newrllama4_error_invalid_argument")
})

test_that("passages refuses a remote context, and passages that cannot fit the context", {
  ctx <- tiny_context(n_ctx = 256L)
  on.exit(context_free(ctx))
  too_big <- expect_error(annotate_texts("a text", instruction = "Label it.", labels = c("a", "b"), context = ctx,
                                         passages = passage_options(size = 1000L)),
                          class = "newrllama4_error_invalid_argument")
  expect_match(conditionMessage(too_big), "at most 2[0-9]{2} fit")
  expect_error(annotate_texts("a text", instruction = paste(rep("Label it.", 200), collapse = " "),
                              labels = c("a", "b"), context = ctx, passages = TRUE),
               "no passage fits", class = "newrllama4_error_invalid_argument")
  remote <- context_remote(tiny_server()$url, max_concurrency = 1L)
  expect_error(annotate_texts("a text", instruction = "Label it.", labels = c("a", "b"), context = remote,
                              passages = TRUE),
               "needs a local model", class = "newrllama4_error_invalid_argument")
})

test_that("passages pack whole paragraphs while they fit, then sentences, with an overlap of sentences", {
  # units of 10 tokens; paragraphs of 2, 3 and 6 units; passages of 40 tokens
  tokens <- rep(10L, 11)
  paragraph <- rep(1:3, c(2, 3, 6))
  # the paragraph of 3 does not fit beside the first: it starts a passage rather than being split; the
  # paragraph of 6 fits no passage, so its sentences fill the room left
  expect_identical(pack_units(tokens, paragraph, 40L, 0L), list(1:2, 3:6, 7:10, 11L))
  expect_identical(pack_units(tokens, paragraph, 50L, 0L), list(1:5, 6:10, 11L))
  # one sentence again at the start of each passage after the first, never the whole passage
  expect_identical(pack_units(tokens, paragraph, 40L, 1L), list(1:2, 2:5, 5:8, 8:11))
  expect_identical(pack_units(rep(10L, 4), rep(1L, 4), 10L, 2L), list(1L, 2L, 3L, 4L))
})

test_that("a text of 3x the window: every passage answered, on sentence and paragraph boundaries, rules by hand", {
  ctx <- tiny_context(n_ctx = 256L)
  on.exit(context_free(ctx))
  long <- prose(12, 1, sentences = 2:3)
  expect_gt(text_tokens(ctx$model, long), 3 * 256)
  data <- data.frame(id = 1:4, text = c(NA, "Short and calm.", long, prose(1, 2, sentences = 2)))
  instruction <- "Is there a flood?"
  expect_warning(out <- annotate_texts(data, text, instruction, labels = c("yes", "no"), context = ctx,
                                       passages = TRUE, progress = FALSE),
                 class = "newrllama4_warning_partial_failure")
  expect_identical(out$id, 1:4)
  expect_identical(out$.error, c("The text is missing.", NA, NA, NA))
  passages <- passage_answers(out)
  expect_true(all(is.na(passages$.error)))
  expect_identical(as.vector(table(passages$.row)[c("2", "4")]), c(1L, 1L))
  n_long <- sum(passages$.row == 3)
  expect_gte(n_long, 4)
  expect_identical(passages$.passage[passages$.row == 3], seq_len(n_long))
  expect_passages_fit(ctx, out, instruction, answer_tokens = 1L)

  # every passage is a span of the text; it ends a sentence, and starts a paragraph
  # (the paragraphs here are shorter than a passage)
  mine <- passages[passages$.row == 3, ]
  expect_identical(substring(long, mine$.start, mine$.end), mine$.text)
  expect_true(all(endsWith(mine$.text, ".")))
  paragraph_starts <- c(1L, stringi::stri_locate_all_regex(long, "\n\n")[[1]][, "end"] + 1L)
  expect_true(all(mine$.start %in% paragraph_starts))
  expect_identical(mine$.start[-1] > mine$.end[-n_long], rep(TRUE, n_long - 1))  # no overlap by default

  # "mean": the passages' mean probabilities; the label the most likely
  probs <- as.matrix(mine[c(".prob_yes", ".prob_no")])
  expect_equal(unlist(out[3, c(".prob_yes", ".prob_no")]), colMeans(probs), ignore_attr = TRUE)
  expect_identical(as.character(out$.label[3]), c("yes", "no")[which.max(colMeans(probs))])
  # the short text is its own single passage
  expect_identical(passages$.text[passages$.row == 2], "Short and calm.")
  expect_equal(out$.prob_yes[2], passages$.prob_yes[passages$.row == 2])

  record <- manifest(out)$passages
  expect_identical(record[c("overlap_sentences", "combine", "texts", "texts_split", "passages")],
                   list(overlap_sentences = 0L, combine = "mean", texts = 3L, texts_split = 1L,
                        passages = nrow(passages)))
  expect_match(record$passages_per_text, sprintf("max %d", n_long))
  expect_identical(manifest(out)$rows$answered, 3L)

  # "max": each label's highest probability in any passage, normalised
  by_max <- suppressWarnings(annotate_texts(data, text, instruction, labels = c("yes", "no"), context = ctx,
                                            passages = passage_options(combine = "max"), progress = FALSE))
  maxima <- apply(probs, 2, max)
  expect_equal(unlist(by_max[3, c(".prob_yes", ".prob_no")]), maxima / sum(maxima), ignore_attr = TRUE)
  expect_identical(as.character(by_max$.label[3]), c("yes", "no")[which.max(maxima)])
  expect_identical(passage_answers(by_max)$.prob_yes, passages$.prob_yes)
})

test_that("an overlap repeats sentences; a long sentence is cut by tokens; a given size is kept", {
  ctx <- tiny_context(n_ctx = 256L)
  on.exit(context_free(ctx))
  long <- prose(1, 3, sentences = 15)  # one paragraph: split by sentences
  out <- annotate_texts(long, instruction = "Flood?", labels = c("yes", "no"), context = ctx, progress = FALSE,
                        passages = passage_options(size = 100L, overlap = 1L))
  passages <- passage_answers(out)
  expect_gte(nrow(passages), 3)
  expect_true(all(passages$.tokens <= 100L))
  expect_identical(manifest(out)$passages$size, 100L)
  sentences <- stringi::stri_locate_all_boundaries(long, type = "sentence")[[1]]
  for (i in seq_len(nrow(passages))[-1]) {
    # the passage opens with the previous one's last sentence
    last <- sentences[sentences[, "end"] >= passages$.end[i - 1] - 1, , drop = FALSE][1, ]
    expect_identical(passages$.start[i], last[["start"]])
  }

  run_on <- paste(rep("water", 400), collapse = " ")  # one sentence of 400 words
  cut <- annotate_texts(run_on, instruction = "Flood?", labels = c("yes", "no"), context = ctx, progress = FALSE,
                        passages = TRUE)
  pieces <- passage_answers(cut)
  expect_gte(nrow(pieces), 2)
  expect_true(all(is.na(pieces$.error)))
  expect_passages_fit(ctx, cut, "Flood?", answer_tokens = 1L)
  expect_identical(paste(pieces$.text, collapse = " "), run_on)  # cut between words only
})

test_that("without a context: the default model's context holds passages of the given size; no rows, no passages", {
  skip_without_engine()
  long <- prose(10, 5, sentences = 2:3)
  out <- annotate_texts(long, instruction = "Is there a flood?", labels = c("yes", "no"), progress = FALSE,
                        passages = passage_options(size = 120L, overlap = 1L))
  passages <- passage_answers(out)
  expect_gte(nrow(passages), 2)
  expect_true(all(is.na(passages$.error)))
  expect_true(all(passages$.tokens <= 120L))
  expect_identical(manifest(out)$passages$overlap_sentences, 1L)
  none <- annotate_texts(data.frame(text = character()), instruction = "Flood?", labels = c("yes", "no"),
                         context = tiny_context(), progress = FALSE, passages = TRUE)
  expect_identical(names(none), c("text", ".label", ".prob_yes", ".prob_no", ".confidence", ".error"))
  expect_identical(nrow(passage_answers(none)), 0L)
})

test_that("Gemma: a 6,000-token novel chapter, segmented in the default 2048-token context, every passage answered", {
  skip_without_engine()
  skip_if_not_installed("janeaustenr")
  model <- model_load()
  ctx <- context_create(model, n_ctx = 2048L, n_seq_max = 2L)
  on.exit(context_free(ctx))
  lines <- janeaustenr::prideprejudice
  # paragraphs as the book has them: blank lines between
  book <- paste(lines[seq_len(1200)], collapse = "\n")
  tokens <- text_tokens(model, book)
  cut <- stringi::stri_locate_all_regex(book, "\n\n")[[1]][, "start"]
  chapter <- substr(book, 1, cut[which.max(cut[cut < nchar(book) * 6500 / tokens])])
  n_tokens <- text_tokens(model, chapter)
  expect_gt(n_tokens, 5500)
  expect_lt(n_tokens, 7000)
  instruction <- "Is this passage about marriage? Answer yes or no."
  out <- annotate_texts(c(chapter, "It rained."), instruction = instruction, labels = c("yes", "no"),
                        context = ctx, passages = TRUE, progress = FALSE)
  passages <- passage_answers(out)
  expect_true(all(is.na(out$.error)))
  expect_true(all(is.na(passages$.error)))
  expect_gte(sum(passages$.row == 1), 3)
  expect_passages_fit(ctx, out, instruction, answer_tokens = longest_label(model, c("yes", "no")))
  expect_equal(out$.prob_yes[1], mean(passages$.prob_yes[passages$.row == 1]))
  expect_identical(manifest(out)$passages$texts_split, 1L)
})
