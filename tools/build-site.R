# Builds the pkgdown site, offline: checks that every export is in exactly one
# group of _pkgdown.yml's reference (pkgdown::check_pkgdown() fails on one in
# none, this script on one in two), builds the whole site, then points the home
# page's links to docs/ and NEWS.md at their pages on the site and fails on any
# link of the home page or an article to a file or anchor the site lacks.
# Usage: Rscript tools/build-site.R [DESTINATION]  (default: _pkgdown.yml's, build/site)
# make test runs it without the engine (tools/without-engine): the articles that
# need the engine are knitted beforehand (tools/precompute-articles.R), the
# reference's examples that need it are shown from their recorded run (fails on
# one whose code changed since), and nothing is fetched (no look-up of CRAN's,
# see below). The pages ask cdnjs for MathJax, which only the hosted site reaches.
source("tools/site-examples.R")
pkgdown_offline()
destination <- commandArgs(TRUE)[1]
override <- if (!is.na(destination)) list(destination = destination) else list()

fail <- function(...) {
  message("tools/build-site.R: ", ...)
  quit(status = 1)
}

# Each export's topic (the Rd file whose aliases name it) in exactly one group.
check_reference_groups <- function() {
  groups <- yaml::read_yaml("_pkgdown.yml")$reference
  rd_files <- list.files("man", pattern = "[.]Rd$", full.names = TRUE)
  aliases <- lapply(rd_files, function(file) {
    sub("^\\\\alias\\{(.*)\\}$", "\\1", grep("^\\\\alias\\{", readLines(file), value = TRUE))
  })
  topic_of <- unlist(unname(Map(function(file, names) {
    stats::setNames(rep(sub("[.]Rd$", "", basename(file)), length(names)), names)
  }, rd_files, aliases)))
  here <- normalizePath(".")
  exports <- parseNamespaceFile(basename(here), dirname(here))$exports
  in_groups <- vapply(exports, function(name) {
    sum(vapply(groups, function(group) {
      listed <- unlist(group$contents)  # topics, by name or by an alias
      isTRUE(topic_of[name] %in% c(listed, topic_of[listed]))
    }, NA))
  }, 1L)
  if (any(in_groups != 1)) {
    fail("each export must be in one group of _pkgdown.yml's reference: ",
         paste(sprintf("%s (topic %s) is in %d", exports[in_groups != 1], topic_of[exports[in_groups != 1]],
                       in_groups[in_groups != 1]), collapse = "; "))
  }
}

# The pages whose links are checked: the home page and the articles.
site_pages <- function(site) {
  c(file.path(site, "index.html"), list.files(file.path(site, "articles"), "[.]html$", full.names = TRUE))
}

# Each link of a page within the site: its node, its target, its anchor and the file it reaches.
page_links <- function(html, page) {
  nodes <- xml2::xml_find_all(html, ".//a[@href] | .//img[@src]")
  target <- ifelse(xml2::xml_name(nodes) == "a", xml2::xml_attr(nodes, "href"), xml2::xml_attr(nodes, "src"))
  local <- !grepl("^[a-z]+:", target)
  list(nodes = nodes[local], target = target[local],
       anchor = ifelse(grepl("#", target), sub("^[^#]*#", "", target), "")[local],
       path = link_path(page, target[local]))
}

# The file a link of a page reaches (the page itself for "#anchor"); NA off the site.
link_path <- function(page, target) {
  file <- sub("#.*$", "", target)
  ifelse(grepl("^[a-z]+:", target), NA, ifelse(nzchar(file), file.path(dirname(page), file), page))
}

page_ids <- function(path) xml2::xml_attr(xml2::xml_find_all(xml2::read_html(path), ".//*[@id]"), "id")

