"""scikit-learn's ``verbose`` convention on the long fits, and the fold-fit hook.

``verbose=0`` prints nothing; ``1`` a line when a fit stops (and one per value
of ``reg_lambda="auto"``'s grid); ``2`` a line per step. Printed to stdout, as
scikit-learn's estimators print.
"""

import inspect

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skprior import (
    TemperatureCalibratedClassifier,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    fit_dirichlet_calibration,
    fit_temperature,
    fit_vector_scaling,
    select_dirichlet_regularization,
)
from skprior.calibration._classifier import fit_calibration


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=600)
    return 2 * np.eye(3)[y] + rng.normal(size=(600, 3)), y


FITS = {
    "ec": lambda z, y, v: fit_temperature(z, y, verbose=v),
    "nll": lambda z, y, v: fit_temperature(z, y, method="nll", verbose=v),
    "bcts": lambda z, y, v: fit_bias_corrected_temperature(z, y, verbose=v),
    "vs": lambda z, y, v: fit_vector_scaling(z, y, verbose=v),
    "dirichlet": lambda z, y, v: fit_dirichlet_calibration(
        z, y, reg_lambda=1.0, verbose=v
    ),
    "prior": lambda z, y, v: estimate_test_prior(
        np.exp(z) / np.exp(z).sum(axis=1, keepdims=True), np.full(3, 1 / 3), verbose=v
    ),
}


@pytest.mark.parametrize("fit", FITS.values(), ids=FITS.keys())
def test_verbose_levels(data, fit, capsys):
    """Silent at 0, one closing line at 1, more lines (one per step) at 2;
    the result does not depend on it."""
    expected = fit(*data, 0)
    assert capsys.readouterr().out == ""
    fit(*data, 1)
    one = capsys.readouterr().out.splitlines()
    assert len(one) == 1
    result = fit(*data, 2)
    two = capsys.readouterr().out.splitlines()
    assert len(two) > 2 and two[-1] == one[0]
    for got, want in zip(_values(result), _values(expected), strict=True):
        np.testing.assert_array_equal(got, want)


def _values(result):
    """The arrays of a fit's result (a prior estimate: its prior)."""
    result = getattr(result, "prior", result)
    parts = result if isinstance(result, tuple) else (result,)
    return [np.asarray(part) for part in parts]


def test_estimate_test_prior_prints_each_pass(data, capsys):
    """verbose=2: one line per pass over the batch, then the closing line."""
    z, _ = data
    proba = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    result = estimate_test_prior(proba, np.full(3, 1 / 3), verbose=2)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == result.n_passes + 1
    assert lines[-1].startswith(
        f"squarem prior estimate: converged after {result.n_iter}"
    )


def test_dirichlet_auto_prints_each_lambda(data, capsys):
    """reg_lambda="auto" with verbose=1: a line per value tried, then the fit's."""
    reg_lambda, scores = select_dirichlet_regularization(*data, verbose=1)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(scores)
    assert all(
        f"reg_lambda={value:g}:" in line
        for value, line in zip(scores, lines, strict=True)
    )
    fit_dirichlet_calibration(*data, verbose=1)
    assert len(capsys.readouterr().out.splitlines()) == len(scores) + 1


def test_fit_calibration_reports_each_fold_fit(data):
    """The command line's hook: ``progress(done, total)`` after each fold fit of
    reg_lambda="auto" (5 folds x 9 values at most), the last at the fits done."""
    assert "progress" in inspect.signature(fit_calibration).parameters
    calls = []
    fitted = fit_calibration(
        "dirichlet",
        *data,
        reg_lambda="auto",
        reg_mu=None,
        progress=lambda done, total: calls.append((done, total)),
    )
    tried = len(fitted["cv_scores"])
    assert calls == [(done, 45) for done in range(1, 5 * tried + 1)]
    fit_calibration("dirichlet", *data, reg_lambda="auto", reg_mu=None)  # (unset)
    assert len(calls) == 5 * tried


def test_estimator_passes_verbose(data, capsys):
    """TemperatureCalibratedClassifier(verbose=1) prints the fit's line."""
    z, y = data
    model = LogisticRegression().fit(z[:300], y[:300])
    TemperatureCalibratedClassifier(model).fit(z[300:], y[300:])
    assert capsys.readouterr().out == ""
    TemperatureCalibratedClassifier(model, verbose=1).fit(z[300:], y[300:])
    assert capsys.readouterr().out.startswith("temperature: T = ")
    with pytest.raises(ValueError, match="verbose"):
        TemperatureCalibratedClassifier(model, verbose=-1).fit(z[300:], y[300:])
