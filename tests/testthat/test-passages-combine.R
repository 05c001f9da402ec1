# Passages' answers combined into their text's row.

test_that("the passages' answers combine by hand-checkable rules", {
  passages <- data.frame(.row = c(2L, 2L, 2L, 5L), .passage = c(1:3, 1L), .start = 1L, .end = 1L, .tokens = 1L,
                         .text = "t")
  passages$.label <- factor(c("a", "b", "b", "a"), levels = c("a", "b", "c"))
  probs <- rbind(c(0.5, 0.3, 0.2), c(0.1, 0.45, 0.45), c(0.2, 0.6, 0.2), c(0.7, 0.2, 0.1))
  passages[paste0(".prob_", c("a", "b", "c"))] <- probs
  passages$.confidence <- apply(probs, 1, max)
  passages$flag <- c(FALSE, TRUE, FALSE, FALSE)
  passages$.prob_flag_true <- c(0.2, 0.6, 0.1, 0.3)
  passages$.prob_flag_false <- 1 - passages$.prob_flag_true
  passages$.confidence_flag <- c(0.8, 0.6, 0.9, 0.7)
  passages$tone <- factor(c("calm", "angry", "angry", "calm"), levels = c("calm", "angry"))
  passages$count <- c(NA, 4L, 7L, 1L)
  passages$.error <- NA_character_

  mean_rule <- combine_passages(passages, passage_options())
  expect_identical(mean_rule$.row, c(2L, 5L))
  expect_equal(unname(as.matrix(mean_rule[paste0(".prob_", c("a", "b", "c"))])),
               rbind(colMeans(probs[1:3, ]), probs[4, ]))
  expect_identical(as.character(mean_rule$.label), c("b", "a"))
  expect_identical(levels(mean_rule$.label), c("a", "b", "c"))
  expect_equal(mean_rule$.confidence, c(mean(c(0.3, 0.45, 0.6)), 0.7))
  # at least one passage true: 1 - (0.8 * 0.4 * 0.9)
  expect_identical(mean_rule$flag, c(TRUE, FALSE))
  expect_equal(mean_rule$.prob_flag_true, c(1 - 0.8 * 0.4 * 0.9, 0.3))
  expect_equal(mean_rule$.prob_flag_false, c(0.8 * 0.4 * 0.9, 0.7))
  expect_equal(mean_rule$.confidence_flag, c(1 - 0.8 * 0.4 * 0.9, 0.7))
  # the combined field stands where labels stand downstream
  drawn <- review_sample(mean_rule, n = 2, weight = "uniform", seed = 1, field = "flag")
  expect_identical(drawn$.row, c(1L, 2L))
  # an enum field without probability columns: its most frequent value
  expect_identical(as.character(mean_rule$tone), c("angry", "calm"))
  expect_identical(mean_rule$count, c(4L, 1L))
  expect_identical(mean_rule$.error, c(NA_character_, NA_character_))
  expect_identical(names(mean_rule), c(".row", setdiff(names(passages), c(".row", ".passage", ".start", ".end",
                                                                          ".tokens", ".text"))))

  max_rule <- combine_passages(passages, passage_options(combine = "max", booleans = "all"))
  maxima <- apply(probs[1:3, ], 2, max)
  expect_equal(unname(unlist(max_rule[1, paste0(".prob_", c("a", "b", "c"))])), maxima / sum(maxima))
  expect_identical(as.character(max_rule$.label), c("b", "a"))
  expect_equal(max_rule$.confidence[[1]], 0.6 / sum(maxima))
  expect_identical(max_rule$flag, c(FALSE, FALSE))
  expect_equal(max_rule$.prob_flag_true, c(0.2 * 0.6 * 0.1, 0.3))

  # an enum with probabilities combines them; a failed passage fails its text
  passages$.prob_tone_calm <- c(0.9, 0.4, 0.3, 0.6)
  passages$.prob_tone_angry <- 1 - passages$.prob_tone_calm
  passages$.error[2] <- "cut off"
  failed <- combine_passages(passages, passage_options())
  expect_equal(failed$.prob_tone_calm, c(NA, 0.6))
  expect_identical(is.na(failed$.label), c(TRUE, FALSE))
  expect_identical(failed$.error, c("Passage 2 of 3: cut off", NA))
  passages$.error[2] <- NA
  expect_equal(combine_passages(passages, passage_options())$.prob_tone_calm, c(mean(c(0.9, 0.4, 0.3)), 0.6))
  expect_identical(as.character(combine_passages(passages, passage_options())$tone), c("calm", "calm"))

  answers <- data.frame(.row = c(1L, 1L), .passage = 1:2, .start = 1L, .end = 1L, .tokens = 1L, .text = "t",
                        .answer = c("first", "second"), .error = NA_character_)
  expect_identical(combine_passages(answers, passage_options())$.answer, "first\n\nsecond")
})

