test_that("product_reviews holds 400 short ASCII reviews with the truth they were written with", {
  expect_identical(dim(product_reviews), c(400L, 5L))
  expect_identical(names(product_reviews), c("id", "channel", "product", "review", "truth"))
  expect_identical(levels(product_reviews$truth), c("positive", "negative"))
  expect_identical(levels(product_reviews$channel), c("shop", "online"))
  expect_false(any(grepl("[^ -~]", product_reviews$review)))
  # online buyers complain more often, as the documentation says
  shares <- tapply(product_reviews$truth == "negative", product_reviews$channel, mean)
  expect_gt(shares[["online"]], shares[["shop"]] + 0.3)
})

test_that("data-raw/product_reviews.R makes the data set as shipped", {
  script <- test_path("..", "..", "data-raw", "product_reviews.R")
  skip_if_not(file.exists(script), "the package's sources are not here")
  script <- normalizePath(script)
  dir <- withr::local_tempdir()
  dir.create(file.path(dir, "data"))
  withr::with_preserve_seed(withr::with_dir(dir, source(script, local = new.env())))
  made <- new.env()
  load(file.path(dir, "data", "product_reviews.rda"), envir = made)
  expect_identical(made$product_reviews, product_reviews)
})
