test_that("the team screen: each coder's progress, agreement as agreement() gives it, open disagreements", {
  fixture <- coding_fixture(n = 6, overlap = 1)
  codes <- list(ana = c("yes", "no", "yes", "yes", "no", "no"), ben = c("yes", "no", "no", "yes", "no", NA))
  for (coder in names(codes)) {
    for (unit in which(!is.na(codes[[coder]]))) store_write(fixture$file, unit, coder, list(code = codes[[coder]][unit]),
                                                            seconds = unit)
    store_coder(fixture$file, coder, 6, 1L)
  }
  store_write(fixture$file, 4, "ben", NULL, uncodable = TRUE, reason = "not in English")
  # one text on screen in two of Ben's tabs is one text held
  store_claim(fixture$file, "ben", "tab 1", 6)
  store_claim(fixture$file, "ben", "tab 2", 6)
  stored <- store_meta(fixture$file)
  team <- team_progress(fixture$file, stored)
  expect_identical(team$coders$coder, c("ana", "ben"))
  expect_identical(team$coders$coded, c(6L, 5L))
  expect_identical(team$coders$uncodable, c(0L, 1L))
  expect_identical(team$coders$held, c(0L, 1L))
  expect_identical(team$coders$quota_left, c(NA_integer_, NA_integer_))
  expect_identical(team$open, c(3L, 4L))
  # honest counts: every text coded once, but text 6 lacks its second coder and 3 and 4 disagree
  expect_identical(c(team$once, team$twice, team$planned_twice, team$done), c(6L, 5L, 6L, 3L))
  expect_identical(team$held, 6L)
  expected <- agreement(read_codes(fixture$file, by = "coder"), n_boot = 500, seed = 1)$humans
  expect_identical(team$agreement$krippendorff_alpha, expected$krippendorff_alpha)
  expect_identical(team$agreement$lower, expected$lower)
  expect_identical(team$agreement$texts, 4L)  # ben could not code text 4
  expect_identical(team$agreement$left_out, 1L)  # ... which is among the disagreements, and said to be left out
  shiny::testServer(fixture$app, {
    start_as(session, "eve", adjudicate = TRUE)
    session$setInputs(nl_event = list(type = "view", view = "team", nonce = 1))
    html <- as.character(screen())
    expect_match(html, "Open disagreements (2)", fixed = TRUE)
    expect_match(html, "Krippendorff's alpha")
    expect_match(html, "3 of 6 texts done")
    expect_match(html, "width: 50.0%", fixed = TRUE)
    expect_match(html, "Coded twice: 5 of the 6 planned")
    expect_match(html, "Disagreements: 2 open, 0 decided")
    expect_match(html, "On screen now: 1 text")
    expect_match(html, "\"Cannot code\" is not counted as a code: 1 text coded twice", fixed = TRUE)
    # blind adjudication: the disagreements' codes without who coded them, and no history, which names them
    expect_match(html, "Text 3</button>\\s*:\\s*Coder 1 \\(code: yes\\); Coder 2 \\(code: no\\)")
    expect_no_match(html, "codes_csv")
    expect_error(output$codes_csv, "lead")
  })
  seen <- coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), blind_adjudication = FALSE)
  shiny::testServer(seen, {
    start_as(session, "eve", adjudicate = TRUE)
    session$setInputs(nl_event = list(type = "view", view = "team", nonce = 1))
    expect_match(as.character(screen()), "Text 3</button>\\s*:\\s*ana \\(code: yes\\); ben \\(code: no\\)")
    csv <- utils::read.csv(output$codes_csv)
    expect_identical(nrow(csv), 12L)
    expect_identical(sum(csv$.current), 11L)  # ben's first code of text 4, replaced
  })
  shiny::testServer(fixture$app, {
    start_as(session, "cal")
    session$setInputs(nl_event = list(type = "view", view = "team", nonce = 1))
    expect_no_match(as.character(screen()), "Krippendorff")
    expect_error(output$codes_csv, "lead")
  })
})

test_that("the history of codes reads back typed, with who, when and how long", {
  skip_if_not_installed("RSQLite")
  file <- withr::local_tempfile(fileext = ".sqlite")
  coding_app(data.frame(text = c("a", "b")), file, schema = list(n = "integer", tone = list(enum = c("calm", "angry"))))
  store_write(file, 2, "ana", list(n = 3, tone = "calm"), seconds = 4.5, note = "sure")
  store_write(file, 2, "ana", list(n = 4, tone = "angry"), seconds = 2)
  history <- code_history(file, store_meta(file))
  expect_identical(history$n, c(3L, 4L))
  expect_identical(as.character(history$tone), c("calm", "angry"))
  expect_identical(history$.current, c(FALSE, TRUE))
  expect_identical(history[c(".row", ".coder", ".role", ".seconds", ".note")],
                   data.frame(.row = c(2L, 2L), .coder = "ana", .role = "code", .seconds = c(4.5, 2), .note = c("sure", NA)))
  expect_match(history$.time, "^\\d{4}-\\d\\d-\\d\\dT")
})

