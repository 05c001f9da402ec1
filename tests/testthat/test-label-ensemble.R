reviews <- data.frame(review = c("Boils fast and looks nice.", "Burnt every slice.", "It gives light.",
                                 "Loud but it works, mostly.", "Stopped after a week.", NA))
sentiment <- c("positive", "negative", "neutral")
instruction <- "Is the review positive, negative or neutral?"
examples <- data.frame(review = c("Love it.", "Awful.", "It is a kettle."),
                       .label = c("positive", "negative", "neutral"))

test_that("orders: the given one, its rotations, then seeded permutations; or the caller's", {
  expect_identical(example_order_list(1L, 3L), list(1:3))
  expect_identical(example_order_list(3L, 3L), list(1:3, c(2L, 3L, 1L), c(3L, 1L, 2L)))
  six <- example_order_list(6L, 3L)
  expect_length(unique(six), 6L)
  expect_identical(six, example_order_list(6L, 3L))  # drawn from a fixed seed
  expect_identical(example_order_list(list(c(2, 1, 3), 1:3), 3L), list(c(2L, 1L, 3L), 1:3))
  bad <- function(orders, n = 3L) {
    expect_error(example_order_list(orders, n), class = "newrllama4_error_invalid_argument")
  }
  bad(7L)
  bad(0L)
  bad(2L, 1L)
  bad(list(c(1, 1, 2)))
  bad(list(1:3, 1:3))
  bad(list(1:2))
})

test_that("several orders: each row's probabilities are the mean of the orders' own, its label their argmax", {
  ctx <- tiny_context()
  orders <- list(1:3, c(3L, 1L, 2L))
  run <- function(examples, ...) {
    annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples, context = ctx,
                   progress = FALSE, ...)
  }
  suppressWarnings(combined <- run(examples, example_orders = orders))
  alone <- suppressWarnings(lapply(orders, function(order) run(examples[order, ])))
  probs <- function(out) as.matrix(out[paste0(".prob_", sentiment)])
  expect_equal(probs(combined), (probs(alone[[1]]) + probs(alone[[2]])) / 2)
  answered <- !is.na(combined$.label)
  expect_identical(which(!answered), 6L)
  expect_identical(as.character(combined$.label[answered]),
                   sentiment[max.col(probs(combined)[answered, ], ties.method = "first")])
  expect_equal(combined$.confidence, apply(probs(combined), 1, max))
  agreeing <- (as.character(alone[[1]]$.label) == as.character(combined$.label)) +
    (as.character(alone[[2]]$.label) == as.character(combined$.label))
  expect_equal(combined$.agreement_orders, agreeing / 2)
  record <- manifest(combined)
  expect_identical(record$prompt$example_orders, c("1,2,3", "3,1,2"))
  expect_equal(record$prompt$order_disagreement, mean(agreeing[answered] < 2))
  expect_false(record$prompt$calibrated)
  expect_identical(record$prompts$total, 10L)  # 5 texts, 2 orders
})

test_that("calibration divides by the prior of content-free inputs under the same prompt, per order", {
  ctx <- tiny_context()
  calibrated <- suppressWarnings(annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples,
                               calibrate = TRUE, context = ctx, progress = FALSE))
  plain <- suppressWarnings(annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples,
                                           context = ctx, progress = FALSE))
  content_free <- suppressWarnings(annotate_texts(data.frame(review = c("N/A", "", "[MASK]")), review, instruction,
                                                  labels = sentiment, examples = examples, context = ctx,
                                                  progress = FALSE))
  # annotate_texts() skips an empty text, so the prior of "" is the engine's own
  empty <- generate(ctx, render_prompts("chat template", instruction,
                                        example_turns(examples, rlang::quo(review), answer_shape(sentiment, NULL)),
                                        "")[[1]] |> apply_chat_template(model = tiny_model()),
                    choices = sentiment, temperature = 0)
  prior_rows <- rbind(as.matrix(content_free[c(1, 3), paste0(".prob_", sentiment)]), attr(empty, "probs"))
  prior <- colMeans(prior_rows)
  raw <- as.matrix(plain[paste0(".prob_", sentiment)])
  expected <- sweep(raw, 2, prior, "/")
  expected <- expected / rowSums(expected)
  expect_equal(unname(as.matrix(calibrated[paste0(".prob_", sentiment)])), unname(expected))
  expect_true(manifest(calibrated)$prompt$calibrated)
  expect_match(manifest(calibrated)$prompt$label_prior, "^1,2,3: positive 0\\.[0-9]{3}, negative")
})

test_that("combined labels need labels and temperature 0", {
  ctx <- tiny_context()
  expect_error(annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples,
                              example_orders = 2L, temperature = 0.5, context = ctx, progress = FALSE),
               "temperature", class = "newrllama4_error_invalid_argument")
  expect_error(annotate_texts(reviews, review, "x", schema = list(a = "string"), calibrate = TRUE, context = ctx,
                              progress = FALSE), class = "newrllama4_error_invalid_argument")
  expect_error(annotate_texts(reviews, review, instruction, labels = sentiment, calibrate = NA, context = ctx),
               class = "newrllama4_error_invalid_argument")
})

test_that("orders that disagree on more than a tenth of the rows are a classed warning", {
  expect_warning(warn_if_order_sensitive(0.25, 2L), "25%", class = "newrllama4_warning_order_sensitive")
  expect_no_warning(warn_if_order_sensitive(0.1, 2L))
  expect_no_warning(warn_if_order_sensitive(0.5, 1L))
  expect_no_warning(warn_if_order_sensitive(NA_real_, 3L))
})
