test_that("the engine is importable in this R session", {
  expect_true(reticulate::py_module_available("newrllama4"))
  expect_true(is.function(engine()$Model))
})

test_that("the engine's version is the R package's", {
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
