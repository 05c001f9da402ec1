# Who may use the coding app, and as whom. With people named (coders,
# adjudicators, a lead), each comes in by a secret link: a key in the URL
# that names them and their role, so that nobody can code, or adjudicate, as
# someone else. The file keeps only each key's SHA-256, so that a coding file
# sent on (to a colleague, into a replication archive) opens no door. The keys
# themselves are HMACs of the file's identity, the person, the role and a
# random salt of theirs (which renewing a link replaces) under a secret kept
# in the user's data directory (tools::R_user_dir()), so that coding_links()
# gives the same links again on the machine that named them, and nowhere
# else. openssl provides the random secret and salts (the operating system's
# generator, which R's sample() is not) and the hashes.
#
# Without people named, the app is for one machine: a typed name is the
# coder, and a request from elsewhere is refused.

#' Secret links to the coding app
#'
#' With people named in [coding_app()] (`coders`, `adjudicators`, `lead`),
#' each of them comes in by a link of their own, whose key says who they are
#' and in which role: the app shows a page saying the link is not valid, and
#' no text of the sample, to anyone without a valid key. `coding_links()`
#' gives the links, for the lead to send each person theirs.
#'
#' The coding file keeps only a hash of each key, so that the file can be sent
#' on without giving access. The keys are made from a secret kept in the
#' user's data directory ([tools::R_user_dir()]): `coding_links()` gives them
#' on the machine and account that ran `coding_app()` with the people named,
#' and fails elsewhere (naming the people again there makes new links, and
#' the old ones stop working). Leaving a person out of a later `coding_app()`
#' call on the file ends their link; their codes stay. A link that reached
#' the wrong person is replaced with `renew`.
#'
#' @param file The coding file of [coding_app()].
#' @param url The app's address as the people will open it, such as
#'   `"http://192.168.1.20:4321/"` or the address of the HTTPS proxy in front
#'   of it.
#' @param renew `NULL`, or names of people whose links are replaced by new
#'   ones (in every role of theirs): their old links stop working at once,
#'   even in a running app.
#' @return A data frame with a row per person and role: `name`, `role`
#'   (`"coder"`, `"adjudicator"` or `"lead"`) and `url`, the link.
#' @seealso [coding_app()], [code_sample()], which prints the links.
#' @export
#' @examples
#' if (requireNamespace("shiny", quietly = TRUE) && requireNamespace("RSQLite", quietly = TRUE) &&
#'     requireNamespace("openssl", quietly = TRUE)) {
#'   withr::with_envvar(c(R_USER_DATA_DIR = tempfile()), {
#'     sample <- data.frame(text = c("Great film.", "Dull.", "Fine, I suppose."))
#'     file <- tempfile(fileext = ".sqlite")
#'     app <- coding_app(sample, file, labels = c("yes", "no"), coders = c("Ana", "Ben"),
#'                       adjudicators = "Eve")
#'     coding_links(file, "http://127.0.0.1:4321/")
#'   })
#' }
coding_links <- function(file, url, renew = NULL) {
  check_string(url, "url")
  meta <- store_meta(file)
  people <- access_people(file)
  if (nrow(people) == 0) {
    abort_newrllama4("coding_access", c(
      "{.arg file} {.path {file}} names nobody: anyone on this machine codes under the name they type.",
      "i" = "Name the people with {.fn coding_app}'s {.arg coders} and {.arg adjudicators} to give each a link."
    ), call = current_env())
  }
  if (!is.null(renew)) {
    if (!is.character(renew) || !all(name_key(renew) %in% name_key(people$name))) {
      abort_invalid("{.arg renew} must name people of the file: {.val {unique(people$name)}}.", "renew", current_env())
    }
    people <- store_people(file, people[c("name", "role")], renew = renew)
  }
  keys <- access_keys(meta$keys, people)
  if (!identical(access_hash(keys), people$key_hash)) {
    abort_newrllama4("coding_access", c(
      "The links of {.path {file}} were made on another machine or account; they cannot be made again here.",
      "i" = "Run {.fn coding_links} where {.fn coding_app} named the people, or name them again here with
             {.fn coding_app} (which makes new links: the old ones stop working)."
    ), call = current_env())
  }
  separator <- if (grepl("?", url, fixed = TRUE)) "&" else "?"
  data.frame(name = people$name, role = people$role, url = paste0(url, separator, "key=", keys))
}

# The people of `coders`, `adjudicators` and `lead` as rows of name and
# role; NULL when none are named.
coding_people <- function(coders, adjudicators, lead, call) {
  if (is.null(coders) && is.null(adjudicators) && is.null(lead)) return(NULL)
  rlang::check_installed("openssl", reason = "to make each person's secret link.")
  named <- list(coder = coders, adjudicator = adjudicators, lead = lead)
  for (role in names(named)) {
    argument <- if (role == "lead") "lead" else paste0(role, "s")
    names <- named[[role]]
    if (is.null(names)) next
    if (!is.character(names) || anyNA(names) || any(!nzchar(name_shown(names))) ||
        any(nchar(name_shown(names)) > 40) || (role == "lead" && length(names) != 1)) {
      abort_invalid("{.arg {argument}} must be {if (role == 'lead') 'a name' else 'names'} of 1 to 40 characters.",
                    argument, call)
    }
    if (anyDuplicated(name_key(names))) {
      abort_invalid("{.arg {argument}} names someone twice (names are compared without case, accents or spaces).",
                    argument, call)
    }
  }
  if (is.null(coders)) abort_invalid("Name the coders with {.arg coders} too.", "coders", call)
  roles <- rep(names(named), lengths(named))
  people <- data.frame(name = name_shown(unlist(named, use.names = FALSE)), role = roles)
  check_one_role(people, call)
  people
}