# The home page is the README, whose links to docs/*.md, NEWS.md and the
# vignettes' sources are right on GitHub and in the tarball; on the site those
# are articles and the news page.
# GitHub's anchors drop the dots of a heading that pandoc's make hyphens
# ("toolsbench_annotationr", "toolsbench_annotation-r"): each goes to the id that
# differs from it only so.
fix_links <- function(site, repo) {
  for (page in site_pages(site)) {
    html <- xml2::read_html(page)
    links <- page_links(html, page)
    target <- links$target
    if (basename(page) == "index.html" && dirname(page) == site) {
      target <- sub("^docs/(engine|benchmarks)[.](md|html)", "articles/\\1.html", target)
      target <- sub("^NEWS[.](md|html)$", "news/index.html", target)
      target <- sub("^vignettes/([^/#]+)[.]Rmd", "articles/\\1.html", target)
      target <- sub("^python/README[.](md|html)", paste0(repo, "/blob/HEAD/python/README.md"), target)
    }
    path <- link_path(page, target)
    for (i in which(nzchar(links$anchor) & file.exists(path))) {
      ids <- page_ids(path[[i]])
      if (links$anchor[[i]] %in% ids) next
      same <- ids[gsub("-", "", ids) == gsub("-", "", links$anchor[[i]])]
      if (length(same) == 1) target[[i]] <- paste0(sub("#.*$", "", target[[i]]), "#", same)
    }
    for (i in which(target != links$target)) {
      xml2::xml_set_attr(links$nodes[[i]], if (xml2::xml_name(links$nodes[[i]]) == "a") "href" else "src", target[[i]])
    }
    xml2::write_html(html, page)
  }
}

# Every link of the home page and the articles within the site reaches a file of
# it, and an anchor of that file.
check_local_links <- function(site) {
  broken <- unlist(lapply(site_pages(site), function(page) {
    links <- page_links(xml2::read_html(page), page)
    exists <- file.exists(links$path)
    found <- exists & vapply(seq_along(exists), function(i) {
      !exists[[i]] || !nzchar(links$anchor[[i]]) || !grepl("[.]html$", links$path[[i]]) ||
        links$anchor[[i]] %in% page_ids(links$path[[i]])
    }, NA)
    if (!all(found)) paste0(basename(page), " -> ", unique(links$target[!found]))
  }))
  if (length(broken)) fail("links to files or anchors the site lacks:\n  ", paste(broken, collapse = "\n  "))
}

# The pages ask cdnjs for MathJax, as pkgdown's own template does (the same file,
# with its integrity hash): Debian's pkgdown points them at a copy of MathJax in
# /usr/share, which a visitor of the hosted site does not have, so its formulas
# (\eqn{} in the help, $...$ in the articles) stayed raw LaTeX.
host_mathjax <- function(site) {
  for (page in list.files(site, "[.]html$", recursive = TRUE, full.names = TRUE)) {
    text <- readLines(page, warn = FALSE)
    hosted <- gsub("file:///[^\"]*/mathjax/MathJax[.]js", "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.5/MathJax.js", text)
    if (!identical(hosted, text)) writeLines(hosted, page)
  }
}

# The reference's examples that need the engine, from their record where the site
# was built without it (tools/site-examples.R says how they are kept true).
replay_engine_examples <- function(site) {
  topics <- engine_example_topics()
  recorded <- topics[file.exists(record_path(topics))]
  stale <- recorded[vapply(recorded, function(topic) recorded_md5(topic) != examples_md5(topic), NA)]
  missing <- setdiff(topics, recorded)
  if (length(missing) || length(stale)) {
    fail("the examples of ", paste(c(missing, stale), collapse = ", "), " have no record of a run with the engine, ",
         "or one of other code: run tools/precompute-articles.R where the engine is installed, and commit ",
         recorded_examples_dir)
  }
  if (isTRUE(newrllama4::engine_available())) return(invisible())  # pkgdown ran them
  for (topic in topics) {
    page <- file.path(site, reference_page(topic))
    html <- xml2::read_html(page)
    xml2::xml_replace(examples_block(html), recorded_block(topic))
    xml2::write_html(html, page)
  }
}

started <- Sys.time()
pkgdown::check_pkgdown()
check_reference_groups()
pkgdown::build_site(override = override, preview = FALSE, devel = TRUE)
site <- pkgdown::as_pkgdown(".", override = override)$dst_path
replay_engine_examples(site)
host_mathjax(site)
fix_links(site, sub("/$", "", desc::desc_get_urls()[[1]]))
check_local_links(site)
message(sprintf("The site is in %s (%.0f s).", site, as.numeric(Sys.time() - started, units = "secs")))
