# Labels that do not hinge on the order of the worked examples: every row is
# asked under several orders of the examples, its label probabilities
# calibrated per order -- divided by the order's label prior and normalised
# again -- and averaged over the orders. The prior is the geometric mean of the
# rows' own label probabilities under that order (batch calibration in log
# space; Zhou et al. 2024, "Batch Calibration: Rethinking Calibration for
# In-Context Learning and Prompt Engineering"), or the labels the model gives
# content-free inputs under the same instruction and examples (contextual
# calibration, Zhao et al. 2021, "Calibrate Before Use").

# The inputs that carry no content, whose labels show the model's prior.
content_free_texts <- c("N/A", "", "[MASK]")

# The orders the examples are shown in, each a permutation of their indices:
# the given order first, then its rotations (each example last once: the place
# a model favours), then permutations drawn from a fixed seed; or the
# permutations the caller gives.
example_order_list <- function(example_orders, n_examples, call = caller_env()) {
  if (is.list(example_orders)) {
    ok <- length(example_orders) > 0 && all(vapply(example_orders, function(order) {
      is.numeric(order) && length(order) == n_examples && !anyNA(order) && setequal(order, seq_len(n_examples))
    }, NA))
    if (!ok || anyDuplicated(example_orders)) {
      abort_invalid(
        "{.arg example_orders} must be a number of orders, or a list of distinct permutations of {.code 1:{n_examples}}.",
        "example_orders", call
      )
    }
    return(lapply(example_orders, as.integer))
  }
  k <- check_whole(example_orders, "example_orders", min = 1, call = call)
  if (k > 1 && n_examples < 2) {
    abort_invalid("{.arg example_orders} needs at least two worked examples to order, not {n_examples}.",
                  "example_orders", call)
  }
  n_possible <- factorial(n_examples)
  if (k > n_possible) {
    abort_invalid("{.arg example_orders} is {k}, but {n_examples} examples have only {n_possible} orders.",
                  "example_orders", call)
  }
  given <- seq_len(n_examples)
  orders <- lapply(seq_len(min(k, n_examples)) - 1L, function(shift) (given + shift - 1L) %% n_examples + 1L)
  withr::with_seed(1L, {
    while (length(orders) < k) {
      drawn <- sample(given)
      if (!any(vapply(orders, identical, NA, drawn))) orders[[length(orders) + 1L]] <- drawn
    }
  })
  orders
}

# What `calibrate` asks for: "batch", "content-free" or "none"; TRUE is
# "batch", FALSE "none".
calibration_kinds <- c("batch", "content-free", "none")

