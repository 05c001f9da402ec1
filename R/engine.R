#' Is the Python engine installed?
#'
#' `TRUE` when the engine that [install_newrllama4()] installs can be used in
#' this session: its Python environment exists (or `RETICULATE_PYTHON` names
#' one, or Python is already running) and holds the engine of this package's
#' version. It never installs anything, never raises an error, and starts no
#' Python where there is no environment to find, so it is quick to call before
#' examples, tests and vignette chunks that need the engine.
#'
#' When the answer is `FALSE`, its attribute `reason` says what is wrong and
#' how to fix it, in the words of the error that a function needing the engine
#' would raise; `quiet = FALSE` also shows it as a message. [newrllama4_sitrep()]
#' reports the whole setup, for a bug report.
#'
#' @section Engine errors:
#' A function that needs an engine it cannot use raises an error of class
#' `newrllama4_error_engine_missing` (and `newrllama4_error`), whose message
#' names the problem and its fix. A second class says which problem it is:
#' \describe{
#'   \item{`newrllama4_error_engine_python`}{No Python can be started:
#'     `RETICULATE_PYTHON` (or `RETICULATE_PYTHON_ENV`,
#'     `RETICULATE_PYTHON_FALLBACK`) names a Python that does not exist or is
#'     empty, or the engine's virtual environment lost its Python (deleted, or
#'     the Python it was made from was upgraded or removed).}
#'   \item{`newrllama4_error_engine_not_installed`}{The Python in use has no
#'     engine: run [install_newrllama4()].}
#'   \item{`newrllama4_error_engine_other_python`}{Python was already started in
#'     this session with another interpreter than the engine's (by reticulate
#'     or another package): restart R.}
#'   \item{`newrllama4_error_engine_import`}{The engine is installed but cannot
#'     be imported, e.g. llama.cpp's library is missing or was built for another
#'     machine.}
#'   \item{`newrllama4_error_engine_shadowed`}{Something else named
#'     `newrllama4` (a folder in the working directory) hides the engine.}
#'   \item{`newrllama4_error_engine_version`}{The engine's version is not the
#'     R package's, as after updating the package without running
#'     [install_newrllama4()] again; fields `engine_version` and
#'     `package_version`.}
#' }
#' Every one has the field `python`: the Python in use (`NA` if none started).
#'
#' @param quiet If `FALSE`, say why the engine cannot be used, as a message.
#' @return `TRUE` or `FALSE`; a `FALSE` has the attribute `reason`.
#' @seealso [newrllama4_sitrep()], [install_newrllama4()]
#' @export
#' @examples
#' engine_available()
#' attr(engine_available(), "reason")
engine_available <- function(quiet = TRUE) {
  check_flag(quiet, "quiet")
  reason <- tryCatch({
    problem <- if (engine_state$ready) NULL else if (python_to_find()) engine_problem() else not_installed_problem()
    if (is.null(problem)) NULL else plain_message(engine_error(problem))
  }, error = function(e) {
    paste("The engine could not be checked:", safe_message(e))
  })
  if (is.null(reason)) return(TRUE)
  if (!isTRUE(quiet)) message(reason)
  structure(FALSE, reason = reason)
}

# Where nothing chooses a Python (no RETICULATE_PYTHON, no engine environment, no
# Python running), the engine is surely not installed: no Python is started to
# find out, since reticulate's search runs programs that write into HOME.
python_to_find <- function() {
  fallback <- Sys.getenv("RETICULATE_PYTHON_FALLBACK")
  python_running() || !is.na(Sys.getenv("RETICULATE_PYTHON", NA)) || !is.na(Sys.getenv("RETICULATE_PYTHON_ENV", NA)) ||
    isTRUE(try_or(reticulate::virtualenv_exists(engine_envname), FALSE)) || (nzchar(fallback) && file.exists(fallback))
}

# What engine() found: the engine is ready for the rest of the session (Python
# cannot be restarted, so a working engine stays working), and whether this
# package or something before it started Python.
engine_state <- new.env(parent = emptyenv())
engine_state$ready <- FALSE
engine_state$started_here <- FALSE

# The engine module, or a classed error that says what is wrong and how to fix it.
engine <- function(call = caller_env()) {
  if (!engine_state$ready) {
    problem <- engine_problem()
    if (!is.null(problem)) rlang::cnd_signal(engine_error(problem, call))
    import_engine()
    engine_state$ready <- TRUE
  }
  engine_module
}

