# Rscript serve.R FILE PORT [fields]: the browser test's coding app (of labels,
# or of typed fields) on 127.0.0.1:PORT.
args <- commandArgs(TRUE)
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))), "sample.R"))
app <- if (length(args) > 2 && args[[3]] == "fields") browser_fields_app(args[[1]]) else browser_app(args[[1]])
shiny::runApp(app, port = as.integer(args[[2]]), host = "127.0.0.1", launch.browser = FALSE)
