# Packages attached beside newrllama4 that export some of its names (localLLM,
# the nearest peer, exports model_load, context_create, generate,
# generate_parallel and apply_chat_template): whichever comes first on the
# search path is the one a bare call reaches. Loading the package prints
# nothing (CRAN's rule), so the situation report is where this is said.

# One row per attached package sharing names with ours: its name, the names,
# and whether it comes before ours on the search path (and so masks ours).
masking_packages <- function(search_path = search()) {
  ours <- match("package:newrllama4", search_path)
  exports <- getNamespaceExports("newrllama4")
  others <- setdiff(grep("^package:", search_path, value = TRUE), "package:newrllama4")
  shared <- lapply(others, function(entry) sort(intersect(exports, ls(as.environment(entry), all.names = TRUE))))
  found <- lengths(shared) > 0
  data.frame(package = sub("^package:", "", others[found]),
             names = vapply(shared[found], paste, "", collapse = ", "),
             masks_ours = !is.na(ours) & match(others[found], search_path) < ours,
             stringsAsFactors = FALSE)
}

sitrep_masking <- function() {
  if (!"package:newrllama4" %in% search()) {
    return(sitrep_item("masked names", "none: newrllama4 is not attached (calls name it, newrllama4::...)"))
  }
  masking <- masking_packages()
  if (nrow(masking) == 0) return(sitrep_item("masked names", "none"))
  rows <- lapply(seq_len(nrow(masking)), function(i) {
    package <- masking$package[[i]]
    if (masking$masks_ours[[i]]) {
      sitrep_item("masked names", sprintf("%s, attached after newrllama4, masks its %s", package, masking$names[[i]]),
                  problem = TRUE,
                  fix = sprintf("Call these as newrllama4::%s(), or attach newrllama4 after %s.",
                                strsplit(masking$names[[i]], ", ", fixed = TRUE)[[1]][[1]], package))
    } else {
      sitrep_item("masked names", sprintf("newrllama4, attached after %s, masks its %s (call them as %s::...)",
                                          package, masking$names[[i]], package))
    }
  })
  do.call(rbind, rows)
}
