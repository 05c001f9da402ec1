# The server through shiny::testServer(): the clicks that coding.js sends.

test_that("a coder names themselves, codes, goes back, skips and marks a text uncodable; all is written at once", {
  fixture <- coding_fixture(n = 4, overlap = 0)
  shiny::testServer(fixture$app, {
    session$flushReact()
    expect_match(as.character(screen()), "Your name")
    start_as(session, "  ")
    expect_match(as.character(screen()), "Please give a name")
    start_as(session, "ana")
    expect_match(as.character(screen()), "1 of 4")
    first <- state$unit
    click(session, "code", value = list(code = "yes"))
    expect_identical(store_codes(fixture$file)$unit, first)
    expect_match(as.character(screen()), "2 of 4")
    click(session, "back")
    expect_identical(state$unit, first)
    expect_match(as.character(screen()), "nl-chosen\" data-value=\"yes\"")
    click(session, "code", value = list(code = "no"))
    expect_match(as.character(screen()), "2 of 4")
    second <- state$unit
    click(session, "skip")
    expect_false(identical(state$unit, second))
    expect_message(click(session, "uncodable", reason = ""), "Choose why")
    expect_match(state$problem, "Not saved: Choose why")
    click(session, "uncodable", reason = "other", other = "  blank ")
    # a click on a text no longer on screen changes nothing
    session$setInputs(nl_event = list(type = "code", unit = first, value = list(code = "yes"), nonce = 1))
    codes <- store_codes(fixture$file)
    expect_identical(codes$value[codes$unit == first], '{"code":"no"}')
    expect_identical(codes$reason[codes$uncodable == 1], "other: blank")
    expect_message(click(session, "code", value = list(code = "bogus")), "not one of the codebook")
    expect_identical(nrow(store_codes(fixture$file)), 2L)
    expect_match(state$problem, "Not saved: Its label is not one of the codebook")
    click(session, "code", value = list(code = "yes"))
    expect_identical(state$unit, second)  # the skipped text comes back last
    click(session, "code", value = list(code = "yes"))
    expect_match(as.character(screen()), "Done, thank you")
    expect_true(all(store_codes(fixture$file)$seconds >= 0))
  })
})

test_that("blind: the page never holds the model's answer or other coders' codes", {
  fixture <- coding_fixture(n = 2, overlap = 1)
  store_write(fixture$file, 1, "ana", list(code = "no"), note = "ana's private note")
  store_write(fixture$file, 2, "ana", list(code = "no"), note = "ana's private note")
  shiny::testServer(fixture$app, {
    start_as(session, "ben")
    html <- as.character(screen())
    expect_no_match(html, "0.876543|87%|private|ana", perl = TRUE)
    expect_match(html, "1 of 2")
  })
  seen <- coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), blind = FALSE)
  shiny::testServer(seen, {
    start_as(session, "cal")
    expect_match(as.character(screen()), "The model says: (yes|no) \\(88% sure\\)")
  })
})

test_that("adjudication shows both codes, blind to who coded them unless asked, and records a third decision", {
  fixture <- coding_fixture(n = 2, overlap = 1)
  store_write(fixture$file, 1, "ana", list(code = "no"))
  store_write(fixture$file, 1, "ben", list(code = "yes"), note = "close call")
  store_write(fixture$file, 2, "ana", list(code = "no"))
  store_write(fixture$file, 2, "ben", list(code = "no"))
  seen <- coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), blind_adjudication = FALSE)
  shiny::testServer(seen, {
    start_as(session, "eve", adjudicate = TRUE)
    expect_match(as.character(screen()), "<strong>ana:</strong>\\s*code: no")
  })
  shiny::testServer(fixture$app, {
    start_as(session, "eve", adjudicate = TRUE)
    html <- as.character(screen())
    expect_match(html, "1 disagreement")
    expect_match(html, "<strong>Coder 1:</strong>\\s*code: no")
    expect_match(html, "<strong>Coder 2:</strong>\\s*code: yes")
    expect_no_match(html, "ana|ben")
    expect_match(html, "close call", fixed = TRUE)
    click(session, "code", value = list(code = "yes"))
    expect_match(as.character(screen()), "Nothing to adjudicate")
  })
  codes <- read_codes(fixture$file)
  expect_identical(codes$.status, c("adjudicated", "coded"))
  expect_identical(as.character(codes$code), c("yes", "no"))
})

