test_that("a new coding file is readable by its owner only", {
  skip_on_os("windows")
  umask <- Sys.umask()
  fixture <- coding_fixture(n = 2)
  expect_identical(format(file.mode(fixture$file)), "600")
  # the WAL beside it, while a connection has it open, too
  wal <- with_store(fixture$file, function(con) {
    DBI::dbExecute(con, "DELETE FROM claims")
    file.mode(paste0(fixture$file, "-wal"))
  })
  expect_identical(format(wal), "600")
  expect_identical(Sys.umask(), umask)
})

test_that("a click's nonce is written once; a file from before nonces gets their column", {
  fixture <- coding_fixture(n = 2)
  expect_true(store_write(fixture$file, 1, "ana", list(code = "yes"), nonce = "n1"))
  expect_false(store_write(fixture$file, 1, "ana", list(code = "no"), nonce = "n1"))
  expect_true(store_write(fixture$file, 1, "ana", list(code = "no")))
  expect_true(store_write(fixture$file, 2, "ana", list(code = "no")))
  expect_identical(store_history(fixture$file)$nonce, c("n1", NA, NA))
  with_store(fixture$file, function(con) {
    DBI::dbExecute(con, "DROP INDEX codes_nonce")
    DBI::dbExecute(con, "ALTER TABLE codes DROP COLUMN nonce")
  })
  coding_app(fixture$sample, fixture$file, labels = c("yes", "no"))
  expect_identical(store_history(fixture$file)$nonce, rep(NA_character_, 3))
  expect_true(store_write(fixture$file, 2, "ben", list(code = "no"), nonce = "n1"))
  expect_false(store_write(fixture$file, 2, "ben", list(code = "no"), nonce = "n1"))
})

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

test_that("the sample is plain tables that any SQLite client reads, and comes back as it was", {
  sample <- data.frame(text = c("Great film.", "Dull.", "Fine, I suppose."), .label = factor(c("yes", "no", NA)),
                       score = c(0.25, NA, 1e-7), n = c(1L, 2L, NA), kept = c(TRUE, NA, FALSE),
                       day = as.Date(c("2026-01-02", NA, "2025-12-31")), check.names = FALSE)
  sample$at <- as.POSIXct(c("2026-01-02 10:11:12", "2026-01-03 00:00:00", NA), tz = "Europe/Paris")
  sample$words <- list(c("great", "film"), "dull", c(1.5, NA))
  file <- withr::local_tempfile(fileext = ".sqlite")
  coding_app(sample, file, labels = c("yes", "no"), seed = 1)
  con <- DBI::dbConnect(RSQLite::SQLite(), file)
  withr::defer(DBI::dbDisconnect(con))
  expect_identical(DBI::dbGetQuery(con, "SELECT text FROM texts ORDER BY unit")$text, sample$text)
  plain <- DBI::dbGetQuery(con, "SELECT * FROM sample ORDER BY rowid")
  expect_identical(plain$.label, c("yes", "no", NA))
  expect_identical(plain$day, c("2026-01-02", NA, "2025-12-31"))
  expect_identical(plain$at[[1]], "2026-01-02T09:11:12.000000Z")
  expect_identical(DBI::dbGetQuery(con, "SELECT count(*) AS n FROM meta WHERE key = 'sample'")$n, 0L)
  stored <- store_meta(file)
  expect_identical(stored$sample[names(sample)], sample)
  expect_identical(stored$sample$.row, 1:3)
})

test_that("a file of the serialized layout is never unserialized: refused, or upgraded with its own sample", {
  fixture <- coding_fixture(n = 4, overlap = 0.5)
  store_write(fixture$file, 2, "ana", list(code = "no"))
  # the layout of before: no sample tables, the sample as serialize()d bytes (here ones that unserialize() rejects)
  with_store(fixture$file, function(con) {
    DBI::dbExecute(con, "DROP TABLE sample")
    DBI::dbExecute(con, "DROP TABLE texts")
    DBI::dbExecute(con, "DELETE FROM meta WHERE key = 'sample_columns'")
    DBI::dbExecute(con, "UPDATE meta SET value = 'newrllama4 coding file 1' WHERE key = 'format'")
    DBI::dbExecute(con, "INSERT INTO meta VALUES ('sample', 'bm90IFIgZGF0YQ==')")
    # and claims one per coder, not per session
    DBI::dbExecute(con, "DROP TABLE claims")
    DBI::dbExecute(con, "CREATE TABLE claims (coder TEXT PRIMARY KEY, unit INTEGER NOT NULL, time REAL NOT NULL)")
  })
  err <- expect_error(read_codes(fixture$file), class = "newrllama4_error_coding_file")
  expect_identical(err$mismatch, "layout")
  expect_match(conditionMessage(err), "Open it once with")
  expect_error(coding_app(fixture$sample[1:3, ], fixture$file, labels = c("yes", "no")),
               class = "newrllama4_error_coding_file")
  expect_error(read_codes(fixture$file), class = "newrllama4_error_coding_file")
  coding_app(fixture$sample, fixture$file, labels = c("yes", "no"))
  codes <- read_codes(fixture$file)
  expect_identical(codes$text, fixture$sample$text)
  expect_identical(as.character(codes$code), c(NA, "no", NA, NA))
  expect_identical(store_claim_next(fixture$file, "ana", "tab", 1:4, integer(), function(units) units[[1]])$unit, 1L)
  expect_identical(with_store(fixture$file, function(con) DBI::dbGetQuery(con, "SELECT value FROM meta WHERE key = 'sample'")),
                   data.frame(value = character()))
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
  store_claim(file, "ana", "ana's tab", single[2])
  available <- available_units(1:4, "ben", store_codes(file), store_claims(file), double)
  expect_setequal(available, double)  # single[1] coded by ana, single[2] on her screen
  store_write(file, double[1], "ben", list(code = "no"))
  store_write(file, double[2], "ben", NULL, uncodable = TRUE, reason = "cut off")
  store_write(file, double[2], "ana", list(code = "no"))
  expect_identical(disagreements(store_codes(file), store_meta(file)$task), sort(double))
  store_write(file, double[1], "eve", list(code = "yes"), role = "adjudication")
  expect_identical(disagreements(store_codes(file), store_meta(file)$task), double[2])
  expect_length(available_units(1:4, "cal", store_codes(file), store_claims(file), double), 0)
})

