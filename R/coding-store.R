# The coding file: one SQLite database per sample and task, which the coding
# app writes the moment a code is made. Codes are only ever appended (a changed
# code is a new row, and the latest one counts), so a killed app loses at most
# the click in flight, and coders working at once, in one app or in several R
# processes, only ever insert. WAL lets them read while another writes;
# synchronous = FULL makes a committed code survive a power cut too.

# Layout 2 keeps the sample as plain tables (`sample`, its columns; `texts`,
# the text of each unit) that any SQLite client reads. Layout 1 kept it as
# serialize()d R, which only unserialize() reads, and that can run code hidden
# in a file received from someone else (CVE-2024-27322): it is never read, but
# upgraded in place when coding_app() is given the sample the file was made
# for, which its recorded keys confirm without reading it.
coding_file_format <- "newrllama4 coding file 2"
coding_file_format_serialized <- "newrllama4 coding file 1"

coding_tables <- c(
  "CREATE TABLE IF NOT EXISTS texts (unit INTEGER PRIMARY KEY, text TEXT NOT NULL)",
  "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
  "CREATE TABLE IF NOT EXISTS coders (coder TEXT PRIMARY KEY, seed INTEGER NOT NULL, unit_order TEXT NOT NULL,
     created TEXT NOT NULL)",
  "CREATE TABLE IF NOT EXISTS codes (id INTEGER PRIMARY KEY AUTOINCREMENT, unit INTEGER NOT NULL,
     coder TEXT NOT NULL, role TEXT NOT NULL, value TEXT, uncodable INTEGER NOT NULL, reason TEXT, note TEXT,
     seconds REAL, time TEXT NOT NULL)",
  "CREATE TABLE IF NOT EXISTS claims (session TEXT PRIMARY KEY, coder TEXT NOT NULL, unit INTEGER NOT NULL,
     time REAL NOT NULL)",
  "CREATE TABLE IF NOT EXISTS people (name TEXT NOT NULL, role TEXT NOT NULL, key_hash TEXT NOT NULL UNIQUE,
     salt TEXT NOT NULL, PRIMARY KEY (name, role))"
)

# A claim is a session's (a browser tab's): the text on its screen, held back
# from other coders, and renewed every claim_refresh_seconds while the page is
# connected, however long the coder takes. One not renewed for claim_seconds
# (its app killed before the session could release it) holds nothing back.
claim_seconds <- 1800
claim_refresh_seconds <- 60

# The claims' clock, in seconds, and how often an open page renews its claim.
# Internal, for the browser suite alone: the option newrllama4.coding_clock (a
# function giving the time, Sys.time() by default) moves the clock, and
# newrllama4.claim_refresh_seconds shortens the renewal's minute, so that a
# test sees a claim outlive claim_seconds while its text is on screen without
# waiting half an hour, nor a minute.
claim_clock <- function() as.numeric((getOption("newrllama4.coding_clock") %||% Sys.time)())
claim_refresh_interval <- function() getOption("newrllama4.claim_refresh_seconds", claim_refresh_seconds)

with_store <- function(file, f) {
  rlang::check_installed(c("DBI", "RSQLite"), reason = "to keep hand codes in a SQLite file.")
  con <- DBI::dbConnect(RSQLite::SQLite(), file, synchronous = NULL)
  on.exit(DBI::dbDisconnect(con))
  DBI::dbExecute(con, "PRAGMA busy_timeout = 20000")
  DBI::dbGetQuery(con, "PRAGMA journal_mode = WAL")
  DBI::dbExecute(con, "PRAGMA synchronous = FULL")
  f(con)
}

# BEGIN IMMEDIATE takes the write lock at once, so that two processes opening a
# new file cannot both find it empty and both write its description.
in_transaction <- function(con, f) {
  DBI::dbExecute(con, "BEGIN IMMEDIATE")
  value <- tryCatch(f(), error = function(e) {
    DBI::dbExecute(con, "ROLLBACK")
    stop(e)
  })
  DBI::dbExecute(con, "COMMIT")
  value
}

