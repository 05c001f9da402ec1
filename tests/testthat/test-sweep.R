# The sweep over every export: each argument in turn given a value no argument
# takes fails with a newrllama4_error naming a problem, never with a bare R or
# rlang error. The arguments come from the exports' own formals, so a new
# export or argument is swept without being listed here; what is listed is one
# valid call of each export, which the sweep spoils one argument at a time.

# the coding file's people get links made with a secret kept per user: a temporary one here
withr::local_envvar(R_USER_DATA_DIR = withr::local_tempdir())

# Values no argument of ours takes: not a type any check expects.
unusable_values <- list(environment = new.env(), opaque = structure(list(), class = "unexpected_object"))

# A valid call of each export as a list of arguments; an argument left out takes
# its default, which the sweep replaces too. Engine exports need `fixtures`.
valid_calls <- function(fixtures = NULL) {
  data <- simulated_labels(120, seed = 1)
  coded <- review_sample(data, 60, weight = "uniform", seed = 1)
  fit <- label_regression(yes ~ x, data, coded, truth, seed = 1)
  texts <- data.frame(text = c("Great film.", "Dull."), .label = c("yes", "no"))
  coding_file <- tempfile(fileext = ".sqlite")
  coding_app(texts, coding_file, labels = c("yes", "no"), instruction = "Does the reviewer like it?")
  team_file <- tempfile(fileext = ".sqlite")
  coding_app(texts, team_file, labels = c("yes", "no"), instruction = "Does the reviewer like it?",
             coders = c("Ana", "Ben"), adjudicators = "Eve")
  calls <- list(
    agreement = list(predicted = data$.label, truth = data$truth, n_boot = 10, seed = 1, weights = rep(2, 120)),
    coded_rows_needed = list(x = fit, se = 0.1),
    label_regression = list(formula = yes ~ x, data = data, coded = coded, truth = quote(truth), seed = 1),
    label_shares = list(data = data, coded = coded, truth = quote(truth), seed = 1),
    review_sample = list(data = data, n = 10, seed = 1),
    passage_options = list(),
    engine_available = list(quiet = TRUE),
    install_newrllama4 = list(envname = file.path(tempdir(), "never-made")),
    coding_app = list(sample = texts, file = tempfile(fileext = ".sqlite"), labels = c("yes", "no"),
                      instruction = "Does the reviewer like it?"),
    read_codes = list(file = coding_file),
    write_codes = list(file = coding_file, sample = texts, codes = c("yes", "no"), reason = c(NA, NA), seconds = c(2, 3)),
    coding_links = list(file = team_file, url = "https://coding.example.org/")
  )
  if (is.null(fixtures)) return(calls)
  c(calls, list(
    recalibrate_labels = list(data = fixtures$annotated, coded = fixtures$annotated_coded, truth = quote(truth)),
    learn_labels = list(data = fixtures$annotated, coded = fixtures$annotated_coded, truth = quote(truth),
                        features = FALSE),
    learning_curve = list(data = fixtures$annotated, coded = fixtures$annotated_coded, truth = quote(truth),
                          sizes = 20, features = FALSE, draws = 1L),
    annotate_texts = list(data = fixtures$texts, text = quote(text), instruction = "Yes or no?",
                          labels = c("yes", "no"), context = fixtures$context, progress = FALSE),
    apply_chat_template = list(model = fixtures$chat_model, messages = list(list(role = "user", content = "Hi"))),
    context_create = list(model = fixtures$model, n_ctx = 64L, n_seq_max = 1L),
    context_remote = list(base_url = "http://127.0.0.1:9"),
    generate = list(context = fixtures$context, prompt = "hello", max_tokens = 2L),
    generate_parallel = list(context = fixtures$context, prompts = c("hello", "the king"), max_tokens = 2L,
                             progress = FALSE),
    embed_texts = list(data = fixtures$texts, text = quote(text), instruction = "Describe it.",
                       context = fixtures$context, progress = FALSE),
    model_load = list(source = tiny_model_path()),
    model_tokenize = list(model = fixtures$model, text = "hello"),
    model_detokenize = list(model = fixtures$model, tokens = 1:3),
    field_probs = list(x = fixtures$answers),
    generation_errors = list(x = fixtures$answers),
    generation_stats = list(x = fixtures$answers),
    label_probs = list(x = fixtures$answers),
    manifest = list(x = fixtures$answers),
    parsed_answers = list(x = fixtures$answers),
    passage_answers = list(x = fixtures$passages)
  ))
}

