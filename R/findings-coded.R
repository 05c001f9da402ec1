# The coded rows, checked once for every function that reads them
# (label_regression(), label_shares(), recalibrate_labels()): `coded` against
# `data`, the codes as the labels spell them, and, where the estimate weights
# by the design, each row's inclusion probability after nonresponse.

# `labels`: the labels the codes must be one of (NULL for an answer's numbers),
# or for several labelled variables a list of them, named by variable.
# `probabilities`: whether `.sample_prob` is needed; `cluster`: the column of
# `data` whose rows share errors, if the user named one. Returns the design
# (coded_design()) of the rows that have a code, with their codes as `truth`.
checked_coded_rows <- function(data, coded, truth, call, labels = NULL, probabilities = TRUE, cluster = NULL) {
  if (!is.data.frame(coded) || !".row" %in% names(coded)) {
    abort_newrllama4("coded_rows", "{.arg coded} must be a data frame of rows coded by hand with {.field .row} (their
                     row numbers in {.arg data}), as {.fn review_sample} gives them.", call = call)
  }
  check_decimal_commas(data, grep("^\\.(prob|confidence)", names(data), value = TRUE), "data", call)
  numeric <- names(data)[vapply(data, is.numeric, NA)]
  check_decimal_commas(coded, c(".sample_prob", ".stratum_rows", ".stratum_drawn", numeric), "coded", call)
  texts <- split_texts(coded, truth, labels, call)
  coded <- texts$coded
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
  design <- coded_design(coded, data, rows, cluster, probabilities, call)
  design$truth <- codes
  design$split <- texts$split
  with_variance_strata(with_rounds(responding(design, probabilities, call)))
}

