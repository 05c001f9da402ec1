# Which of the model's hidden states makes the better features of a row: the
# annotation prompt's last token, which annotate_texts(features = TRUE) keeps
# from the label pass, or the mean over the text's own tokens, llama.cpp's
# pooled embedding (llama-cpp-python's Llama(embedding = TRUE, pooling MEAN) on
# the text alone, in a Python process of its own)? On the labelled corpora of
# tools/annotation-corpora.R and both embedded models: the cross-validated
# accuracy of a ridge logistic regression (glmnet, alpha 0, lambda by
# cv.glmnet inside each training fold) on each kind of features, 5 folds
# repeated 4 times, beside the zero-shot labels and the majority label.
#   Rscript tools/bench_features.R [corpus ...]   (default: reuters reviews words parts_of_speech_five)
suppressPackageStartupMessages({
  library(newrllama4)
  library(tm)
})
source(file.path("tools", "annotation-corpora.R"))

corpora <- list(reuters = reuters, reviews = reviews, words = words, parts_of_speech_five = parts_of_speech_five)
if (length(commandArgs(TRUE)) > 0) corpora <- corpora[commandArgs(TRUE)]
models <- c("Gemma 3 270M" = "gemma3-270m", "SmolLM2 135M" = "smollm2-135m-instruct")

# llama.cpp's mean-pooled embedding of each text alone, one row per text
mean_pooled <- function(model_path, texts) {
  input <- tempfile(fileext = ".json")
  output <- tempfile(fileext = ".json")
  jsonlite::write_json(texts, input)
  script <- paste(
    "import json, sys, llama_cpp",
    "llm = llama_cpp.Llama(sys.argv[1], embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,",
    "                      n_ctx=512, n_threads=2, verbose=False)",
    "json.dump([llm.embed(t) for t in json.load(open(sys.argv[2]))], open(sys.argv[3], 'w'))",
    sep = "\n"
  )
  status <- system2(Sys.getenv("RETICULATE_PYTHON", "python3"), c("-c", shQuote(script), model_path, input, output))
  stopifnot(status == 0)
  as.matrix(jsonlite::read_json(output, simplifyVector = TRUE))
}

# Cross-validated accuracy of a ridge logistic regression on `x`
cv_accuracy <- function(x, gold, folds = 5L, repeats = 4L) {
  gold <- factor(gold)
  family <- if (nlevels(gold) > 2) "multinomial" else "binomial"
  mean(vapply(seq_len(repeats), function(r) {
    fold <- withr::with_seed(r, sample(rep_len(seq_len(folds), length(gold))))
    predicted <- character(length(gold))
    for (k in seq_len(folds)) {
      train <- fold != k
      fit <- glmnet::cv.glmnet(x[train, ], gold[train], family = family, alpha = 0, nfolds = 5L)
      predicted[!train] <- as.character(stats::predict(fit, x[!train, , drop = FALSE], s = "lambda.min",
                                                       type = "class"))
    }
    mean(predicted == gold)
  }, 0))
}

rows <- list()
for (model in names(models)) {
  ctx <- context_create(model_load(models[[model]]), n_ctx = 1024L, n_seq_max = 8L)
  for (corpus in lapply(corpora, function(make) make())) {
    annotated <- suppressWarnings(annotate_texts(corpus$data, text, corpus$instruction, labels = corpus$labels,
                                                 context = ctx, progress = FALSE, features = TRUE))
    last_token <- newrllama4:::row_features(annotated)
    pooled <- mean_pooled(ctx$model$py$path, corpus$data$text)
    rows[[length(rows) + 1]] <- data.frame(
      model = model, corpus = corpus$name, rows = nrow(corpus$data),
      majority = max(table(corpus$data$gold)) / nrow(corpus$data),
      zero_shot = mean(as.character(annotated$.label) == corpus$data$gold),
      last_token = cv_accuracy(last_token, corpus$data$gold),
      mean_pooled = cv_accuracy(pooled, corpus$data$gold)
    )
    message(paste(utils::capture.output(print(rows[[length(rows)]], row.names = FALSE, digits = 3)), collapse = "\n"))
  }
}
results <- do.call(rbind, rows)
print(results, row.names = FALSE, digits = 3)
