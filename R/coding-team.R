# The lead's view of the coding: how far each coder got, how well the texts
# coded twice agree before adjudication, which disagreements are open, and
# every code with its history to download. Adjudicators and the lead see it;
# coders never do (role_views).

# Blind adjudication: an adjudicator sees the open disagreements' codes
# without the coders' names, and no download of the history, which has them.
team_screen <- function(file, stored, state, blind_adjudication = TRUE) {
  blind <- state$person$role == "adjudicator" && blind_adjudication
  tag <- shiny::tags
  team <- team_progress(file, stored)
  coded <- sum(team$texts$coders > 0)
  tag$div(class = "nl-screen nl-team",
          top_bar(list(heading = paste("Team:", state$person$name), nav = view_buttons(state),
                       share = 100 * coded / nrow(team$texts),
                       count = sprintf("%d of %d texts coded", coded, nrow(team$texts)))),
          tag$h2("Coders"),
          if (nrow(team$coders) == 0) tag$p("No coder has come yet.") else html_table(team$coders, c(
            coder = "Coder", coded = "Coded", uncodable = "Cannot code", left = "Left to code",
            held = "On screen now", seconds = "Median seconds a text"
          )),
          tag$p(sprintf("Texts coded twice: %d of the %d planned.", sum(team$texts$coders[stored$double] >= 2),
                        length(stored$double))),
          tag$h2("Agreement so far, before adjudication"),
          tag$ul(lapply(seq_len(nrow(team$agreement)), function(i) tag$li(alpha_words(team$agreement[i, ])))),
          tag$h2(sprintf("Open disagreements (%d)", length(team$open))),
          if (length(team$open) > 0) tag$ul(class = "nl-disagreements", lapply(team$open, function(unit) {
            theirs <- team$codes[team$codes$role == "code" & team$codes$unit == unit, ]
            coders <- if (blind) paste("Coder", seq_len(nrow(theirs))) else theirs$coder
            tag$li(sprintf("Text %d: ", stored$sample$.row[[unit]]),
                   paste(sprintf("%s (%s)", coders, vapply(seq_len(nrow(theirs)), function(i) {
                     code_summary(theirs[i, ])
                   }, "")), collapse = "; "))
          })),
          if (role_allows(state$person$role, "download", blind_adjudication)) {
            tag$p(shiny::downloadLink("codes_csv", "Download every code with its history (CSV)"), " ",
                  shiny::downloadLink("decided_csv", "Download decided codes (CSV)"))
          })
}

# The figures of the team screen, from the file as it is now.
team_progress <- function(file, stored) {
  codes <- store_codes(file)
  claims <- store_claims(file)
  orders <- store_coders(file)
  # the coders named who have not come yet: every text that is short of coders is theirs to code
  named <- access_people(file)
  waiting <- setdiff(named$name[named$role == "coder"], names(orders))
  orders[waiting] <- rep(list(seq_along(stored$texts)), length(waiting))
  coded <- codes[codes$role == "code", ]
  per_coder <- function(f, type) vapply(names(orders), function(coder) f(coder, coded[coded$coder == coder, ]), type)
  coders <- data.frame(
    coder = names(orders),
    coded = per_coder(function(coder, mine) nrow(mine), 0L),
    uncodable = per_coder(function(coder, mine) sum(mine$uncodable == 1), 0L),
    left = per_coder(function(coder, mine) length(available_units(orders[[coder]], coder, codes, claims, stored$double)), 0L),
    held = per_coder(function(coder, mine) length(unique(claims$unit[claims$coder == coder & !claims$unit %in% mine$unit])), 0L),
    seconds = per_coder(function(coder, mine) round(stats::median(mine$seconds), 1), 0),
    row.names = NULL
  )
  list(coders = coders, codes = codes, open = disagreements(codes, stored$task),
       texts = data.frame(coders = tabulate(coded$unit, length(stored$texts))),
       agreement = team_agreement(file, stored))
}

# Krippendorff's alpha among the coders, with its interval, as agreement()
# gives it, for each coded field that is a category.
team_agreement <- function(file, stored) {
  by_coder <- read_codes(file, by = "coder")
  # the people with each other only: the model's agreement with them is not the lead's question here
  for (column in grep("^\\.label$|^\\.model_", names(by_coder), value = TRUE)) by_coder[[column]] <- NULL
  fields <- if (length(stored$task$labels$label) > 0) "code" else {
    vapply(Filter(function(field) field$kind %in% c("enum", "boolean"), stored$task$fields), `[[`, "", "name")
  }
  rows <- lapply(fields, function(field) {
    coded <- by_coder$.row[!is.na(by_coder[[field]])]
    humans <- if (any(table(coded) >= 2)) {
      agreement(by_coder, field = field, n_boot = 500, seed = 1)$humans
    } else {
      data.frame(coders = length(unique(by_coder$.coder)), texts = 0L, krippendorff_alpha = NA_real_,
                 lower = NA_real_, upper = NA_real_)
    }
    data.frame(field = field, humans)
  })
  do.call(rbind, c(list(data.frame(field = character(), coders = integer(), texts = integer(),
                                   krippendorff_alpha = double(), lower = double(), upper = double())), rows))
}

alpha_words <- function(row) {
  field <- if (row$field == "code") "" else paste0(row$field, ": ")
  if (row$texts == 0) return(paste0(field, "no text coded twice yet."))
  interval <- if (is.na(row$lower)) "" else sprintf(" (95%% interval %.2f to %.2f)", row$lower, row$upper)
  sprintf("%sKrippendorff's alpha %s%s, over %d text%s coded by two coders or more.", field,
          format_figure(row$krippendorff_alpha, 2), interval, row$texts, if (row$texts == 1) "" else "s")
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
