#' Load a model
#'
#' Loads a GGUF model file once; any number of contexts can then share it.
#' Without a path, loads the embedded default model, Gemma 3 270M (a small
#' base model: good for trying things out, not for hard tasks).
#'
#' Two models come with the engine ([install_newrllama()]) and load by name:
#' `"gemma3-270m"`, the default, for plain completion, and
#' `"smollm2-135m-instruct"`, SmolLM2 135M Instruct, an instruction-tuned model
#' with a chat template (see [apply_chat_template()]). A string without a
#' path separator (`/`, or `\\` on Windows) that does not end in `.gguf` is a
#' model name; anything else is a path, so a file in the working directory
#' named like a model is `"./name"`.
#'
#' A model lives in this R session only: one saved and read back (e.g. with
#' [saveRDS()] and [readRDS()]) raises `newrllama4_error_closed` when used;
#' load it again.
#'
#' @param model_path Path of a GGUF file, a model name (see Details), or
#'   `NULL` for the default model.
#' @param n_gpu_layers Layers to offload to a GPU (`-1` for all); `0` runs on the CPU.
#' @param use_mmap Map the file into memory instead of reading it.
#' @return A `newrllama_model` object.
#' @seealso [context_create()], [model_free()]
#' @export
#' @examplesIf engine_available()
#' model <- model_load()
#' model
#' chat_model <- model_load("smollm2-135m-instruct")
model_load <- function(model_path = NULL, n_gpu_layers = 0L, use_mmap = TRUE) {
  if (!is.null(model_path) && !is_model_name(model_path)) model_path <- check_model_path(model_path)
  n_gpu_layers <- check_whole(n_gpu_layers, "n_gpu_layers", min = -1)
  check_flag(use_mmap, "use_mmap")
  nl <- engine()
  if (is_model_name(model_path)) check_model_name(model_path, unlist(nl$MODEL_NAMES))
  py <- with_engine(nl$Model(path = model_path, n_gpu_layers = n_gpu_layers, use_mmap = use_mmap))
  structure(list(py = py), class = "newrllama_model")
}

#' Free a model
#'
#' Releases the model's memory now rather than at garbage collection. Contexts
#' of the model are freed too. Using the model afterwards raises an error of
#' class `newrllama4_error_closed`.
#'
#' @param model A model from [model_load()].
#' @return `model`, invisibly.
#' @export
#' @examplesIf engine_available()
#' model <- model_load()
#' model_free(model)
model_free <- function(model) {
  check_model(model, live = FALSE)
  if (handle_state(model) == "live") with_engine(model$py$close())
  invisible(model)
}

#' @export
format.newrllama_model <- function(x, ...) {
  py <- x$py
  format_handle(x, "{.cls newrllama_model} {.path {py$path}}", c(
    "{py$description}: {format_count(py$n_params)} parameters, {format_bytes(py$size)}",
    "vocabulary: {format_count(py$n_vocab)} tokens; trained context: {py$n_ctx_train} tokens",
    "GPU layers: {py$n_gpu_layers}; mmap: {py$use_mmap}"
  ))
}

#' @export
print.newrllama_model <- function(x, ...) print_lines(x, ...)
