#' Read the codes of a coding file
#'
#' Reads what people coded in [coding_app()] back as the sample's rows, ready
#' for [agreement()], [learn_labels()], [label_regression()] and
#' [label_shares()] as they are.
#'
#' Each text's code is, in this order: the adjudicated decision, if one was
#' recorded (an adjudication always wins); else the code its coders agree on.
#' `.how` says which (`"single"`: one coder; `"agreed"`; `"adjudicated"`;
#' `"disagreed"`: coders differ and nobody adjudicated yet; `"cannot code"`;
#' `"not coded"`), and `.codes` gives each coder's code. The team screen of
#' [coding_app()] downloads the same set ("Download the decided codes, one row per text").
#'
#' Disagreement is not nonresponse. A text whose coders disagree and that
#' nobody adjudicated yet is counted by a documented rule, `disagreements`:
#' * `"split"` (the default): a row per coder's code, each weighted
#'   `.code_weight` = 1 / k among the k coders who gave one. The estimators
#'   take the text back as one unit of the design, drawn once, whose code is
#'   each label's share of its weight (halfway for two coders): the estimate
#'   is that of a coder drawn at random for those texts, and its printout
#'   gives, beside it, the bounds were they all decided one way or the other
#'   (Manski's). It loses no text, and moves the estimate by half the
#'   disagreements at most, where dropping them moves it by all of them
#'   toward whatever made the texts hard: where the hard texts were those of
#'   one label, the share's 95% interval covered 0.886 split and 0.762
#'   dropped (500 draws, `tools/bench_findings_validity.R "hard texts"`),
#'   and the bounds' interval 0.972. A message says how many texts were split.
#' * `"missing"`: no code (`NA`), as nonresponse: the estimators reweight the
#'   coded texts of its stratum for it, as if it were missing at random, with
#'   a warning (`newrllama4_warning_disagreements_missing`) that gives the
#'   share of texts lost; the printout gives the bounds beside the estimate.
#'
#' Adjudicate what you can: only an adjudication tells which code is right.
#' Codes of a labelled covariate cannot be split (a regression is not linear
#' in its covariates): adjudicate them, or read them as `"missing"`; nor can
#' the model's agreement with a text's code be measured on its split rows,
#' which [agreement()] refuses. [learn_labels()] learns from the first
#' coder's code of a split text.
#'
#' A text that its coders (or the adjudicator) could not code stays, with
#' `.status` `"uncodable"`, its reason in `.reason` and no code: the
#' estimators take every drawn text without a code as nonresponse, and let the
#' coded texts of its stratum stand for it, with a warning
#' (`newrllama4_warning_nonresponse`).
#'
#' @param file The coding file of [coding_app()].
#' @param by `"text"` for one row per text, the codes decided; `"coder"` for
#'   one row per coder and text they coded (the latest code of each), to
#'   measure how far the coders agree with each other: give it to
#'   [agreement()].
#' @param disagreements How texts whose coders disagree and that nobody
#'   adjudicated yet are counted (with `by = "text"`): `"split"` between
#'   their coders' codes, or `"missing"` (see Details).
#' @return With `by = "text"`, the sample's rows (every column it had, the
#'   design's columns of [review_sample()] among them: `.stratum`,
#'   `.stratum_rows`, `.stratum_drawn`, `.sample_prob`, `.sampling_unit`) with
#'   `.row`, `.sample_prob` and `.stratum` (`NA` where the sample had none),
#'   the code -- a factor `code` for labels, a column named after each field
#'   of a schema (a model's answer of the same name moves to
#'   `.model_<field>`) -- `.how`, `.coders` (how many coded it), `.codes`,
#'   `.reason`, `.note`, `.status` (as before `.how`: `"coded"`,
#'   `"adjudicated"`, `"uncodable"`, `"disagreement"` or `"not coded"`) and
#'   `.code_weight` (1, or 1 / k on the k rows of a split text). With `by = "coder"`, a data frame of
#'   class `newrllama4_coder_codes`: the sample's columns, `.coder`, the code
#'   columns, `.uncodable`, `.reason`, `.note`, `.seconds` (time spent on the
#'   text) and `.time` (when it was coded).
#' @seealso [coding_app()] to code, [agreement()] to compare.
#' @export
#' @examples
#' if (requireNamespace("shiny", quietly = TRUE) &&
#'     requireNamespace("RSQLite", quietly = TRUE)) {
#'   sample <- data.frame(text = c("Great film.", "Dull.", "Fine, I suppose."),
#'                        .label = c("yes", "no", "yes"))
#'   file <- tempfile(fileext = ".sqlite")
#'   coding_app(sample, file, labels = c("yes", "no"),
#'              instruction = "Does the reviewer like it?")
#'   read_codes(file)
#' }
read_codes <- function(file, by = c("text", "coder"), disagreements = c("split", "missing")) {
  by <- check_choice(by, c("text", "coder"), "by")
  disagreements <- check_choice(disagreements, c("split", "missing"), "disagreements")
  stored <- store_meta(file)
  codes <- store_codes(file)
  if (by == "coder") {
    rows <- coded_rows_frame(stored$sample, stored$task)
    coded <- codes[codes$role == "code", ]
    out <- rows[coded$unit, , drop = FALSE]
    out$.coder <- coded$coder
    out[code_columns(stored$task)] <- decode_codes(coded$value, stored$task)
    out$.uncodable <- coded$uncodable == 1
    out[c(".reason", ".note", ".seconds", ".time")] <- coded[c("reason", "note", "seconds", "time")]
    out <- out[order(out$.row, out$.coder), , drop = FALSE]
    rownames(out) <- NULL
    return(structure(out, class = c("newrllama4_coder_codes", "data.frame"), codes = code_columns(stored$task)))
  }
  rows <- decided_codes(file, stored, codes)
  rows$.status <- unname(status_of_how[rows$.how])
  rows$.code_weight <- 1
  open <- which(rows$.how == "disagreed")
  if (disagreements == "split" && length(open) > 0) {
    inform_newrllama4("disagreements_split", c(
      "{length(open)} of {nrow(rows)} text{?s} ({sprintf('%.1f%%', 100 * length(open) / nrow(rows))}) have coders who
       disagree and no adjudication: each coder's code is a row weighted 1 / their number ({.field .code_weight}).",
      "i" = "Adjudicate them to have their codes decided; the estimators' printout gives the bounds were they all of
             one label."))
    rows <- split_disagreements(rows, open, codes, stored$task)
  }
  if (disagreements == "missing" && length(open) > 0) {
    warn_newrllama4("disagreements_missing", c(
      "{length(open)} of {nrow(rows)} text{?s} ({sprintf('%.1f%%', 100 * length(open) / nrow(rows))}) have coders who disagree
       and no adjudication: they have no code, and the estimators reweight their stratum's coded texts for them.",
      "i" = "Adjudicate them, or read them with {.code disagreements = \"split\"}; the estimators' printout gives the
             bounds were they all of one label."))
  }
  rows
}

# read_codes()'s `.status`, from the decided set's `.how`.
status_of_how <- c(single = "coded", agreed = "coded", adjudicated = "adjudicated", disagreed = "disagreement",
                   `cannot code` = "uncodable", `not coded` = "not coded")

# Each open disagreement as one row per coder's code, weighted 1 / k among the
# k coders who gave a code (one who could not code gives none): the text
# counts once, halfway (for two coders) between its coders' codes. The
# estimators take a text's rows back into one unit of the design whose code is
# each label's share of its weight (checked_coded_rows()).
split_disagreements <- function(rows, open, codes, task) {
  coded <- codes[codes$role == "code" & codes$unit %in% open & codes$uncodable == 0, ]
  coded <- coded[order(match(coded$unit, open), coded$id), ]
  split <- rows[coded$unit, , drop = FALSE]
  split[code_columns(task)] <- decode_codes(coded$value, task)
  split$.code_weight <- 1 / as.vector(table(coded$unit)[as.character(coded$unit)])
  out <- rbind(rows[-open, , drop = FALSE], split)
  out <- out[order(out$.row), , drop = FALSE]
  rownames(out) <- NULL
  out
}

# The decided data set of a coding file: one row per drawn text (the
# sample's columns), the final code of each field, `.how` it was reached
# ("single": one coder; "agreed": the coders gave one code; "adjudicated";
# "disagreed": coders differ and nobody adjudicated yet, no code; "cannot
# code": the decision is that it cannot be coded; "not coded"), `.coders` (how
# many coded it), `.codes` (each coder's code, by name, or as "Coder 1",
# "Coder 2" in the order they coded where `blind`), `.reason` and `.note`.
# read_codes() and the team screen's download both read it.
decided_codes <- function(file, stored = store_meta(file), codes = store_codes(file), blind = FALSE) {
  rows <- coded_rows_frame(stored$sample, stored$task)
  decided <- unit_decisions(codes, nrow(rows), stored$task, blind)
  rows[code_columns(stored$task)] <- decode_codes(decided$value, stored$task)
  rows[c(".how", ".coders", ".codes", ".reason", ".note")] <- decided[c("how", "coders", "codes", "reason", "note")]
  rows
}

# The sample's rows with the design's columns, and room for the codes: a
# model's answer named as a field moves aside.
coded_rows_frame <- function(sample, task) {
  rows <- sample
  if (!".row" %in% names(rows)) rows$.row <- seq_len(nrow(rows))
  for (column in c(".sample_prob", ".stratum")) {
    if (!column %in% names(rows)) rows[[column]] <- rep(NA, nrow(rows))
  }
  for (column in intersect(code_columns(task), names(rows))) {
    names(rows)[names(rows) == column] <- paste0(".model_", column)
  }
  attr(rows, "design") <- NULL
  rownames(rows) <- NULL
  rows
}

code_columns <- function(task) {
  if (length(task$labels$label) > 0) "code" else vapply(task$fields, function(field) field$name, "")
}

# Codes as stored (JSON, NA when the text could not be coded) as typed
# columns: a factor of the labels, or each field as its kind.
decode_codes <- function(json, task) {
  parsed <- lapply(json, function(value) if (is.na(value)) list() else jsonlite::fromJSON(value, simplifyVector = FALSE))
  column <- function(name) vapply(parsed, function(value) if (is.null(value[[name]])) NA_character_ else
    as.character(value[[name]]), "")
  if (length(task$labels$label) > 0) {
    return(data.frame(code = factor(column("code"), levels = unlist(task$labels$label))))
  }
  columns <- lapply(task$fields, function(field) {
    values <- column(field$name)
    switch(field$kind,
           enum = factor(values, levels = unlist(field$values)),
           boolean = as.logical(values),
           integer = as.integer(values),
           number = as.numeric(values),
           values)
  })
  stats::setNames(as.data.frame(columns, col.names = seq_along(columns)), code_columns(task))
}

# Each text's decision: the latest adjudication, else its coders' code when
# they agree; how it was reached, and its coders' codes.
unit_decisions <- function(codes, n_units, task, blind = FALSE) {
  decisions <- data.frame(unit = seq_len(n_units), how = "not coded", coders = 0L, codes = NA_character_,
                          value = NA_character_, reason = NA_character_, note = NA_character_)
  coded <- codes[codes$role == "code", ]
  decisions$coders <- tabulate(coded$unit, n_units)
  by_unit <- split(codes, codes$unit)
  for (unit in as.integer(names(by_unit))) {
    mine <- by_unit[[as.character(unit)]]
    adjudicated <- mine[mine$role == "adjudication", ]
    own <- mine[mine$role == "code", ]
    if (nrow(own) > 0) {
      decisions$codes[unit] <- codes_in_words(own, blind)
    }
    signature <- code_signature(own, task)
    decision <- if (nrow(adjudicated) > 0) adjudicated[nrow(adjudicated), ] else if (length(unique(signature)) == 1) {
      own[nrow(own), ]
    }
    if (is.null(decision)) {
      decisions$how[unit] <- "disagreed"
      next
    }
    decisions[unit, c("value", "reason")] <- decision[c("value", "reason")]
    decisions$note[unit] <- paste(stats::na.omit(unique(mine$note)), collapse = "; ") %|% NA_character_
    decisions$how[unit] <- if (decision$uncodable == 1) "cannot code" else if (nrow(adjudicated) > 0) {
      "adjudicated"
    } else if (nrow(own) == 1) "single" else "agreed"
  }
  decisions
}

# A missing or empty string as `y`.
`%|%` <- function(x, y) if (length(x) == 0 || is.na(x) || identical(x, "")) y else x
