library(testthat)
library(newrllama4)

test_check("newrllama4")