test_that("fields of a schema are written in the task's order, typed", {
  skip_if_not_installed("RSQLite")
  file <- withr::local_tempfile(fileext = ".sqlite")
  app <- coding_app(data.frame(text = "a"), file, schema = list(n = "integer", urgent = "boolean"))
  shiny::testServer(app, {
    start_as(session, "ana")
    click(session, "code", value = list(urgent = TRUE, n = 3, extra = "dropped"))
  })
  expect_identical(store_codes(file)$value, '{"n":3,"urgent":true}')
})

test_that("a name given again differently is the same coder, and a coder who leaves holds no text back", {
  fixture <- coding_fixture(n = 4, overlap = 0)
  shiny::testServer(fixture$app, {
    start_as(session, " Ána ")
    click(session, "code", value = list(code = "yes"))
    expect_identical(store_claims(fixture$file)$coder, "Ána")
  })
  expect_identical(nrow(store_claims(fixture$file)), 0L)
  shiny::testServer(fixture$app, {
    start_as(session, "ana")
    expect_match(as.character(screen()), "Coder: Ána")
    expect_match(as.character(screen()), "2 of 4")
  })
})
test_that("closing one of a coder's two tabs releases that tab's text only", {
  fixture <- coding_fixture(n = 3, overlap = 0)
  # Ana's first tab, open throughout (testServer() runs one session at a time), holds text 2
  store_claim(fixture$file, "ana", "ana's first tab", 2)
  shiny::testServer(fixture$app, {
    start_as(session, "ana")
    click(session, "code", value = list(code = "yes"))
    expect_identical(nrow(store_claims(fixture$file)), 2L)
  })
  expect_identical(store_claims(fixture$file)[c("coder", "unit")], data.frame(coder = "ana", unit = 2L))
  shiny::testServer(fixture$app, {
    start_as(session, "ben")
    expect_false(identical(state$unit, 2L))
  })
})

test_that("a click sent again after a reconnect is written once: not dropped, not twice", {
  fixture <- coding_fixture(n = 3, overlap = 0)
  store_write(fixture$file, 3, "ben", list(code = "no"))
  shiny::testServer(fixture$app, {
    start_as(session, "ana")
    first <- state$unit
    code <- list(type = "code", unit = first, value = list(code = "yes"), note = "", nonce = "a1")
    session$setInputs(nl_event = code)
    expect_match(as.character(screen()), "Saved: text")
    # the page lost the answer and sends the click again, on the next text's screen: the file holds its nonce
    session$setInputs(nl_event = c(code, resent = TRUE))
    expect_identical(nrow(store_history(fixture$file)), 2L)
    # a click made while the connection was down, for a text she coded before: written, once
    again <- list(type = "code", unit = first, value = list(code = "no"), note = "", nonce = "a2", resent = TRUE)
    session$setInputs(nl_event = again)
    session$setInputs(nl_event = again)
    # sent again, but for Ben's text, or not marked as sent again: stale
    session$setInputs(nl_event = utils::modifyList(again, list(unit = 3L, nonce = "a3")))
    session$setInputs(nl_event = utils::modifyList(again, list(resent = NULL, nonce = "a4")))
  })
  history <- store_history(fixture$file)
  expect_identical(history$nonce, c(NA, "a1", "a2"))
  expect_identical(history$value[history$coder == "ana"], c('{"code":"yes"}', '{"code":"no"}'))
})

