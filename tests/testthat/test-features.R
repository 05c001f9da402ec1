# Features made without the engine: a matrix of values exact in single precision
# (multiples of 1/8), the third row without features.
some_features <- function() {
  values <- matrix(c(1:12 / 8, -(1:12) / 4), 6, 4)
  values[3, ] <- NA
  data <- data.frame(id = 1:6, group = c("a", "b", "a", "b", "a", "b"))
  data$.features <- features_from_matrix(values, list(model = "tiny", state = "last_token"))
  list(data = data, values = values)
}

test_that("row_features() gives each row's vector back as doubles, NA for a row without one", {
  made <- some_features()
  features <- row_features(made$data)
  expect_equal(unname(features[, ]), made$values, ignore_attr = TRUE)
  expect_identical(colnames(features), paste0("f", 1:4))
  expect_identical(attr(features, "source"), list(model = "tiny", state = "last_token"))
  expect_identical(features_source(made$data), list(model = "tiny", state = "last_token"))
  # single precision: 4 bytes a dimension
  expect_identical(lengths(unclass(made$data$.features)), c(16L, 16L, 0L, 16L, 16L, 16L))
})

test_that("the features follow their rows through `[`, subset() and split()", {
  made <- some_features()
  picked <- made$data[c(6, 1, 3), ]
  expect_equal(row_features(picked)[, ], made$values[c(6, 1, 3), ], ignore_attr = TRUE)
  expect_identical(features_source(picked), features_source(made$data))
  bs <- split(made$data, made$data$group)$b
  expect_equal(row_features(bs)[, ], made$values[c(2, 4, 6), ], ignore_attr = TRUE)
  expect_equal(row_features(subset(made$data, id > 4))[, ], made$values[5:6, ], ignore_attr = TRUE)
})

test_that("dplyr's verbs keep each row's features, bind_rows() too", {
  skip_if_not_installed("dplyr")
  made <- some_features()
  arranged <- dplyr::arrange(dplyr::filter(made$data, id != 2), dplyr::desc(id))
  expect_equal(row_features(arranged)[, ], made$values[c(6, 5, 4, 3, 1), ], ignore_attr = TRUE)
  both <- dplyr::bind_rows(made$data[1:2, ], made$data[5:6, ])
  expect_equal(row_features(both)[, ], made$values[c(1, 2, 5, 6), ], ignore_attr = TRUE)
  joined <- dplyr::left_join(data.frame(id = c(5, 1)), made$data, by = "id")
  expect_equal(row_features(joined)[, ], made$values[c(5, 1), ], ignore_attr = TRUE)
})

test_that("data without features, or read back from a CSV, raise an error that says how to get them", {
  made <- some_features()
  expect_error(row_features(made$data["id"]), "annotate_texts", class = "newrllama4_error_no_features")
  path <- withr::local_tempfile(fileext = ".csv")
  utils::write.csv(made$data, path, row.names = FALSE)
  back <- utils::read.csv(path)
  expect_identical(back$.features, c("<features>", "<features>", NA, "<features>", "<features>", "<features>"))
  expect_error(row_features(back), "placeholder", class = "newrllama4_error_no_features")
})

test_that("a features column prints one short cell per row", {
  made <- some_features()
  printed <- utils::capture.output(print(made$data))
  expect_match(printed[[2]], "<features 4>", fixed = TRUE)
  expect_match(printed[[4]], "<NA>|NA")
  expect_length(printed, 7)
})

test_that("annotate_texts(features = TRUE) keeps each row's state, the same bits whatever else is annotated", {
  ctx <- tiny_context()
  data <- rbind(reviews, data.frame(id = 6L, title = "Blank", review = " "))
  annotated <- annotate_texts(data, review, instruction, labels = sentiment, context = ctx, progress = FALSE,
                              features = TRUE) |> suppressWarnings()
  features <- row_features(annotated)
  # all three kinds: the last state, the middle layer's, and its mean over the text
  expect_identical(dim(features), c(6L, 3L * ctx$model$py$n_embd))
  expect_identical(which(is.na(features[, 1])), 6L)
  states <- c("last_token", "last_token_layer_0", "text_mean_layer_0")
  expect_identical(features_source(annotated)$state, states)
  expect_identical(manifest(annotated)$prompt$features, states)
  # the labels as without features, and a row's features as when it is annotated with others
  plain <- annotate_texts(data[1:5, ], review, instruction, labels = sentiment, context = ctx, progress = FALSE)
  expect_identical(annotated[1:5, c(".label", ".prob_positive")], plain[c(".label", ".prob_positive")])
  alone <- annotate_texts(data[c(4, 2), ], review, instruction, labels = sentiment, context = ctx, progress = FALSE,
                          features = TRUE)
  expect_identical(row_features(alone)[, ], features[c(4, 2), ])
})

