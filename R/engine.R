#' Is the Python engine installed?
#'
#' `TRUE` when the engine that [install_newrllama()] installs can be used in
#' this session: its Python environment exists (or `RETICULATE_PYTHON` names
#' one, or Python is already running) and holds the engine of this package's
#' version. It never installs anything, and it starts no Python where there is
#' no environment to find, so it is quick to call before examples, tests and
#' vignette chunks that need the engine. Functions that need a missing engine
#' raise an error of class `newrllama4_error_engine_missing`.
#'
#' @return `TRUE` or `FALSE`.
#' @export
#' @examples
#' engine_available()
engine_available <- function() {
  python_to_find <- reticulate::py_available(initialize = FALSE) || nzchar(Sys.getenv("RETICULATE_PYTHON")) ||
    reticulate::virtualenv_exists(engine_envname)
  python_to_find && tryCatch({
    engine()
    TRUE
  }, newrllama4_error = function(e) FALSE)
}

# The engine module, or a classed error that says how to install it.
engine <- function(call = caller_env()) {
  found <- tryCatch(reticulate::py_module_available("newrllama4"), error = function(e) {
    cli::cli_abort(
      c("No Python could be started for the engine of newrllama4.",
        "i" = "Run {.code newrllama4::install_newrllama()} once, then restart R."),
      class = c("newrllama4_error_engine_missing", "newrllama4_error"),
      parent = e,
      call = call
    )
  })
  if (!found) {
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
  check_engine_version(engine_module$`__version__`, call = call)
  engine_module
}

# The engine and the R package are two halves of one release: the R code calls
# the engine's API as it was when the package was built.
check_engine_version <- function(engine_version, call = caller_env()) {
  r_version <- format(package_version(unname(getNamespaceVersion("newrllama4"))))
  if (!identical(engine_version, r_version)) {
    cli::cli_abort(
      c(
        "The Python engine is version {engine_version}, but the newrllama4 R package is {r_version}.",
        "i" = "Run {.code newrllama4::install_newrllama()} again to install the engine this package carries, then restart R.",
        "i" = "Python in use: {.path {reticulate::py_config()$python}}."
      ),
      class = c("newrllama4_error_engine_version", "newrllama4_error"),
      engine_version = engine_version,
      package_version = r_version,
      call = call
    )
  }
  invisible(engine_version)
}

# Call an engine function on a live handle's behalf. Its value comes back with
# every string one R can hold: NUL and lone surrogates become U+FFFD in Python
# (newrllama4.for_r), since R cannot hold them and converting one would fail the
# whole call.
engine_call <- function(fn, ..., call = caller_env()) {
  with_engine(engine_for_r$call(fn, ...), call = call)
}
