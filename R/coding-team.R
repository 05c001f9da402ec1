# The lead's view of the coding: how far each coder got, how well the texts
# coded twice agree before adjudication, which disagreements are open, and
# every code with its history to download. Adjudicators and the lead see it;
# coders never do (role_views).

# How often (seconds) the team screen looks for new codes in the file.
team_refresh_seconds <- 5

# Blind adjudication: an adjudicator sees the open disagreements' codes
# without the coders' names, and no download of the history, which has them.
# An adjudicator's disagreements open in adjudication.
team_screen <- function(file, stored, state, blind_adjudication = TRUE) {
  blind <- state$person$role == "adjudicator" && blind_adjudication
  tag <- shiny::tags
  team <- team_progress(file, stored)
  quotas <- any(is.finite(team$coders$quota))
  tag$div(class = "nl-screen nl-team",
          top_bar(list(heading = paste("Team:", state$person$name), nav = view_buttons(state),
                       share = 100 * team$done / team$n,
                       count = sprintf("%d of %d texts done", team$done, team$n))),
          tag$ul(class = "nl-summary", lapply(team_summary(team), tag$li)),
          tag$h2("Coders"),
          if (nrow(team$coders) == 0) tag$p("No coder has come yet.") else html_table(team$coders, c(
            coder = "Coder", coded = "Coded", uncodable = "Cannot code", held = "On screen now",
            if (quotas) c(quota_left = "Left of quota"), seconds = "Median seconds a text"
          )),
          tag$h2("Agreement so far, before adjudication"),
          tag$ul(lapply(seq_len(nrow(team$agreement)), function(i) tag$li(alpha_words(team$agreement[i, ])))),
          tag$h2(sprintf("Open disagreements (%d)", length(team$open))),
          if (length(team$open) > 0) tag$ul(class = "nl-disagreements", lapply(team$open, function(unit) {
            theirs <- team$codes[team$codes$role == "code" & team$codes$unit == unit, ]
            text <- sprintf("Text %d", stored$sample$.row[[unit]])
            their_codes <- paste0(": ", codes_in_words(theirs, blind))
            if (!role_allows(state$person$role, "adjudicate", blind_adjudication)) return(tag$li(paste0(text, their_codes)))
            tag$li(tag$button(class = "nl-pick", `data-unit` = unit, text, .noWS = "after"), their_codes, .noWS = "inside")
          })),
          if (role_allows(state$person$role, "download", blind_adjudication)) {
            tag$ul(class = "nl-downloads",
                   tag$li(shiny::downloadLink("decided_csv", "Download the decided codes, one row per text (CSV)")),
                   tag$li(shiny::downloadLink("codes_csv", "Download every code with its history (CSV)")))
          })
}

# The team's progress in words: each figure against what the file plans.
team_summary <- function(team) {
  plural <- function(n, one, many = paste0(one, "s")) sprintf("%d %s", n, if (n == 1) one else many)
  c(sprintf("Coded once: %d of %d texts.", team$once, team$n),
    sprintf("Coded twice: %d of the %d planned to measure agreement.", team$twice, team$planned_twice),
    sprintf("Disagreements: %d open, %d decided.", length(team$open), length(team$decided)),
    sprintf("On screen now: %s; free to code now: %s.", plural(length(team$held), "text"), plural(team$free, "text")))
}

# The figures of the team screen, from the file as it is now. A text is done
# when it has all its coders (two for the overlap's) and no open
# disagreement.
team_progress <- function(file, stored) {
  codes <- store_codes(file)
  claims <- store_claims(file)
  orders <- store_coders(file)
  # the coders named who have not come yet
  named <- access_people(file)
  waiting <- setdiff(named$name[named$role == "coder"], names(orders))
  orders[waiting] <- rep(list(seq_along(stored$texts)), length(waiting))
  coded <- codes[codes$role == "code", ]
  per_coder <- function(f, type) vapply(names(orders), function(coder) f(coder, coded[coded$coder == coder, ]), type)
  quota <- vapply(names(orders), function(coder) coder_quota(stored, coder), 0, USE.NAMES = FALSE)
  coders <- data.frame(
    coder = names(orders),
    coded = per_coder(function(coder, mine) nrow(mine), 0L),
    uncodable = per_coder(function(coder, mine) sum(mine$uncodable == 1), 0L),
    held = per_coder(function(coder, mine) length(unique(claims$unit[claims$coder == coder & !claims$unit %in% mine$unit])), 0L),
    quota = quota,
    seconds = per_coder(function(coder, mine) round(stats::median(mine$seconds), 1), 0),
    row.names = NULL
  )
  coders$quota_left <- as.integer(ifelse(is.finite(quota), pmax(quota - coders$coded, 0), NA))
  n <- length(stored$texts)
  per_text <- tabulate(coded$unit, n)
  needed <- ifelse(seq_len(n) %in% stored$double, 2L, 1L)
  open <- disagreements(codes, stored$task)
  held <- unique(claims$unit[!paste(claims$unit, claims$coder) %in% paste(coded$unit, coded$coder)])
  list(coders = coders, codes = codes, open = open, decided = sort(unique(codes$unit[codes$role == "adjudication"])),
       n = n, once = sum(per_text >= 1), twice = sum(per_text[stored$double] >= 2), planned_twice = length(stored$double),
       done = sum(per_text >= needed & !seq_len(n) %in% open), held = sort(held),
       # texts short of coders and on nobody's screen: what a newcomer would be given
       free = length(available_units(seq_len(n), "", codes, claims, stored$double)),
       agreement = team_agreement(file, stored))
}