test_that("two R processes writing to one file at once lose nothing", {
  fixture <- coding_fixture(n = 4)
  wait <- store_process(sprintf("for (i in 1:60) store_write(%s, 1 + i %%%% 4, 'other', list(code = 'yes'))",
                                deparse(fixture$file)))
  for (i in 1:60) store_write(fixture$file, 1 + i %% 4, "here", list(code = "no"))
  expect_true(wait())
  n <- with_store(fixture$file, function(con) DBI::dbGetQuery(con, "SELECT coder, count(*) AS n FROM codes GROUP BY coder"))
  expect_identical(n$n[order(n$coder)], c(60L, 60L))
})

test_that("two R processes claiming texts from one file never get the same single-coded text", {
  fixture <- coding_fixture(n = 40, overlap = 0)
  go <- withr::local_tempfile()
  # both start together and take the texts in the same order, slowly, so that
  # each claim races the other's (without one transaction, texts were handed
  # out twice here in each run)
  claim_all <- function(coder) {
    sprintf("while (!file.exists(%s)) Sys.sleep(0.01)
    repeat {
      claimed <- store_claim_next(%s, '%s', '%s', 1:40, integer(), function(units) {
        Sys.sleep(0.02)
        if (length(units) > 0) units[[1]]
      })
      if (is.null(claimed$unit)) break
      store_write(%s, claimed$unit, '%s', list(code = 'yes'))
    }", deparse(go), deparse(fixture$file), coder, coder, deparse(fixture$file), coder)
  }
  wait <- store_process(c(claim_all("other")))
  Sys.sleep(1)
  file.create(go)
  eval(parse(text = claim_all("here")))
  expect_true(wait())
  coded <- store_codes(fixture$file)
  expect_setequal(coded$unit, 1:40)
  expect_identical(anyDuplicated(coded$unit), 0L)
  expect_gt(min(table(coded$coder)), 0)
})

test_that("a claim is its session's: released when that session ends, not the coder's other sessions", {
  fixture <- coding_fixture(n = 3, overlap = 0)
  first <- function(units) units[[1]]
  expect_identical(store_claim_next(fixture$file, "ana", "ana's tab 1", 1:3, integer(), first)$unit, 1L)
  expect_identical(store_claim_next(fixture$file, "ben", "ben's tab", 1:3, integer(), first)$unit, 2L)
  store_claim(fixture$file, "ana", "ana's tab 2", 3)
  store_release(fixture$file, "ana's tab 2")
  expect_identical(store_claims(fixture$file)[c("coder", "unit")], data.frame(coder = c("ana", "ben"), unit = 1:2))
  store_release(fixture$file, "ana's tab 1")
  expect_identical(store_claims(fixture$file)$coder, "ben")
})

test_that("a name given again with other spaces, case or accents is the same person, as first given", {
  fixture <- coding_fixture(n = 2)
  expect_identical(store_person(fixture$file, "  Ana   María "), "Ana María")
  store_coder(fixture$file, "Ana María", 2, 1L)
  expect_identical(store_person(fixture$file, "ana maria"), "Ana María")
  expect_identical(store_person(fixture$file, "ANA  MARÍA"), "Ana María")
  store_write(fixture$file, 1, "Zoë", list(code = "yes"), role = "adjudication")
  expect_identical(store_person(fixture$file, "zoe"), "Zoë")
  expect_identical(store_person(fixture$file, "Anna Maria"), "Anna Maria")
})

test_that("coders who differ only in a free-text field agree; in any other field they disagree", {
  sample <- data.frame(text = c("a", "b", "c"))
  file <- withr::local_tempfile(fileext = ".sqlite")
  coding_app(sample, file, schema = list(stance = c("for", "against"), n = "integer", gist = "string"),
             overlap = 1, seed = 1)
  store_write(file, 1, "ana", list(stance = "for", n = 2, gist = "buses"))
  store_write(file, 1, "ben", list(stance = "for", n = 2, gist = "the bus lanes"))
  store_write(file, 2, "ana", list(stance = "for", n = 2, gist = "buses"))
  store_write(file, 2, "ben", list(stance = "for", n = 3, gist = "buses"))
  store_write(file, 3, "ana", list(stance = "for", n = NULL, gist = NULL))
  store_write(file, 3, "ben", list(stance = "against", n = NULL, gist = NULL))
  expect_identical(disagreements(store_codes(file), store_meta(file)$task), 2:3)
  expect_warning(codes <- read_codes(file, disagreements = "missing"), class = "newrllama4_warning_disagreements_missing")
  expect_identical(codes$.status, c("coded", "disagreement", "disagreement"))
  expect_identical(as.character(codes$stance), c("for", NA, NA))
  # split, each coder's codes a row: the field they agree on agrees
  expect_identical(read_codes(file)$stance, factor(c("for", "for", "for", "for", "against"), c("for", "against")))
})
