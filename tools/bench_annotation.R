# Does an annotation hinge on the order of its worked examples, and what do
# example_orders and calibrate do about it? Accuracy and seconds of
# annotate_texts() for each option, on the two embedded models and two
# labelled corpora that no test uses and nothing was tuned to:
#   - Reuters: tm's acq (50 articles on acquisitions) and crude (20 on crude
#     oil), heading and first 60 words; one article of each is the worked
#     example, the other 68 are annotated;
#   - reviews: 40 one-sentence product reviews written by hand for this
#     benchmark, half positive, half negative; two more are the examples.
# Order A shows the examples as listed, order B reversed. Each run starts from
# an empty prefix cache, so that its seconds are its own.
#   Rscript tools/bench_annotation.R
suppressPackageStartupMessages({
  library(newrllama4)
  library(tm)
})

reuters <- function() {
  data("acq", package = "tm", envir = environment())
  data("crude", package = "tm", envir = environment())
  as_text <- function(doc) {
    words <- strsplit(paste(content(doc), collapse = " "), "\\s+")[[1]]
    paste0(meta(doc, "heading"), ". ", paste(utils::head(words[nzchar(words)], 60), collapse = " "))
  }
  texts <- c(vapply(acq, as_text, ""), vapply(crude, as_text, ""))
  gold <- c(rep("acquisition", length(acq)), rep("oil", length(crude)))
  examples <- c(1, length(acq) + 1)  # the first article of each topic
  list(
    name = "Reuters acq/crude",
    instruction = "Is this news article about a company acquisition or about crude oil? Answer acquisition or oil.",
    labels = c("acquisition", "oil"),
    data = data.frame(text = texts[-examples], gold = gold[-examples]),
    examples = data.frame(text = texts[examples], .label = gold[examples])
  )
}

reviews <- function() {
  positive <- c(
    "The blender crushes ice in seconds and cleans up easily.",
    "These headphones sound rich and stay comfortable all day.",
    "Arrived early, well packed, and works exactly as described.",
    "My kids love this board game; we play it every weekend.",
    "The jacket kept me warm through a very cold winter.",
    "Battery life is superb, easily two days of heavy use.",
    "A sturdy desk that was simple to assemble.",
    "The coffee tastes smooth and the aroma fills the kitchen.",
    "Great value for the price, I would buy it again.",
    "The customer service team replaced the part within a week.",
    "Soft sheets that got even nicer after washing.",
    "The lamp gives a warm light and looks elegant on my shelf.",
    "This backpack has clever pockets and survived a long trip.",
    "The knife is sharp, balanced and a joy to cook with.",
    "Setup took five minutes and the camera picture is crisp.",
    "The shoes fit perfectly and my back pain is gone.",
    "A charming novel that I could not put down.",
    "The vacuum picks up pet hair better than my old one.",
    "Bright colours, strong paper, my drawings look great.",
    "The tent went up quickly and stayed dry in heavy rain."
  )
  negative <- c(
    "The zipper broke the second time I used the bag.",
    "It stopped charging after a month and support never replied.",
    "The screen scratches far too easily.",
    "Smells of chemicals and the smell will not go away.",
    "The instructions were useless and two screws were missing.",
    "Far too loud, the fan sounds like a jet engine.",
    "The colour looked nothing like the photos online.",
    "The toaster burns one side and leaves the other pale.",
    "Cheap plastic that cracked when I dropped it once.",
    "The app crashes every time I open the settings.",
    "The chair wobbles and the cushion flattened within weeks.",
    "Delivery took a month and the box arrived crushed.",
    "The soup was bland and the portion tiny for the price.",
    "My order was wrong and the refund took ages.",
    "The printer jams on almost every page.",
    "These gloves tore at the seams on the first day.",
    "The speaker crackles at any volume above half.",
    "A dull film with a plot that made no sense.",
    "The kettle leaks from the bottom and trips the fuse.",
    "Batteries drained overnight even when switched off."
  )
  list(
    name = "reviews (hand-written)",
    instruction = "Is this product review positive or negative?",
    labels = c("positive", "negative"),
    data = data.frame(text = c(positive, negative), gold = rep(c("positive", "negative"), each = 20)),
    examples = data.frame(text = c("Works perfectly, I am delighted with it.", "It broke within a day, a waste of money."),
                          .label = c("positive", "negative"))
  )
}

options_to_compare <- list(
  "order A" = list(order = 1:2, example_orders = 1L, calibrate = FALSE),
  "order B" = list(order = 2:1, example_orders = 1L, calibrate = FALSE),
  "A+B averaged" = list(order = 1:2, example_orders = 2L, calibrate = FALSE),
  "calibrated A" = list(order = 1:2, example_orders = 1L, calibrate = TRUE),
  "calibrated B" = list(order = 2:1, example_orders = 1L, calibrate = TRUE),
  "calibrated, A+B averaged" = list(order = 1:2, example_orders = 2L, calibrate = TRUE)
)

models <- list(
  "Gemma 3 270M" = function() context_create(model_load("gemma3-270m"), n_ctx = 1024L, n_seq_max = 8L),
  "SmolLM2 135M" = function() context_create(model_load("smollm2-135m-instruct"), n_ctx = 1024L, n_seq_max = 8L)
)

rows <- list()
for (model in names(models)) {
  ctx <- models[[model]]()
  for (corpus in list(reuters(), reviews())) {
    for (option in names(options_to_compare)) {
      settings <- options_to_compare[[option]]
      context_clear_cache(ctx)
      seconds <- system.time(out <- suppressWarnings(annotate_texts(
        corpus$data, text, corpus$instruction, labels = corpus$labels,
        examples = corpus$examples[settings$order, ], example_orders = settings$example_orders,
        calibrate = settings$calibrate, context = ctx, progress = FALSE
      )))[["elapsed"]]
      rows[[length(rows) + 1]] <- data.frame(
        model = model, corpus = corpus$name, option = option,
        accuracy = mean(as.character(out$.label) == corpus$data$gold, na.rm = TRUE),
        order_disagreement = rlang::`%||%`(manifest(out)$prompt$order_disagreement, NA_real_),
        seconds = seconds
      )
      message(sprintf("%s, %s, %s: accuracy %.3f, %.1f s", model, corpus$name, option,
                      rows[[length(rows)]]$accuracy, seconds))
    }
  }
  context_free(ctx)
}
results <- do.call(rbind, rows)
order_a <- ave(results$seconds, results$model, results$corpus, FUN = function(seconds) seconds[[1]])
results$cost <- sprintf("%.2fx", results$seconds / order_a)
cat("\n| model | corpus | option | accuracy | orders disagree | seconds | cost vs order A |\n|---|---|---|---:|---:|---:|---:|\n")
with(results, cat(sprintf("| %s | %s | %s | %.3f | %s | %.1f | %s |\n", model, corpus, option, accuracy,
                          ifelse(is.na(order_disagreement), "", sprintf("%.2f", order_disagreement)), seconds, cost),
                  sep = ""))
