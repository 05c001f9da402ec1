# The codes a coding file accepts: every code is checked here before the store
# writes it (store_write()), whatever the page sent, so that a crafted request
# cannot put a value outside the codebook into the file.

# The longest note, reason or text field a code may carry, in characters.
code_text_limit <- 2000

# How a reason in the coder's words is stored: this, then the words, in at
# most code_text_limit characters in all (the page's box takes the rest).
other_prefix <- "other: "

# Why a code is not one of the task's, in words for the coder; none when it
# is: a label of the codebook, or each field of its kind (an enum's value, yes
# or no, a whole number, a finite number, a text), the enums and yes/no
# fields filled. A text that cannot be coded needs a reason.
check_code <- function(unit, value, uncodable, reason, note, role, task, n_units) {
  problems <- c(
    if (!rlang::is_scalar_integerish(unit, finite = TRUE) || unit < 1 || unit > n_units) "It is not for a text of the sample.",
    if (!rlang::is_string(role, c("code", "adjudication"))) "Its role is neither a code nor an adjudication.",
    if (!rlang::is_bool(uncodable)) "It neither codes the text nor says it cannot be coded.",
    if (!is_missing_text(note) && !is_short_text(note)) sprintf("The note must be a text of at most %d characters.",
                                                               code_text_limit)
  )
  if (isTRUE(uncodable)) {
    reason_ok <- !is_missing_text(reason) && is_short_text(reason)
    return(c(problems, if (!reason_ok) sprintf("Say why it cannot be coded, in at most %d characters.",
                                               code_text_limit)))
  }
  if (!is.list(value)) return(c(problems, "It holds no code."))
  labels <- unlist(task$labels$label)
  if (length(labels) > 0) {
    ok <- identical(names(value), "code") && rlang::is_string(value$code, labels)
    return(c(problems, if (!ok) paste0("Its label is not one of the codebook's", misspelt(value$code, labels))))
  }
  names <- vapply(task$fields, function(field) field$name, "")
  if (!identical(names(value), names)) return(c(problems, "Its fields are not the codebook's."))
  fields <- unlist(lapply(task$fields, function(field) check_field(value[[field$name]], field)))
  empty <- all(vapply(value, function(x) is.null(x) || is_missing_text(x), NA))
  c(problems, fields, if (empty && length(fields) == 0) "Nothing was filled.")
}

check_field <- function(x, field) {
  name <- field$name
  if (is.null(x) || (rlang::is_scalar_atomic(x) && (is.na(x) || identical(x, "")))) {
    return(if (field$kind %in% c("enum", "boolean")) sprintf("Choose %s.", name))
  }
  ok <- switch(field$kind,
               enum = rlang::is_string(x, unlist(field$values)),
               boolean = rlang::is_bool(x),
               integer = rlang::is_scalar_integerish(x, finite = TRUE) && abs(x) <= .Machine$integer.max,
               number = rlang::is_scalar_double(x) && is.finite(x) || rlang::is_scalar_integer(x),
               is_short_text(x))
  if (ok) return(bound_problems(x, field$name, field$bounds))
  switch(field$kind,
         enum = sprintf("%s must be one of %s%s", name, paste(unlist(field$values), collapse = ", "),
                        misspelt(x, unlist(field$values))),
         boolean = sprintf("%s must be yes or no.", name),
         integer = sprintf("%s must be a whole number.", name),
         number = sprintf("%s must be a number.", name),
         sprintf("%s must be a text of at most %d characters.", name, code_text_limit))
}

is_missing_text <- function(x) is.null(x) || (rlang::is_scalar_atomic(x) && is.na(x)) || identical(trimws(x), "")

is_short_text <- function(x) rlang::is_string(x) && nchar(x, allowNA = TRUE) <= code_text_limit

# The schema's bounds of a field, as JSON Schema words them: those of numbers
# (minimum, maximum, exclusiveMinimum, exclusiveMaximum) and of texts
# (minLength, maxLength, pattern, searched for anywhere in the text as JSON
# Schema does). annotate_texts() has the engine's grammar hold a model's
# answers to them; a coder's code is held to them here.
bound_keywords <- c("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern")

bound_problems <- function(x, name, bounds) {
  if (length(bounds) == 0) return(NULL)
  b <- bounds
  # JSON Schema's draft 4 says "exclusive" as a flag on the minimum or maximum
  for (side in c("Minimum", "Maximum")) {
    exclusive <- paste0("exclusive", side)
    if (is.logical(b[[exclusive]])) {
      b[[exclusive]] <- if (isTRUE(b[[exclusive]])) b[[tolower(side)]]
      if (!is.null(b[[exclusive]])) b[[tolower(side)]] <- NULL
    }
  }
  number <- is.numeric(x)
  text <- is.character(x)
  n <- if (text) nchar(x) else NA
  c(
    if (number && !is.null(b$minimum) && x < b$minimum) sprintf("%s must be at least %s.", name, format(b$minimum)),
    if (number && !is.null(b$maximum) && x > b$maximum) sprintf("%s must be at most %s.", name, format(b$maximum)),
    if (number && !is.null(b$exclusiveMinimum) && x <= b$exclusiveMinimum) {
      sprintf("%s must be more than %s.", name, format(b$exclusiveMinimum))
    },
    if (number && !is.null(b$exclusiveMaximum) && x >= b$exclusiveMaximum) {
      sprintf("%s must be less than %s.", name, format(b$exclusiveMaximum))
    },
    if (text && !is.null(b$minLength) && n < b$minLength) sprintf("%s must have at least %d characters.", name, b$minLength),
    if (text && !is.null(b$maxLength) && n > b$maxLength) sprintf("%s must have at most %d characters.", name, b$maxLength),
    if (text && !is.null(b$pattern) && !isTRUE(grepl(b$pattern, x, perl = TRUE))) {
      sprintf("%s must match the pattern %s.", name, b$pattern)
    }
  )
}

# The end of a refusal: where a typed code is a label but for case or spaces
# ("Yes " for "yes"), it says so.
misspelt <- function(code, labels) {
  if (rlang::is_string(code) && length(misspelt_labels(code, labels)) > 0) {
    sprintf(": \"%s\" differs from one only in case or spaces.", code)
  } else {
    "."
  }
}
