# Makes data/product_reviews.rda: short made-up product reviews whose truth is
# known, because each was written from a positive or a negative phrase. Run
# from the checkout's root: Rscript data-raw/product_reviews.R
#
# The design: a review of a product bought in the shop is negative with
# probability 0.2, one bought online with probability 0.6 (the population's
# log-odds ratio is log(6), 1.79). Online reviews are more often worded the
# hard way (praise before a complaint, sarcasm, a negated complaint), where a
# model is more likely to err, so that the model's errors follow the covariate,
# as they do in real studies: labels taken as true bias the slope.
set.seed(20261202)
n <- 400
products <- c("kettle", "toaster", "blender", "desk lamp", "fan", "vacuum cleaner", "coffee grinder", "iron")
plain <- list(
  positive = c("Works perfectly and arrived a day early.", "Great value, I would buy this %s again.",
               "Sturdy, quiet and easy to clean.", "Exactly as described, very happy with it.",
               "The best %s I have owned.", "Does the job well and looks good too.",
               "Five stars, my whole family loves this %s.", "Simple to use and it feels solid."),
  negative = c("Stopped working after a week.", "Arrived broken and nobody answered my emails.",
               "Loud, flimsy and far too expensive.", "The %s leaks every single time.",
               "I returned it, a waste of money.", "Smells of burnt plastic whenever it is on.",
               "Cheap parts, the %s fell apart in a month.", "Do not buy this %s.")
)
hard <- list(
  positive = c("I expected to hate this %s, but it is great.", "Not cheap, but worth every penny.",
               "No complaints at all after a year.", "The box was damaged, the %s inside is perfect.",
               "Never had a problem with it."),
  negative = c("Looks lovely, but the %s broke on day two.", "Oh great, another %s that will not switch on.",
               "Five stars for the packaging, none for the %s.", "I wanted to love it. I do not.",
               "Fast delivery, shame the %s does not work.")
)
channel <- factor(sample(c("shop", "online"), n, replace = TRUE), levels = c("shop", "online"))
truth <- factor(ifelse(stats::rbinom(n, 1, ifelse(channel == "online", 0.6, 0.2)) == 1, "negative", "positive"),
                levels = c("positive", "negative"))
product <- factor(sample(products, n, replace = TRUE), levels = products)
worded_hard <- stats::rbinom(n, 1, ifelse(channel == "online", 0.4, 0.15)) == 1
review <- vapply(seq_len(n), function(i) {
  phrases <- (if (worded_hard[i]) hard else plain)[[as.character(truth[i])]]
  phrase <- sample(phrases, 1)
  if (grepl("%s", phrase, fixed = TRUE)) sprintf(phrase, product[i]) else phrase
}, "")
product_reviews <- data.frame(id = seq_len(n), channel = channel, product = product, review = review, truth = truth)
stopifnot(all(!grepl("[^ -~]", product_reviews$review)))  # ASCII only: no encoding to declare
save(product_reviews, file = "data/product_reviews.rda", compress = "bzip2", version = 2)
