#' newrllama4: fast, isolated parallel generation with local language models
#'
#' Load a model with [model_load()], create a context with [context_create()],
#' then run many prompts at once with [generate_parallel()]. The engine is a
#' Python package on top of llama.cpp; install it once with
#' [install_newrllama4()].
#'
#' @keywords internal
"_PACKAGE"

## usethis namespace: start
#' @importFrom rlang caller_env current_env .data %||%
#' @importFrom stats coef confint nobs vcov
## usethis namespace: end
NULL
