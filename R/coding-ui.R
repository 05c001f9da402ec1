# The coding app's pages, as HTML built on the server. Only what a coder
# needs goes into them: the text, the codebook, the coder's own progress and
# own earlier code. A model's answers and other coders' codes stay in R
# (unless `blind = FALSE`, or on the adjudication screen, whose point they are).
# The form is plain HTML, read by www/coding.js in one event per code, so that
# no input binding can lag behind the text it belongs to.

coding_page <- function() {
  assets <- system.file("coding-app", package = "newrllama4")
  shiny::fluidPage(
    title = "Coding",
    shiny::tags$head(
      shiny::tags$meta(name = "viewport", content = "width=device-width, initial-scale=1"),
      # as the page's header says (guard_pages()): the link's key in no Referer
      shiny::tags$meta(name = "referrer", content = "no-referrer"),
      shiny::includeCSS(file.path(assets, "coding.css")),
      shiny::includeScript(file.path(assets, "coding.js")),
      shiny::includeScript(file.path(assets, "lead.js"))
    ),
    shiny::uiOutput("screen")
  )
}

welcome_screen <- function(problem = NULL) {
  tag <- shiny::tags
  tag$div(class = "nl-welcome",
          tag$h1("Coding"),
          tag$p("Your name keeps your codes and your place apart from other coders'."),
          if (!is.null(problem)) tag$p(class = "nl-problem", problem),
          tag$input(id = "nl-coder", type = "text", placeholder = "Your name", autocomplete = "name"),
          tag$label(class = "nl-check", tag$input(id = "nl-adjudicate", type = "checkbox"),
                    " Adjudicate disagreements instead of coding"),
          tag$button(id = "nl-start", class = "nl-primary", "Start"))
}

# The coding screen of one text. `view`: the text, its unit, the position and
# total, the coder's earlier code of it (when gone back) and a note typed
# before leaving it, the mark of the code just saved and, not blind, the
# model's answer.
coding_screen <- function(view, task, uncodable) {
  tag <- shiny::tags
  main <- tag$div(class = "nl-main",
                  tag$div(class = "nl-work",
                          if (!is.null(view$others)) view$others,
                          tag$article(class = "nl-text", `data-unit` = view$unit, view$text),
                          if (!is.null(view$hint)) tag$p(class = "nl-hint", view$hint),
                          code_form(task, view$previous, view$back, view$draft, uncodable)),
                  codebook(task))
  tag$div(class = "nl-screen", top_bar(view), main)
}

top_bar <- function(view) {
  tag <- shiny::tags
  tag$div(class = "nl-top",
          tag$span(class = "nl-coder", view$heading),
          view$nav,
          if (!is.null(view$saved)) tag$span(class = "nl-saved", role = "status", "\u2713 ", view$saved),
          if (!is.null(view$share)) {
            tag$div(class = "nl-progress", tag$div(class = "nl-bar", style = sprintf("width: %.1f%%", view$share)))
          },
          tag$span(class = "nl-count", view$count))
}

# Buttons between the screens of the person's role, when it has several.
view_buttons <- function(state) {
  views <- role_views[[state$person$role]]
  if (length(views) < 2) return(NULL)
  names <- c(code = "Code", adjudicate = "Adjudicate", team = "Team", links = "Links")
  shiny::tags$span(class = "nl-views", lapply(views, function(view) {
    shiny::tags$button(class = paste("nl-view", if (view == state$view) "nl-chosen"), `data-view` = view,
                       names[[view]])
  }))
}

# Texts to pick on the adjudication screen; those with a decision marked.
unit_picker <- function(units, stored, state, decided) {
  if (length(units) == 0) return(NULL)
  shiny::tags$ul(class = "nl-list", lapply(units, function(unit) {
    shiny::tags$li(shiny::tags$button(
      class = paste("nl-pick", if (identical(unit, state$unit)) "nl-chosen", if (unit %in% decided) "nl-decided"),
      `data-unit` = unit, sprintf("text %d", stored$sample$.row[[unit]]), if (unit %in% decided) " \u2713"
    ))
  }))
}

code_form <- function(task, previous, back = TRUE, draft = NULL, uncodable = character()) {
  tag <- shiny::tags
  previous <- previous %||% list()
  answer <- if (length(task$labels$label) > 0) {
    labels <- task$labels$label
    chosen <- previous$value$code %||% ""
    tag$div(class = "nl-labels", lapply(seq_along(labels), function(i) {
      tag$button(class = paste("nl-label", if (identical(labels[[i]], chosen)) "nl-chosen"),
                 `data-value` = labels[[i]], if (i <= 9) tag$kbd(i), labels[[i]])
    }))
  } else {
    tag$div(class = "nl-fields",
            lapply(task$fields, field_input, previous = previous$value),
            tag$button(id = "nl-save", class = "nl-primary", "Save and next", tag$kbd("Enter")))
  }
  note <- draft %||% (previous$note %|% "")
  tag$div(class = "nl-form",
          answer,
          tag$input(id = "nl-note", type = "text", maxlength = code_text_limit, value = note,
                    placeholder = sprintf("Note (optional, up to %d characters)", code_text_limit)),
          uncodable_input(uncodable, previous$reason %|% ""),
          if (back) tag$div(class = "nl-nav", tag$button(id = "nl-back", "\u2190 Back"), tag$button(id = "nl-skip", "Skip \u2192")))
}

