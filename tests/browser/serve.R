# Rscript serve.R FILE PORT: the browser test's coding app on 127.0.0.1:PORT.
args <- commandArgs(TRUE)
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))), "sample.R"))
shiny::runApp(browser_app(args[[1]]), port = as.integer(args[[2]]), host = "127.0.0.1", launch.browser = FALSE)
