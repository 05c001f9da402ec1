#' Passages of texts longer than the context: how to split them and combine their answers
#'
#' `passage_options()` makes the specification that `segments` of
#' [annotate_texts()] takes (`segments = TRUE` is `passage_options()`):
#' a text longer than `size` tokens is split into passages of at most `size`
#' tokens, every passage is annotated as a text of its own, and its answers are
#' combined into the text's. `passage_answers()` gives the passages' own
#' answers.
#'
#' A text is split on its paragraphs (blank lines) first: passages hold whole
#' paragraphs as long as one fits. A paragraph longer than a passage is split
#' into its sentences (ICU's sentence boundaries, through
#' [stringi::stri_split_boundaries()]), and a sentence longer than a passage,
#' at last, at the word boundary where it reaches `size` tokens. Tokens are the
#' model's own, counted by its tokenizer, and every passage is counted whole
#' again after the split. A passage is a span of the text as it is, without its
#' white space at either end.
#'
#' How the passages' answers make the text's (`combine` and `booleans`):
#' * Labels, `combine = "mean"`: each label's probability is its mean over the
#'   passages, normalised again; the label is the most likely one.
#' * Labels, `combine = "max"`: each label's probability is its highest
#'   probability in any passage; these maxima, divided by their sum so that the
#'   `.prob_` columns still sum to 1, are the text's probabilities, and its
#'   label is the one with the highest maximum: the label that some passage is
#'   surest of. `.confidence` is the label's probability after that division.
#' * With several `example_orders`, or `calibrate`, each passage's label
#'   probabilities are combined over the orders and calibrated first, as a
#'   row's are (batch calibration takes its prior from all passages of the
#'   call), then over the passages. A text's `.agreement_orders` is the mean of
#'   its passages'. The record that [recalibrate_labels()] refits from, each
#'   order's raw probabilities, is combined over the passages by the same rule,
#'   so [review_sample()], [recalibrate_labels()] and [label_regression()]
#'   work on the texts as on any rows.
#' * Enum fields of a schema (factor columns) are combined as labels are, from
#'   their probability columns `.prob_<field>_<value>` where the answers have
#'   them; without them a text's value is the one most passages gave (on a tie,
#'   the first of them in the text). `.confidence_<field>` is the probability
#'   of the value.
#' * Boolean fields, `booleans = "any"`: `TRUE` if any passage says `TRUE`
#'   (R's [any()]); where the answers have `.prob_<field>_true`, the text's is
#'   the probability that at least one passage is true, \eqn{1 - \prod (1 -
#'   p)}{1 - prod(1 - p)}, taking the passages as independent, and
#'   `.prob_<field>_false` its complement. `booleans = "all"`: `TRUE` if every
#'   passage says `TRUE`, with probability \eqn{\prod p}{prod(p)}.
#' * Numbers and strings of a schema: the first passage's value that is not
#'   missing.
#' * Free text (`.answer`): the passages' answers in order, joined by a blank
#'   line.
#'
#' A text is answered only when all its passages are: if one fails, the text's
#' answers are `NA` and its `.error` names the passage and why (a combination
#' that skipped a passage would silently read less of the text; `"any"` would
#' miss what that passage says). The passages that answered keep their answers
#' in `passage_answers()`.
#'
#' @param size The most tokens of a passage (the text alone, without the
#'   instruction and examples), or `NULL`: as many as fit the context beside
#'   the instruction, the examples (under every order) and the answer (the
#'   longest label, or `max_tokens`). The context is the one given to
#'   [annotate_texts()], or, without one, the model's whole window (the context
#'   that [annotate_texts()] makes is then as large as the longest passage
#'   needs). A text that fits stays one passage.
#' @param overlap How many sentences of a passage's end to repeat at the start
#'   of the next, so that what straddles a boundary is read whole once. Fewer
#'   where they and the next sentence would not fit; a passage always brings at
#'   least one sentence of its own. `0` for none.
#' @param combine `"mean"` or `"max"`: how the passages' labels, and enum fields,
#'   make the text's (see Details).
#' @param booleans `"any"` or `"all"`: how the passages' boolean fields make
#'   the text's (see Details).
#' @return `passage_options()`: a `newrllama4_passage_options` object, for
#'   `segments` of [annotate_texts()]. `passage_answers()`: the passages, a row
#'   each, in the texts' order: `.row` (the row of the result whose text it is
#'   part of), `.passage` (its number within the text), `.start` and `.end`
#'   (where it is in the text, in characters), `.tokens` (its tokens alone),
#'   `.text`, and the answer columns and `.error` as [annotate_texts()] gives
#'   them for a row.
#' @seealso [manifest()], whose `segments` section records the options and how
#'   many passages the texts gave.
#' @export
#' @examples
#' passage_options(size = 500L, overlap = 1L, combine = "max")
#' @examplesIf engine_available()
#' ctx <- context_create(model_load(), n_ctx = 256L, n_seq_max = 4L)
#' story <- paste(rep("The river rose all night. By morning the mill was under water.", 30),
#'                collapse = "\n\n")
#' flooded <- annotate_texts(c(story, "A quiet day."), instruction = "Is there a flood?",
#'                           labels = c("yes", "no"), segments = TRUE, context = ctx, progress = FALSE)
#' flooded[c(".label", ".confidence")]
#' head(passage_answers(flooded)[c(".row", ".passage", ".tokens", ".label", ".prob_yes")])
#' manifest(flooded)$segments
passage_options <- function(size = NULL, overlap = 0L, combine = c("mean", "max"), booleans = c("any", "all")) {
  if (!is.null(size)) size <- check_whole(size, "size", min = 1)
  overlap <- check_whole(overlap, "overlap", min = 0)
  combine <- check_choice(combine, c("mean", "max"), "combine")
  booleans <- check_choice(booleans, c("any", "all"), "booleans")
  structure(list(size = size, overlap = overlap, combine = combine, booleans = booleans),
            class = "newrllama4_passage_options")
}

