test_that("folds hold whole units, spread evenly by rows, the same for the same seed", {
  # rows one by one, without a seed: in their order, as learn_labels() has always cut them
  expect_identical(unit_folds(11:22, 5), rep_len(1:5, 12))
  units <- rep(c("a", "b", "c", "d", "e", "f", "g"), c(9, 1, 4, 4, 2, 6, 4))
  fold <- unit_folds(units, 3, seed = 1)
  expect_true(all(tapply(fold, units, function(f) length(unique(f))) == 1))
  expect_identical(sort(as.vector(table(fold))), c(10L, 10L, 10L))
  expect_identical(unit_folds(units, 3, seed = 1), fold)
  expect_identical(unit_folds(units, 3), unit_folds(units, 3))
  # fewer units than folds: as many folds as units
  expect_identical(sort(unique(unit_folds(c("a", "a", "b"), 5))), 1:2)
  expect_error(coded_folds(rep("a", 10), 5), "1 sampling unit", class = "newrllama4_error_too_few_coded")
})

test_that("the estimators keep the learner's folds where they hold whole units, else cut their own", {
  units <- rep(1:6, each = 3)
  coded <- 1:12
  kept <- rep(c(1L, 2L, 3L, 1L), each = 3)
  fold <- cross_fit_folds(units, coded, 3, seed = 1, kept = kept)
  expect_identical(fold[coded], kept)
  expect_true(all(tapply(fold, units, function(f) length(unique(f))) == 1))
  # folds that split a unit, or more folds than asked, are not kept
  for (other in list(list(kept = rep_len(1:3, 12), folds = 3), list(kept = kept, folds = 2))) {
    fold <- cross_fit_folds(units, coded, other$folds, seed = 1, kept = other$kept)
    expect_identical(sort(unique(fold)), seq_len(other$folds))
    expect_true(all(tapply(fold, units, function(f) length(unique(f))) == 1))
  }
})

# 12 speakers of 10 texts, 6 of them drawn whole, and labels learned from their hidden states
speakers_drawn <- function() {
  rows <- speakers_learnable(1, speakers = 12, size = 10)
  coded <- review_sample(rows$data, 6, seed = 2, cluster = "speaker")
  list(rows = rows, coded = coded,
       learned = suppressMessages(learn_labels(rows$data, coded, gold, features = rows$x)))
}

test_that("learn_labels() cuts its folds by the clusters drawn whole", {
  drawn <- speakers_drawn()
  folds <- manifest(drawn$learned)$prompt$learner_folds
  expect_identical(names(folds), as.character(drawn$coded$.row))
  speaker <- drawn$coded$speaker
  expect_true(all(tapply(folds, speaker, function(f) length(unique(f))) == 1))
  expect_identical(length(unique(folds)), 5L)
  # the estimators keep them, and take folds = 3 as asked, still by speaker
  fit <- label_regression(a ~ 1, drawn$learned, drawn$coded, gold, seed = 1)
  expect_identical(unname(fit$folds[drawn$coded$.row]), unname(folds))
  three <- label_regression(a ~ 1, drawn$learned, drawn$coded, gold, folds = 3, seed = 1)
  expect_identical(sort(unique(three$folds[drawn$coded$.row])), 1:3)
  expect_true(all(tapply(three$folds[drawn$coded$.row], speaker, function(f) length(unique(f))) == 1))
  expect_identical(manifest(three)$estimation$folds, 3L)
  # two speakers cannot be cross-fitted with a choice inside each fold
  two <- review_sample(drawn$rows$data, 2, seed = 2, cluster = "speaker")
  expect_error(learn_labels(drawn$rows$data, two, gold, features = drawn$rows$x), "2 sampling units",
               class = "newrllama4_error_too_few_coded")
})

test_that("a coded row's prediction does not depend on the codes of its own speaker's other rows", {
  drawn <- speakers_drawn()
  fit <- label_regression(a ~ 1, drawn$learned, drawn$coded, gold, seed = 1)
  first <- drawn$coded$.row[1]
  mates <- drawn$coded$speaker == drawn$coded$speaker[1] & drawn$coded$.row != first
  flipped <- drawn$coded
  flipped$gold[mates] <- ifelse(flipped$gold[mates] == "a", "b", "a")
  again <- label_regression(a ~ 1, drawn$learned, flipped, gold, seed = 1)
  expect_identical(again$predictions[first], fit$predictions[first])
  # while another speaker's codes count
  others <- drawn$coded$speaker != drawn$coded$speaker[1]
  flipped <- drawn$coded
  flipped$gold[others] <- ifelse(flipped$gold[others] == "a", "b", "a")
  expect_false(identical(label_regression(a ~ 1, drawn$learned, flipped, gold, seed = 1)$predictions[first],
                         fit$predictions[first]))
})

