# Knits the articles that need the engine into the .Rmd that R CMD check and the
# site build render without it, as CRAN packages with Python engines do: "Get
# started" (vignettes/newrllama4.Rmd.orig -> vignettes/newrllama4.Rmd) and
# "Annotating text" (vignettes/annotating-text.Rmd.orig -> annotating-text.Rmd),
# their figures in vignettes/figures/; runs the README's example and draws its
# fit beside the truth of the package's reviews (man/figures/findings.png, the
# README's figure). Then runs the reference's examples that
# need the engine through pkgdown and records them for the site
# (pkgdown/examples/, see tools/site-examples.R).
# Run from the checkout, with the package installed from it and the engine
# usable; commit what it writes.
# Usage: Rscript tools/precompute-articles.R [articles|readme|examples]  (default: all three)
if (!isTRUE(newrllama4::engine_available())) stop("the engine is not usable here: see newrllama4::newrllama4_sitrep()")
source("tools/site-examples.R")
pkgdown_offline()
what <- commandArgs(TRUE)[1]
timed <- function(label, code) {
  started <- Sys.time()
  force(code)
  message(sprintf("%s in %.0f s", label, as.numeric(Sys.time() - started, units = "secs")))
}

knit_article <- function(name) {
  timed(sprintf("vignettes/%s.Rmd knitted", name), {
    unlink(Sys.glob(file.path("vignettes", "figures", paste0(name, "-*"))))
    owd <- setwd("vignettes")
    on.exit(setwd(owd))
    knitr::knit(paste0(name, ".Rmd.orig"), paste0(name, ".Rmd"), quiet = TRUE, envir = new.env())
  })
}

# The README's example (its first R block under "From texts to a corrected
# estimate", as tests/testthat/test-readme.R reads it), its fit drawn with the
# slope on the reviews' truth.
readme_figure <- function() {
  lines <- readLines("README.md")
  start <- grep("^## From texts to a corrected estimate", lines)
  fences <- grep("^```", lines)
  fences <- fences[fences > start][1:2]
  env <- new.env(parent = globalenv())
  timed("the README's example run", {
    utils::capture.output(eval(parse(text = lines[(fences[1] + 1):(fences[2] - 1)]), envir = env))
  })
  truth <- stats::coef(stats::glm(truth == "negative" ~ channel, stats::binomial, newrllama4::product_reviews))
  grDevices::png("man/figures/findings.png", width = 6, height = 2, units = "in", res = 96)
  on.exit(grDevices::dev.off())
  graphics::par(mar = c(4, 8, 0.5, 1))  # room for the term's name
  plot(env$fit)
  graphics::segments(truth[["channelonline"]], 0.5, truth[["channelonline"]], 1.5, lty = 2)  # the term's row is at 1
  graphics::text(truth[["channelonline"]], 0.6, "true value", pos = 4, cex = 0.8)
}

record_examples <- function() {
  topics <- engine_example_topics()
  site <- tempfile("reference-")
  on.exit(unlink(site, recursive = TRUE))
  timed(sprintf("the examples of %d help topics run", length(topics)), {
    pkg <- pkgdown::as_pkgdown(".", override = list(destination = site))
    pkgdown::init_site(pkg)
    names <- vapply(topics, rd_name, "")  # what build_reference(topics =) matches
    pkgdown::build_reference(pkg, examples = TRUE, topics = unname(names), preview = FALSE, devel = FALSE)
  })
  dir.create(recorded_examples_dir, recursive = TRUE, showWarnings = FALSE)
  unlink(Sys.glob(file.path(recorded_examples_dir, "*.html")))
  for (topic in topics) {
    block <- examples_block(xml2::read_html(file.path(site, reference_page(topic))))
    writeLines(c(sprintf("<!-- the examples of man/%s.Rd, run with the engine by tools/precompute-articles.R; md5 of the examples: %s -->",
                         topic, examples_md5(topic)),
                 as.character(block)),
               record_path(topic))
  }
}

if (is.na(what) || what == "articles") {
  knit_article("newrllama4")
  knit_article("annotating-text")
}
if (is.na(what) || what == "readme") readme_figure()
if (is.na(what) || what == "examples") record_examples()
