task <- list(instruction = "Tone and size.", labels = list(), fields = list(
  list(name = "tone", kind = "enum", values = list("calm", "angry"), description = "How it sounds"),
  list(name = "urgent", kind = "boolean", values = list(), description = ""),
  list(name = "n", kind = "integer", values = list(), description = ""),
  list(name = "gist", kind = "string", values = list(), description = "")
))

test_that("a schema's fields get their inputs, filled with the coder's earlier code", {
  html <- as.character(code_form(task, list(value = list(tone = "angry", urgent = FALSE, n = 2, gist = "x"))))
  expect_match(html, 'type="radio" name="nl-field-tone" value="angry" checked', fixed = TRUE)
  expect_match(html, 'type="radio" name="nl-field-urgent" value="false" checked', fixed = TRUE)
  expect_match(html, 'type="number" step="1" value="2"', fixed = TRUE)
  expect_match(html, 'type="text" value="x"', fixed = TRUE)
  expect_match(html, "nl-save", fixed = TRUE)
  expect_match(as.character(codebook(task)), "How it sounds", fixed = TRUE)
})

test_that("labels are buttons with keys 1 to 9, the earlier choice marked", {
  labels <- list(instruction = "", labels = list(label = list("yes", "no"), description = list("", "")), fields = list())
  html <- as.character(code_form(labels, list(value = list(code = "no"))))
  expect_match(html, 'data-value="yes">\\s*<kbd>1</kbd>')
  expect_match(html, 'class="nl-label nl-chosen" data-value="no"', fixed = TRUE)
})

test_that("a code reads back as a coder wrote it", {
  expect_identical(code_summary(list(uncodable = 0, value = '{"code":"yes"}')), "code: yes")
  expect_identical(code_summary(list(uncodable = 1, reason = NA)), "Cannot code: no reason given")
})

test_that("the codebook shows each label's description and examples; labels may be a data frame", {
  labels <- coding_labels(data.frame(label = c("yes", "no"), description = c("Says yes", NA),
                                     examples = I(list(c("Sure.", "Gladly."), character()))), current_env())
  html <- as.character(codebook(list(instruction = "", labels = labels, fields = list())))
  expect_match(html, "<dd>Says yes</dd>", fixed = TRUE)
  expect_match(html, "<li>Sure.</li>\\s*<li>Gladly.</li>")
  expect_identical(labels$description, c("Says yes", ""))
  expect_error(coding_labels(data.frame(label = c("a", "a")), current_env()), class = "newrllama4_error_invalid_argument")
})

test_that("cannot code offers the set reasons and other, filled with the earlier reason; notes show their cap", {
  html <- as.character(code_form(task, list(reason = "other: too short", uncodable = 1), uncodable = "not in English"))
  expect_match(html, '<option value="other" selected>other</option>', fixed = TRUE)
  # the words in the page as long as the server takes them, after "other: "
  expect_match(html, 'id="nl-other" type="text" maxlength="1993" placeholder="Other reason" value="too short"', fixed = TRUE)
  fixture <- coding_fixture(n = 1)
  expect_error(store_write(fixture$file, 1, "ana", NULL, uncodable = TRUE,
                           reason = uncodable_reason("other", strrep("x", 1994), character())),
               class = "newrllama4_error_code_refused")
  store_write(fixture$file, 1, "ana", NULL, uncodable = TRUE, reason = uncodable_reason("other", strrep("x", 1993), character()))
  expect_identical(nchar(store_codes(fixture$file)$reason), 2000L)
  expect_match(html, sprintf("up to %d characters", code_text_limit))
  html <- as.character(code_form(task, list(reason = "not in English"), uncodable = "not in English"))
  expect_match(html, '<option value="not in English" selected>', fixed = TRUE)
})
