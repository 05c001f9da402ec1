# Reading review_sample()'s design back from the columns it gave the drawn
# rows: each stratum's rows and rows drawn, and each row's inclusion
# probability.

# Whether rows of inclusion probability `prob` were taken whole (a tail, the
# largest clusters): known, they add no sampling variance. A tolerance, as a
# probability read back from a file may be a hair under 1.
taken_whole <- function(prob) prob >= 1 - 1e-9

# The strata of the design columns: one size and one count of rows drawn each.
design_strata <- function(coded, call) {
  stratum <- as.character(coded$.stratum)
  sizes <- suppressWarnings(as.numeric(coded$.stratum_rows))
  drawn <- suppressWarnings(as.numeric(coded$.stratum_drawn))
  per_stratum <- function(values) tapply(values, stratum, function(v) if (length(unique(v)) == 1) v[[1]] else NA)
  strata <- data.frame(name = unique(stratum), stringsAsFactors = FALSE)
  strata$rows <- as.vector(per_stratum(sizes)[strata$name])
  strata$drawn <- as.vector(per_stratum(drawn)[strata$name])
  if (anyNA(stratum) || anyNA(strata$rows) || anyNA(strata$drawn) || any(strata$drawn > strata$rows) ||
      any(strata$drawn < 1)) {
    abort_newrllama4("coded_rows", c(
      "The design columns of {.arg coded} disagree: each stratum of {.field .stratum} must have one
       {.field .stratum_rows} and one {.field .stratum_drawn}, at most its rows.",
      "i" = "Were rows of several samples bound together? Draw further rows with {.code review_sample(previous =)},
             which gives every row the combined design."), call = call)
  }
  strata
}

# Each coded row's inclusion probability, `.sample_prob`. Where the strata's
# columns say rows were drawn one by one, it must be its stratum's rows drawn
# over its rows, as review_sample() writes it (counted_probabilities()); a
# cluster's is its stratum's clusters drawn over its clusters, which they do
# not count.
checked_probabilities <- function(coded, call) {
  if (!".sample_prob" %in% names(coded)) {
    abort_newrllama4("coded_rows", c(
      "{.arg coded} has no {.field .sample_prob}: each coded row's probability of being drawn.",
      "i" = "Draw the rows to code with {.fn review_sample}, which records it, and keep the column when the codes come
             back."), call = call)
  }
  prob <- coded$.sample_prob
  if (!is.numeric(prob) || anyNA(prob) || any(prob <= 0 | prob > 1)) {
    abort_newrllama4("coded_rows", "{.field .sample_prob} of {.arg coded} must be probabilities above 0.", call = call)
  }
  one_by_one <- identical(unique(as.character(coded[[".sampling_unit"]])), ".row")
  if (one_by_one && all(c(".stratum_rows", ".stratum_drawn") %in% names(coded))) {
    prob <- counted_probabilities(coded, prob, call)
  }
  prob
}

# A spreadsheet that saved `.sample_prob` as its cells show it (0.04 for
# 0.0375) would move every weight, and nothing would tell: the exact ratio of
# the counts replaces a rounding of it, and a probability that no rounding of
# it explains (edited, or of another sample) is refused.
counted_probabilities <- function(coded, prob, call) {
  counted <- suppressWarnings(as.numeric(coded$.stratum_drawn) / as.numeric(coded$.stratum_rows))
  if (anyNA(counted) || any(counted <= 0 | counted > 1)) return(prob)  # design_strata() refuses these
  rounding <- abs(prob - counted) <= 1e-9 * counted
  for (digits in 1:15) {
    rounding <- rounding | abs(prob - signif(counted, digits)) <= 1e-12 | abs(prob - round(counted, digits)) <= 1e-12
  }
  if (all(rounding)) return(counted)
  off <- which(!rounding)
  abort_newrllama4("coded_rows", c(
    "{.field .sample_prob} of {.arg coded} is not its stratum's rows drawn over its rows ({.field .stratum_drawn} /
     {.field .stratum_rows}) on {length(off)} row{?s}, as {.fn review_sample} wrote it: {.val {prob[off[1]]}} against
     {.val {counted[off[1]]}} on the first.",
    "i" = "Keep the design's columns as {.fn review_sample} gave them (a rounding of {.field .sample_prob} is read as
           the ratio it rounds); were rows of several samples bound together, draw further rows with
           {.code review_sample(previous =)} instead."), call = call)
}
