# The context an annotation needs: every prompt with its answer in one sequence.
#
# annotate_texts() counts the tokens of its longest prompt before it sends any, so
# that the context it makes for itself holds every row the model's window can, and a
# context given to it that is too small fails once, naming the row, not once per row
# after minutes of work.

# Rows whose estimate is this close to the longest are counted exactly: a text's
# tokens inside a prompt differ from its tokens alone only where they meet the
# template, by a token or two.
estimate_margin <- 16L

# The tokens of the longest row: its prompt (under every example order), what must
# fit beside it for the row to run (`must_fit`), and with its whole answer (`total`).
# `rows` are the rows of `data` whose texts these are. NULL without rows.
tokens_needed <- function(model, layout, instruction, turns, texts, rows, orders, calibration, answer, params) {
  if (length(texts) == 0) return(NULL)
  prompt_lengths <- function(texts) order_prompt_lengths(model, layout, instruction, turns, texts, orders)
  # every text alone, and the prompt around it: an estimate of each row's prompt,
  # exact where the text's tokens do not merge with the template's
  estimates <- prompt_around(model, layout, instruction, turns, orders) + text_tokens(model, texts)
  candidates <- which(estimates >= max(estimates) - estimate_margin)
  exact <- prompt_lengths(texts[candidates])
  longest <- which.max(exact)
  prompt_tokens <- exact[[longest]]
  if (calibration == "content-free") {
    prompt_tokens <- max(prompt_tokens, prompt_lengths(content_free_texts))
  }
  # a label is scored, so its tokens must fit beside the prompt; a generated answer
  # that reaches the end of the window stops there ("length") and the row still runs
  answer_tokens <- answer_tokens(model, answer, params)
  list(row = rows[[candidates[[longest]]]], prompt = prompt_tokens,
       must_fit = prompt_tokens + if (answer$kind == "labels") answer_tokens else 0L,
       total = prompt_tokens + answer_tokens)
}

# Each text's longest prompt over the example orders.
order_prompt_lengths <- function(model, layout, instruction, turns, texts, orders) {
  # a list, so that one plain prompt stays one prompt in Python, not a string of characters
  prompts <- as.list(ensemble_prompts(layout, instruction, turns, texts, orders, "none"))
  lengths <- unlist(engine_call(model$py$prompt_lengths, prompts))
  apply(matrix(lengths, nrow = length(texts)), 1, max)
}

# The tokens of the longest prompt besides its text: the prompt around a
# one-token text, less that token.
prompt_around <- function(model, layout, instruction, turns, orders) {
  order_prompt_lengths(model, layout, instruction, turns, "x", orders) - text_tokens(model, "x")
}

# The tokens an answer needs: the longest label's spelling, or max_tokens.
answer_tokens <- function(model, answer, params) {
  if (answer$kind == "labels") longest_label(model, answer$labels) else as.integer(params$max_tokens)
}

# Each text's tokens alone, without the special tokens (such as beginning of
# sequence) that a prompt gets once.
text_tokens <- function(model, texts) {
  if (length(texts) == 0) return(integer())
  special <- unlist(engine_call(model$py$prompt_lengths, list("x"))) - length(model_tokenize(model, "x", FALSE))
  pmax(as.integer(unlist(engine_call(model$py$prompt_lengths, as.list(texts)))) - special, 0L)
}

# The most tokens of a label's spellings that the engine scores: the label, or the label after a space.
longest_label <- function(model, labels) {
  spellings <- c(labels, paste0(" ", labels))
  max(lengths(lapply(spellings, function(spelling) model_tokenize(model, spelling, add_special = FALSE))))
}

# A given context that cannot hold the longest row fails here, before any row runs.
check_context_holds <- function(context, needed, call = caller_env()) {
  if (is.null(needed)) return(invisible())  # no rows, or a server, which counts its own tokens
  n_ctx <- context$py$n_ctx
  if (needed$must_fit <= n_ctx) return(invisible())
  abort_newrllama4("context_too_small", c(
    "The context holds {n_ctx} tokens per sequence, but row {needed$row} needs {needed$must_fit}.",
    "i" = "Its prompt has {needed$prompt} tokens{if (needed$must_fit > needed$prompt) ', with the longest label' else ''}.",
    "i" = "Create the context with {.code n_ctx = {context_size(needed$total)}L}, or leave {.arg context} out
           and {.fn annotate_texts} sizes its own."
  ), call = call,
  n_ctx = n_ctx, needed = needed$must_fit, row = needed$row)
}

# The window to ask for: the need rounded up to llama.cpp's 256-cell padding, never
# below the 2048 that serves short texts, never past what the model was trained for.
context_size <- function(tokens, trained = Inf) {
  as.integer(min(max(2048, ceiling(tokens / 256) * 256), trained))
}
