# Quotas: the most texts each coder of a coding file codes (coding_app(quota =)),
# kept in the file so that every app on it holds them when it picks a text.

# `quota`: one whole number of texts for every coder, or one per coder named;
# numbers below 1 are shares of the codes to make.
check_quota <- function(quota, call) {
  if (is.null(quota)) return(NULL)
  named <- !is.null(names(quota)) && all(nzchar(names(quota)))
  share <- if (is.numeric(quota)) quota > 0 & quota < 1
  if (!is.numeric(quota) || length(quota) == 0 || anyNA(quota) || !all(share | (quota >= 1 & quota == round(quota))) ||
      (length(quota) > 1 && !named) || (named && anyDuplicated(name_key(names(quota)))) || sum(quota[share]) > 1) {
    abort_invalid("{.arg quota} must be a whole number of texts for each coder, or one per coder named
                   ({.code c(Ana = 40, Ben = 20)}); numbers below 1 are shares of the codes, which add up to 1 at
                   most.", "quota", call)
  }
  quota
}

# The most texts `coder` codes: their quota (a share of the codes the file
# plans, every text once and the overlap's twice, rounded up); Inf for none.
coder_quota <- function(stored, coder) {
  quota <- stored$quota
  if (is.null(quota)) return(Inf)
  if (!is.null(names(quota))) quota <- quota[name_key(names(quota)) == name_key(coder)]
  if (length(quota) == 0) return(Inf)
  unname(if (quota < 1) ceiling(quota * (length(stored$texts) + length(stored$double))) else quota)
}

# How many more texts `coder` may take in `session` under their quota: less
# those they coded and those on screen in their other open tabs, which count
# against it (two tabs a text short of it would each take one and code one
# past it), but for `unit`, the one taken (a click sent again after a
# reconnect, for a text its old session still holds).
quota_room <- function(quota, coder, session, codes, claims, unit = NULL) {
  mine <- codes$unit[codes$role == "code" & codes$coder == coder]
  quota - length(unique(mine)) - length(setdiff(open_elsewhere(claims, coder, session), c(mine, unit)))
}

# The coders' quotas (check_quota()) become the file's, for every app on it;
# NULL keeps those it has.
store_quota <- function(file, quota) {
  if (is.null(quota)) return(invisible())
  with_store(file, function(con) {
    DBI::dbExecute(con, "INSERT OR REPLACE INTO meta VALUES ('quota', ?)",
                   params = list(as.character(jsonlite::toJSON(as.list(quota), auto_unbox = TRUE, digits = NA))))
  })
}
