# Fixtures of the annotate_texts() tests (test-annotate-*.R, test-context-size.R).

reviews <- data.frame(
  id = 1:5,
  title = c("Kettle", "Toaster", "Lamp", "Fan", "Radio"),
  review = c("Boils fast and looks nice.", "Burnt every slice.", "It gives light.",
             "Loud but it works, mostly.", "Stopped after a week."),
  stringsAsFactors = FALSE
)
sentiment <- c("positive", "negative", "neutral")
instruction <- "Is the review positive, negative or neutral?"

words_of_length <- function(n, seed) {
  words <- c("the", "river", "ran", "past", "an", "old", "mill,", "and", "nobody", "saw.", "Über", "naïve", "\u00e9t\u00e9")
  withr::with_seed(seed, paste(sample(words, n, replace = TRUE), collapse = " "))
}