test_that("features from several example orders are their mean, and come back from the result cache", {
  ctx <- tiny_context()
  cache <- withr::local_tempfile(fileext = ".sqlite")
  examples <- data.frame(review = c("Love it.", "Awful."), .label = c("positive", "negative"))
  annotate <- function(orders) {
    annotate_texts(reviews, review, instruction, labels = sentiment, examples = examples, example_orders = orders,
                   context = ctx, cache = cache, progress = FALSE, features = TRUE) |> suppressWarnings()
  }
  both <- annotate(2L)  # the given order, then its rotation
  first <- row_features(annotate(list(1:2)))
  second <- row_features(annotate(list(2:1)))
  expect_equal(row_features(both), (first + second) / 2, tolerance = 1e-6)
  again <- annotate(2L)
  expect_identical(manifest(again)$prompts$from_cache, 10L)
  expect_identical(row_features(again), row_features(both))
})

test_that("embed_texts() gives the features of the annotation with the same instruction, and no answer", {
  ctx <- tiny_context()
  embedded <- embed_texts(reviews$review[1:3], instruction = instruction, context = ctx, progress = FALSE)
  expect_named(embedded, c("text", ".error", ".features"))
  annotated <- annotate_texts(reviews[1:3, ], review, instruction, labels = sentiment, context = ctx,
                              progress = FALSE, features = TRUE)
  expect_identical(row_features(embedded), row_features(annotated))
  by_name <- embed_texts(reviews[1:3, ], "review", instruction, context = ctx, progress = FALSE)  # the column
  expect_identical(row_features(by_name), row_features(annotated))
  expect_error(embed_texts(reviews, "reveiw", instruction), 'not "reveiw"', fixed = TRUE,
               class = "newrllama4_error_missing_column")
})

test_that("embed_texts() on llama-server pooling the last token gives the engine's own features", {
  server <- context_remote(tiny_embedding_server()$url)
  data <- rbind(reviews, data.frame(id = 6L, title = "Blank", review = " "))
  embedded <- embed_texts(data, review, instruction, context = server, progress = FALSE)
  expect_named(embedded, c(names(data), ".error", ".features"))
  expect_identical(embedded$.error[[6]], "The text is empty.")
  # the same bits as the engine's own state of the same text (the plain layout: an
  # embeddings endpoint takes text, where the local tiny model has a chat template)
  plain <- render_prompts("plain", instruction, list(), reviews$review)
  local <- generate_parallel(tiny_context(), plain, max_tokens = 1L, features = "last", progress = FALSE)
  expect_identical(row_features(embedded)[1:5, ], features_matrix(attr(local, "features"))[, ])
  expect_identical(features_source(embedded)[c("state", "server")], list(state = "server pooled", server = "llama.cpp"))
  record <- manifest(embedded)
  expect_identical(record$model$server, "llama.cpp")
  expect_identical(record$prompt$features, "server pooled")
  expect_identical(record$rows$answered, 5L)
  cache <- withr::local_tempfile(fileext = ".sqlite")
  embed_texts(data, review, instruction, context = server, cache = cache, progress = FALSE)
  again <- embed_texts(data, review, instruction, context = server, cache = cache, progress = FALSE)
  expect_identical(manifest(again)$prompts$from_cache, 5L)
  expect_identical(row_features(again), row_features(embedded))
})

test_that("a server without embeddings, or features in a server's label pass, are classed errors that say what to do", {
  server <- context_remote(tiny_server()$url)  # llama-cpp-python's, started without embedding = True
  expect_error(embed_texts(reviews, review, instruction, context = server, progress = FALSE), "--embeddings",
               class = "newrllama4_error_no_embeddings")
  expect_error(annotate_texts(reviews, review, instruction, labels = sentiment, context = server, features = TRUE),
               "embed_texts", class = "newrllama4_error_invalid_argument")
  expect_error(embed_texts(reviews, review, instruction, context = server, max_tokens = 3L), "progress",
               class = "newrllama4_error_invalid_argument")
})

