# Labelled rows whose labels are right about 85% of the time, wrong more often
# where x is high (so a regression on the labels is biased), with the truth
# known: the simulations behind the findings tests.
simulated_labels <- function(n, seed, slope = 0.8) {
  withr::with_seed(seed, {
    x <- stats::rnorm(n)
    group <- sample(c("a", "b"), n, replace = TRUE)
    truth <- stats::rbinom(n, 1, stats::plogis(-0.3 + slope * x))
    wrong <- stats::rbinom(n, 1, stats::plogis(-2.5 + x))
    label <- ifelse(wrong == 1, 1 - truth, truth)
    sure <- ifelse(wrong == 1, stats::runif(n, 0.5, 0.8), stats::runif(n, 0.6, 0.99))
    prob <- ifelse(label == 1, sure, 1 - sure)
    data.frame(x = x, group = group, text = paste("text", seq_len(n)),
               .label = factor(ifelse(label == 1, "yes", "no"), levels = c("yes", "no")),
               .prob_yes = prob, .prob_no = 1 - prob, .confidence = sure,
               truth = ifelse(truth == 1, "yes", "no"), stringsAsFactors = FALSE)
  })
}
