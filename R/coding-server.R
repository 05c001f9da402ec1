# The coding app's server: one session per person. Every screen is worked out
# afresh from the file, so that what another session (or another R process)
# wrote in between counts, and a reopened app resumes where each coder stopped.

# The screens each role may open: coders code and see nothing of anyone
# else's codes; adjudicators settle disagreements and follow the team's work;
# a lead follows the team's work and hands out the links.
role_views <- list(coder = "code", adjudicator = c("adjudicate", "team"), lead = c("team", "links"))

# Who the session is on this machine when the file names nobody: the
# address (`?coder=NAME`, `&adjudicate=1`), or the first screen. With people
# named, their link says it (access_gate()).
session_person <- function(file, name, adjudicate) {
  name <- coder_name(file, name)
  if (is.null(name)) return(NULL)
  list(name = name, role = if (isTRUE(adjudicate)) "adjudicator" else "coder")
}

coding_server <- function(file, stored, blind, uncodable, login = "key", blind_adjudication = TRUE, url = NULL) {
  force(file)
  function(input, output, session) {
    # A dropped connection (Wi-Fi, a laptop asleep) comes back as a new session,
    # which finds all it needs in the file; "force", as code_sample() serves
    # without Shiny Server, on which TRUE alone would depend.
    session$allowReconnect("force")
    state <- new.env(parent = emptyenv())
    state$skipped <- integer()
    state$back <- 0L
    state$drafts <- list()
    # the texts this session (this tab) claims, released when it ends; the
    # coder's other tabs keep theirs
    state$session <- session$token
    screen <- shiny::reactiveVal(NULL)
    show <- function() {
      screen(if (is.null(state$person)) welcome_screen() else switch(state$view,
        code = current_screen(file, stored, state, blind, uncodable),
        adjudicate = adjudication_screen(file, stored, state, uncodable, blind_adjudication),
        team = {
          state$team_seen <- team_fingerprint(file)
          team_screen(file, stored, state, blind_adjudication)
        },
        links = links_screen(file, state, state$url)
      ))
    }
    # A failed write or read keeps the page as it is, the code on it, and says
    # so: the coder tries again once the file is back.
    problem <- function(what) function(e) {
      reason <- if (inherits(e, "newrllama4_error_code_refused")) paste(e$problems, collapse = " ") else {
        cli::ansi_strip(conditionMessage(e))
      }
      reason <- sub("([^.!?])$", "\\1.", trimws(reason))
      state$problem <- sprintf(what, reason)
      message("coding app: ", state$problem)
      session$sendCustomMessage("nl_problem", list(message = state$problem))
    }
    enter <- function(person) {
      state$person <- person
      state$view <- role_views[[person$role]][[1]]
      tryCatch(show(), error = problem("The file could not be read (%s). Reload the page to try again."))
    }
    # Every message passes the gate: a refusal ends the session's person (and
    # the text it held) for good, and shows why.
    gate <- function(action = NULL) {
      verdict <- access_gate(file, suppressWarnings(session$request), state$credential, action, blind_adjudication,
                             opened = !is.null(state$person))
      if (is.null(verdict$refused)) return(verdict)
      if (!is.null(state$person)) store_release(file, state$session)
      state$person <- NULL
      state$refused <- TRUE
      screen(verdict$refused)
      NULL
    }

    shiny::observeEvent(TRUE, once = TRUE, {
      query <- shiny::parseQueryString(shiny::isolate(session$clientData$url_search))
      # shiny fills session$user from a header any client can send: it is who
      # the person is only where a host in front of the app sets it
      state$credential <- list(key = query$key, user = if (login == "host") session$user, role = query$role)
      # the links the lead hands out: the address given, or the one the lead's own page has
      state$url <- url %||% shiny::isolate(page_address(session$clientData))
      if (nrow(access_people(file)) == 0) {
        state$credential$person <- session_person(file, query$coder, query$adjudicate %in% c("1", "true", "TRUE"))
      }
      verdict <- gate()
      if (is.null(verdict)) return()
      if (is.null(verdict$person)) screen(welcome_screen()) else enter(verdict$person)
    })
    output$screen <- shiny::renderUI(screen())
    session$onSessionEnded(function() if (!is.null(state$person)) store_release(file, state$session))
    # the text on screen stays this tab's while the tab is connected; a refresh
    # that fails (the file busy or away) is tried again at the next
    shiny::observe({
      shiny::invalidateLater(claim_refresh_interval() * 1000)
      if (!is.null(state$person)) try(store_refresh_claims(file, state$session), silent = TRUE)
    })
    # the team screen follows the file by itself: drawn again, through the gate, when a code or a
    # text on screen changed there
    shiny::observe({
      shiny::invalidateLater(team_refresh_seconds * 1000)
      if (is.null(state$person) || !identical(state$view, "team")) return()
      seen <- tryCatch(team_fingerprint(file), error = function(e) NULL)
      if (is.null(seen) || identical(seen, state$team_seen) || !isTRUE(gate("team")$allowed)) return()
      tryCatch(show(), error = problem("The file could not be read (%s). The screen tries again by itself."))
    })
    output$codes_csv <- shiny::downloadHandler(
      filename = function() paste0(tools::file_path_sans_ext(basename(file)), "-codes.csv"),
      content = function(path) {
        if (!isTRUE(gate("download")$allowed)) stop("Only the team's lead may download the codes.")
        write_code_history(file, stored, path)
      }
    )
    output$decided_csv <- shiny::downloadHandler(
      filename = function() paste0(tools::file_path_sans_ext(basename(file)), "-decided.csv"),
      content = function(path) {
        verdict <- gate("download")
        if (!isTRUE(verdict$allowed)) stop("Only the team's lead may download the codes.")
        write_decided_codes(file, stored, path, blind = verdict$person$role == "adjudicator" && blind_adjudication)
      }
    )

    # ignoreInit: a reconnected page sends its last event again, as the new
    # session's first input; the file already holds what that event did
    shiny::observeEvent(input$nl_event, ignoreInit = TRUE, handlerExpr = {
      event <- input$nl_event
      if (isTRUE(state$refused)) return()
      if (identical(event$type, "start")) {
        # a name typed on this machine; a person named is who their link says, nobody else
        if (!is.null(state$person) || nrow(access_people(file)) > 0 || is.null(gate())) return()
        person <- session_person(file, event$coder, event$adjudicate)
        if (is.null(person)) return(screen(welcome_screen("Please give a name of up to 40 characters.")))
        state$credential$person <- person
        shiny::updateQueryString(paste0("?coder=", utils::URLencode(person$name, reserved = TRUE),
                                        if (person$role == "adjudicator") "&adjudicate=1"), mode = "replace")
        return(enter(person))
      }
      if (is.null(state$person)) return()
      # a file that cannot be read now decides nothing: the page stays, and says so
      verdict <- tryCatch(gate(event_action(event, state)),
                          error = problem("Not saved: %s Your code is still on screen: try again."))
      if (is.null(verdict) || !verdict$allowed) return()
      # a page put away in the browser's back-forward cache holds no text back; shown again ("resume"),
      # it is drawn afresh below, claiming its text again if nobody took it meanwhile
      if (identical(event$type, "release")) return(store_release(file, state$session))
      saved <- tryCatch({
        handle_event(file, stored, state, event, uncodable)
        TRUE
      }, error = problem("Not saved: %s Your code is still on screen: try again."))
      if (isTRUE(saved)) {
        tryCatch(show(), error = problem("The next text could not be opened (%s). Try again."))
      }
    })
  }
}

