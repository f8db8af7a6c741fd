"""Run-time warnings of BCTS, vector scaling and Dirichlet calibration.

On fit data the calibration separates (every true class ranked first) the log
loss has no finite minimiser: the tests check that by evaluating the written-out
loss further along the fitted parameters (it is lower), and that the fit warns.
On a tiny fit set (fewer than 10 rows per free parameter) the fit warns too.
Neither warning is given on real held-out outputs (stored CIFAR-10 network
outputs, 5,000 rows).
"""

import warnings

import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.linear_model import LogisticRegression

from skprior import (
    TemperatureCalibratedClassifier,
    fit_bias_corrected_temperature,
    fit_dirichlet_calibration,
    fit_vector_scaling,
)

SEPARATES = "was fitted on data it separates"
FEW_ROWS = r"fits \d+ free parameters? on"


def mean_log_loss(scores, y):
    """The mean log loss of softmax(scores), written out."""
    return float(np.mean(logsumexp(scores, axis=1) - scores[np.arange(len(y)), y]))


def assert_no_finite_minimum(scores, y):
    """The fitted scores rank every true class first, and the loss falls along them.

    With every margin positive, the loss of ``c * scores`` decreases in ``c``:
    the fit is a point on the way to infinity, with (nearly) one-hot
    probabilities. (Where the loss is already 0 in floating point, from half
    way along.)
    """
    assert np.all(scores.argmax(axis=1) == y)
    assert mean_log_loss(0.25 * scores, y) > mean_log_loss(0.5 * scores, y)
    assert mean_log_loss(0.5 * scores, y) >= mean_log_loss(scores, y)


@pytest.fixture
def separable():
    """Logits whose argmax is right on every one of 300 rows (3 classes)."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=300)
    logits = 3 * np.eye(3)[y] + 0.3 * rng.normal(size=(300, 3))
    assert np.all(logits.argmax(axis=1) == y)
    return logits, y


def test_bcts_on_separable_data_warns(separable):
    """BCTS warns when every fit row is right, and its loss keeps decreasing."""
    logits, y = separable
    with pytest.warns(UserWarning, match=SEPARATES):
        temperature, bias = fit_bias_corrected_temperature(logits, y)
    assert_no_finite_minimum(logits / temperature + bias, y)


def test_bcts_separable_only_through_the_biases_warns(separable):
    """Rows the argmax gets wrong but a class bias puts right still separate."""
    logits, y = separable
    shifted = logits - np.array([2.5, 0.0, 0.0])
    assert np.any(shifted.argmax(axis=1) != y)
    with pytest.warns(UserWarning, match=SEPARATES):
        temperature, bias = fit_bias_corrected_temperature(shifted, y)
    assert_no_finite_minimum(shifted / temperature + bias, y)


@pytest.mark.parametrize("bias", [True, False], ids=["vs", "nbvs"])
def test_vector_scaling_on_separable_data_warns(separable, bias):
    """Vector scaling (with or without biases) warns on separable fit data."""
    logits, y = separable
    with pytest.warns(UserWarning, match=SEPARATES):
        factors, offsets = fit_vector_scaling(logits, y, bias=bias)
    assert_no_finite_minimum(logits * factors + offsets, y)


def test_dirichlet_on_separable_data_warns(separable):
    """Dirichlet warns when its unpenalised diagonal alone separates the rows."""
    logits, y = separable
    with pytest.warns(UserWarning, match=SEPARATES):
        matrix, bias = fit_dirichlet_calibration(logits, y, reg_lambda=1.0)
    log_proba = logits - logsumexp(logits, axis=1, keepdims=True)
    # Along the diagonal the ODIR penalty is unchanged and the loss only
    # falls (to 0 in float64 once the fit has gone far enough): the fit has
    # no minimiser.
    scores = log_proba @ matrix.T + bias
    further = log_proba @ (matrix + np.diag(np.diag(matrix))).T + bias
    back = log_proba @ (matrix - np.diag(np.diag(matrix)) / 2).T + bias
    assert mean_log_loss(further, y) <= mean_log_loss(scores, y)
    assert mean_log_loss(scores, y) < mean_log_loss(back, y)


@pytest.mark.parametrize("bias", [True, False], ids=["vs", "nbvs"])
def test_vector_scaling_on_a_tiny_fit_set_warns(bias):
    """20 rows for 4 classes (4 or 7 parameters) are too few: a warning."""
    rng = np.random.default_rng(1)
    y = np.tile(np.arange(4), 5)
    logits = np.eye(4)[y] + rng.normal(size=(20, 4))
    with pytest.warns(UserWarning, match=FEW_ROWS) as record:
        fit_vector_scaling(logits, y, bias=bias)
    message = str(
        next(w.message for w in record if "free parameters" in str(w.message))
    )
    assert ("method='nbvs'" in message) == bias and "fit_temperature" in message


def test_unpenalised_dirichlet_on_a_tiny_fit_set_warns():
    """reg_lambda=0 frees all K^2 + K - 1 parameters: 40 rows are too few."""
    rng = np.random.default_rng(2)
    y = np.tile(np.arange(4), 10)
    logits = np.eye(4)[y] + rng.normal(size=(40, 4))
    with pytest.warns(UserWarning, match="fits 19 free parameters on 40"):
        fit_dirichlet_calibration(logits, y, reg_lambda=0.0, reg_mu=0.0)


def test_weakly_penalised_dirichlet_counts_its_entries_as_free():
    """A penalty per entry weaker than one sample's share of the mean loss
    (lambda / (K (K - 1)) < 1 / n) constrains nothing: lambda = 1e-3 at K = 10
    on 200 rows over-fits as lambda = 0 does, and warned of 10 parameters only
    where it was silent. 109 counted now; a penalty that weighs (lambda = 100)
    leaves the diagonal alone, 10 parameters on 200 rows: no warning."""
    rng = np.random.default_rng(0)
    y = np.tile(np.arange(10), 20)
    logits = 1.5 * np.eye(10)[y] + rng.normal(size=(200, 10))
    for reg in (1e-3, 0.01):
        with pytest.warns(UserWarning, match="fits 109 free parameters on 200"):
            fit_dirichlet_calibration(logits, y, reg_lambda=reg, reg_mu=reg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_dirichlet_calibration(logits, y, reg_lambda=100.0, reg_mu=100.0)


def test_estimator_warns_on_a_tiny_calibration_set():
    """TemperatureCalibratedClassifier(method='vs') passes the warning on."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(24, 2))
    y = np.tile(np.arange(3), 8)
    X[:, 0] += y
    model = LogisticRegression().fit(X, y)
    calibrated = TemperatureCalibratedClassifier(model, method="vs")
    with pytest.warns(UserWarning, match=FEW_ROWS):
        calibrated.fit(X, y)


@pytest.mark.parametrize("method", ["bcts", "nbvs", "vs", "dirichlet"])
def test_no_warning_on_real_held_out_outputs(cifar10, method):
    """On 5,000 rows of real CIFAR-10 outputs neither warning fires."""
    proba, labels = cifar10
    logits = np.log(proba[:5000].astype(np.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if method == "bcts":
            fit_bias_corrected_temperature(logits, labels[:5000])
        elif method == "dirichlet":
            fit_dirichlet_calibration(logits, labels[:5000], reg_lambda=1.0)
        else:
            fit_vector_scaling(logits, labels[:5000], bias=method == "vs")
