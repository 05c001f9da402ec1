# The README's example, run as written, so that it cannot drift from the API:
# its code block and the output block after it. The README is in the checkout
# only (R CMD build leaves it out), so these tests skip in R CMD check.
readme_example <- function() {
  path <- test_path("..", "..", "README.md")
  skip_if_not(file.exists(path), "the README is not here (only a checkout has it)")
  lines <- readLines(path)
  fences <- grep("^```", lines)
  start <- grep("^## From texts to a corrected estimate", lines)
  code <- fences[fences > start][1:2]
  output <- fences[fences > code[2]][1:2]
  list(code = lines[(code[1] + 1):(code[2] - 1)], output = lines[(output[1] + 1):(output[2] - 1)],
       language = lines[code[1]])
}

# Numbers masked: the printout's shape, whatever the numbers of this machine's run.
shape <- function(lines) gsub("-?[0-9][0-9.e+-]*", "#", trimws(lines))

test_that("the README's example uses exported functions only, on the package's own data, and ends in the fit", {
  example <- readme_example()
  expect_identical(example$language, "```r")
  expect_false(any(grepl(":::", example$code, fixed = TRUE)))
  expect_lte(length(example$code), 20)
  expect_identical(example$code[[1]], "library(newrllama4)")
  expect_identical(utils::tail(example$code, 1), "fit")
  calls <- unique(all.names(parse(text = example$code)))
  ours <- getNamespaceExports("newrllama4")
  expect_true(all(c("annotate_texts", "review_sample", "write_codes", "read_codes", "label_regression") %in% calls))
  expect_true("product_reviews" %in% calls)
  expect_false(any(grepl("OUTPUT", example$output)))
  expect_true(all(intersect(calls, ls(asNamespace("newrllama4"))) %in% c(ours, "product_reviews")))
})

test_that("the README's example runs as written on the embedded model and ends in a corrected estimate with its interval", {
  skip_without_engine()
  skip_if_not_installed("RSQLite")
  skip_if_not_installed("shiny")
  example <- readme_example()
  env <- new.env(parent = globalenv())
  printed <- withr::with_dir(withr::local_tempdir(), utils::capture.output(
    source(exprs = parse(text = example$code), local = env, print.eval = TRUE)
  ))
  fit <- env$fit
  expect_s3_class(fit, "newrllama4_label_regression")
  interval <- confint(fit)["channelonline", ]
  expect_true(all(is.finite(interval)) && interval[[1]] < interval[[2]])
  # the README shows what the example prints, in shape (the numbers are this machine's run)
  expect_identical(shape(printed), shape(example$output))
})
