test_that("the skewness of a total over clusters drawn without replacement is the design's own", {
  totals <- cbind(c(2, 3, 3, 4, 5, 9, 30), c(-1, 1, 0, 2, -2, 1, -1))
  n <- 3
  # every draw of 3 of the 7 clusters, each as likely: the Horvitz-Thompson total's exact moments
  estimates <- apply(utils::combn(7, n), 2, function(drawn) 7 / n * colSums(totals[drawn, , drop = FALSE]))
  exact <- apply(estimates, 1, function(e) mean((e - mean(e))^3) / mean((e - mean(e))^2)^1.5)
  expect_equal(cluster_total_skewness(totals, n), exact)
  expect_identical(cluster_total_skewness(totals, 7), c(0, 0))
})

test_that("speakers of very unequal sizes drawn whole: the corpus's share stops, the population's does not", {
  # 60 speakers of lognormal sizes (sd of the log 2), 10 drawn uniformly: the corpus's share covered 0.765 over 200
  # draws (0.975 at sd 0.75)
  data <- speakers_of_sizes(2, 2)
  coded <- speakers_drawn_uniformly(data, 10, seed = 2)
  expect_error(suppressMessages(label_shares(data, coded, truth, target = "corpus", seed = 1)),
               class = "newrllama4_error_skewed_clusters")
  expect_error(suppressMessages(label_regression(yes ~ 1, data, coded, truth, target = "corpus", seed = 1)),
               "differ much in size")
  expect_no_error(suppressMessages(label_shares(data, coded, truth, seed = 1)))
  # speakers of one size never stop
  even <- clustered(2, 60, 20)
  coded <- review_sample(even, 10, seed = 2, cluster = "speaker")
  expect_no_error(suppressMessages(label_shares(even, coded, truth, target = "corpus", seed = 1)))
})

test_that("a draw of speakers takes those who speak most whole, and the rest uniformly", {
  data <- speakers_of_sizes(3, 1.5)
  sizes <- table(data$speaker)
  largest <- newrllama4:::largest_clusters(sizes, 10)
  # each taken would have a share of the rows left of at least one over the draws left
  left <- sum(sizes) - c(0, cumsum(sort(sizes, decreasing = TRUE)))
  expect_true(all(sort(sizes, decreasing = TRUE)[seq_along(largest)] * (10 - seq_along(largest) + 1) >=
                    left[seq_along(largest)]))
  expect_gte(length(largest), 1)
  coded <- review_sample(data, 10, seed = 1, cluster = "speaker")
  expect_identical(length(unique(coded$speaker)), 10L)
  whole <- as.character(coded$speaker) %in% largest
  expect_true(all(largest %in% as.character(coded$speaker)))
  expect_true(all(coded$.sample_prob[whole] == 1))
  expect_true(all(coded$.stratum[whole] == "largest clusters"))
  expect_equal(unique(coded$.sample_prob[!whole]), (10 - length(largest)) / (60 - length(largest)))
  # the others equally likely
  drawn <- table(unlist(lapply(1:300, function(seed) {
    setdiff(unique(as.character(review_sample(data, 10, seed = seed, cluster = "speaker")$speaker)), largest)
  })))
  expect_identical(length(drawn), 60L - length(largest))
  expect_gt(stats::chisq.test(as.vector(drawn))$p.value, 0.001)
  # the design travels through a CSV file and is read back
  shares <- suppressMessages(label_shares(data, through_csv(coded), truth, target = "corpus", seed = 1))
  expect_match(format(shares), "2 strata", all = FALSE)
  # speakers of one size: no stratum of the largest, the draw as before
  expect_identical(newrllama4:::largest_clusters(table(rep(1:60, 20)), 10), character())
})

test_that("rows lost from a draw with the largest speakers taken whole: each stratum's coded clusters stand for its own", {
  data <- speakers_of_sizes(3, 1.5)
  coded <- review_sample(data, 10, seed = 1, cluster = "speaker")
  largest <- attr(coded, "design")$largest_clusters
  random <- setdiff(unique(as.character(coded$speaker)), largest)
  # a row of a speaker taken whole uncodable, and one speaker drawn at random lost with all his rows
  coded$truth[which(as.character(coded$speaker) == largest[[1]])[[1]]] <- NA
  short <- coded[as.character(coded$speaker) != random[[1]], ]
  expect_warning(fit <- label_regression(yes ~ 1, data, short, truth, seed = 1), "all of 1 cluster",
                 class = "newrllama4_warning_nonresponse")
  kept <- short[!is.na(short$truth), ]
  rows <- table(as.character(data$speaker))[as.character(kept$speaker)]
  in_cluster <- table(as.character(kept$speaker))[as.character(kept$speaker)]
  whole <- as.character(kept$speaker) %in% largest
  cluster_prob <- ifelse(whole, 1, (length(random) - 1) / (60 - length(largest)))
  expect_equal(fit$sample_prob, as.vector(cluster_prob * in_cluster / rows))
  # no speaker drawn at random coded: the estimate cannot stand for them
  expect_error(label_regression(yes ~ 1, data, coded[as.character(coded$speaker) %in% largest, ], truth),
               class = "newrllama4_error_empty_stratum")
})
