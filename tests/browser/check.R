# Rscript check.R FILE: read_codes() of the browser test's file as JSON, and
# label_regression() fed with it as it is.
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))), "sample.R"))
file <- commandArgs(TRUE)[[1]]
data <- browser_data()
kept <- newrllama4::read_codes(file, uncodable = "keep")
by_coder <- newrllama4::read_codes(file, by = "coder")
codes <- suppressMessages(newrllama4::read_codes(file))
fit <- newrllama4::label_regression(yes ~ x, data, codes, code, seed = 1)
humans <- newrllama4::agreement(by_coder, n_boot = 200, seed = 1)
cat(jsonlite::toJSON(list(
  kept = kept[c(".row", "code", ".status", ".reason", ".note")],
  by_coder = by_coder[c(".row", ".coder", "code", ".uncodable", ".reason", ".seconds")],
  used = codes$.row,
  set_aside = as.integer(attr(codes, "uncodable")$.row),
  coef = unname(stats::coef(fit)),
  humans = humans$humans$krippendorff_alpha
), na = "null", digits = NA))
