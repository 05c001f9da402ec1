#' newrllama4: annotate texts with local language models and correct the findings
#'
#' Label thousands of texts with a local language model, code a random sample
#' of them by hand, and get shares and regressions on the labels whose
#' intervals are valid however good or bad the model is. `vignette("newrllama4")`
#' runs the whole workflow on the embedded model; [product_reviews] is a data
#' set with a known truth to try it on.
#'
#' @section Which function when:
#' **The workflow**, in order:
#' 1. [annotate_texts()]: a label (or typed fields) for every text, with the
#'    model's probabilities; [passage_options()] for texts longer than the
#'    context.
#' 2. [review_sample()]: draw rows to code by hand, with known inclusion
#'    probabilities.
#' 3. [code_sample()]: code them in the browser, blind; [read_codes()] reads the
#'    codes back as the sample's rows. [write_codes()] records codes made
#'    elsewhere (a spreadsheet, a simulation) in the same file.
#' 4. [label_regression()] and [label_shares()]: the findings on the labels,
#'    corrected with the coded rows; [agreement()] for how far the model agrees
#'    with people; [coded_rows_needed()] for how many rows to code;
#'    [manifest()] for how a result was made.
#'
#' **Better labels from coded rows**: [learn_labels()] learns labels from the
#' coded rows (the model's probabilities under several example orders, and the
#' texts' features from [embed_texts()]), which the estimators take as they
#' take the labels; [learning_curve()] for how much more coding would help.
#'
#' **The coding app, for a team**: [coding_app()] makes the app that
#' [code_sample()] runs; named coders and adjudicators come in by the links of
#' [coding_links()].
#'
#' **Advanced: the engine**: [model_load()], [context_create()] (or
#' [context_remote()] for OpenAI-compatible servers) and [generate_parallel()]
#' run many prompts at once, each answer the one its prompt gets alone;
#' `vignette("models-and-servers")`.
#'
#' **Setup**: [install_newrllama4()] installs the Python engine once;
#' [engine_available()] and [newrllama4_sitrep()] say whether it works, and
#' what to do if not (`vignette("installation")`).
#' @references Egami, N., Hinck, M., Stewart, B. M. and Wei, H. (2023). Using
#'   imperfect surrogates for downstream inference: design-based supervised
#'   learning for social science applications of large language models.
#'   *Advances in Neural Information Processing Systems 36*.
#'
#'   Angelopoulos, A. N., Duchi, J. C. and Zrnic, T. (2023). PPI++: efficient
#'   prediction-powered inference. arXiv:2311.01453.
"_PACKAGE"

## usethis namespace: start
#' @importFrom rlang caller_env current_env .data %||%
#' @importFrom stats coef confint nobs vcov
## usethis namespace: end
NULL