# Why the engine cannot be used, as list(cause, message, values), or NULL if it
# can. Each step that asks reticulate or Python is guarded, so that this never
# fails: the message is built from what was found, with plain strings.
engine_problem <- function() {
  if (!python_running()) {
    env <- engine_env()
    chosen <- python_variables_set()
    if (env$exists && !env$python_exists && length(chosen) == 0) return(broken_env_problem(env))
    started <- tryCatch({
      reticulate::py_config()
      NULL
    }, error = function(e) e)
    if (!is.null(started) || !python_running()) return(no_python_problem(started))
    engine_state$started_here <- TRUE
  }
  python <- running_python()
  spec <- tryCatch(reticulate::import("importlib.util")$find_spec("newrllama4"), error = function(e) NULL)
  if (is.null(spec)) return(not_installed_problem(python))
  module <- tryCatch(reticulate::import("newrllama4"), error = function(e) e)
  if (inherits(module, "error")) return(import_problem(python, module))
  if (!isTRUE(try_or(reticulate::py_has_attr(module, "Model"), FALSE))) {
    where <- try_or(as.character(reticulate::py_str(module)), "")
    return(problem("shadowed", python, c(
      "Python found something else under the name {.pkg newrllama4}, not the engine: {where}.",
      "i" = "A folder named {.file newrllama4} in the working directory can shadow it; run R elsewhere."
    ), where = where))
  }
  engine_version <- try_or(as.character(reticulate::py_get_attr(module, "__version__", silent = TRUE)), "unknown")
  version_problem(engine_version, python)
}

# The engine and the R package are two halves of one release: the R code calls
# the engine's API as it was when the package was built.
version_problem <- function(engine_version, python) {
  r_version <- package_version_string()
  if (identical(engine_version, r_version)) return(NULL)
  problem("version", python, c(
    "The Python engine is version {engine_version}, but the newrllama4 R package is {package_version}.",
    "i" = paste("Run {.code newrllama4::install_newrllama4()} again to install the engine this package carries,",
                "then restart R."),
    python_bullet(python)
  ), engine_version = engine_version, package_version = r_version)
}

package_version_string <- function() {
  format(package_version(unname(getNamespaceVersion("newrllama4"))))
}

# -- the problems ---------------------------------------------------------------------

# A problem: its cause (the class newrllama4_error_engine_<cause>), its message
# for cli (whose {names} are the values given, never code to run) and fields.
problem <- function(cause, python, message, ...) {
  list(cause = cause, message = message, values = list(python = python, ...))
}

python_bullet <- function(python) {
  if (is.na(python)) NULL else c("i" = "Python in use: {.path {python}}.")
}

not_installed_problem <- function(python = NA_character_) {
  env <- engine_env()
  wanted <- wanted_python(env)
  if (!is.na(python) && !is.na(wanted$python) && !same_python(python, wanted$python)) {
    return(other_python_problem(python, wanted))
  }
  chosen <- python_variables_set()
  if (is.na(python)) {
    stale <- stale_python_variable()
    return(problem("not_installed", python, c(
      paste("The Python engine of newrllama4 is not installed: no virtual environment {.val {envname}}",
            "under {.path {root}}, and no Python chosen with {.envvar RETICULATE_PYTHON}."),
      "i" = "Run {.code newrllama4::install_newrllama4()} once, then restart R.",
      if (!is.null(stale)) c("!" = paste(
        "{.envvar {variable}} names no Python", if (nzchar(stale$value)) "({.path {value}})" else "(it is empty)",
        "and would stop reticulate: unset it ({.code Sys.unsetenv(\"{variable}\")}, and in {.file ~/.Renviron})."
      ))
    ), envname = engine_envname, root = env$root, variable = stale$variable %||% "", value = stale$value %||% ""))
  }
  by_variable <- "RETICULATE_PYTHON" %in% chosen
  problem("not_installed", python, c(
    "The Python engine of newrllama4 is not installed in the Python in use, {.path {python}}.",
    if (by_variable && env$python_exists) {
      c("i" = paste(
        "{.envvar RETICULATE_PYTHON} chose that Python over the engine's virtual environment {.path {env_path}}:",
        "unset it ({.code Sys.unsetenv(\"RETICULATE_PYTHON\")}, and in {.file ~/.Renviron}), then restart R."
      ))
    } else {
      c("i" = "Run {.code newrllama4::install_newrllama4()} once, then restart R.",
        if (by_variable) c("i" = paste(
          "{.envvar RETICULATE_PYTHON} chose that Python; {.code install_newrllama4()} installs into the",
          "virtual environment {.val {envname}}, which is used when {.envvar RETICULATE_PYTHON} is unset."
        )))
    }
  ), envname = engine_envname, env_path = env$path)
}

