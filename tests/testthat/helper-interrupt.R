# Run an R script in a process of its own, interrupt it (SIGINT) `wait` seconds after it
# prints "started", and return its output once it has ended.
interrupted_script_output <- function(lines, wait = 2, timeout = 60) {
  script <- tempfile(fileext = ".R")
  writeLines(lines, script)
  # The background shell opens out_file on its own schedule, so it exists before we poll it.
  out_file <- tempfile()
  file.create(out_file)
  pid_file <- tempfile()
  system(sprintf("%s %s > %s 2>&1 & echo $! > %s", file.path(R.home("bin"), "Rscript"), script, out_file, pid_file))
  pid <- as.integer(readLines(pid_file))
  # if the interrupt is ever lost, the script would otherwise run for hours
  on.exit(tools::pskill(pid, tools::SIGKILL), add = TRUE)
  deadline <- Sys.time() + timeout
  while (!any(grepl("started", readLines(out_file, warn = FALSE))) && Sys.time() < deadline) Sys.sleep(0.2)
  Sys.sleep(wait)
  tools::pskill(pid, tools::SIGINT)
  while (tools::pskill(pid, 0) && Sys.time() < deadline) Sys.sleep(0.2)
  readLines(out_file, warn = FALSE)
}
