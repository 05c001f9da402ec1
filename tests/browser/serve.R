# Rscript serve.R FILE PORT [fields|team]: the browser test's coding app (of
# labels, of typed fields, or of a named team) on 127.0.0.1:PORT.
args <- commandArgs(TRUE)
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))), "sample.R"))
task <- if (length(args) > 2) args[[3]] else "labels"
app <- switch(task, fields = browser_fields_app(args[[1]]), team = browser_team_app(args[[1]], as.integer(args[[2]])),
              browser_app(args[[1]]))
shiny::runApp(app, port = as.integer(args[[2]]), host = "127.0.0.1", launch.browser = FALSE)
