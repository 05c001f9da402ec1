test_that("the engine is importable in this R session", {
  expect_true(reticulate::py_module_available("newrllama4"))
  expect_true(is.function(engine()$Model))
})

test_that("install sources: a directory gets the default-model extra, a pip spec stays", {
  dir <- tempfile()
  dir.create(dir)
  expect_equal(engine_requirement(dir), paste0(normalizePath(dir), "[default-model]"))
  expect_equal(engine_requirement("newrllama4==0.1.0"), "newrllama4==0.1.0")
  withr_env <- Sys.getenv("NEWRLLAMA4_PYTHON_SOURCE", NA)
  Sys.setenv(NEWRLLAMA4_PYTHON_SOURCE = "my-engine")
  on.exit(if (is.na(withr_env)) Sys.unsetenv("NEWRLLAMA4_PYTHON_SOURCE") else
    Sys.setenv(NEWRLLAMA4_PYTHON_SOURCE = withr_env))
  expect_equal(engine_requirement(NULL), "my-engine")
})

test_that("install_newrllama checks its arguments before touching Python", {
  expect_error(install_newrllama(envname = NA), class = "newrllama4_error_invalid_argument")
  expect_error(install_newrllama(python_source = 1), class = "newrllama4_error_invalid_argument")
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