test_that("learn_labels() and recalibrate_labels() refuse a sample drawn toward doubt", {
  rows <- learnable_rows(400)
  toward_doubt <- review_sample(rows$data, n = 80, weight = "confidence", seed = 1)
  expect_error(learn_labels(rows$data, toward_doubt, gold, features = rows$x), "weight = \"uniform\"",
               class = "newrllama4_error_weighted_sample")
  # the strata tell it where the attribute is lost, as in a file
  expect_error(recalibrate_labels(rows$data, through_csv(toward_doubt), gold), "drawn toward doubt",
               class = "newrllama4_error_coded_rows")
})

test_that("the estimators' folds hold whole clusters, as many as were coded where they are fewer than asked", {
  data <- clustered(1)
  coded <- review_sample(data, 3, seed = 1, cluster = "speaker")
  fit <- suppressWarnings(label_regression(yes ~ 1, data, coded, truth, seed = 1))
  expect_true(all(tapply(fit$folds, data$speaker, function(f) length(unique(f))) == 1))
  expect_identical(manifest(fit)$estimation$folds, 3L)
  # rows drawn one by one, with clusters that share errors: the folds keep those whole too
  coded <- review_sample(data, 200, weight = "uniform", seed = 1)
  fit <- label_regression(yes ~ 1, data, coded, truth, seed = 1, cluster = "speaker")
  expect_true(all(tapply(fit$folds, data$speaker, function(f) length(unique(f))) == 1))
})

test_that("learn_labels() learns from rounds drawn by doubt as the estimators weigh them, and draws a third round", {
  rows <- learnable_rows(500)
  first <- review_sample(rows$data, n = 80, weight = "uniform", seed = 1)
  learned <- suppressMessages(learn_labels(rows$data, first, gold, features = rows$x))
  both <- review_sample(learned, n = 40, weight = "learned", previous = first, seed = 2)
  again <- suppressMessages(learn_labels(rows$data, both, gold, features = rows$x))
  record <- manifest(again)$prompt
  expect_identical(record$hand_coded_rows, 120L)
  expect_identical(record$learner_weights, newrllama4:::weighed_by_design)
  # each row by 1 / its weight in the combined estimate, as the estimators weigh it
  learner <- attr(again, "learner")
  combined <- attr(suppressMessages(label_shares(learned, both, gold, seed = 1)), "estimates")[["a"]]
  expect_equal(learner$code_weights, 1 / combined$sample_prob[match(learner$coded_rows, both$.row)], tolerance = 1e-12)
  # every fold learns from both rounds and predicts rows of each
  folds <- record$learner_folds[as.character(both$.row)]
  expect_true(all(table(folds, both$.draw) >= 7))
  # a file keeps the probabilities, and with them the same labels
  expect_equal(suppressMessages(learn_labels(rows$data, through_csv(both), gold, features = rows$x))$.prob_a,
               again$.prob_a, tolerance = 1e-12)
  # without them the round drawn by doubt would count as if drawn from every row
  expect_error(learn_labels(rows$data, both[names(both) != ".sample_prob"], gold, features = rows$x),
               "without their probabilities", class = "newrllama4_error_weighted_sample")
  third <- review_sample(again, n = 40, weight = "learned", previous = both, seed = 3)
  expect_identical(as.vector(table(third$.draw)), c(80L, 40L, 40L))
  expect_true(all(grepl("^round 3: ", third$.stratum[third$.draw == 3])))
  expect_false(any(third$.row[third$.draw == 3] %in% both$.row))
  # the estimators combine three rounds: the third's rows by their round's probability over its weight, 40 / 160
  estimate <- attr(suppressMessages(label_shares(again, third, gold, target = "corpus", seed = 1)), "estimates")[["a"]]
  latest <- third$.draw == 3
  expect_equal(estimate$sample_prob[latest], third$.sample_prob[latest] / (40 / 160))
})

test_that("with rounds, each round's units go round the folds in turn", {
  rounds <- rep(1:2, c(12, 8))
  fold <- unit_folds(1:20, 5, seed = 3, rounds = rounds)
  expect_lte(max(table(fold[rounds == 2])) - min(table(fold[rounds == 2])), 1L)
  expect_lte(max(table(fold[rounds == 1])) - min(table(fold[rounds == 1])), 1L)
  expect_identical(length(unique(fold[rounds == 2])), 5L)
})