test_that("Gemma: a long instruction's features are the same bits for a row alone and in a batch", {
  skip_on_cran()
  skip_without_engine()
  ctx <- context_create(model_load(), n_ctx = 512L, n_seq_max = 4L)
  on.exit(context_free(ctx))
  long_instruction <- paste(
    "You are coding customer reviews for a study of product satisfaction. Read each review and decide whether the",
    "customer is satisfied with the product. Answer 'positive' when the review is mainly positive about the product",
    "itself, 'negative' when it is mainly negative, and 'neutral' when it says neither. Complaints about delivery or",
    "packaging alone do not make a review negative; judge the product. Sarcasm counts as what it means."
  )
  examples <- data.frame(review = c("The kettle boils fast and looks great. Would buy again.",
                                    "Stopped working after two weeks; support never answered.",
                                    "Arrived late in a crushed box, but the blender itself is excellent.",
                                    "It is a lamp. It gives light."),
                         .label = c("positive", "negative", "positive", "neutral"))
  annotate <- function(rows) {
    annotate_texts(reviews[rows, ], review, long_instruction, labels = sentiment, examples = examples, context = ctx,
                   features = TRUE, progress = FALSE)
  }
  batch <- annotate(1:5)
  expect_gt(generation_stats(batch)$prompt_tokens / 5, 150)  # the prompts' tokens, each
  expect_identical(row_features(annotate(4))[1, ], row_features(batch)[4, ])
  expect_identical(row_features(annotate(c(2, 5)))[, ], row_features(batch)[c(2, 5), ])
})

test_that("features = c(\"last\", \"middle\", \"mean\") keeps each state, one after the other, and the answers stay", {
  ctx <- tiny_context()
  kinds <- c("last", "middle", "mean")
  annotated <- annotate_texts(reviews, review, instruction, labels = sentiment, context = ctx, progress = FALSE,
                              features = kinds)
  n_embd <- ctx$model$py$n_embd
  features <- row_features(annotated)
  expect_identical(dim(features), c(5L, 3L * n_embd))
  expect_identical(features_source(annotated)$state,
                   c("last_token", "last_token_layer_0", "text_mean_layer_0"))  # the tiny model's two layers
  expect_identical(manifest(annotated)$prompt$features, features_source(annotated)$state)
  plain <- annotate_texts(reviews, review, instruction, labels = sentiment, context = ctx, progress = FALSE,
                          features = "last")
  expect_identical(annotated[c(".label", ".prob_positive")], plain[c(".label", ".prob_positive")])
  expect_identical(row_features(annotate_texts(reviews, review, instruction, labels = sentiment, context = ctx,
                                               progress = FALSE, features = TRUE)), features)
  expect_identical(features[, seq_len(n_embd)], row_features(plain)[, ])
  # each kind alone is its part of the whole, and the same bits for a row annotated alone
  mean_only <- annotate_texts(reviews[c(4, 2), ], review, instruction, labels = sentiment, context = ctx,
                              progress = FALSE, features = "mean")
  expect_identical(unname(row_features(mean_only)[, ]), unname(features[c(4, 2), 2L * n_embd + seq_len(n_embd)]))
  embedded <- embed_texts(reviews, review, instruction, context = ctx, progress = FALSE, features = c("middle", "mean"))
  expect_identical(unname(row_features(embedded)[, ]), unname(features[, n_embd + seq_len(2L * n_embd)]))
})

test_that("the mean is over the row's own text: another instruction leaves its tokens, not their states", {
  ctx <- tiny_context()
  mean_of <- function(texts, instruction) {
    row_features(embed_texts(texts, instruction = instruction, context = ctx, progress = FALSE, features = "mean"))
  }
  texts <- reviews$review[1:2]
  with_text <- mean_of(texts, instruction)
  # the whole prompt's mean, which generate_parallel() gives for a prompt without a text
  prompts <- render_prompts(prompts_layout(ctx), instruction, list(), texts)
  whole <- generate_parallel(ctx, prompts, max_tokens = 1L, features = "mean", progress = FALSE)
  expect_false(isTRUE(all.equal(features_matrix(attr(whole, "features"))[, ], with_text[, ], check.attributes = FALSE)))
  expect_false(isTRUE(all.equal(mean_of(texts, "Another task entirely."), with_text)))
})