# Opens `file` for `sample` and `task`, creating it if new; a file made for
# another sample or task is refused rather than mixed in.
store_open <- function(file, sample, texts, task, overlap, seed, call = caller_env()) {
  keys <- list(sample_key = sample_key(sample$.row, texts), task_key = task_key(task))
  # a new file (and its WAL beside it) readable by its owner alone: it holds
  # the texts, notes, the model's labels and the keys' hashes
  if (!file.exists(file)) {
    umask <- Sys.umask("077")
    on.exit(Sys.umask(umask))
  }
  with_store(file, function(con) in_transaction(con, function() {
    meta <- store_meta_table(con, file, call, new_ok = TRUE, serialized_ok = TRUE)
    if ("claims" %in% DBI::dbListTables(con) && !"session" %in% DBI::dbListFields(con, "claims")) {
      # claims of before, one per coder: held for minutes only, they go rather than move
      DBI::dbExecute(con, "DROP TABLE claims")
    }
    for (sql in coding_tables) DBI::dbExecute(con, sql)
    # each click's nonce, so that a click sent again after a reconnect is written once
    if (!"nonce" %in% DBI::dbListFields(con, "codes")) DBI::dbExecute(con, "ALTER TABLE codes ADD COLUMN nonce TEXT")
    DBI::dbExecute(con, "CREATE UNIQUE INDEX IF NOT EXISTS codes_nonce ON codes (nonce)")
    if (is.null(meta)) {
      n_double <- round(overlap * nrow(sample))
      double <- if (n_double == 0) integer() else sort(withr::with_seed(seed, sample.int(nrow(sample), n_double)))
      values <- c(list(format = coding_file_format, created = format(Sys.time(), "%Y-%m-%d %H:%M:%S %Z"),
                       seed = seed, overlap = overlap, double = paste(double, collapse = " "),
                       task = as.character(jsonlite::toJSON(task, auto_unbox = TRUE))), keys)
      DBI::dbWriteTable(con, "meta", data.frame(key = names(values), value = vapply(values, as.character, "")),
                        append = TRUE)
      store_sample_tables(con, sample, texts)
      return(invisible(file))
    }
    for (key in names(keys)) {
      if (!identical(meta[[key]], keys[[key]])) {
        what <- if (key == "sample_key") "sample" else "task"
        abort_newrllama4("coding_file", c(
          "{.arg file} {.path {file}} holds codes of another {what}, not this one's.",
          "i" = "Give each sample and coding task a file of its own; draw more rows with {.fn review_sample}'s
                 {.arg previous} into a new file."
        ), file = file, mismatch = what, call = call)
      }
    }
    if (identical(meta$format, coding_file_format_serialized)) {
      # the keys match: this is the file's own sample, which replaces the serialized one unread
      store_sample_tables(con, sample, texts)
      DBI::dbExecute(con, "DELETE FROM meta WHERE key = 'sample'")
      DBI::dbExecute(con, "UPDATE meta SET value = ? WHERE key = 'format'", params = list(coding_file_format))
    }
    invisible(file)
  }))
}

# The sample as a table of its columns, in its row order, and each unit's
# text; `sample_columns` in the description says how to make each column R's
# again (a factor's levels, a date's or time's class).
store_sample_tables <- function(con, sample, texts) {
  columns <- lapply(sample, sample_column)
  DBI::dbWriteTable(con, "texts", data.frame(unit = seq_along(texts), text = enc2utf8(as.character(texts))),
                    append = TRUE)
  frame <- structure(lapply(columns, `[[`, "values"), names = names(sample), class = "data.frame",
                     row.names = seq_len(nrow(sample)))
  DBI::dbWriteTable(con, "sample", frame)
  types <- lapply(columns, function(column) column[names(column) != "values"])
  DBI::dbExecute(con, "INSERT INTO meta VALUES ('sample_columns', ?)",
                 params = list(as.character(jsonlite::toJSON(unname(types), auto_unbox = TRUE))))
}

# A column as SQLite keeps it (numbers, text; dates and times as ISO 8601
# text), with what R needs to restore it. A column of another class is kept
# as its text; a list column as one JSON value per row (read back by
# jsonlite::fromJSON(), which gives an empty vector as list()).
sample_column <- function(x) {
  if (is.factor(x)) return(list(type = "factor", levels = I(levels(x)), values = as.character(x)))
  if (inherits(x, "Date")) return(list(type = "Date", values = format(x, "%Y-%m-%d")))
  if (inherits(x, "POSIXct")) {
    return(list(type = "POSIXct", tz = attr(x, "tzone")[1] %||% "",
                values = format(x, "%Y-%m-%dT%H:%M:%OS6Z", tz = "UTC")))
  }
  if (is.list(x)) {
    return(list(type = "json", values = vapply(x, function(value) {
      as.character(jsonlite::toJSON(value, auto_unbox = TRUE, null = "null", na = "null", digits = NA))
    }, "")))
  }
  type <- if (is.logical(x)) "logical" else if (is.integer(x)) "integer" else if (is.double(x)) "double" else "character"
  list(type = type, values = if (type == "logical") as.integer(x) else if (type == "character") as.character(x) else
    as.vector(x))
}

