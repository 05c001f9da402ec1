test_that("the situation report prints on stdout, with the engine: versions, build, identity, cache, memory", {
  skip_without_engine()
  messages <- character()
  out <- withCallingHandlers(
    capture.output(report <- newrllama4_sitrep()),
    message = function(m) {
      messages <<- c(messages, conditionMessage(m))
      invokeRestart("muffleMessage")
    }
  )
  expect_length(messages, 0)
  expect_s3_class(report, "newrllama4_sitrep")
  expect_identical(out, format(report))
  text <- paste(out, collapse = "\n")
  version <- format(utils::packageVersion("newrllama4"))
  expect_match(text, paste0("  newrllama4: ", version), fixed = TRUE)
  expect_match(text, paste0("  reticulate: ", format(utils::packageVersion("reticulate"))), fixed = TRUE)
  expect_match(text, "  status: ready", fixed = TRUE)
  expect_match(text, paste0("  engine (newrllama4, Python): ", version), fixed = TRUE)
  expect_match(text, "  llama-cpp-python: [0-9]")
  expect_match(text, "  llama.cpp: [0-9]")
  expect_match(text, "  CPU features: .*(AVX|NEON|SSE)")
  expect_match(text, "  GPU offload: ")
  expect_match(text, "GGML_CPU_TILED_MM_FORCE=1 (identity needs 1)", fixed = TRUE)
  expect_match(text, "identity guaranteed: ")
  expect_match(text, paste0("Python: ", reticulate::py_config()$python), fixed = TRUE)
  expect_match(text, "  RETICULATE_PYTHON: ", fixed = TRUE)
  expect_match(text, "  cache directory: ", fixed = TRUE)
  expect_match(text, "  free memory: ", fixed = TRUE)
})

test_that("the report never shows HF_TOKEN's value", {
  withr::local_envvar(HF_TOKEN = "hf_secret_value_123")
  out <- capture.output(newrllama4_sitrep())
  expect_false(any(grepl("hf_secret_value_123", out, fixed = TRUE)))
  expect_true(any(grepl("HF_TOKEN: (set)", out, fixed = TRUE)))
})

test_that("a cache directory that cannot be made or written is a problem with its fix", {
  blocker <- tempfile("not-a-dir-")
  writeLines("a file", blocker)
  expect_false(dir_writable(file.path(blocker, "cache"))$ok)
  expect_match(dir_writable(file.path(blocker, "cache"))$state, "is not a directory", fixed = TRUE)
  expect_true(dir_writable(tempdir())$ok)
  expect_match(dir_writable(file.path(tempdir(), "a", "b"))$state, "does not exist yet", fixed = TRUE)
  withr::local_envvar(NEWRLLAMA4_CACHE = file.path(blocker, "cache"))
  section <- sitrep_models(ready = FALSE)
  row <- section[section$label == "cache directory", ]
  expect_true(row$problem)
  expect_match(row$fix, "NEWRLLAMA4_CACHE", fixed = TRUE)
})

test_that("without the engine to ask, the cache directory is the engine's own choice", {
  if (engine_available()) {
    # in the environment Python started with (it keeps a copy)
    expect_identical(engine_cache_dir(), reticulate::py_str(reticulate::import("newrllama4.models")$cache_dir()))
  }
  withr::local_envvar(NEWRLLAMA4_CACHE = "/some/where")
  expect_identical(engine_cache_dir(), "/some/where")
  skip_on_os(c("windows", "mac"))
  withr::local_envvar(NEWRLLAMA4_CACHE = NA, XDG_CACHE_HOME = "/xdg")
  expect_identical(engine_cache_dir(), "/xdg/newrllama4")
})

test_that("cached models are listed with their sizes, the Hub's through its links", {
  dir <- empty_dir("models-")
  dir.create(file.path(dir, "downloads", "abc"), recursive = TRUE)
  writeBin(raw(1000), file.path(dir, "downloads", "abc", "m.gguf"))
  writeLines("x", file.path(dir, "notes.txt"))
  models <- cached_models(dir)
  expect_identical(names(models), file.path(basename(dir), "downloads/abc/m.gguf"))
  expect_equal(unname(models), 1000)
  expect_length(cached_models(file.path(dir, "nowhere")), 0)
})

test_that("a report that fails to be made still prints, with the failure", {
  local_package_binding("sitrep_collect", function() stop("broken {here}"))
  out <- capture.output(report <- newrllama4_sitrep())
  expect_match(paste(out, collapse = "\n"), "the report could not be made: broken {here}", fixed = TRUE)
})
