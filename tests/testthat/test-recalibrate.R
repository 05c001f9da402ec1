# A stand-in for annotate_texts() with two labels and two orders: `n` rows, a
# share `majority` of them "a"; under order 1 the model tells the labels apart
# but leans toward "b" (the label of its last example), order 2 is noise.
annotated_rows <- function(n, majority, seed = 1) {
  withr::with_seed(seed, {
    gold <- ifelse(stats::runif(n) < majority, "a", "b")
    signal <- ifelse(gold == "a", 1.5, -1.5) + stats::rnorm(n)
    odds <- list(signal - 2.5, stats::rnorm(n))
  })
  order_probs <- lapply(odds, function(z) cbind(a = stats::plogis(z), b = 1 - stats::plogis(z)))
  mean_probs <- (order_probs[[1]] + order_probs[[2]]) / 2
  data <- data.frame(id = seq_len(n), gold = gold,
                     .label = factor(c("a", "b")[max.col(mean_probs, "first")], levels = c("a", "b")),
                     .prob_a = mean_probs[, "a"], .prob_b = mean_probs[, "b"],
                     .confidence = apply(mean_probs, 1, max), .agreement_orders = 1, .error = NA_character_)
  attr(data, "order_probs") <- order_probs_record(order_probs, data)
  attr(data, "manifest") <- structure(list(prompt = list(example_orders = c("1,2", "2,1"), calibration = "none")),
                                      class = "newrllama4_manifest")
  data
}

accuracy <- function(data) mean(as.character(data$.label) == data$gold)

test_that("the fit recovers the offsets and order weights that made the labels", {
  withr::with_seed(2, {
    n <- 4000
    log_probs <- lapply(1:2, function(o) {
      z <- stats::rnorm(n, sd = 2)
      log(cbind(stats::plogis(z), stats::plogis(-z)))
    })
    scores <- 0.9 * log_probs[[1]] + 0.1 * log_probs[[2]] + rep(c(0, 1), each = n)
    p_first <- 1 / (1 + exp(scores[, 2] - scores[, 1]))
    y <- ifelse(stats::runif(n) < p_first, 1L, 2L)
  })
  fit <- fit_label_model(log_probs, y)
  expect_equal(fit$offsets, c(0, 1), tolerance = 0.15)
  expect_equal(fit$weights, c(0.9, 0.1), tolerance = 0.15)
})

test_that("recalibrate_labels() says, once a session, to call learn_labels() instead, and keeps working", {
  data <- annotated_rows(120, majority = 0.5)
  coded <- review_sample(data, n = 40, weight = "uniform", seed = 1)
  quiet <- function(expr) suppressMessages(suppressWarnings(expr, classes = "newrllama4_warning_few_coded"))
  withr::with_options(list(rlib_warning_verbosity = "verbose"), {
    expect_warning(refitted <- quiet(recalibrate_labels(data, coded, gold)),
                   "learn_labels(data, coded, truth, features = FALSE)", fixed = TRUE,
                   class = "newrllama4_warning_deprecated")
  })
  expect_identical(manifest(refitted)$prompt$calibration, "hand-coded")
  # once a session: a second call says nothing of it
  suppressWarnings(quiet(recalibrate_labels(data, coded, gold)), classes = "newrllama4_warning_deprecated")
  expect_no_warning(quiet(recalibrate_labels(data, coded, gold)), class = "newrllama4_warning_deprecated")
})

test_that("a random sample coded by hand undoes a misleading order on a corpus where one label dominates", {
  data <- annotated_rows(300, majority = 0.8)
  coded <- review_sample(data, n = 30, weight = "uniform", seed = 3)
  refitted <- recalibrate_labels(data, coded, gold)
  expect_lt(accuracy(data), 0.6)  # order 1's lean toward "b" and order 2's noise
  expect_gt(accuracy(refitted), 0.85)
  # batch calibration would centre the log-odds, as if the labels were an even mix
  centred <- lapply(attr(data, "order_probs")$probs, function(p) {
    z <- stats::qlogis(p[, "a"])
    z - mean(z)
  })
  expect_gt(accuracy(refitted), mean(ifelse(centred[[1]] + centred[[2]] > 0, "a", "b") == data$gold))
  probs <- as.matrix(refitted[c(".prob_a", ".prob_b")])
  expect_equal(unname(rowSums(probs)), rep(1, 300))
  expect_identical(as.character(refitted$.label), c("a", "b")[max.col(probs, "first")])
  expect_equal(refitted$.confidence, apply(probs, 1, max))
  expect_true(all(refitted$.agreement_orders %in% c(0, 0.5, 1)))
  expect_identical(refitted$id, data$id)
  record <- manifest(refitted)$prompt
  expect_identical(record$calibration, "hand-coded")
  expect_identical(record$hand_coded_rows, 30L)
  expect_match(record$label_offsets, "^a 0\\.000, b -?[0-9.]+$")
  expect_match(record$order_weights, "^1,2: [0-9.]+, 2,1: -?[0-9.]+$")
  weights <- as.numeric(sub(".*: ", "", strsplit(record$order_weights, ", ")[[1]]))
  expect_gt(weights[1], 3 * abs(weights[2]))  # the informative order counts, the noise hardly
  expect_gt(record$cross_validated_accuracy, 0.8)
  expect_identical(recalibrate_labels(data, coded, gold), refitted)  # reproducible: no draw of its own
})

