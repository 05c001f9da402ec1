# code_sample()'s app served from another R process, and the address of its links.

test_that("links carry an address other machines reach: the LAN address for every address, not the host name", {
  expect_identical(lan_address("127.0.1.1 192.168.1.20 10.0.0.3 fd00::2 "), "192.168.1.20")
  expect_identical(lan_address(c("   IPv4 Address. . . : 169.254.3.4", "   IPv4 Address. . . : 10.1.2.3")), "10.1.2.3")
  expect_message(expect_identical(lan_address(character()), Sys.info()[["nodename"]]), "url")
  expect_identical(served_url("127.0.0.1", 4321L), "http://127.0.0.1:4321/")
  expect_identical(served_url("::1", 4321L), "http://[::1]:4321/")
  # on this machine, where the system lists one: its address, not the bare name code_sample() printed before
  if (!is.null(tryCatch(lan_address(), message = function(m) NULL))) {
    expect_match(served_url("0.0.0.0", 4321L), "^http://(\\d+\\.){3}\\d+:4321/$")
  }
})

test_that("code_sample() returns at once, the app served in the background until close()", {
  skip_on_cran()
  skip_if_not_installed("callr")
  skip_if_not_installed("openssl")
  # the serving process loads the package as installed
  skip_if(!nzchar(system.file(package = "newrllama4")), "newrllama4 is not installed")
  local_secret_dir()
  file <- withr::local_tempfile(fileext = ".sqlite")
  sample <- data.frame(text = c("Great film.", "Dull.", "Fine."))
  expect_message(server <- code_sample(sample, file, labels = c("yes", "no"), coders = c("Ana", "Ben"), lead = "Lea",
                                       url = "http://coding.example.org/", launch.browser = FALSE),
                 "Lea (lead): http://coding.example.org/?key=", fixed = TRUE)
  on.exit(close(server), add = TRUE)
  expect_s3_class(server, "newrllama4_coding_server")
  expect_true(server$process$is_alive())
  expect_identical(server$links$url, coding_links(file, "http://coding.example.org/")$url)
  printed <- paste(capture_messages(print(server)), collapse = "")
  expect_match(printed, "at\\s<http://coding.example.org/>, served by R process")
  expect_match(printed, "Stop it with `close()`", fixed = TRUE)
  # the link's page is served while this R session goes on
  page <- paste(readLines(paste0(server$local, "?key=", sub(".*key=", "", server$links$url[1])), warn = FALSE),
                collapse = "\n")
  expect_match(page, "coding.js", fixed = TRUE)
  close(server)
  deadline <- Sys.time() + 10
  while (server$process$is_alive() && Sys.time() < deadline) Sys.sleep(0.1)
  expect_false(server$process$is_alive())
  expect_match(paste(capture_messages(print(server)), collapse = ""), "stopped")
})

test_that("an app that cannot be served says why, from its process's log", {
  skip_on_cran()
  skip_if_not_installed("callr")
  skip_if(!nzchar(system.file(package = "newrllama4")), "newrllama4 is not installed")
  fixture <- coding_fixture(n = 2)
  port <- httpuv::randomPort()
  taken <- httpuv::startServer("127.0.0.1", port, list())
  on.exit(taken$stop(), add = TRUE)
  err <- expect_error(code_sample(fixture$sample, fixture$file, labels = c("yes", "no"), host = "127.0.0.1",
                                  port = port, launch.browser = FALSE),
                      class = "newrllama4_error_coding_access")
  expect_match(conditionMessage(err), sprintf("could not be served on port %d", port))
  expect_match(conditionMessage(err), "Failed to create server")
})