# What an event asks to do, for the gate: open a screen, pick a text to
# adjudicate, or act on the screen it was sent from (a code on the team
# screen, which has no form, is a stale click the gate lets the role ignore).
event_action <- function(event, state) {
  switch(event$type %||% "",
         view = if (rlang::is_string(event$view)) event$view else "",
         pick = "adjudicate",
         renew = "links",
         state$view)
}

# The coder a name stands for, as they first gave it; NULL for no name.
coder_name <- function(file, name) {
  if (!rlang::is_string(name)) return(NULL)
  name <- name_shown(name)
  if (!nzchar(name) || nchar(name) > 40) NULL else store_person(file, name)
}

# A click: a code (or "cannot code") written at once, then the next text; back
# and skip move through the coder's texts, keeping a note typed meanwhile;
# a view is one of the person's role.
handle_event <- function(file, stored, state, event, uncodable) {
  if (identical(event$type, "view")) {
    state$view <- event$view
    state$unit <- NULL
    return(invisible())
  }
  if (identical(event$type, "pick")) {
    # from the adjudication screen's list, or a disagreement on the team screen
    state$view <- "adjudicate"
    state$unit <- as.integer(event$pick)
    return(invisible())
  }
  if (identical(event$type, "renew")) return(renew_link(file, state, event$name))
  if (identical(event$type, "resume")) return(invisible())
  if (state$view %in% c("team", "links")) return(invisible())
  if (!identical(as.integer(event$unit), state$unit)) {
    # a click the page sends again once reconnected, for a text its person may still code; any other, stale
    if (!isTRUE(event$resent) || !resent_unit_ok(file, stored, state, event$unit)) return(invisible())
    state$unit <- as.integer(event$unit)
  }
  unit <- as.character(state$unit)
  switch(event$type,
         code = ,
         uncodable = {
           value <- if (event$type == "code") code_value(event$value, stored$task)
           reason <- if (event$type == "uncodable") uncodable_reason(event$reason, event$other, uncodable)
           store_write(file, state$unit, state$person$name, value = value,
                       uncodable = event$type == "uncodable", reason = reason, note = event$note,
                       seconds = time_on_screen(state),
                       role = if (state$view == "adjudicate") "adjudication" else "code", nonce = event_nonce(event))
           state$drafts[[unit]] <- NULL
           state$saved <- sprintf("Saved: text %s", stored$sample$.row[[state$unit]])
           state$back <- max(0L, state$back - 1L)
           if (state$view == "adjudicate") state$unit <- NULL
         },
         back = ,
         skip = {
           state$drafts[[unit]] <- if (nzchar(trimws(event$note %||% ""))) event$note
           if (event$type == "back") {
             state$back <- state$back + 1L
           } else if (state$back > 0) {
             state$back <- state$back - 1L
           } else {
             state$skipped <- c(state$skipped, state$unit)
           }
         })
  invisible()
}

