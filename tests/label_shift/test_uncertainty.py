"""PriorAdaptedClassifier.prior_interval: the array function's interval with
the fit rows as the calibration set."""

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression

from skprior import PriorAdaptedClassifier, estimate_test_prior


@pytest.fixture(scope="module")
def fitted():
    X, y = make_classification(
        n_samples=3000, n_classes=3, n_informative=4, random_state=0
    )
    model = LogisticRegression(max_iter=1000).fit(X[:1000], y[:1000])
    shifted = np.r_[np.flatnonzero(y[2000:] == 0)[:400], np.arange(300)]
    return model, X, y, X[2000:][shifted]


@pytest.mark.parametrize("method", ["mle", "map"])
def test_prior_interval_is_the_estimates_with_the_fit_rows(fitted, method):
    model, X, y, batch = fitted
    wrapper = PriorAdaptedClassifier(model, method=method).fit(
        X[1000:2000], y[1000:2000]
    )
    low, high = wrapper.prior_interval(batch, level=0.9)
    train = wrapper.train_prior_
    expected = estimate_test_prior(
        model.predict_proba(batch), train, method=method
    ).confidence_interval(
        0.9, calibration=(model.predict_proba(X[1000:2000]), y[1000:2000])
    )
    np.testing.assert_allclose(low, expected[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(high, expected[1], rtol=1e-10, atol=1e-12)
    assert np.all(low <= high) and low.shape == (3,)
    assert np.all(low < 1) and np.all(high > 0)


def test_prior_interval_of_the_generating_prior_needs_no_fit_rows(fitted):
    """target="prior" is the Fisher interval, without the fit rows (and
    without the warning that calibration= would give)."""
    model, X, y, batch = fitted
    wrapper = PriorAdaptedClassifier(model).fit(X[1000:2000], y[1000:2000])
    low, high = wrapper.prior_interval(batch, target="prior")
    expected = estimate_test_prior(
        model.predict_proba(batch), wrapper.train_prior_
    ).confidence_interval(target="prior")
    np.testing.assert_allclose(np.stack([low, high]), expected, atol=1e-12)


def test_prior_interval_refuses_a_method_without_likelihood(fitted):
    model, X, y, batch = fitted
    wrapper = PriorAdaptedClassifier(model, method="bbse").fit(
        X[1000:2000], y[1000:2000]
    )
    with pytest.raises(ValueError, match="method='mle' or 'map'"):
        wrapper.prior_interval(batch)


def test_prior_interval_takes_the_fit_weights(fitted):
    """Rows of weight 0 count for nothing: fit rows whose labels are
    scrambled but weigh 0 give the interval of the clean rows alone."""
    model, X, y, batch = fitted
    scrambled = y[1000:2000].copy()
    scrambled[:500] = np.random.default_rng(0).permutation(scrambled[:500])
    weights = np.r_[np.zeros(500), np.ones(500)]
    wrapper = PriorAdaptedClassifier(model).fit(
        X[1000:2000], scrambled, sample_weight=weights
    )
    clean = PriorAdaptedClassifier(model).fit(X[1500:2000], y[1500:2000])
    np.testing.assert_allclose(wrapper.train_prior_, clean.train_prior_)
    np.testing.assert_allclose(
        np.stack(wrapper.prior_interval(batch)),
        np.stack(clean.prior_interval(batch)),
        atol=1e-10,
    )


def test_prior_interval_errors_name_what_the_caller_can_do(fitted):
    model, X, y, batch = fitted
    wrapper = PriorAdaptedClassifier(model).fit(X[1000:2000], y[1000:2000])
    with pytest.raises(TypeError, match="fit rows and has no calibration="):
        wrapper.prior_interval(batch, calibration=None)
    rows = np.flatnonzero(y[1000:2000] != 2) + 1000
    without = PriorAdaptedClassifier(model, train_prior=[0.4, 0.3, 0.3])
    without.fit(X[rows], y[rows])
    with pytest.raises(
        ValueError, match=r"no row of the classes \[2\].*target='prior'"
    ):
        without.prior_interval(batch)
    low, high = without.prior_interval(batch, target="prior")
    assert np.all(low <= high)
