"""The R package's label_regression() and label_shares() against the PPI authors' ppi-python.

With every row in the "unlabelled" set and a simple random sample coded by hand,
prediction-powered inference (PPI++) and the design-based estimator solve the same
estimating equation at the same lambda for a mean and a logistic regression: the point
estimates coincide; their variance estimates differ only in how the prediction errors are
centred and in the finite-population correction, so the intervals agree closely. Power
tuning (lam = None) picks the same lambda but for PPI++'s factor 1 + n / N, which counts the
unlabelled rows as a second sample where ours counts the coded rows among them. An
independent implementation catches a wrong weight, sign or moment in ours.
"""

import json
import os
import shutil
import subprocess
import textwrap

import numpy as np
import pytest

ppi_py = pytest.importorskip("ppi_py")

RSCRIPT = shutil.which("Rscript")
pytestmark = [pytest.mark.skipif(RSCRIPT is None, reason="the R package's estimators need R"),
              pytest.mark.filterwarnings("ignore::FutureWarning")]  # scikit-learn, inside ppi-python

N_ROWS, N_CODED = 4000, 400


@pytest.fixture(scope="module")
def annotation(tmp_path_factory):
    """Labels right about 85% of the time, wrong more often where x is high; a simple random sample coded."""
    rng = np.random.default_rng(20231)
    x = rng.normal(size=N_ROWS)
    truth = rng.binomial(1, 1 / (1 + np.exp(-(-0.3 + 0.8 * x))))
    wrong = rng.binomial(1, 1 / (1 + np.exp(-(-2.2 + 0.8 * x))))
    label = np.where(wrong == 1, 1 - truth, truth)
    sure = np.where(wrong == 1, rng.uniform(0.5, 0.8, N_ROWS), rng.uniform(0.6, 0.99, N_ROWS))
    prob_yes = np.where(label == 1, sure, 1 - sure)
    coded = np.sort(rng.choice(N_ROWS, N_CODED, replace=False))
    folder = tmp_path_factory.mktemp("findings")
    with open(folder / "data.csv", "w") as f:
        f.write("x,.label,.prob_yes,.prob_no,.confidence\n")
        for i in range(N_ROWS):
            f.write(f"{float(x[i])!r},{'yes' if label[i] else 'no'},{float(prob_yes[i])!r},{float(1 - prob_yes[i])!r},{float(sure[i])!r}\n")
    with open(folder / "coded.csv", "w") as f:
        f.write(".row,.sample_prob,truth\n")
        for i in coded:
            f.write(f"{i + 1},{N_CODED / N_ROWS!r},{'yes' if truth[i] else 'no'}\n")
    script = textwrap.dedent("""
        suppressPackageStartupMessages(library(newrllama4))
        args <- commandArgs(TRUE)
        data <- read.csv(file.path(args[1], "data.csv"))
        data$.label <- factor(data$.label, levels = c("yes", "no"))
        coded <- read.csv(file.path(args[1], "coded.csv"))
        estimates <- function(fit) list(coef = unname(coef(fit)), se = unname(sqrt(diag(vcov(fit)))),
                                         lambda = fit$lambda)
        share <- function(lambda) {
          shares <- label_shares(data, coded, truth, lambda = lambda)
          yes <- shares[shares$label == "yes" & shares$estimator == "corrected", ]
          list(coef = yes$estimate, se = yes$std.error, lambda = attr(shares, "estimates")$yes$lambda)
        }
        out <- list(
          ols = estimates(label_regression(yes ~ x, data, coded, truth, lambda = 1)),
          logistic = estimates(label_regression(yes ~ x, data, coded, truth, family = "binomial", lambda = 1)),
          share = share(1),
          tuned_ols = estimates(label_regression(yes ~ x, data, coded, truth)),
          tuned_logistic = estimates(label_regression(yes ~ x, data, coded, truth, family = "binomial")),
          tuned_share = share(NULL)
        )
        writeLines(jsonlite::toJSON(out, digits = NA, auto_unbox = TRUE), file.path(args[1], "r.json"))
    """)
    (folder / "estimate.R").write_text(script)
    subprocess.run([RSCRIPT, str(folder / "estimate.R"), str(folder)], check=True, env=os.environ.copy())
    ours = json.loads((folder / "r.json").read_text())
    design = np.column_stack([np.ones(N_ROWS), x])
    return dict(ours=ours, X=design[coded], Y=truth[coded].astype(float), Yhat=prob_yes[coded], X_all=design,
                Yhat_all=prob_yes)