# Texts whose coders' codes were split (read_codes(disagreements = "split")):
# a text's rows share its `.row`, each weighted by `.code_weight`, the weights
# of a text adding to 1. Each text is one row of the design, as it was drawn
# (its first row's columns and code; learners learn from every code, see
# coded_entries()), and `split` keeps, for each variable, the code the
# estimators use: each label's share of the text's weight (a matrix, a column
# a label), or a number's weighted mean. The estimating equations are linear
# in the code, so a text with its codes' shares is its k rows weighted 1 / k,
# and the variance takes the text, not a coder's row, as the unit the design
# drew.
split_texts <- function(coded, truth, labels, call) {
  rows <- if (is.data.frame(coded)) coded[[".row"]]
  if (!is.numeric(rows) || !anyDuplicated(rows)) return(list(coded = coded))
  weight <- coded[[".code_weight"]]
  if (!is.numeric(weight) || anyNA(weight) || any(weight <= 0 | weight > 1) ||
      any(abs(rowsum(weight, rows) - 1) > 1e-6)) {
    abort_newrllama4("coded_rows", c(
      "{.field .row} of {.arg coded} must name distinct rows of {.arg data}, or rows of one text whose
       {.field .code_weight} add to 1 (its coders' codes, as {.code read_codes(disagreements = \"split\")} gives
       them).", "i" = "Do not bind samples or codes together; read them again with {.fn read_codes}."), call = call)
  }
  codes <- coded_codes(truth, coded, labels, call)
  variables <- if (is.list(codes)) codes else list(codes)
  choices <- if (is.list(labels)) labels[names(variables)] else list(labels)
  texts <- unique(rows[duplicated(rows)])
  shared <- rows %in% texts
  if (any(vapply(variables, function(code) anyNA(code[shared]), NA))) {
    abort_newrllama4("coded_truth", "{.arg truth} must give a code on every row of a text whose codes are split.",
                     call = call)
  }
  values <- Map(function(code, choice) {
    share <- function(value) rowsum(weight[shared] * value, rows[shared])[as.character(texts), 1]
    if (is.null(choice)) return(matrix(share(as.numeric(code[shared])), ncol = 1))
    matrix(vapply(choice, function(label) share(as.numeric(code[shared] == label)), numeric(length(texts))),
           nrow = length(texts), dimnames = list(NULL, choice))
  }, variables, choices)
  list(coded = coded[!duplicated(rows), , drop = FALSE], split = list(rows = as.integer(texts), values = values))
}

# The coded rows' codes `y` on a variable's scale (variable_truth()), where a
# text's codes were split: its share of the label, or its mean. Labelled
# covariates cannot be split (the fit is not linear in a covariate): a
# classed error says to adjudicate.
split_truth <- function(y, spec, design, call, covariate = FALSE) {
  split <- split_shares(design$split, spec$name)
  if (is.null(split) || spec$kind == "observed") return(y)
  values <- split$values
  at <- match(design$rows, split$rows)
  if (all(is.na(at))) return(y)
  if (covariate) {
    fractional <- values[at[!is.na(at)], , drop = FALSE]
    if (all(fractional %in% c(0, 1))) return(y)
    abort_newrllama4("coded_truth", c(
      "The coders of {sum(rowSums(fractional > 0 & fractional < 1) > 0)} text{?s} disagree on {.field {spec$name}},
       a covariate: a covariate's code cannot be split between coders.",
      "i" = "Adjudicate them (the adjudication screen of {.fn coding_app}), or read them with
             {.code read_codes(disagreements = \"missing\")}."), call = call)
  }
  column <- if (!is.null(spec$positive)) spec$positive else 1L
  y[!is.na(at)] <- values[at[!is.na(at)], column]
  y
}

design_columns <- c(".stratum", ".stratum_rows", ".stratum_drawn", ".sampling_unit")

# The design of the coded rows, from their columns (review_sample() writes
# them): the rows, each one's stratum, inclusion probability and sampling unit
# (the value of the cluster drawn whole, or NULL for rows drawn one by one),
# the strata's labelled and drawn rows, the column of `data` whose clusters
# share errors (`cluster`, by default the clusters drawn), and where all this
# was read from. A sample of an older version has the design in an attribute;
# coded rows without either (someone's own sample) have their design assumed,
# and told.
coded_design <- function(coded, data, rows, cluster, probabilities, call) {
  present <- intersect(design_columns, names(coded))
  attribute <- attr(coded, "design", exact = TRUE)
  if (length(present) < length(design_columns) && any(design_columns[-1] %in% present)) {
    abort_newrllama4("coded_rows", c(
      "{.arg coded} has some of the design's columns but not {.field {setdiff(design_columns, present)}}.",
      "i" = "Keep every column {.fn review_sample} gave the drawn rows ({.field {c(design_columns, '.sample_prob')}});
             they say how the rows were drawn."), call = call)
  }
  prob <- if (probabilities) checked_probabilities(coded, call)
  stratum <- if (!is.null(coded[[".stratum"]])) as.character(coded[[".stratum"]])
  if (length(present) == length(design_columns)) {
    strata <- design_strata(coded, call)
    labelled_rows <- if (".label" %in% names(data)) sum(!is.na(data$.label))
    if (!is.null(labelled_rows) && sum(strata$rows) < labelled_rows) {
      abort_newrllama4("empty_stratum", c(
        "The strata of the coded rows hold {sum(strata$rows)} of the {labelled_rows} labelled rows of {.arg data}: no row
         drawn from the others is among them, so the estimate cannot stand for those rows.",
        "i" = "Keep every drawn row, coded or not, and code rows of every stratum: draw more with
               {.code review_sample(previous =)}."), call = call)
    }
    unit_column <- unique(as.character(coded$.sampling_unit))
    read_from <- "the coded rows' columns"
  } else if (!is.null(attribute$strata)) {
    strata <- attribute$strata[c("name", "rows", "drawn")]
    unit_column <- attribute$cluster %||% ".row"
    read_from <- "the sample's attribute \"design\""
  } else {
    strata <- assumed_strata(stratum, prob, probabilities)
    unit_column <- ".row"
    read_from <- "assumed"
    if (probabilities) {
      inform_newrllama4("design_assumed", c(
        "{.arg coded} has no design columns ({.field {design_columns[-1]}}), so its design is assumed:
         rows drawn one by one {if (is.null(stratum)) 'with the probabilities of .sample_prob' else 'in the strata of
         .stratum'}, each stratum's rows the sum of its rows' 1 / {.field .sample_prob}, and no drawn row lost.",
        "i" = "Draw the rows to code with {.fn review_sample} and keep its columns to have the design read, not
               assumed."))
    }
  }
  if (length(unit_column) != 1 || is.na(unit_column) || (unit_column != ".row" && !unit_column %in% names(data))) {
    abort_newrllama4("coded_rows", c(
      "{.field .sampling_unit} of {.arg coded} must name one column of {.arg data}: the clusters drawn whole, or
       {.val .row}.", "x" = "It has {.val {unit_column}}."), call = call)
  }
  unit <- if (unit_column != ".row") data[[unit_column]][rows]
  if (!is.null(unit)) {
    # each drawn cluster's rows (all its labelled rows) and the clusters
    labelled <- if (".label" %in% names(data)) !is.na(data$.label) else rep(TRUE, nrow(data))
    cluster_rows <- table(as.character(data[[unit_column]][labelled]))
    unit_rows <- as.vector(cluster_rows[as.character(unit)])
  }
  cluster <- cluster %||% if (unit_column != ".row") unit_column
  if (!is.null(cluster) && anyNA(data[[cluster]])) {
    abort_invalid("{.arg cluster} must name a column of {.arg data} without missing values.", "cluster", call)
  }
  list(rows = rows, prob = prob, stratum = stratum, unit = unit, cluster = cluster, strata = strata,
       unit_rows = if (!is.null(unit)) unit_rows, clusters = if (!is.null(unit)) length(cluster_rows),
       sampling_unit = unit_column, read_from = read_from)
}

# Strata as far as coded rows without design columns tell them: `.stratum`, or
# rows of one inclusion probability, each with the rows its probabilities stand
# for and the rows it has as those drawn.
assumed_strata <- function(stratum, prob, probabilities) {
  if (is.null(stratum)) {
    if (!probabilities) return(NULL)
    stratum <- format(prob, digits = 15)
  }
  names <- unique(stratum)
  size <- vapply(names, function(h) if (probabilities) sum(1 / prob[stratum == h]) else 1, 0)
  data.frame(name = names, rows = round(size), drawn = as.vector(table(stratum)[names]), stringsAsFactors = FALSE)
}

# The codes: one column of `coded` (`truth` names it), or for several labelled
# variables a list of columns, named by variable (`truth` names each variable's
# column: `c(tone = tone_code, flag = "flag_code")`). Attribute "columns": their
# names.
coded_codes <- function(truth, coded, labels, call) {
  if (!is.list(labels)) {
    column <- column_name(truth, coded, "truth", "coded", optional = FALSE, call = call)
    codes <- coded[[column]]
    if (!is.null(labels)) codes <- codes_as_labels(codes, labels, call)
    return(structure(codes, columns = column))
  }
  columns <- truth_mapping(truth, coded, call)
  if (!setequal(names(columns), names(labels))) {
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

# The columns of `coded` that `truth` names, each named by the variable it
# codes (its own name where `truth` gives none); NULL where `coded` is no data
# frame, which checked_coded_rows() tells.
truth_mapping <- function(truth, coded, call = caller_env()) {
  if (!is.data.frame(coded)) return(NULL)
  column_names(truth, coded, "truth", "coded", n = "some", optional = FALSE, call = call)
}

# The coded rows that have a code. Rows drawn but not coded (a missing code,
# or rows the design counts that `coded` no longer has) are nonresponse: each
# stratum's coded rows then stand for its rows, their probability the share
# coded. That is valid where the uncoded rows are like the coded ones of their
# stratum, so it warns; a stratum with no coded row cannot be stood for.
responding <- function(design, probabilities, call) {
  truth <- design$truth
  coded <- if (is.list(truth)) stats::complete.cases(as.data.frame(truth)) else !is.na(truth)
  strata <- design$strata
  stratum <- design$stratum %||% if (probabilities) format(design$prob, digits = 15)
  answered <- if (!is.null(strata)) as.vector(table(factor(stratum[coded], levels = strata$name)))
  if (!is.null(strata)) design$strata$coded <- answered
  if (all(coded) && (is.null(strata) || all(strata$drawn <= answered))) return(design)
  if (!is.null(design$unit) && probabilities && length(unique(stratum[!taken_whole(design$prob)])) <= 1) {
    return(responding_clusters(design, coded, sum(strata$drawn - answered), call))
  }
  if (!is.null(design$unit)) {
    abort_newrllama4("coded_truth", c(
      "{.arg truth} must give a code for every row of the clusters drawn: {sum(strata$drawn - answered)} of
       {sum(strata$drawn)} have none.",
      "i" = "A cluster's rows are drawn together: code them all (and keep them all)."), call = call)
  }
  if (is.null(design$stratum) || (design$read_from == "assumed" && anyNA(stratum))) {
    abort_newrllama4("coded_truth", c(
      "{.arg truth} must give a code for every coded row.",
      "i" = "Rows left out of a drawn sample bias the correction: code them, or draw again."), call = call)
  }
  empty <- strata$name[strata$rows > 0 & answered == 0]
  if (!any(coded)) {
    abort_newrllama4(c("no_codes", "empty_stratum"), c(
      "None of the {sum(strata$drawn)} drawn row{?s} has a code in {.arg truth} yet.",
      "i" = "Code the sample first ({.fn code_sample}), then read the codes with {.fn read_codes}."), call = call)
  }
  if (length(empty) > 0) {
    abort_newrllama4("empty_stratum", c(
      "No coded rows in {cli::qty(length(empty))}strat{?um/a} {.val {empty}}, so the estimate cannot stand for
       {?its/their} rows.",
      "i" = "Code rows of {cli::qty(length(empty))}{?it/them}: draw more with {.code review_sample(previous =)}."), call = call)
  }
  missing <- sum(strata$drawn - answered)
  warn_newrllama4("nonresponse", c(
    "{missing} drawn row{?s} not coded: each stratum's coded rows are reweighted to stand for its rows.",
    "i" = "This assumes the uncoded rows are like the coded ones of their stratum; code them if they are not."))
  keep <- which(coded)
  design$rows <- design$rows[keep]
  design$truth <- if (is.list(truth)) lapply(truth, `[`, keep) else truth[keep]
  design$stratum <- stratum[keep]
  if (probabilities) {
    position <- match(design$stratum, strata$name)
    design$prob <- answered[position] / strata$rows[position]
  }
  design
}

# Whole clusters drawn, some of their rows not coded (`coded` FALSE, or lost:
# `missing` in all): each cluster's coded rows stand for its rows, weighted by
# its rows over its coded ones, and the clusters with a coded row for the
# clusters drawn, in their stratum (those taken whole, review_sample()'s
# largest clusters, for themselves; the rest for the clusters not taken
# whole). `unit_prob` is then each row's cluster's probability, `prob` that
# times the share of its cluster coded. Valid where the rows not coded are
# like the coded ones of their cluster, so it warns.
responding_clusters <- function(design, coded, missing, call) {
  keep <- which(coded)
  if (length(keep) == 0) {
    abort_newrllama4("empty_stratum", c("No row of the clusters drawn is coded.", "i" = "Code them."), call = call)
  }
  whole <- taken_whole(design$prob)
  taken <- length(unique(design$unit[whole]))
  stratum_clusters <- ifelse(whole, taken, design$clusters - taken)
  coded_clusters <- tapply(design$unit[keep], whole[keep], function(u) length(unique(u)))[as.character(whole)]
  if (anyNA(coded_clusters)) {
    abort_newrllama4("empty_stratum", c(
      "No row of the clusters drawn {if (any(is.na(coded_clusters) & whole)) 'whole' else 'at random'} is coded,
       so the estimate cannot stand for them.", "i" = "Code them."), call = call)
  }
  drawn <- taken + if (all(whole)) 0 else round(design$prob[!whole][1] * (design$clusters - taken))
  lost_clusters <- drawn - length(unique(design$unit[keep]))
  warn_newrllama4("nonresponse", c(
    "{missing} drawn row{?s} not coded{if (lost_clusters > 0) paste0(', all of ', lost_clusters,
    ' cluster', if (lost_clusters > 1) 's')}: each cluster's coded rows are reweighted to stand for its
     rows, and the clusters with codes for the clusters drawn.",
    "i" = "This assumes the uncoded rows are like the coded ones of their cluster; code them if they are not."))
  unit <- design$unit[keep]
  in_cluster <- as.vector(table(as.character(unit))[as.character(unit)])
  design$unit_prob <- as.vector(coded_clusters / stratum_clusters)[keep]
  design$rows <- design$rows[keep]
  design$truth <- if (is.list(design$truth)) lapply(design$truth, `[`, keep) else design$truth[keep]
  design$stratum <- design$stratum[keep]
  design$unit <- unit
  design$prob <- design$unit_prob * in_cluster / design$unit_rows[keep]
  design
}

# The strata of the variance: the design's, but a stratum with one coded unit
# has no spread to estimate its variance from, and confidence designs make
# such strata common for rare labels. Each is collapsed with an adjacent
# confidence band of its label (the one whose inclusion probability is
# closer), and the two taken as one stratum: the collapsed-strata estimator,
# which can only overstate the variance where their means differ. A stratum
# with no band to join (its label's only one, or the clusters) keeps its one
# unit, taken uncentred, and is warned about. `variance_stratum`: each coded
# row's.
with_variance_strata <- function(design) {
  if (is.null(design$prob)) return(design)
  stratum <- design$stratum %||% format(design$prob, digits = 15)
  unit <- design$unit %||% design$rows
  coded_units <- tapply(unit, stratum, function(u) length(unique(u)))
  prob <- tapply(design$unit_prob %||% design$prob, stratum, function(p) p[[1]])
  group <- stats::setNames(names(coded_units), names(coded_units))
  parts <- stratum_parts(names(group))
  lone <- which(coded_units == 1 & prob < 1)
  alone <- character()
  for (i in lone) {
    neighbours <- which(parts$label == parts$label[i] & abs(parts$band - parts$band[i]) == 1)
    if (length(neighbours) == 0) {
      alone <- c(alone, names(group)[i])
      next
    }
    nearest <- neighbours[which.min(abs(prob[neighbours] - prob[i]))]
    group[group == group[[i]]] <- group[[nearest]]
  }
  collapsed <- names(group)[group != names(group) | duplicated(group) | duplicated(group, fromLast = TRUE)]
  if (length(collapsed) > 0) {
    inform_newrllama4("strata_collapsed", c(
      "{cli::qty(length(lone) - length(alone))}{?A stratum has/Strata have} one coded row: for the variance, each is
       taken together with the adjacent confidence band of its label ({.val {collapsed}}).",
      "i" = "Code more rows of the thin strata to have each stratum's own variance."))
  }
  if (length(alone) > 0) {
    unit_word <- if (is.null(design$unit)) "row" else "cluster"
    warn_newrllama4("single_coded_unit", c(
      "{cli::qty(length(alone))}{?Stratum/Strata} {.val {alone}} {?has/have} one coded {unit_word} and no neighbour to join:
       {?its/their} variance rests on that one unit.",
      "i" = "Code more of {cli::qty(length(alone))}{?it/them} (draw more with {.code review_sample(previous =)})."))
  }
  design$variance_stratum <- unname(group[stratum])
  design$collapsed_strata <- collapsed
  design
}
