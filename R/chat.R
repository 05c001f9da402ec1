#' Format a conversation with the model's chat template
#'
#' @param model A model from [model_load()].
#' @param messages A list of messages, each a list with `role` (such as
#'   `"system"`, `"user"`, `"assistant"`) and `content` strings.
#' @param add_assistant End with the opening of the assistant's turn, so that
#'   generation continues as the assistant.
#' @return A single string: a prompt for [generate()] or [generate_parallel()].
#'   A model without a chat template raises `newrllama4_error_chat_template`.
#' @seealso [model_load()]; [generate_parallel()] to run the prompts it makes; [annotate_texts()], which applies it for you.
#' @export
#' @examplesIf engine_available()
#' messages <- list(list(role = "user", content = "Hello!"))
#' # the embedded default model is a base model: it has no chat template
#' model <- model_load()
#' tryCatch(apply_chat_template(model, messages),
#'          newrllama4_error_chat_template = function(e) conditionMessage(e))
#' \dontrun{
#' chat_model <- model_load("path/to/an-instruct-model.gguf")
#' cat(apply_chat_template(chat_model, messages))
#' }
apply_chat_template <- function(model, messages, add_assistant = TRUE) {
  check_model(model)
  messages <- check_messages(messages)
  check_flag(add_assistant, "add_assistant")
  engine_call(model$py$apply_chat_template, messages, add_generation_prompt = add_assistant)
}

check_messages <- function(messages, arg = "messages", call = caller_env()) {
  is_message <- function(m) {
    is.list(m) && rlang::is_string(m$role) && rlang::is_string(m$content)
  }
  if (!is.list(messages) || length(messages) == 0 || is.data.frame(messages)) {
    abort_invalid("{.arg {arg}} must be a non-empty list of messages, not {.obj_type_friendly {messages}}.",
                  arg, call)
  }
  bad <- which(!vapply(messages, is_message, NA))
  if (length(bad) > 0) {
    problem <- cli::pluralize("message{?s} {positions(bad)} do{?es/} not")
    abort_invalid("Each message of {.arg {arg}} needs {.field role} and {.field content} strings; {problem}.",
                  arg, call)
  }
  lapply(messages, function(m) {
    list(role = as_utf8(m$role, arg, call), content = as_utf8(m$content, arg, call))
  })
}
