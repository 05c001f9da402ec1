test_that("the engine is importable in this R session", {
  skip_without_engine()
  expect_true(reticulate::py_module_available("newrllama4"))
  expect_true(is.function(engine()$Model))
})

test_that("the engine's version is the R package's", {
  skip_without_engine()
  expect_identical(engine()$`__version__`, format(utils::packageVersion("newrllama4")))
})

test_that("an engine of another version is one classed error that says to install it again", {
  signal_version <- function(version) {
    problem <- version_problem(version, NA_character_)
    if (!is.null(problem)) rlang::cnd_signal(engine_error(problem))
  }
  err <- expect_error(signal_version("0.0.0.9"), class = "newrllama4_error_engine_version")
  expect_match(conditionMessage(err), "0.0.0.9", fixed = TRUE)
  expect_match(conditionMessage(err), "install_newrllama4()", fixed = TRUE)
  expect_equal(err$engine_version, "0.0.0.9")
  expect_equal(err$package_version, format(utils::packageVersion("newrllama4")))
  expect_no_error(signal_version(format(utils::packageVersion("newrllama4"))))
})

test_that("a missing engine is one classed error that says how to install it", {
  script <- tempfile(fileext = ".R")
  writeLines(c(
    "library(newrllama4)",
    "err <- tryCatch(model_load(), error = function(e) e)",
    "cat(class(err)[1], conditionMessage(err), sep = '\\n')"
  ), script)
  empty_venv <- file.path(tempdir(), "venv-without-engine")
  system2(Sys.which("python3"), c("-m", "venv", "--without-pip", empty_venv))
  out <- system2(file.path(R.home("bin"), "Rscript"), script, stdout = TRUE, stderr = TRUE,
                 env = paste0("RETICULATE_PYTHON=", file.path(empty_venv, "bin", "python")))
  expect_equal(out[1], "newrllama4_error_engine_not_installed")
  expect_match(paste(out, collapse = "\n"), "install_newrllama4")
})

test_that("without an engine, library() says nothing and the first call that needs it names install_newrllama4()", {
  script <- tempfile(fileext = ".R")
  writeLines(c(
    "attached <- capture.output(type = 'message', invisible(capture.output(library(newrllama4))))",
    "cat('attached:', length(attached), engine_available(), '\\n')",
    "err <- tryCatch(model_load(), error = function(e) e)",
    "cat(class(err)[1], conditionMessage(err), sep = '\\n')"
  ), script)
  empty_root <- tempfile("virtualenvs-")
  dir.create(empty_root)
  # as on a machine that never ran install_newrllama4(): no Python chosen, no engine environment,
  # nor the virtualenv reticulate activated in this session (its variables, and its bin/ in PATH)
  path <- strsplit(Sys.getenv("PATH"), .Platform$path.sep)[[1]]
  venv <- Sys.getenv("VIRTUAL_ENV")
  if (nzchar(venv)) path <- path[!startsWith(path, venv)]
  out <- withr::with_envvar(
    c(RETICULATE_PYTHON = NA, RETICULATE_PYTHON_ENV = NA, RETICULATE_PYTHON_FALLBACK = NA, VIRTUAL_ENV = NA, PYTHONPATH = NA, WORKON_HOME = empty_root,
      RETICULATE_VIRTUALENV_ROOT = empty_root, PATH = paste(path, collapse = .Platform$path.sep)),
    system2(file.path(R.home("bin"), "Rscript"), script, stdout = TRUE, stderr = TRUE,
            env = paste0("R_LIBS=", shQuote(paste(.libPaths(), collapse = .Platform$path.sep))))
  )
  expect_identical(out[[1]], "attached: 0 FALSE ")
  expect_identical(out[[2]], "newrllama4_error_engine_not_installed")
  expect_match(paste(out, collapse = "\n"), "install_newrllama4()", fixed = TRUE)
})


# -- broken setups, each in a child R process (helper-setups.R) -------------------------

