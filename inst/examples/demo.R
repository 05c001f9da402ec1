# newrllama4 demo: 16 prompts through generate_parallel() on the default model.
# Run with `make demo`, or `Rscript inst/examples/demo.R` once the engine is installed.
library(newrllama4)

model <- model_load()  # Gemma 3 270M, embedded
print(model)
ctx <- context_create(model, n_ctx = 512L, n_seq_max = 8L)
print(ctx)

# a base model continues text, so each prompt is the start of an answer
prompts <- c(
  france = "The capital of France is the city of",
  water = "Water is made of hydrogen and",
  week = "Monday, Tuesday, Wednesday,",
  opposite = "The opposite of hot is",
  planet = "The largest planet in the solar system is",
  author = "Romeo and Juliet was written by William",
  colour = "The colour of a clear sky is",
  animal = "A baby cat is called a",
  math = "Two plus two equals",
  ocean = "The largest ocean on Earth is the",
  language = "People in Brazil speak",
  season = "The season after winter is",
  metal = "The chemical symbol Au stands for",
  freeze = "Water freezes at a temperature of",
  fruit = "A yellow fruit that monkeys love is the",
  moon = "The first person to walk on the Moon was"
)

answers <- generate_parallel(ctx, prompts, max_tokens = 16L, temperature = 0,
                             stop = "\n", progress = interactive())

for (name in names(prompts)) {
  cat(sprintf("%-9s %s%s\n", name, prompts[[name]], answers[[name]]))
}

stats <- attr(answers, "stats")
cat(sprintf(
  "\n%d prompts, %d failed | %d prompt tokens, %d generated | %.1f s | %.0f tokens/s | peak %d at once\n",
  stats$prompts, stats$failures, stats$prompt_tokens, stats$generated_tokens, stats$total_seconds,
  stats$generation_tokens_per_s, stats$peak_active_sequences
))
