# Rscript serve.R FILE PORT [fields|team|lead [N]]: the browser test's coding app
# (of labels, of typed fields, or of a named team on N texts, 6 unless given, with a lead for "lead") on
# 127.0.0.1:PORT. NEWRLLAMA4_TEST_CLAIM_DELAY (seconds) holds each claim open
# between finding a text free and claiming it, for the test of two processes.
# NEWRLLAMA4_TEST_HOST serves on another host than 127.0.0.1 (0.0.0.0, for a
# client that is not this machine); NEWRLLAMA4_TEST_OVERLAP is the team's
# overlap (0 unless given) and NEWRLLAMA4_TEST_QUOTA each coder's quota (none
# unless given); NEWRLLAMA4_TEST_CLOCK names a file holding the
# seconds by which the claims' clock is moved, read at each look, and open
# pages then renew their claims every 5 seconds instead of every minute.
args <- commandArgs(TRUE)
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))), "sample.R"))
options(newrllama4.test_claim_delay = as.numeric(Sys.getenv("NEWRLLAMA4_TEST_CLAIM_DELAY", "0")))
clock <- Sys.getenv("NEWRLLAMA4_TEST_CLOCK")
if (nzchar(clock)) {
  options(newrllama4.coding_clock = function() Sys.time() + if (file.exists(clock)) as.numeric(readLines(clock, 1)) else 0,
          newrllama4.claim_refresh_seconds = 5)
}
task <- if (length(args) > 2) args[[3]] else "labels"
n_team <- if (length(args) > 3) as.integer(args[[4]]) else 6L
app <- switch(task, fields = browser_fields_app(args[[1]]),
              team = browser_team_app(args[[1]], as.integer(args[[2]]), n_team,
                                     as.numeric(Sys.getenv("NEWRLLAMA4_TEST_OVERLAP", "0")),
                                     quota = if (nzchar(Sys.getenv("NEWRLLAMA4_TEST_QUOTA")))
                                       as.numeric(Sys.getenv("NEWRLLAMA4_TEST_QUOTA"))),
              lead = browser_team_app(args[[1]], as.integer(args[[2]]), n_team, lead = "Lea"),
              browser_app(args[[1]]))
shiny::runApp(app, port = as.integer(args[[2]]), host = Sys.getenv("NEWRLLAMA4_TEST_HOST", "127.0.0.1"),
              launch.browser = FALSE)