# Engine objects for the valid calls, made once per test run.
sweep_fixtures <- function() {
  if (!is.null(test_models$sweep)) return(test_models$sweep)
  model <- tiny_model()
  context <- tiny_context(n_seq_max = 2L)
  texts <- data.frame(text = c("hello there", "the king", "once upon a time", "a river"))
  annotated <- suppressWarnings(annotate_texts(rep(texts$text, 10), instruction = "Yes or no?",
                                               labels = c("yes", "no"), context = context, progress = FALSE))
  annotated$truth <- rep(c("yes", "no"), 20)
  long <- paste(rep("The river rose all night. By morning the mill was under water.", 12), collapse = "\n\n")
  test_models$sweep <- list(
    model = model, chat_model = model, context = context, texts = texts, annotated = annotated,
    annotated_coded = review_sample(annotated, 20, weight = "uniform", seed = 1),
    answers = generate_parallel(context, c("hello", "the king"), max_tokens = 2L, progress = FALSE),
    passages = suppressWarnings(annotate_texts(long, instruction = "Flood?", labels = c("yes", "no"),
                                               passages = passage_options(size = 60L), context = context,
                                               progress = FALSE))
  )
  test_models$sweep
}

# Exports that take nothing to spoil, whose one argument frees what it is given, or
# that serve an app until stopped (code_sample() checks its arguments through coding_app()).
not_swept <- c("newrllama4_sitrep", "context_free", "context_clear_cache", "model_free", "code_sample")

# `fn` called with `args`, a symbol among them as code (a column that `truth` or
# `text` names, as a user writes it), every other value as itself.
call_with <- function(fn, args) eval(as.call(c(list(fn), args)), globalenv())

# Each argument of `fn` spoiled in turn: the conditions that are not ours.
bare_errors <- function(name, call_args) {
  fn <- getExportedValue("newrllama4", name)
  arguments <- setdiff(names(formals(fn)), "...")
  problems <- character()
  for (argument in arguments) {
    for (kind in names(unusable_values)) {
      spoiled <- call_args
      spoiled[[argument]] <- unusable_values[[kind]]
      cnd <- tryCatch(suppressWarnings(suppressMessages(call_with(fn, spoiled))), error = function(e) e)
      if (!inherits(cnd, "newrllama4_error")) {
        what <- if (inherits(cnd, "error")) paste0("a bare error: ", conditionMessage(cnd)) else "no error"
        problems <- c(problems, sprintf("%s(%s = <%s>): %s", name, argument, kind, what))
      }
    }
  }
  problems
}

test_that("the sweep lists a valid call of every export it sweeps, and each runs", {
  skip_without_engine()
  fixtures <- sweep_fixtures()
  calls <- valid_calls(fixtures)
  functions <- Filter(function(name) is.function(getExportedValue("newrllama4", name)),
                      getNamespaceExports("newrllama4"))
  expect_setequal(c(names(calls), not_swept), functions)
  for (name in setdiff(names(calls), c("install_newrllama4", "context_remote"))) {
    expect_no_error(suppressWarnings(suppressMessages(call_with(getExportedValue("newrllama4", name),
                                                                calls[[name]]))))
  }
})

test_that("every export without the engine fails each spoiled argument with a newrllama4_error", {
  calls <- valid_calls()
  problems <- unlist(lapply(names(calls), function(name) bare_errors(name, calls[[name]])))
  expect_identical(problems, character())
})

