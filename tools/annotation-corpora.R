# The labelled corpora of tools/bench_annotation.R, none of them used by a test
# or tuned to; each a list of name, instruction, labels, data (text, gold) and
# examples (text, .label).
#   - reuters(): tm's acq (50 articles on acquisitions) and crude (20 on crude
#     oil), heading and first 60 words; one article of each is the worked
#     example, the other 68 are annotated;
#   - reviews(): 40 one-sentence product reviews written by hand for this
#     benchmark, half positive, half negative; two more are the examples;
#   - words(): the Bing opinion lexicon (Hu and Liu 2004, in tidytext): 100
#     words drawn at random, as the lexicon has them (about 70% negative), and
#     a positive and a negative word as the examples; added after the choice of
#     method, to check it on data it was not made on.

reuters <- function() {
  data("acq", package = "tm", envir = environment())
  data("crude", package = "tm", envir = environment())
  as_text <- function(doc) {
    words <- strsplit(paste(content(doc), collapse = " "), "\\s+")[[1]]
    paste0(meta(doc, "heading"), ". ", paste(utils::head(words[nzchar(words)], 60), collapse = " "))
  }
  texts <- c(vapply(acq, as_text, ""), vapply(crude, as_text, ""))
  gold <- c(rep("acquisition", length(acq)), rep("oil", length(crude)))
  examples <- c(1, length(acq) + 1)  # the first article of each topic
  list(
    name = "Reuters acq/crude",
    instruction = "Is this news article about a company acquisition or about crude oil? Answer acquisition or oil.",
    labels = c("acquisition", "oil"),
    data = data.frame(text = texts[-examples], gold = gold[-examples]),
    examples = data.frame(text = texts[examples], .label = gold[examples])
  )
}

reviews <- function() {
  positive <- c(
    "The blender crushes ice in seconds and cleans up easily.",
    "These headphones sound rich and stay comfortable all day.",
    "Arrived early, well packed, and works exactly as described.",
    "My kids love this board game; we play it every weekend.",
    "The jacket kept me warm through a very cold winter.",
    "Battery life is superb, easily two days of heavy use.",
    "A sturdy desk that was simple to assemble.",
    "The coffee tastes smooth and the aroma fills the kitchen.",
    "Great value for the price, I would buy it again.",
    "The customer service team replaced the part within a week.",
    "Soft sheets that got even nicer after washing.",
    "The lamp gives a warm light and looks elegant on my shelf.",
    "This backpack has clever pockets and survived a long trip.",
    "The knife is sharp, balanced and a joy to cook with.",
    "Setup took five minutes and the camera picture is crisp.",
    "The shoes fit perfectly and my back pain is gone.",
    "A charming novel that I could not put down.",
    "The vacuum picks up pet hair better than my old one.",
    "Bright colours, strong paper, my drawings look great.",
    "The tent went up quickly and stayed dry in heavy rain."
  )
  negative <- c(
    "The zipper broke the second time I used the bag.",
    "It stopped charging after a month and support never replied.",
    "The screen scratches far too easily.",
    "Smells of chemicals and the smell will not go away.",
    "The instructions were useless and two screws were missing.",
    "Far too loud, the fan sounds like a jet engine.",
    "The colour looked nothing like the photos online.",
    "The toaster burns one side and leaves the other pale.",
    "Cheap plastic that cracked when I dropped it once.",
    "The app crashes every time I open the settings.",
    "The chair wobbles and the cushion flattened within weeks.",
    "Delivery took a month and the box arrived crushed.",
    "The soup was bland and the portion tiny for the price.",
    "My order was wrong and the refund took ages.",
    "The printer jams on almost every page.",
    "These gloves tore at the seams on the first day.",
    "The speaker crackles at any volume above half.",
    "A dull film with a plot that made no sense.",
    "The kettle leaks from the bottom and trips the fuse.",
    "Batteries drained overnight even when switched off."
  )
  list(
    name = "reviews (hand-written)",
    instruction = "Is this product review positive or negative?",
    labels = c("positive", "negative"),
    data = data.frame(text = c(positive, negative), gold = rep(c("positive", "negative"), each = 20)),
    examples = data.frame(text = c("Works perfectly, I am delighted with it.", "It broke within a day, a waste of money."),
                          .label = c("positive", "negative"))
  )
}

# `n` words drawn at random to annotate, and the first word of each label
# among the rest as the worked examples.
word_corpus <- function(name, instruction, labels, word, label, n = 100) {
  drawn <- withr::with_seed(1L, sample(length(word)))
  rows <- drawn[seq_len(n)]
  rest <- drawn[-seq_len(n)]
  examples <- vapply(labels, function(l) rest[label[rest] == l][1], 0L, USE.NAMES = FALSE)
  list(name = name, instruction = instruction, labels = labels,
       data = data.frame(text = word[rows], gold = label[rows]),
       examples = data.frame(text = word[examples], .label = label[examples]))
}