restore_column <- function(values, column) {
  switch(column$type,
         factor = factor(values, levels = as.character(unlist(column$levels))),
         Date = as.Date(values),
         POSIXct = structure(as.POSIXct(values, format = "%Y-%m-%dT%H:%M:%OSZ", tz = "UTC"), tzone = column$tz),
         json = lapply(values, jsonlite::fromJSON),
         logical = as.logical(values),
         integer = as.integer(values),
         double = as.numeric(values),
         as.character(values))
}

# The file's description as a named list; NULL for a new, empty file when
# `new_ok`, a classed error for anything that is not a coding file. A file of
# layout 1 is refused unless `serialized_ok` (store_open() upgrades it).
store_meta_table <- function(con, file, call, new_ok = FALSE, serialized_ok = FALSE) {
  tables <- DBI::dbListTables(con)
  if (length(tables) == 0 && new_ok) return(NULL)
  meta <- if ("meta" %in% tables) DBI::dbGetQuery(con, "SELECT key, value FROM meta") else NULL
  format <- if (!is.null(meta)) meta$value[meta$key == "format"]
  if (identical(format, coding_file_format_serialized) && !serialized_ok) {
    abort_newrllama4("coding_file", c(
      "{.arg file} {.path {file}} was made by an earlier version of newrllama4, which kept its sample in a form only
       {.fn unserialize} reads; it is not read, since {.fn unserialize} can run code hidden in a file.",
      "i" = "Open it once with {.fn coding_app} and the sample it was made for: that keeps the sample as plain tables,
             and every code."
    ), file = file, mismatch = "layout", call = call)
  }
  if (!identical(format, coding_file_format) && !(serialized_ok && identical(format, coding_file_format_serialized))) {
    abort_newrllama4("coding_file", "{.arg file} {.path {file}} is not a coding file of {.fn coding_app}.",
                     file = file, mismatch = "format", call = call)
  }
  stats::setNames(as.list(meta$value), meta$key)
}

# What the file says about itself: the sample, its texts, the task, which units
# two coders code, and the seed.
store_meta <- function(file, call = caller_env()) {
  if (!rlang::is_string(file) || !file.exists(file)) {
    abort_newrllama4("coding_file", "{.arg file} must be an existing coding file of {.fn coding_app}.",
                     file = file, mismatch = "missing", call = call)
  }
  with_store(file, function(con) {
    meta <- store_meta_table(con, file, call)
    columns <- jsonlite::fromJSON(meta$sample_columns, simplifyVector = FALSE)
    sample <- DBI::dbGetQuery(con, "SELECT * FROM sample ORDER BY rowid")
    sample[] <- Map(restore_column, sample, columns)
    list(sample = sample, texts = DBI::dbGetQuery(con, "SELECT text FROM texts ORDER BY unit")$text,
         task = jsonlite::fromJSON(meta$task, simplifyVector = FALSE), seed = as.integer(meta$seed),
         overlap = as.numeric(meta$overlap), double = as.integer(strsplit(meta$double, " ")[[1]]),
         keys = meta[c("sample_key", "task_key")],
         quota = if (!is.null(meta$quota)) unlist(jsonlite::fromJSON(meta$quota, simplifyVector = FALSE)))
  })
}

sample_key <- function(rows, texts) rlang::hash(list(as.integer(rows), enc2utf8(as.character(texts))))

# Descriptions can be reworded mid-study; the labels, fields and instruction cannot.
task_key <- function(task) {
  rlang::hash(list(task$labels$label, lapply(task$fields, `[`, c("name", "kind", "values")), task$instruction))
}

# A coder's own random order of the units, seeded from the file's seed and
# the coder's name, and recorded the first time they come.
store_coder <- function(file, coder, n_units, seed) {
  with_store(file, function(con) in_transaction(con, function() {
    known <- DBI::dbGetQuery(con, "SELECT seed, unit_order FROM coders WHERE coder = ?", params = list(coder))
    if (nrow(known) == 1) {
      return(list(seed = known$seed, order = as.integer(strsplit(known$unit_order, " ")[[1]])))
    }
    coder_seed <- strtoi(substr(rlang::hash(list(seed, coder)), 1, 7), 16L)
    order <- withr::with_seed(coder_seed, sample.int(n_units))
    DBI::dbExecute(con, "INSERT INTO coders VALUES (?, ?, ?, ?)",
                   params = list(coder, coder_seed, paste(order, collapse = " "), format(Sys.time(), "%Y-%m-%d %H:%M:%S %Z")))
    list(seed = coder_seed, order = order)
  }))
}

