# The labelled data and the drawn sample of the browser test, made the same
# way by the app's process and by the checks that read the codes back.
browser_data <- function() {
  n <- 80
  set.seed(11)
  subjects <- c("The council", "A neighbour", "The new mayor", "Our school board", "The local paper")
  verbs <- c("praised", "questioned", "delayed", "funded", "criticised")
  objects <- c("the bus lanes", "the library hours", "the park renovation", "the water rates", "the night market")
  after <- c("Letters to the editor were split: some called it overdue, others a waste of money.",
             "At the evening meeting, speakers asked for the figures behind the plan.",
             "Shop owners on the high street said they had not been asked.",
             "A petition with four hundred names was handed in on Friday.")
  rows <- seq_len(n)
  data <- data.frame(
    text = sprintf("Text %02d. %s %s %s, and residents wrote in about it all week. %s", rows,
                   sample(subjects, n, TRUE), sample(verbs, n, TRUE), sample(objects, n, TRUE), sample(after, n, TRUE)),
    x = round(stats::rnorm(n), 3)
  )
  # the model's probability: distinctive digits, so that the test can tell
  # whether any of them reached the page
  prob <- round(stats::runif(n, 0.05, 0.95), 6)
  data$.label <- factor(ifelse(prob > 0.5, "yes", "no"), levels = c("yes", "no"))
  data$.prob_yes <- prob
  data$.prob_no <- 1 - prob
  data$.confidence <- pmax(prob, 1 - prob)
  data
}

browser_sample <- function(data = browser_data()) {
  newrllama4::review_sample(data, n = 20, seed = 1)
}

# Adjudication not blind: the test checks that the adjudicator sees whose code is whose, and downloads
# the history.
browser_app <- function(file) {
  newrllama4::coding_app(browser_sample(), file,
                         labels = c(yes = "The text reports support for a local decision.",
                                    no = "The text reports no support, or opposition."),
                         instruction = "Does the text report support for a local decision?",
                         overlap = 0.25, seed = 7, blind_adjudication = FALSE)
}

# A coding task of typed fields instead of labels, on the first texts.
browser_fields_app <- function(file) {
  newrllama4::coding_app(browser_data()[1:3, ], file, instruction = "Code each letter.",
                         schema = list(stance = list(enum = c("for", "against", "mixed"), description = "Its stance"),
                                       local = "boolean", signatures = list(type = "integer", minimum = 0),
                                       gist = "string"),
                         seed = 1)
}

# A team of named people on the first `n` texts, each coded once (a share
# `overlap` twice; with a lead, half of them); their links (made with the
# secret in R_USER_DATA_DIR) go to FILE.links.json.
browser_team_app <- function(file, port, n = 6, overlap = 0, lead = NULL, quota = NULL) {
  app <- newrllama4::coding_app(browser_data()[seq_len(n), ], file, labels = c("yes", "no"), seed = 1,
                                overlap = if (is.null(lead)) overlap else 0.5, coders = c("Ana", "Ben"),
                                adjudicators = "Eve", lead = lead, quota = quota)
  links <- newrllama4::coding_links(file, sprintf("http://127.0.0.1:%d/", port))
  jsonlite::write_json(links, paste0(file, ".links.json"))
  app
}
