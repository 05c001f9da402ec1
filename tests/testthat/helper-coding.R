# A coding file of a small labelled sample, for the coding app's tests.
coding_fixture <- function(n = 6, overlap = 0.5, ..., sample = NULL, labels = c("yes", "no"), envir = parent.frame()) {
  skip_if_not_installed("RSQLite")
  skip_if_not_installed("shiny")
  sample <- sample %||% data.frame(text = paste("Text", seq_len(n)),
                                   .label = factor(rep(c("yes", "no"), length.out = n), levels = c("yes", "no")),
                                   .confidence = 0.876543)
  file <- withr::local_tempfile(fileext = ".sqlite", .local_envir = envir)
  app <- coding_app(sample, file, labels = labels, overlap = overlap, seed = 1, ...)
  list(file = file, app = app, sample = sample)
}

# Starts a second R process that runs `lines` with the package's own
# functions (deparsed from its namespace, so that what is tested is this
# source, installed or not), and gives a function that waits for it to end.
store_process <- function(lines, envir = parent.frame()) {
  done <- withr::local_tempfile(.local_envir = envir)
  script <- withr::local_tempfile(fileext = ".R", .local_envir = envir)
  ns <- asNamespace("newrllama4")
  objects <- Filter(function(name) is.function(ns[[name]]) || is.atomic(ns[[name]]) && !is.null(ns[[name]]),
                    ls(ns, all.names = TRUE))
  writeLines(c("library(rlang)", vapply(objects, function(name) {
    paste(sprintf("`%s` <-", name), paste(deparse(ns[[name]], control = c("keepNA", "keepInteger", "niceNames",
                                                                           "showAttributes")), collapse = "\n"))
  }, ""), lines, sprintf("file.create(%s)", deparse(done))), script)
  system2(file.path(R.home("bin"), "Rscript"), shQuote(script), wait = FALSE, stdout = FALSE, stderr = FALSE)
  function() {
    deadline <- Sys.time() + 60
    while (!file.exists(done) && Sys.time() < deadline) Sys.sleep(0.1)
    file.exists(done)
  }
}

# A person opening the app and giving their name, as a browser does it: the
# page is drawn first (the server ignores an event present when a session
# starts, which only a reconnected page sends again).
start_as <- function(session, coder, adjudicate = FALSE) {
  session$flushReact()
  session$setInputs(nl_event = list(type = "start", coder = coder, adjudicate = adjudicate))
}

# A click that coding.js sends, on the text on screen unless `unit` is given.
click <- function(session, type, ...) {
  event <- utils::modifyList(list(type = type, unit = get("state", session$env)$unit, note = ""), list(...))
  session$setInputs(nl_event = c(event, nonce = stats::runif(1)))
}

# the secret that makes the links, in a directory of the test's own
local_secret_dir <- function(envir = parent.frame()) {
  withr::local_envvar(R_USER_DATA_DIR = withr::local_tempdir(.local_envir = envir), .local_envir = envir)
}

team_fixture <- function(n = 4, envir = parent.frame()) {
  skip_if_not_installed("openssl")
  local_secret_dir(envir)
  coding_fixture(n = n, overlap = 0.5, coders = c("Ana", "Ben"), adjudicators = "Eve", lead = "Lea", envir = envir)
}

# The session as opened at the address ending in `search` (shiny's test
# session has a fixed one), before its first flush reads it.
open_at <- function(session, search) {
  session$clientData <- list(url_search = search)
  session$flushReact()
}

link_key <- function(links, name, role) sub(".*key=", "", links$url[links$name == name & links$role == role])