test_that("RETICULATE_PYTHON naming no Python: FALSE with the reason, and an error that says to unset it", {
  result <- expect_engine_problem(probe(c(RETICULATE_PYTHON = "/nonexistent/bin/python")),
                                  "newrllama4_error_engine_python")
  expect_match(result$reason, "RETICULATE_PYTHON", fixed = TRUE)
  expect_match(result$message, "`RETICULATE_PYTHON` names '/nonexistent/bin/python', which does not exist", fixed = TRUE)
  expect_match(result$message, "Sys.unsetenv(\"RETICULATE_PYTHON\")", fixed = TRUE)
  expect_identical(result$python, "NA")
  expect_true(any(grepl("RETICULATE_PYTHON: /nonexistent/bin/python (no such Python)", result$sitrep, fixed = TRUE)))
})

test_that("RETICULATE_PYTHON set but empty is the same error, from any way into the engine", {
  # engine_call() asks for engine() before Python's newrllama4.for_r
  result <- expect_engine_problem(probe(c(RETICULATE_PYTHON = ""), first_call = "engine_call(engine()$versions)",
                                        before = "engine_call <- newrllama4:::engine_call; engine <- newrllama4:::engine"),
                                  "newrllama4_error_engine_python")
  expect_match(result$message, "`RETICULATE_PYTHON` is set, but empty", fixed = TRUE)
})

test_that("RETICULATE_PYTHON_ENV naming no environment is the same error, naming it", {
  result <- expect_engine_problem(probe(c(RETICULATE_PYTHON_ENV = "/nonexistent/env")), "newrllama4_error_engine_python")
  expect_match(result$message, "`RETICULATE_PYTHON_ENV` names '/nonexistent/env', which does not exist", fixed = TRUE)
})

test_that("RETICULATE_PYTHON_FALLBACK set but empty: FALSE, and an error that names it (not cli's rlib_error)", {
  result <- expect_engine_problem(probe(c(RETICULATE_PYTHON_FALLBACK = "")), "newrllama4_error_engine_python")
  # nothing chose a Python and no engine environment exists: FALSE without starting one
  expect_match(result$reason, "not installed", fixed = TRUE)
  expect_match(result$reason, "`RETICULATE_PYTHON_FALLBACK` names no Python (it is empty)", fixed = TRUE)
  expect_match(result$message, "`RETICULATE_PYTHON_FALLBACK` is set, but empty", fixed = TRUE)
  expect_match(result$message, "install_newrllama4()", fixed = TRUE)
  expect_true(any(grepl("RETICULATE_PYTHON_FALLBACK: (set, empty)", result$sitrep, fixed = TRUE)))
})

test_that("the engine's virtual environment without its Python: FALSE, and an error that says to install again", {
  root <- empty_dir("virtualenvs-")
  python <- make_venv(file.path(root, "r-newrllama4"))
  unlink(list.files(dirname(python), pattern = "^python", full.names = TRUE))
  result <- expect_engine_problem(probe(root = root), "newrllama4_error_engine_python")
  expect_match(result$reason, "has no Python", fixed = TRUE)
  expect_match(result$message, "install_newrllama4()` again: it makes the environment anew", fixed = TRUE)
  expect_true(any(grepl("virtual environment r-newrllama4: .* \\(its Python, .* is gone\\)", result$sitrep)))
})

test_that("a Python without the engine: FALSE, and an error that names install_newrllama4() and the Python", {
  python <- make_venv(file.path(empty_dir("venv-"), "plain"))
  result <- expect_engine_problem(probe(c(RETICULATE_PYTHON = python)), "newrllama4_error_engine_not_installed")
  expect_match(result$message, "not installed in the Python in use", fixed = TRUE)
  expect_match(result$message, "install_newrllama4()", fixed = TRUE)
  expect_identical(result$python, python)
  expect_true(any(grepl(paste("Python:", python), result$sitrep, fixed = TRUE)))
  expect_true(any(grepl("engine (newrllama4, Python): not installed", result$sitrep, fixed = TRUE)))
  # where the engine's environment exists, RETICULATE_PYTHON overriding it is the thing to fix
  root <- empty_dir("virtualenvs-")
  make_venv(file.path(root, "r-newrllama4"))
  result <- expect_engine_problem(probe(c(RETICULATE_PYTHON = python), root = root),
                                  "newrllama4_error_engine_not_installed")
  expect_match(result$message, "`RETICULATE_PYTHON` chose that Python over the engine's virtual environment", fixed = TRUE)
})

