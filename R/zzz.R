# The engine module, and the one through which its values reach R (see
# engine_call()), imported lazily: loading the package starts no Python.
engine_module <- NULL
engine_for_r <- NULL

.onLoad <- function(libname, pkgname) {
  # Prefer the package's own virtualenv unless the user chose a Python already;
  # this only records a preference, Python starts at the first engine call.
  if (!nzchar(Sys.getenv("RETICULATE_PYTHON")) && reticulate::virtualenv_exists(engine_envname)) {
    reticulate::use_virtualenv(engine_envname, required = FALSE)
  }
  engine_module <<- reticulate::import("newrllama4", delay_load = TRUE)
  engine_for_r <<- reticulate::import("newrllama4.for_r", delay_load = TRUE)
}
