# The reference's examples that need the engine, recorded for the site built
# without it (make test's, as CRAN's and r-universe's builders are), where pkgdown
# shows them as `if (FALSE)`: tools/precompute-articles.R runs them with the engine
# through pkgdown and keeps each page's rendered examples in
# pkgdown/examples/<topic>.html, headed by the md5 of the examples it ran;
# tools/build-site.R puts them in the pages of a site built without the engine,
# and fails on an engine example without a record or with one made from other
# code, so that what the site shows is what the code printed.
# Sourced from the checkout's root by both scripts.
recorded_examples_dir <- file.path("pkgdown", "examples")

# pkgdown without the network: downlit links a package named in code
# (remotes::install_git) to its home page, which it reads, for a package not
# installed here, from CRAN's list of packages (tools::CRAN_package_db(), a
# download): offline, those names stay unlinked.
pkgdown_offline <- function() {
  options(pkgdown.internet = FALSE)
  utils::assignInNamespace("CRAN_urls", function() data.frame(Package = character(), URL = character()), "downlit")
}

# The help topics whose examples run only with the engine (roxygen's @examplesIf engine_available()).
engine_example_topics <- function() {
  rd <- list.files("man", "[.]Rd$", full.names = TRUE)
  needs_engine <- vapply(rd, function(file) any(grepl("if (engine_available())", readLines(file), fixed = TRUE)), NA)
  sub("[.]Rd$", "", basename(rd[needs_engine]))
}

# The md5 of a topic's examples as R runs them (tools::Rd2ex()).
examples_md5 <- function(topic) {
  code <- tempfile(fileext = ".R")
  on.exit(unlink(code))
  tools::Rd2ex(file.path("man", paste0(topic, ".Rd")), code)
  unname(tools::md5sum(code))
}

# The code block of a reference page's Examples section (pkgdown puts the
# section's id on its heading or on the section).
examples_block <- function(html) {
  anchor <- xml2::xml_find_first(html, ".//*[@id='ref-examples']")
  section <- if (xml2::xml_name(anchor) == "h2") xml2::xml_parent(anchor) else anchor
  xml2::xml_find_first(section, ".//div[contains(@class, 'sourceCode')]")
}

# A help file's \name{}, which pkgdown's build_reference(topics =) takes (its page is named by the file:
# passage_options.Rd, whose \name{} is passage_answers, is reference/passage_options.html).
rd_name <- function(topic) {
  rd <- readLines(file.path("man", paste0(topic, ".Rd")))
  sub("^\\\\name\\{(.*)\\}$", "\\1", grep("^\\\\name\\{", rd, value = TRUE))
}

reference_page <- function(topic) file.path("reference", paste0(topic, ".html"))

record_path <- function(topic) file.path(recorded_examples_dir, paste0(topic, ".html"))

# A record's code block, as examples_block() took it from the page.
recorded_block <- function(topic) {
  xml2::xml_find_first(xml2::read_html(record_path(topic), encoding = "UTF-8"), ".//div[contains(@class, 'sourceCode')]")
}

# The md5 a record was made from (its first line).
recorded_md5 <- function(topic) sub(".*md5 of the examples: ([0-9a-f]+).*", "\\1", readLines(record_path(topic), n = 1))
