answers_with_a_failure <- function() {
  suppressWarnings(generate_parallel(tiny_context(), c(first = "hello how are you", second = "", third = "the king"),
                                     max_tokens = 4L, temperature = 0, progress = FALSE))
}

test_that("a result prints its answers with their names and one summary line", {
  out <- answers_with_a_failure()
  printed <- utils::capture.output(print(out))
  expect_equal(printed[-length(printed)], utils::capture.output(print(c(out))))
  expect_match(printed[[1]], "first.*second.*third")
  expect_match(printed[[length(printed)]], "^# 3 prompts, 1 failed \\(see generation_errors\\(\\)\\), [0-9.]+ tokens/s$")
  expect_false(any(grepl("attr|stats|prefill", printed)))
})

test_that("generation_stats() and generation_errors() read the call's stats and failures", {
  out <- answers_with_a_failure()
  expect_identical(generation_stats(out), attr(out, "stats"))
  expect_equal(generation_stats(out)$prompts, 3L)
  expect_equal(generation_errors(out)$index, 2L)
  expect_equal(generation_errors(out)$class, "newrllama4_error_empty_prompt")
  expect_error(generation_stats(out[1:2]), "plain strings", class = "newrllama4_error_invalid_argument")
  expect_error(generation_errors("x"), class = "newrllama4_error_invalid_argument")
})

test_that("subsets and combinations are plain named character vectors", {
  out <- answers_with_a_failure()
  expect_identical(out[2:3], c(second = NA_character_, third = out[["third"]]))
  expect_identical(attributes(out[1]), list(names = "first"))
  expect_identical(paste(out, "!"), paste(c(out), "!"))
  expect_identical(ifelse(is.na(out), "failed", out),
                   c(first = out[["first"]], second = "failed", third = out[["third"]]))
})

test_that("in data.frame() the answers are a plain character column", {
  out <- answers_with_a_failure()
  df <- data.frame(prompt = c("a", "b", "c"), answer = out)
  expect_identical(df$answer, unname(c(out)))
  expect_equal(rownames(df), names(out))
  expect_false(any(grepl("stats", utils::capture.output(str(df)))))
})

test_that("dplyr stores, filters and binds answers as character", {
  skip_if_not_installed("dplyr")
  ctx <- tiny_context()
  generate_for <- function(text) generate_parallel(ctx, text, max_tokens = 3L, temperature = 0, progress = FALSE)
  first <- dplyr::mutate(data.frame(text = c("hello", "once upon")), answer = generate_for(text))
  second <- dplyr::mutate(data.frame(text = "the king"), answer = generate_for(text))
  expect_type(first$answer, "character")
  expect_identical(c(first$answer), c(generate_for(c("hello", "once upon"))))
  both <- dplyr::bind_rows(first, second)
  expect_identical(both$answer, c(first$answer, second$answer))
  expect_identical(dplyr::filter(both, text == "the king")$answer, c(second$answer))
  grouped <- dplyr::mutate(dplyr::group_by(both, text), answer = generate_for(text))
  expect_identical(grouped$answer, both$answer)
})