# One code, written at once, once check_code() finds it is one of the task's
# codes: every way a code reaches the file passes here, whatever the page sent.
# `value` is the code as a named list in the task's field order, so that equal
# codes are equal strings. A `nonce` the file holds already (the page's click,
# sent again after a reconnect) writes nothing. Gives whether it wrote.
store_write <- function(file, unit, coder, value, uncodable = FALSE, reason = NA, note = NA, seconds = NA,
                        role = "code", nonce = NA, call = caller_env()) {
  blank <- function(x) if (!rlang::is_string(x) || !nzchar(trimws(x))) NA_character_ else x
  with_store(file, function(con) {
    task <- jsonlite::fromJSON(DBI::dbGetQuery(con, "SELECT value FROM meta WHERE key = 'task'")$value,
                               simplifyVector = FALSE)
    n_units <- DBI::dbGetQuery(con, "SELECT count(*) AS n FROM texts")$n
    problems <- check_code(unit, value, uncodable, reason, note, role, task, n_units)
    if (length(problems) > 0) {
      abort_newrllama4("code_refused", c("The code was not saved:", stats::setNames(problems, rep("x", length(problems)))),
                       problems = problems, unit = unit, call = call)
    }
    json <- if (isTRUE(uncodable)) NA_character_ else as.character(jsonlite::toJSON(
      value, auto_unbox = TRUE, null = "null", na = "null", digits = NA))
    written <- DBI::dbExecute(con, "INSERT OR IGNORE INTO codes (unit, coder, role, value, uncodable, reason, note,
                                      seconds, time, nonce) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   params = list(as.integer(unit), coder, role, json, as.integer(uncodable), blank(reason), blank(note),
                                 as.numeric(seconds), format(Sys.time(), "%Y-%m-%dT%H:%M:%OS3%z"), nonce))
    invisible(written == 1)
  })
}

