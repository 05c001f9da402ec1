test_that("a new file is in WAL mode and records the sample, the task and which texts two coders code", {
  fixture <- coding_fixture(n = 6, overlap = 0.5)
  mode <- with_store(fixture$file, function(con) DBI::dbGetQuery(con, "PRAGMA journal_mode")[[1]])
  expect_identical(mode, "wal")
  stored <- store_meta(fixture$file)
  expect_identical(stored$texts, fixture$sample$text)
  expect_identical(stored$task$labels$label, list("yes", "no"))
  expect_length(stored$double, 3)
  expect_identical(stored$seed, 1L)
})

test_that("a file of another sample or task, or no coding file at all, is refused with a classed error", {
  fixture <- coding_fixture(n = 6)
  other <- fixture$sample[1:5, ]
  err <- expect_error(coding_app(other, fixture$file, labels = c("yes", "no")), class = "newrllama4_error_coding_file")
  expect_identical(err$mismatch, "sample")
  err <- expect_error(coding_app(fixture$sample, fixture$file, labels = c("yes", "maybe")),
                      class = "newrllama4_error_coding_file")
  expect_identical(err$mismatch, "task")
  expect_s3_class(err, "newrllama4_error_invalid_argument")
  # reworded descriptions are the same task
  expect_s3_class(coding_app(fixture$sample, fixture$file, labels = c(yes = "Says yes", no = "Says no")),
                  "shiny.appobj")
  cache <- withr::local_tempfile(fileext = ".sqlite")
  with_store(cache, function(con) DBI::dbExecute(con, "CREATE TABLE answers (key TEXT)"))
  expect_error(coding_app(fixture$sample, cache, labels = c("yes", "no")), class = "newrllama4_error_coding_file")
  expect_error(read_codes(withr::local_tempfile()), class = "newrllama4_error_coding_file")
})

test_that("each coder's order is seeded by the file and their name, recorded, and the same on return", {
  fixture <- coding_fixture(n = 12)
  ana <- store_coder(fixture$file, "ana", 12, 1L)
  expect_identical(store_coder(fixture$file, "ana", 12, 1L), ana)
  expect_setequal(ana$order, 1:12)
  expect_false(identical(store_coder(fixture$file, "ben", 12, 1L)$order, ana$order))
})

test_that("codes are appended and the latest counts; texts go to one coder, the overlap's to two", {
  fixture <- coding_fixture(n = 4, overlap = 0.5)
  file <- fixture$file
  double <- store_meta(file)$double
  single <- setdiff(1:4, double)
  store_write(file, single[1], "ana", list(code = "yes"))
  store_write(file, single[1], "ana", list(code = "no"), note = "changed my mind")
  store_write(file, double[1], "ana", list(code = "yes"))
  codes <- store_codes(file)
  expect_identical(nrow(codes), 2L)
  expect_identical(codes$value[codes$unit == single[1]], '{"code":"no"}')
  store_claim(file, "ana", single[2])
  available <- available_units(1:4, "ben", store_codes(file), store_claims(file), double)
  expect_setequal(available, double)  # single[1] coded by ana, single[2] on her screen
  store_write(file, double[1], "ben", list(code = "no"))
  store_write(file, double[2], "ben", NULL, uncodable = TRUE, reason = "cut off")
  store_write(file, double[2], "ana", list(code = "no"))
  expect_identical(disagreements(store_codes(file)), sort(double))
  store_write(file, double[1], "eve", list(code = "yes"), role = "adjudication")
  expect_identical(disagreements(store_codes(file)), double[2])
  expect_length(available_units(1:4, "cal", store_codes(file), store_claims(file), double), 0)
})

test_that("two R processes writing to one file at once lose nothing", {
  fixture <- coding_fixture(n = 4)
  done <- withr::local_tempfile()
  script <- withr::local_tempfile(fileext = ".R")
  # the store's own functions, in a second R process
  writeLines(c(
    paste("with_store <-", paste(deparse(with_store), collapse = "\n")),
    paste("store_write <-", paste(deparse(store_write), collapse = "\n")),
    sprintf("for (i in 1:60) store_write(%s, 1 + i %%%% 4, 'other', list(code = 'yes'))", deparse(fixture$file)),
    sprintf("file.create(%s)", deparse(done))
  ), script)
  system2(file.path(R.home("bin"), "Rscript"), shQuote(script), wait = FALSE, stdout = FALSE, stderr = FALSE)
  for (i in 1:60) store_write(fixture$file, 1 + i %% 4, "here", list(code = "no"))
  deadline <- Sys.time() + 60
  while (!file.exists(done) && Sys.time() < deadline) Sys.sleep(0.1)
  n <- with_store(fixture$file, function(con) DBI::dbGetQuery(con, "SELECT coder, count(*) AS n FROM codes GROUP BY coder"))
  expect_identical(n$n[order(n$coder)], c(60L, 60L))
})
