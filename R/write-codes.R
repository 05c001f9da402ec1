#' Write codes into a coding file without the app
#'
#' Records codes for rows of a drawn sample in the coding file that
#' [coding_app()] keeps, as a coder's clicks would: [read_codes()] reads them
#' back, beside any codes made in the app, ready for the estimators. For codes
#' made elsewhere (a spreadsheet, a second coder's file, a simulation whose
#' truth is known), and for examples that run without a browser.
#'
#' Each code is checked as the app checks a click (a label of the codebook,
#' each field of its kind, a reason for a text that cannot be coded) before
#' any is written: one that is not refuses them all, with an error of class
#' `newrllama4_error_code_refused` whose field `problems` names the rows and
#' why. Codes are only ever added: writing a row again records a new code for
#' its coder, and the latest counts, as in the app.
#'
#' @param file The coding file. A file that does not exist yet is made for
#'   `sample` as [coding_app()] makes it, with `...` (the labels or schema and
#'   the instruction, taken from the annotation's manifest when left out, and
#'   `text =` where the texts are not in a column `text`).
#' @param sample The coded rows: the sample the file was made for (the value
#'   of [review_sample()]), or some of its rows. Rows are matched on `.row`,
#'   or for a sample without one on its row names (a subset keeps them).
#' @param codes One code per row of `sample`: for labels, a vector of labels
#'   (character or factor); for a schema, a data frame with a column per
#'   field. A row whose code is `NA` or blank (every field `NA` or blank, as
#'   `read.csv()` reads the empty cells of a file) is left uncoded, unless
#'   `reason` gives why it cannot be coded.
#' @param coder Who coded them, as the app's coder name.
#' @param role `"code"` for a coder's codes, `"adjudication"` for an
#'   adjudicator's decisions, which [read_codes()] takes over the coders'.
#' @param reason `NULL`, or a reason per row (`NA` for the rows coded): a row
#'   with a reason and no code is written as a text that cannot be coded.
#' @param seconds `NULL`, or the seconds spent on each row (`NA` where not
#'   known), which `read_codes(by = "coder")` gives and the team screen
#'   summarises.
#' @param ... Passed to [coding_app()] when `file` is new; must be empty
#'   otherwise, since a file's coding task is fixed when it is made.
#' @return `file`, invisibly, so that [read_codes()] can follow in a pipe.
#' @seealso [read_codes()] to read the codes back, [coding_app()] to code in
#'   the browser, [review_sample()] to draw the sample.
#' @export
#' @examples
#' if (requireNamespace("shiny", quietly = TRUE) &&
#'     requireNamespace("RSQLite", quietly = TRUE)) {
#'   sample <- data.frame(text = c("Great film.", "Dull.", "Fine, I suppose."))
#'   file <- tempfile(fileext = ".sqlite")
#'   write_codes(file, sample, c("yes", "no", NA), labels = c("yes", "no"),
#'               instruction = "Does the reviewer like the film?")
#'   write_codes(file, sample[3, , drop = FALSE], NA, reason = "cut off or unreadable")
#'   read_codes(file)[c(".row", "code", ".status", ".reason")]
#' }
write_codes <- function(file, sample, codes, coder = "coder", role = c("code", "adjudication"), reason = NULL,
                        seconds = NULL, ...) {
  call <- current_env()
  check_string(file, "file")
  if (!is.data.frame(sample) || nrow(sample) == 0) {
    abort_invalid("{.arg sample} must be a data frame of coded rows, such as the value of {.fn review_sample}.",
                  "sample", call)
  }
  n <- nrow(sample)
  if (!(is.atomic(codes) || is.data.frame(codes)) || NROW(codes) != n) {
    abort_invalid("{.arg codes} must hold one code per row of {.arg sample} ({n}): a vector of labels, or a data frame
                   with a column per field.", "codes", call)
  }
  check_string(coder, "coder")
  role <- check_choice(role, c("code", "adjudication"), "role")
  reason <- per_row(reason, n, is.character, "reason", "a reason (a string) per row", call)
  seconds <- per_row(seconds, n, is.numeric, "seconds", "a number per row", call)
  if (file.exists(file)) {
    if (...length() > 0) {
      abort_invalid("{.arg ...} makes a new file: {.path {file}} exists, and its coding task is fixed.", "...", call)
    }
  } else {
    coding_app(sample, file, ...)
  }
  stored <- store_meta(file, call)
  # a sample without .row: its row names, which a subset of it keeps (coding_app() numbered its rows)
  rows <- sample[[".row"]] %||% suppressWarnings(as.integer(rownames(sample)))
  units <- match(rows, stored$sample$.row)
  if (anyNA(units)) {
    missing <- positions(which(is.na(units)))
    abort_invalid("{.arg sample} has rows that are not in the sample of {.path {file}}: row{?s} {missing}.", "sample",
                  call)
  }
  values <- code_values(codes, stored$task, call)
  coded <- !vapply(values, is.null, NA)
  if (any(coded & !is.na(reason))) {
    both <- positions(which(coded & !is.na(reason)))
    abort_invalid("A row has a code or a reason it cannot be coded, not both: row{?s} {both}.", "reason", call)
  }
  written <- which(coded | !is.na(reason))
  problems <- unlist(lapply(written, function(i) {
    refused <- check_code(units[[i]], values[[i]], is.null(values[[i]]), reason[[i]], NA, role, stored$task,
                          length(stored$texts))
    if (length(refused) > 0) sprintf("Row %d: %s", i, refused)
  }))
  if (length(problems) > 0) {
    shown <- utils::head(problems, 5)
    abort_newrllama4("code_refused", c("No code was written:", stats::setNames(shown, rep("x", length(shown))),
                                       "i" = if (length(problems) > 5) "And {length(problems) - 5} more."),
                     problems = problems, call = call)
  }
  for (i in written) {
    store_write(file, units[[i]], coder, values[[i]], uncodable = is.null(values[[i]]), reason = reason[[i]],
                seconds = seconds[[i]], role = role, call = call)
  }
  invisible(file)
}

# NULL as NA for every row; else a vector of one value per row that passes `ok`.
per_row <- function(x, n, ok, arg, what, call) {
  if (is.null(x)) return(rep(NA, n))
  if (!is.atomic(x) || length(x) != n || !(ok(x) || all(is.na(x)))) {
    abort_invalid("{.arg {arg}} must be {.code NULL} or {what} of {.arg sample}, not {.obj_type_friendly {x}}.", arg, call)
  }
  x
}

# Each row's code as the app writes it (a named list in the task's field
# order), NULL for a row without one.
code_values <- function(codes, task, call) {
  if (length(task$labels$label) > 0) {
    if (!is.atomic(codes)) abort_invalid("{.arg codes} must be a vector of labels: the file codes labels.", "codes", call)
    return(lapply(blank_as_missing(as.character(codes)), function(code) if (!is.na(code)) list(code = code)))
  }
  names <- vapply(task$fields, function(field) field$name, "")
  if (!is.data.frame(codes) || !all(names %in% names(codes))) {
    abort_invalid("{.arg codes} must be a data frame with a column per field of the file's schema: {.field {names}}.",
                  "codes", call)
  }
  # a spreadsheet's empty cells are no value, as NA is
  columns <- lapply(as.list(codes)[names], blank_as_missing)
  lapply(seq_len(nrow(codes)), function(i) {
    value <- lapply(stats::setNames(names, names), function(name) {
      x <- columns[[name]][[i]]
      if (is.na(x)) NULL else if (is.factor(x)) as.character(x) else x
    })
    if (all(vapply(value, is.null, NA))) NULL else value
  })
}