# One person, one role: an adjudicator (or lead) who also codes would see, in
# the codes they adjudicate and download, other coders' codes of texts they
# have still to code themselves.
check_one_role <- function(people, call) {
  twice <- unique(people$name[duplicated(name_key(people$name))])
  if (length(twice) == 0) return(invisible())
  abort_newrllama4("coding_roles", c(
    "{.val {twice}} {cli::qty(length(twice))}{?is/are} named in two roles: each person holds one role in a coding file.",
    "i" = "An adjudicator or lead who also coded would see the others' codes of texts still theirs to code: name
           each person once, in one of {.arg coders}, {.arg adjudicators} and {.arg lead}."
  ), names = twice, call = call)
}

# The people of the file become `people`, each with the hash of their key;
# a person left out loses their link, one named again keeps theirs (unless
# in `renew`), and a returning name keeps the spelling the file first knew.
# Gives the people as stored.
store_people <- function(file, people, renew = character()) {
  keys <- store_meta(file)$keys
  known <- access_people(file)
  named_before <- match(name_key(people$name), name_key(known$name))
  first_given <- vapply(people$name, function(name) store_person(file, name), "", USE.NAMES = FALSE)
  people$name <- ifelse(is.na(named_before), first_given, known$name[named_before])
  same <- name_key(people$name)
  people$name <- people$name[match(same, same)]
  kept <- match(paste(same, people$role), paste(name_key(known$name), known$role))
  kept[same %in% name_key(renew)] <- NA
  people$salt <- known$salt[kept]
  people$salt[is.na(kept)] <- vapply(which(is.na(kept)), function(i) {
    paste(as.character(openssl::rand_bytes(16)), collapse = "")
  }, "")
  people$key_hash <- access_hash(access_keys(keys, people))
  with_store(file, function(con) in_transaction(con, function() {
    DBI::dbExecute(con, "DELETE FROM people")
    DBI::dbWriteTable(con, "people", people[c("name", "role", "key_hash", "salt")], append = TRUE)
  }))
  access_people(file)
}

access_people <- function(file) {
  with_store(file, function(con) DBI::dbGetQuery(con, "SELECT name, role, key_hash, salt FROM people ORDER BY rowid"))
}

# Who a session is: the person whose key the URL holds, or whom the host's
# login names (`user`: `session$user`, which access_gate() passes only with
# `login = "host"`, since any client can send the header Shiny fills it from),
# in the role `?role=` asks for among theirs. NULL for anyone else.
access_person <- function(file, key, user = NULL, role = NULL) {
  people <- access_people(file)
  if (rlang::is_string(key) && nzchar(key)) {
    found <- people[people$key_hash == access_hash(key), ]
  } else if (rlang::is_string(user) && nzchar(user)) {
    found <- people[name_key(people$name) == name_key(user), ]
    if (rlang::is_string(role) && role %in% found$role) found <- found[found$role == role, ]
  } else {
    return(NULL)
  }
  if (nrow(found) == 0) return(NULL)
  list(name = found$name[[1]], role = found$role[[1]])
}

# A request from this machine itself, not passed on by a proxy: any header
# by which a proxy names the client it passes on (X-Forwarded-For, nginx's
# X-Real-IP, RFC 7239's Forwarded) says the client is elsewhere, whatever
# address it gives, since a client can write it too.
is_local_request <- function(request) {
  address <- request$REMOTE_ADDR %||% "127.0.0.1"
  address %in% c("127.0.0.1", "::1", "::ffff:127.0.0.1") &&
    is.null(request$HTTP_X_FORWARDED_FOR) && is.null(request$HTTP_X_REAL_IP) && is.null(request$HTTP_FORWARDED)
}

local_hosts <- c("127.0.0.1", "localhost", "::1")

# Serving beyond this machine needs people named: otherwise anyone on the
# network codes under any name.
check_host <- function(host, file, call) {
  if (host %in% local_hosts || nrow(access_people(file)) > 0) return(invisible())
  abort_newrllama4("coding_access", c(
    "Serving on {.val {host}} lets anyone on the network read the texts and code under any name.",
    "i" = "Name the people with {.code coders = c(...)} (and {.arg adjudicators}): each gets a secret link, which
           {.fn code_sample} prints and {.fn coding_links} gives."
  ), host = host, call = call)
}

# Each person's key: 128 bits of the HMAC of the file, the person, the role and their salt.
access_keys <- function(keys, people) {
  rlang::check_installed("openssl", reason = "to make the people's secret links.")
  secret <- access_secret()
  vapply(seq_len(nrow(people)), function(i) {
    message <- paste(keys$sample_key, keys$task_key, name_key(people$name[[i]]), people$role[[i]], people$salt[[i]],
                     sep = "\n")
    substr(as.character(openssl::sha256(charToRaw(enc2utf8(message)), key = secret)), 1, 32)
  }, "")
}

access_hash <- function(keys) {
  rlang::check_installed("openssl", reason = "to check the people's secret links.")
  as.character(openssl::sha256(keys))
}

# The user's secret, made once: 32 bytes from the system's random generator,
# readable by the user alone.
access_secret <- function() {
  path <- file.path(tools::R_user_dir("newrllama4", "data"), "coding-secret")
  if (!file.exists(path)) {
    dir.create(dirname(path), recursive = TRUE, showWarnings = FALSE)
    umask <- Sys.umask("077")
    on.exit(Sys.umask(umask))
    writeLines(paste(as.character(openssl::rand_bytes(32)), collapse = ""), path)
  }
  readLines(path, n = 1)
}