#' @rdname passage_options
#' @param x The value of [annotate_texts()] with `segments`.
#' @export
passage_answers <- function(x) {
  passages <- attr(x, "passages", exact = TRUE)
  if (!is.data.frame(passages)) {
    abort_invalid(c("{.arg x} must be the value of {.fn annotate_texts} with {.arg segments}.",
                    "i" = "Data frame verbs that rebuild the table drop the passages; take them from the result
                           first."),
                  "x", caller_env())
  }
  passages
}

#' @export
format.newrllama4_passage_options <- function(x, ...) {
  size <- if (is.null(x$size)) "as many tokens as fit the context" else paste(x$size, "tokens")
  c(cli::format_inline("{.cls newrllama4_passage_options}"),
    bullet_lines(c(paste("size:", size), paste("overlap:", x$overlap, "sentences"),
                   paste("combine:", x$combine), paste("booleans:", x$booleans))))
}

#' @export
print.newrllama4_passage_options <- function(x, ...) print_lines(x, ...)

# One of `choices`; the first (the default) when given all of them.
check_choice <- function(x, choices, arg, call = caller_env()) {
  if (identical(x, choices)) return(choices[[1]])
  if (!rlang::is_string(x, choices)) {
    abort_invalid("{.arg {arg}} must be one of {.or {.val {choices}}}, not {.obj_type_friendly {x}}{show_value(x)}.",
                  arg, call)
  }
  x
}

# `segments` of annotate_texts(): NULL for no splitting, or the options.
check_segments <- function(segments, call = caller_env()) {
  if (is.null(segments) || isFALSE(segments)) return(NULL)
  if (isTRUE(segments)) return(passage_options())
  if (!inherits(segments, "newrllama4_passage_options")) {
    abort_invalid("{.arg segments} must be {.code TRUE}, {.code FALSE}, {.code NULL} or {.fn passage_options},
                   not {.obj_type_friendly {segments}}.", "segments", call)
  }
  segments
}

# Tokens that a prompt may hold beyond its parts' counts, where the text's
# tokens meet the template's and merge otherwise.
passage_margin <- 8L

# The most tokens a passage may have: the options' size, which must fit the
# context (or the model's window, when annotate_texts() makes its own) beside
# the longest prompt around a text and the answer.
passage_size <- function(segments, n_ctx, overhead, call = caller_env()) {
  room <- n_ctx - overhead - passage_margin
  if (room < 1) {
    abort_invalid(c("The instruction, the examples and the answer fill the context of {n_ctx} tokens: no passage fits.",
                    "i" = "Give a larger context, or fewer examples."), "segments", call)
  }
  if (!is.null(segments$size) && segments$size > room) {
    abort_invalid(c("Passages of {segments$size} tokens do not fit the context of {n_ctx} tokens.",
                    "i" = "Beside the instruction, the examples and the answer, at most {room} fit: give
                           {.code size = {room}L} or less, or a larger context."), "segments", call)
  }
  segments$size %||% room
}

# The passages of `texts` (those of the rows `rows`): a data frame with a row
# per passage, `.row`, `.passage`, `.start`, `.end`, `.tokens` and `.text`, none
# over `size` tokens. A text that fits is one passage.
split_passages <- function(model, texts, rows, size, overlap) {
  tokens <- text_tokens(model, texts)
  spans <- lapply(seq_along(texts), function(i) {
    if (tokens[[i]] <= size) return(list(start = 1L, end = nchar(texts[[i]])))
    text_passages(model, texts[[i]], size, overlap)
  })
  n <- vapply(spans, function(s) length(s$start), 1L)
  owner <- rep(seq_along(texts), n)
  start <- as.integer(unlist(lapply(spans, `[[`, "start")))
  end <- as.integer(unlist(lapply(spans, `[[`, "end")))
  passage_text <- substring(texts[owner], start, end)
  passage_tokens <- tokens[owner]
  split <- n[owner] > 1
  passage_tokens[split] <- text_tokens(model, passage_text[split])
  data.frame(.row = rows[owner], .passage = sequence(n), .start = start, .end = end, .tokens = passage_tokens,
             .text = passage_text, stringsAsFactors = FALSE)
}

# The passages of one long text, as character spans (`start`, `end`), trimmed of
# white space. Packed from estimates (the units' tokens added up), then each
# passage counted whole: one over the size is packed again with less room.
text_passages <- function(model, text, size, overlap) {
  units <- text_units(model, text, size)
  room <- size
  repeat {
    packed <- pack_units(units$tokens, units$paragraph, room, overlap)
    start <- units$start[vapply(packed, min, 1L)]
    end <- units$end[vapply(packed, max, 1L)]
    pieces <- substring(text, start, end)
    lead <- nchar(pieces) - nchar(trimws(pieces, "left"))
    start <- start + lead
    end <- end - (nchar(pieces) - lead - nchar(trimws(pieces)))
    over <- max(text_tokens(model, substring(text, start, end))) - size
    if (over <= 0 || room <= 1) return(list(start = start, end = end))
    room <- max(1L, room - over)
  }
}

# The units a long text is packed from, in order, tiling it: the sentences of its
# paragraphs (`paragraph` numbers them), each sentence over `size` tokens cut at
# word boundaries; with each unit's tokens.
text_units <- function(model, text, size) {
  breaks <- stringi::stri_locate_all_regex(text, "\\n[ \\t]*\\n\\s*", omit_no_match = TRUE)[[1]]
  par_start <- c(1L, breaks[, "end"] + 1L)
  par_end <- c(breaks[, "start"] - 1L, nchar(text))
  keep <- par_end >= par_start
  par_start <- par_start[keep]
  par_end <- par_end[keep]
  sentences <- lapply(seq_along(par_start), function(p) {
    located <- stringi::stri_locate_all_boundaries(substr(text, par_start[[p]], par_end[[p]]), type = "sentence")[[1]]
    data.frame(start = located[, "start"] + par_start[[p]] - 1L, end = located[, "end"] + par_start[[p]] - 1L,
               paragraph = p)
  })
  units <- do.call(rbind, sentences)
  units$tokens <- text_tokens(model, substring(text, units$start, units$end))
  long <- which(units$tokens > size)
  if (length(long) == 0) return(units)
  cut <- lapply(seq_len(nrow(units)), function(u) {
    if (!u %in% long) return(units[u, ])
    spans <- cut_by_tokens(model, text, units$start[[u]], units$end[[u]], size)
    data.frame(start = spans$start, end = spans$end, paragraph = units$paragraph[[u]],
               tokens = text_tokens(model, substring(text, spans$start, spans$end)))
  })
  do.call(rbind, cut)
}

# A span of `text` longer than `size` tokens cut into pieces of at most `size`:
# each piece ends at the last word boundary (or, within a word longer than that,
# the last character) where it still fits, found by bisection on token counts.
cut_by_tokens <- function(model, text, from, to, size) {
  starts <- integer()
  ends <- integer()
  while (from <= to) {
    rest <- substr(text, from, to)
    if (text_tokens(model, rest) <= size) {
      starts <- c(starts, from)
      ends <- c(ends, to)
      break
    }
    candidates <- stringi::stri_locate_all_boundaries(rest, type = "word")[[1]][, "end"]
    fits <- function(k) text_tokens(model, substr(rest, 1L, candidates[[k]])) <= size
    if (!fits(1L)) {
      candidates <- seq_len(nchar(rest))
      if (!fits(1L)) candidates <- 1L  # a character of more tokens than the size: it goes alone
    }
    low <- 1L
    high <- length(candidates)
    while (low < high) {
      middle <- (low + high + 1L) %/% 2L
      if (fits(middle)) low <- middle else high <- middle - 1L
    }
    starts <- c(starts, from)
    ends <- c(ends, from + candidates[[low]] - 1L)
    from <- from + candidates[[low]]
  }
  list(start = starts, end = ends)
}

# Units packed into passages of at most `size` tokens (by their counts), each a
# vector of unit indices: whole paragraphs while they fit, a paragraph that fits
# no passage sentence by sentence; every passage after the first opens with up
# to `overlap` units of the one before, as many as leave room for what follows.
pack_units <- function(tokens, paragraph, size, overlap) {
  passages <- list()
  current <- integer()
  open_after <- function(units) {
    passages[[length(passages) + 1L]] <<- current
    k <- min(overlap, length(current) - 1L)
    while (k > 0 && sum(tokens[utils::tail(current, k)]) + sum(tokens[units]) > size) k <- k - 1L
    current <<- utils::tail(current, k)
  }
  for (units in split(seq_along(tokens), paragraph)) {
    whole <- sum(tokens[units])
    if (whole > size - sum(tokens[current]) && whole <= size && length(current) > 0) open_after(units)
    if (whole <= size - sum(tokens[current])) {
      current <- c(current, units)
      next
    }
    for (unit in units) {
      if (tokens[[unit]] > size - sum(tokens[current]) && length(current) > 0) open_after(unit)
      current <- c(current, unit)
    }
  }
  c(passages, list(current))
}

# The columns that the passages' answers make, combined per text (`.row`) by the
# options' rules, from the column patterns of annotate_texts(): a factor with
# probability columns `<prefix><value>` and a confidence (`.label` with
# `.prob_<label>` and `.confidence`; an enum field `f` with `.prob_f_<value>` and
# `.confidence_f`), logical fields with `.prob_<f>_true` and `.prob_<f>_false`,
# `.answer`, `.agreement_orders`; any other column takes its first value that is
# not missing. A text with a failed passage gets NA and that passage's `.error`.
combine_passages <- function(passages, options) {
  rows <- unique(passages$.row)
  owner <- match(passages$.row, rows)
  columns <- setdiff(names(passages), c(".row", ".passage", ".start", ".end", ".tokens", ".text", ".error"))
  out <- list(.row = rows)
  done <- character()
  for (column in columns) {
    if (column %in% done) next
    value <- passages[[column]]
    is_label <- column == ".label"
    prefix <- if (is_label) ".prob_" else paste0(".prob_", column, "_")
    confidence <- if (is_label) ".confidence" else paste0(".confidence_", column)
    if (is.factor(value)) {
      prob_columns <- paste0(prefix, levels(value))
      probs <- if (all(prob_columns %in% names(passages))) as.matrix(passages[prob_columns])
      combined <- combine_categorical(value, probs, owner, length(rows), options$combine)
      out[[column]] <- combined$value
      if (!is.null(probs)) {
        for (k in seq_along(prob_columns)) out[[prob_columns[[k]]]] <- combined$probs[, k]
      }
      if (confidence %in% names(passages)) out[[confidence]] <- combined$confidence
      done <- c(done, prob_columns, confidence)
    } else if (is.logical(value)) {
      combined <- combine_boolean(value, passages[[paste0(prefix, "true")]], owner, length(rows), options$booleans)
      out[[column]] <- combined$value
      if (!is.null(combined$prob)) {
        out[[paste0(prefix, "true")]] <- combined$prob
        out[[paste0(prefix, "false")]] <- 1 - combined$prob
        if (confidence %in% names(passages)) {
          out[[confidence]] <- ifelse(combined$value, combined$prob, 1 - combined$prob)
        }
      }
      done <- c(done, paste0(prefix, c("true", "false")), confidence)
    } else {
      out[[column]] <- unname(vapply(split(value, factor(owner, seq_along(rows))), function(v) {
        if (column == ".answer") return(paste(v, collapse = "\n\n"))
        if (column == ".agreement_orders") return(mean(v))
        v[!is.na(v)][1]
      }, value[NA_integer_]))
    }
  }
  out <- as.data.frame(out, stringsAsFactors = FALSE, optional = TRUE)[c(".row", columns)]
  failed <- which(!is.na(passages$.error))
  failed <- failed[!duplicated(owner[failed])]
  texts_failed <- owner[failed]
  out[texts_failed, columns] <- NA
  out$.error <- rep(NA_character_, nrow(out))
  out$.error[texts_failed] <- sprintf("Passage %d of %d: %s", passages$.passage[failed],
                                      tabulate(owner, length(rows))[texts_failed], passages$.error[failed])
  out
}

# A categorical answer (a factor) combined per text: by its probabilities where
# there are some (their mean or maximum over the passages, normalised again; the
# value the most likely), else by the passages' most frequent value.
combine_categorical <- function(value, probs, owner, n, rule) {
  levels <- levels(value)
  if (is.null(probs) || all(is.na(probs))) {
    most_frequent <- vapply(split(as.character(value), factor(owner, seq_len(n))), function(v) {
      v <- v[!is.na(v)]
      if (length(v) == 0) NA_character_ else names(which.max(table(factor(v, unique(v)))))
    }, "")
    return(list(value = factor(unname(most_frequent), levels), probs = if (!is.null(probs)) {
      matrix(NA_real_, n, length(levels))
    }, confidence = rep(NA_real_, n)))
  }
  combined <- combine_probs(probs, owner, n, rule)
  list(value = factor(most_likely(combined, levels), levels), probs = combined,
       confidence = as.numeric(apply(combined, 1, max)))
}

# Probabilities (a row per passage) combined per text: their mean, or each
# column's maximum, over the text's passages, normalised to sum to 1.
combine_probs <- function(probs, owner, n, rule) {
  combined <- if (rule == "mean") {
    rowsum(probs, owner, reorder = TRUE) / as.vector(table(factor(owner, seq_len(n))))
  } else {
    do.call(rbind, lapply(split(seq_along(owner), factor(owner, seq_len(n))), function(i) {
      apply(probs[i, , drop = FALSE], 2, max)
    }))
  }
  combined <- unname(combined / rowSums(combined))
  colnames(combined) <- colnames(probs)
  combined
}

# A yes/no answer combined per text: any passage (or all of them) TRUE, with the
# probability that at least one is (or that all are), the passages taken as
# independent, where the answers have probabilities.
combine_boolean <- function(value, prob_true, owner, n, rule) {
  by_text <- function(x, f) unname(vapply(split(x, factor(owner, seq_len(n))), f, x[NA_integer_]))
  list(
    value = by_text(value, if (rule == "any") any else all),
    prob = if (!is.null(prob_true)) by_text(prob_true, function(p) if (rule == "any") 1 - prod(1 - p) else prod(p))
  )
}

# The texts' combined answers (a row per text, `.row` its row of `data`) as
# columns of `data`; a row without a text keeps its reason in `.error`.
spread_texts <- function(data, combined, skipped) {
  at <- match(seq_len(nrow(data)), combined$.row)
  for (column in setdiff(names(combined), c(".row", ".error"))) data[[column]] <- combined[[column]][at]
  data$.error <- ifelse(is.na(skipped), combined$.error[at], skipped)
  data
}

# The manifest's record of a segmentation.
segments_record <- function(options, size, passages) {
  per_text <- tabulate(match(passages$.row, unique(passages$.row)))
  list(size = size, size_given = !is.null(options$size), overlap_sentences = options$overlap,
       combine = options$combine, booleans = options$booleans, texts = length(per_text),
       texts_split = sum(per_text > 1), passages = nrow(passages),
       passages_per_text = if (length(per_text) > 0) {
         sprintf("min %d, median %g, max %d", min(per_text), stats::median(per_text), max(per_text))
       })
}
