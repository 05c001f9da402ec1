# A package attached beside us with some of our names, as localLLM is: a fake
# one, attached as library() would attach it (an environment named package:...).
attach_fake_package <- function(name, pos, frame = parent.frame()) {
  exports <- list2env(list(model_load = function(...) "theirs", generate = function(...) "theirs",
                           tokenize_words = function(...) "theirs"))
  attach(exports, pos = pos, name = paste0("package:", name), warn.conflicts = FALSE)
  withr::defer(detach(paste0("package:", name), character.only = TRUE), envir = frame)
}

test_that("the situation report names a package attached after us that masks our functions, with the fix", {
  skip_if_not("package:newrllama4" %in% search())
  attach_fake_package("fakeLLM", pos = 2)  # in front of us, as a later library() call puts it
  masking <- masking_packages()
  expect_identical(masking$package, "fakeLLM")
  expect_identical(masking$names, "generate, model_load")
  expect_true(masking$masks_ours)
  item <- sitrep_masking()
  expect_true(item$problem)
  expect_match(item$value, "fakeLLM, attached after newrllama4, masks its generate, model_load", fixed = TRUE)
  expect_match(item$fix, "newrllama4::generate()", fixed = TRUE)
  out <- paste(capture.output(newrllama4_sitrep()), collapse = "\n")
  expect_match(out, "masked names: fakeLLM, attached after newrllama4", fixed = TRUE)
})

test_that("a package attached before us, whose names we mask, is said without a problem; none, nothing", {
  skip_if_not("package:newrllama4" %in% search())
  expect_identical(sitrep_masking()$value, "none")
  attach_fake_package("olderLLM", pos = match("package:newrllama4", search()) + 1)
  item <- sitrep_masking()
  expect_false(item$problem)
  expect_match(item$value, "newrllama4, attached after olderLLM, masks its generate, model_load", fixed = TRUE)
  # not attached (its functions called as newrllama4::...): nothing of ours is masked
  expect_false(any(masking_packages(setdiff(search(), "package:newrllama4"))$masks_ours))
})

test_that("loading and attaching the package prints nothing", {
  code <- "library(newrllama4)"
  out <- system2(file.path(R.home("bin"), "Rscript"), c("-e", shQuote(code)), stdout = TRUE, stderr = TRUE,
                 env = paste0("R_LIBS=", shQuote(paste(.libPaths(), collapse = .Platform$path.sep))))
  expect_identical(out, character())
})