test_that("a text on screen stays claimed however long it stays there, and no longer than its page", {
  fixture <- coding_fixture(n = 2, overlap = 0)
  shiny::testServer(fixture$app, {
    start_as(session, "ana")
    held <- state$unit
    # expired, unless the open page renews it
    renewed <- function() {
      expect_identical(nrow(store_claims(fixture$file)), 0L)
      session$elapse(claim_refresh_seconds * 1000)
      expect_identical(store_claims(fixture$file)$unit, held)
    }
    # the claim as the clock would leave it 31 minutes on
    with_store(fixture$file, function(con) DBI::dbExecute(con, "UPDATE claims SET time = time - 1860"))
    renewed()
    # the clock itself moved on, by the option the browser suite moves it with
    withr::with_options(list(newrllama4.coding_clock = function() Sys.time() + claim_seconds + 60), renewed())
  })
  expect_identical(nrow(store_claims(fixture$file)), 0L)
})

test_that("a page put in the back-forward cache lets its text go, and claims it again when shown", {
  fixture <- coding_fixture(n = 2, overlap = 0)
  shiny::testServer(fixture$app, {
    start_as(session, "ana")
    held <- state$unit
    click(session, "release")
    expect_identical(nrow(store_claims(fixture$file)), 0L)
    # nor does the minute's renewal claim it again while the page is away
    session$elapse(claim_refresh_seconds * 1000)
    expect_identical(nrow(store_claims(fixture$file)), 0L)
    click(session, "resume")
    expect_identical(store_claims(fixture$file)$unit, held)
    expect_identical(state$unit, held)
    expect_identical(nrow(store_codes(fixture$file)), 0L)
  })
})

test_that("a coder's second tab gets another text, or is told the last one is open in the first", {
  fixture <- coding_fixture(n = 2, overlap = 0)
  first <- store_coder(fixture$file, "ana", 2, store_meta(fixture$file)$seed)$order[[1]]
  store_claim(fixture$file, "ana", "ana's first tab", first)
  shiny::testServer(fixture$app, {
    start_as(session, "ana")
    expect_false(identical(state$unit, first))
    expect_match(as.character(screen()), "1 of 2")
    click(session, "code", value = list(code = "yes"))
    expect_match(as.character(screen()), "Open in another tab")
    expect_no_match(as.character(screen()), "Done")
  })
  expect_identical(nrow(store_codes(fixture$file)), 1L)
  # a claim not renewed for minutes is no open tab (its app was killed): the text is this tab's
  with_store(fixture$file, function(con) DBI::dbExecute(con, "UPDATE claims SET time = time - ?",
                                                        params = list(3 * claim_refresh_seconds)))
  shiny::testServer(fixture$app, {
    start_as(session, "ana")
    expect_identical(state$unit, first)
  })
})

test_that("a code that cannot be written stays on screen with the reason, and is written on the next try", {
  fixture <- coding_fixture(n = 3, overlap = 0)
  # the browser suite makes the file itself read-only; here the write fails as SQLite's would
  writable <- store_write
  local_package_binding("store_write", function(...) stop("attempt to write a readonly database"))
  shiny::testServer(fixture$app, {
    start_as(session, "ana")
    first <- state$unit
    before <- as.character(screen())
    expect_message(click(session, "code", value = list(code = "yes")), "readonly")
    expect_match(state$problem, "^Not saved: attempt to write a readonly database. .*still on screen")
    expect_identical(as.character(screen()), before)
    expect_identical(state$unit, first)
    assign("store_write", writable, envir = environment(engine_available))
    click(session, "code", value = list(code = "yes"))
    expect_match(as.character(screen()), "Saved: text 1")
  })
  expect_identical(store_codes(fixture$file)$value, '{"code":"yes"}')
})

test_that("a note typed before back or skip comes back with its text", {
  fixture <- coding_fixture(n = 3, overlap = 0)
  shiny::testServer(fixture$app, {
    start_as(session, "ana")
    click(session, "code", value = list(code = "yes"))
    second <- state$unit
    click(session, "back", note = "half a thought")
    click(session, "skip")
    expect_identical(state$unit, second)
    expect_match(as.character(screen()), 'value="half a thought"', fixed = TRUE)
  })
})