# What a change of the file that the team screen shows looks like: the
# latest code, and which texts are on whose screen (not when each claim was
# last renewed, which every open page does each minute).
team_fingerprint <- function(file) {
  rlang::hash(list(with_store(file, function(con) DBI::dbGetQuery(con, "SELECT max(id) AS id FROM codes")$id),
                   store_claims(file)[c("coder", "unit")]))
}

# Krippendorff's alpha among the coders, with its interval, as agreement()
# gives it, for each coded field that is a category. "Cannot code" is no
# category of it: a text coded twice where a coder chose it is left out of
# alpha (`left_out`), though it is a disagreement when the other coded it.
team_agreement <- function(file, stored) {
  by_coder <- read_codes(file, by = "coder")
  # the people with each other only: the model's agreement with them is not the lead's question here
  for (column in grep("^\\.label$|^\\.model_", names(by_coder), value = TRUE)) by_coder[[column]] <- NULL
  fields <- if (length(stored$task$labels$label) > 0) "code" else {
    vapply(Filter(function(field) field$kind %in% c("enum", "boolean"), stored$task$fields), `[[`, "", "name")
  }
  twice <- sum(table(by_coder$.row) >= 2)
  rows <- lapply(fields, function(field) {
    coded <- by_coder$.row[!is.na(by_coder[[field]])]
    measured <- if (any(table(coded) >= 2)) agreement(by_coder, field = field, n_boot = 500, seed = 1)
    humans <- measured$humans %||% data.frame(coders = length(unique(by_coder$.coder)), texts = 0L,
                                              krippendorff_alpha = NA_real_, lower = NA_real_, upper = NA_real_)
    data.frame(field = field, humans, left_out = twice - humans$texts, weighted = isTRUE(measured$weighted))
  })
  do.call(rbind, c(list(data.frame(field = character(), coders = integer(), texts = integer(),
                                   krippendorff_alpha = double(), lower = double(), upper = double(),
                                   left_out = integer(), weighted = logical())), rows))
}

alpha_words <- function(row) {
  field <- if (row$field == "code") "" else paste0(row$field, ": ")
  cannot <- if (row$left_out > 0) {
    sprintf(" \"Cannot code\" is not counted as a code: %d text%s coded twice where a coder chose it %s left out (a disagreement when the other coder coded it).",
            row$left_out, if (row$left_out == 1) "" else "s", if (row$left_out == 1) "is" else "are")
  } else ""
  if (row$texts == 0) return(paste0(field, if (nzchar(field)) "no" else "No", " text that two coders coded yet.", cannot))
  interval <- if (is.na(row$lower)) "" else sprintf(" (95%% interval %.2f to %.2f)", row$lower, row$upper)
  # a sample drawn toward the model's doubt holds more hard texts than the corpus: agreement() weighs them back
  weighted <- if (isTRUE(row$weighted)) " Each text counts 1 / its chance of being drawn: the corpus's alpha." else ""
  sprintf("%sKrippendorff's alpha %s%s, over %d text%s coded by two coders or more.%s%s", field,
          format_figure(row$krippendorff_alpha, 2), interval, row$texts, if (row$texts == 1) "" else "s", weighted,
          cannot)
}

