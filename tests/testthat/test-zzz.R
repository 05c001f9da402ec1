test_that("loading the package starts no Python; the first call that needs the engine does", {
  skip_without_engine()
  code <- paste("library(newrllama4)", "cat(reticulate::py_available(), '')", "invisible(engine_available())",
                "cat(reticulate::py_available(), '\\n')", sep = "; ")
  out <- system2(file.path(R.home("bin"), "Rscript"), c("-e", shQuote(code)), stdout = TRUE, stderr = TRUE,
                 env = paste0("R_LIBS=", shQuote(paste(.libPaths(), collapse = .Platform$path.sep))))
  expect_identical(out[[length(out)]], "FALSE TRUE ")
})
