# Printed objects go to standard output, as print methods do: a report knitted with
# message = FALSE keeps them, and capture.output() catches them.

printed <- function(x) {
  out <- utils::capture.output(messages <- cli::cli_fmt(print(x)))
  expect_length(messages, 0)  # nothing through the message stream
  paste(out, collapse = "\n")
}

test_that("a model, a context, answers and a manifest print to standard output alone", {
  ctx <- tiny_context()
  expect_match(printed(tiny_model()), "newrllama4-tiny.gguf")
  expect_match(printed(ctx), "n_seq_max: 4")
  answers <- generate_parallel(ctx, c(a = "hello how are you"), max_tokens = 2L, temperature = 0, progress = FALSE)
  expect_match(printed(answers), "# 1 prompt, 0 failed")
  record <- manifest(answers)
  expect_match(printed(record), record$model$sha256, fixed = TRUE)
  freed <- tiny_context()
  context_free(freed)
  expect_match(printed(freed), "(freed)", fixed = TRUE)
})

test_that("agreement tables print to standard output alone", {
  truth <- c("a", "b", "a", "b")
  expect_match(printed(agreement(c("a", "b", "b", "b"), truth, n_boot = 0)), "Accuracy")
  expect_match(printed(agreement(list(x = c("a", "b", "b", "b"), y = truth), truth, n_boot = 0)), "Between annotators")
})

test_that("a report knitted with message = FALSE shows the context, the answers and the manifest, either lane", {
  skip_if_not(rmarkdown::pandoc_available(), "pandoc is not installed")
  report <- tempfile("report-", fileext = ".Rmd")
  writeLines(c(
    "```{r setup, include = FALSE}",
    "knitr::opts_chunk$set(message = FALSE, warning = FALSE)",
    "library(newrllama4)",
    "```",
    "```{r}",
    sprintf("model <- model_load(%s)", deparse(tiny_model_path())),
    "ctx <- context_create(model, n_ctx = 128L, n_seq_max = 2L)",
    "model",
    "ctx",
    "answers <- generate_parallel(ctx, c(a = 'hello how are you', b = 'once upon'), max_tokens = 2L, temperature = 0)",
    "answers",
    "manifest(answers)",
    "fast <- context_create(model, n_ctx = 128L, n_seq_max = 2L, batch_invariant = FALSE)",
    "fast",
    "generate_parallel(fast, c(c = 'the river', d = 'a king'), max_tokens = 2L, temperature = 0)",
    "```"
  ), report)
  output <- rmarkdown::render(report, output_format = rmarkdown::md_document(), output_dir = tempdir(),
                              quiet = TRUE, envir = new.env())
  text <- paste(readLines(output), collapse = "\n")
  expect_match(text, "newrllama4_model")
  expect_match(text, "n_seq_max: 2")
  expect_match(text, "# 2 prompts, 0 failed")
  expect_match(text, "fast lane: answers may depend on the batch\n.*runs in worker process [0-9]+")
  expect_identical(lengths(regmatches(text, gregexpr("# 2 prompts, 0 failed", text))), 2L)
  expect_match(text, reticulate::import("newrllama4.sources")$file_sha256(tiny_model_path()), fixed = TRUE)
  expect_false(grepl("Generating", text))  # no progress bar in a report
})

test_that("sizes and counts read as people write them", {
  expect_identical(format_bytes(1234567), "1.2 MB")
  expect_identical(format_bytes(3e9), "3 GB")
  expect_identical(format_bytes(512), "512 B")
  expect_identical(format_count(1234567), "1,234,567")
  expect_identical(format_count(2^40), "1,099,511,627,776")
})

test_that("a line wider than the console wraps at its spaces, past its indent and bullet", {
  long <- c("short", paste(cli::symbol$bullet, "estimator:", strrep("word ", 30)),
            paste("    -> fix it", strrep("by doing ", 12)))
  wrapped <- within_width(long, width = 40)
  expect_identical(wrapped[[1]], "short")
  expect_true(all(cli::ansi_nchar(wrapped, type = "width") <= 40))
  # every word kept, in order
  expect_identical(strsplit(paste(wrapped, collapse = " "), " +")[[1]], strsplit(paste(long, collapse = " "), " +")[[1]])
  expect_true(all(startsWith(wrapped[3:5], "  word")))
  expect_true(startsWith(wrapped[[length(wrapped)]], "       "))
})

# `expr`'s value, what it prints while made left out.
quietly_made <- function(expr) {
  utils::capture.output(value <- expr)
  value
}

test_that("print methods keep within the console's width", {
  data <- simulated_labels(400, 1)
  coded <- review_sample(data, 80, weight = "confidence", seed = 1)
  rows <- learnable_rows(300, dim = 5)
  objects <- list(
    design = attr(coded, "design"),
    agreement = agreement(data$.label, data$truth, n_boot = 20, seed = 1),
    agreements = agreement(list(model = data$.label, another_annotator = rev(data$.label)), data$truth, n_boot = 20,
                           seed = 1),
    passage_options = passage_options(size = 100),
    manifest = manifest(label_regression(yes ~ x, data, coded, truth, seed = 1)),
    learning_curve = learning_curve(rows$data, review_sample(rows$data, 60, weight = "uniform", seed = 1), gold,
                                    sizes = c(40, 60, 200), features = rows$x, draws = 1, seed = 1),
    sitrep = quietly_made(newrllama4_sitrep())
  )
  for (width in c(60, 80)) {
    withr::local_options(width = width)
    for (name in names(objects)) {
      lines <- utils::capture.output(print(objects[[name]]))
      # a word longer than the width (a path under R CMD check's folders) stands alone on its line
      over <- lines[cli::ansi_nchar(lines, type = "width") > width]
      expect_false(any(grepl("\\S\\s+\\S", trimws(cli::ansi_strip(over)))),
                   label = sprintf("%s at width %d: %s", name, width, paste(over, collapse = " | ")))
    }
  }
})
