test_that("a quota is held in R: no text past it, whatever the page sends, and the done page says so", {
  fixture <- coding_fixture(n = 6, overlap = 0, quota = 2)
  shiny::testServer(fixture$app, {
    start_as(session, "ana")
    expect_match(as.character(screen()), "1 of 2")
    click(session, "code", value = list(code = "yes"))
    click(session, "code", value = list(code = "no"))
    expect_match(as.character(screen()), "You coded your 2 texts, ana")
    # a click for a text not hers, sent as after a reconnect, is not written
    free <- setdiff(1:6, store_codes(fixture$file)$unit)[1]
    session$setInputs(nl_event = list(type = "code", unit = free, value = list(code = "yes"), note = "",
                                      resent = TRUE, nonce = "late"))
    expect_identical(nrow(store_codes(fixture$file)), 2L)
  })
  expect_equal(store_meta(fixture$file)$quota, 2)
  bad <- function(quota) {
    expect_error(coding_app(fixture$sample, fixture$file, labels = c("yes", "no"), quota = quota),
                 class = "newrllama4_error_invalid_argument")
  }
  bad(0)
  bad(2.5)
  bad(c(2, 3))
  bad(c(Ana = 0.7, Ben = 0.6))
  bad(c(Ana = 2, ana = 3))
  bad("2")
})

test_that("a text open in a coder's other tab counts against their quota", {
  fixture <- coding_fixture(n = 6, overlap = 0, quota = 2)
  order <- store_coder(fixture$file, "ana", 6, store_meta(fixture$file)$seed)$order
  store_claim(fixture$file, "ana", "ana's first tab", order[[1]])
  shiny::testServer(fixture$app, {
    start_as(session, "ana")
    expect_match(as.character(screen()), "1 of 2")
    click(session, "code", value = list(code = "yes"))
    # one coded here, one on screen there: the quota's two, so no third text here
    expect_match(as.character(screen()), "Open in another tab")
    expect_null(state$unit)
    # and a code sent for a free text anyway, as a raw message would, is not written
    free <- setdiff(order, c(order[[1]], store_codes(fixture$file)$unit))[1]
    session$setInputs(nl_event = list(type = "code", unit = free, value = list(code = "no"), note = "",
                                      resent = TRUE, nonce = "forged"))
  })
  expect_identical(nrow(store_codes(fixture$file)), 1L)
  # the first tab's text, sent again by its page once reconnected (its old session's claim still fresh),
  # is hers to code: it reaches the quota, and no tab gets another
  shiny::testServer(fixture$app, {
    start_as(session, "ana")
    session$setInputs(nl_event = list(type = "code", unit = order[[1]], value = list(code = "no"), note = "",
                                      resent = TRUE, nonce = "again"))
    expect_match(as.character(screen()), "You coded your 2 texts, ana")
  })
  expect_setequal(store_codes(fixture$file)$unit, order[1:2])
})

test_that("a share is of the codes the file plans, rounded up; a coder without a quota has none", {
  stored <- list(texts = as.character(1:10), double = 1:3, quota = c(Ana = 0.5, Ben = 4))
  expect_identical(coder_quota(stored, "ana"), 7)  # half of 13 codes: every text once, the overlap's twice
  expect_identical(coder_quota(stored, " BEN "), 4)
  expect_identical(coder_quota(stored, "Cal"), Inf)
  expect_identical(coder_quota(list(texts = "a", double = integer(), quota = NULL), "Ana"), Inf)
})
