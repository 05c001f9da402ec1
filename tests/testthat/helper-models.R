# The tiny random-weight model is written once per test run by the engine's own
# test helper.
test_models <- new.env(parent = emptyenv())

# Where the engine is missing (CRAN's and r-universe's machines) the tests that
# need it skip, and the others (argument checks, agreement(), printing) run.
# make test counts a skip as a failure, so with the engine nothing skips unseen.
skip_without_engine <- function() {
  if (is.null(test_models$engine)) test_models$engine <- engine_available()
  testthat::skip_if_not(test_models$engine, "the Python engine is not installed (see install_newrllama4())")
}

# The engine's test helpers (stand-in servers, stores, tiny models).
testing_module <- function() {
  skip_without_engine()
  reticulate::import("newrllama4.testing")
}

tiny_model_path <- function() {
  skip_without_engine()
  if (is.null(test_models$path)) {
    path <- file.path(tempdir(), "newrllama4-tiny.gguf")
    testing_module()$write_tiny_model(path)
    test_models$path <- path
  }
  test_models$path
}

tiny_model <- function() {
  if (is.null(test_models$model)) test_models$model <- model_load(tiny_model_path())
  test_models$model
}

tiny_context <- function(n_seq_max = 4L, n_ctx = 256L) {
  context_create(tiny_model(), n_ctx = n_ctx, n_seq_max = n_seq_max)
}

# Deterministic prompts of 1 to 40 words, without touching the session's RNG.
prompts_of_mixed_length <- function(n) {
  words <- c("the", "of", "and", "hello", "how", "are", "you", "once", "upon", "a", "time", "king", "river")
  vapply(seq_len(n), function(i) {
    k <- seq_len((i * 13) %% 40 + 1)
    paste(words[(i * 7 + k * 3) %% length(words) + 1], collapse = " ")
  }, "")
}

# An OpenAI-compatible server of the tiny model (llama-cpp-python's, which the
# engine's test extra installs), started once per test run; it ends with R.
tiny_server <- function() {
  if (is.null(test_models$server)) test_models$server <- new_tiny_server()
  test_models$server
}

# A server of its own, for a test that stops it.
new_tiny_server <- function() {
  skip_without_engine()
  testing_module()$ModelServer(tiny_model_path())
}

# llama.cpp's own llama-server of the tiny model (the one make setup-test builds),
# serving embeddings pooled by the last token; started once per test run, it ends
# with R.
tiny_embedding_server <- function() {
  if (is.null(test_models$embedding_server)) {
    test_models$embedding_server <- testing_module()$LlamaCppServer(tiny_model_path(), pooling = "last",
                                                                    n_parallel = 2L)
  }
  test_models$embedding_server
}