test_that("an engine of another version than the package's: FALSE, and an error that says to rerun install_newrllama4()", {
  python <- make_venv(file.path(empty_dir("venv-"), "plain"))
  for (other in c("0.0.0.9", "99.0.0")) {  # older and newer
    stub <- python_packages(list("newrllama4/__init__.py" = c(sprintf("__version__ = '%s'", other), "class Model: pass")))
    result <- expect_engine_problem(probe(c(RETICULATE_PYTHON = python, PYTHONPATH = stub)),
                                    "newrllama4_error_engine_version")
    expect_match(result$message, sprintf("The Python engine is version %s, but the newrllama4 R package is %s",
                                         other, format(utils::packageVersion("newrllama4"))), fixed = TRUE)
    expect_match(result$message, "Run `newrllama4::install_newrllama4()` again", fixed = TRUE)
    expect_identical(result$engine_version, other)
    expect_identical(result$package_version, format(utils::packageVersion("newrllama4")))
    expect_true(any(grepl(paste("engine (newrllama4, Python):", other), result$sitrep, fixed = TRUE)))
  }
})

test_that("something else named newrllama4 on Python's path: FALSE, and an error that says what shadows the engine", {
  python <- make_venv(file.path(empty_dir("venv-"), "plain"))
  shadow <- python_packages(list("newrllama4/README" = "a folder, as the R package's own source is"))
  result <- expect_engine_problem(probe(c(RETICULATE_PYTHON = python, PYTHONPATH = shadow)),
                                  "newrllama4_error_engine_shadowed")
  expect_match(result$message, "Python found something else under the name newrllama4", fixed = TRUE)
  expect_match(result$message, "run R elsewhere", fixed = TRUE)
})

test_that("llama_cpp failing to import: FALSE, and an error that says how to rebuild it", {
  # the engine's own Python where there is one (llama_cpp shadowed), else a bare one
  python <- if (engine_available()) reticulate::py_config()$python else make_venv(file.path(empty_dir("venv-"), "plain"))
  # llama-cpp-python raises this when its shared library cannot be loaded
  stub <- python_packages(list("llama_cpp/__init__.py" = c(
    "raise RuntimeError(\"Failed to load shared library '/x/libllama.so': libggml-cpu.so: cannot open shared object file\")"
  )))
  pythonpath <- paste(c(stub, engine_source_dir()), collapse = .Platform$path.sep)
  result <- expect_engine_problem(probe(c(RETICULATE_PYTHON = python, PYTHONPATH = pythonpath)),
                                  "newrllama4_error_engine_import")
  expect_match(result$message, "installed in '.*' but cannot be imported")
  expect_match(result$message, "libggml-cpu.so: cannot open shared object file", fixed = TRUE)
  expect_match(result$message, "-m pip install --force-reinstall --no-cache-dir llama-cpp-python", fixed = TRUE)
})

test_that("Python already started with another interpreter: FALSE, and an error that says to restart R", {
  root <- empty_dir("virtualenvs-")
  engine_python <- make_venv(file.path(root, "r-newrllama4"))
  other <- make_venv(file.path(empty_dir("venv-"), "other"))
  # another package chose and started its Python first
  before <- c(sprintf("reticulate::use_python('%s', required = TRUE)", other), "invisible(reticulate::py_config())")
  result <- expect_engine_problem(probe(before = before, root = root), "newrllama4_error_engine_other_python")
  expect_match(result$message, "Python was started in this R session before newrllama4 needed it", fixed = TRUE)
  expect_match(result$message, engine_python, fixed = TRUE)
  expect_match(result$message, "Restart R", fixed = TRUE)
  expect_identical(result$python, other)
  expect_true(any(grepl("chosen by: .*(already running|use_python)", result$sitrep)))
})

