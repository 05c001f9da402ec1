#' Product reviews with a known truth
#'
#' Four hundred short made-up customer reviews of small household products,
#' bought in a shop or online, each written as praise or as a complaint, so
#' that the truth a careful coder would give is known. The examples and the
#' README use it to run the whole workflow -- annotate, draw a sample, code it,
#' estimate -- and to compare the corrected estimate with the truth.
#'
#' Online buyers complain more often: a review is negative with probability
#' 0.2 for the shop and 0.6 online (log-odds ratio `log(6)`, 1.79, in the
#' population the reviews are drawn from). Online reviews are also more often
#' worded the hard way (praise before a complaint, sarcasm, a negated
#' complaint), so a model's errors follow `channel`, as they do in real
#' studies, and labels taken as true bias the slope. `data-raw/product_reviews.R`
#' in the package's repository makes it.
#'
#' @format A data frame with 400 rows and 5 columns:
#' \describe{
#'   \item{id}{Row number, 1 to 400.}
#'   \item{channel}{Where the product was bought: a factor, `"shop"` or `"online"`.}
#'   \item{product}{The product reviewed: a factor of eight (kettle, toaster, ...).}
#'   \item{review}{The review, one short sentence or two (ASCII).}
#'   \item{truth}{The sentiment it was written with: a factor, `"positive"` or
#'     `"negative"`. A study does not have this column; here it stands in for
#'     people's codes (see [write_codes()]).}
#' }
#' @seealso [annotate_texts()], [review_sample()], [label_regression()].
#' @examples
#' table(product_reviews$channel, product_reviews$truth)
#' head(product_reviews$review)
"product_reviews"
