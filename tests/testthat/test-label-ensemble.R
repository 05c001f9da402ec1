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
  expect_identical(record$prompt$calibration, "none")
  expect_identical(record$prompts$total, 10L)  # 5 texts, 2 orders
})

test_that("contextual calibration divides by the prior of content-free inputs under the same prompt, per order", {
  ctx <- tiny_context()
  calibrated <- suppressWarnings(annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples,
                               calibrate = "content-free", context = ctx, progress = FALSE))
  plain <- suppressWarnings(annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples,
                                           context = ctx, progress = FALSE))
  content_free <- suppressWarnings(annotate_texts(data.frame(review = c("N/A", "", "[MASK]")), review, instruction,
                                                  labels = sentiment, examples = examples, context = ctx,
                                                  progress = FALSE))
  # annotate_texts() skips an empty text, so the prior of "" is the engine's own
  empty <- generate(ctx, render_prompts("chat template", instruction,
                                        example_turns(examples, rlang::quo(review), answer_shape(sentiment, NULL)),
                                        "")[[1]] |> apply_chat_template(model = tiny_model()),
                    labels = sentiment, temperature = 0)
  prior_rows <- rbind(as.matrix(content_free[c(1, 3), paste0(".prob_", sentiment)]), attr(empty, "probs"))
  prior <- colMeans(prior_rows)
  raw <- as.matrix(plain[paste0(".prob_", sentiment)])
  expected <- sweep(raw, 2, prior, "/")
  expected <- expected / rowSums(expected)
  expect_equal(unname(as.matrix(calibrated[paste0(".prob_", sentiment)])), unname(expected))
  expect_identical(manifest(calibrated)$prompt$calibration, "content-free")
  expect_match(manifest(calibrated)$prompt$label_prior, "^1,2,3: positive 0\\.[0-9]{3}, negative")
})

test_that("batch calibration centres each label's log-probability on its mean over the rows", {
  # two rows of one order: log-odds log(9) and log(1.5), centred on their mean
  probs <- rbind(c(0.9, 0.1), c(0.6, 0.4))
  prior <- batch_prior(list(probs))
  expect_equal(prior, rbind(c(sqrt(0.54), sqrt(0.04)) / (sqrt(0.54) + sqrt(0.04))))
  half_gap <- (log(9) - log(1.5)) / 2
  expect_equal(calibrate_probs(probs, prior[1, ]), rbind(c(plogis(half_gap), plogis(-half_gap)),
                                                          c(plogis(-half_gap), plogis(half_gap))))
  # per order, rows without probabilities left out of the prior and left NA
  with_gap <- rbind(probs, NA)
  two <- batch_prior(list(with_gap, probs[, 2:1]))
  expect_equal(two, rbind(prior, prior[, 2:1]))
  expect_identical(is.na(calibrate_probs(with_gap, two[1, ])), is.na(with_gap))
  # a label whose probability is 0 everywhere stays finite, and last
  zero <- calibrate_probs(rbind(c(0.5, 0.5, 0), c(0.9, 0.1, 0)), c(0.5, 0.5, 0))
  expect_false(anyNA(zero))
  expect_equal(rowSums(zero), c(1, 1))
  expect_error(batch_prior(list(rbind(probs[1, ], NA))), "two rows", class = "newrllama4_error_calibration")
})

test_that("calibrate: TRUE is batch calibration, FALSE none, or a kind by name", {
  expect_identical(check_calibrate(TRUE), "batch")
  expect_identical(check_calibrate(FALSE), "none")
  expect_identical(check_calibrate("content-free"), "content-free")
  for (bad in list(NA, "yes", c(TRUE, FALSE), 1)) {
    expect_error(check_calibrate(bad), "calibrate", class = "newrllama4_error_invalid_argument")
  }
})

test_that("batch calibration: the rows' own probabilities, per order, no extra prompts", {
  ctx <- tiny_context()
  orders <- list(1:3, c(3L, 1L, 2L))
  run <- function(...) {
    suppressWarnings(annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples,
                                    context = ctx, progress = FALSE, ...))
  }
  calibrated <- run(example_orders = orders, calibrate = TRUE)
  alone <- lapply(orders, function(order) run(example_orders = list(order)))
  probs <- function(out) as.matrix(out[!is.na(out$.label), paste0(".prob_", sentiment)])
  by_hand <- lapply(alone, function(out) {
    p <- probs(out)
    prior <- exp(colMeans(log(p)))
    scaled <- sweep(p, 2, prior, "/")
    scaled / rowSums(scaled)
  })
  expect_equal(unname(probs(calibrated)), unname((by_hand[[1]] + by_hand[[2]]) / 2))
  expect_identical(which(is.na(calibrated$.label)), 6L)  # the row without text: no label, not in the prior
  record <- manifest(calibrated)
  expect_identical(record$prompt$calibration, "batch")
  expect_identical(record$prompts$total, 10L)  # 5 texts, 2 orders, nothing else
  expect_match(record$prompt$label_prior, "^(1,2,3|3,1,2): positive 0\\.[0-9]{3}, negative 0\\.[0-9]{3}, neutral")
  expect_length(record$prompt$label_prior, 2L)
  expect_error(annotate_texts(reviews[1, , drop = FALSE], review, instruction, labels = sentiment, examples = examples,
                              calibrate = TRUE, context = ctx, progress = FALSE),
               class = "newrllama4_error_calibration")
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
  expect_warning(warn_if_order_sensitive(0.25, 2L, "none"), "25%(.|\n)*calibrate",
                 class = "newrllama4_warning_order_sensitive")
  # calibrated already: more orders or other examples, not calibration again
  warning <- tryCatch(warn_if_order_sensitive(0.25, 2L, "batch"), warning = identity)
  expect_s3_class(warning, "newrllama4_warning_order_sensitive")
  expect_no_match(conditionMessage(warning), "calibrate = TRUE", fixed = TRUE)
  expect_match(conditionMessage(warning), "learn_labels()", fixed = TRUE)
  expect_no_warning(warn_if_order_sensitive(0.1, 2L, "none"))
  expect_no_warning(warn_if_order_sensitive(0.5, 1L, "none"))
  expect_no_warning(warn_if_order_sensitive(NA_real_, 3L, "none"))
})