# The lead's links screen: each person's link, to copy and send, and to
# renew (the old one stops at once, in an open tab at its next click); the
# lead's own is not renewed here, which would end this very session.
links_screen <- function(file, state, url) {
  tag <- shiny::tags
  links <- tryCatch(coding_links(file, url), newrllama4_error_coding_access = function(e) e)
  top <- top_bar(list(heading = paste("Links:", state$person$name), nav = view_buttons(state),
                      saved = take_saved(state)))
  if (inherits(links, "condition")) {
    return(tag$div(class = "nl-screen nl-team", top, tag$p(class = "nl-problem", cli::ansi_strip(conditionMessage(links)))))
  }
  tag$div(class = "nl-screen nl-team nl-links", top,
          tag$p("Send each person their own link: it lets them in, in their role, with no password. A link that",
                "reached the wrong person is renewed: the old one stops working at once."),
          tag$table(class = "nl-table",
                    tag$thead(tag$tr(tag$th("Name"), tag$th("Role"), tag$th("Link"), tag$th(""), tag$th(""))),
                    tag$tbody(lapply(seq_len(nrow(links)), function(i) {
                      id <- paste0("nl-link-", i)
                      own <- name_key(links$name[[i]]) == name_key(state$person$name)
                      tag$tr(tag$td(links$name[[i]]), tag$td(links$role[[i]]),
                             tag$td(tag$input(id = id, class = "nl-link", type = "text", readonly = NA,
                                              value = links$url[[i]])),
                             tag$td(tag$button(class = "nl-copy", `data-for` = id, "Copy")),
                             tag$td(if (!own) tag$button(class = "nl-renew", `data-name` = links$name[[i]], "Renew")))
                    }))))
}

# The lead renews a person's link from the links screen (the gate let only
# the lead's session here).
renew_link <- function(file, state, name) {
  people <- access_people(file)
  if (!rlang::is_string(name) || !name_key(name) %in% setdiff(name_key(people$name), name_key(state$person$name))) {
    return(invisible())
  }
  coding_links(file, state$url, renew = name)
  state$saved <- sprintf("New link for %s: the old one no longer works", name)
  invisible()
}

# The address of the page a session was opened at, without its query.
page_address <- function(client) {
  port <- client$url_port
  paste0(client$url_protocol %||% "http:", "//", client$url_hostname %||% "127.0.0.1",
         if (!is.null(port) && nzchar(port)) paste0(":", port), client$url_pathname %||% "/")
}

html_table <- function(frame, headers) {
  tag <- shiny::tags
  tag$table(class = "nl-table",
            tag$thead(tag$tr(lapply(unname(headers), tag$th))),
            tag$tbody(lapply(seq_len(nrow(frame)), function(i) {
              tag$tr(lapply(names(headers), function(column) {
                value <- frame[[column]][[i]]
                tag$td(if (is.na(value)) "-" else if (is.double(value)) sprintf("%.1f", value) else format(value))
              }))
            })))
}

# Every code written, the replaced ones too (`.current` FALSE), with who
# wrote it, in which role, when and after how many seconds.
code_history <- function(file, stored) {
  history <- store_history(file)
  out <- data.frame(.row = stored$sample$.row[history$unit], .coder = history$coder, .role = history$role)
  out[code_columns(stored$task)] <- decode_codes(history$value, stored$task)
  out$.uncodable <- history$uncodable == 1
  out[c(".reason", ".note", ".seconds", ".time")] <- history[c("reason", "note", "seconds", "time")]
  out$.current <- history$id %in% store_codes(file)$id
  out
}

# The team screen's downloads: the history, and the decided codes (one row
# per text: read-codes.R's decided_codes(), the coders' codes without their
# names for a `blind` adjudicator), as CSV.
write_code_history <- function(file, stored, path) {
  history <- code_history(file, stored)
  typed_in <- Filter(function(field) identical(field$kind, "string"), stored$task$fields)
  write_safe_csv(history, c(".coder", ".reason", ".note", vapply(typed_in, function(field) field$name, "")), path)
}

write_decided_codes <- function(file, stored, path, blind = FALSE) {
  decided <- decided_codes(file, stored, blind = blind)
  write_safe_csv(decided, names(decided)[vapply(decided, is.character, NA)], path)
}

# `frame` as CSV, where free text (who, the reason, the note, a typed-in
# field, a text) that a spreadsheet would read as a formula starts with a
# single quote, as OWASP's advice on CSV injection has it, so that opening the
# file runs nothing a coder typed.
write_safe_csv <- function(frame, free_text, path) {
  frame[free_text] <- lapply(frame[free_text], function(text) {
    ifelse(grepl("^[=+@\t\r-]", text), paste0("'", text), text)
  })
  utils::write.csv(frame, path, row.names = FALSE, na = "")
}
