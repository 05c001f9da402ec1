# Broken Python setups, each tried in a child R process of its own (an R session
# runs one Python, chosen once): made under tempdir(), never touching the
# user's environments.

# The variables that choose a Python or shape it, unset in every child unless a
# case sets them; and an empty virtualenv root, as on a machine that never ran
# install_newrllama4() (nor the virtualenv reticulate activated in this session:
# its bin/ leaves PATH).
child_base_env <- function(root = empty_dir("virtualenvs-")) {
  path <- strsplit(Sys.getenv("PATH"), .Platform$path.sep)[[1]]
  venv <- Sys.getenv("VIRTUAL_ENV")
  if (nzchar(venv)) path <- path[!startsWith(path, venv)]
  c(RETICULATE_PYTHON = NA, RETICULATE_PYTHON_ENV = NA, RETICULATE_PYTHON_FALLBACK = NA, VIRTUAL_ENV = NA,
    PYTHONPATH = NA, RETICULATE_PYTHONPATH = NA, WORKON_HOME = root, RETICULATE_VIRTUALENV_ROOT = root,
    PATH = paste(path, collapse = .Platform$path.sep), NEWRLLAMA4_CACHE = empty_dir("cache-"),
    R_LIBS = paste(.libPaths(), collapse = .Platform$path.sep))
}

empty_dir <- function(prefix) {
  dir <- tempfile(prefix)
  dir.create(dir, recursive = TRUE)
  dir
}

# Run `code` (lines of R) in Rscript with `env` over child_base_env() (NA unsets
# a variable). Returns its output lines (stdout and stderr).
run_child_r <- function(code, env = character(), root = empty_dir("virtualenvs-")) {
  script <- tempfile("child-", fileext = ".R")
  writeLines(code, script)
  base <- child_base_env(root)
  env <- c(base[setdiff(names(base), names(env))], env)
  withr::with_envvar(env, suppressWarnings(system2(
    file.path(R.home("bin"), "Rscript"), shQuote(script), stdout = TRUE, stderr = TRUE
  )))
}

# What a user meets first: engine_available() and its reason, the error of the first
# call that needs the engine (`first_call`), and the situation report, as printed
# on stdout. Each line of the child's answer starts with its part's name.
probe_lines <- function(first_call = "model_load()", before = character()) {
  c(
    "options(cli.width = 10000, width = 10000)",  # messages and printouts unwrapped, to match them whole
    before,
    "library(newrllama4)",
    "ok <- engine_available()",
    "cat('available:', ok, '\\n')",
    "cat('reason:', gsub('\\n', ' ', attr(ok, 'reason')), '\\n')",
    sprintf("err <- tryCatch(%s, error = function(e) e)", first_call),
    "cat('classes:', class(err), '\\n')",
    "cat('message:', gsub('\\n', ' ', conditionMessage(err)), '\\n')",
    "for (name in c('python', 'engine_version', 'package_version')) cat(name, ': ', format(err[[name]]), '\\n', sep = '')",
    "report <- capture.output(newrllama4_sitrep())",
    "cat(paste('sitrep|', report), sep = '\\n')",
    "cat('finished\\n')"
  )
}

probe <- function(env = character(), first_call = "model_load()", before = character(), root = empty_dir("virtualenvs-")) {
  out <- run_child_r(probe_lines(first_call, before), env, root)
  part <- function(name) {
    lines <- out[startsWith(out, paste0(name, ":"))]
    trimws(sub(paste0("^", name, ": ?"), "", lines))
  }
  list(
    out = out,
    available = part("available"),
    reason = paste(part("reason"), collapse = "\n"),
    classes = strsplit(paste(part("classes"), collapse = " "), " ")[[1]],
    message = paste(part("message"), collapse = "\n"),
    python = part("python"),
    engine_version = part("engine_version"),
    package_version = part("package_version"),
    sitrep = sub("^sitrep\\| ?", "", out[startsWith(out, "sitrep|")]),
    finished = "finished" %in% out
  )
}

# Every broken setup gives FALSE with a reason, and one classed engine error, never
# an error from building a message (cli's rlib_error) nor an unclassed one; the
# report still prints.
expect_engine_problem <- function(result, class) {
  expect_true(result$finished, label = paste(result$out, collapse = "\n"))
  expect_identical(result$available, "FALSE")
  expect_gt(nchar(result$reason), 20)
  expect_true(all(c(class, "newrllama4_error_engine_missing", "newrllama4_error") %in% result$classes),
              label = paste(result$classes, collapse = " "))
  expect_false(any(grepl("rlib_error|Could not evaluate cli", result$out)))
  expect_true(any(grepl("newrllama4 situation report", result$sitrep, fixed = TRUE)))
  expect_true(any(grepl("^. status: ", result$sitrep)))
  invisible(result)
}

# A virtual environment without pip (nothing is installed into it): a Python without the engine.
make_venv <- function(dir) {
  python3 <- Sys.which("python3")
  testthat::skip_if(python3 == "", "no python3 to make a virtual environment with")
  system2(python3, c("-m", "venv", "--without-pip", shQuote(dir)), stdout = FALSE, stderr = FALSE)
  python <- file.path(dir, "bin", "python")
  testthat::skip_if_not(file.exists(python), "python3 -m venv made no environment")
  python
}

# A folder to put first on PYTHONPATH, holding Python packages written from `files`
# (relative path = lines).
python_packages <- function(files) {
  dir <- empty_dir("pythonpath-")
  for (path in names(files)) {
    dir.create(dirname(file.path(dir, path)), recursive = TRUE, showWarnings = FALSE)
    writeLines(files[[path]], file.path(dir, path))
  }
  dir
}

# The engine's source: the repository's python/ (testthat in a checkout), else the
# one this package carries (the tarball's inst/python, as in R CMD check).
engine_source_dir <- function() {
  candidates <- c(test_path("..", "..", "python"), system.file("python", package = "newrllama4"))
  found <- candidates[nzchar(candidates) & file.exists(file.path(candidates, "newrllama4", "__init__.py"))]
  testthat::skip_if(length(found) == 0, "no engine source to import")
  normalizePath(found[[1]])
}

# Replace a function of the package for the rest of the calling test (testthat's
# local_mocked_bindings() needs testthat 3.1.7).
local_package_binding <- function(name, value, frame = parent.frame()) {
  ns <- environment(engine_available)
  old <- get(name, envir = ns)
  unlockBinding(name, ns)
  assign(name, value, envir = ns)
  withr::defer({
    assign(name, old, envir = ns)
    lockBinding(name, ns)
  }, envir = frame)
}