test_that("coders never adjudicate; an adjudicator never gets their own texts and can change a decision", {
  fixture <- coding_fixture(n = 3, overlap = 1)
  for (unit in 1:3) store_write(fixture$file, unit, "ana", list(code = "no"))
  for (unit in 1:2) store_write(fixture$file, unit, "ben", list(code = "yes"))
  store_write(fixture$file, 3, "eve", list(code = "yes"))
  shiny::testServer(fixture$app, {
    start_as(session, "cal")
    session$setInputs(nl_event = list(type = "view", view = "adjudicate", nonce = 1))
    expect_identical(state$view, "code")
    expect_no_match(as.character(screen()), "ana|ben|Adjudicat")
  })
  shiny::testServer(fixture$app, {
    start_as(session, "eve", adjudicate = TRUE)
    expect_match(as.character(screen()), "2 disagreements open")  # not text 3, which eve coded
    first <- state$unit
    click(session, "code", value = list(code = "yes"))
    click(session, "code", value = list(code = "no"))
    expect_match(as.character(screen()), "Nothing to adjudicate")
    session$setInputs(nl_event = list(type = "pick", pick = first, nonce = 2))
    html <- as.character(screen())
    expect_match(html, 'class="nl-label nl-chosen" data-value="yes"', fixed = TRUE)
    click(session, "code", value = list(code = "no"))
  })
  codes <- read_codes(fixture$file)
  expect_identical(as.character(codes$code[1:2]), c("no", "no"))
  expect_identical(codes$.status[3], "disagreement")
  history <- store_history(fixture$file)
  expect_identical(history$value[history$role == "adjudication"], c('{"code":"yes"}', '{"code":"no"}', '{"code":"no"}'))
})

test_that("a click does not carry other people's notes from the file", {
  fixture <- coding_fixture(n = 2, overlap = 1)
  store_write(fixture$file, 1, "ana", list(code = "no"), note = "ana's note")
  store_write(fixture$file, 2, "ben", list(code = "no"), note = "ben's note")
  codes <- store_codes(fixture$file, notes_of = "ana")
  expect_identical(codes$note, c("ana's note", NA))
  expect_identical(store_codes(fixture$file)$note, c("ana's note", "ben's note"))
})

test_that("the done page tells the truth: texts held by others may come back; N of M does not shrink", {
  fixture <- coding_fixture(n = 3, overlap = 0)
  store_claim(fixture$file, "ben", "ben's tab", 1)
  store_write(fixture$file, 2, "cal", list(code = "yes"))
  shiny::testServer(fixture$app, {
    start_as(session, "ana")
    expect_match(as.character(screen()), "1 of 3")
    store_write(fixture$file, setdiff(2:3, state$unit), "cal", list(code = "no"))  # colleagues work: M stays
    click(session, "code", value = list(code = "yes"))
    html <- as.character(screen())
    expect_match(html, "No text is free now")
    expect_match(html, "You coded 1, ana. 1 text is on screen with other coders and may come back")
    store_release(fixture$file, "ben's tab")
    session$setInputs(nl_event = list(type = "view", view = "code", nonce = 9))
    expect_match(as.character(screen()), "2 of 3")
  })
  store_write(fixture$file, 1, "ben", list(code = "yes"))
  shiny::testServer(fixture$app, {
    start_as(session, "dan")
    expect_match(as.character(screen()), "Every text has all its coders, dan: none was left for you")
  })
})

test_that("adjudication shows its progress: decided of all disagreements", {
  fixture <- coding_fixture(n = 2, overlap = 1)
  for (unit in 1:2) {
    store_write(fixture$file, unit, "ana", list(code = "no"))
    store_write(fixture$file, unit, "ben", list(code = "yes"))
  }
  shiny::testServer(fixture$app, {
    start_as(session, "eve", adjudicate = TRUE)
    expect_match(as.character(screen()), "2 disagreements open; 0 of 2 decided")
    click(session, "code", value = list(code = "yes"))
    html <- as.character(screen())
    expect_match(html, "1 disagreement open; 1 of 2 decided")
    expect_match(html, "width: 50.0%", fixed = TRUE)
  })
})
