# A coding file of a small labelled sample, for the coding app's tests.
coding_fixture <- function(n = 6, overlap = 0.5, ..., sample = NULL) {
  skip_if_not_installed("RSQLite")
  skip_if_not_installed("shiny")
  sample <- sample %||% data.frame(text = paste("Text", seq_len(n)),
                                   .label = factor(rep(c("yes", "no"), length.out = n), levels = c("yes", "no")),
                                   .confidence = 0.876543)
  file <- withr::local_tempfile(fileext = ".sqlite", .local_envir = parent.frame())
  app <- coding_app(sample, file, labels = c("yes", "no"), overlap = overlap, seed = 1, ...)
  list(file = file, app = app, sample = sample)
}
