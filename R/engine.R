engine_envname <- "r-newrllama4"

#' Install the Python engine
#'
#' Creates (or reuses) a Python virtual environment and installs the
#' newrllama4 engine into it, with llama.cpp and the default model. Run it once;
#' the package finds the environment by itself afterwards (unless
#' `RETICULATE_PYTHON` points elsewhere). Building llama.cpp takes a few minutes.
#'
#' @param envname Name of the virtual environment.
#' @param python_source Where to install the engine from: the path of the
#'   engine's source directory (`python/` in the repository), or a pip
#'   requirement. `NULL` uses the `NEWRLLAMA4_PYTHON_SOURCE` environment
#'   variable, else `"newrllama4[default-model]"`.
#' @param ... Passed on to [reticulate::virtualenv_install()].
#' @param python The Python used to create a new environment; `NULL` lets
#'   reticulate choose.
#' @return The environment name, invisibly.
#' @export
#' @examples
#' \dontrun{
#' install_newrllama(python_source = "path/to/newrllama4/python")
#' }
install_newrllama <- function(envname = engine_envname, python_source = NULL, ..., python = NULL) {
  check_string(envname, "envname")
  if (!is.null(python_source)) check_string(python_source, "python_source")
  requirement <- engine_requirement(python_source)
  if (!reticulate::virtualenv_exists(envname)) {
    reticulate::virtualenv_create(envname, python = python)
  }
  reticulate::virtualenv_install(envname, packages = requirement, ...)
  cli::cli_alert_success("Installed the newrllama4 engine into {.val {envname}}. Restart R to use it.")
  invisible(envname)
}

engine_requirement <- function(python_source) {
  if (is.null(python_source)) {
    python_source <- Sys.getenv("NEWRLLAMA4_PYTHON_SOURCE", "newrllama4[default-model]")
  }
  if (dir.exists(python_source)) {
    paste0(normalizePath(python_source), "[default-model]")
  } else {
    python_source
  }
}

# The engine module, or a classed error that says how to install it.
engine <- function(call = caller_env()) {
  if (!reticulate::py_module_available("newrllama4")) {
    cli::cli_abort(
      c(
        "The Python engine of newrllama4 is not installed.",
        "i" = "Run {.code newrllama4::install_newrllama()} once, then restart R.",
        "i" = "Python in use: {.path {reticulate::py_config()$python}}."
      ),
      class = c("newrllama4_error_engine_missing", "newrllama4_error"),
      call = call
    )
  }
  if (!reticulate::py_has_attr(engine_module, "Model")) {
    cli::cli_abort(
      c(
        "Python found something else under the name {.pkg newrllama4}, not the engine.",
        "i" = "A folder named {.file newrllama4} in the working directory can shadow it; run R elsewhere."
      ),
      class = c("newrllama4_error_engine_missing", "newrllama4_error"),
      call = call
    )
  }
  engine_module
}

# Call an engine function on a live handle's behalf. Its value comes back with
# every string one R can hold: NUL and lone surrogates become U+FFFD in Python
# (newrllama4.for_r), since R cannot hold them and converting one would fail the
# whole call.
engine_call <- function(fn, ..., call = caller_env()) {
  with_engine(engine_for_r$call(fn, ...), call = call)
}
