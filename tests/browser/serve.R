# Rscript serve.R FILE PORT [fields|team|lead [N]]: the browser test's coding app
# (of labels, of typed fields, or of a named team on N texts, 6 unless given, with a lead for "lead") on
# 127.0.0.1:PORT. NEWRLLAMA4_TEST_CLAIM_DELAY (seconds) holds each claim open
# between finding a text free and claiming it, for the test of two processes.
args <- commandArgs(TRUE)
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))), "sample.R"))
options(newrllama4.test_claim_delay = as.numeric(Sys.getenv("NEWRLLAMA4_TEST_CLAIM_DELAY", "0")))
task <- if (length(args) > 2) args[[3]] else "labels"
n_team <- if (length(args) > 3) as.integer(args[[4]]) else 6L
app <- switch(task, fields = browser_fields_app(args[[1]]),
              team = browser_team_app(args[[1]], as.integer(args[[2]]), n_team),
              lead = browser_team_app(args[[1]], as.integer(args[[2]]), n_team, lead = "Lea"), browser_app(args[[1]]))
shiny::runApp(app, port = as.integer(args[[2]]), host = "127.0.0.1", launch.browser = FALSE)
