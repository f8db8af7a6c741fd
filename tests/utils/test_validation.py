"""Tests for skprior._utils._validation: the messages of the input checks, warnings
that point at the caller, and inputs that numpy converts (torch tensors)."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from skprior import (
    PriorAdaptedClassifier,
    TemperatureCalibratedClassifier,
    adjust_to_prior,
    alternating_normalization,
    estimate_test_prior,
    fit_temperature,
    joint_confusion_matrix,
)
from skprior.metrics import expected_calibration_error

P = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.2, 0.5, 0.3]])
Q = np.array([0.3, 0.3, 0.4])


# -- messages that name the argument and the fix -------------------------------------


def test_ragged_list_is_named():
    """A ragged nested list is reported as such, naming the argument."""
    with pytest.raises(ValueError, match="proba must be a rectangular array.*ragged"):
        adjust_to_prior([[0.5, 0.5, 0.0], [1.0, 0.0]], Q, Q)


def test_prior_given_as_a_string_is_named():
    """A prior given as a string says which argument and what to pass."""
    with pytest.raises((TypeError, ValueError), match="test_prior.*'uniform'"):
        adjust_to_prior(P, Q, "uniform")
    with pytest.raises(ValueError, match="train_prior must hold numbers.*strings"):
        adjust_to_prior(P, ["a", "b", "c"], Q)


def test_sparse_input_to_the_metrics_is_named():
    """Sparse y_proba is refused with the fix, not 'length is ambiguous'."""
    y = np.array([0, 1, 2, 1])
    with pytest.raises(TypeError, match=r"y_proba is a sparse matrix.*toarray\(\)"):
        expected_calibration_error(y, sp.csr_matrix(P))


def test_empty_binary_y_proba_is_named():
    """An empty 1-D y_proba is refused by name, not by a reduction error."""
    with pytest.raises(ValueError, match="y_proba is empty"):
        expected_calibration_error(np.array([], dtype=int), np.array([]))


@pytest.mark.parametrize("bad", [-1.0, np.nan])
def test_bad_reference_weight_reports_the_value_not_the_shape(bad):
    """A negative or NaN reference weight names the value, not a right shape."""
    weight = np.array([1.0, bad, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"reference_weight contains") as info:
        alternating_normalization(P, Q, reference=P, reference_weight=weight)
    assert "shape" not in str(info.value)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_labels_with_inf_or_nan_are_named(bad):
    """inf or NaN among the labels is reported as such (no int64 minimum)."""
    y = np.array([0.0, 1.0, bad, 1.0])
    with pytest.raises(ValueError, match="y contains NaN or infinite") as info:
        joint_confusion_matrix(P, y)
    assert "9223372036854775808" not in str(info.value)
    with pytest.raises(ValueError, match="y_true contains NaN or infinite"):
        expected_calibration_error(y, P)
    model = LogisticRegression().fit(np.eye(3), [0, 1, 2])
    with pytest.raises(ValueError, match="y contains NaN or infinite"):
        PriorAdaptedClassifier(model).fit(np.zeros((4, 3)), y)


def test_inner_model_refusing_X_is_named():
    """The inner model's refusal of X says that it is about X."""
    model = LogisticRegression().fit(np.eye(3), [0, 1, 2])
    wrapper = TemperatureCalibratedClassifier(model).fit(np.eye(3), [0, 1, 1])
    with pytest.raises(ValueError, match="X was refused by LogisticRegression"):
        wrapper.predict_proba(np.zeros((2, 5)))


def test_unused_X_is_still_checked_against_a_fitted_model():
    """fit(X, y) around a fitted model refuses an X the model cannot take."""
    model = LogisticRegression().fit(np.eye(3), [0, 1, 2])
    with pytest.raises(ValueError, match="X was refused"):
        PriorAdaptedClassifier(model, method="known", test_prior=Q).fit(
            np.zeros((3, 5)), [0, 1, 2]
        )


# -- warnings point at the caller's line -----------------------------------------------


def _caught(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    assert caught, "no warning"
    return caught


def test_warning_of_a_public_function_points_at_the_caller():
    """A warning from an array function (through validate_params) names this file."""
    z = np.array([[0.0, 1.0], [0.0, 2.0]])
    for record in _caught(lambda: fit_temperature(z, np.array([1, 1]))):
        assert record.filename == __file__


def test_warning_of_an_estimator_method_points_at_the_caller():
    """A warning from an estimator's fit (through _fit_context) names this file."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), np.arange(40) % 2
    model = LogisticRegression().fit(X, y)
    wrapper = PriorAdaptedClassifier(model, max_iter=1)
    for record in _caught(lambda: wrapper.fit(X, y)):
        assert record.filename == __file__
        assert issubclass(record.category, ConvergenceWarning)


# -- torch tensors: accepted, with the numpy results -----------------------------------


def test_torch_tensors_are_accepted():
    """CPU torch tensors (float32) give the results of the same numpy arrays, to
    rounding: they take the array API path, which sums in its own order
    (tests/test_array_api.py checks every function this way)."""
    torch = pytest.importorskip("torch")
    p32 = P.astype(np.float32)
    tensor = torch.from_numpy(p32.copy())
    np.testing.assert_allclose(
        alternating_normalization(tensor, Q, k=2),
        alternating_normalization(p32, Q, k=2),
        rtol=1e-6,
    )
    np.testing.assert_allclose(
        estimate_test_prior(tensor, Q).prior,
        estimate_test_prior(p32, Q).prior,
        rtol=1e-12,
        atol=1e-15,
    )
    np.testing.assert_allclose(
        adjust_to_prior(tensor, Q, [0.2, 0.2, 0.6]),
        adjust_to_prior(p32, Q, [0.2, 0.2, 0.6]),
        rtol=1e-6,
    )
