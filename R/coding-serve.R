# code_sample()'s app served from another R process, so that the lead's R
# stays free (to read the codes, renew a link) while the team codes, and the
# address that the people's links carry: one that other machines reach.

# The app's address for the links: `host` itself on this machine, and the
# machine's LAN address for every address ("0.0.0.0", "::"), since a bare
# host name ("vm") is rarely one that the coders' laptops resolve.
served_url <- function(host, port) {
  address <- if (host %in% c("0.0.0.0", "::")) lan_address() else host
  if (grepl(":", address, fixed = TRUE)) address <- paste0("[", address, "]")
  sprintf("http://%s:%d/", address, port)
}

# This machine's IPv4 address on its network, from what the system lists
# (`listed`); the host name where none is found (the printout then says to
# give `url`).
lan_address <- function(listed = system_addresses()) {
  found <- as.character(unlist(regmatches(listed, gregexpr("\\b(\\d{1,3}\\.){3}\\d{1,3}\\b", listed))))
  found <- found[!startsWith(found, "127.") & !startsWith(found, "169.254.") & !grepl("^255\\.|\\.255$", found)]
  if (length(found) > 0) return(found[[1]])
  name <- Sys.info()[["nodename"]]
  cli::cli_inform(c("!" = "No network address of this machine was found: the links use its name, {.val {name}}.",
                    "i" = "Give the address the people reach it at with {.arg url}."))
  name
}

# The machine's addresses as its system lists them.
system_addresses <- function() {
  output <- function(command, args = character()) {
    if (!nzchar(Sys.which(command))) return(character())
    suppressWarnings(tryCatch(system2(command, args, stdout = TRUE, stderr = FALSE), error = function(e) character()))
  }
  switch(Sys.info()[["sysname"]],
         Linux = output("hostname", "-I"),
         Darwin = c(output("ipconfig", c("getifaddr", "en0")), output("ipconfig", c("getifaddr", "en1"))),
         Windows = grep("IPv4", output("ipconfig"), value = TRUE),
         character())
}

# The app served by another R process (callr), which ends with this session
# (callr's supervisor) or close(); returns once the app answers on its port.
# What the process says goes to a log file, not a pipe that nobody reads and
# that, full after a long day, would stop the app.
serve_in_background <- function(app, file, port, host, url, links, wait = 60) {
  log <- tempfile("coding-app-", fileext = ".log")
  process <- callr::r_bg(function(app, port, host) {
    shiny::runApp(app, port = port, host = host, launch.browser = FALSE)
  }, args = list(app = app, port = port, host = host), supervise = TRUE, package = FALSE,
  stdout = log, stderr = "2>&1")
  local <- sprintf("http://%s:%d/", if (host %in% c("0.0.0.0", "::", "::1")) "127.0.0.1" else host, port)
  deadline <- Sys.time() + wait
  while (!app_answers(local)) {
    if (!process$is_alive() || Sys.time() > deadline) {
      error <- if (process$is_alive()) "It did not answer in time." else paste(readLines(log, warn = FALSE), collapse = "\n")
      process$kill()
      abort_newrllama4("coding_access", c("The coding app could not be served on port {port}.", "x" = "{error}"),
                       call = caller_env())
    }
    Sys.sleep(0.2)
  }
  structure(list(url = url, local = local, file = file, links = links, process = process, log = log),
            class = "newrllama4_coding_server")
}

app_answers <- function(address) {
  connection <- url(address)
  on.exit(close(connection))
  !inherits(tryCatch(suppressWarnings(readLines(connection, n = 1, warn = FALSE)), error = identity), "error")
}

#' @export
print.newrllama4_coding_server <- function(x, ...) {
  state <- if (x$process$is_alive()) sprintf("served by R process %d", x$process$get_pid()) else "stopped"
  cli::cli_text("The coding app of {.path {x$file}} at {.url {x$url}}, {state}.")
  if (x$process$is_alive()) cli::cli_text("Stop it with {.code close()} on this value. Its log: {.path {x$log}}.")
  invisible(x)
}

#' @export
close.newrllama4_coding_server <- function(con, ...) {
  if (con$process$is_alive()) con$process$kill_tree()
  invisible(con)
}
