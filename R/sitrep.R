#' Report the setup, for a bug report
#'
#' Prints, on standard output, what a bug report about newrllama4 needs: the
#' versions of R, of this package and of reticulate, and any attached package
#' that masks this package's functions or whose functions it masks (localLLM
#' exports five of the same names); which Python is used and
#' what chose it (a variable of reticulate's, or the engine's virtual
#' environment), with reticulate's variables; whether the engine can be used,
#' and if not, why; the versions of the engine, llama-cpp-python and llama.cpp,
#' and llama.cpp's build (its CPU features, the GPU backends compiled in, and
#' what `n_gpu_layers` does with it); ggml's settings that identical answers
#' need and whether they hold in this process; the cache directory of models,
#' whether it can be written, the models cached there and in the Hugging Face
#' cache, with their sizes; and the free memory. Each line that shows a problem
#' (marked `x`) is followed by its fix.
#'
#' It never raises an error and installs nothing. Like any call that needs the
#' engine, it starts Python if the engine's environment (or a Python named by
#' `RETICULATE_PYTHON`) exists; without one it starts none, and says what is
#' missing. Secrets are not shown: of `HF_TOKEN`, only whether it is set.
#'
#' @return The report (an object of class `newrllama4_sitrep`: a list of
#'   sections, each a data frame with the columns `label`, `value`, `problem`
#'   and `fix`), invisibly.
#' @seealso [engine_available()], [install_newrllama4()]
#' @export
#' @examples
#' newrllama4_sitrep()
newrllama4_sitrep <- function() {
  report <- tryCatch(sitrep_collect(), error = function(e) {
    sitrep_report(list(Report = sitrep_section(
      sitrep_item("error", paste("the report could not be made:", safe_message(e)), problem = TRUE,
                  fix = "Paste this line into the bug report, with sessionInfo()'s output.")
    )))
  })
  tryCatch(print(report), error = function(e) cat("newrllama4 situation report: could not be printed:", safe_message(e), "\n"))
  invisible(report)
}

sitrep_collect <- function() {
  # first, since it may start Python, which the sections below then describe
  available <- engine_available()
  ready <- isTRUE(available)
  sitrep_report(list(
    R = sitrep_r(),
    Python = sitrep_python(),
    Engine = sitrep_engine(available),
    llama.cpp = if (ready) sitrep_llama() else sitrep_section(
      sitrep_item("build", "unknown: the engine cannot be used (see Engine above)")
    ),
    Models = sitrep_models(ready)
  ))
}

# -- items and sections ---------------------------------------------------------------

sitrep_item <- function(label, value, problem = FALSE, fix = NA_character_) {
  value <- one_line(value)
  data.frame(label = label, value = value, problem = isTRUE(problem), fix = one_line(fix, NA_character_),
             stringsAsFactors = FALSE)
}

sitrep_section <- function(...) {
  items <- Filter(Negate(is.null), list(...))
  do.call(rbind, c(items, list(make.row.names = FALSE)))
}

sitrep_report <- function(sections) structure(sections, class = "newrllama4_sitrep")

# A value as one string, whatever came back (NULL, NA, a vector, a failure).
one_line <- function(value, empty = "") {
  value <- try_or(as.character(unlist(value)), character())
  value <- value[!is.na(value) & nzchar(value)]
  if (length(value) == 0) empty else paste(value, collapse = ", ")
}

# Run `expr` for a value; a failure becomes the value's text.
sitrep_try <- function(expr) {
  tryCatch(expr, error = function(e) paste("could not be determined:", safe_message(e)))
}

#' @export
format.newrllama4_sitrep <- function(x, ...) {
  cross <- try_or(cli::symbol$cross, "x")
  arrow <- try_or(cli::symbol$arrow_right, "->")
  lines <- "newrllama4 situation report"
  for (name in names(x)) {
    section <- x[[name]]
    lines <- c(lines, "", name)
    for (i in seq_len(NROW(section))) {
      mark <- if (isTRUE(section$problem[[i]])) cross else " "
      value <- strsplit(section$value[[i]], "\n", fixed = TRUE)[[1]]
      lines <- c(lines, sprintf("%s %s: %s", mark, section$label[[i]], value[1]),
                 if (length(value) > 1) paste0("    ", value[-1]))
      if (!is.na(section$fix[[i]])) lines <- c(lines, sprintf("    %s %s", arrow, section$fix[[i]]))
    }
  }
  within_width(lines)
}

#' @export
print.newrllama4_sitrep <- function(x, ...) print_lines(x, ...)