def ppi_se(ci):
    lower, upper = (np.atleast_1d(bound) for bound in ci)
    return (upper - lower) / (2 * 1.959963984540054)


def test_ols_agrees_with_ppi(annotation):
    """PPI's least squares corrects with the coded rows' own Gram matrix, DSL with all rows': the same
    estimate in the limit, and on a sample apart by exactly the difference of the two inverses applied
    to the coded rows' mean of x (y - prediction)."""
    a = annotation
    point = ppi_py.ppi_ols_pointestimate(a["X"], a["Y"], a["Yhat"], a["X_all"], a["Yhat_all"], lam=1)
    ours = np.array(a["ours"]["ols"]["coef"])
    n, n_all = len(a["Y"]), len(a["Yhat_all"])
    rectifier = a["X"].T @ (a["Y"] - a["Yhat"]) / n
    gram_difference = np.linalg.inv(a["X"].T @ a["X"] / n) - np.linalg.inv(a["X_all"].T @ a["X_all"] / n_all)
    np.testing.assert_allclose(point - ours, gram_difference @ rectifier, rtol=1e-6, atol=1e-10)
    assert np.all(np.abs(ours - point) < np.array(a["ours"]["ols"]["se"]))
    ci = ppi_py.ppi_ols_ci(a["X"], a["Y"], a["Yhat"], a["X_all"], a["Yhat_all"], alpha=0.05, lam=1)
    np.testing.assert_allclose(a["ours"]["ols"]["se"], ppi_se(ci), rtol=0.1)


def test_logistic_coincides_with_ppi(annotation):
    a = annotation
    point = ppi_py.ppi_logistic_pointestimate(a["X"], a["Y"], a["Yhat"], a["X_all"], a["Yhat_all"], lam=1)
    np.testing.assert_allclose(a["ours"]["logistic"]["coef"], point, rtol=1e-4)
    ci = ppi_py.ppi_logistic_ci(a["X"], a["Y"], a["Yhat"], a["X_all"], a["Yhat_all"], alpha=0.05, lam=1)
    np.testing.assert_allclose(a["ours"]["logistic"]["se"], ppi_se(ci), rtol=0.1)


def test_share_coincides_with_ppi_mean(annotation):
    a = annotation
    point = ppi_py.ppi_mean_pointestimate(a["Y"], a["Yhat"], a["Yhat_all"], lam=1)
    np.testing.assert_allclose(a["ours"]["share"]["coef"], point, rtol=1e-10)
    ci = ppi_py.ppi_mean_ci(a["Y"], a["Yhat"], a["Yhat_all"], alpha=0.05, lam=1)
    np.testing.assert_allclose(a["ours"]["share"]["se"], ppi_se(ci), rtol=0.1)


