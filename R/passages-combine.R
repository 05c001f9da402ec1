# The passages' answers combined into their text's row (passage_options()'s rules).

#' @rdname passage_options
#' @param x The value of [annotate_texts()] with `passages`.
#' @export
passage_answers <- function(x) {
  passages <- attr(x, "passages", exact = TRUE)
  if (!is.data.frame(passages)) {
    abort_invalid(c("{.arg x} must be the value of {.fn annotate_texts} with {.arg passages}.",
                    "i" = "Data frame verbs that rebuild the table drop the passages; take them from the result
                           first."),
                  "x", caller_env())
  }
  passages
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
passages_record <- function(options, size, passages) {
  per_text <- tabulate(match(passages$.row, unique(passages$.row)))
  list(size = size, size_given = !is.null(options$size), overlap_sentences = options$overlap,
       combine = options$combine, booleans = options$booleans, texts = length(per_text),
       texts_split = sum(per_text > 1), passages = nrow(passages),
       passages_per_text = if (length(per_text) > 0) {
         sprintf("min %d, median %g, max %d", min(per_text), stats::median(per_text), max(per_text))
       })
}
