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