# -- R ----------------------------------------------------------------------------------

sitrep_r <- function() {
  sitrep_section(
    sitrep_item("R", sitrep_try(paste0(R.version$version.string, ", ", R.version$platform))),
    sitrep_item("newrllama4", sitrep_try(paste0(package_version_string(), " (", system.file(package = "newrllama4"), ")"))),
    sitrep_item("reticulate", sitrep_try(format(utils::packageVersion("reticulate")))),
    tryCatch(sitrep_masking(), error = function(e) sitrep_item("masked names", paste("could not be determined:", safe_message(e))))
  )
}

# -- Python -----------------------------------------------------------------------------

sitrep_variables <- c(python_variables, "RETICULATE_VIRTUALENV_ROOT", "WORKON_HOME", "VIRTUAL_ENV", "PYTHONPATH",
                      "PYTHONHOME", "NEWRLLAMA4_PYTHON_SOURCE", "CMAKE_ARGS")

sitrep_python <- function() {
  env <- engine_env()
  running <- running_python()
  stale <- try_or(stale_python_variable(), NULL)
  python <- if (is.na(running)) {
    sitrep_item("Python", "not started in this session")
  } else {
    version <- try_or(reticulate::import("platform")$python_version(), try_or(reticulate::py_config()$version, ""))
    sitrep_item("Python", paste0(running, if (nzchar(one_line(version))) paste0(" (", one_line(version), ")")))
  }
  variables <- lapply(sitrep_variables, function(name) {
    value <- Sys.getenv(name, NA)
    shown <- if (is.na(value)) "(unset)" else if (!nzchar(value)) "(set, empty)" else value
    if (!is.null(stale) && identical(stale$variable, name)) {
      sitrep_item(name, paste(shown, if (nzchar(value)) "(no such Python)"), problem = TRUE,
                  fix = sprintf("Unset it (Sys.unsetenv(\"%s\"), and remove it from ~/.Renviron) or point it at a Python; restart R.", name))
    } else {
      sitrep_item(name, shown)
    }
  })
  do.call(sitrep_section, c(list(
    python,
    sitrep_item("chosen by", sitrep_try(python_chosen_by(running, env))),
    sitrep_env_item(env)
  ), variables))
}

# What chose the Python in use (or, before one starts, the one that would be).
python_chosen_by <- function(running, env) {
  if (!is.na(running)) {
    forced <- one_line(try_or(reticulate::py_config()$forced, NULL))
    by <- if (identical(forced, "use_python function")) {
      "reticulate::use_python()"
    } else if (nzchar(forced)) {
      forced
    } else if (env$python_exists && same_python(running, env$python)) {
      sprintf("the virtual environment %s (newrllama4's)", env$name)
    } else {
      "reticulate's search (no variable or environment chose one)"
    }
    before <- if (!engine_state$started_here) "; Python was already running when newrllama4 first needed it"
    return(paste0(by, before))
  }
  chosen <- python_variables_set()
  if (length(chosen) > 0 && chosen[[1]] != "RETICULATE_PYTHON_FALLBACK") {
    return(sprintf("%s, when Python starts", chosen[[1]]))
  }
  if (env$python_exists) return(sprintf("the virtual environment %s (newrllama4's), when Python starts", env$name))
  if (length(chosen) > 0) return(sprintf("%s, when Python starts", chosen[[1]]))
  "nothing yet: reticulate would search for a Python when one starts"
}

sitrep_env_item <- function(env) {
  label <- paste("virtual environment", env$name)
  if (!env$exists) {
    return(sitrep_item(label, paste0(one_line(env$path, "?"), " (does not exist)")))
  }
  if (!env$python_exists) {
    return(sitrep_item(label, paste0(env$path, " (its Python, ", env$python, ", is gone)"), problem = TRUE,
                       fix = "Run newrllama4::install_newrllama4() again: it makes the environment anew. Then restart R."))
  }
  sitrep_item(label, paste0(env$path, " (Python: ", env$python, ")"))
}

# -- the engine -------------------------------------------------------------------------

sitrep_engine <- function(available) {
  status <- if (isTRUE(available)) {
    sitrep_item("status", "ready")
  } else {
    # the reason's own bullets say how to fix it
    sitrep_item("status", one_line(attr(available, "reason"), "unknown"), problem = TRUE)
  }
  versions <- sitrep_installed_versions()
  engine_version <- versions[["newrllama4"]]
  other_version <- !engine_version %in% c(package_version_string(), "unknown (Python not started)", "not installed")
  sitrep_section(
    status,
    sitrep_item("engine (newrllama4, Python)", engine_version, problem = other_version, fix = if (other_version) {
      "Run newrllama4::install_newrllama4() again, then restart R: the engine must be the R package's version."
    }),
    sitrep_item("llama-cpp-python", versions[["llama_cpp_python"]])
  )
}

