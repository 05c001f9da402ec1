# Fixtures of the agreement() tests (test-agreement*.R).

estimate_of <- function(result, metric) result$metrics$estimate[result$metrics$metric == metric]

# A small table worked out by hand: 10 pairs, labels a, b, c.
#
#              predicted
#   truth       a  b  c   truth totals g
#     a        4  1  1   6
#     b        0  2  0   2
#     c        1  1  0   2
#   predicted totals p:
#              5  4  1   n = 10, agreeing pairs 4 + 2 + 0 = 6
hand_truth <- c("a", "a", "a", "a", "a", "a", "b", "b", "c", "c")
hand_predicted <- c("a", "a", "a", "a", "b", "c", "b", "b", "a", "b")
