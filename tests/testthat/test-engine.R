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
  err <- expect_error(check_engine_version("0.0.0.9"), class = "newrllama4_error_engine_version")
  expect_match(conditionMessage(err), "0.0.0.9", fixed = TRUE)
  expect_match(conditionMessage(err), "install_newrllama()", fixed = TRUE)
  expect_equal(err$engine_version, "0.0.0.9")
  expect_equal(err$package_version, format(utils::packageVersion("newrllama4")))
  expect_no_error(check_engine_version(format(utils::packageVersion("newrllama4"))))
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
  expect_equal(out[1], "newrllama4_error_engine_missing")
  expect_match(paste(out, collapse = "\n"), "install_newrllama")
})

test_that("without an engine, library() says nothing and the first call that needs it names install_newrllama()", {
  script <- tempfile(fileext = ".R")
  writeLines(c(
    "attached <- capture.output(type = 'message', invisible(capture.output(library(newrllama4))))",
    "cat('attached:', length(attached), engine_available(), '\\n')",
    "err <- tryCatch(model_load(), error = function(e) e)",
    "cat(class(err)[1], conditionMessage(err), sep = '\\n')"
  ), script)
  empty_root <- tempfile("virtualenvs-")
  dir.create(empty_root)
  # as on a machine that never ran install_newrllama(): no Python chosen, no engine environment,
  # nor the virtualenv reticulate activated in this session (its variables, and its bin/ in PATH)
  path <- strsplit(Sys.getenv("PATH"), .Platform$path.sep)[[1]]
  venv <- Sys.getenv("VIRTUAL_ENV")
  if (nzchar(venv)) path <- path[!startsWith(path, venv)]
  out <- withr::with_envvar(
    c(RETICULATE_PYTHON = NA, VIRTUAL_ENV = NA, PYTHONPATH = NA, WORKON_HOME = empty_root,
      RETICULATE_VIRTUALENV_ROOT = empty_root, PATH = paste(path, collapse = .Platform$path.sep)),
    system2(file.path(R.home("bin"), "Rscript"), script, stdout = TRUE, stderr = TRUE,
            env = paste0("R_LIBS=", shQuote(paste(.libPaths(), collapse = .Platform$path.sep))))
  )
  expect_identical(out[[1]], "attached: 0 FALSE ")
  expect_identical(out[[2]], "newrllama4_error_engine_missing")
  expect_match(paste(out, collapse = "\n"), "install_newrllama()", fixed = TRUE)
})

