# The prompts of annotate_texts(): the worked examples as conversation turns, the
# labels they may answer with, and the layout each text's prompt takes.

# Each worked example as a (user text, assistant answer) pair.
example_turns <- function(examples, text, answer, call = caller_env()) {
  if (is.null(examples)) return(list())
  if (!is.data.frame(examples) || nrow(examples) == 0) {
    abort_invalid("{.arg examples} must be a data frame with one row per worked example.", "examples", call)
  }
  missing_columns <- setdiff(answer$example_columns, names(examples))
  if (length(missing_columns) > 0) {
    abort_invalid("{.arg examples} needs the answer column{?s} {.field {missing_columns}}.", "examples", call)
  }
  if (answer$kind == "labels") check_example_labels(examples$.label, answer$labels, call)
  texts <- row_texts(examples, text, "text", call, of = "examples")
  lapply(seq_len(nrow(examples)), function(i) {
    list(text = texts[[i]], answer = as.character(answer$example_answer(examples[i, , drop = FALSE])))
  })
}

# Labels are checked here, before the examples are and anything runs; for
# generate_parallel() the engine checks them.
check_labels <- function(labels, arg, call) {
  if (!is.character(labels) || length(labels) < 2 || anyNA(labels) || any(labels == "") || anyDuplicated(labels)) {
    abort_invalid("{.arg {arg}} must hold at least two distinct, non-empty labels.", arg, call)
  }
  as_utf8(labels, arg, call)
}

# A worked example answered with a label the model may not give teaches it a
# wrong answer, silently: refused, naming the examples.
check_example_labels <- function(example_labels, labels, call) {
  example_labels <- as.character(example_labels)
  wrong <- which(is.na(example_labels) | !example_labels %in% labels)
  if (length(wrong) > 0) {
    abort_newrllama4(
      "example_label",
      c("{cli::qty(length(wrong))}Worked example{?s} {positions(wrong)} of {.arg examples} {?has a/have}
         {.field .label} not among {.arg labels}: {.val {example_labels[wrong]}}.",
        "i" = "{.arg labels}: {.val {labels}}."),
      argument = "examples", examples = wrong, call = call
    )
  }
}

# One prompt per text: a conversation -- the instruction as the system turn, each
# example as a user and an assistant turn, the text as the last user turn -- that
# the engine lays out with the model's chat template, or the server with its own;
# for a local model without a template, a plain layout.
render_prompts <- function(layout, instruction, turns, texts) {
  if (layout == "plain") {
    shots <- vapply(turns, function(t) sprintf("Text: %s\nAnswer: %s\n\n", t$text, t$answer), "")
    return(sprintf("%s\n\n%sText: %s\nAnswer:", instruction, paste(shots, collapse = ""), texts))
  }
  shots <- unlist(lapply(turns, function(t) {
    list(list(role = "user", content = t$text), list(role = "assistant", content = t$answer))
  }), recursive = FALSE)
  conversation <- c(list(list(role = "system", content = instruction)), shots)
  lapply(texts, function(text) c(conversation, list(list(role = "user", content = text))))
}

# A server is sent chat messages: an instruction model behind vLLM or llama-server
# has its template there, and its /models list does not say whether it has one.
prompts_layout <- function(context) {
  if (inherits(context, "newrllama4_remote_context")) return("server chat template")
  model_layout(context$model)
}

model_layout <- function(model) {
  if (is.null(model$py$chat_template)) "plain" else "chat template"
}
