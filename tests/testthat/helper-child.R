# Run R code in an Rscript child that kills itself with SIGKILL right after the
# engine's result cache commits its `n_stored`-th answer, as a crash or
# `kill -9` would end it. `code` reads its inputs from `args`. Returns the
# child's output lines, with the exit status in attr(, "status").
run_child_killed_after <- function(n_stored, code, args) {
  script <- tempfile("child-", fileext = ".R")
  writeLines(c(
    "library(newrllama4)",
    "args <- commandArgs(TRUE)",
    "reticulate::py_run_string('",
    "import os, signal",
    "from newrllama4 import result_cache",
    "store, stored = result_cache.CachedCall.store, []",
    "def store_then_die(self, index, completion):",
    "    store(self, index, completion)",
    "    stored.append(index)",
    sprintf("    if len(stored) == %d:", n_stored),
    "        os.kill(os.getpid(), signal.SIGKILL)",
    "result_cache.CachedCall.store = store_then_die",
    "')",
    code,
    "cat('finished\\n')"
  ), script)
  suppressWarnings(system2(
    file.path(R.home("bin"), "Rscript"), shQuote(c(script, args)), stdout = TRUE, stderr = TRUE,
    env = paste0("R_LIBS=", shQuote(paste(.libPaths(), collapse = .Platform$path.sep)))
  ))
}
