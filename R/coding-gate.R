# The coding app's one gate: who a message comes from, and whether it may do
# what it asks (key -> person -> role -> allowed), decided afresh from the file
# for the first page and for every event, view, pick and download, never by
# what the page that opened first was told. So a key renewed or removed while
# its tab is open stops at that tab's next click, a session opened from
# another machine or another site's page stays refused whatever it sends
# after, and a role's screens are the only ones its person gets.

# What each role may do: the screens of role_views, and the download of every
# code (the lead's; an adjudicator's too when adjudication is not blind, since
# the history names who coded what).
role_allows <- function(role, action, blind_adjudication) {
  if (identical(action, "download")) return(role == "lead" || (role == "adjudicator" && !blind_adjudication))
  isTRUE(action %in% role_views[[role]])
}

# `credential`: what the session showed when it opened (the key of its
# address; the host's login, with `login = "host"` only; the role it asks for
# among the person's) and, without people named, the name given on this
# machine. `action`: NULL to open the app, or what the message asks (a screen
# of role_views, or "download"). Gives list(person, allowed), person NULL for
# no name yet on this machine, or list(refused = the page to show instead).
access_gate <- function(file, request, credential, action = NULL, blind_adjudication = TRUE, opened = FALSE) {
  if (!same_origin(request)) {
    return(list(refused = message_screen("This page was opened from another site",
                                         "Open the app by its own address, or by your link.")))
  }
  if (nrow(access_people(file)) > 0) {
    person <- access_person(file, credential$key, credential$user, credential$role)
    if (is.null(person) && opened) {
      return(list(refused = message_screen("This link no longer works",
                                           "It was renewed or removed. Ask the person who runs the study for your new link.")))
    }
    if (is.null(person)) {
      return(list(refused = message_screen("This link is not valid",
                                           "Ask the person who runs the study for your own link.")))
    }
  } else {
    if (!is_local_request(request)) {
      return(list(refused = message_screen("This app serves only the computer it runs on",
                                           "Ask the person who runs the study for a link of your own.")))
    }
    person <- credential$person
  }
  list(person = person, allowed = is.null(action) || (!is.null(person) &&
                                                        role_allows(person$role, action, blind_adjudication)))
}

# A browser names the site of the page that opens a websocket or sends a
# request in `Origin`: another site's page (which, open in the same browser,
# could otherwise drive the app and read its texts) is not the app's own. A
# request without `Origin` is no browser's cross-site one (such a client needs
# a key all the same). The app's own is the address it was asked at: `Host`,
# or `X-Forwarded-Host` as a proxy in front of it passes it on.
same_origin <- function(request) {
  origin <- request$HTTP_ORIGIN
  if (is.null(origin)) return(TRUE)
  own <- c(request$HTTP_HOST, trimws(strsplit(request$HTTP_X_FORWARDED_HOST %||% "", ",")[[1]]))
  host_port <- function(x) sub(":(80|443)$", "", tolower(x))
  isTRUE(host_port(sub("^[a-z][a-z0-9+.-]*://", "", tolower(origin))) %in% host_port(own[nzchar(own)]))
}

# The app with its pages guarded: a request another site's page sends gets
# nothing, and every page tells the browser to send no `Referer`, which would
# carry the link's key into each later request and the logs of any proxy.
# (Shiny's own scripts and styles, served by httpuv, follow the policy of the
# page that asks for them.)
guard_pages <- function(app) {
  handler <- app$httpHandler
  app$httpHandler <- function(req) {
    if (!same_origin(req)) return(shiny::httpResponse(403L, "text/plain", "Refused: a request from another site."))
    response <- handler(req)
    if (!is.null(response)) response$headers[["Referrer-Policy"]] <- "no-referrer"
    response
  }
  app
}
