# Runs the package's testthat suite and writes "passed failed" (per test_that block) to a file.
counts_file <- commandArgs(TRUE)[1]
writeLines("0 1", counts_file)  # stays a failure if anything below aborts
results <- as.data.frame(testthat::test_local(".", reporter = "summary", stop_on_failure = FALSE))
bad <- results$failed > 0 | results$error | results$skipped
writeLines(paste(sum(!bad), sum(bad)), counts_file)
quit(status = as.integer(any(bad)))