test_that("the CSV download starts free text a spreadsheet would run as a formula with a quote", {
  skip_if_not_installed("RSQLite")
  file <- withr::local_tempfile(fileext = ".sqlite")
  coding_app(data.frame(text = c("a", "b")), file, schema = list(gist = "string", tone = list(enum = c("-", "+"))))
  typed <- c("=HYPERLINK(\"http://x\")", "+1", "-2", "@SUM(A1)", "\tx", "\rx", "a = b")
  for (i in seq_along(typed)) {
    store_write(file, 1, typed[[i]], list(gist = typed[[i]], tone = "-"), note = typed[[i]])
  }
  store_write(file, 2, "=ana", NULL, uncodable = TRUE, reason = "@once")
  path <- withr::local_tempfile(fileext = ".csv")
  write_code_history(file, store_meta(file), path)
  csv <- utils::read.csv(path, colClasses = "character", na.strings = NULL)
  csv[] <- lapply(csv, gsub, pattern = "\n", replacement = "\r", fixed = TRUE)  # read.csv() reads a quoted CR as LF
  quoted <- c(paste0("'", typed[1:6]), "a = b")
  expect_identical(csv$.coder, c(quoted, "'=ana"))
  expect_identical(csv$gist, c(quoted, ""))
  expect_identical(csv$.note, c(quoted, ""))
  expect_identical(csv$.reason, c(rep("", 7), "'@once"))
  expect_identical(csv$tone, c(rep("-", 7), ""))  # a category of the codebook is the lead's, not typed in
})

test_that("the lead sees the team screen only, with the coders named who have not come yet", {
  skip_if_not_installed("openssl")
  withr::local_envvar(R_USER_DATA_DIR = withr::local_tempdir())
  fixture <- coding_fixture(n = 4, overlap = 0.5, coders = c("Ana", "Ben"), adjudicators = "Eve", lead = "Lea")
  store_write(fixture$file, 1, "Ana", list(code = "yes"))
  store_coder(fixture$file, "Ana", 4, 1L)
  team <- team_progress(fixture$file, store_meta(fixture$file))
  expect_identical(team$coders$coder, c("Ana", "Ben"))
  expect_identical(team$coders$coded, c(1L, 0L))
  expect_identical(team$free, 3L + (1 %in% store_meta(fixture$file)$double))
  links <- coding_links(fixture$file, "http://127.0.0.1/")
  shiny::testServer(fixture$app, {
    session$clientData <- list(url_search = sub(".*\\?", "?", links$url[links$role == "lead"]))
    session$flushReact()
    expect_identical(state$view, "team")
    session$setInputs(nl_event = list(type = "view", view = "adjudicate", nonce = 1))
    expect_identical(state$view, "team")
    expect_match(as.character(screen()), "Team: Lea")
  })
})

test_that("for a schema, agreement so far is on each field that is a category, not on free texts", {
  skip_if_not_installed("RSQLite")
  file <- withr::local_tempfile(fileext = ".sqlite")
  coding_app(data.frame(text = c("a", "b", "c")), file, overlap = 1, seed = 1,
             schema = list(tone = list(enum = c("calm", "angry")), urgent = "boolean", gist = "string"))
  codes <- list(ana = list(c("calm", TRUE), c("angry", TRUE), c("calm", FALSE)),
                ben = list(c("calm", TRUE), c("calm", TRUE), c("calm", FALSE)))
  for (coder in names(codes)) for (unit in 1:3) {
    store_write(file, unit, coder, list(tone = codes[[coder]][[unit]][1], urgent = as.logical(codes[[coder]][[unit]][2]),
                                        gist = paste(coder, unit)))
  }
  stored <- store_meta(file)
  agreed <- team_agreement(file, stored)
  expect_identical(agreed$field, c("tone", "urgent"))
  expect_identical(agreed$texts, c(3L, 3L))
  by_coder <- read_codes(file, by = "coder")
  expect_identical(agreed$krippendorff_alpha[1],
                   agreement(by_coder, field = "tone", n_boot = 500, seed = 1)$humans$krippendorff_alpha)
  expect_identical(agreed$krippendorff_alpha[2], 1)
  expect_identical(team_progress(file, stored)$open, 2L)  # the gists differ everywhere; only text 2's tone
})