# "Cannot code": a reason from the set categories, or "other" in words.
uncodable_input <- function(categories, reason) {
  tag <- shiny::tags
  other <- if (startsWith(reason, other_prefix)) substring(reason, nchar(other_prefix) + 1) else ""
  chosen <- if (nzchar(other)) "other" else reason
  options <- lapply(c(categories, "other"), function(category) {
    tag$option(value = category, selected = if (identical(category, chosen)) NA, category)
  })
  tag$div(class = "nl-uncodable",
          tag$select(id = "nl-reason", tag$option(value = "", "Why it cannot be coded\u2026"), options),
          # as long as the server takes: the reason is stored as "other: " and the words
          tag$input(id = "nl-other", type = "text", maxlength = code_text_limit - nchar(other_prefix),
                    placeholder = "Other reason",
                    value = other),
          tag$button(id = "nl-cannot", "Cannot code"))
}

field_input <- function(field, previous) {
  tag <- shiny::tags
  value <- previous[[field$name]]
  choices <- function(values, shown) {
    tag$div(class = "nl-choices", Map(function(choice, label) {
      tag$label(class = "nl-choice",
                tag$input(type = "radio", name = paste0("nl-field-", field$name), value = choice,
                          checked = if (identical(field_codes(value), choice)) NA),
                label)
    }, values, shown))
  }
  input <- switch(field$kind,
                  enum = choices(unlist(field$values), unlist(field$values)),
                  boolean = choices(c("true", "false"), c("yes", "no")),
                  integer = ,
                  number = tag$input(type = "number", step = if (field$kind == "integer") "1" else "any",
                                     min = field$bounds$minimum, max = field$bounds$maximum, value = value %||% ""),
                  tag$input(type = "text", maxlength = field$bounds$maxLength, value = value %||% ""))
  tag$fieldset(class = "nl-field", `data-field` = field$name, `data-kind` = field$kind,
               tag$legend(field$name), input)
}

codebook <- function(task) {
  tag <- shiny::tags
  entries <- if (length(task$labels$label) > 0) {
    examples <- task$labels$examples %||% vector("list", length(task$labels$label))
    Map(function(label, description, examples) {
      examples <- unlist(examples)
      list(tag$dt(label), if (nzchar(description)) tag$dd(description),
           if (length(examples) > 0) tag$dd(class = "nl-examples", "For example:",
                                             tag$ul(lapply(examples, tag$li))))
    }, task$labels$label, task$labels$description, examples)
  } else {
    lapply(task$fields, function(field) {
      kind <- if (field$kind == "enum") paste(unlist(field$values), collapse = ", ") else field$kind
      list(tag$dt(field$name, tag$span(class = "nl-kind", kind)),
           if (nzchar(field$description)) tag$dd(field$description))
    })
  }
  tag$aside(class = "nl-codebook", tag$h2("Codebook"),
            if (nzchar(task$instruction)) tag$p(task$instruction),
            tag$dl(entries))
}

# A code as a coder reads it: the label or the fields, or why it cannot be coded.
code_summary <- function(code) {
  if (code$uncodable == 1) return(paste("Cannot code:", code$reason %|% "no reason given"))
  value <- jsonlite::fromJSON(code$value, simplifyVector = FALSE)
  paste(sprintf("%s: %s", names(value), vapply(value, function(x) format(x %||% "-"), "")), collapse = "; ")
}

# Who coded each of a text's codes: their names or, blind, "Coder 1",
# "Coder 2" in the order they coded it.
coders_shown <- function(codes, blind) if (blind) paste("Coder", seq_len(nrow(codes))) else codes$coder

# A text's codes in one line, "Ana (code: yes); Ben (code: no)".
codes_in_words <- function(codes, blind) {
  paste(sprintf("%s (%s)", coders_shown(codes, blind), vapply(seq_len(nrow(codes)), function(i) {
    code_summary(codes[i, ])
  }, "")), collapse = "; ")
}

# The coders' codes of a text, as coders_shown() names them.
others_codes <- function(codes, blind_adjudication = TRUE) {
  tag <- shiny::tags
  coders <- coders_shown(codes, blind_adjudication)
  tag$div(class = "nl-others", tag$h2("Their codes"),
          tag$ul(lapply(seq_len(nrow(codes)), function(i) {
            tag$li(tag$strong(paste0(coders[i], ":")), code_summary(codes[i, ]),
                   if (!is.na(codes$note[i])) tag$em(paste0(" (note: ", codes$note[i], ")")))
          })))
}

# A screen of a few words: the welcome's look, with the person's screens
# and the last code's mark when there are.
message_screen <- function(heading, body, nav = NULL, saved = NULL, more = NULL) {
  tag <- shiny::tags
  tag$div(class = "nl-welcome",
          if (!is.null(nav) || !is.null(saved)) top_bar(list(nav = nav, saved = saved)),
          tag$h1(heading), tag$p(body), more)
}