other_python_problem <- function(python, wanted) {
  before <- !engine_state$started_here
  problem("other_python", python, c(
    if (before) {
      "Python was started in this R session before newrllama4 needed it, with {.path {python}}, not the engine's {.path {wanted_python}}."
    } else {
      "Python started with {.path {python}}, not the engine's {.path {wanted_python}}."
    },
    "i" = "An R session runs one Python: another package that uses reticulate, or {.code reticulate::use_python()}, chose it.",
    "i" = paste("Restart R and use newrllama4 before that package, or set {.envvar RETICULATE_PYTHON} to",
                "{.path {wanted_python}} (in {.file ~/.Renviron}) so that every package uses the engine's Python.")
  ), wanted_python = wanted$python)
}

broken_env_problem <- function(env) {
  problem("python", NA_character_, c(
    "The engine's virtual environment {.path {env_path}} has no Python: {.path {env_python}} is gone.",
    "i" = "Its Python was deleted, or the Python it was made from was upgraded or removed.",
    "i" = "Run {.code newrllama4::install_newrllama4()} again: it makes the environment anew. Then restart R."
  ), env_path = env$path, env_python = env$python)
}

# reticulate could not start a Python: say which of its variables chose one that
# is not there (the usual cause: a stale line in ~/.Renviron), else what it said.
no_python_problem <- function(error) {
  said <- if (is.null(error)) "" else safe_message(error)
  stale <- stale_python_variable()
  env <- engine_env()
  message <- if (!is.null(stale)) {
    c(
      if (nzchar(stale$value)) {
        "No Python could be started: {.envvar {variable}} names {.path {value}}, which does not exist."
      } else {
        "No Python could be started: {.envvar {variable}} is set, but empty."
      },
      "i" = "Unset it ({.code Sys.unsetenv(\"{variable}\")}, and remove it from {.file ~/.Renviron}) or point it at a Python, then restart R.",
      if (env$exists && env$python_exists) c("i" = "The engine's Python is {.path {env_python}}."),
      if (!env$exists) c("i" = "Then run {.code newrllama4::install_newrllama4()} once, if you have not.")
    )
  } else {
    c(
      "No Python could be started for the engine of newrllama4.",
      if (nzchar(said)) c("x" = "reticulate: {said}"),
      "i" = "Run {.code newrllama4::install_newrllama4()} once, then restart R."
    )
  }
  problem("python", NA_character_, message, variable = stale$variable %||% "", value = stale$value %||% "",
          said = said, env_python = env$python)
}

# The engine is installed but `import newrllama4` fails: most often llama.cpp's
# library (llama-cpp-python's), missing or built for another machine.
import_problem <- function(python, error) {
  said <- python_exception(error)
  llama <- grepl("llama", said, ignore.case = TRUE)
  reinstall <- sprintf("%s -m pip install --force-reinstall --no-cache-dir llama-cpp-python", shQuote(python))
  said_how <- grepl("--force-reinstall", said, fixed = TRUE)  # the engine's own message says it
  problem("import", python, c(
    "The Python engine of newrllama4 is installed in {.path {python}} but cannot be imported.",
    "x" = "{said}",
    if (llama) c("i" = paste(
      "llama.cpp's library (llama-cpp-python's) is missing or was built for another machine.",
      if (said_how) "Rebuild it as said above, in a shell, then restart R."
      else "Rebuild it for this one, in a shell: {.code {reinstall}}; then restart R."
    )),
    "i" = "Or run {.code newrllama4::install_newrllama4()} again, then restart R."
  ), said = said, reinstall = reinstall)
}

# The condition for a problem: cli formats the message, and reads only the
# problem's values (strings) into it.
engine_error <- function(problem, call = NULL) {
  values <- lapply(problem$values, function(v) if (is.null(v)) "" else v)
  text_values <- lapply(values, function(v) if (is.character(v)) paste(ifelse(is.na(v), "NA", v), collapse = " ") else v)
  envir <- list2env(text_values, parent = baseenv())
  class <- condition_classes(c(paste0("engine_", problem$cause), "engine_missing"), "error")
  cnd <- tryCatch(
    rlang::catch_cnd(cli::cli_abort(problem$message, class = class, call = call, .envir = envir, !!!values)),
    error = function(e) NULL
  )
  # a message cli could not format (it never should) still comes out, unformatted
  cnd %||% rlang::error_cnd(class, message = paste(problem$message, collapse = "\n"), call = call, !!!values)
}