test_that("features name known states, and a server embeds only its own", {
  ctx <- tiny_context()
  expect_error(annotate_texts(reviews, review, instruction, labels = sentiment, context = ctx, features = "first"),
               "middle", class = "newrllama4_error_invalid_argument")
  expect_error(embed_texts(reviews, review, instruction, context = ctx, features = FALSE),
               class = "newrllama4_error_invalid_argument")
  server <- context_remote(tiny_server()$url)
  expect_error(embed_texts(reviews, review, instruction, context = server, features = "mean"),
               "server", class = "newrllama4_error_invalid_argument")
})

test_that("feature_layer chooses the layer of middle and mean, on three layers and an odd head size", {
  path <- file.path(tempdir(), "newrllama4-three-layers.gguf")
  testing_module()$write_tiny_model(path, seed = 3L, n_layer = 3L, head_dim = 40L, n_head = 3L, quantized = FALSE)
  ctx <- context_create(model_load(path), n_ctx = 256L, n_seq_max = 2L)
  n_embd <- ctx$model$py$n_embd
  expect_identical(n_embd, 120L)
  kept <- function(...) {
    annotate_texts(reviews, review, instruction, labels = sentiment, context = ctx, progress = FALSE,
                   features = c("last", "middle", "mean"), ...)
  }
  middle <- kept()  # the middle of three layers: layer 1
  first <- kept(feature_layer = 0)
  expect_identical(features_source(middle)$state, c("last_token", "last_token_layer_1", "text_mean_layer_1"))
  expect_identical(features_source(first)$state, c("last_token", "last_token_layer_0", "text_mean_layer_0"))
  expect_identical(manifest(first)$prompt$features, features_source(first)$state)
  expect_identical(row_features(kept(feature_layer = 1L)), row_features(middle))
  # the final state and the answers are the layer's whatever the layer kept
  expect_identical(row_features(first)[, seq_len(n_embd)], row_features(middle)[, seq_len(n_embd)])
  expect_identical(first[c(".label", ".prob_positive")], middle[c(".label", ".prob_positive")])
  expect_false(isTRUE(all.equal(row_features(first)[, -seq_len(n_embd)], row_features(middle)[, -seq_len(n_embd)])))
  embedded <- embed_texts(reviews, review, instruction, context = ctx, progress = FALSE, features = "mean",
                          feature_layer = 0)
  expect_identical(unname(row_features(embedded)[, ]), unname(row_features(first)[, 2L * n_embd + seq_len(n_embd)]))
  # the last layer's output is computed for the output rows alone; the last state reads no layer
  expect_error(kept(feature_layer = 2), "[0, 1]", fixed = TRUE, class = "newrllama4_error_invalid_argument")
  expect_error(annotate_texts(reviews, review, instruction, labels = sentiment, context = ctx, features = "last",
                              feature_layer = 0), "middle", class = "newrllama4_error_invalid_argument")
  # learn_labels() takes the kinds whatever their layer
  expect_identical(state_kinds(features_source(first)$state), c("last", "middle", "mean"))
  context_free(ctx)
})

test_that("feature sets: each kind alone and all together, or those named, with their states", {
  values <- matrix(seq_len(24), 2, 12)
  attr(values, "source") <- list(model = "tiny", state = c("last_token", "last_token_layer_3", "text_mean_layer_3"))
  sets <- feature_sets(values, TRUE)
  expect_identical(names(sets), c("last", "middle", "mean", "last + middle + mean"))
  expect_identical(as.vector(sets[["mean"]]), 9:12)
  expect_identical(as.vector(sets[["last + middle + mean"]]), 1:12)
  named <- feature_sets(values, list(c("mean", "last"), "middle", c("last", "mean")))
  expect_identical(names(named), c("last + mean", "middle"))
  expect_identical(as.vector(named[["last + mean"]]), c(1:4, 9:12))
  expect_identical(attr(named[["last + mean"]], "source"), "tiny, last_token, text_mean_layer_3")
  attr(values, "source")$state <- "last_token"
  expect_error(feature_sets(values, "middle"), "last", class = "newrllama4_error_invalid_argument")
})