# The installed versions, read from the packages' metadata, without importing
# them (an engine that fails to import still has one).
sitrep_installed_versions <- function() {
  names <- c("newrllama4", "llama_cpp_python")
  if (!python_running()) return(rlang::set_names(rep("unknown (Python not started)", 2), names))
  metadata <- try_or(reticulate::import("importlib.metadata"), NULL)
  versions <- vapply(names, function(name) {
    try_or(as.character(metadata$version(name)), "not installed")
  }, "")
  # the version of the engine Python imports, where it imports (a source directory on
  # PYTHONPATH has no metadata, an installed one may differ from what is imported)
  spec <- try_or(reticulate::import("importlib.util")$find_spec("newrllama4"), NULL)
  imported <- if (is.null(spec)) NULL else try_or(reticulate::import("newrllama4")$`__version__`, NULL)
  if (rlang::is_string(imported)) versions[["newrllama4"]] <- imported
  versions
}

# -- llama.cpp --------------------------------------------------------------------------

gpu_backends <- c("CUDA", "Metal", "Vulkan", "SYCL", "HIP", "ROCm", "MUSA", "CANN", "OpenCL", "Kompute", "BLAS", "RPC")

sitrep_llama <- function() {
  versions <- try_or(engine_call(engine()$versions), list())
  system <- one_line(versions[["llama.cpp system"]], "unknown")
  backends <- gpu_backends[vapply(gpu_backends, function(b) grepl(paste0("\\b", b, "\\b"), system), NA)]
  offload <- try_or(isTRUE(reticulate::import("llama_cpp")$llama_supports_gpu_offload()), NA)
  gpu <- if (is.na(offload)) {
    "unknown"
  } else if (offload) {
    paste0("compiled in (", one_line(backends, "backend not named"), "): model_load(n_gpu_layers = -1) offloads every layer; ",
           "the default, 0, runs them on the CPU")
  } else {
    "none compiled in: every layer runs on the CPU, whatever n_gpu_layers says"
  }
  sitrep_section(
    sitrep_item("llama.cpp", one_line(versions[["llama.cpp"]], "unknown")),
    sitrep_item("CPU features", system),
    sitrep_item("GPU offload", gpu),
    sitrep_identity_items(),
    sitrep_item("Python", one_line(c(versions[["python"]], versions[["platform"]]), "unknown")),
    sitrep_item("numpy, llguidance", one_line(c(versions[["numpy"]], versions[["llguidance"]]), "unknown"))
  )
}

sitrep_identity_items <- function() {
  settings <- try_or(reticulate::import("newrllama4._llama")$GGML_SETTINGS, NULL)
  environ <- try_or(reticulate::import("os")$environ, NULL)
  shown <- if (length(settings) == 0) "unknown" else {
    paste(vapply(names(settings), function(name) {
      now <- one_line(try_or(environ$get(name), NULL), "(unset)")
      sprintf("%s=%s (identity needs %s)", name, now, settings[[name]])
    }, ""), collapse = "; ")
  }
  problems <- try_or(unlist(with_engine(engine_for_r$identity_problems())), "could not be determined")
  rbind(
    sitrep_item("ggml settings", shown),
    if (length(problems) == 0) {
      sitrep_item("identity guaranteed", "yes: a prompt's answer does not depend on the prompts batched with it")
    } else {
      sitrep_item("identity guaranteed", paste("no:", one_line(problems)), problem = TRUE,
                  fix = "Restart R with those variables unset, and load models before anything else uses llama.cpp.")
    }
  )
}

# -- models -----------------------------------------------------------------------------

