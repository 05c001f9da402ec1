#' Code a sample by hand in the browser
#'
#' `coding_app()` makes a Shiny app in which people code the drawn sample one
#' text at a time, and `code_sample()` runs it (and opens the browser when R
#' is interactive). Every code goes to the SQLite `file` the moment it is made;
#' [read_codes()] reads them back as the sample's rows, ready for
#' [agreement()], [learn_labels()], [label_regression()] and
#' [label_shares()].
#'
#' @section Coding:
#' Each text is shown large, with the codebook (the instruction and each
#' label's or field's description) beside it: a button per label (keys 1 to 9
#' choose them), or an input per field of a schema (choices for an enum and a
#' boolean, a number, a short text; Enter saves). A key held down codes one
#' text, not the ones after it, and digits typed in a box are text. A text can
#' be marked "cannot code" with a reason chosen from `uncodable`, or "other"
#' in the coder's words, and every code can carry a note (up to 2,000
#' characters). Back returns to the coder's earlier texts (coding one again
#' records the new code; a note typed before going back is kept), skip leaves
#' a text for later, and the bar shows the coder's progress ("37 of 150": of
#' their `quota`, or else of every text, the most one coder codes, so that
#' the total stays as colleagues work). A coder given no more text reads
#' why: their quota is reached, every text has all its coders, or none is
#' free now but some on other coders' screens may come back to them.
#' Each code is confirmed on the page ("Saved: text 12"); a code that cannot
#' be written (a read-only or full disk, a locked file) stays on screen with
#' the reason, to save again. A dropped connection reconnects by itself, and
#' a code made while it was down, or whose answer it lost, is sent again and
#' written once (each click carries a nonce, which the file keeps).
#'
#' @section A team:
#' Named in `coders`, `adjudicators` and `lead`, each person comes in by a
#' secret link of their own, which [coding_links()] gives, `code_sample()`
#' prints (at `url`, or at the machine's LAN address when it serves every
#' address) and the lead's links screen lists, to copy or renew: the key in it says who they are and in which role (`?coder=`
#' changes nothing), and a request without a valid key gets a page saying
#' the link is not valid, with no text of the sample. Each person holds one
#' role in a file: a name given in two (a coder who also adjudicates, say) is
#' an error of class `newrllama4_error_coding_roles`, since an adjudicator or
#' lead sees the coders' codes of texts a coder has still to code. Who a
#' session is, and whether it may do what it asks, is checked again on every
#' click, screen, pick and download: a link renewed or removed (see
#' [coding_links()]) ends its open sessions at their next click, with a page
#' that says so. The page and its websocket are refused to a page of another
#' site (its `Origin` not the app's), every page is served with
#' `Referrer-Policy: no-referrer`, and once the page is connected the key
#' leaves its address (the tab keeps it for a reload), so that it is not in
#' the browser's history or later requests. The coding file is created
#' readable by its owner only.
#'
#' With `login = "host"`, the login of a host that sets it itself, such as
#' Posit Connect or Shiny Server Pro (`session$user`), stands for the key: a
#' person whose login is their name needs no link (`?role=adjudicator`
#' chooses among their roles, in a file made before one role a person).
#' Never by default: Shiny reads the login from a request header that any
#' client can send, and that reverse proxies pass on, so anywhere else it
#' would let anyone in as anyone. `code_sample()`, which serves the app
#' itself with no host in front, refuses it. A later `coding_app()` call on the file with people named
#' makes them the file's people (one left out loses their link, keeping their
#' codes); one without keeps those the file names. Without people named, the
#' app is for this machine alone:
#' `code_sample()` refuses another `host` (an error of class
#' `newrllama4_error_coding_access`), and the app refuses requests from other
#' machines.
#'
#' @section Blind coding:
#' By default the page never receives the model's labels, probabilities or
#' confidence, nor other coders' codes, so that nobody anchors on them; each
#' coder gets the texts in a random order of their own, seeded from `seed` and
#' their name, and recorded in the file.
#'
#' @section Several coders:
#' A coder opens the app's address with `?coder=NAME`, or gives a name on the
#' first screen; a name given again with other spaces, case or accents ("ana
#' maria" for "Ana María") is the same coder, shown as first given. Each text is coded by one coder, and a share `overlap` of
#' them (chosen once, from `seed`) by a second one as well, to measure how far
#' people agree ([agreement()] on `read_codes(file, by = "coder")`). Texts
#' another coder has on screen are left to them until they close the page,
#' however long it stays open (or its app stops for good, after 30 minutes): a
#' text is found free and claimed in one transaction, so that no two coders,
#' in one app or several R processes, get a text that one coder is to code.
#' A coder's second tab gets another text than the first (or, for their last
#' one, a page saying it is open in the other), so that a code made in one
#' does not replace the other's unseen.
#' Coders never see anyone else's codes. Where two coders disagree, an
#' adjudicator (`?coder=NAME&adjudicate=1`, or the box on the first screen)
#' sees both codes and records a third decision, which [read_codes()] takes;
#' never on a text they coded themselves. With `blind_adjudication` (the
#' default), the adjudicator sees the codes as "Coder 1" and "Coder 2", not
#' by the coders' names, in adjudication and on the team screen, and only
#' the lead downloads the history, which names them. A decision can be picked again and
#' changed (the earlier one stays in the file's history).
#'
#' @section The team screen:
#' Adjudicators and the `lead` have a team screen (the lead sees only that,
#' and the links screen), which follows the file by itself every few seconds:
#' the texts done (all their coders, two for the overlap's, and no open
#' disagreement), coded once, coded twice of the overlap planned, the
#' disagreements open and decided, and the texts on screen now; for each
#' coder named or come, the texts coded, marked "cannot code" and on screen
#' now, what is left of their `quota`, and the median seconds a text;
#' Krippendorff's alpha among the coders with its 95% interval, as
#' [agreement()] gives it, on the texts coded twice before adjudication (for
#' a schema, on each field that is a category; "cannot code" is no category
#' of it, and the screen says how many texts coded twice it leaves out for
#' that); the open disagreements, each of which an adjudicator opens in
#' adjudication; and a CSV of every code ever written, the replaced ones too, with who
#' wrote it, in which role, when and after how
#' many seconds (`.current` marks the codes that count). Free text in it (a
#' name, a reason, a note, a typed-in field) that a spreadsheet would read as
#' a formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage return)
#' starts with a single quote, as OWASP advises against CSV injection.
#'
#' @section Every code checked:
#' What the page sends is checked in R before it is written, whatever sent
#' it: a label of the codebook; for a schema, each field of its kind (an
#' enum's value, yes or no, a whole number, a finite number, a text), the
#' enum and yes/no fields filled (numbers and texts may be left empty), and
#' within the field's bounds where the schema gives them (`minimum`,
#' `maximum`, `exclusiveMinimum`, `exclusiveMaximum` of a number; `minLength`,
#' `maxLength` and `pattern` of a text), as the engine's grammar holds the
#' model's answers in [annotate_texts()]; a reason for a text that cannot be
#' coded; notes, reasons and texts of at most 2,000 characters ("other" in
#' the coder's words, 1,993, the page's box as the server). A refused code is not written, and the page says
#' why (the condition, for code that writes codes itself, is of class
#' `newrllama4_error_code_refused`, its field `problems` the reasons). Two
#' coders disagree when their labels differ, or any field but a free text
#' (`"string"`): wordings of a gist differ without sending the text to
#' adjudication.
#'
#' @section Nothing lost:
#' Codes are written in WAL mode, each with its coder, time and the seconds
#' spent on the text, and never overwritten (a new code is a new row). The app
#' can be stopped or killed at any point: started again on the same file, each
#' coder resumes where they stopped. Several coders at once, in one app or in
#' several R processes on one file, do not clash. A `file` made for another
#' sample or coding task is refused with an error of class
#' `newrllama4_error_coding_file` (field `mismatch`: `"sample"` or `"task"`).
#'
#' The file is plain SQLite, which any SQLite client reads: the sample's
#' columns in the table `sample` (dates and times as ISO 8601 text), each
#' text in `texts` (`unit` is the row's number in the sample), every code in
#' `codes`. A file from an earlier version of the package, which kept the
#' sample as serialized R, is never unserialized: [read_codes()] refuses it
#' (`mismatch = "layout"`), and `coding_app()` given the sample it was made for
#' (checked against the keys the file recorded) rewrites it in this layout,
#' every code kept.
#'
#' Needs the shiny, DBI and RSQLite packages; not the engine.
#'
#' @param sample The rows to code: the value of [review_sample()], or any data
#'   frame with the texts.
#' @param file Path of the SQLite file that keeps the codes (created if new).
#' @param labels The labels to choose from: a character vector, a named one
#'   whose names are the labels and whose values describe them, or a data
#'   frame with a column `label` and, where given, `description` and `examples`
#'   (a text per label, or a list column of several), which the codebook shows.
#' @param schema Instead of labels, the fields to code, as for
#'   [annotate_texts()]; a field given as a list may carry a `description`.
#' @param instruction The coding task in words, shown atop the codebook.
#' @param text The texts: a column of `sample`, unquoted (`text = body`) or
#'   by its name (`text = "body"`), an expression over its columns or a glue
#'   template (`"{title}: {body}"`), as in [annotate_texts()]; `NULL` for the
#'   column `text`.
#' @param overlap The share of texts that a second coder also codes, from 0 to 1.
#' @param seed `NULL`, or a whole number that fixes which texts are coded
#'   twice and each coder's order (a new file draws one and records it). Both
#'   `overlap` and `seed` are fixed when the file is made: reopening it keeps
#'   its own.
#' @param blind `FALSE` to show the model's label and confidence beside each
#'   text (not advised: it anchors the coders).
#' @param uncodable The reasons a coder can choose for "cannot code"; "other",
#'   with the reason in words, is always offered. [read_codes()] gives the
#'   reason in `.reason` (`"other: ..."` for one in words).
#' @param coders,adjudicators `NULL` for one person coding on this machine,
#'   or the names of the people who code, and of those who adjudicate their
#'   disagreements: each gets a secret link (see [coding_links()]). A person
#'   holds one role. Names are compared without case, accents or spaces, and
#'   shown as first given.
#' @param lead `NULL`, or the name of the person who leads the coding.
#' @param login `"key"` (the default): people come in by their links alone.
#'   `"host"`: a host in front of the app that sets the login itself (Posit
#'   Connect) says who they are too; see "A team".
#' @param blind_adjudication `FALSE` to show adjudicators the coders' names
#'   beside their codes, and let them download the history.
#' @param ... Passed to `coding_app()`.
#' @param port,host Where `code_sample()` serves the app. A `host` other than
#'   this machine (such as `"0.0.0.0"`, every address) needs the people
#'   named.
#' @param url The app's address as the people open it, for their links (in
#'   `code_sample()`'s printout and on the lead's links screen), such as
#'   `"https://coding.example.org/"` for a proxy in front of it. `NULL`:
#'   `code_sample()` gives the machine's address on its network (its LAN IP,
#'   which other machines reach) when `host` is every address (`"0.0.0.0"`),
#'   and `host` itself otherwise; the links screen of an app served
#'   otherwise gives the address the lead's page has.
#' @param background `TRUE` (the default): `code_sample()` serves the app
#'   from another R process and returns at once, with a handle to stop it
#'   (`close()`); `FALSE` serves it in this R session until it is stopped.
#' @param quota `NULL` for none, or the most texts a coder codes: one whole
#'   number for each coder, or one per coder by name (`c(Ana = 40, Ben =
#'   20)`); numbers below 1 are each coder's share of the codes the file
#'   plans (every text once, and the overlap's a second time), rounded up.
#'   A coder who reached their quota is given no text (checked in R, when
#'   the next text is chosen). Kept in the file: a later call with another
#'   `quota` replaces it.
#' @param launch.browser Whether `code_sample()` opens the browser.
#' @details `labels`, `schema` and `instruction` left `NULL` come from the
#'   manifest of the annotation (the attribute `"manifest"` of `sample`, see
#'   [manifest()]); without one, the labels are the levels of `sample`'s
#'   `.label`.
#' @return `coding_app()`: a Shiny app object (print it, or give it to
#'   [shiny::runApp()]). `code_sample()`: with `background = TRUE`, a handle
#'   of class `newrllama4_coding_server` (its `url`, `file`, `links`, the
#'   serving `process` and its `log` file), which prints the address and how to stop it, and
#'   which `close()` stops; with `background = FALSE`, `file`, invisibly, once
#'   the app stops.
#' @seealso [read_codes()], [review_sample()].
#' @export
#' @examples
#' sample <- data.frame(text = c("Great film.", "Dull.", "Fine, I suppose."))
#' file <- tempfile(fileext = ".sqlite")
#' if (requireNamespace("shiny", quietly = TRUE) &&
#'     requireNamespace("RSQLite", quietly = TRUE)) {
#'   app <- coding_app(sample, file,
#'                     labels = c(yes = "The reviewer likes the film", no = "Not"),
#'                     instruction = "Does the reviewer like the film?", overlap = 0.5)
#' }
#' if (interactive()) {
#'   server <- code_sample(sample, file, labels = c("yes", "no"))
#'   server  # where it is served, and how to stop it
#'   close(server)
#' }
coding_app <- function(sample, file, labels = NULL, schema = NULL, instruction = NULL, text = NULL, overlap = 0,
                       seed = NULL, blind = TRUE,
                       uncodable = c("not in English", "not about the topic", "cut off or unreadable"),
                       coders = NULL, adjudicators = NULL, lead = NULL, login = c("key", "host"),
                       blind_adjudication = TRUE, quota = NULL, url = NULL) {
  call <- current_env()
  rlang::check_installed(c("shiny", "DBI", "RSQLite"), reason = "to code a sample by hand.")
  if (!is.data.frame(sample) || nrow(sample) == 0) {
    abort_invalid("{.arg sample} must be a data frame of rows to code, such as the value of {.fn review_sample}.",
                  "sample", call)
  }
  check_string(file, "file")
  overlap <- check_number(overlap, "overlap", min = 0, max = 1)
  seed <- if (is.null(seed)) sample.int(.Machine$integer.max, 1) else check_whole(seed, "seed", min = 0,
                                                                                   max = .Machine$integer.max)
  check_flag(blind, "blind")
  if (!is.character(uncodable) || anyNA(uncodable) || !all(nzchar(trimws(uncodable))) || anyDuplicated(uncodable) ||
      "other" %in% uncodable) {
    abort_invalid("{.arg uncodable} must be distinct reasons in words (\"other\" is always offered).", "uncodable", call)
  }
  login <- check_choice(login, c("key", "host"), "login")
  check_flag(blind_adjudication, "blind_adjudication")
  quota <- check_quota(quota, call)
  if (!is.null(url)) check_string(url, "url")
  people <- coding_people(coders, adjudicators, lead, call)
  text <- rlang::enquo(text)
  if (rlang::quo_is_null(text)) {
    if (!"text" %in% names(sample)) {
      abort_newrllama4("missing_column", "{.arg sample} has no column {.field text}: name its texts with {.arg text}.",
                       argument = "text", call = call)
    }
    text <- rlang::quo(text)
  }
  texts <- row_texts(sample, text, "text", call, of = "sample")
  task <- coding_task(sample, labels, schema, instruction, call)
  sample$.row <- sample[[".row"]] %||% seq_len(nrow(sample))
  store_open(file, sample, texts, task, overlap, seed, call)
  if (!is.null(people)) store_people(file, people)
  check_one_role(access_people(file), call)  # a file named before one role a person
  store_quota(file, quota)
  stored <- store_meta(file)
  guard_pages(shiny::shinyApp(coding_page(), coding_server(normalizePath(file), stored, blind, uncodable, login,
                                                           blind_adjudication, url)))
}

