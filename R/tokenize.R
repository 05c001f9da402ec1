#' Tokenize and detokenize text
#'
#' `model_tokenize()` turns a string into the model's token ids;
#' `model_detokenize()` turns token ids back into text. Token ids can be passed
#' to [generate()] as the prompt. (The names carry `model_` because readr,
#' which the tidyverse attaches, exports a `tokenize()` of its own.)
#'
#' @param model A model from [model_load()].
#' @param text A single string.
#' @param add_special Add the model's special tokens (such as the
#'   beginning-of-sequence token).
#' @param tokens An integer vector of token ids.
#' @return `model_tokenize()`: an integer vector. `model_detokenize()`: a single string.
#' @seealso [model_load()]; [passage_options()], which counts passages' tokens with it.
#' @export
#' @examplesIf engine_available()
#' model <- model_load()
#' ids <- model_tokenize(model, "Hello world")
#' ids
#' model_detokenize(model, ids)
model_tokenize <- function(model, text, add_special = TRUE) {
  check_model(model)
  text <- check_text(text, "text")
  check_flag(add_special, "add_special")
  as.integer(unlist(with_engine(model$py$tokenize(text, add_special = add_special))))
}

#' @rdname model_tokenize
#' @export
model_detokenize <- function(model, tokens) {
  check_model(model)
  check_tokens(tokens, "tokens")
  engine_call(model$py$detokenize, as.list(as.integer(tokens)))
}

check_tokens <- function(tokens, arg, call = caller_env()) {
  if (!is.numeric(tokens) || anyNA(tokens) || any(tokens != round(tokens)) || any(tokens < 0)) {
    abort_invalid("{.arg {arg}} must be a vector of non-negative whole token ids, not {.obj_type_friendly {tokens}}.",
                  arg, call)
  }
  invisible(tokens)
}