test_that("every export on the engine fails each spoiled argument with a newrllama4_error", {
  skip_without_engine()
  fixtures <- sweep_fixtures()
  calls <- valid_calls(fixtures)
  calls <- calls[setdiff(names(calls), names(valid_calls()))]
  problems <- unlist(lapply(names(calls), function(name) bare_errors(name, calls[[name]])))
  expect_identical(problems, character())
})

# Every column argument of every export (truth, by, cluster, field, text,
# covariates), in a valid call: `column` the argument, `args` its call with the
# argument naming its column bare, `value` what of the result to compare (an
# app: the texts its file keeps). Engine exports need `fixtures`.
column_calls <- function(fixtures = NULL) {
  data <- simulated_labels(120, seed = 1)
  data$speaker <- rep(1:12, each = 10)
  coded <- review_sample(data, 60, weight = "uniform", seed = 1)
  fielded <- as_field(data, "positive", boolean = TRUE)
  attr(fielded, "field_order_probs") <- NULL
  field_coded <- review_sample(fielded, 60, weight = "uniform", seed = 1, field = "positive")
  field_coded$code <- field_coded$truth == "yes"
  rows <- learnable_rows(150, labels = c("yes", "no"), seed = 1)
  learner_coded <- review_sample(rows$data, 60, weight = "uniform", seed = 1)
  tones <- as_field(rows$data, "tone")
  tone_coded <- review_sample(tones, 60, weight = "uniform", seed = 1, field = "tone")
  regression <- list(formula = yes ~ x, data = data, coded = coded, truth = quote(truth), seed = 1)
  shares <- list(data = data, coded = coded, truth = quote(truth), seed = 1)
  on_field <- list(data = fielded, coded = field_coded, truth = quote(code), field = quote(positive), seed = 1)
  learner <- list(data = rows$data, coded = learner_coded, truth = quote(gold), features = rows$x)
  on_tone <- list(data = tones, coded = tone_coded, truth = quote(gold), features = rows$x, field = quote(tone))
  curve <- list(sizes = 40, draws = 1L, seed = 1)
  app_texts <- function(args) {
    args$file <- withr::local_tempfile(fileext = ".sqlite")
    call_with(coding_app, args)
    store_meta(args$file)$texts
  }
  calls <- list(
    list(fn = "label_regression", column = "truth", args = regression),
    list(fn = "label_regression", column = "cluster", args = c(regression, cluster = quote(speaker))),
    list(fn = "label_regression", column = "field", args = c(list(formula = positive ~ x), on_field)),
    list(fn = "label_shares", column = "truth", args = shares),
    list(fn = "label_shares", column = "by", args = c(shares, by = quote(group))),
    list(fn = "label_shares", column = "cluster", args = c(shares, cluster = quote(speaker))),
    list(fn = "label_shares", column = "field", args = on_field),
    list(fn = "review_sample", column = "field", args = list(data = fielded, n = 10, seed = 1, field = quote(positive))),
    list(fn = "review_sample", column = "cluster", args = list(data = data, n = 3, seed = 1, cluster = quote(speaker))),
    list(fn = "agreement", column = "field",
         args = list(predicted = coded, truth = quote(truth), field = quote(.label), n_boot = 10, seed = 1)),
    list(fn = "agreement", column = "truth",
         args = list(predicted = coded, truth = quote(truth), field = quote(.label), n_boot = 10, seed = 1)),
    list(fn = "learn_labels", column = "truth", args = learner),
    list(fn = "learn_labels", column = "field", args = on_tone),
    list(fn = "learn_labels", column = "covariates", args = c(learner, covariates = quote(z))),
    list(fn = "recalibrate_labels", column = "truth", args = learner[c("data", "coded", "truth")]),
    list(fn = "recalibrate_labels", column = "field", args = on_tone[c("data", "coded", "truth", "field")]),
    list(fn = "learning_curve", column = "truth", args = c(learner, curve)),
    list(fn = "learning_curve", column = "field", args = c(on_tone, curve)),
    list(fn = "learning_curve", column = "covariates", args = c(learner, curve, covariates = quote(z))),
    list(fn = "coding_app", column = "text", value = app_texts,
         args = list(sample = data[1:4, ], labels = c("yes", "no"), text = quote(text)))
  )
  if (is.null(fixtures)) return(calls)
  c(calls, list(
    list(fn = "annotate_texts", column = "text",
         args = list(data = fixtures$texts, text = quote(text), instruction = "Yes or no?", labels = c("yes", "no"),
                     context = fixtures$context, progress = FALSE)),
    list(fn = "embed_texts", column = "text",
         args = list(data = fixtures$texts, text = quote(text), instruction = "Describe it.",
                     context = fixtures$context, progress = FALSE))
  ))
}

