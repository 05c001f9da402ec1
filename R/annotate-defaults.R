# The model and context annotate_texts() uses when given no context, kept for the session.

# The model annotate_texts() uses without a context: SmolLM2 135M Instruct, loaded once per session.
annotation_model <- function() {
  if (is.null(the$annotation_model) || handle_state(the$annotation_model) != "live") {
    the$annotation_model <- model_load("smollm2-135m-instruct")
  }
  the$annotation_model
}

# Its context, kept for the session while it holds the longest row; otherwise one made
# to hold it, as far as the model's window allows, with fewer sequences where the
# memory cannot hold eight. Rows longer than the model's window fail one by one.
annotation_context <- function(model, needed) {
  context <- the$annotation_context
  fits <- function(context) {
    identical(context$model, model) && (is.null(needed) || context$py$n_ctx >= min(needed$total, model$py$n_ctx_train))
  }
  live <- !is.null(context) && handle_state(context) == "live"
  if (live && fits(context)) return(context)
  if (live) context_free(context)
  n_ctx <- context_size(if (is.null(needed)) 0 else needed$total, model$py$n_ctx_train)
  for (n_seq_max in c(8L, 4L, 2L, 1L)) {
    context <- tryCatch(context_create(model, n_ctx = n_ctx, n_seq_max = n_seq_max),
                        newrllama4_error_context_too_large = function(e) if (n_seq_max == 1L) stop(e) else NULL)
    if (!is.null(context)) break
  }
  the$annotation_context <- context
  if (!is.null(needed) && n_ctx > 2048L) {
    inform_newrllama4("context_size", c(
      "i" = "Made a context of {n_ctx} tokens per sequence ({n_seq_max} sequence{?s}): row {needed$row} needs {needed$total}.",
      "!" = if (needed$total > n_ctx) "Rows longer than the model's window ({n_ctx} tokens) fail: {.field .error} says which."
    ))
  }
  context
}
