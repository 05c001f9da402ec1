# The coded rows, checked once for every function that reads them
# (label_regression(), label_shares(), recalibrate_labels()): `coded` against
# `data`, the codes as the labels spell them, and, where the estimate weights
# by the design, each row's inclusion probability after nonresponse.

# `labels`: the labels the codes must be one of (NULL for an answer's numbers),
# or for several labelled variables a list of them, named by variable.
# `probabilities`: whether `.sample_prob` is needed. Returns the coded rows'
# positions among `data`'s rows, their codes, inclusion probabilities and strata.
checked_coded_rows <- function(data, coded, truth, call, labels = NULL, probabilities = TRUE) {
  if (!is.data.frame(coded) || !".row" %in% names(coded)) {
    abort_newrllama4("coded_rows", "{.arg coded} must be a data frame of rows coded by hand with {.field .row} (their
                     row numbers in {.arg data}), as {.fn review_sample} gives them.", call = call)
  }
  rows <- coded$.row
  if (!is.numeric(rows) || anyNA(rows) || !all(rows %in% seq_len(nrow(data))) || anyDuplicated(rows)) {
    abort_newrllama4("coded_rows", "{.field .row} of {.arg coded} must name distinct rows of {.arg data}.", call = call)
  }
  rows <- as.integer(rows)
  if (".label" %in% names(data) && anyNA(data$.label[rows])) {
    abort_newrllama4("coded_rows", "{.field .row} of {.arg coded} must name labelled rows of {.arg data}.", call = call)
  }
  codes <- coded_codes(truth, coded, labels, call)
  # columns copied from data by review_sample(), not the codes
  shared <- setdiff(intersect(names(coded), names(data)),
                    c(names(coded)[startsWith(names(coded), ".")], attr(codes, "columns")))
  differs <- shared[vapply(shared, function(column) {
    !identical(as.character(coded[[column]]), as.character(data[[column]][rows]))
  }, NA)]
  if (length(differs) > 0) {
    abort_newrllama4("coded_rows", c(
      "The coded rows are not those rows of {.arg data}: {.field {differs}} differ{?s/}.",
      "i" = "{.field .row} numbers the rows of {.arg data} as it was drawn from: do not sort, filter or reorder it in
             between."), call = call)
  }
  design <- attr(coded, "design", exact = TRUE)
  # clusters drawn whole are the sampling units
  sample <- list(rows = rows, truth = codes, stratum = coded$.stratum,
                 unit = if (!is.null(design$cluster)) coded[[design$cluster]])
  if (probabilities) sample$prob <- checked_probabilities(coded, call)
  responding(sample, design, probabilities, call)
}

checked_probabilities <- function(coded, call) {
  if (!".sample_prob" %in% names(coded)) {
    abort_newrllama4("coded_rows", c(
      "{.arg coded} has no {.field .sample_prob}: each coded row's probability of being drawn.",
      "i" = "Draw the rows to code with {.fn review_sample}, which records it, and keep the column when the codes come
             back."), call = call)
  }
  prob <- coded$.sample_prob
  if (!is.numeric(prob) || anyNA(prob) || any(prob <= 0 | prob > 1)) {
    abort_newrllama4("coded_rows", "{.field .sample_prob} of {.arg coded} must be probabilities above 0.", call = call)
  }
  prob
}

# The codes: one column of `coded` (`truth` a column), or for several labelled
# variables a list of columns, named by variable (`truth` a named character
# vector giving each variable's column). Attribute "columns": their names.
coded_codes <- function(truth, coded, labels, call) {
  if (!is.list(labels)) {
    codes <- rlang::eval_tidy(truth, coded)
    if (length(codes) != nrow(coded)) {
      abort_newrllama4("coded_truth", "{.arg truth} must be a column of {.arg coded}: a code for every coded row.",
                       call = call)
    }
    if (!is.null(labels)) codes <- codes_as_labels(codes, labels, call)
    return(structure(codes, columns = all.vars(rlang::quo_get_expr(truth))))
  }
  columns <- truth_mapping(truth, coded)
  if (is.null(columns) || !setequal(names(columns), names(labels)) || !all(columns %in% names(coded))) {
    abort_newrllama4("coded_truth", c(
      "With several labelled variables, {.arg truth} must name the column of {.arg coded} that codes each:
       {.code truth = c({paste0(names(labels), ' = \"...\"', collapse = ', ')})}."), call = call)
  }
  codes <- lapply(stats::setNames(nm = names(labels)), function(variable) {
    column <- coded[[columns[[variable]]]]
    if (is.null(labels[[variable]])) column else codes_as_labels(column, labels[[variable]], call)
  })
  structure(codes, columns = unname(columns))
}

# The named character vector `truth` is for several labelled variables (each
# one's column of `coded`), or NULL where it is one column.
truth_mapping <- function(truth, coded) {
  if (!is.data.frame(coded)) return(NULL)
  value <- tryCatch(rlang::eval_tidy(truth, coded), error = function(e) NULL)
  if (is.character(value) && !is.null(names(value))) value
}

# Codes spelled as the labels are: logical codes, and "TRUE" or "True" read
# from a file, are a boolean field's "true" and "false".
codes_as_labels <- function(codes, labels, call) {
  codes <- field_codes(codes)
  if (setequal(labels, c("true", "false"))) codes <- tolower(codes)
  outside <- unique(codes[!is.na(codes) & !codes %in% labels])
  if (length(outside) > 0) {
    abort_newrllama4("coded_truth", c("{.arg truth} must be one of the labels ({.val {labels}}) for every coded row.",
                                      "x" = "It has {.val {outside}}."), call = call)
  }
  codes
}

# The coded rows that have a code. Rows drawn but not coded (a missing code,
# or rows the design counts that `coded` no longer has) are nonresponse: each
# stratum's coded rows then stand for its rows, their probability the share
# coded. That is valid where the uncoded rows are like the coded ones of their
# stratum, so it warns; a stratum with no coded row cannot be stood for.
responding <- function(sample, design, probabilities, call) {
  coded <- if (is.list(sample$truth)) stats::complete.cases(as.data.frame(sample$truth)) else !is.na(sample$truth)
  strata <- design$strata
  short <- !is.null(strata) && !is.null(sample$stratum) &&
    any(strata$drawn > tabulate(match(sample$stratum[coded], strata$name), nrow(strata)) | strata$drawn == 0)
  if (all(coded) && !short) return(sample)
  if (!is.null(sample$unit)) {
    abort_newrllama4("coded_truth", c(
      "{.arg truth} must give a code for every row of the clusters drawn.",
      "i" = "A cluster's rows are drawn together: code them all."), call = call)
  }
  if (is.null(sample$stratum) || (probabilities && is.null(strata) && anyNA(sample$stratum))) {
    abort_newrllama4("coded_truth", c(
      "{.arg truth} must give a code for every coded row.",
      "i" = "Rows left out of a drawn sample bias the correction: code them, or draw again."), call = call)
  }
  stratum <- as.character(sample$stratum)
  if (is.null(strata)) {
    # the stratum's rows, from its drawn rows' probabilities
    names <- unique(stratum)
    size <- vapply(names, function(h) if (probabilities) sum(1 / sample$prob[stratum == h]) else 1, 0)
    strata <- data.frame(name = names, rows = round(size), drawn = as.vector(table(stratum)[names]))
  }
  answered <- as.vector(table(factor(stratum[coded], levels = strata$name)))
  empty <- strata$name[strata$rows > 0 & answered == 0]
  if (length(empty) > 0) {
    abort_newrllama4("empty_stratum", c(
      "No coded rows in {cli::qty(length(empty))}stratum{?s} {.val {empty}}, so the estimate cannot stand for
       {?its/their} rows.",
      "i" = "Code rows of {cli::qty(length(empty))}{?it/them}: draw more with {.code review_sample(previous =)}."), call = call)
  }
  missing <- sum(strata$drawn - answered)
  warn_newrllama4("nonresponse", c(
    "{missing} drawn row{?s} not coded: each stratum's coded rows are reweighted to stand for its rows.",
    "i" = "This assumes the uncoded rows are like the coded ones of their stratum; code them if they are not."))
  keep <- which(coded)
  truth <- if (is.list(sample$truth)) lapply(sample$truth, `[`, keep) else sample$truth[keep]
  out <- list(rows = sample$rows[keep], truth = truth, stratum = stratum[keep])
  if (probabilities) {
    position <- match(out$stratum, strata$name)
    out$prob <- answered[position] / strata$rows[position]
  }
  out
}

# The column of `data` whose rows share errors (speaker, outlet, day): by
# default the clusters `coded` was drawn in, if any.
check_cluster <- function(cluster, data, coded, call) {
  cluster <- cluster %||% attr(coded, "design", exact = TRUE)$cluster
  if (!is.null(cluster) && (!rlang::is_string(cluster) || !cluster %in% names(data) || anyNA(data[[cluster]]))) {
    abort_invalid("{.arg cluster} must name a column of {.arg data} without missing values.", "cluster", call)
  }
  cluster
}
