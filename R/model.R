#' Load a model
#'
#' Loads a GGUF model file once; any number of contexts can then share it.
#' Without a path, loads the embedded default model, Gemma 3 270M (a small
#' base model: good for trying things out, not for hard tasks).
#'
#' Two models come with the engine ([install_newrllama4()]) and load by name:
#' `"gemma3-270m"`, the default, for plain completion, and
#' `"smollm2-135m-instruct"`, SmolLM2 135M Instruct, an instruction-tuned model
#' with a chat template (see [apply_chat_template()]). A string without a
#' path separator (`/`, or `\\` on Windows) that does not end in `.gguf` is a
#' model name; anything else is a path, so a file in the working directory
#' named like a model is `"./name"`.
#'
#' @section Where a model comes from:
#' `source` can also say where to get the file:
#'
#' * `"hf://OWNER/REPO/FILE.gguf"`: a file of a Hugging Face Hub repository,
#'   fetched by the Python package `huggingface_hub` into the Hub's shared cache
#'   (`~/.cache/huggingface/hub`, or `HF_HUB_CACHE`), where a model another tool
#'   downloaded is found and not fetched again. `FILE` may be a pattern such as
#'   `"*Q4_K_M.gguf"`: it must match one model of the repository, else the error
#'   lists the candidates. A split model (`...-00001-of-00003.gguf`) brings every
#'   part. `HF_TOKEN` is sent for gated and private repositories, `HF_ENDPOINT`
#'   names a mirror, and `HF_HUB_OFFLINE=1` reads the cache without a request
#'   (without it, a load with the network gone also falls back on the cache,
#'   after huggingface_hub's retries).
#' * `"https://..."` or `"http://..."`: a GGUF file, streamed into the engine's
#'   cache folder (the platform's user cache folder, such as
#'   `~/.cache/newrllama4` on Linux, or `NEWRLLAMA4_CACHE`) under a temporary
#'   name, renamed once complete and checked against `sha256` when given. A
#'   broken connection is resumed (an HTTP Range request), also by the next
#'   `model_load()` when the call gave up. A second load reads the cached file
#'   without a request.
#' * `"ollama:NAME"` or `"ollama:NAME:TAG"`: a model pulled with Ollama, read in
#'   place from its store (`OLLAMA_MODELS`, then `~/.ollama/models`, then the
#'   Linux service's `/usr/share/ollama/.ollama/models`), with no copy and no
#'   Ollama server.
#'
#' These environment variables are read when the model is loaded, so
#' [Sys.setenv()] in the session works. Before a download, a message says its
#' size and destination, and a progress bar follows it (with `progress = TRUE`,
#' the default in interactive sessions: not when knitting, nor in `Rscript`).
#' Failures are classed conditions, all of class
#' `newrllama4_error_model_load`: `newrllama4_error_model_not_found` (no such
#' repository, file, URL or Ollama model; field `candidates` lists what
#' exists), `newrllama4_error_ambiguous_model` (a pattern matching several
#' models), `newrllama4_error_gated_model` (no token with access),
#' `newrllama4_error_download` (the network failed; what arrived is kept and
#' the next load resumes), `newrllama4_error_checksum_mismatch` and
#' `newrllama4_error_not_gguf`. [manifest()] records where the model came from:
#' the repository, file and commit, the URL, or the Ollama name and digest.
#'
#' Answers are the ones each prompt gets alone only where the engine set up
#' llama.cpp's numerical switches before anything else in the process did. When
#' something came first (llama-cpp-python's own `Llama`, run through
#' reticulate, or `GGML_CPU_TILED_MM` set in the environment), the first
#' `model_load()` of the session warns, with class
#' `newrllama4_warning_identity` (field `problems`), and [manifest()] records
#' `identity_guaranteed = FALSE`.
#'
#' A model lives in this R session only: one saved and read back (e.g. with
#' [saveRDS()] and [readRDS()]) raises `newrllama4_error_closed` when used;
#' load it again.
#'
#' @param source Path of a GGUF file, a model name, an `hf://`, `https://`,
#'   `http://` or `ollama:` source (see Details), or `NULL` for the default model.
#' @param n_gpu_layers Layers to offload to a GPU (`-1` for all); `0` runs on the CPU.
#' @param use_mmap Map the file into memory instead of reading it.
#' @param sha256 For a URL: the SHA-256 the file must have (64 hexadecimal
#'   digits), or `NULL` not to check.
#' @param progress Say when a download starts and show its progress bar.
#' @return A `newrllama4_model` object.
#' @seealso [context_create()], [model_free()]
#' @export
#' @examplesIf engine_available()
#' model <- model_load()
#' model
#' chat_model <- model_load("smollm2-135m-instruct")
#' \dontrun{
#' # these download (once) from the network
#' model_load("hf://bartowski/Llama-3.2-3B-Instruct-GGUF/*Q4_K_M.gguf")
#' model_load("https://example.org/models/model-Q4_K_M.gguf", sha256 = "<64 hex digits>")
#' # a model pulled with `ollama pull llama3.2:3b`
#' model_load("ollama:llama3.2:3b")
#' }
model_load <- function(source = NULL, n_gpu_layers = 0L, use_mmap = TRUE, sha256 = NULL,
                       progress = rlang::is_interactive()) {
  named <- !is_model_source(source) && is_model_name(source)
  if (is_model_source(source)) {
    source <- check_text(source, "source")
  } else if (!is.null(source) && !named) {
    source <- check_model_path(source)
  }
  n_gpu_layers <- check_whole(n_gpu_layers, "n_gpu_layers", min = -1)
  check_flag(use_mmap, "use_mmap")
  check_flag(progress, "progress")
  if (!is.null(sha256)) check_string(sha256, "sha256")
  # the engine checks a model's name and the hash's form (InvalidArgumentError, on `source` and `sha256`)
  nl <- engine()
  sync_source_settings()
  reporter <- if (progress) download_reporter() else NULL
  problems <- unlist(with_engine(engine_for_r$identity_problems()))  # before the first model
  py <- engine_call(nl$Model, path = source, n_gpu_layers = n_gpu_layers, use_mmap = use_mmap,
                    sha256 = sha256, progress = reporter)
  warn_identity_once(problems)
  structure(list(py = py), class = "newrllama4_model")
}