words <- function(n = 100) {
  data("sentiments", package = "tidytext", envir = environment())
  lexicon <- as.data.frame(sentiments)
  lexicon <- lexicon[!lexicon$word %in% lexicon$word[duplicated(lexicon$word)], ]  # words listed with both
  word_corpus("Bing lexicon words", "Is this word positive or negative?", c("positive", "negative"),
              lexicon$word, lexicon$sentiment, n)
}

# Added after recalibrate_labels() was built, to check it on a corpus that
# nothing was looked at on: English words that tidytext's parts-of-speech list
# gives as a noun only or as a verb only, among the words Jane Austen's novels
# use at least 20 times in lower case (janeaustenr; so that the words are
# common, and not names), 100 drawn at random: mostly nouns, as the language
# has them.
parts_of_speech <- function() {
  words <- austen_words()
  words <- words[words$label %in% c("noun", "verb"), ]
  word_corpus("parts of speech (words)", "Is this English word a noun or a verb?", c("noun", "verb"),
              words$word, words$label)
}

# Added with the refit's choice of model (issue 35), to check it where labels are
# many and coded rows few: the same common words, with five parts of speech
# (nouns, verbs, adjectives, adverbs, and prepositions, pronouns, conjunctions
# and articles as function words), 200 drawn at random.
parts_of_speech_five <- function() {
  labels <- c("noun", "verb", "adjective", "adverb", "function word")
  words <- austen_words()
  word_corpus("five parts of speech (words)",
              "What part of speech is this English word? Answer noun, verb, adjective, adverb or function word.",
              labels, words$word, words$label, n = 200)
}

# The corpora of tools/bench_learned.R, large enough to code 150-300 rows and
# score the rest: 1,000 Bing lexicon words, 700 nouns and verbs, 1,000 words of
# five parts of speech.
learned_corpora <- list(
  words = function() words(1000),
  nouns_verbs = function() {
    austen <- austen_words()
    austen <- austen[austen$label %in% c("noun", "verb"), ]
    word_corpus("nouns and verbs (words)", "Is this English word a noun or a verb?", c("noun", "verb"),
                austen$word, austen$label, n = 700)
  },
  parts_of_speech_five = function() {
    austen <- austen_words()
    word_corpus("five parts of speech (words)",
                "What part of speech is this English word? Answer noun, verb, adjective, adverb or function word.",
                c("noun", "verb", "adjective", "adverb", "function word"), austen$word, austen$label, n = 1000)
  }
)

# Added for the feature sets (issue 61): tm's 70 Reuters-21578 articles (50 on
# acquisitions, 20 on crude oil) cut into passages of 40 words, without their
# heading, each labelled by its article's topic: 325 rows in 70 clusters
# (`article`), to be coded by whole articles (review_sample(cluster =)) so that
# no learner sees a passage of an article it is scored on.
reuters_passages <- function(size = 40) {
  loadNamespace("tm")  # the corpora's methods
  data("acq", package = "tm", envir = environment())
  data("crude", package = "tm", envir = environment())
  articles <- c(lapply(seq_along(acq), function(i) acq[[i]]), lapply(seq_along(crude), function(i) crude[[i]]))
  passages <- lapply(seq_along(articles), function(i) {
    words <- strsplit(paste(NLP::content(articles[[i]]), collapse = " "), "\\s+")[[1]]
    words <- words[nzchar(words)]
    pieces <- split(words, ceiling(seq_along(words) / size))
    data.frame(text = vapply(pieces, paste, "", collapse = " "), article = i,
               gold = if (i <= length(acq)) "acquisition" else "oil")
  })
  list(name = "Reuters acq/crude passages",
       instruction = "Is this passage of a news article about a company acquisition or about crude oil? Answer acquisition or oil.",
       labels = c("acquisition", "oil"), data = do.call(rbind, passages), cluster = "article")
}

# Words that tidytext's parts-of-speech list gives one part of speech only, among
# the words Jane Austen's novels use at least 20 times in lower case.
austen_words <- function() {
  data("parts_of_speech", package = "tidytext", envir = environment())
  pos <- as.data.frame(parts_of_speech)
  pos$label <- ifelse(pos$pos == "Noun", "noun", ifelse(startsWith(pos$pos, "Verb"), "verb",
               ifelse(pos$pos == "Adjective", "adjective", ifelse(pos$pos == "Adverb", "adverb",
               ifelse(pos$pos %in% c("Preposition", "Pronoun", "Conjunction", "Definite Article"), "function word",
                      NA)))))
  pos <- unique(pos[c("word", "label")])
  single <- pos[!pos$word %in% pos$word[duplicated(pos$word)] & !is.na(pos$label), ]
  austen <- unlist(strsplit(janeaustenr::austen_books()$text, "[^A-Za-z]+"))
  common <- names(which(table(austen) >= 20))
  single[single$word %in% common, ]
}