check_calibrate <- function(calibrate, call = caller_env()) {
  if (isTRUE(calibrate)) return("batch")
  if (isFALSE(calibrate)) return("none")
  if (!rlang::is_string(calibrate, calibration_kinds)) {
    abort_invalid("{.arg calibrate} must be {.code TRUE}, {.code FALSE} or one of {.or {.val {calibration_kinds}}},
                   not {.obj_type_friendly {calibrate}}.", "calibrate", call)
  }
  calibrate
}

# The prompts of one annotation: every text under every order, then (for
# contextual calibration) the content-free inputs under every order.
ensemble_prompts <- function(layout, instruction, turns, texts, orders, calibration) {
  prompts <- lapply(orders, function(order) render_prompts(layout, instruction, turns[order], texts))
  if (calibration == "content-free") {
    prompts <- c(prompts, lapply(orders, function(order) {
      render_prompts(layout, instruction, turns[order], content_free_texts)
    }))
  }
  if (layout == "plain") unlist(prompts) else unlist(prompts, recursive = FALSE)
}

# Each row's label from the answers to ensemble_prompts(): its probabilities,
# calibrated if asked, averaged over the orders, and the most likely label; the
# share of orders whose own most likely label agrees; `error`, why a row has no
# label. With one order and no calibration the engine's own choice stands
# (drawn from the probabilities when the temperature is above 0).
combine_orders <- function(answers, n_rows, orders, labels, calibration, call = caller_env()) {
  n_orders <- length(orders)
  probs <- label_probs(answers)
  if (is.null(probs)) probs <- matrix(NA_real_, length(answers), length(labels), dimnames = list(NULL, labels))
  probs <- unname(probs[, labels, drop = FALSE])
  raw <- probs
  failed <- generation_errors(answers)
  errors <- rep(NA_character_, length(answers))
  errors[failed$index] <- failed$message
  row_prompts <- split(seq_len(n_rows * n_orders), factor(rep(seq_len(n_orders), each = n_rows), seq_len(n_orders)))

  prior <- if (n_rows > 0) switch(calibration,
    "content-free" = content_free_prior(probs, errors, n_rows, n_orders, call),
    batch = batch_prior(lapply(row_prompts, function(rows) probs[rows, , drop = FALSE]), call),
    NULL
  )
  if (!is.null(prior)) {
    dimnames(prior) <- list(order_names(orders), labels)
    for (o in seq_len(n_orders)) {
      probs[row_prompts[[o]], ] <- calibrate_probs(probs[row_prompts[[o]], , drop = FALSE], prior[o, ])
    }
  }

  per_order <- lapply(row_prompts, function(rows) probs[rows, , drop = FALSE])
  combined <- Reduce(`+`, per_order) / n_orders
  colnames(combined) <- labels
  row_error <- Reduce(function(a, b) ifelse(is.na(a), b, a), lapply(row_prompts, function(rows) errors[rows]))
  no_probs <- is.na(row_error) & rowSums(is.na(combined)) > 0
  if (n_orders == 1 && calibration == "none") {
    label <- as.vector(answers)[row_prompts[[1]]]
  } else {
    row_error[no_probs] <- "The server gave no label probabilities, which example_orders and calibrate need."
    label <- most_likely(combined, labels)
  }
  label[!is.na(row_error)] <- NA_character_
  combined[!is.na(row_error), ] <- NA_real_
  order_labels <- vapply(per_order, most_likely, character(n_rows), labels = labels)
  agreeing <- rowMeans(matrix(order_labels == label, n_rows, n_orders))
  list(label = label, probs = combined, error = row_error, confidence = as.numeric(apply(combined, 1, max)),
       agreement_orders = agreeing, prior = prior,
       order_probs = lapply(row_prompts, function(rows) raw[rows, , drop = FALSE]))
}

# The prior of each order (a row per order) from the content-free inputs'
# answers, which follow the rows' under every order: the mean of their label
# probabilities.
content_free_prior <- function(probs, errors, n_rows, n_orders, call = caller_env()) {
  prior_prompts <- n_rows * n_orders + seq_len(n_orders * length(content_free_texts))
  if (anyNA(probs[prior_prompts, ])) {
    abort_newrllama4(
      "calibration",
      c("The label probabilities of the content-free inputs could not be computed, so nothing can be calibrated.",
        "i" = "{errors[prior_prompts][!is.na(errors[prior_prompts])][1] %||% 'The server gave no label probabilities.'}"),
      call = call
    )
  }
  groups <- rep(seq_len(n_orders), each = length(content_free_texts))
  rowsum(probs[prior_prompts, , drop = FALSE], groups, reorder = FALSE) / length(content_free_texts)
}

# The prior of each order (a row per order) from the rows' own label
# probabilities under it (a matrix per order): their geometric mean over the
# rows, normalised -- dividing by it centres every label's log-probability on
# the rows' mean, which moves the boundary between labels in log-odds, where
# a small model's near-0 probabilities still differ.
batch_prior <- function(per_order, call = caller_env()) {
  prior <- t(vapply(per_order, function(p) {
    p <- p[stats::complete.cases(p), , drop = FALSE]
    if (nrow(p) < 2) {
      abort_newrllama4(
        "calibration",
        c("Batch calibration estimates the label prior from the rows' own label probabilities, so it needs at least
           two rows with them, not {nrow(p)}.",
          "i" = "Annotate more rows in one call, or use {.code calibrate = \"content-free\"}."),
        call = call
      )
    }
    exp(colMeans(log(pmax(p, .Machine$double.xmin))))
  }, numeric(ncol(per_order[[1]]))))
  prior / rowSums(prior)
}

# Probabilities (a row each) divided by a prior and normalised again, in log
# space (a prior that rounded to 0 would otherwise turn odds into Inf / Inf).
calibrate_probs <- function(probs, prior) {
  tiny <- .Machine$double.xmin
  calibrated <- softmax_rows(sweep(log(pmax(probs, tiny)), 2, log(pmax(prior, tiny))))
  calibrated[is.na(probs)] <- NA_real_
  calibrated
}

# Probabilities from log-scores, a row each (shifted by the row's maximum first,
# so that no score overflows).
softmax_rows <- function(scores) {
  p <- exp(scores - row_max(scores))
  p / rowSums(p)
}

# Each row's largest value (max.col() is C code: the refit's fits call this
# thousands of times).
row_max <- function(m) m[cbind(seq_len(nrow(m)), max.col(m, ties.method = "first"))]

# Each row's most likely label (the first on a tie, as the engine picks one).
most_likely <- function(probs, labels) labels[max.col(replace(probs, is.na(probs), 0), ties.method = "first")]

order_names <- function(orders) vapply(orders, paste, "", collapse = ",")

# The share of rows whose orders do not all give the same label.
order_disagreement <- function(labelled) {
  answered <- !is.na(labelled$label)
  if (!any(answered)) return(NA_real_)
  mean(labelled$agreement_orders[answered] < 1)
}

# Above this share of rows that change with the order, the labels say more
# about the order than about the texts.
order_disagreement_warning <- 0.1

warn_if_order_sensitive <- function(disagreement, n_orders, calibration) {
  if (n_orders > 1 && !is.na(disagreement) && disagreement > order_disagreement_warning) {
    remedies <- if (calibration == "none") "{.code calibrate = TRUE}, more orders," else "more orders,"
    warn_newrllama4(
      "order_sensitive",
      c("The order of the worked examples changed the label of {round(100 * disagreement)}% of the rows.",
        "i" = paste("The labels combine {n_orders} orders; see {.field .agreement_orders}, and consider", remedies,
                    "other examples, or {.fn learn_labels} on a random sample coded by hand.")), disagreement = disagreement
    )
  }
}