# Seconds since the screen's text was shown; NA where this session showed none
# (a click sent again after a reconnect, onto a screen of a few words).
time_on_screen <- function(state) {
  if (is.null(state$shown)) NA_real_ else as.numeric(difftime(Sys.time(), state$shown, units = "secs"))
}

# The page's nonce of a click (a short string); NA for none.
event_nonce <- function(event) {
  nonce <- event$nonce
  if (rlang::is_string(nonce) && nzchar(nonce) && nchar(nonce) <= 64) nonce else NA_character_
}

# A text a click sent again after a reconnect may code, though the new
# session's screen shows another: one the coder coded before (changed after
# going back) or may code now, or, adjudicating, a disagreement not of their
# own texts.
resent_unit_ok <- function(file, stored, state, unit) {
  if (!rlang::is_scalar_integerish(unit, finite = TRUE)) return(FALSE)
  codes <- store_codes(file)
  me <- state$person$name
  own <- codes$unit[codes$role == "code" & codes$coder == me]
  if (state$view == "code") {
    if (unit %in% own) return(TRUE)
    order <- store_coder(file, me, length(stored$texts), stored$seed)$order
    claims <- store_claims(file)
    quota <- coder_quota(stored, me)
    return(quota_room(quota, me, state$session, codes, claims, unit) > 0 &&
             unit %in% available_units(order, me, codes, claims, stored$double, quota))
  }
  unit %in% setdiff(c(disagreements(codes, stored$task), codes$unit[codes$role == "adjudication"]), own)
}

# "Cannot code" needs a reason: one of the set categories, or "other" in the
# coder's words.
uncodable_reason <- function(kind, other, categories) {
  if (rlang::is_string(kind) && kind %in% categories) return(kind)
  other <- trimws(other %||% "")
  if (identical(kind, "other") && rlang::is_string(other) && nzchar(other)) return(paste0(other_prefix, other))
  abort_newrllama4("code_refused", "Choose why the text cannot be coded, or {.val other} and say why.",
                   problems = "Choose why the text cannot be coded, or \"other\" and say why.")
}

# The code in the task's order of fields, and only the task's fields, for
# store_write() to check; NULL for an event that holds no code at all.
code_value <- function(value, task) {
  if (!is.list(value)) return(NULL)
  if (length(task$labels$label) > 0) return(list(code = value$code))
  stats::setNames(lapply(task$fields, function(field) value[[field$name]]), code_columns(task))
}

current_screen <- function(file, stored, state, blind, uncodable) {
  me <- state$person$name
  codes <- store_codes(file, notes_of = me)
  coder <- store_coder(file, me, nrow(stored$sample), stored$seed)
  mine <- codes[codes$role == "code" & codes$coder == me, ]
  # in the coder's order, which recoding a text does not change
  mine <- mine[order(match(mine$unit, coder$order)), ]
  history <- mine$unit
  quota <- coder_quota(stored, me)
  # no text on screen until one is shown below: a click sent again onto a screen of a few words took no time here
  state$shown <- NULL
  state$back <- min(state$back, length(history))
  if (state$back > 0) {
    position <- length(history) - state$back + 1L
    state$unit <- history[[position]]
    store_claim(file, me, state$session, state$unit)
    previous <- stored_code(mine[position, ])
  } else {
    claimed <- store_claim_next(file, me, state$session, coder$order, stored$double, function(available) {
      waiting <- setdiff(available, state$skipped)
      if (length(waiting) == 0) {
        state$skipped <- integer()
        waiting <- available
      }
      if (length(waiting) > 0) waiting[[1]]
    }, quota)
    state$unit <- claimed$unit
    if (is.null(state$unit) && length(claimed$available) > 0) {
      return(message_screen("Open in another tab", paste(
        "The texts left for you to code are on screen in another tab or window of yours: code them there,",
        "or close it and reload this page."), saved = take_saved(state)))
    }
    if (is.null(state$unit)) {
      done <- coder_done(file, stored, coder$order, me, codes, length(history), quota)
      return(message_screen(done$heading, done$body, saved = take_saved(state)))
    }
    position <- length(history) + 1L
    previous <- NULL
  }
  # the coder's quota, else every text (the most one coder codes): a total that colleagues' work leaves as it is
  total <- max(min(quota, length(stored$texts)), length(history))
  state$shown <- Sys.time()
  coding_screen(list(
    heading = paste("Coder:", me), unit = state$unit, text = stored$texts[[state$unit]],
    share = 100 * length(history) / total, count = sprintf("%d of %d", position, total),
    previous = previous, draft = state$drafts[[as.character(state$unit)]], back = TRUE,
    hint = if (!blind) model_hint(stored$sample, state$unit), saved = take_saved(state)
  ), stored$task, uncodable)
}

