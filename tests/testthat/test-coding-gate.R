# The coding app's one gate: every message checked, from the key to what the role allows.

test_that("the host's login counts only with login = \"host\": by default a forged header is nobody", {
  fixture <- team_fixture()
  expect_identical(access_person(fixture$file, NULL, user = "ANA"), list(name = "Ana", role = "coder"))
  expect_null(access_person(fixture$file, NULL, user = "mallory"))
  expect_null(access_person(fixture$file, "wrong", user = "ana"))
  # Shiny fills session$user from the Shiny-Server-Credentials header, which any client can send
  shiny::testServer(fixture$app, {
    session$user <- "Lea"
    open_at(session, "")
    expect_match(as.character(screen()), "This link is not valid")
    expect_null(state$person)
  })
  host <- coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), login = "host")
  shiny::testServer(host, {
    session$user <- "lea"
    open_at(session, "")
    expect_identical(state$person, list(name = "Lea", role = "lead"))
  })
  expect_error(coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), login = "proxy"),
               class = "newrllama4_error_invalid_argument")
  err <- expect_error(code_sample(fixture$sample, fixture$file, labels = c("yes", "no"), login = "host"),
                      class = "newrllama4_error_coding_access")
  expect_match(conditionMessage(err), "Posit Connect")
})

test_that("every event passes the gate: a renewed or removed link ends its open session at the next click", {
  fixture <- team_fixture()
  links <- coding_links(fixture$file, "http://127.0.0.1/")
  shiny::testServer(fixture$app, {
    open_at(session, paste0("?key=", link_key(links, "Ben", "coder")))
    expect_match(as.character(screen()), "Coder: Ben")
    held <- state$unit
    expect_identical(store_claims(fixture$file)$unit, held)
    coding_links(fixture$file, "http://127.0.0.1/", renew = "Ben")
    session$setInputs(nl_event = list(type = "code", unit = held, value = list(code = "yes"), note = "", nonce = 1))
    expect_match(as.character(screen()), "This link no longer works")
    expect_match(as.character(screen()), "renewed or removed")
    expect_identical(nrow(store_codes(fixture$file)), 0L)
    expect_identical(nrow(store_claims(fixture$file)), 0L)  # the text goes back to the others
    expect_null(state$person)
    # and stays refused, whatever it sends after: a page shown again from the back-forward cache claims nothing
    session$setInputs(nl_event = list(type = "resume", unit = held, note = "", nonce = 3))
    expect_identical(nrow(store_claims(fixture$file)), 0L)
    session$setInputs(nl_event = list(type = "view", view = "code", nonce = 2))
    expect_match(as.character(screen()), "This link no longer works")
  })
  renewed <- coding_links(fixture$file, "http://127.0.0.1/")
  shiny::testServer(fixture$app, {
    open_at(session, paste0("?key=", link_key(renewed, "Eve", "adjudicator")))
    session$setInputs(nl_event = list(type = "view", view = "team", nonce = 1))
    expect_match(as.character(screen()), "Team: Eve")
    coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), coders = c("Ana", "Ben"))  # Eve left out
    session$setInputs(nl_event = list(type = "view", view = "adjudicate", nonce = 2))
    expect_match(as.character(screen()), "This link no longer works")
  })
})

test_that("the gate: the app's own origin only; this machine only without people, on every event", {
  fixture <- coding_fixture(n = 2)
  local <- list(REMOTE_ADDR = "127.0.0.1", HTTP_HOST = "127.0.0.1:4321")
  expect_true(same_origin(local))
  expect_true(same_origin(c(local, HTTP_ORIGIN = "http://127.0.0.1:4321")))
  expect_false(same_origin(c(local, HTTP_ORIGIN = "http://127.0.0.1:8000")))
  expect_false(same_origin(c(local, HTTP_ORIGIN = "null")))
  expect_true(same_origin(list(HTTP_HOST = "coding.example.org", HTTP_ORIGIN = "https://coding.example.org")))
  expect_true(same_origin(list(HTTP_HOST = "10.0.0.5:3838", HTTP_X_FORWARDED_HOST = "Coding.example.org:443",
                               HTTP_ORIGIN = "https://coding.example.org")))
  expect_false(same_origin(list(HTTP_HOST = "coding.example.org", HTTP_ORIGIN = "https://coding.example.org.evil.io")))
  me <- list(person = list(name = "ana", role = "coder"))
  expect_identical(access_gate(fixture$file, local, me, "code")$person, me$person)
  expect_true(access_gate(fixture$file, local, me, "code")$allowed)
  expect_false(access_gate(fixture$file, local, me, "adjudicate")$allowed)
  expect_false(access_gate(fixture$file, local, me, "download")$allowed)
  refused <- function(request, credential = me) as.character(access_gate(fixture$file, request, credential)$refused)
  expect_match(refused(c(local, HTTP_ORIGIN = "http://evil.example")), "opened from another site")
  expect_match(refused(list(REMOTE_ADDR = "192.168.1.7")), "serves only the computer it runs on")
  expect_match(refused(c(local, HTTP_X_FORWARDED_FOR = "192.168.1.7")), "serves only the computer it runs on")
  expect_true(role_allows("lead", "download", TRUE))
  expect_false(role_allows("adjudicator", "download", TRUE))
  expect_true(role_allows("adjudicator", "download", FALSE))
  expect_false(role_allows("coder", "download", FALSE))
})

test_that("pages: another site's request is refused, and no page sends the link as a Referer", {
  fixture <- coding_fixture(n = 2)
  request <- function(...) list2env(list(PATH_INFO = "/", REQUEST_METHOD = "GET", HTTP_HOST = "127.0.0.1:4321",
                                         QUERY_STRING = "?key=abc", REMOTE_ADDR = "127.0.0.1", ...))
  page <- fixture$app$httpHandler(request())
  expect_equal(page$status, 200)
  expect_identical(page$headers[["Referrer-Policy"]], "no-referrer")
  expect_match(as.character(page$content), '<meta name="referrer" content="no-referrer"/>', fixed = TRUE)
  expect_equal(fixture$app$httpHandler(request(HTTP_ORIGIN = "http://127.0.0.1:4321"))$status, 200)
  foreign <- fixture$app$httpHandler(request(HTTP_ORIGIN = "http://evil.example"))
  expect_equal(foreign$status, 403)
})

test_that("the links screen and renewing are the lead's alone: the gate refuses them to every other role", {
  expect_true(role_allows("lead", "links", TRUE))
  for (role in c("coder", "adjudicator")) expect_false(role_allows(role, "links", FALSE))
  expect_identical(event_action(list(type = "renew", name = "Ben"), list(view = "code")), "links")
  expect_identical(event_action(list(type = "view", view = "links"), list(view = "code")), "links")
})
