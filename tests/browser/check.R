# Rscript check.R FILE: read_codes() of the browser test's file as JSON, and
# label_regression() fed with it as it is.
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))), "sample.R"))
file <- commandArgs(TRUE)[[1]]
data <- browser_data()
by_coder <- newrllama4::read_codes(file, by = "coder")
codes <- newrllama4::read_codes(file)
# an uncodable text is nonresponse, which label_regression() warns of
fit <- withCallingHandlers(newrllama4::label_regression(yes ~ x, data, codes, code, seed = 1),
                           newrllama4_warning_nonresponse = function(w) invokeRestart("muffleWarning"))
humans <- newrllama4::agreement(by_coder, n_boot = 200, seed = 1)
cat(jsonlite::toJSON(list(
  kept = codes[c(".row", "code", ".status", ".reason", ".note")],
  by_coder = by_coder[c(".row", ".coder", "code", ".uncodable", ".reason", ".seconds")],
  coef = unname(stats::coef(fit)),
  humans = humans$humans$krippendorff_alpha
), na = "null", digits = NA))