def ppi_lambda(a, kind, coord=None):
    """PPI++'s tuned lambda (lam = None), as its interval functions compute it: for coordinate
    `coord` of the estimate (ppi-python's `coord`), or for all at once."""
    if kind == "share":
        point = ppi_py.ppi_mean_pointestimate(a["Y"], a["Yhat"], a["Yhat_all"], lam=1)
        return ppi_py.ppi._calc_lam_glm((a["Y"] - point)[:, None], (a["Yhat"] - point)[:, None],
                                        (a["Yhat_all"] - point)[:, None], np.eye(1), clip=True)
    if kind == "ols":
        stats = ppi_py.ppi._ols_get_stats(
            ppi_py.ppi_ols_pointestimate(a["X"], a["Y"], a["Yhat"], a["X_all"], a["Yhat_all"], lam=1),
            a["X"], a["Y"], a["Yhat"], a["X_all"], a["Yhat_all"], use_unlabeled=True)
    else:
        stats = ppi_py.ppi._logistic_get_stats(
            ppi_py.ppi_logistic_pointestimate(a["X"], a["Y"], a["Yhat"], a["X_all"], a["Yhat_all"], lam=1),
            a["X"], a["Y"], a["Yhat"], a["X_all"], a["Yhat_all"], use_unlabeled=True)
    return ppi_py.ppi._calc_lam_glm(*stats, coord=coord, clip=True)


@pytest.mark.parametrize("kind", ["share", "ols", "logistic"])
def test_tuned_lambda_is_ppi_plus_plus(annotation, kind):
    """Power tuning, a lambda for each coefficient: ours is PPI++'s for that coordinate (`coord`)
    times 1 + n / N (PPI++ counts the unlabelled rows as a second sample, we count the coded rows
    among them), and at that lambda the coefficient and its standard error agree with PPI++'s as
    they do untuned."""
    a = annotation
    ours = a["ours"]["tuned_" + kind]
    n, n_all = len(a["Y"]), len(a["Yhat_all"])
    lams = np.atleast_1d(ours["lambda"])
    coefs, ses = np.atleast_1d(ours["coef"]), np.atleast_1d(ours["se"])
    for j, lam in enumerate(lams):
        coord = None if kind == "share" else j
        np.testing.assert_allclose(lam, min(ppi_lambda(a, kind, coord) * (1 + n / n_all), 1), rtol=0.1)
        if kind == "share":
            point = ppi_py.ppi_mean_pointestimate(a["Y"], a["Yhat"], a["Yhat_all"], lam=lam)
            np.testing.assert_allclose(coefs[j], point, rtol=1e-10)
            ci = ppi_py.ppi_mean_ci(a["Y"], a["Yhat"], a["Yhat_all"], alpha=0.05, lam=None)
        elif kind == "logistic":
            point = ppi_py.ppi_logistic_pointestimate(a["X"], a["Y"], a["Yhat"], a["X_all"], a["Yhat_all"], lam=lam)
            np.testing.assert_allclose(coefs[j], point[j], rtol=1e-4)
            ci = ppi_py.ppi_logistic_ci(a["X"], a["Y"], a["Yhat"], a["X_all"], a["Yhat_all"], alpha=0.05,
                                        lam=None, coord=j)
        else:
            # PPI++ inverts the Gram matrices of all rows and of the coded rows apart; the design-weighted
            # equation their mix, lam X'X / N + (1 - lam) X_c'X_c / n: the same estimate in the limit
            gram = lam * a["X_all"].T @ a["X_all"] / n_all + (1 - lam) * a["X"].T @ a["X"] / n
            right = lam * a["X_all"].T @ a["Yhat_all"] / n_all + a["X"].T @ (a["Y"] - lam * a["Yhat"]) / n
            np.testing.assert_allclose(coefs[j], np.linalg.solve(gram, right)[j], rtol=1e-6)
            point = ppi_py.ppi_ols_pointestimate(a["X"], a["Y"], a["Yhat"], a["X_all"], a["Yhat_all"], lam=lam)
            assert abs(coefs[j] - point[j]) < ses[j]
            ci = ppi_py.ppi_ols_ci(a["X"], a["Y"], a["Yhat"], a["X_all"], a["Yhat_all"], alpha=0.05,
                                   lam=None, coord=j)
        np.testing.assert_allclose(ses[j], np.atleast_1d(ppi_se(ci))[j], rtol=0.1)
    if kind != "share":
        # the two coordinates' lambdas differ, as PPI++'s do
        assert abs(lams[0] - lams[1]) > 0.02