# Why a coder is given no text, in words that hold: their quota is reached;
# no text is free now, but some that others have on screen may come back to
# them; or every text has all its coders.
coder_done <- function(file, stored, order, me, codes, n_coded, quota) {
  if (n_coded >= quota) {
    return(list(heading = "Done, thank you",
                body = sprintf("You coded your %d texts, %s: your share of the coding is done.", n_coded, me)))
  }
  held <- available_units(order, me, codes, store_claims(file)[0, ], stored$double, quota)
  if (length(held) > 0) {
    return(list(heading = "No text is free now", body = sprintf(paste(
      "You coded %d, %s. %d %s on screen with other coders and may come back if they leave %s:",
      "reload this page in a while."), n_coded, me, length(held), if (length(held) == 1) "text is" else "texts are",
      if (length(held) == 1) "it" else "them")))
  }
  list(heading = "Done, thank you", body = if (n_coded == 0) {
    sprintf("Every text has all its coders, %s: none was left for you.", me)
  } else {
    sprintf("You coded all %d texts that were yours to code, %s.", n_coded, me)
  })
}

# A stored code as the form takes it back.
stored_code <- function(code) {
  code <- as.list(code)
  code$value <- if (is.na(code$value)) list() else jsonlite::fromJSON(code$value, simplifyVector = FALSE)
  code
}

# The "saved" mark, shown once, on the screen after the code.
take_saved <- function(state) {
  saved <- state$saved
  state$saved <- NULL
  saved
}

# Disagreements to settle, then those settled (to change a decision), never
# on a text the adjudicator coded themselves; the coders by name only when
# adjudication is not blind.
adjudication_screen <- function(file, stored, state, uncodable, blind_adjudication = TRUE) {
  me <- state$person$name
  codes <- store_codes(file)
  own <- codes$unit[codes$role == "code" & codes$coder == me]
  open <- setdiff(disagreements(codes, stored$task), own)
  decisions <- codes[codes$role == "adjudication" & !codes$unit %in% own, ]
  decided <- sort(unique(decisions$unit))
  if (!isTRUE(state$unit %in% c(open, decided))) state$unit <- if (length(open) > 0) open[[1]]
  nav <- view_buttons(state)
  saved <- take_saved(state)
  if (is.null(state$unit)) {
    return(message_screen("Nothing to adjudicate", if (length(decided) > 0) {
      sprintf("Every disagreement has a decision (%d). Pick one to change it:", length(decided))
    } else {
      "Every text that two coders coded has their agreement or a decision."
    }, nav = nav, saved = saved, more = unit_picker(decided, stored, state, decided)))
  }
  state$shown <- Sys.time()
  theirs <- codes[codes$role == "code" & codes$unit == state$unit, ]
  current <- decisions[decisions$unit == state$unit, ]
  coding_screen(list(
    heading = paste("Adjudicating:", me), unit = state$unit, text = stored$texts[[state$unit]],
    share = 100 * length(decided) / max(length(open) + length(decided), 1),
    count = sprintf("%d disagreement%s open; %d of %d decided", length(open), if (length(open) == 1) "" else "s",
                    length(decided), length(open) + length(decided)),
    others = shiny::tagList(unit_picker(c(open, decided), stored, state, decided), others_codes(theirs, blind_adjudication)),
    previous = if (nrow(current) > 0) stored_code(current[nrow(current), ]), back = FALSE, nav = nav, saved = saved
  ), stored$task, uncodable)
}

# Shown only with `blind = FALSE`: the model's label and how sure it was.
model_hint <- function(sample, unit) {
  if (!".label" %in% names(sample) || is.na(sample$.label[[unit]])) return(NULL)
  confidence <- if (".confidence" %in% names(sample)) sprintf(" (%.0f%% sure)", 100 * sample$.confidence[[unit]]) else ""
  paste0("The model says: ", sample$.label[[unit]], confidence)
}