# -- what is known without failing ----------------------------------------------------

try_or <- function(expr, default) tryCatch(expr, error = function(e) default)

safe_message <- function(e) {
  text <- try_or(conditionMessage(e), "")
  text <- try_or(cli::ansi_strip(paste(text, collapse = "\n")), "")
  if (length(text) != 1 || is.na(text)) "" else trimws(text)
}

# A condition's message as plain text, its lines unwrapped.
plain_message <- function(cnd) {
  old <- options(cli.width = 10000)
  on.exit(options(old))
  text <- try_or(cli::ansi_strip(conditionMessage(cnd)), "")
  paste(text, collapse = "\n")
}

# The Python exception that failed an import, as "Type: message" (its last line).
python_exception <- function(error) {
  last <- try_or(reticulate::py_last_error(), NULL)
  said <- if (!is.null(last) && !is.null(last$type)) {
    try_or(paste0(last$type, ": ", last$value), "")
  } else {
    lines <- strsplit(safe_message(error), "\n", fixed = TRUE)[[1]]
    lines <- lines[nzchar(trimws(lines))]
    if (length(lines) == 0) "" else lines[[1]]
  }
  if (length(said) != 1 || is.na(said) || !nzchar(said)) "unknown error" else said
}

python_running <- function() {
  isTRUE(try_or(reticulate::py_available(initialize = FALSE), FALSE))
}

# The Python running in this session (NA if none).
running_python <- function() {
  if (!python_running()) return(NA_character_)
  python <- try_or(reticulate::py_config()$python, NA_character_)
  if (is.character(python) && length(python) == 1) python else NA_character_
}

# The engine's virtual environment, as found without starting anything.
engine_env <- function(envname = engine_envname) {
  root <- try_or(path.expand(reticulate::virtualenv_root()), NA_character_)
  path <- if (is.na(root)) NA_character_ else file.path(root, envname)
  python <- try_or(reticulate::virtualenv_python(envname), NA_character_)
  exists <- isTRUE(try_or(reticulate::virtualenv_exists(envname), FALSE))
  list(name = envname, root = root, path = path, python = python, exists = exists,
       python_exists = exists && !is.na(python) && file.exists(python))
}

# reticulate's variables that choose a Python, in the order it reads them, among those set.
python_variables <- c("RETICULATE_PYTHON", "RETICULATE_PYTHON_ENV", "RETICULATE_PYTHON_FALLBACK")

python_variables_set <- function() {
  python_variables[!is.na(Sys.getenv(python_variables, NA))]
}

# The first of reticulate's variables that names no Python: list(variable, value), or NULL.
stale_python_variable <- function() {
  for (variable in python_variables_set()) {
    value <- Sys.getenv(variable)
    python <- if (variable == "RETICULATE_PYTHON_ENV" && nzchar(value)) {
      file.path(value, if (.Platform$OS.type == "windows") "python.exe" else "bin/python")
    } else {
      value
    }
    if (!nzchar(value) || !file.exists(python)) return(list(variable = variable, value = value))
    if (variable != "RETICULATE_PYTHON_FALLBACK") return(NULL)  # the one reticulate takes, and it exists
  }
  NULL
}

# The Python the engine should run in: RETICULATE_PYTHON's, else the engine's environment's.
wanted_python <- function(env = engine_env()) {
  chosen <- Sys.getenv("RETICULATE_PYTHON")
  if (nzchar(chosen) && file.exists(chosen)) return(list(python = chosen, by = "RETICULATE_PYTHON"))
  if (env$python_exists) return(list(python = env$python, by = "envname"))
  list(python = NA_character_, by = NA_character_)
}

# Whether two Pythons are one: a virtual environment's Python is a link to the one
# it was made from, so environments compare by their folder, others by the file.
same_python <- function(a, b) {
  identical(python_home(a), python_home(b))
}

python_home <- function(python) {
  env <- dirname(dirname(python))
  target <- if (file.exists(file.path(env, "pyvenv.cfg"))) env else python
  try_or(normalizePath(target, mustWork = FALSE), target)
}

# Call an engine function on a live handle's behalf. Its value comes back with
# every string one R can hold: NUL and lone surrogates become U+FFFD in Python
# (newrllama4.for_r), since R cannot hold them and converting one would fail the
# whole call. `fn` first: where it comes from engine(), an engine that cannot be
# used is engine()'s classed error, before anything asks Python for newrllama4.for_r.
engine_call <- function(fn, ..., call = caller_env()) {
  force(fn)
  with_engine(engine_for_r$call(fn, ...), call = call)
}