# ggml reads its settings once per process; where something set it up before the
# engine (llama-cpp-python's Llama through reticulate, or GGML_CPU_TILED_MM in the
# environment), batched answers may differ from the same prompt alone for the rest of
# the session: said once a session, and in every manifest (identity_guaranteed).
warn_identity_once <- function(problems) {
  if (length(problems) == 0 || isTRUE(the$identity_warned)) return(invisible(NULL))
  the$identity_warned <- TRUE
  warn_newrllama4(
    "identity",
    c("Answers in this R session may differ from the same prompts run alone: ggml runs with other settings than the engine's.",
      rlang::set_names(escape_braces(problems), rep("x", length(problems))),
      "i" = "Load models in a fresh R session before anything else uses llama.cpp, with those variables unset."), problems = problems
  )
}

# Where to get a model rather than a path or a name (the engine resolves it: sources.py).
is_model_source <- function(x) {
  rlang::is_string(x) && grepl("^(hf://|https?://|ollama:)", x)
}

# The settings the engine reads when it resolves a model. Python copies the environment
# when it starts, so a variable set later with Sys.setenv() would not reach it otherwise.
source_settings <- c("HF_TOKEN", "HF_ENDPOINT", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "OLLAMA_MODELS",
                     "NEWRLLAMA4_CACHE")

sync_source_settings <- function() {
  environ <- reticulate::import("os", convert = FALSE)$environ
  for (name in source_settings) {
    value <- Sys.getenv(name, unset = NA)
    if (is.na(value)) environ$pop(name, NULL) else environ$`__setitem__`(name, value)
  }
}

# The engine's download reports (newrllama4.sources.DownloadProgress) as a message
# before each file, with its size and destination, and a cli progress bar. The bars
# belong to the caller's frame (model_load()'s), so they end with the call.
download_reporter <- function(envir = parent.frame()) {
  state <- new.env(parent = emptyenv())
  function(report) {
    if (!identical(state$file, report$file)) {
      state$file <- report$file
      size <- if (is.null(report$total)) "size unknown" else format_bytes(report$total)
      cli::cli_inform("Downloading {.file {report$file}} ({size}) into {.path {report$destination}}")
      state$bar <- cli::cli_progress_bar(
        format = "{cli::pb_bar} {cli::pb_current_bytes}/{cli::pb_total_bytes} {cli::pb_rate_bytes} ETA {cli::pb_eta}",
        total = report$total %||% NA, .envir = envir
      )
    }
    cli::cli_progress_update(id = state$bar, set = report$done, .envir = envir)
  }
}

#' Free a model
#'
#' Releases the model's memory now rather than at garbage collection. Contexts
#' of the model are freed too. Using the model afterwards raises an error of
#' class `newrllama4_error_closed`.
#'
#' @param model A model from [model_load()].
#' @return `model`, invisibly.
#' @seealso [model_load()]; [context_free()] for a context.
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
format.newrllama4_model <- function(x, ...) {
  py <- x$py
  format_handle(x, "{.cls newrllama4_model} {.path {py$path}}", c(
    "{py$description}: {format_count(py$n_params)} parameters, {format_bytes(py$size)}",
    "vocabulary: {format_count(py$n_vocab)} tokens; trained context: {py$n_ctx_train} tokens",
    "GPU layers: {py$n_gpu_layers}; mmap: {py$use_mmap}"
  ))
}

#' @export
print.newrllama4_model <- function(x, ...) print_lines(x, ...)
