test_that("the learning curve measures the learner at each size it can and projects beyond, marked", {
  rows <- learnable_rows(600, dim = 10, strength = 1.5)
  coded <- review_sample(rows$data, n = 150, weight = "uniform", seed = 1)
  curve <- learning_curve(rows$data, coded, gold, sizes = c(50, 100, 150, 300), features = rows$x, draws = 2,
                          seed = 1)
  expect_s3_class(curve, "newrllama4_learning_curve")
  expect_identical(curve$coded_rows, c(50, 100, 150, 300))
  expect_identical(curve$projected, c(FALSE, FALSE, FALSE, TRUE))
  # the features carry the label and the zero-shot labels are noise: learned labels far better, and better
  # with more rows; the corrected share narrower than the coded rows' alone
  expect_true(all(curve$accuracy[1:3] > curve$zero_shot[1:3] + 0.1))
  expect_gt(curve$accuracy[3], curve$accuracy[1])
  expect_true(all(curve$width < curve$width_coded_only))
  expect_true(all(diff(curve$width) < 0))
  # all 150 coded rows: exactly what learn_labels() and label_shares() give on them
  learned <- suppressMessages(learn_labels(rows$data, coded, gold, features = rows$x))
  expect_equal(curve$accuracy[3], manifest(learned)$prompt$cross_validated_accuracy)
  shares <- label_shares(learned, coded, gold, seed = 1)
  corrected <- shares[shares$label == "a" & shares$estimator == "corrected", ]
  expect_equal(curve$width[3], corrected$conf.high - corrected$conf.low)
  # projected: the widths at 150 rows shrunk as 1 / sqrt(rows), at the accuracy reached
  expect_equal(curve$width[4], curve$width[3] * sqrt(150 / 300))
  expect_identical(curve$accuracy[4], curve$accuracy[3])
  expect_output(print(curve), "300 (projected)", fixed = TRUE)
  pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_identical(plot(curve), curve)
})

test_that("a subsample of the coded rows is a stratified sample of its own: no rows lost, no stratum emptied", {
  rows <- learnable_rows(600, dim = 10)
  coded <- review_sample(rows$data, n = 150, weight = "confidence", seed = 2)
  sub <- withr::with_seed(3, subsample_coded(coded, 60))
  expect_setequal(unique(sub$.stratum), unique(coded$.stratum))
  expect_identical(as.vector(table(sub$.stratum)[sub$.stratum]), sub$.stratum_drawn)
  # each stratum's probability times its rows is the rows it drew
  drawn <- tapply(sub$.sample_prob * sub$.stratum_rows, sub$.stratum, unique)
  expect_equal(as.vector(drawn), as.vector(table(sub$.stratum)[names(drawn)]))
  # the estimators read it without a nonresponse warning
  expect_no_warning(label_shares(rows$data, sub, gold))
})

test_that("on rounds drawn by doubt, the labels as annotated are scored as the learned ones are: by the design", {
  rows <- learnable_rows(600, dim = 10, strength = 1.5)
  first <- review_sample(rows$data, n = 75, weight = "uniform", seed = 1)
  learned <- suppressMessages(learn_labels(rows$data, first, gold, features = rows$x))
  both <- review_sample(learned, n = 75, weight = "learned", previous = first, seed = 11)
  curve <- learning_curve(rows$data, both, gold, sizes = 150, features = rows$x, seed = 1)
  again <- suppressMessages(learn_labels(rows$data, both, gold, features = rows$x))
  weighted <- sprintf("accuracy %.3f", curve$zero_shot)
  expect_identical(substr(manifest(again)$prompt$zero_shot_agreement, 1, nchar(weighted)), weighted)
  # the second round, drawn where the learner was unsure, is not the corpus: unweighted, its rows count too much
  unweighted <- mean(as.character(rows$data$.label[both$.row]) == both$gold)
  expect_gt(abs(curve$zero_shot - unweighted), 0.005)
})

test_that("a schema field's curve is the labels' curve on the same answers", {
  rows <- learnable_rows(300, dim = 5, strength = 1.5)
  tones <- as_field(rows$data, "tone")
  tone_coded <- review_sample(tones, n = 80, weight = "uniform", seed = 1, field = "tone")
  on_labels <- learning_curve(rows$data, review_sample(rows$data, n = 80, weight = "uniform", seed = 1), gold,
                              sizes = c(40, 80), features = rows$x, draws = 1, seed = 1)
  on_field <- learning_curve(tones, tone_coded, gold, sizes = c(40, 80), features = rows$x, field = tone, draws = 1,
                             seed = 1)
  same <- c("coded_rows", "accuracy", "zero_shot")
  expect_identical(on_field[same], on_labels[same])
  # the shares' widths too: the field's view refits its learner in the folds as the labels do, though its record
  # already said the labels' calibration (as_field() keeps it), which a learned field once left unsaid
  expect_equal(on_field$width, on_labels$width)
  expect_error(learning_curve(tones, tone_coded, gold, features = rows$x, field = tone, label = "c"),
               "one of the labels", class = "newrllama4_error_invalid_argument")
})

test_that("learning_curve() checks its arguments", {
  rows <- learnable_rows(200, dim = 5)
  coded <- review_sample(rows$data, n = 60, weight = "uniform", seed = 1)
  expect_error(learning_curve(rows$data, coded, gold, sizes = 10, features = rows$x),
               class = "newrllama4_error_invalid_argument")
  expect_error(learning_curve(rows$data, coded, gold, sizes = 100, features = rows$x), "at most the 60",
               class = "newrllama4_error_invalid_argument")
  expect_error(learning_curve(rows$data, coded, gold, label = "c", features = rows$x),
               class = "newrllama4_error_invalid_argument")
  expect_error(learning_curve(rows$data, coded[setdiff(names(coded), ".row")], gold, features = rows$x),
               class = "newrllama4_error_invalid_argument")
})