test_that("coded rows that cannot be fitted, or data without the orders' probabilities, are refused", {
  data <- annotated_rows(40, majority = 0.5)
  coded <- data[1:12, ]
  coded$.row <- 1:12
  invalid <- function(...) expect_error(recalibrate_labels(...), class = "newrllama4_error_invalid_argument")
  invalid(data, data[1:12, ], gold)  # no .row
  invalid(data[1:20, ], coded, gold)  # a subset, or the rows in another order: the orders' rows are not theirs
  invalid(data[40:1, ], coded, gold)
  changed <- data
  changed$.confidence <- 0.5  # changed rows: the record is no longer theirs (without one, they are labels from elsewhere)
  invalid(changed, coded, gold)
  invalid(data, transform(coded, .row = c(1:11, 1L)), gold)
  invalid(data, transform(coded, .row = c(1:11, 41L)), gold)
  invalid(data, transform(coded, .row = as.character(.row)), gold)
  unlabelled <- data
  unlabelled$.label[12] <- NA  # a row without an answer
  attr(unlabelled, "order_probs") <- order_probs_record(attr(data, "order_probs")$probs, unlabelled)
  invalid(unlabelled, coded, gold)
  invalid(data, transform(coded, gold = "c"), gold)
  invalid(data, transform(coded, gold = "a"), gold)  # one label: no boundary to place
  invalid(data, coded[1:3, ], gold)  # no more rows than the 3 parameters
  missing_probs <- data
  attr(missing_probs, "order_probs")$probs[[2]][5, ] <- NA
  expect_error(recalibrate_labels(missing_probs, coded, gold), class = "newrllama4_error_calibration")
})

test_that("annotate_texts() keeps each order's own probabilities, and refitting them labels every row", {
  ctx <- tiny_context()
  texts <- data.frame(text = prompts_of_mixed_length(16))
  examples <- data.frame(text = c("once upon a time", "hello how are you"), .label = c("story", "greeting"))
  run <- function(examples, ...) {
    annotate_texts(texts, text, "Story or greeting?", labels = c("story", "greeting"), examples = examples,
                   context = ctx, progress = FALSE, ...)
  }
  both <- suppressWarnings(run(examples, example_orders = 2L, calibrate = TRUE))
  alone <- lapply(list(1:2, 2:1), function(order) run(examples[order, ]))
  order_probs <- attr(both, "order_probs")$probs
  expect_length(order_probs, 2L)
  for (o in 1:2) expect_equal(unname(order_probs[[o]]), unname(as.matrix(alone[[o]][c(".prob_story", ".prob_greeting")])))
  both$gold <- rep(c("story", "greeting"), 8)
  # 10 coded rows are few for the refit's choice, which it says
  expect_warning(refitted <- recalibrate_labels(both, review_sample(both, n = 10, weight = "uniform", seed = 1), gold),
                 class = "newrllama4_warning_few_coded")
  expect_false(anyNA(refitted$.label))
  expect_equal(unname(rowSums(as.matrix(refitted[c(".prob_story", ".prob_greeting")]))), rep(1, 16))
  expect_identical(manifest(refitted)$prompt$example_orders, c("1,2", "2,1"))
  expect_identical(manifest(refitted)$rows$answered, 16L)
  expect_warning(recalibrate_labels(refitted, review_sample(refitted, n = 10, weight = "uniform", seed = 2), gold),
                 class = "newrllama4_warning_few_coded")
})

test_that("with one order the refit is temperature scaling with label offsets, and adds no .agreement_orders", {
  data <- annotated_rows(200, majority = 0.8)
  data$.agreement_orders <- NULL
  attr(data, "order_probs") <- order_probs_record(attr(data, "order_probs")$probs[1], data)
  attr(data, "manifest")$prompt$example_orders <- "1,2"
  refitted <- recalibrate_labels(data, review_sample(data, n = 30, weight = "uniform", seed = 4), gold)
  expect_false(".agreement_orders" %in% names(refitted))
  expect_gt(accuracy(refitted), accuracy(data) + 0.2)
  expect_match(manifest(refitted)$prompt$order_weights, "^1,2: [0-9.]+$")  # the manifest's one order
})