test_that("the decided codes download: one row per text, its code, how it was reached and its coders' codes", {
  fixture <- coding_fixture(n = 6, overlap = 1)
  store_write(fixture$file, 1, "ana", list(code = "yes"))
  for (unit in 2:5) store_write(fixture$file, unit, "ana", list(code = "yes"))
  store_write(fixture$file, 2, "ben", list(code = "yes"))
  store_write(fixture$file, 3, "ben", list(code = "no"))
  store_write(fixture$file, 4, "ben", list(code = "no"))
  store_write(fixture$file, 4, "eve", list(code = "no"), role = "adjudication")
  store_write(fixture$file, 5, "ben", NULL, uncodable = TRUE, reason = "=cmd()")
  store_write(fixture$file, 5, "eve", NULL, role = "adjudication", uncodable = TRUE, reason = "in French")
  seen <- coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), blind_adjudication = FALSE)
  shiny::testServer(seen, {
    start_as(session, "eve", adjudicate = TRUE)
    session$setInputs(nl_event = list(type = "view", view = "team", nonce = 1))
    expect_match(as.character(screen()), "Download the decided codes, one row per text (CSV)", fixed = TRUE)
    csv <- utils::read.csv(output$decided_csv, na.strings = "")
    expect_identical(csv$.row, 1:6)
    expect_identical(csv$text, fixture$sample$text)
    expect_identical(csv$code, c("yes", "yes", NA, "no", NA, NA))
    expect_identical(csv$.how, c("single", "agreed", "disagreed", "adjudicated", "cannot code", "not coded"))
    expect_identical(csv$.coders, c(1L, 2L, 2L, 2L, 2L, 0L))
    expect_identical(csv$.codes[3], "ana (code: yes); ben (code: no)")
    expect_identical(csv$.codes[5], "ana (code: yes); ben (Cannot code: =cmd())")
    expect_identical(csv$.reason[5], "in French")
  })
  # the same set as read_codes() reads, one row per text
  decided <- decided_codes(fixture$file)
  expect_warning(missing <- read_codes(fixture$file, disagreements = "missing"),
                 class = "newrllama4_warning_disagreements_missing")
  expect_identical(missing$.how, decided$.how)
  expect_identical(decided_codes(fixture$file, blind = TRUE)$.codes[3], "Coder 1 (code: yes); Coder 2 (code: no)")
  shiny::testServer(fixture$app, {
    start_as(session, "eve", adjudicate = TRUE)
    session$setInputs(nl_event = list(type = "view", view = "team", nonce = 1))
    expect_no_match(as.character(screen()), "decided_csv")
    expect_error(output$decided_csv, "lead")
  })
})

test_that("the team screen follows the file by itself, through the gate", {
  fixture <- team_fixture(n = 4)
  links <- coding_links(fixture$file, "http://127.0.0.1/")
  shiny::testServer(fixture$app, {
    open_at(session, paste0("?key=", link_key(links, "Lea", "lead")))
    expect_match(as.character(screen()), "0 of 4 texts done")
    store_write(fixture$file, setdiff(1:4, store_meta(fixture$file)$double)[1], "Ana", list(code = "yes"))
    session$elapse(team_refresh_seconds * 1000 + 10)
    expect_match(as.character(screen()), "1 of 4 texts done")
    expect_match(as.character(screen()), "Coded once: 1 of 4 texts")
    # a renewed link ends the screen at its next refresh, as at a click
    coding_links(fixture$file, "http://127.0.0.1/", renew = "Lea")
    store_write(fixture$file, 2, "Ben", list(code = "no"))
    session$elapse(team_refresh_seconds * 1000 + 10)
    expect_match(as.character(screen()), "This link no longer works")
  })
})

test_that("an adjudicator's disagreements on the team screen open in adjudication; the lead's are not links", {
  fixture <- team_fixture(n = 4)
  links <- coding_links(fixture$file, "http://127.0.0.1/")
  double <- store_meta(fixture$file)$double
  store_write(fixture$file, double[1], "Ana", list(code = "yes"))
  store_write(fixture$file, double[1], "Ben", list(code = "no"))
  shiny::testServer(fixture$app, {
    open_at(session, paste0("?key=", link_key(links, "Eve", "adjudicator")))
    session$setInputs(nl_event = list(type = "view", view = "team", nonce = 1))
    expect_match(as.character(screen()), sprintf('class="nl-pick" data-unit="%d"', double[1]), fixed = TRUE)
    session$setInputs(nl_event = list(type = "pick", pick = double[1], nonce = 2))
    expect_identical(state$view, "adjudicate")
    expect_identical(state$unit, double[1])
    expect_match(as.character(screen()), "Adjudicating: Eve")
  })
  shiny::testServer(fixture$app, {
    open_at(session, paste0("?key=", link_key(links, "Lea", "lead")))
    expect_no_match(as.character(screen()), "nl-pick")
    session$setInputs(nl_event = list(type = "pick", pick = double[1], nonce = 1))
    expect_identical(state$view, "team")
    expect_no_match(as.character(screen()), "Adjudicating")
  })
})

