# Our exports beside the packages text analysts attach: no name may clash, in
# either order (NLP, under tm, and ggplot2, under the tidyverse, both export
# `annotate`, which we once did too).

neighbours <- c("base", "stats", "utils", "graphics", "grDevices", "methods", "ggplot2", "NLP", "tm", "dplyr",
                "tidyr", "purrr", "stringr", "tibble", "readr", "forcats", "lubridate", "quanteda", "tidytext",
                "caret", "psych", "irr")

test_that("no export of ours has the name of an export of a package users attach beside us", {
  withr::local_timezone("UTC")  # readr and lubridate ask the system for it, which warns without systemd
  installed <- neighbours[vapply(neighbours, requireNamespace, NA, quietly = TRUE)]
  # the packages CI installs for this test (Makefile): a check that ran against none would prove nothing
  expect_true(all(c("ggplot2", "NLP", "tm", "dplyr", "tidyr", "psych", "caret") %in% installed))
  ours <- getNamespaceExports("newrllama4")
  clashes <- lapply(stats::setNames(nm = installed), function(pkg) intersect(ours, getNamespaceExports(pkg)))
  expect_identical(Filter(length, clashes), stats::setNames(list(), character()))
})

test_that("attaching the tidyverse and tm beside us, in either order, masks nothing of ours", {
  skip_if_not(requireNamespace("tidyverse", quietly = TRUE) && requireNamespace("tm", quietly = TRUE))
  ours <- getNamespaceExports("newrllama4")
  attach_in <- function(order) {
    code <- paste(sprintf("suppressPackageStartupMessages(library(%s))", order), collapse = "; ")
    code <- paste0(code, "; cat(conflicts(detail = FALSE), sep = '\\n')")
    out <- system2(file.path(R.home("bin"), "Rscript"), c("-e", shQuote(code)), stdout = TRUE, stderr = TRUE,
                   env = paste0("R_LIBS=", shQuote(paste(.libPaths(), collapse = .Platform$path.sep))))
    expect_null(attr(out, "status"))
    intersect(out, ours)
  }
  expect_identical(attach_in(c("newrllama4", "tidyverse", "tm")), character())
  expect_identical(attach_in(c("tm", "tidyverse", "newrllama4")), character())
})

# The house rules of the R side, as test_import_graph.py keeps the engine's: one
# topic per file, small enough to read whole, and tests mirroring the files.
# They read the sources, which only a checkout has (R CMD check tests the
# installed package).
r_sources <- function() {
  dir <- test_path("..", "..", "R")
  skip_if_not(dir.exists(dir), "the package's sources are not here")
  list.files(dir, pattern = "[.]R$", full.names = TRUE)
}

test_that("every R file stays under 400 lines", {
  sizes <- vapply(r_sources(), function(file) length(readLines(file)), 1L)
  expect_identical(names(sizes)[sizes >= 400], character())
})

test_that("every R file has its own test file", {
  topics <- sub("[.]R$", "", basename(r_sources()))
  missing <- topics[!file.exists(test_path(paste0("test-", topics, ".R")))]
  expect_identical(missing, character())
})

test_that("citation() cites the package and the methods it implements, and the maintainer can be written to", {
  citation_file <- system.file("CITATION", package = "newrllama4")
  entries <- utils::readCitationFile(citation_file, meta = list(Version = format(utils::packageVersion("newrllama4"))))
  expect_length(entries, 3)
  authors <- unlist(lapply(entries, function(entry) vapply(entry$author, function(p) paste(p$family, collapse = " "), "")))
  expect_true(all(c("Egami", "Angelopoulos") %in% authors))
  description <- read.dcf(system.file("DESCRIPTION", package = "newrllama4"))
  maintainer <- eval(parse(text = description[, "Authors@R"]))
  creator <- maintainer[vapply(maintainer, function(p) "cre" %in% p$role, NA)]
  expect_match(creator$email, "@users[.]noreply[.]github[.]com$")
  expect_match(description[, "URL"], "https://github.com/newrllama4/newrllama4", fixed = TRUE)
})

test_that("every export's help page says where to go next (a \\seealso section)", {
  # man/ of a checkout (load_all()), or the installed help where R CMD check runs the tests
  package_dir <- find.package("newrllama4")
  help_pages <- if (dir.exists(file.path(package_dir, "man"))) tools::Rd_db(dir = package_dir) else tools::Rd_db("newrllama4")
  expect_gt(length(help_pages), 20)
  section_of <- function(rd, tag) rd[vapply(rd, function(part) identical(attr(part, "Rd_tag"), tag), NA)]
  with_seealso <- unlist(lapply(help_pages, function(rd) {
    if (length(section_of(rd, "\\seealso"))) unlist(lapply(section_of(rd, "\\alias"), as.character))
  }))
  exports <- sort(getNamespaceExports("newrllama4"))
  expect_identical(setdiff(exports, with_seealso), character())
})
