# The answers of annotate_texts(): what an answer is (labels, typed schema fields or
# free text) and the columns of `data` it becomes, with the probabilities of fields.

# What an answer is: labels, JSON with typed fields, or free text; how to make
# its columns and its examples' answers.
answer_shape <- function(labels, schema, call = caller_env()) {
  if (!is.null(labels)) {
    return(list(kind = "labels", labels = labels, max_tokens = 1L, example_answer = function(example) example[[".label"]],
                example_columns = ".label"))
  }
  if (is.null(schema)) {
    return(list(kind = "text", max_tokens = 64L, example_answer = function(example) example[[".answer"]],
                example_columns = ".answer"))
  }
  if (!is.list(schema) || !rlang::is_named(schema) || length(schema) == 0) {
    abort_invalid("{.arg schema} must be a named list of fields.", "schema", call)
  }
  properties <- Map(field_schema, schema, names(schema), MoreArgs = list(call = call))
  json_schema <- list(type = "object", properties = properties, required = as.list(names(schema)),
                      additionalProperties = FALSE)
  list(
    kind = "fields", max_tokens = 256L, json_schema = json_schema, fields = properties,
    example_columns = names(schema),
    example_answer = function(example) {
      values <- lapply(names(schema), function(field) {
        value <- example[[field]]
        if (is.factor(value)) as.character(value) else value
      })
      as.character(jsonlite::toJSON(stats::setNames(values, names(schema)), auto_unbox = TRUE, digits = NA))
    }
  )
}

field_types <- c("string", "integer", "number", "boolean")

field_schema <- function(field, name, call) {
  if (rlang::is_string(field) && field %in% field_types) return(list(type = field))
  if (is.character(field) && length(field) >= 2 && !anyNA(field) && !anyDuplicated(field)) {
    return(list(enum = as.list(field)))
  }
  if (is.list(field) && rlang::is_named(field) && (rlang::is_string(field$type, field_types) || !is.null(field$enum))) {
    if (!is.null(field$enum)) field$enum <- as.list(field$enum)
    return(field)
  }
  abort_invalid(c(
    "Field {.field {name}} of {.arg schema} must be one of {.or {.val {field_types}}}, a character vector of allowed values, or a list with a {.field type} or an {.field enum}.",
    "x" = "It is {.obj_type_friendly {field}}."
  ), "schema", call)
}

# The answers as columns of `data`; rows that did not run (missing text) or
# failed get NA and their reason in `.error`.
add_answer_columns <- function(data, answer, answers, runnable, skipped, labelled, n_orders) {
  by_row <- function(values, missing) {
    column <- rep(missing, nrow(data))
    column[runnable] <- values
    column
  }
  errors <- skipped
  if (answer$kind == "labels") {
    errors[runnable] <- labelled$error
    data[[".label"]] <- factor(by_row(labelled$label, NA_character_), levels = answer$labels)
    for (label in answer$labels) {
      data[[paste0(".prob_", label)]] <- by_row(labelled$probs[, label], NA_real_)
    }
    data[[".confidence"]] <- by_row(labelled$confidence, NA_real_)
    if (n_orders > 1) {
      data[[".agreement_orders"]] <- by_row(ifelse(is.na(labelled$label), NA_real_, labelled$agreement_orders),
                                            NA_real_)
    }
  } else {
    failed <- generation_errors(answers)
    errors[runnable[failed$index]] <- failed$message
    if (answer$kind == "fields") {
      parsed <- parsed_answers(answers)
      probs <- field_probs(answers)
      for (field in names(answer$fields)) {
        # as the field's probabilities name them (field_codes(): TRUE is "true")
        values <- vapply(parsed, function(p) if (is.null(p)) NA_character_ else field_codes(p[[field]]), "")
        data[[field]] <- typed_column(answer$fields[[field]], by_row(values, NA_character_))
        allowed <- scored_values(answer$fields[[field]])
        if (is.null(allowed)) next
        # NA columns where the context could not score the field (annotate_texts() warned)
        value_probs <- probs[[field]] %||% matrix(NA_real_, length(values), length(allowed),
                                                  dimnames = list(NULL, allowed))
        for (value in allowed) {
          data[[paste0(".prob_", field, "_", value)]] <- by_row(unname(value_probs[, value]), NA_real_)
        }
        chosen <- unname(value_probs[cbind(seq_along(values), match(values, allowed))])
        data[[paste0(".confidence_", field)]] <- by_row(chosen, NA_real_)
      }
    } else {
      data[[".answer"]] <- by_row(as.vector(answers), NA_character_)
    }
  }
  data[[".error"]] <- errors
  data
}

# The values a field's probabilities are given for, as the engine scores them
# (field_probs.py): an enum of strings, or "true" and "false" for a boolean;
# NULL for other fields.
scored_values <- function(field) {
  if (!is.null(field$enum)) {
    values <- field$enum
    is_strings <- all(vapply(values, rlang::is_string, NA))
    if (is_strings && length(values) >= 2 && !anyDuplicated(unlist(values)) &&
        (is.null(field$type) || identical(field$type, "string")) && is.null(field$const)) {
      return(unlist(values))
    }
    return(NULL)
  }
  if (identical(field$type, "boolean") && is.null(field$const)) c("true", "false")
}

scored_field_names <- function(answer) {
  if (answer$kind != "fields") return(character())
  names(Filter(Negate(is.null), lapply(answer$fields, scored_values)))
}

# Whether a context scores fields; a server that cannot is said so once per call,
# and its fields' probability columns are NA.
context_scores_fields <- function(context, call = caller_env()) {
  if (isTRUE(context$py$scores_fields)) return(TRUE)
  warn_newrllama4("field_probs", c(
    "The server cannot score a schema's fields: their {.field .prob_} and {.field .confidence_} columns are {.code NA}.",
    "i" = "llama-server and the local engine score them."
  ), call = call)
  FALSE
}

# A field's column from the answers' values (as strings, NA where no answer).
typed_column <- function(field, values) {
  if (!is.null(field$enum)) return(factor(values, levels = unlist(field$enum)))
  switch(field$type,
    integer = as.integer(values),
    number = as.double(values),
    boolean = as.logical(values),
    values
  )
}
