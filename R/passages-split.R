#' Passages of texts longer than the context: how to split them and combine their answers
#'
#' `passage_options()` makes the specification that `passages` of
#' [annotate_texts()] takes (`passages = TRUE` is `passage_options()`):
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
#'   its passages'. The record that [learn_labels()] learns from, each
#'   order's raw probabilities, is combined over the passages by the same rule,
#'   so [review_sample()], [learn_labels()] and [label_regression()]
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
#'   `passages` of [annotate_texts()]. `passage_answers()`: the passages, a row
#'   each, in the texts' order: `.row` (the row of the result whose text it is
#'   part of), `.passage` (its number within the text), `.start` and `.end`
#'   (where it is in the text, in characters), `.tokens` (its tokens alone),
#'   `.text`, and the answer columns and `.error` as [annotate_texts()] gives
#'   them for a row.
#' @seealso [manifest()], whose `passages` section records the options and how
#'   many passages the texts gave.
#' @export
#' @examples
#' passage_options(size = 500L, overlap = 1L, combine = "max")
#' @examplesIf engine_available()
#' ctx <- context_create(model_load(), n_ctx = 256L, n_seq_max = 4L)
#' story <- paste(rep("The river rose all night. By morning the mill was under water.",
#'                    30), collapse = "\n\n")
#' flooded <- annotate_texts(c(story, "A quiet day."), instruction = "Is there a flood?",
#'                           labels = c("yes", "no"), passages = TRUE, context = ctx,
#'                           progress = FALSE)
#' flooded[c(".label", ".confidence")]
#' head(passage_answers(flooded)[c(".row", ".passage", ".tokens", ".label", ".prob_yes")])
#' manifest(flooded)$passages
passage_options <- function(size = NULL, overlap = 0L, combine = c("mean", "max"), booleans = c("any", "all")) {
  if (!is.null(size)) size <- check_whole(size, "size", min = 1)
  overlap <- check_whole(overlap, "overlap", min = 0)
  combine <- check_choice(combine, c("mean", "max"), "combine")
  booleans <- check_choice(booleans, c("any", "all"), "booleans")
  structure(list(size = size, overlap = overlap, combine = combine, booleans = booleans),
            class = "newrllama4_passage_options")
}

#' @export
format.newrllama4_passage_options <- function(x, ...) {
  size <- if (is.null(x$size)) "as many tokens as fit the context" else paste(x$size, "tokens")
  within_width(c(cli::format_inline("{.cls newrllama4_passage_options}"),
                 bullet_lines(c(paste("size:", size), paste("overlap:", x$overlap, "sentences"),
                                paste("combine:", x$combine), paste("booleans:", x$booleans)))))
}

#' @export
print.newrllama4_passage_options <- function(x, ...) print_lines(x, ...)

# `passages` of annotate_texts(): NULL for no splitting, or the options.
check_passages <- function(passages, call = caller_env()) {
  if (is.null(passages) || isFALSE(passages)) return(NULL)
  if (isTRUE(passages)) return(passage_options())
  if (!inherits(passages, "newrllama4_passage_options")) {
    abort_invalid("{.arg passages} must be {.code TRUE}, {.code FALSE}, {.code NULL} or {.fn passage_options},
                   not {.obj_type_friendly {passages}}.", "passages", call)
  }
  passages
}

# Tokens that a prompt may hold beyond its parts' counts, where the text's
# tokens meet the template's and merge otherwise.
passage_margin <- 8L

# The most tokens a passage may have: the options' size, which must fit the
# context (or the model's window, when annotate_texts() makes its own) beside
# the longest prompt around a text and the answer.
passage_size <- function(passages, n_ctx, overhead, call = caller_env()) {
  room <- n_ctx - overhead - passage_margin
  if (room < 1) {
    abort_invalid(c("The instruction, the examples and the answer fill the context of {n_ctx} tokens: no passage fits.",
                    "i" = "Give a larger context, or fewer examples."), "passages", call)
  }
  if (!is.null(passages$size) && passages$size > room) {
    abort_invalid(c("Passages of {passages$size} tokens do not fit the context of {n_ctx} tokens.",
                    "i" = "Beside the instruction, the examples and the answer, at most {room} fit: give
                           {.code size = {room}L} or less, or a larger context."), "passages", call)
  }
  passages$size %||% room
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
