# Runs the package's testthat suite and writes "passed failed" (per test_that block) to a file.
counts_file <- commandArgs(TRUE)[1]
writeLines("0 1", counts_file)  # stays a failure if anything below aborts
results <- as.data.frame(testthat::test_local(".", reporter = "summary", stop_on_failure = FALSE))
bad <- results$failed > 0 | results$error | results$skipped
writeLines(paste(sum(!bad), sum(bad)), counts_file)
# the slowest files, for a CI log that has to find where its minutes went
seconds <- sort(tapply(results$real, results$file, sum), decreasing = TRUE)
cat("slowest test files (seconds):\n")
print(round(utils::head(seconds, 12)))
# each failing block, and why, for the end of tools/run-tests' output
failures <- unlist(lapply(which(bad), function(i) {
  problems <- Filter(function(r) !inherits(r, c("expectation_success", "expectation_warning")), results$result[[i]])
  why <- vapply(problems, function(r) gsub("\\s+", " ", substr(conditionMessage(r), 1, 300)), "")
  c(sprintf("%s: %s", results$file[[i]], results$test[[i]]), if (length(why)) paste("   ", why))
}))
writeLines(as.character(failures), file.path(dirname(counts_file), "testthat.failures"))
quit(status = as.integer(any(bad)))
