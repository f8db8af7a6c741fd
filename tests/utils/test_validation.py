"""Tests for skprior._utils._validation: the messages of the input checks, warnings
that point at the caller, and inputs that numpy converts (torch tensors)."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
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


@pytest.mark.filterwarnings("ignore:.* fits 1 free parameter on")  # (3 rows)
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
    # (fit no longer runs the EM on its data: the warning of an option that
    # the method ignores is fit's own)
    wrapper = PriorAdaptedClassifier(model, test_prior=[0.5, 0.5])
    for record in _caught(lambda: wrapper.fit(X, y)):
        assert record.filename == __file__
        assert "test_prior is used only by method='known'" in str(record.message)


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


# -- one checker per kind of input, for every namespace --------------------------------

from skprior._utils._validation import check_logits, check_proba  # noqa: E402
from skprior._utils._validation_labels import (  # noqa: E402
    check_class_indices,
    check_sample_weight,
)


def _backends():
    out = []
    for name in ("torch", "array_api_strict"):
        try:
            out.append(pytest.importorskip(name).asarray)
        except pytest.skip.Exception:
            pass
    return out


def _message(check, *args, **kwargs):
    with pytest.raises((ValueError, TypeError)) as info:
        check(*args, **kwargs)
    return str(info.value)


def _bad_proba():
    nan, negative, off = P.copy(), P.copy(), P.copy()
    nan[2, 1] = np.nan
    negative[1] = [-0.1, 0.6, 0.5]
    off[3] *= 1.5
    return [nan, negative, off, P[0], P[:, :1], np.zeros((0, 3))]


@pytest.mark.parametrize("bad", range(6))
def test_bad_probabilities_give_numpys_message_in_every_namespace(bad):
    """The same error, word for word, from a NumPy array and a device array."""
    proba = _bad_proba()[bad]
    expected = _message(check_proba, proba)
    for to_backend in _backends():
        assert _message(check_proba, to_backend(proba)) == expected


def test_probabilities_stay_in_their_namespace():
    """A valid array comes back in its namespace, dtype and values."""
    for to_backend in _backends():
        array = to_backend(P.astype(np.float32))
        checked = check_proba(array)
        assert type(checked) is type(array) and checked.dtype == array.dtype
        np.testing.assert_array_equal(np.asarray(checked), P.astype(np.float32))


def _bad_logits():
    nan, posinf, neginf = np.log(P), np.log(P), np.log(P)
    nan[2, 0] = np.nan
    posinf[1, 2] = np.inf
    neginf[3] = -np.inf
    return [nan, posinf, neginf, np.zeros((2, 2, 2)), np.zeros((0, 3))]


@pytest.mark.parametrize("bad", range(5))
def test_bad_logits_give_numpys_message_in_every_namespace(bad):
    logits = _bad_logits()[bad]
    expected = _message(check_logits, logits)
    for to_backend in _backends():
        assert _message(check_logits, to_backend(logits)) == expected


def test_logits_binary_score_and_probability_warning_in_every_namespace():
    """A 1-D score becomes (0, s); probabilities given as logits warn, once."""
    score = np.array([0.5, -1.0, 2.0])
    expected, _ = check_logits(score)
    for to_backend in _backends():
        z, dtype = check_logits(to_backend(score))
        np.testing.assert_array_equal(np.asarray(z), expected)
        with pytest.warns(UserWarning, match="look like probabilities") as caught:
            check_logits(to_backend(P), warn_probabilities=True)
        assert len(caught) == 1 and caught[0].filename == __file__


@pytest.mark.parametrize(
    "y", [[0, 1, 3, 1], [0.0, 1.5, 2.0, 1.0], [0.0, np.nan, 2.0, 1.0], [0, 1, 2]]
)
def test_bad_class_indices_give_numpys_message_in_every_namespace(y):
    y = np.asarray(y)
    expected = _message(check_class_indices, y, 4, 3)
    for to_backend in _backends():
        got = _message(check_class_indices, to_backend(y), 4, 3, like=to_backend(P))
        assert got == expected


@pytest.mark.parametrize(
    "weights", [[1.0, -1.0, 1.0, 1.0], [1.0, np.nan, 1.0, 1.0], [0.0] * 4, [1.0] * 3]
)
def test_bad_sample_weights_give_numpys_message_in_every_namespace(weights):
    weights = np.asarray(weights)
    expected = _message(check_sample_weight, weights, 4)
    for to_backend in _backends():
        like = to_backend(P)
        for given in (weights, to_backend(weights)):  # host or device weights
            assert _message(check_sample_weight, given, 4, like=like) == expected


def test_labels_and_weights_come_in_the_namespace_of_the_data():
    """Host or device labels and weights end on the device of ``like``."""
    for to_backend in _backends():
        like = to_backend(P)
        for y in ([0, 1, 2, 1], to_backend(np.array([0, 1, 2, 1]))):
            checked = check_class_indices(y, 4, 3, like=like)
            assert type(checked) is type(like)
            np.testing.assert_array_equal(np.asarray(checked), [0, 1, 2, 1])
        for weights in (None, [1.0, 2.0, 0.0, 1.0]):
            checked = check_sample_weight(weights, 4, like=like)
            assert type(checked) is type(like) and checked.shape == (4,)


def test_dask_checks_lazily_or_now():
    """lazy=True defers the check into the blocks; otherwise it raises now."""
    da = pytest.importorskip("dask.array")
    pytest.importorskip("array_api_compat")
    bad = np.tile(P, (5, 1))
    bad[13] *= 2
    lazy = check_proba(da.from_array(bad, chunks=(8, 3)), lazy=True)
    with pytest.raises(ValueError, match="row 13 sums"):
        lazy.compute()
    with pytest.raises(ValueError, match="row 13 sums"):
        check_proba(da.from_array(bad, chunks=(8, 3)))
    logits = np.log(bad)
    logits[17, 0] = np.nan
    z, _ = check_logits(da.from_array(logits, chunks=(8, 3)), lazy=True)
    with pytest.raises(ValueError, match="first in row 17\\)"):
        z.compute()


def test_a_train_prior_zero_for_thousands_of_classes_gets_a_readable_message():
    """The classes at 0 are named up to ten, then counted."""
    from skprior._utils._validation import check_train_prior

    prior = np.zeros(5000)
    prior[::2] = 1 / 2500  # (the odd classes, 2,500 of them, at 0)
    with pytest.raises(ValueError, match="train_prior") as error:
        check_train_prior(prior, 5000)
    message = str(error.value)
    assert "[1, 3, 5, 7, 9, 11, 13, 15, 17, 19] and 2490 more" in message
    assert len(message) < 600
    with pytest.raises(ValueError, match=r"for the classes \[1, 3\]:"):
        check_train_prior([0.5, 0.0, 0.5, 0.0], 4, classes=np.arange(4))
