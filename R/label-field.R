# A schema field as labels. An annotation with `labels` has `.label`,
# `.prob_<label>` and `.confidence`; one with a `schema` has, for each enum or
# boolean field `f`, the column `f`, `.prob_<f>_<value>` and `.confidence_<f>`
# (a boolean's values are "true" and "false", as JSON writes them). Everything
# that works on labels -- review_sample(), agreement(), recalibrate_labels(),
# label_regression(), label_shares() -- works on a field through its view: the
# data with the field's columns renamed to the labels' names.

# The view of `data` in which `field` stands for the labels; `field = NULL` is
# `data` itself. The field's refit record (attribute "field_order_probs") becomes
# the view's "order_probs".
labels_view <- function(data, field, call = caller_env()) {
  if (is.null(field)) return(labels_from_columns(data))
  if (!rlang::is_string(field) || !field %in% names(data)) {
    abort_invalid("{.arg field} must name a column of {.arg data}: a field of the {.arg schema} given to
                   {.fn annotate_texts}.", "field", call)
  }
  values <- field_levels(data[[field]])
  prob_columns <- paste0(".prob_", field, "_", values)
  confidence_column <- paste0(".confidence_", field)
  missing <- setdiff(c(prob_columns, confidence_column), names(data))
  if (is.null(values) || length(missing) > 0) {
    abort_invalid(c("Field {.field {field}} has no probabilities: {.arg field} must be an enum or boolean field of a
                     schema annotation, with {.field .prob_{field}_<value>} and {.field .confidence_{field}} columns.",
                    "i" = if (!is.null(values)) "Missing: {.field {missing}}."),
                  "field", call, subclass = "missing_column")
  }
  # the field's own column is the view's .label: a refit changes it, so it is
  # not a column the coded rows share with `data`
  clashing <- names(data) %in% c(".label", ".confidence", field) | startsWith(names(data), ".prob_")
  view <- data[!clashing]
  view$.label <- field_labels(data[[field]])
  view[paste0(".prob_", values)] <- data[prob_columns]
  view$.confidence <- data[[confidence_column]]
  attr(view, "manifest") <- field_manifest(attr(data, "manifest", exact = TRUE), field)
  attr(view, "order_probs") <- attr(data, "field_order_probs", exact = TRUE)[[field]]
  attr(view, "learner") <- attr(data, "field_learners", exact = TRUE)[[field]]
  view
}

# Labels from another tool (ellmer, a fine-tuned classifier): `.label` and a
# `.prob_<label>` column per label, without the record that annotate_texts()
# keeps. That record is built here from the columns, once for review_sample(),
# learn_labels() and the estimators: one example order (the probabilities as
# given), `.label` a factor of the labels (a label no row got still counts), and
# `.confidence` the largest probability where the tool gave none. `data` as it
# is where it has the record (a stale one is refused where it is read) or no
# `.prob_` column for each label.
labels_from_columns <- function(data) {
  if (!".label" %in% names(data) || !is.null(attr(data, "order_probs", exact = TRUE))) return(data)
  labels <- if (is.factor(data[[".label"]])) levels(data$.label) else prob_labels(data)
  prob_columns <- paste0(".prob_", labels)
  given <- as.character(data$.label)
  if (length(labels) < 2 || !all(prob_columns %in% names(data)) || !all(is.na(given) | given %in% labels)) {
    return(data)
  }
  probs <- `colnames<-`(as.matrix(data[prob_columns]), labels)
  data$.label <- factor(given, levels = labels)
  if (is.null(data[[".confidence"]])) data$.confidence <- row_max(probs / rowSums(probs))
  attr(data, "order_probs") <- order_probs_record(list(probs), data)
  data
}

# Each example order's probabilities of the labels of `data` (a labels view):
# as annotate_texts() kept them, or built from the columns; a classed error
# where there are none, or where they are no longer the rows'.
kept_order_probs <- function(data, call) {
  if (!is.data.frame(data) || is.null(attr(data, "order_probs", exact = TRUE))) {
    abort_invalid("{.arg data} must be labelled rows: the value of {.fn annotate_texts} with {.arg labels}, or labels
                   from another tool, with {.field .label} and a {.field .prob_<label>} column for each label.",
                  "data", call, subclass = "missing_column")
  }
  if (!order_probs_kept(data)) {
    abort_invalid(c("{.arg data} must be the value of {.fn annotate_texts} with {.arg labels}, as it returned it.",
                    "i" = "Each order's probabilities are kept for its rows in their order: refit before
                           subsetting, sorting or changing them."),
                  "data", call)
  }
  attr(data, "order_probs", exact = TRUE)$probs
}

# Whether `data` still has each order's probabilities for its rows in their
# order: the confidence they were recorded with is the data's (subsets, sorts
# and dplyr's verbs, which keep the attributes while the rows change, break it).
order_probs_kept <- function(data) {
  record <- attr(data, "order_probs", exact = TRUE)
  !is.null(record) && identical(record$confidence, data$.confidence)
}

# The labels of `.prob_<label>` columns, in their order; not a schema field's
# `.prob_<field>_<value>`, whose field is a column of `data`.
prob_labels <- function(data) {
  labels <- sub("^\\.prob_", "", grep("^\\.prob_", names(data), value = TRUE))
  fields <- names(data)[!startsWith(names(data), ".")]
  labels[!vapply(labels, function(label) any(startsWith(label, paste0(fields, "_"))), NA)]
}

# A field's values as labels: a factor's levels, or a boolean's JSON spellings;
# NULL for a column that is neither (a number or free text has no labels).
field_levels <- function(column) {
  if (is.factor(column)) return(levels(column))
  if (is.logical(column)) return(c("true", "false"))
  NULL
}

# Codes of a field as its labels are spelled: logical values as JSON writes them,
# blank cells as no code (blank_as_missing()).
field_codes <- function(x) {
  if (is.logical(x)) return(ifelse(x, "true", "false"))
  blank_as_missing(as.character(x))
}

# The empty cells of a spreadsheet or of a CSV file, which read.csv() reads as
# "" where readr reads NA, hold no label: NA (a factor loses their level).
blank_as_missing <- function(x) {
  if (is.factor(x)) return(factor(x, levels = levels(x)[nzchar(trimws(levels(x)))]))
  if (is.character(x)) x[!is.na(x) & !nzchar(trimws(x))] <- NA
  x
}

# A label as people type it, case and spaces aside: "Yes " is "yes".
label_key <- function(x) tolower(gsub("[[:space:]]+", " ", trimws(x)))

# The values that are a label but for case or spaces ("Yes " for "yes").
misspelt_labels <- function(values, labels) values[!values %in% labels & label_key(values) %in% label_key(labels)]

# A coder's "Yes " beside the model's "yes" would be a label of its own, every
# such pair a disagreement: refused, since it is a typing slip, not a finding.
check_label_spelling <- function(predicted, truth, call = caller_env()) {
  found <- unique(c(levels(predicted), levels(truth), as.character(predicted), as.character(truth)))
  found <- found[!is.na(found)]
  key <- label_key(found)
  clashes <- found[key %in% key[duplicated(key)]]
  if (length(clashes) == 0) return(invisible())
  abort_newrllama4("label_spelling", c(
    "{.arg predicted} and {.arg truth} hold labels that differ only in case or spaces: {.val {clashes}}.",
    "i" = "Each would count as a label of its own, and its pairs as disagreements. Spell each label one way first,
           such as with {.code trimws(tolower(x))}."
  ), call = call)
}

# Codes spelled as the labels are: logical codes, and "TRUE" or "True" read
# from a file, are a boolean field's "true" and "false".
codes_as_labels <- function(codes, labels, call) {
  codes <- field_codes(codes)
  if (setequal(labels, c("true", "false"))) codes <- tolower(codes)
  outside <- unique(codes[!is.na(codes) & !codes %in% labels])
  if (length(outside) > 0) {
    misspelt <- misspelt_labels(outside, labels)
    abort_newrllama4("coded_truth", c(
      "{.arg truth} must be one of the labels ({.val {labels}}) for every coded row.",
      "x" = "It has {.val {outside}}.",
      "i" = if (length(misspelt) > 0) "{.val {misspelt}} differ{?s/} from a label only in case or spaces: make
                                        {?it/them} the label's spelling (with {.fn trimws} or {.fn tolower})."
    ), call = call)
  }
  codes
}

# Each scored field's probabilities as recalibrate_labels() keeps a labels
# annotation's: one order, whose matrix is the field's columns as annotated.
field_probs_record <- function(data, fields) {
  lapply(stats::setNames(nm = fields), function(field) {
    view <- labels_view(data, field)
    values <- levels(view$.label)
    order_probs_record(list(`colnames<-`(as.matrix(view[paste0(".prob_", values)]), values)), view)
  })
}

# The manifest as the view sees it: the field's refit entries ("refit_model
# (tone)") under the labels' names, which label_regression() and label_shares()
# read to refit fold by fold.
field_manifest <- function(record, field) {
  if (is.null(record)) return(NULL)
  suffix <- paste0(" (", field, ")")
  mine <- endsWith(names(record$prompt), suffix)
  record$prompt[substr(names(record$prompt)[mine], 1, nchar(names(record$prompt)[mine]) - nchar(suffix))] <-
    record$prompt[mine]
  record
}

# An answer column as labels: a factor keeps its levels, a boolean's are "true"
# and "false"; other columns as strings.
field_labels <- function(column) {
  levels <- field_levels(column)
  if (is.null(levels)) as.character(column) else factor(field_codes(column), levels = levels)
}

# `data` with its field's columns and refit record taken from `view` (a labels
# view that recalibrate_labels() refitted), and the refit's manifest entries
# named after the field, since the other fields keep theirs.
from_labels_view <- function(data, view, field) {
  values <- levels(view$.label)
  label <- as.character(view$.label)
  data[[field]] <- if (is.logical(data[[field]])) label == "true" else factor(label, levels = values)
  for (value in values) data[[paste0(".prob_", field, "_", value)]] <- view[[paste0(".prob_", value)]]
  data[[paste0(".confidence_", field)]] <- view$.confidence
  records <- attr(data, "field_order_probs", exact = TRUE)
  records[[field]] <- attr(view, "order_probs", exact = TRUE)
  attr(data, "field_order_probs") <- records
  learners <- attr(data, "field_learners", exact = TRUE)
  learners[[field]] <- attr(view, "learner", exact = TRUE)
  attr(data, "field_learners") <- learners
  record <- attr(data, "manifest", exact = TRUE)
  refit <- attr(view, "manifest", exact = TRUE)$prompt
  # what the refit wrote or changed (a schema's record may already say the labels' calibration)
  refit <- refit[!mapply(identical, refit, record$prompt[names(refit)])]
  record$prompt[paste0(names(refit), " (", field, ")")] <- refit
  attr(data, "manifest") <- record
  data
}
