# Study scale from R (issue 34): annotate_texts() with labels and a result cache
# on the tiny random-weight model, at growing row counts. Per row: the wall time,
# the process's CPU time (the figure to compare on a shared machine), the
# engine's own total, and the time R spends outside the engine (building the
# prompts, counting tokens, the result's columns); then the R process's peak RSS.
# Each size runs in a fresh R process, since peak RSS only grows.
# Usage (after `make setup-test`): Rscript tools/bench_annotate_scale.R [rows ...] [--threads N]
args <- commandArgs(TRUE)
flag <- match("--threads", args)
threads <- if (is.na(flag)) NA_integer_ else as.integer(args[[flag + 1]])
sizes <- as.integer(if (is.na(flag)) args else args[-c(flag, flag + 1)])
if (length(sizes) == 0) sizes <- c(1000L, 10000L)

if (identical(Sys.getenv("BENCH_ANNOTATE_ROWS"), "")) {
  cat(sprintf("annotate_texts(), tiny model, labels yes/no, a result cache, n_seq_max = 16%s\n",
              if (is.na(threads)) "" else sprintf(", %d threads", threads)))
  cat(sprintf("%7s %7s %10s %10s %11s %11s\n", "rows", "ms/row", "CPU ms/row", "engine %", "R ms/row", "peak RSS MB"))
  script <- normalizePath(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)))
  for (n in sizes) {
    system2(file.path(R.home("bin"), "Rscript"), c(script, if (!is.na(threads)) c("--threads", threads)),
            env = sprintf("BENCH_ANNOTATE_ROWS=%d", n))
  }
  quit(save = "no")
}

library(newrllama4)
n <- as.integer(Sys.getenv("BENCH_ANNOTATE_ROWS"))
dir <- tempfile("bench-annotate-")
dir.create(dir)
path <- reticulate::import("newrllama4.testing")$write_tiny_model(file.path(dir, "tiny.gguf"))
model <- model_load(path)
words <- c("she", "was", "had", "been", "not", "very", "much", "house", "family", "sister", "letter", "morning",
           "walk", "garden", "heart", "feeling", "pleasure", "regard", "marriage", "fortune", "visit", "party")
texts <- withr::with_seed(1, vapply(seq_len(n), function(i) {
  paste(sample(words, sample(8:30, 1), replace = TRUE), collapse = " ")
}, ""))
instruction <- "Read the sentence below and decide whether it expresses a positive feeling. Answer yes or no."
settings <- list(model, n_ctx = 512L, n_seq_max = 16L)
if (!is.na(threads)) settings$n_threads <- threads
context <- do.call(context_create, settings)
invisible(annotate_texts(texts[1:4], instruction = instruction, labels = c("yes", "no"), context = context,
                         progress = FALSE))  # warm-up
cpu <- function() sum(proc.time()[c("user.self", "sys.self")])
cpu_before <- cpu()
wall <- system.time(
  labelled <- annotate_texts(texts, instruction = instruction, labels = c("yes", "no"), context = context,
                             cache = file.path(dir, "cache.sqlite"), progress = FALSE)
)[["elapsed"]]
cpu_used <- cpu() - cpu_before
engine <- manifest(labelled)$timings$total_seconds
stopifnot(sum(is.na(labelled$.error)) == n)
peak_kb <- as.numeric(sub("[^0-9]*([0-9]+).*", "\\1", grep("^VmHWM", readLines("/proc/self/status"), value = TRUE)))
cat(sprintf("%7d %7.1f %10.1f %10.1f %11.2f %11.0f\n", n, wall / n * 1e3, cpu_used / n * 1e3, 100 * engine / wall,
            (wall - engine) / n * 1e3, peak_kb / 1024))