#' @rdname coding_app
#' @export
code_sample <- function(sample, file, ..., port = NULL, host = "127.0.0.1", url = NULL, background = TRUE,
                        launch.browser = interactive()) {
  check_string(host, "host")
  if (!is.null(url)) check_string(url, "url")
  check_flag(background, "background")
  if (identical(list(...)$login, "host")) {
    abort_newrllama4("coding_access", c(
      "{.fn code_sample} serves the app itself, with no host in front that sets the login: with
       {.code login = \"host\"}, anyone could come in as anyone by sending the header Shiny reads it from.",
      "i" = "Send each person their link ({.fn coding_links}), or deploy {.fn coding_app} with {.code login = \"host\"}
             on Posit Connect."
    ), call = current_env())
  }
  if (background) rlang::check_installed("callr", reason = "to serve the coding app while R stays free.")
  port <- port %||% httpuv::randomPort()
  url <- url %||% served_url(host, port)
  app <- coding_app(sample, file, ..., url = url)
  check_host(host, file, current_env())
  links <- if (nrow(access_people(file)) > 0) coding_links(file, url)
  if (!is.null(links)) {
    cli::cli_inform(c("Each person's link (send each their own):",
                      stats::setNames(gsub("([{}])", "\\1\\1", sprintf("%s (%s): %s", links$name, links$role,
                                                                       links$url)),  # names as they are, not cli markup
                                      rep("*", nrow(links)))))
  }
  if (!background) {
    shiny::runApp(app, port = port, host = host, launch.browser = launch.browser)
    return(invisible(file))
  }
  server <- serve_in_background(app, file, port, host, url, links)
  # the lead's own link, or this machine's page where nobody is named; a team without a lead has its links printed
  opened <- if (is.null(links)) server$local else links$url[links$role == "lead"]
  if (isTRUE(launch.browser) && length(opened) == 1) utils::browseURL(opened)
  server
}

# The coding task: the instruction, the labels with their descriptions, or the
# schema's fields with their kind, allowed values and description.
coding_task <- function(sample, labels, schema, instruction, call) {
  prompt <- attr(sample, "manifest", exact = TRUE)$prompt
  if (is.null(labels) && is.null(schema)) {
    labels <- prompt$labels
    schema <- if (is.null(labels)) prompt$schema
    if (is.null(labels) && is.null(schema) && is.factor(sample[[".label"]])) labels <- levels(sample$.label)
  }
  if (is.null(labels) == is.null(schema)) {
    abort_invalid("Give {.arg labels} or {.arg schema} (one of them), or a {.arg sample} from an annotation that
                   records them.", if (is.null(labels)) "labels" else "schema", call)
  }
  instruction <- instruction %||% prompt$instruction %||% ""
  check_string(instruction, "instruction", call)
  list(instruction = instruction, labels = coding_labels(labels, call), fields = coding_fields(schema, call))
}

coding_labels <- function(labels, call) {
  if (is.null(labels)) return(NULL)
  if (is.data.frame(labels)) return(coding_labels_frame(labels, call))
  if (!is.character(labels) || length(labels) < 2 || anyNA(labels)) {
    abort_invalid("{.arg labels} must be a character vector of two labels or more, or a data frame of them.",
                  "labels", call)
  }
  named <- if (is.null(names(labels))) rep(FALSE, length(labels)) else nzchar(names(labels))
  label <- ifelse(named, names(labels), labels)
  if (anyDuplicated(label)) abort_invalid("{.arg labels} must be distinct.", "labels", call)
  list(label = unname(label), description = unname(ifelse(named, labels, "")))
}

# A codebook as a table: a column `label`, and `description` and `examples`
# (a text per label, or a list of them) where given.
coding_labels_frame <- function(labels, call) {
  label <- labels$label
  if (!is.character(label) || length(label) < 2 || anyNA(label) || anyDuplicated(label)) {
    abort_invalid("{.arg labels} as a data frame must have a column {.field label} of two distinct labels or more.",
                  "labels", call)
  }
  text_column <- function(column) {
    values <- labels[[column]] %||% rep(list(character()), length(label))
    values <- lapply(values, function(value) {
      value <- as.character(unlist(value))
      value[!is.na(value) & nzchar(trimws(value))]
    })
    if (!all(vapply(values, is.character, NA))) {
      abort_invalid("{.arg labels}' column {.field {column}} must hold texts.", "labels", call)
    }
    values
  }
  description <- vapply(text_column("description"), function(value) paste(value, collapse = " "), "")
  list(label = label, description = description, examples = text_column("examples"))
}

# Fields as annotate_texts() takes them, or its manifest's JSON schema.
coding_fields <- function(schema, call) {
  if (is.null(schema)) return(list())
  if (rlang::is_string(schema)) schema <- jsonlite::fromJSON(schema, simplifyVector = FALSE)$properties
  if (!is.list(schema) || !rlang::is_named(schema) || length(schema) == 0) {
    abort_invalid("{.arg schema} must be a named list of fields.", "schema", call)
  }
  unname(Map(function(field, name) {
    spec <- field_schema(field, name, call)
    kind <- if (!is.null(spec$enum)) "enum" else spec$type
    list(name = name, kind = kind, values = if (kind == "enum") vapply(spec$enum, as.character, "") else list(),
         description = spec$description %||% "", bounds = spec[intersect(bound_keywords, names(spec))])
  }, schema, names(schema)))
}