test_that("a model cache directory that cannot be written: a classed error that names NEWRLLAMA4_CACHE", {
  skip_without_engine()
  blocker <- tempfile("not-a-dir-")
  writeLines("a file", blocker)
  cache <- file.path(blocker, "cache")
  result <- probe(c(RETICULATE_PYTHON = reticulate::py_config()$python, NEWRLLAMA4_CACHE = cache))
  expect_true(result$finished, label = paste(result$out, collapse = "\n"))
  expect_identical(result$available, "TRUE")
  expect_true("newrllama4_error_model_load" %in% result$classes, label = paste(result$classes, collapse = " "))
  expect_match(result$message, "cannot be written", fixed = TRUE)
  expect_match(result$message, "Set NEWRLLAMA4_CACHE to a folder you can write", fixed = TRUE)
  expect_true(any(grepl(paste0("cache directory: ", cache, " (cannot be made: "), result$sitrep, fixed = TRUE)))
})

test_that("an hf:// model asked for offline with nothing cached: a classed download error that says so", {
  skip_without_engine()
  result <- probe(c(RETICULATE_PYTHON = reticulate::py_config()$python, HF_HUB_OFFLINE = "1",
                    HF_HUB_CACHE = empty_dir("hub-")),
                  first_call = "model_load('hf://someone/some-model-GGUF/model-Q4_K_M.gguf')")
  expect_true(result$finished, label = paste(result$out, collapse = "\n"))
  expect_identical(result$available, "TRUE")
  expect_true(all(c("newrllama4_error_download", "newrllama4_error_model_source") %in% result$classes),
              label = paste(result$classes, collapse = " "))
  expect_match(result$message, "HF_HUB_OFFLINE", fixed = TRUE)
  expect_match(result$message, "not in the Hub's cache", fixed = TRUE)
  expect_true(any(grepl("HF_HUB_OFFLINE: 1", result$sitrep, fixed = TRUE)))
})

# -- in this process ------------------------------------------------------------------

test_that("engine_available() answers FALSE with a reason when checking fails, and never throws", {
  old <- engine_state$ready
  withr::defer(engine_state$ready <- old)
  engine_state$ready <- FALSE
  local_package_binding("python_to_find", function() TRUE)
  local_package_binding("engine_problem", function() stop("no {such} luck"))
  expect_no_error(answer <- engine_available())
  expect_false(answer)
  expect_match(attr(answer, "reason"), "The engine could not be checked: no {such} luck", fixed = TRUE)
  expect_message(engine_available(quiet = FALSE), "could not be checked")
})

test_that("an engine error's message takes its values as text, never as cli markup or code", {
  cnd <- engine_error(problem("python", "/a/{b}/python", c("Python {.path {python}} {said}", "i" = "Fix: {fix}"),
                              said = "{Sys.time()} {.strong x}", fix = "unset {RETICULATE_PYTHON}"))
  expect_s3_class(cnd, c("newrllama4_error_engine_python", "newrllama4_error_engine_missing", "newrllama4_error"))
  message <- cli::ansi_strip(conditionMessage(cnd))
  expect_match(message, "/a/{b}/python", fixed = TRUE)
  expect_match(message, "{Sys.time()} {.strong x}", fixed = TRUE)
  expect_match(message, "unset {RETICULATE_PYTHON}", fixed = TRUE)
  expect_identical(cnd$python, "/a/{b}/python")
})

test_that("each engine error class inherits newrllama4_error_engine_missing", {
  for (cause in c("python", "not_installed", "other_python", "import", "shadowed", "version")) {
    cnd <- engine_error(problem(cause, NA_character_, "problem"))
    expect_s3_class(cnd, c(paste0("newrllama4_error_engine_", cause), "newrllama4_error_engine_missing", "newrllama4_error"))
  }
  err <- expect_error(rlang::cnd_signal(engine_error(version_problem("0.0.0.9", NA_character_))),
                      class = "newrllama4_error_engine_missing")
  expect_s3_class(err, "newrllama4_error_engine_version")
})
