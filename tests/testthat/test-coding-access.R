test_that("each person named gets a link of their own, whose key the file keeps only hashed", {
  fixture <- team_fixture()
  links <- coding_links(fixture$file, "http://127.0.0.1:4321/")
  expect_identical(links$name, c("Ana", "Ben", "Eve", "Lea"))
  expect_identical(links$role, c("coder", "coder", "adjudicator", "lead"))
  expect_match(links$url, "^http://127.0.0.1:4321/\\?key=[0-9a-f]{32}$")
  expect_identical(anyDuplicated(links$url), 0L)
  stored <- with_store(fixture$file, function(con) DBI::dbGetQuery(con, "SELECT * FROM people"))
  keys <- sub(".*key=", "", links$url)
  expect_false(any(keys %in% unlist(stored)))
  expect_false(any(vapply(keys, function(key) grepl(key, paste(readBin(fixture$file, "raw", 1e6), collapse = "")), NA)))
  # the same links again; new ones from another user's secret, which can't make the old ones
  expect_identical(coding_links(fixture$file, "http://127.0.0.1:4321/"), links)
  expect_identical(access_person(fixture$file, link_key(links, "Ben", "coder")), list(name = "Ben", role = "coder"))
  # opened again without people, the file keeps its own; with them, each keeps their link
  coding_app(fixture$sample, fixture$file, labels = c("yes", "no"))
  expect_identical(coding_links(fixture$file, "http://127.0.0.1:4321/"), links)
  coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), coders = c("ben", "Ana"), adjudicators = "Eve")
  again <- coding_links(fixture$file, "http://127.0.0.1:4321/")
  expect_identical(again$url, links$url[c(2, 1, 3)])
  # a link renewed: the old one no longer opens, the others stay
  renewed <- coding_links(fixture$file, "http://127.0.0.1:4321/", renew = "BEN")
  expect_identical(renewed$url[-1], again$url[-1])
  expect_false(renewed$url[[1]] == again$url[[1]])
  expect_null(access_person(fixture$file, link_key(again, "Ben", "coder")))
  expect_identical(access_person(fixture$file, link_key(renewed, "Ben", "coder")), list(name = "Ben", role = "coder"))
  expect_error(coding_links(fixture$file, "http://x/", renew = "Zed"), class = "newrllama4_error_invalid_argument")
  local_secret_dir()
  expect_error(coding_links(fixture$file, "http://x/"), class = "newrllama4_error_coding_access")
  coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), coders = "Ana")
  expect_null(access_person(fixture$file, link_key(links, "Ana", "coder")))
  expect_identical(coding_links(fixture$file, "http://x/?a=1")$url, paste0("http://x/?a=1&key=",
                                                                           link_key(coding_links(fixture$file, "http://x/"), "Ana", "coder")))
})

test_that("people are checked: names of 1 to 40 characters, nobody twice in a role, coders named", {
  skip_if_not_installed("openssl")
  local_secret_dir()
  fixture <- coding_fixture(n = 2)
  bad <- function(...) expect_error(coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), ...),
                                    class = "newrllama4_error_invalid_argument")
  bad(coders = c("Ana", " ana "))
  bad(coders = c("Ana", ""))
  bad(coders = strrep("a", 41))
  bad(coders = "Ana", lead = c("Eve", "Lea"))
  bad(adjudicators = "Eve")
  expect_error(coding_links(fixture$file, "http://x/"), class = "newrllama4_error_coding_access")
})

test_that("with people named, the key alone says who one is; no key, a wrong key or a typed name gets no text", {
  fixture <- team_fixture()
  links <- coding_links(fixture$file, "http://127.0.0.1/")
  no_text <- function(html) for (text in fixture$sample$text) expect_false(grepl(text, html, fixed = TRUE))
  for (search in c("", "?coder=Ana", "?key=0123456789abcdef0123456789abcdef", "?key=")) {
    shiny::testServer(fixture$app, {
      open_at(session, search)
      expect_match(as.character(screen()), "This link is not valid")
      session$setInputs(nl_event = list(type = "start", coder = "Ana", adjudicate = FALSE))
      expect_match(as.character(screen()), "This link is not valid")
      no_text(as.character(screen()))
      expect_null(state$person)
    })
  }
  shiny::testServer(fixture$app, {
    open_at(session, paste0("?coder=Eve&adjudicate=1&key=", link_key(links, "Ben", "coder")))
    expect_match(as.character(screen()), "Coder: Ben")
    expect_identical(state$person, list(name = "Ben", role = "coder"))
    session$setInputs(nl_event = list(type = "start", coder = "Eve", adjudicate = TRUE))
    expect_identical(state$person, list(name = "Ben", role = "coder"))
  })
  shiny::testServer(fixture$app, {
    open_at(session, paste0("?key=", link_key(links, "Eve", "adjudicator")))
    expect_identical(state$person, list(name = "Eve", role = "adjudicator"))
    expect_identical(state$view, "adjudicate")
  })
})

