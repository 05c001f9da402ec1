# R-side overhead of one generate_parallel() call: the call's wall time in R
# against the engine's own total for the same call, on the default model.
# Usage (after `make setup`): Rscript tools/bench_r_overhead.R [n_prompts] [max_tokens] [repeats]
library(newrllama4)

args <- as.integer(commandArgs(TRUE))
n_prompts <- if (length(args) >= 1) args[[1]] else 32L
max_tokens <- if (length(args) >= 2) args[[2]] else 32L
repeats <- if (length(args) >= 3) args[[3]] else 3L

model <- model_load()
ctx <- context_create(model, n_ctx = 512L, n_seq_max = 32L)
prompts <- sprintf("Here is a long, detailed essay about topic number %d.\n\n", seq_len(n_prompts))
invisible(generate_parallel(ctx, prompts[1:4], max_tokens = 4L, temperature = 0, progress = FALSE))  # warm-up

rows <- lapply(seq_len(repeats), function(i) {
  wall <- system.time(out <- generate_parallel(ctx, prompts, max_tokens = max_tokens, temperature = 0,
                                               progress = FALSE))[["elapsed"]]
  engine <- attr(out, "stats")$total_seconds
  data.frame(run = i, r_seconds = wall, engine_seconds = engine, overhead = (wall - engine) / engine)
})
result <- do.call(rbind, rows)
print(result, digits = 3)
cat(sprintf("\nmedian R overhead: %.2f%% of the engine's time (%d prompts x %d tokens)\n",
            100 * stats::median(result$overhead), n_prompts, max_tokens))
