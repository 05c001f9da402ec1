# The coding app's server: one session per coder (or adjudicator). Every
# screen is worked out afresh from the file, so that what another session (or
# another R process) wrote in between counts, and a reopened app resumes
# where each coder stopped.

coding_server <- function(file, stored, blind) {
  force(file)
  function(input, output, session) {
    state <- new.env(parent = emptyenv())
    state$skipped <- integer()
    state$back <- 0L
    screen <- shiny::reactiveVal(NULL)
    show <- function() screen(if (is.null(state$coder)) welcome_screen() else current_screen(file, stored, state, blind))

    shiny::observeEvent(TRUE, once = TRUE, {
      query <- shiny::parseQueryString(shiny::isolate(session$clientData$url_search))
      state$coder <- coder_name(file, query$coder)
      state$adjudicate <- isTRUE(query$adjudicate %in% c("1", "true", "TRUE"))
      show()
    })
    output$screen <- shiny::renderUI(screen())
    session$onSessionEnded(function() if (!is.null(state$coder)) store_release(file, state$coder))

    shiny::observeEvent(input$nl_event, {
      event <- input$nl_event
      if (identical(event$type, "start")) {
        state$coder <- coder_name(file, event$coder)
        if (is.null(state$coder)) return(screen(welcome_screen("Please give a name of up to 40 characters.")))
        state$adjudicate <- isTRUE(event$adjudicate)
        shiny::updateQueryString(paste0("?coder=", utils::URLencode(state$coder, reserved = TRUE),
                                        if (state$adjudicate) "&adjudicate=1"), mode = "replace")
      } else if (!is.null(state$coder)) {
        state$problem <- NULL
        handle_event(file, stored, state, event)
      }
      show()
    })
  }
}

# The coder a name stands for, as they first gave it; NULL for no name.
coder_name <- function(file, name) {
  if (!rlang::is_string(name)) return(NULL)
  name <- name_shown(name)
  if (!nzchar(name) || nchar(name) > 40) NULL else store_person(file, name)
}

# A coder's click: a code (or "cannot code") written at once, then the next
# text; back and skip move through the coder's texts.
handle_event <- function(file, stored, state, event) {
  if (identical(event$type, "pick")) {
    state$unit <- as.integer(event$pick)
    return(invisible())
  }
  if (!identical(as.integer(event$unit), state$unit)) return(invisible())  # a click on a text no longer shown
  role <- if (state$adjudicate) "adjudication" else "code"
  switch(event$type,
         code = ,
         uncodable = {
           refused <- tryCatch({
             store_write(file, state$unit, state$coder, value = code_value(event$value, stored$task),
                         uncodable = event$type == "uncodable", reason = event$reason, note = event$note,
                         seconds = as.numeric(difftime(Sys.time(), state$shown, units = "secs")), role = role)
             NULL
           }, newrllama4_error_code_refused = function(e) e$problems)
           if (!is.null(refused)) {
             state$problem <- paste("Not saved:", paste(refused, collapse = " "))
             return(invisible())
           }
           state$back <- max(0L, state$back - 1L)
           if (state$adjudicate) state$unit <- NULL
         },
         back = state$back <- state$back + 1L,
         skip = if (state$back > 0) state$back <- state$back - 1L else state$skipped <- c(state$skipped, state$unit))
  invisible()
}

# The code in the task's order of fields, and only the task's fields, for
# store_write() to check; NULL for an event that holds no code at all.
code_value <- function(value, task) {
  if (!is.list(value)) return(NULL)
  if (length(task$labels$label) > 0) return(list(code = value$code))
  stats::setNames(lapply(task$fields, function(field) value[[field$name]]), code_columns(task))
}

current_screen <- function(file, stored, state, blind) {
  codes <- store_codes(file)
  if (state$adjudicate) return(adjudication_screen(file, stored, state, codes))
  coder <- store_coder(file, state$coder, nrow(stored$sample), stored$seed)
  mine <- codes[codes$role == "code" & codes$coder == state$coder, ]
  # in the coder's order, which recoding a text does not change
  mine <- mine[order(match(mine$unit, coder$order)), ]
  history <- mine$unit
  state$back <- min(state$back, length(history))
  if (state$back > 0) {
    available <- available_units(coder$order, state$coder, codes, store_claims(file), stored$double)
    position <- length(history) - state$back + 1L
    state$unit <- history[[position]]
    store_claim(file, state$coder, state$unit)
    previous <- as.list(mine[position, ])
    previous$value <- if (is.na(previous$value)) list() else jsonlite::fromJSON(previous$value, simplifyVector = FALSE)
  } else {
    claimed <- store_claim_next(file, state$coder, coder$order, stored$double, function(available) {
      waiting <- setdiff(available, state$skipped)
      if (length(waiting) == 0) {
        state$skipped <- integer()
        waiting <- available
      }
      if (length(waiting) > 0) waiting[[1]]
    })
    available <- claimed$available
    state$unit <- claimed$unit
    if (is.null(state$unit)) {
      return(message_screen("Done, thank you", sprintf("You coded all %d texts that were yours to code, %s.",
                                                       length(history), state$coder)))
    }
    position <- length(history) + 1L
    previous <- NULL
  }
  total <- length(history) + length(available)
  state$shown <- Sys.time()
  coding_screen(list(
    heading = paste("Coder:", state$coder), unit = state$unit, text = stored$texts[[state$unit]],
    share = 100 * length(history) / max(total, 1), count = sprintf("%d of %d", position, total),
    previous = previous, back = TRUE, hint = if (!blind) model_hint(stored$sample, state$unit), problem = state$problem
  ), stored$task)
}

adjudication_screen <- function(file, stored, state, codes) {
  open <- disagreements(codes, stored$task)
  if (!isTRUE(state$unit %in% open)) state$unit <- if (length(open) > 0) open[[1]]
  if (is.null(state$unit)) {
    return(message_screen("Nothing to adjudicate", "Every text that two coders coded has their agreement or a decision."))
  }
  state$shown <- Sys.time()
  theirs <- codes[codes$role == "code" & codes$unit == state$unit, ]
  picker <- shiny::tags$ul(class = "nl-list", lapply(open, function(unit) {
    shiny::tags$li(shiny::tags$button(class = paste("nl-pick", if (unit == state$unit) "nl-chosen"),
                                      `data-unit` = unit, sprintf("text %d", stored$sample$.row[[unit]])))
  }))
  coding_screen(list(
    heading = paste("Adjudicating:", state$coder), unit = state$unit, text = stored$texts[[state$unit]],
    share = 0, count = sprintf("%d disagreement%s", length(open), if (length(open) == 1) "" else "s"),
    others = shiny::tagList(picker, others_codes(theirs)), back = FALSE, problem = state$problem
  ), stored$task)
}

# Shown only with `blind = FALSE`: the model's label and how sure it was.
model_hint <- function(sample, unit) {
  if (!".label" %in% names(sample) || is.na(sample$.label[[unit]])) return(NULL)
  confidence <- if (".confidence" %in% names(sample)) sprintf(" (%.0f%% sure)", 100 * sample$.confidence[[unit]]) else ""
  paste0("The model says: ", sample$.label[[unit]], confidence)
}
