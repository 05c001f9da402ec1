# The engine module, and the one through which its values reach R (see
# engine_call()), imported lazily: loading the package starts no Python.
engine_module <- NULL
engine_for_r <- NULL

.onLoad <- function(libname, pkgname) {
  # Python starts only at the first engine call; loading the package never fails for
  # want of an engine (engine() says what is wrong then)
  try_or(use_engine_env(engine_envname), NULL)
  engine_module <<- import_lazily("newrllama4")
  engine_for_r <<- import_lazily("newrllama4.for_r")
}

# reticulate delays an import until Python starts, but imports at once where Python
# runs already (another package started it): a module that cannot be imported then
# is NULL until engine() finds the engine usable (import_engine()).
import_lazily <- function(module) {
  try_or(reticulate::import(module, delay_load = TRUE), NULL)
}

import_engine <- function() {
  if (is.null(engine_module)) utils::assignInMyNamespace("engine_module", reticulate::import("newrllama4"))
  if (is.null(engine_for_r)) utils::assignInMyNamespace("engine_for_r", reticulate::import("newrllama4.for_r"))
}

# The session's state: annotate_texts()'s default model and context (annotate-defaults.R),
# the versions manifest() reports, and whether model_load() has warned about identity.
the <- new.env(parent = emptyenv())
