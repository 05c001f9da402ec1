# How objects print. Every print method writes its object's format() to standard
# output, as print methods do, never through cli's message stream: a report
# knitted with `message = FALSE` shows it, and capture.output() catches it.
# format_inline() keeps cli's styling where the output supports it.

print_lines <- function(x, ...) {
  cat(format(x, ...), sep = "\n")
  invisible(x)
}

# A model or context: a header, then its details or "(freed)". `header` and
# `details` are cli inline markup, interpolated in the caller's frame; one from
# another R session has no engine object to read them from.
format_handle <- function(x, header, details, envir = parent.frame()) {
  state <- handle_state(x)
  if (state == "restored") {
    return(cli::format_inline("{.cls {class(x)[[1]]}} from another R session: create it again to use it"))
  }
  header <- cli::format_inline(header, .envir = envir)
  if (state == "freed") return(within_width(c(header, "(freed)")))
  within_width(c(header, bullet_lines(vapply(details, cli::format_inline, "", .envir = envir, USE.NAMES = FALSE))))
}

bullet_lines <- function(lines) paste(cli::symbol$bullet, lines)

# Lines no wider than the console (getOption("width")), so that nothing is cut
# off where output is shown at a fixed width (a knitted page, the site): a longer
# line is wrapped at its spaces, its continuation indented past its own indent
# and bullet or mark, or by `exdent` where given. Table rows are left to their
# own width settings.
within_width <- function(lines, width = getOption("width", 80), exdent = NULL) {
  unlist(lapply(lines, function(line) {
    if (cli::ansi_nchar(line, type = "width") <= width) return(line)
    plain <- cli::ansi_strip(line)
    indent <- nchar(sub("^( *).*$", "\\1", plain))
    mark <- nchar(sub("^ *(([^ [:alnum:]]{1,2}|x) )?.*$", "\\1", plain))
    cli::ansi_strwrap(line, width = width, indent = indent, exdent = exdent %||% (indent + if (mark <= 3) mark else 0))
  }), use.names = FALSE)
}

format_count <- function(n) format(n, big.mark = ",", scientific = FALSE, trim = TRUE)

format_bytes <- function(bytes) format(structure(bytes, class = "object_size"), units = "auto", standard = "SI")