test_that("the lead's links screen: every link, to copy and renew; nobody else gets it or renews", {
  fixture <- team_fixture(n = 4)
  links <- coding_links(fixture$file, "http://192.0.2.9:4321/")
  app <- coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), url = "http://192.0.2.9:4321/")
  shiny::testServer(app, {
    open_at(session, paste0("?key=", link_key(links, "Lea", "lead")))
    session$setInputs(nl_event = list(type = "view", view = "links", nonce = 1))
    html <- as.character(screen())
    for (url in links$url) expect_match(html, url, fixed = TRUE)
    expect_identical(lengths(regmatches(html, gregexpr('class="nl-copy"', html))), 4L)
    expect_identical(lengths(regmatches(html, gregexpr('class="nl-renew"', html))), 3L)  # not the lead's own
    session$setInputs(nl_event = list(type = "renew", name = "Ben", nonce = 2))
    expect_match(as.character(screen()), "New link for Ben")
    expect_null(access_person(fixture$file, link_key(links, "Ben", "coder")))
    expect_identical(access_person(fixture$file, link_key(links, "Ana", "coder"))$name, "Ana")
    session$setInputs(nl_event = list(type = "renew", name = "Lea", nonce = 3))  # their own: not here
    expect_identical(access_person(fixture$file, link_key(links, "Lea", "lead"))$name, "Lea")
  })
  renewed <- coding_links(fixture$file, "http://127.0.0.1/")
  for (who in list(c("Eve", "adjudicator"), c("Ana", "coder"))) {
    shiny::testServer(app, {
      open_at(session, paste0("?key=", link_key(renewed, who[1], who[2])))
      view <- state$view
      session$setInputs(nl_event = list(type = "view", view = "links", nonce = 1))
      expect_identical(state$view, view)
      session$setInputs(nl_event = list(type = "renew", name = "Ana", nonce = 2))
      expect_no_match(as.character(screen()), "key=")
    })
  }
  expect_identical(access_hash(link_key(renewed, "Ana", "coder")),
                   access_people(fixture$file)$key_hash[access_people(fixture$file)$name == "Ana"])
})

test_that("quotas: the team screen shows each coder's quota left", {
  fixture <- team_fixture(n = 4)
  app <- coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), quota = c(Ana = 2, ben = 0.5))
  store_write(fixture$file, 1, "Ana", list(code = "yes"))
  team <- team_progress(fixture$file, store_meta(fixture$file))
  # Ben's share: half of the 6 codes planned (4 texts, 2 of them twice)
  expect_identical(team$coders$quota_left, c(1L, 3L))
})

test_that("the team screen follows a code or a claim, not a claim's renewal each minute", {
  fixture <- coding_fixture(n = 3, overlap = 0)
  store_claim(fixture$file, "ana", "ana's tab", 1)
  before <- team_fingerprint(fixture$file)
  withr::local_options(newrllama4.coding_clock = function() Sys.time() + claim_refresh_seconds)
  store_refresh_claims(fixture$file, "ana's tab")
  expect_identical(team_fingerprint(fixture$file), before)
  store_claim(fixture$file, "ben", "ben's tab", 2)
  expect_false(identical(team_fingerprint(fixture$file), before))
})

test_that("the team screen's alpha on a sample drawn toward doubt is the corpus's, and says so", {
  data <- doubtful_labels()
  drawn <- review_sample(data, 40, seed = 3)
  file <- coding_file_of(drawn, doubtful_coders(data))
  team <- team_progress(file, store_meta(file))
  expected <- agreement(read_codes(file, by = "coder"), n_boot = 500, seed = 1)$humans
  expect_true(team$agreement$weighted)
  expect_identical(team$agreement$krippendorff_alpha, expected$krippendorff_alpha)
  expect_match(alpha_words(team$agreement[1, ]), "1 / its chance of being drawn: the corpus's alpha", fixed = TRUE)
  # the fixture of the test above has no design: no such words
  fixture <- coding_fixture(n = 4, overlap = 1)
  for (unit in 1:4) for (coder in c("ana", "ben")) store_write(fixture$file, unit, coder, list(code = "yes"))
  plain <- team_progress(fixture$file, store_meta(fixture$file))$agreement
  expect_false(plain$weighted)
  expect_no_match(alpha_words(plain[1, ]), "chance of being drawn")
})
