# One way to name a column. `truth`, `by`, `cluster`, `field` and `text` name
# columns as dplyr::select() does, by tidyselect's rules: bare (`truth = code`)
# or as a string (`truth = "code"`), several with c() (`by = c(outlet, year)`),
# a vector of names with all_of(), renamed with names where a function maps
# variables to columns (`truth = c(tone = tone_code)`). A name that is not
# there, or a value that names nothing, is one classed error listing what could
# have been named.

# The names `x` (an argument as a quosure) picks among `choices`: a data
# frame's columns (the data frame, so that tidyselect's helpers such as where()
# see the values), or the names of something else (a schema's fields).
# `n = "one"` wants exactly one, `"some"` at least one. NULL is NULL where the
# argument is `optional`. Returns the names picked, named by the names they were
# given (each one's own name where none was).
column_names <- function(x, choices, arg, of, n = c("one", "some"), what = "column", optional = TRUE,
                         call = caller_env()) {
  n <- match.arg(n)
  names <- if (is.data.frame(choices)) names(choices) else choices
  # a variable holding names (`field = field` in a loop, or passed on) is taken
  # as all_of() them, without the warning tidyselect gives such a variable
  # since 1.1.0; one holding NULL is NULL
  expr <- rlang::quo_get_expr(x)
  variable <- rlang::is_symbol(expr) && !rlang::as_string(expr) %in% names
  value <- if (variable) tryCatch(rlang::eval_tidy(x), error = function(e) e)
  if (rlang::quo_is_null(x) || (variable && is.null(value))) {
    if (optional) return(NULL)
    abort_column(x, names, arg, of, n, what, call, reason = "It is NULL.")
  }
  if (is.character(value)) x <- rlang::quo_set_expr(x, rlang::call2(tidyselect::all_of, value))
  pool <- if (is.data.frame(choices)) choices else rlang::set_names(vector("list", length(names)), names)
  picked <- tryCatch(
    tidyselect::eval_select(x, pool, allow_rename = TRUE, error_call = call),
    error = function(e) abort_column(x, names, arg, of, n, what, call, reason = conditionMessage(e))
  )
  if (length(picked) == 0 || (n == "one" && length(picked) > 1)) {
    abort_column(x, names, arg, of, n, what, call,
                 reason = if (length(picked) == 0) "It names none." else
                   cli::format_inline("It names {length(picked)}: {.field {names[picked]}}."))
  }
  stats::setNames(names[picked], names(picked))
}

# The one name an argument picks, or NULL.
column_name <- function(x, choices, arg, of, what = "column", optional = TRUE, call = caller_env()) {
  unname(column_names(x, choices, arg, of, "one", what, optional, call))
}

# The values of an argument that may name a column or be a vector (agreement()'s
# `truth` beside `field`): a string, or a bare name that is a column or no
# variable, names a column of `data` by column_name()'s rules; a variable holding
# values, or any other expression, gives them (over `data`'s columns).
column_values <- function(x, data, arg, of, call = caller_env()) {
  expr <- rlang::quo_get_expr(x)
  value <- if (rlang::is_symbol(expr) && !rlang::as_string(expr) %in% names(data)) {
    tryCatch(rlang::eval_tidy(x), error = function(e) NULL)
  }
  if (rlang::is_string(expr) || (rlang::is_symbol(expr) && (is.null(value) || rlang::is_string(value)))) {
    return(data[[column_name(x, data, arg, of, call = call)]])
  }
  rlang::eval_tidy(x, data)
}

# The classed error: which argument, what it named, and every name it could
# have named (fields `argument` and `choices`).
abort_column <- function(x, names, arg, of, n, what, call, reason) {
  given <- rlang::quo_get_expr(x)
  given <- if (rlang::is_symbol(given)) rlang::as_string(given) else if (rlang::is_string(given)) given
  count <- if (n == "one") paste("one", what) else paste0(what, "s")
  not_given <- if (!is.null(given)) cli::format_inline(", not {.val {given}}") else ""
  example <- if (length(names) > 0) names[[1]] else "name"
  abort_invalid(c(
    "{.arg {arg}} must name {count} of {.arg {of}}{not_given}.",
    "x" = escape_braces(cli::ansi_strip(last_line(reason))),
    "i" = "The {what}s of {.arg {of}}: {.field {names}}.",
    "i" = "Name {if (n == 'one') 'it' else 'them'} bare ({.code {arg} = {example}}) or as a string
           ({.code {arg} = \"{example}\"})."
  ), arg, call, choices = names, subclass = "missing_column")
}

# The last line of a condition's message, without its bullet (a symbol, or its
# ASCII stand-in): tidyselect's own reason, after its header.
last_line <- function(message) {
  lines <- strsplit(message, "\n", fixed = TRUE)[[1]]
  sub("^(x|i|!|\\*|[^ -~]+) ", "", lines[[length(lines)]])
}

# A formula's name that is both a label (with its `.prob_<label>` column) and a
# column of `data`: the formula takes the label, so a column of that name is
# never used; say so rather than take it silently.
warn_label_shadows <- function(variables, data) {
  labels <- if (".label" %in% names(data)) levels(as.factor(data$.label)) else character()
  shadowed <- intersect(intersect(variables, labels), names(data))
  shadowed <- shadowed[paste0(".prob_", shadowed) %in% names(data)]
  if (length(shadowed) == 0) return(invisible())
  warn_newrllama4("label_shadows_column", c(
    "{.field {shadowed}} {?is/are} both {?a label/labels} and {?a column/columns} of {.arg data}: the formula takes
     the label{?s} (the model's {.field {paste0('.prob_', shadowed)}}, corrected by the codes), not the column{?s}.",
    "i" = "{cli::qty(length(shadowed))}Rename the column{?s} to use {?it/them} in the formula."))
}

# A spreadsheet saved with a decimal comma and read with read.csv() gives its
# numbers as text ("0,25"): a covariate then becomes a factor of as many
# levels as rows, a probability a missing value, and the estimators' errors
# spoke of levels without coded rows or of rows reordered. Each of `columns`
# of `data` whose values are all numbers once a comma is a point, and hold a
# comma, is refused, naming the fix.
check_decimal_commas <- function(data, columns, arg, call) {
  as_text <- lapply(data[intersect(columns, names(data))], function(value) {
    if (!is.character(value) && !is.factor(value)) return(NULL)
    value <- trimws(as.character(value))
    value <- value[!is.na(value) & nzchar(value)]
    numbers <- suppressWarnings(as.numeric(sub(",", ".", value, fixed = TRUE)))
    if (length(value) > 0 && any(grepl(",", value, fixed = TRUE)) && !anyNA(numbers)) value[[1]]
  })
  as_text <- unlist(as_text)
  if (length(as_text) == 0) return(invisible())
  abort_invalid(c("{.field {names(as_text)}} of {.arg {arg}} {cli::qty(length(as_text))}hold{?s/} numbers written
                   with a decimal comma, read as text ({.val {as_text[[1]]}}).",
                  "i" = "Read the file with {.code read.csv2()} (or {.code read.csv(dec = \",\")},
                         {.code readr::read_csv2()})."), arg, call, subclass = "decimal_comma")
}