sitrep_models <- function(ready) {
  dir <- if (ready) try_or(reticulate::py_str(reticulate::import("newrllama4.models")$cache_dir()), NA) else NA
  if (is.na(one_line(dir, NA))) dir <- engine_cache_dir()
  writable <- dir_writable(dir)
  token <- if (nzchar(Sys.getenv("HF_TOKEN"))) "(set)" else "(unset)"
  hub <- hub_cache_dir()
  models <- c(cached_models(dir), cached_models(hub))
  sitrep_section(
    sitrep_item("cache directory", paste0(dir, " (", writable$state, ")"), problem = !writable$ok,
                fix = if (!writable$ok) "Set NEWRLLAMA4_CACHE to a directory you can write (in ~/.Renviron), then restart R."),
    sitrep_item("Hugging Face cache", hub),
    sitrep_item("cached models", if (length(models) == 0) "none" else {
      paste(sprintf("%s (%s)", names(models), vapply(models, format_bytes, "")), collapse = "\n")
    }),
    sitrep_item("NEWRLLAMA4_CACHE", one_line(Sys.getenv("NEWRLLAMA4_CACHE", NA), "(unset)")),
    sitrep_item("HF_HUB_OFFLINE", one_line(Sys.getenv("HF_HUB_OFFLINE", NA), "(unset)")),
    sitrep_item("HF_ENDPOINT", one_line(Sys.getenv("HF_ENDPOINT", NA), "(unset)")),
    sitrep_item("HF_TOKEN", token),
    sitrep_item("OLLAMA_MODELS", one_line(Sys.getenv("OLLAMA_MODELS", NA), "(unset)")),
    sitrep_item("free memory", sitrep_try(free_memory()))
  )
}

# The engine's cache directory as it computes it (models.cache_dir(): platformdirs'
# user cache directory), for when the engine cannot be asked.
engine_cache_dir <- function() {
  configured <- Sys.getenv("NEWRLLAMA4_CACHE")
  if (nzchar(configured)) return(path.expand(configured))
  sysname <- try_or(Sys.info()[["sysname"]], "")
  if (.Platform$OS.type == "windows") {
    return(file.path(Sys.getenv("LOCALAPPDATA"), "newrllama4", "Cache"))
  }
  if (identical(sysname, "Darwin")) return(path.expand("~/Library/Caches/newrllama4"))
  base <- trimws(Sys.getenv("XDG_CACHE_HOME"))
  file.path(if (nzchar(base)) base else path.expand("~/.cache"), "newrllama4")
}

# The Hugging Face hub's cache (huggingface_hub's constants).
hub_cache_dir <- function() {
  if (nzchar(Sys.getenv("HF_HUB_CACHE"))) return(path.expand(Sys.getenv("HF_HUB_CACHE")))
  home <- Sys.getenv("HF_HOME")
  if (!nzchar(home)) {
    base <- Sys.getenv("XDG_CACHE_HOME")
    home <- file.path(if (nzchar(base)) base else "~/.cache", "huggingface")
  }
  path.expand(file.path(home, "hub"))
}

# Whether a directory can be written, found without writing: it, or the nearest
# folder above that exists (where it would be made).
dir_writable <- function(dir) {
  if (is.na(dir) || !nzchar(dir)) return(list(ok = FALSE, state = "unknown"))
  existing <- dir
  while (!file.exists(existing) && dirname(existing) != existing) existing <- dirname(existing)
  if (!dir.exists(existing)) {
    return(list(ok = FALSE, state = sprintf("cannot be made: %s is not a directory", existing)))
  }
  ok <- isTRUE(file.access(existing, 2) == 0)
  state <- if (identical(existing, dir)) {
    if (ok) "exists, writable" else "exists, cannot be written"
  } else {
    if (ok) sprintf("does not exist yet; can be made in %s", existing) else sprintf("cannot be made: %s cannot be written", existing)
  }
  list(ok = ok, state = state)
}

# GGUF files under a directory, by path relative to it, with their sizes (the
# Hub's cache links its snapshots to blobs; file.size() follows the links).
cached_models <- function(dir, limit = 30) {
  files <- try_or(list.files(dir, pattern = "\\.gguf$", recursive = TRUE, ignore.case = TRUE), character())
  if (length(files) == 0) return(numeric())
  sizes <- try_or(file.size(file.path(dir, files)), rep(NA_real_, length(files)))
  files <- utils::head(files, limit)
  rlang::set_names(utils::head(sizes, limit), file.path(basename(dir), files))
}

free_memory <- function() {
  if (!file.exists("/proc/meminfo")) return("unknown on this system")
  info <- readLines("/proc/meminfo", warn = FALSE)
  kib <- function(field) {
    line <- grep(paste0("^", field, ":"), info, value = TRUE)
    if (length(line) == 0) NA_real_ else as.numeric(gsub("[^0-9]", "", line[1])) * 1024
  }
  sprintf("%s available of %s", format_bytes(kib("MemAvailable")), format_bytes(kib("MemTotal")))
}