# The latest code of each coder (and each adjudicator) for each unit; with
# `notes_of`, only that person's notes, so that a click does not carry
# everyone's notes from the file.
store_codes <- function(file, notes_of = NULL) {
  note <- if (is.null(notes_of)) "note" else "CASE WHEN coder = ? THEN note END AS note"
  with_store(file, function(con) {
    DBI::dbGetQuery(con, paste("SELECT id, unit, coder, role, value, uncodable, reason,", note, ", seconds, time
                                FROM codes WHERE id IN (SELECT max(id) FROM codes GROUP BY unit, coder, role)
                                ORDER BY id"), params = if (!is.null(notes_of)) list(notes_of))
  })
}

# The first text `coder` may code now (as `pick()` chooses among the
# available ones, in the coder's order), claimed for their `session` in the
# same transaction that found it free: two sessions, in one R process or
# several, never both get a text that only one coder is to code. Gives the
# unit (NULL when none is left) and how many were available.
store_claim_next <- function(file, coder, session, order, double, pick, quota = Inf) {
  with_store(file, function(con) in_transaction(con, function() {
    codes <- DBI::dbGetQuery(con, "SELECT unit, coder, role FROM codes WHERE role = 'code' GROUP BY unit, coder")
    claims <- DBI::dbGetQuery(con, "SELECT coder, unit, session, time FROM claims WHERE time > ?",
                              params = list(claim_clock() - claim_seconds))
    available <- available_units(order, coder, codes, claims, double, quota)
    # a text the coder has on screen in another tab is not this tab's too, where a second code would
    # replace the first unseen; it still counts among theirs to code
    elsewhere <- open_elsewhere(claims, coder, session)
    # Internal, for the browser suite alone (zero by default): seconds held
    # between finding a text free and claiming it, so that a second process
    # asks at the same time. Inside the transaction that second process waits
    # on the lock; without it, both would claim the same text.
    Sys.sleep(getOption("newrllama4.test_claim_delay", 0))
    unit <- if (quota_room(quota, coder, session, codes, claims) > 0) pick(setdiff(available, elsewhere))
    if (!is.null(unit)) store_claim_with(con, coder, session, unit)
    list(unit = unit, available = available)
  }))
}

# The texts `coder` has on screen in tabs other than `session`'s. Only a tab
# that renewed its claim lately is open: a session of an app killed a minute
# ago is not another tab.
open_elsewhere <- function(claims, coder, session) {
  open_tab <- claims$time > claim_clock() - 2.5 * claim_refresh_seconds
  claims$unit[claims$coder == coder & claims$session != session & open_tab]
}

# A session still connected keeps its text.
store_refresh_claims <- function(file, session) {
  with_store(file, function(con) {
    DBI::dbExecute(con, "UPDATE claims SET time = ? WHERE session = ?", params = list(claim_clock(), session))
  })
}

# A session that ends (a tab closed) holds no text back; the coder's other
# tabs keep theirs.
store_release <- function(file, session) {
  with_store(file, function(con) DBI::dbExecute(con, "DELETE FROM claims WHERE session = ?", params = list(session)))
}

# The name a person first gave, for a name given again with other spaces, case
# or accents; the name itself, trimmed, for someone new.
store_person <- function(file, name) {
  name <- name_shown(name)
  known <- with_store(file, function(con) {
    DBI::dbGetQuery(con, "SELECT coder FROM coders UNION ALL SELECT coder FROM (SELECT coder, min(id) AS first
                          FROM codes GROUP BY coder ORDER BY first)")$coder
  })
  same <- known[name_key(known) == name_key(name)]
  if (length(same) > 0) same[[1]] else name
}

name_shown <- function(name) stringi::stri_replace_all_regex(stringi::stri_trim_both(name), "\\s+", " ")

name_key <- function(name) {
  stringi::stri_trans_general(name_shown(name), "NFKD; [:Nonspacing Mark:] Remove; NFC; Lower")
}

# Every code ever written, the replaced ones too, in the order written.
store_history <- function(file) {
  with_store(file, function(con) DBI::dbGetQuery(con, "SELECT * FROM codes ORDER BY id"))
}

# Each coder who came, with their order of the units.
store_coders <- function(file) {
  coders <- with_store(file, function(con) DBI::dbGetQuery(con, "SELECT coder, unit_order FROM coders ORDER BY created, coder"))
  stats::setNames(lapply(strsplit(coders$unit_order, " "), as.integer), coders$coder)
}

store_claim <- function(file, coder, session, unit) {
  with_store(file, function(con) store_claim_with(con, coder, session, unit))
}

store_claim_with <- function(con, coder, session, unit) {
  DBI::dbExecute(con, "INSERT OR REPLACE INTO claims (session, coder, unit, time) VALUES (?, ?, ?, ?)",
                 params = list(session, coder, as.integer(unit), claim_clock()))
}

store_claims <- function(file) {
  with_store(file, function(con) {
    DBI::dbGetQuery(con, "SELECT coder, unit, session, time FROM claims WHERE time > ?",
                    params = list(claim_clock() - claim_seconds))
  })
}

# The units `coder` may code now, in their order: not coded by them yet, and
# short of coders (one, or two for the overlap's units) counting those coded
# by others and those others have open on screen; none once they coded their
# `quota` of texts.
available_units <- function(order, coder, codes, claims, double, quota = Inf) {
  coded <- codes[codes$role == "code", c("unit", "coder")]
  if (length(unique(coded$unit[coded$coder == coder])) >= quota) return(integer())
  others <- unique(rbind(coded[coded$coder != coder, ], claims[claims$coder != coder, c("unit", "coder")]))
  taken <- tabulate(others$unit, length(order))
  cap <- ifelse(seq_along(order) %in% double, 2L, 1L)
  mine <- coded$unit[coded$coder == coder]
  order[!order %in% mine & taken[order] < cap[order]]
}

# Each unit's two or more codes, when they differ and no decision is recorded.
disagreements <- function(codes, task) {
  coded <- codes[codes$role == "code", ]
  decided <- unique(codes$unit[codes$role == "adjudication"])
  units <- split(code_signature(coded, task), coded$unit)
  differing <- as.integer(names(units)[vapply(units, function(s) length(unique(s)) > 1, NA)])
  sort(setdiff(differing, decided))
}

# What two codes must share to agree: the label, or every field but the free
# texts (two coders' wordings of a gist differ without disagreeing), or both
# saying the text cannot be coded.
code_signature <- function(codes, task) {
  compared <- vapply(Filter(function(field) field$kind != "string", task$fields), function(field) field$name, "")
  if (length(task$labels$label) > 0) compared <- "code"
  vapply(seq_len(nrow(codes)), function(i) {
    if (codes$uncodable[[i]] == 1) return("(cannot code)")
    value <- jsonlite::fromJSON(codes$value[[i]], simplifyVector = FALSE)
    as.character(jsonlite::toJSON(value[compared], auto_unbox = TRUE, null = "null", digits = NA))
  }, "")
}