test_that("one person holds one role: named in two, or a file that names one in two, is a classed error", {
  skip_if_not_installed("openssl")
  local_secret_dir()
  fixture <- coding_fixture(n = 2)
  err <- expect_error(coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), coders = c("Ana", "Ben"),
                                 adjudicators = "Eve", lead = " ana "), class = "newrllama4_error_coding_roles")
  expect_s3_class(err, "newrllama4_error_coding_access")
  expect_identical(err$names, "ana")
  expect_match(conditionMessage(err), "one role")
  expect_identical(nrow(access_people(fixture$file)), 0L)
  # a file that a version before named one person in two roles
  people <- data.frame(name = c("Ana", "Ana"), role = c("coder", "adjudicator"), key_hash = c("a", "b"), salt = "s")
  with_store(fixture$file, function(con) DBI::dbWriteTable(con, "people", people, append = TRUE))
  expect_error(coding_app(fixture$sample, fixture$file, labels = c("yes", "no")), class = "newrllama4_error_coding_roles")
})

test_that("without people named, the app is for this machine: another host or a request from elsewhere is refused", {
  fixture <- coding_fixture(n = 2)
  err <- expect_error(code_sample(fixture$sample, fixture$file, labels = c("yes", "no"), host = "0.0.0.0"),
                      class = "newrllama4_error_coding_access")
  expect_match(conditionMessage(err), "coders = c\\(...\\)")
  expect_true(is_local_request(list(REMOTE_ADDR = "127.0.0.1")))
  expect_false(is_local_request(list(REMOTE_ADDR = "192.168.1.7")))
  expect_false(is_local_request(list(REMOTE_ADDR = "127.0.0.1", HTTP_X_FORWARDED_FOR = "192.168.1.7")))
  # a proxy on this machine that names its client only in X-Real-IP (nginx) or Forwarded (RFC 7239)
  expect_false(is_local_request(list(REMOTE_ADDR = "127.0.0.1", HTTP_X_REAL_IP = "192.168.1.7")))
  expect_false(is_local_request(list(REMOTE_ADDR = "127.0.0.1", HTTP_FORWARDED = "for=192.168.1.7")))
  # a client elsewhere that names this machine is elsewhere all the same
  expect_false(is_local_request(list(REMOTE_ADDR = "192.168.1.7", HTTP_X_FORWARDED_FOR = "127.0.0.1",
                                     HTTP_X_REAL_IP = "127.0.0.1")))
})

test_that("code_sample() prints each person's link, at the address it serves on (never the bare host name)", {
  skip_if_not_installed("openssl")
  local_secret_dir()
  fixture <- coding_fixture(n = 2)
  # an address no server can take ends the call once the links are printed
  messages <- character()
  withCallingHandlers(
    expect_error(code_sample(fixture$sample, fixture$file, labels = c("yes", "no"), coders = "Ana",
                             adjudicators = "Eve {the lead}", host = "256.0.0.1", port = 8765L, background = FALSE,
                             launch.browser = FALSE),
                 "Failed to create server"),
    message = function(m) {
      messages <<- c(messages, conditionMessage(m))
      invokeRestart("muffleMessage")
    }
  )
  links <- coding_links(fixture$file, "http://256.0.0.1:8765/")
  printed <- paste(messages, collapse = "\n")
  for (i in seq_len(nrow(links))) {
    expect_match(printed, sprintf("%s (%s): %s", links$name[[i]], links$role[[i]], links$url[[i]]), fixed = TRUE)
  }
})
