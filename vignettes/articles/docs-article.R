# The documents in docs/ (engine.md, benchmarks.md) as articles of the site: each
# is kept where the README, NEWS and the benchmarks link to it, and read here as
# it is, without its own title (the article's) and with its links to the other
# documents pointing at their pages on the site.
docs_article <- function(name) {
  lines <- readLines(file.path("..", "..", "docs", name), encoding = "UTF-8")
  lines <- lines[-seq_len(match(TRUE, startsWith(lines, "# ")))]
  lines <- gsub("\\]\\((engine|benchmarks)\\.md", "](\\1.html", lines)
  lines <- gsub("](../NEWS.md)", "](../news/index.html)", lines, fixed = TRUE)
  cat(lines, sep = "\n")
}