test_that("on Gemma, with an instruction of hundreds of tokens, the kept probabilities are each order's own", {
  skip_without_engine()
  ctx <- context_create(model_load("gemma3-270m"), n_ctx = 1024L, n_seq_max = 4L)
  on.exit(context_free(ctx), add = TRUE)
  topics <- c("sports", "weather")
  rules <- paste(rep(paste("A sentence about matches, players, teams or scores is sports; a sentence about rain,",
                           "wind, sun, storms or temperatures is weather."), 12), collapse = " ")
  instruction <- paste("Label the topic of each sentence.", rules, "Answer with the label only.")
  texts <- data.frame(text = c("The striker scored twice.", "Heavy rain is expected tonight.", "The team lost the final.",
                               "A cold wind blew all day.", "She won the tennis match.", "Storms will hit the coast.",
                               "The coach praised his players.", "It will be sunny and warm.", "The goalkeeper was injured.",
                               "Snow fell in the mountains."),
                      gold = rep(topics, 5))
  examples <- data.frame(text = c("The match ended in a draw.", "Fog covered the city."), .label = topics)
  expect_gt(length(model_tokenize(ctx$model, instruction)), 300)
  run <- function(examples, ...) {
    annotate_texts(texts, text, instruction, labels = topics, examples = examples, context = ctx, progress = FALSE, ...)
  }
  both <- suppressWarnings(run(examples, example_orders = 2L))
  alone <- lapply(list(1:2, 2:1), function(order) run(examples[order, ]))
  order_probs <- attr(both, "order_probs")$probs
  for (o in 1:2) expect_equal(unname(order_probs[[o]]), unname(as.matrix(alone[[o]][paste0(".prob_", topics)])))
  coded <- review_sample(both, n = 6, weight = "uniform", seed = 1)
  expect_warning(refitted <- recalibrate_labels(both, coded, gold), class = "newrllama4_warning_few_coded")
  expect_false(anyNA(refitted$.label))
  expect_identical(suppressWarnings(recalibrate_labels(both, coded, gold), classes = "newrllama4_warning_few_coded"),
                   refitted)
})

# Five labels, two orders: order 1 knows the labels (with a bias of its own,
# `lean`, toward the last label), order 2 is noise (`noise_order`) or as good.
five_label_rows <- function(n, lean = 0, noise_order = TRUE, seed = 1) {
  labels <- c("a", "b", "c", "d", "e")
  withr::with_seed(seed, {
    gold <- sample(labels, n, replace = TRUE, prob = c(0.35, 0.25, 0.2, 0.12, 0.08))
    signal <- function() {
      scores <- matrix(stats::rnorm(n * 5), n, 5) + 1.6 * outer(gold, labels, "==")
      scores[, 5] <- scores[, 5] + lean
      scores
    }
    scores <- list(signal(), if (noise_order) matrix(stats::rnorm(n * 5), n, 5) else signal())
  })
  order_probs <- lapply(scores, function(s) {
    p <- softmax_rows(s)
    colnames(p) <- labels
    p
  })
  mean_probs <- (order_probs[[1]] + order_probs[[2]]) / 2
  data <- data.frame(id = seq_len(n), gold = gold, .label = factor(most_likely(mean_probs, labels), levels = labels),
                     .confidence = apply(mean_probs, 1, max), .agreement_orders = 1)
  for (k in seq_along(labels)) data[[paste0(".prob_", labels[k])]] <- mean_probs[, k]
  attr(data, "order_probs") <- order_probs_record(order_probs, data)
  attr(data, "manifest") <- structure(list(prompt = list(example_orders = c("1,2", "2,1"), calibration = "none")),
                                      class = "newrllama4_manifest")
  data
}

uncoded_accuracy <- function(data, coded) {
  rest <- setdiff(seq_len(nrow(data)), coded$.row)
  mean(as.character(data$.label[rest]) == data$gold[rest])
}

test_that("with five labels, 30 coded rows and an order of pure noise, the refit is never worse on average", {
  skip_on_cran()  # a simulation of 20-50 s: make test runs it, CRAN's checks skip it
  gains <- vapply(1:20, function(seed) {
    data <- five_label_rows(400, seed = seed)
    coded <- review_sample(data, n = 30, weight = "uniform", seed = seed)
    refitted <- suppressMessages(suppressWarnings(recalibrate_labels(data, coded, gold)))
    uncoded_accuracy(refitted, coded) - uncoded_accuracy(data, coded)
  }, 0)
  expect_gte(mean(gains), -0.01)
})