# `x` without its manifests, wherever they sit (label_shares() keeps one an
# estimate): two calls differ there alone, in the time they were made and took.
without_manifests <- function(x) {
  if (inherits(x, "newrllama4_manifest")) return(NULL)
  if (is.list(x)) x[] <- lapply(x, without_manifests)
  for (name in setdiff(names(attributes(x)), c("names", "class", "row.names", "dim", "dimnames"))) {
    attr(x, name) <- without_manifests(attr(x, name))
  }
  x
}

# Each column argument named bare, as a string and misspelled: the first two give
# the same, the third the classed error that lists the columns.
check_column_forms <- function(entry) {
  fn <- getExportedValue("newrllama4", entry$fn)
  run <- entry$value %||% function(args) call_with(fn, args)
  named <- function(value) {
    args <- entry$args
    args[[entry$column]] <- value
    withr::with_seed(1, suppressWarnings(suppressMessages(run(args))))
  }
  column <- rlang::as_string(entry$args[[entry$column]])
  label <- sprintf("%s(%s = %s)", entry$fn, entry$column, column)
  expect_equal(without_manifests(named(column)), without_manifests(named(rlang::sym(column))), ignore_attr = "stats",
               label = label)
  err <- expect_error(named(rlang::sym(paste0(column, "_typo"))), class = "newrllama4_error_missing_column",
                      label = label)
  expect_identical(err$argument, entry$column, label = label)
  expect_match(conditionMessage(err), "The (columns|coded fields) of", label = label)
}

test_that("every column argument takes a bare name or a string alike, and a typo lists the columns", {
  skip_if_not_installed("shiny")
  calls <- column_calls()
  takes_columns <- c("truth", "by", "cluster", "field", "text", "covariates")
  without_engine <- setdiff(names(valid_calls()), c("coded_rows_needed", "passage_options", "engine_available",
                                                    "install_newrllama4", "read_codes", "coding_links",
                                                    "write_codes"))
  expect_setequal(unique(vapply(calls, `[[`, "", "fn")), c(without_engine, "learn_labels", "recalibrate_labels",
                                                            "learning_curve"))
  for (entry in calls) {
    fn <- getExportedValue("newrllama4", entry$fn)
    expect_setequal(vapply(Filter(function(e) e$fn == entry$fn, calls), `[[`, "", "column"),
                    intersect(names(formals(fn)), takes_columns))
    check_column_forms(entry)
  }
})

test_that("every column argument on the engine takes a bare name or a string alike", {
  skip_without_engine()
  calls <- column_calls(sweep_fixtures())
  for (entry in calls[-seq_along(column_calls())]) check_column_forms(entry)
})

