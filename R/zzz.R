# The engine module, and the one through which its values reach R (see
# engine_call()), imported lazily: loading the package starts no Python.
engine_module <- NULL
engine_for_r <- NULL

.onLoad <- function(libname, pkgname) {
  use_engine_env(engine_envname)  # Python starts only at the first engine call
  engine_module <<- reticulate::import("newrllama4", delay_load = TRUE)
  engine_for_r <<- reticulate::import("newrllama4.for_r", delay_load = TRUE)
}