test_that("schema fields and free text combine per text", {
  ctx <- tiny_context(n_ctx = 256L)
  on.exit(context_free(ctx))
  long <- prose(8, 4, sentences = 2:3)
  out <- annotate_texts(c(long, "Calm."), instruction = "Extract the fields.", schema = list(flood = "boolean"),
                        context = ctx, progress = FALSE, max_tokens = 16L, passages = TRUE)
  passages <- passage_answers(out)
  expect_gte(sum(passages$.row == 1), 2)
  answered <- is.na(out$.error)
  expect_true(answered[[1]])
  for (row in which(answered)) {
    mine <- passages$.row == row
    expect_identical(out$flood[row], any(passages$flood[mine]))
    # the engine's probabilities of each passage, combined: at least one passage says yes
    expect_equal(out$.prob_flood_true[row], 1 - prod(1 - passages$.prob_flood_true[mine]))
    expect_equal(out$.prob_flood_true[row] + out$.prob_flood_false[row], 1)
  }
  expect_passages_fit(ctx, out, "Extract the fields.", answer_tokens = 16L)

  text <- suppressWarnings(annotate_texts(long, instruction = "Summarise.", context = ctx, progress = FALSE,
                                          max_tokens = 4L, passages = TRUE))
  pieces <- passage_answers(text)
  if (all(is.na(pieces$.error))) expect_identical(text$.answer, paste(pieces$.answer, collapse = "\n\n"))
})

test_that("example orders and calibration per passage; review, refit and regression on the texts", {
  ctx <- tiny_context(n_ctx = 256L)
  on.exit(context_free(ctx))
  texts <- c(vapply(1:14, function(i) prose(if (i %% 3 == 0) 4 else 1, 10 + i, sentences = 2:3), ""))
  examples <- data.frame(text = c("The water rose.", "Nobody saw it."), .label = c("yes", "no"))
  out <- suppressWarnings(annotate_texts(texts, instruction = "Flood?", labels = c("yes", "no"),
                                         examples = examples, example_orders = 2L, calibrate = TRUE, context = ctx,
                                         progress = FALSE, passages = TRUE))
  passages <- passage_answers(out)
  expect_gt(nrow(passages), length(texts))
  expect_true(all(is.na(out$.error)))
  # the text's probabilities are its passages' (ensembled, calibrated) mean, and so is its agreement
  expect_equal(out$.prob_yes, as.vector(tapply(passages$.prob_yes, passages$.row, mean)))
  expect_equal(out$.agreement_orders, as.vector(tapply(passages$.agreement_orders, passages$.row, mean)))
  expect_identical(manifest(out)$prompt$calibration, "batch")
  # each order's raw probabilities, combined over the passages by the same rule
  record <- attr(out, "order_probs")
  expect_length(record$probs, 2L)
  expect_identical(dim(record$probs[[1]]), c(length(texts), 2L))

  coded <- review_sample(out, n = 8, weight = "uniform", seed = 1)
  expect_true(all(coded$.row %in% seq_along(texts)))
  coded$gold <- rep(c("yes", "no"), 4)
  refitted <- suppressWarnings(suppressMessages(recalibrate_labels(out, coded, gold)))
  expect_identical(nrow(refitted), length(texts))
  expect_true(all(abs(refitted$.prob_yes + refitted$.prob_no - 1) < 1e-9))
  refitted$x <- seq_along(texts) / length(texts)
  fit <- suppressWarnings(suppressMessages(label_regression(yes ~ x, refitted, coded, gold, seed = 1)))
  expect_length(coef(fit), 2L)
})