# Each data frame argument as a tibble (what dplyr, readr and readxl give), its
# attributes kept as those of a tibble annotate_texts() returned: the call warns
# of nothing it does not warn of given data frames (tibble warns where a column
# read with `$` is missing) and gives the same values.
check_tibbles_alike <- function(fn, args, label,
                                run = function(args) call_with(getExportedValue("newrllama4", fn), args)) {
  as_tibbles <- lapply(args, function(x) {
    if (is.data.frame(x)) structure(x, class = c("tbl_df", "tbl", "data.frame")) else x
  })
  warned <- function(args) {
    warnings <- character()
    value <- withCallingHandlers(withr::with_seed(1, suppressMessages(run(args))), warning = function(w) {
      warnings <<- c(warnings, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
    list(value = value, warnings = unique(warnings))
  }
  untibbled <- function(x) {
    if (is.data.frame(x)) class(x) <- setdiff(class(x), c("tbl_df", "tbl"))
    if (is.list(x) && (!is.object(x) || is.data.frame(x) || inherits(x, "newrllama4_agreement"))) {
      x[] <- lapply(x, untibbled)
    }
    x
  }
  plain <- warned(args)
  tibbles <- warned(as_tibbles)
  expect_identical(setdiff(tibbles$warnings, plain$warnings), character(), label = label)
  expect_equal(untibbled(without_manifests(tibbles$value)), untibbled(without_manifests(plain$value)),
               ignore_attr = TRUE, label = label)
}

test_that("every export given tibbles warns and gives as it does given data frames", {
  skip_if_not_installed("tibble")
  skip_if_not_installed("shiny")
  loadNamespace("tibble")
  for (entry in column_calls()) {
    check_tibbles_alike(entry$fn, entry$args, sprintf("%s(%s =)", entry$fn, entry$column),
                        run = entry$value %||% function(args) call_with(getExportedValue("newrllama4", entry$fn), args))
  }
  calls <- valid_calls()
  for (name in names(calls)) {
    if (any(vapply(calls[[name]], is.data.frame, NA))) check_tibbles_alike(name, calls[[name]], name)
  }
})

test_that("every export on the engine given tibbles warns and gives as it does given data frames", {
  skip_if_not_installed("tibble")
  skip_without_engine()
  loadNamespace("tibble")
  fixtures <- sweep_fixtures()
  for (entry in column_calls(fixtures)[-seq_along(column_calls())]) {
    check_tibbles_alike(entry$fn, entry$args, sprintf("%s(%s =)", entry$fn, entry$column))
  }
  calls <- valid_calls(fixtures)
  for (name in setdiff(names(calls), names(valid_calls()))) {
    if (any(vapply(calls[[name]], is.data.frame, NA))) check_tibbles_alike(name, calls[[name]], name)
  }
})

test_that("tibbles without the design's optional columns warn of no column they lack", {
  skip_if_not_installed("tibble")
  skip_if_not_installed("shiny")
  loadNamespace("tibble")
  data <- simulated_labels(300, seed = 2)
  drawn <- review_sample(data, 80, weight = "uniform", seed = 2)
  own <- tibble::as_tibble(as.data.frame(drawn)[c(".row", ".sample_prob", "truth")])
  lacking <- function(expr) {
    found <- character()
    withCallingHandlers(suppressMessages(expr), warning = function(w) {
      if (grepl("Unknown or uninitialised column", conditionMessage(w))) found <<- c(found, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
    found
  }
  expect_identical(lacking(label_shares(data, own, truth, seed = 1)), character())
  expect_identical(lacking(label_regression(yes ~ x, data, own, truth, seed = 1)), character())
  expect_identical(lacking(agreement(tibble::as_tibble(as.data.frame(drawn)[c(".label", "truth", ".sample_prob")]),
                                     truth, field = .label, n_boot = 0)), character())
  texts <- tibble::tibble(text = c("Great film.", "Dull."))
  expect_identical(lacking(coding_app(texts, withr::local_tempfile(fileext = ".sqlite"), labels = c("yes", "no"),
                                      instruction = "Does the reviewer like it?")), character())
  rows <- learnable_rows(300, dim = 5, seed = 1)
  coded <- review_sample(rows$data, 60, weight = "uniform", seed = 1)
  bare <- tibble::as_tibble(as.data.frame(coded)[c(".row", ".sample_prob", "gold")])
  expect_identical(lacking(learning_curve(rows$data, bare, gold, sizes = 40, features = rows$x, draws = 1, seed = 1)),
                   character())
})
