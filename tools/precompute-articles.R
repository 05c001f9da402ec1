# Knits the articles that need the engine into the .Rmd that R CMD check and the
# site build render without it, as CRAN packages with Python engines do: the
# "Get started" article (vignettes/newrllama4.Rmd.orig -> vignettes/newrllama4.Rmd,
# its figures in vignettes/figures/). Its findings figure is also the README's
# (man/figures/findings.png). Run from the checkout, with the package installed
# from it and the engine usable; commit what it writes.
# Usage: Rscript tools/precompute-articles.R
if (!isTRUE(newrllama4::engine_available())) stop("the engine is not usable here: see newrllama4::newrllama4_sitrep()")
started <- Sys.time()
setwd("vignettes")
unlink(Sys.glob("figures/newrllama4-*"))
knitr::knit("newrllama4.Rmd.orig", "newrllama4.Rmd", quiet = TRUE)
stopifnot(file.copy("figures/newrllama4-findings-plot-1.png", "../man/figures/findings.png", overwrite = TRUE))
message(sprintf("vignettes/newrllama4.Rmd knitted in %.0f s", as.numeric(Sys.time() - started, units = "secs")))