test_that("a refit is chosen where it helps, and recovers the bias with many coded rows", {
  data <- five_label_rows(2000, lean = 2, seed = 5)
  coded <- review_sample(data, n = 400, weight = "uniform", seed = 5)
  refitted <- recalibrate_labels(data, coded, gold)
  record <- manifest(refitted)$prompt
  expect_identical(record$calibration, "hand-coded")
  expect_false(identical(record$refit_model, "none"))
  expect_gt(uncoded_accuracy(refitted, coded), uncoded_accuracy(data, coded) + 0.05)
  offsets <- as.numeric(sub(".* ", "", strsplit(record$label_offsets, ", ")[[1]]))
  # order 1's lean of 2 toward "e", taken back at about half (the orders' mean log-probability)
  expect_lt(offsets[5], -0.5)
  expect_length(record$refit_cross_validation, 13L)  # the labels as they are, 3 models x 4 ridges
  expect_match(record$refit_cross_validation[1], "^none \\(the labels as they are\\): accuracy [0-9.]+, log-loss")
  expect_identical(sum(grepl("(chosen)", record$refit_cross_validation, fixed = TRUE)), 1L)
  expect_true(record$refit_penalty %in% c(0.01, 0.1, 1, 10))
})

test_that("where no refit beats the labels as they are, they are kept, with a message", {
  # the labels' probabilities are the truth's own: nothing to correct
  labels <- c("a", "b")
  data <- withr::with_seed(8, {
    p <- stats::runif(300)
    data.frame(gold = ifelse(stats::runif(300) < p, "a", "b"), .prob_a = p, .prob_b = 1 - p,
               .label = factor(ifelse(p > 0.5, "a", "b"), levels = labels), .confidence = pmax(p, 1 - p))
  })
  attr(data, "order_probs") <- order_probs_record(list(cbind(a = data$.prob_a, b = data$.prob_b)), data)
  attr(data, "manifest") <- structure(list(prompt = list(calibration = "none")), class = "newrllama4_manifest")
  declined <- 0
  for (seed in 1:10) {
    coded <- review_sample(data, n = 40, weight = "uniform", seed = seed)
    refitted <- withCallingHandlers(recalibrate_labels(data, coded, gold),
                                    newrllama4_message_refit_declined = function(m) {
                                      declined <<- declined + 1
                                      invokeRestart("muffleMessage")
                                    })
    if (identical(manifest(refitted)$prompt$refit_model, "none")) {
      expect_identical(refitted$.label, data$.label)
      expect_identical(manifest(refitted)$prompt$calibration, "none")
    }
  }
  expect_gte(declined, 3)
})

test_that("too few coded rows for the labels and orders warn, naming how many would do", {
  data <- five_label_rows(300, seed = 9)
  coded <- review_sample(data, n = 30, weight = "uniform", seed = 9)
  expect_warning(suppressMessages(recalibrate_labels(data, coded, gold)), "About 60 would",
                 class = "newrllama4_warning_few_coded")
  expect_no_warning(suppressMessages(recalibrate_labels(data, review_sample(data, n = 60, weight = "uniform",
                                                                            seed = 9), gold)))
})

test_that("where the labels need no refit, the chosen one costs nothing, as the fixed refit did at 20 rows", {
  skip_on_cran()  # a simulation of 20-50 s: make test runs it, CRAN's checks skip it
  gains <- vapply(1:30, function(seed) {
    data <- five_label_rows(400, noise_order = FALSE, seed = seed)
    # 20 rows on purpose, fewer than five a label
    coded <- suppressWarnings(review_sample(data, n = 20, weight = "uniform", seed = seed),
                              classes = "newrllama4_warning_thin_strata")
    chosen <- suppressMessages(suppressWarnings(recalibrate_labels(data, coded, gold)))
    log_probs <- lapply(attr(data, "order_probs")$probs, order_log_probs)
    fixed <- fit_label_model(lapply(log_probs, function(l) l[coded$.row, , drop = FALSE]),
                             match(coded$gold, levels(data$.label)))  # every parameter, ridge 0.01
    data_fixed <- data
    data_fixed$.label <- factor(most_likely(softmax_rows(label_scores(log_probs, fixed)), levels(data$.label)),
                                levels = levels(data$.label))
    c(chosen = uncoded_accuracy(chosen, coded) - uncoded_accuracy(data, coded),
      fixed = uncoded_accuracy(data_fixed, coded) - uncoded_accuracy(data, coded))
  }, numeric(2))
  expect_gte(mean(gains["chosen", ]), -0.01)
  expect_gt(mean(gains["chosen", ]), mean(gains["fixed", ]))
})
