# From annotated rows to a finding at study scale: does the R side's cost per
# corpus row stay flat from a thousand rows to a hundred thousand? One study as
# a user runs it, each size in a fresh R process (callr) so that its peak memory
# is its own: `coded` rows drawn uniformly (review_sample()), their codes
# through a CSV file, labels learned on the model's features (learn_labels():
# Gemma 3 270M's width, 640 dimensions of each of the three kinds that
# features = TRUE keeps, as float32 blobs), the shares by group
# (label_shares()) and a slope (label_regression()) with the learned labels,
# a second round of as many rows drawn by their doubt (planned by
# coded_rows_needed(doubt =), drawn by review_sample(weight = "learned"), its
# codes through a CSV file) and the shares by group from both rounds, labels
# learned again from both and their shares, agreement() on both rounds and
# between the learned and the zero-shot labels over every row, and the shares
# and slope with the zero-shot labels. The rows are learnable_rows()'
# (tests/testthat/helper-findings.R): a weak zero-shot annotator, features
# that carry the label, a covariate z.
#
# CPU seconds (user + system: the machine may be shared, and the wall time
# would count the neighbours) per step, in ms per 1,000 corpus rows, and the
# study's peak RSS (the simulated rows' own making left out); the annotation
# itself is the engine's (docs/benchmarks.md, study scale).
#
#   Rscript tools/bench_findings_scale.R [rows ...] [--coded=300] [--dim=640]
#   (default: 1000 10000 100000)

arguments <- commandArgs(TRUE)
option <- function(name, default) {
  given <- grep(sprintf("^--%s=", name), arguments, value = TRUE)
  if (length(given) == 0) default else as.integer(sub(sprintf("^--%s=", name), "", given[[length(given)]]))
}
sizes <- as.integer(grep("^--", arguments, value = TRUE, invert = TRUE))
if (length(sizes) == 0) sizes <- c(1000L, 10000L, 100000L)
coded_rows <- option("coded", 300L)
dim <- option("dim", 640L)

one_study <- function(rows, coded_rows, dim, helper) {
  suppressPackageStartupMessages(library(newrllama4))
  source(helper)
  cpu <- function() sum(proc.time()[c("user.self", "sys.self")])
  steps <- list()
  timed <- function(step, expr) {
    started <- cpu()
    value <- suppressMessages(suppressWarnings(expr))
    steps[[step]] <<- cpu() - started
    value
  }
  learnable <- learnable_rows(rows, dim = 3 * dim, seed = 1)
  data <- learnable$data
  data$group <- c("north", "south", "east")[data$id %% 3 + 1]
  states <- c("last_token", "last_token_layer_9", "text_mean_layer_9")
  data$.features <- newrllama4:::features_from_matrix(learnable$x,
                                                      list(model = "gemma-3-270m-q4_k_m.gguf", state = states))
  rm(learnable)
  invisible(gc())
  # the peak from here on is the study's, not the simulation's (Linux: writing 5 resets VmHWM)
  writeLines("5", "/proc/self/clear_refs")
  coded <- timed("review_sample()", review_sample(data, coded_rows, weight = "uniform", seed = 1))
  coded$code <- coded$gold
  coded <- timed("codes through a CSV file", through_csv(coded))
  learned <- timed("learn_labels(features = TRUE)", learn_labels(data, coded, code))
  shares <- timed("label_shares(by =), learned", label_shares(learned, coded, code, by = group, seed = 1))
  timed("label_regression(), learned", label_regression(a ~ z, learned, coded, code, seed = 1))
  # a second round of as many rows where the learned labels are unsure, planned first, its codes through a CSV file
  timed("coded_rows_needed(doubt =)", coded_rows_needed(shares, se = 0.01, doubt = learned))
  both <- timed("review_sample(weight = \"learned\")",
                review_sample(learned, coded_rows, weight = "learned", previous = coded, seed = 2))
  both$code <- both$gold
  both <- timed("two rounds' codes through a CSV file", through_csv(both))
  timed("label_shares(by =), learned, two rounds", label_shares(learned, both, code, by = group, seed = 1))
  learned_again <- timed("learn_labels(), two rounds", learn_labels(data, both, code))
  timed("label_shares(by =), learned from two rounds",
        label_shares(learned_again, both, code, by = group, seed = 1))
  timed("agreement(), two rounds' codes", agreement(both, code, field = ".label", seed = 1))
  # two annotators over every row: the bootstrap's replicates draw the corpus's pairs
  timed("agreement(), learned against zero-shot, every row", agreement(learned$.label, data$.label, seed = 1))
  timed("label_shares(by =), zero-shot", label_shares(data, coded, code, by = group, seed = 1))
  timed("label_regression(), zero-shot", label_regression(a ~ z, data, coded, code, seed = 1))
  status <- readLines("/proc/self/status")
  peak <- as.numeric(gsub("[^0-9]", "", grep("^VmHWM", status, value = TRUE))) / 1024
  list(steps = unlist(steps), peak_mb = peak, learner = manifest(learned)$prompt$learner)
}

helper <- normalizePath(file.path("tests", "testthat", "helper-findings.R"))
started <- Sys.time()
results <- lapply(sizes, function(rows) {
  message(sprintf("%d rows ...", rows))
  callr::r(one_study, list(rows, coded_rows, dim, helper), env = c(callr::rcmd_safe_env(), R_LIBS = Sys.getenv("R_LIBS")))
})
steps <- names(results[[1]]$steps)

# CPU ms per 1,000 corpus rows of each step at each size, the total, and the
# ratio of the largest size's to the smallest's (1.00x: a flat cost per row)
seconds <- sapply(results, function(r) r$steps)
seconds <- rbind(seconds, total = colSums(seconds))
per_thousand <- sweep(seconds, 2, sizes / 1e6, "/")
ratio <- per_thousand[, length(sizes)] / per_thousand[, 1]
cat(sprintf("From annotated rows to findings: %d coded rows, features of 3 x %d dimensions; %.0f s of wall time\n\n",
            coded_rows, dim, as.numeric(Sys.time() - started, units = "secs")))
cat("| step |", paste(sprintf("CPU ms / 1,000 rows at %s", format(sizes, big.mark = ",")), collapse = " | "),
    "| per row at the largest over the smallest |\n")
cat("|---|", strrep("---:|", length(sizes) + 1), "\n", sep = "")
for (step in rownames(per_thousand)) {
  cat(sprintf("| %s | %s | %.2fx |\n", step, paste(sprintf("%.1f", per_thousand[step, ]), collapse = " | "),
              ratio[[step]]))
}
cat(sprintf("| peak RSS (MB) | %s | |\n", paste(sprintf("%.0f", sapply(results, `[[`, "peak_mb")), collapse = " | ")))
cat(sprintf("\nThe learner kept: %s\n", paste(sapply(results, `[[`, "learner"), collapse = ", ")))
