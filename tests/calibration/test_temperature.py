"""Temperature scaling (EC, NLL, BCTS): the array functions and the estimator."""

import warnings

import numpy as np
import pytest
import sklearn
from conftest import load_model_outputs
from scipy.optimize import brentq, minimize_scalar
from scipy.special import softmax
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_iris, make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.utils.fixes import parse_version

from skprior import (
    CANClassifier,
    TemperatureCalibratedClassifier,
    fit_bias_corrected_temperature,
    fit_temperature,
    softmax_temperature,
)

CIFAR_OUTPUTS = (
    "lenet-5-cifar-10",
    "wideresnet-16-4-cifar-10",
    "cleanlab-cifar-10",
    "lenet-5-cifar-100",
    "wideresnet-16-4-cifar-100",
    "densenet-bc-100-cifar-100",
)


# -- naive references, written from the formulas -------------------------------------


def naive_mean_confidence(logits, temperature):
    """mean_i max_k softmax(z_i / T)_k, one row at a time."""
    total = 0.0
    for row in logits:
        scaled = row / temperature
        scaled = scaled - scaled.max()
        total += np.exp(scaled).max() / np.exp(scaled).sum()
    return total / len(logits)


def naive_ec_temperature(logits, y, low=1e-2, high=1e2):
    """EC by brentq on a fixed bracket, with a vectorised softmax."""
    accuracy = np.mean(np.argmax(logits, axis=1) == y)

    def gap(log_t):
        return softmax(logits / np.exp(log_t), axis=1).max(axis=1).mean() - accuracy

    root = brentq(gap, np.log(low), np.log(high), xtol=1e-14, rtol=1e-15)
    return np.exp(root)


def naive_log_loss(logits, y, temperature, bias=None, weights=None):
    """Weighted mean of -log softmax(z_i / T + b)_{y_i}, one row at a time."""
    weights = np.ones(len(y)) if weights is None else weights
    bias = np.zeros(logits.shape[1]) if bias is None else bias
    total = 0.0
    for row, label, weight in zip(logits, y, weights, strict=True):
        scaled = row / temperature + bias
        top = scaled.max()
        total += weight * (top + np.log(np.exp(scaled - top).sum()) - scaled[label])
    return total / weights.sum()


def cifar_logits(name):
    proba, labels = load_model_outputs(name)
    with np.errstate(divide="ignore"):
        return np.log(proba.astype(np.float64)), labels


def synthetic_logits(n_samples=600, n_classes=4, strength=1.5, scale=3.0, seed=0):
    """Over-confident logits: true-class boost plus noise, times ``scale``."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n_samples)
    logits = rng.normal(size=(n_samples, n_classes)) + strength * np.eye(n_classes)[y]
    return scale * logits, y


# -- the array functions -------------------------------------------------------------


@pytest.mark.parametrize("name", CIFAR_OUTPUTS)
def test_ec_equals_naive_reference_on_cifar(name):
    """EC temperature on real CIFAR outputs equals a naive brentq to 1e-6."""
    logits, y = cifar_logits(name)
    assert np.isfinite(logits).all()
    expected = naive_ec_temperature(logits, y)
    assert fit_temperature(logits, y, method="ec") == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("name", ["lenet-5-cifar-10", "densenet-bc-100-cifar-100"])
def test_ec_root_solves_the_equation(name):
    """At the EC temperature the naive mean confidence equals the accuracy."""
    logits, y = cifar_logits(name)
    temperature = fit_temperature(logits, y, method="ec")
    accuracy = np.mean(np.argmax(logits, axis=1) == y)
    assert naive_mean_confidence(logits, temperature) == pytest.approx(
        accuracy, abs=1e-10
    )


@pytest.mark.parametrize("name", ["lenet-5-cifar-10", "wideresnet-16-4-cifar-100"])
def test_nll_minimises_naive_log_loss_on_cifar(name):
    """NLL temperature equals the minimiser of a naive log loss to 1e-6."""
    logits, y = cifar_logits(name)
    logits, y = logits[:2000], y[:2000]  # the naive loop is slow
    result = minimize_scalar(
        lambda log_t: naive_log_loss(logits, y, np.exp(log_t)),
        bounds=(-3, 3),
        method="bounded",
        options={"xatol": 1e-9},
    )
    temperature = fit_temperature(logits, y, method="nll")
    assert temperature == pytest.approx(np.exp(result.x), rel=1e-6)


# CalibratedClassifierCV(method="temperature") is new in scikit-learn 1.8.
needs_sklearn_temperature = pytest.mark.skipif(
    parse_version(sklearn.__version__) < parse_version("1.8"),
    reason="CalibratedClassifierCV(method='temperature') needs scikit-learn >= 1.8",
)


@needs_sklearn_temperature
def test_nll_matches_scikit_learn_temperature_scaling():
    """method='nll' equals CalibratedClassifierCV(method='temperature') to 1e-3.

    Both read the logits from LogisticRegression.decision_function.
    """
    X, y = make_classification(
        n_samples=1500, n_features=20, n_informative=8, n_classes=5, random_state=0
    )
    X_train, X_cal, y_train, y_cal = train_test_split(X, y, random_state=0)
    model = LogisticRegression(max_iter=1000).fit(X_train, y_train)
    reference = CalibratedClassifierCV(FrozenEstimator(model), method="temperature")
    reference.fit(X_cal, y_cal)
    beta = reference.calibrated_classifiers_[0].calibrators[0].beta_
    ours = TemperatureCalibratedClassifier(model, method="nll").fit(X_cal, y_cal)
    assert ours.temperature_ == pytest.approx(1 / beta, rel=1e-3)
    np.testing.assert_allclose(
        ours.predict_proba(X_cal), reference.predict_proba(X_cal), atol=1e-6
    )


@needs_sklearn_temperature
def test_binary_temperature_is_half_of_scikit_learn():
    """A 1-D score s is (0, s) here, (-s, s) in scikit-learn: its T is twice ours."""
    X, y = make_classification(n_samples=600, flip_y=0.2, random_state=0)
    X_train, X_cal, y_train, y_cal = train_test_split(X, y, random_state=0)
    model = LogisticRegression().fit(X_train, y_train)
    reference = CalibratedClassifierCV(FrozenEstimator(model), method="temperature")
    beta = reference.fit(X_cal, y_cal).calibrated_classifiers_[0].calibrators[0].beta_
    ours = TemperatureCalibratedClassifier(model, method="nll").fit(X_cal, y_cal)
    assert ours.temperature_ == pytest.approx(1 / (2 * beta), rel=1e-3)
    np.testing.assert_allclose(
        ours.predict_proba(X_cal), reference.predict_proba(X_cal), atol=1e-6
    )


@pytest.mark.parametrize("method", ["ec", "nll"])
def test_binary_score_is_zero_and_score(method):
    """A 1-D score gives the temperature of the rows (0, s)."""
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, size=300)
    score = 4 * (2 * y - 1) + 3 * rng.normal(size=300)
    expected = fit_temperature(
        np.column_stack([np.zeros(300), score]), y, method=method
    )
    assert fit_temperature(score, y, method=method) == expected


def test_bcts_is_a_minimum_of_naive_loss():
    """BCTS parameters are a stationary point of the naive weighted loss."""
    logits, y = synthetic_logits(n_samples=400, n_classes=3)
    logits = logits + np.array([1.0, 0.0, -0.5])  # class biases to undo
    weights = np.random.default_rng(2).uniform(0.5, 2.0, size=len(y))
    temperature, bias = fit_bias_corrected_temperature(logits, y, sample_weight=weights)
    assert bias.mean() == pytest.approx(0, abs=1e-12)
    params = np.concatenate([[1 / temperature], bias])

    def loss(p):
        return naive_log_loss(logits, y, 1 / p[0], p[1:], weights)

    step = 1e-5
    for j in range(len(params)):
        up, down = params.copy(), params.copy()
        up[j] += step
        down[j] -= step
        assert abs(loss(up) - loss(down)) / (2 * step) < 1e-5
    # The one-parameter NLL fit cannot do better than the bias-corrected one.
    nll_temperature = fit_temperature(logits, y, method="nll", sample_weight=weights)
    assert loss(params) < naive_log_loss(logits, y, nll_temperature, None, weights)


def test_bcts_on_cifar_beats_nll_in_sample():
    """On real outputs the fitted biases lower the in-sample log loss."""
    logits, y = cifar_logits("lenet-5-cifar-10")
    temperature, bias = fit_bias_corrected_temperature(logits, y)
    nll_temperature = fit_temperature(logits, y, method="nll")
    assert naive_log_loss(logits, y, temperature, bias) < naive_log_loss(
        logits, y, nll_temperature
    )


@pytest.mark.parametrize("method", ["ec", "nll", "bcts"])
def test_integer_weights_equal_repeated_rows(method):
    """sample_weight of integers gives the same fit as repeating the rows."""
    logits, y = synthetic_logits(n_samples=200, seed=3)
    counts = np.random.default_rng(13).integers(0, 4, size=len(y))

    def fit(logits, y, sample_weight=None):
        if method == "bcts":
            t, b = fit_bias_corrected_temperature(
                logits, y, sample_weight=sample_weight
            )
            return np.concatenate([[t], b])
        return np.array(
            [fit_temperature(logits, y, method=method, sample_weight=sample_weight)]
        )

    weighted = fit(logits, y, counts)
    repeated = fit(np.repeat(logits, counts, axis=0), np.repeat(y, counts))
    np.testing.assert_allclose(weighted, repeated, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("method", ["ec", "nll", "bcts"])
@pytest.mark.parametrize("scale", [1e-3, 1e3])
def test_temperature_follows_the_logit_scale(method, scale):
    """Logits times c give temperature times c, for tiny and huge scales."""
    logits, y = synthetic_logits(seed=4)
    if method == "bcts":
        base = fit_bias_corrected_temperature(logits, y)[0]
        scaled = fit_bias_corrected_temperature(scale * logits, y)[0]
        rel = 1e-4
    else:
        base = fit_temperature(logits, y, method=method)
        scaled = fit_temperature(scale * logits, y, method=method)
        rel = 1e-9
    assert scaled == pytest.approx(scale * base, rel=rel)


@pytest.mark.parametrize("method", ["ec", "nll", "bcts"])
def test_huge_logits_are_stable(method):
    """Logits of +-1e4 give a finite temperature and finite probabilities."""
    logits, y = synthetic_logits(seed=5)
    logits = 1e4 * np.sign(logits) * (np.abs(logits) > 1) + logits
    if method == "bcts":
        temperature, bias = fit_bias_corrected_temperature(logits, y)
    else:
        temperature, bias = fit_temperature(logits, y, method=method), None
    assert np.isfinite(temperature) and temperature > 0
    proba = softmax_temperature(logits, temperature, bias)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1)


@pytest.mark.parametrize("method", ["ec", "nll"])
def test_float32_logits(method):
    """float32 logits fit like their float64 copy; the softmax stays float32."""
    logits, y = synthetic_logits(seed=6)
    logits32 = logits.astype(np.float32)
    temperature = fit_temperature(logits32, y, method=method)
    assert temperature == pytest.approx(
        fit_temperature(logits32.astype(np.float64), y, method=method), rel=1e-12
    )
    proba = softmax_temperature(logits32, temperature)
    assert proba.dtype == np.float32
    np.testing.assert_allclose(proba.sum(axis=1), 1, rtol=1e-6)


@pytest.mark.parametrize("fit", ["ec", "nll", "bcts"])
def test_logits_of_a_tiny_scale(fit):
    """The temperature scales with the logits down to 1e-90; below 1e-100 the
    derivatives in 1 / T underflow (T off by 11 orders at 1e-300, BCTS's
    Newton solve hung on a NaN Hessian at 1e-160): refused, saying how."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 500)
    z = rng.normal(size=(500, 4)) + np.eye(4)[y]
    if fit == "bcts":

        def func(logits):
            return fit_bias_corrected_temperature(logits, y)[0]
    else:

        def func(logits):
            return fit_temperature(logits, y, method=fit)

    np.testing.assert_allclose(func(z * 1e-90) / 1e-90, func(z), rtol=1e-9)
    for scale in (1e-101, 1e-160, 1e-300):
        with pytest.raises(ValueError, match="Multiply them by a constant"):
            func(z * scale)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
@pytest.mark.parametrize("fit", ["ec", "nll", "bcts"])
def test_probabilities_passed_as_logits_warn(fit, dtype):
    """Probabilities in place of logits give a wrong T silently: warn instead
    (also for float16 ones, whose rows sum to 1 within a few 1e-4 only)."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, size=2000)
    logits = (rng.normal(size=(2000, 10)) + 2 * np.eye(10)[y]).astype(dtype)
    if fit == "bcts":
        func = fit_bias_corrected_temperature
    else:

        def func(z, y):
            return fit_temperature(z, y, method=fit)

    proba = softmax(logits.astype(np.float64), axis=1).astype(dtype)
    with pytest.warns(UserWarning, match="look like probabilities"):
        func(proba, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        func(np.log(proba), y)


def test_bcts_on_logits_no_better_than_chance_warns():
    """Labels that the logits always get wrong send BCTS's T to infinity: warn,
    as fit_temperature does, instead of returning T = 1e12 silently."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=300)
    logits = rng.normal(size=(300, 3))
    logits[np.arange(300), y] -= 5
    with pytest.warns(UserWarning, match="no better than chance"):
        temperature, _ = fit_bias_corrected_temperature(logits, y)
    assert temperature > 1e4


def test_softmax_temperature_equals_power_of_probabilities():
    """softmax(log p / T) is p ** (1 / T) renormalised, zeros included."""
    proba, _ = load_model_outputs("lenet-5-cifar-10")
    proba = proba[:200].astype(np.float64)
    proba[:, 0] = 0.0
    proba = proba / proba.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        logits = np.log(proba)
    powered = proba ** (1 / 1.7)
    expected = powered / powered.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(softmax_temperature(logits, 1.7), expected, rtol=1e-12)


@pytest.mark.parametrize("method", ["ec", "nll", "bcts"])
def test_zero_probabilities_give_no_nan(method):
    """-inf logits (exact zeros, also of the true class) are handled."""
    logits, y = synthetic_logits(seed=7)
    logits[::7, 1] = -np.inf
    logits[::11, 0] = -np.inf
    if method == "bcts":
        temperature, bias = fit_bias_corrected_temperature(logits, y)
        assert np.isfinite(bias).all()
    else:
        temperature, bias = fit_temperature(logits, y, method=method), None
    assert np.isfinite(temperature) and temperature > 0
    proba = softmax_temperature(logits, temperature, bias)
    assert not np.isnan(proba).any()
    assert (proba[::7, 1] == 0).all()


def test_nll_ignores_rows_with_zero_true_probability():
    """A row whose true class is at -inf has infinite loss at every T: left out."""
    logits, y = synthetic_logits(seed=8)
    extra = np.array([[-np.inf, 0.0, 1.0, 2.0]])
    with_row = fit_temperature(
        np.vstack([logits, extra]), np.append(y, 0), method="nll"
    )
    assert with_row == fit_temperature(logits, y, method="nll")


@pytest.mark.filterwarnings("ignore:.* fits 1 free parameter on")
@pytest.mark.parametrize("method", ["ec", "nll"])
def test_no_root_when_accuracy_is_one(method):
    """Perfect accuracy: warn, clip to the low end (nearly one-hot)."""
    y = np.array([0, 1, 2, 0, 1, 2])
    logits = 3.0 * np.eye(3)[y] + 0.1 * np.arange(6)[:, None]
    with pytest.warns(UserWarning, match="no (temperature|minimum)"):
        temperature = fit_temperature(logits, y, method=method)
    assert temperature < 3.0 / 30
    assert softmax_temperature(logits, temperature).max(axis=1).min() > 1 - 1e-12


@pytest.mark.filterwarnings("ignore:.* fits 1 free parameter on")
@pytest.mark.parametrize("method", ["ec", "nll"])
def test_no_root_when_worse_than_chance(method):
    """Accuracy 0 (below 1/K): warn, clip to the high end (nearly uniform)."""
    y = np.array([0, 1, 2, 0, 1, 2])
    logits = 3.0 * np.eye(3)[(y + 1) % 3]
    with pytest.warns(UserWarning, match="infinity"):
        temperature = fit_temperature(logits, y, method=method)
    proba = softmax_temperature(logits, temperature)
    np.testing.assert_allclose(proba, 1 / 3, atol=1e-2)


def test_input_arrays_not_modified():
    """The caller's logits, labels and weights are left as they were."""
    logits, y = synthetic_logits(seed=9)
    logits[0, 0] = -np.inf
    weights = np.ones(len(y))
    copies = logits.copy(), y.copy(), weights.copy()
    fit_temperature(logits, y, sample_weight=weights)
    fit_bias_corrected_temperature(logits, y, sample_weight=weights)
    softmax_temperature(logits, 2.0)
    for original, copy in zip((logits, y, weights), copies, strict=True):
        np.testing.assert_array_equal(original, copy)


@pytest.mark.parametrize(
    "logits, y, kwargs, match",
    [
        (np.array([[0.0, np.nan]]), [0], {}, "NaN or \\+inf"),
        (np.array([[0.0, np.inf]]), [0], {}, "NaN or \\+inf"),
        (np.array([[-np.inf, -np.inf]]), [0], {}, "-inf in every column"),
        (np.zeros((2, 1)), [0, 0], {}, "at least 2 columns"),
        (np.zeros((2, 2)), [0], {}, "one label per row"),
        (np.zeros((2, 2)), [0, 2], {}, "outside 0..1"),
        (np.zeros((2, 2)), ["a", "b"], {}, "class indices"),
        (np.zeros((2, 2)), [0, 1], {"method": "bcts"}, "'method' parameter .* among"),
        (np.zeros((2, 2)), [0, 1], {"sample_weight": [-1, 1]}, "(?i)negative"),
    ],
)
def test_bad_input_raises_clear_error(logits, y, kwargs, match):
    """Bad logits, labels, method or weights raise a ValueError saying why."""
    with pytest.raises(ValueError, match=match):
        fit_temperature(logits, y, **kwargs)


def test_bcts_needs_every_class():
    """A class absent from y would get a bias of -inf: refused with a reason."""
    logits, y = synthetic_logits(seed=10)
    with pytest.raises(ValueError, match="every class"):
        fit_bias_corrected_temperature(logits, np.where(y == 3, 0, y))


def test_softmax_temperature_rejects_bad_temperature_and_bias():
    """T must be positive; the bias needs one finite entry per class."""
    with pytest.raises(ValueError, match="temperature"):
        softmax_temperature(np.zeros((1, 2)), 0.0)
    with pytest.raises(ValueError, match="one entry per class"):
        softmax_temperature(np.zeros((1, 2)), 1.0, bias=[0.0, 0.0, 0.0])


# -- the estimator ------------------------------------------------------------------


class CountingLogisticRegression(LogisticRegression):
    """LogisticRegression that counts its fit calls (class-level counter)."""

    n_fit_calls = 0

    def fit(self, X, y, sample_weight=None):
        type(self).n_fit_calls += 1
        return super().fit(X, y, sample_weight=sample_weight)


@pytest.fixture
def digits_split():
    X, y = make_classification(
        n_samples=900, n_features=10, n_informative=6, n_classes=4, random_state=0
    )
    return train_test_split(X, y, random_state=0)


@pytest.mark.parametrize("method", ["ec", "nll", "bcts"])
def test_fitted_model_is_not_refitted(method, digits_split):
    """fit, clone + fit: a fitted inner model is never fitted again."""
    from sklearn.base import clone

    X_train, X_cal, y_train, y_cal = digits_split
    model = CountingLogisticRegression(max_iter=500).fit(X_train, y_train)
    coef = model.coef_.copy()
    CountingLogisticRegression.n_fit_calls = 0
    calibrated = TemperatureCalibratedClassifier(model, method=method).fit(X_cal, y_cal)
    clone(calibrated).fit(X_cal, y_cal)
    assert CountingLogisticRegression.n_fit_calls == 0
    assert calibrated.estimator_ is model
    np.testing.assert_array_equal(model.coef_, coef)


@pytest.mark.parametrize("method", ["ec", "nll", "bcts"])
def test_estimator_matches_array_functions(method, digits_split):
    """The estimator fits the array functions on decision_function logits."""
    X_train, X_cal, y_train, y_cal = digits_split
    model = LogisticRegression(max_iter=500).fit(X_train, y_train)
    calibrated = TemperatureCalibratedClassifier(model, method=method).fit(X_cal, y_cal)
    logits = model.decision_function(X_cal)
    if method == "bcts":
        temperature, bias = fit_bias_corrected_temperature(logits, y_cal)
        np.testing.assert_allclose(calibrated.bias_, bias)
    else:
        temperature, bias = fit_temperature(logits, y_cal, method=method), None
        assert not hasattr(calibrated, "bias_")
    assert calibrated.temperature_ == temperature
    np.testing.assert_allclose(
        calibrated.predict_proba(X_cal),
        softmax(logits / temperature + (bias if bias is not None else 0), axis=1),
    )


def test_unfitted_model_is_fitted_then_calibrated(digits_split):
    """An unfitted model is cloned and fitted in fit; the original stays unfitted."""
    X_train, _, y_train, _ = digits_split
    model = LogisticRegression(max_iter=500)
    calibrated = TemperatureCalibratedClassifier(model, method="nll").fit(
        X_train, y_train
    )
    assert calibrated.estimator_ is not model
    assert not hasattr(model, "coef_")
    assert calibrated.predict(X_train).shape == y_train.shape


def test_probability_only_model_uses_log_proba(digits_split):
    """Without decision_function the logits are log(predict_proba), zeros kept."""
    X_train, X_cal, y_train, y_cal = digits_split
    forest = RandomForestClassifier(n_estimators=20, random_state=0).fit(
        X_train, y_train
    )
    calibrated = TemperatureCalibratedClassifier(forest).fit(X_cal, y_cal)
    proba = forest.predict_proba(X_cal)
    assert (proba == 0).any()
    powered = proba ** (1 / calibrated.temperature_)
    np.testing.assert_allclose(
        calibrated.predict_proba(X_cal), powered / powered.sum(axis=1, keepdims=True)
    )
    with np.errstate(divide="ignore"):
        assert calibrated.temperature_ == fit_temperature(np.log(proba), y_cal)


def test_binary_decision_function_model():
    """A binary model's 1-D decision_function is read as (0, s)."""
    X, y = make_classification(n_samples=400, flip_y=0.2, random_state=1)
    model = LogisticRegression().fit(X[:200], y[:200])
    calibrated = TemperatureCalibratedClassifier(model).fit(X[200:], y[200:])
    score = model.decision_function(X[200:])
    assert calibrated.temperature_ == fit_temperature(score, y[200:])
    np.testing.assert_allclose(
        calibrated.predict_proba(X[200:])[:, 1],
        1 / (1 + np.exp(-score / calibrated.temperature_)),
    )


def test_string_labels():
    """String labels are encoded by the wrapper, in the model's class order."""
    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    model = GaussianNB().fit(X[::2], names[::2])
    calibrated = TemperatureCalibratedClassifier(model, method="bcts").fit(
        X[1::2], names[1::2]
    )
    assert set(calibrated.predict(X)) <= set(names)
    np.testing.assert_array_equal(calibrated.classes_, model.classes_)


def test_nesting_in_can(digits_split):
    """CANClassifier(TemperatureCalibratedClassifier(model)) fits and predicts."""
    X_train, X_cal, y_train, y_cal = digits_split
    model = LogisticRegression(max_iter=500).fit(X_train, y_train)
    inner = TemperatureCalibratedClassifier(model).fit(X_cal, y_cal)
    nested = CANClassifier(inner).fit(X_cal, y_cal)
    proba = nested.predict_proba(X_cal)
    np.testing.assert_allclose(proba.sum(axis=1), 1)
    # The calibrated probabilities are what CAN starts from.
    confident = inner.predict_proba(X_cal).max(axis=1) > 0.999
    np.testing.assert_allclose(proba[confident], inner.predict_proba(X_cal)[confident])


def test_sample_weight_reaches_the_calibration(digits_split):
    """Integer sample weights in fit equal repeated held-out rows."""
    X_train, X_cal, y_train, y_cal = digits_split
    model = LogisticRegression(max_iter=500).fit(X_train, y_train)
    counts = np.random.default_rng(0).integers(0, 3, size=len(y_cal))
    weighted = TemperatureCalibratedClassifier(model, method="bcts").fit(
        X_cal, y_cal, sample_weight=counts
    )
    repeated = TemperatureCalibratedClassifier(model, method="bcts").fit(
        np.repeat(X_cal, counts, axis=0), np.repeat(y_cal, counts)
    )
    assert weighted.temperature_ == pytest.approx(repeated.temperature_, rel=1e-6)
    np.testing.assert_allclose(weighted.bias_, repeated.bias_, atol=1e-6)


def test_no_root_warning_in_estimator():
    """A model with no error on the fit data makes EC warn (not fail)."""
    X, y = load_iris(return_X_y=True)
    keep = y != 1  # setosa vs virginica: separable
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # (a converged model)
        model = LogisticRegression().fit(X[keep], y[keep])
    with pytest.warns(UserWarning, match="no error"):
        TemperatureCalibratedClassifier(model).fit(X[keep], y[keep])


class ScaledLogisticRegression(LogisticRegression):
    """LogisticRegression whose decision_function is scaled and cast (test double)."""

    def __init__(self, scale=1.0, dtype=np.float64, max_iter=500):
        super().__init__(max_iter=max_iter)
        self.scale = scale
        self.dtype = dtype

    def decision_function(self, X):
        return (self.scale * super().decision_function(X)).astype(self.dtype)


@pytest.mark.parametrize("method", ["ec", "nll", "bcts"])
@pytest.mark.parametrize("scale, dtype", [(1e4, np.float64), (1.0, np.float32)])
def test_estimator_with_huge_or_float32_logits(method, scale, dtype, digits_split):
    """Logits of order 1e4 scale T by 1e4; float32 logits fit like float64."""
    X_train, X_cal, y_train, y_cal = digits_split
    base = ScaledLogisticRegression().fit(X_train, y_train)
    other = ScaledLogisticRegression(scale=scale, dtype=dtype).fit(X_train, y_train)
    assert np.abs(other.decision_function(X_cal)).max() > 1e3 or dtype == np.float32
    fitted = TemperatureCalibratedClassifier(base, method=method).fit(X_cal, y_cal)
    scaled = TemperatureCalibratedClassifier(other, method=method).fit(X_cal, y_cal)
    rel = 1e-4 if (method == "bcts" or dtype == np.float32) else 1e-9
    assert scaled.temperature_ == pytest.approx(scale * fitted.temperature_, rel=rel)
    proba = scaled.predict_proba(X_cal)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba, fitted.predict_proba(X_cal), atol=1e-4)


def _logits_at_exact_chance(n=300, n_classes=3, seed=0):
    """Random logits and labels with accuracy exactly 1 / n_classes."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, n_classes))
    predicted = logits.argmax(axis=1)
    y = (predicted + 1) % n_classes
    y[: n // n_classes] = predicted[: n // n_classes]
    assert np.mean(predicted == y) * n_classes == 1
    return logits, y


@pytest.mark.parametrize("method", ["ec", "nll"])
def test_accuracy_exactly_at_chance_warns_whatever_the_row_order(method):
    """At accuracy exactly 1/K, EC has no temperature (its limit at T -> inf is
    0, computed as a few 1e-17 of either sign): every row order warns and
    returns the same clipped T. (NLL on the same data has a root or not, but
    never depends on the row order beyond rounding.)"""
    logits, y = _logits_at_exact_chance()
    temperatures = []
    for seed in range(5):
        order = np.random.default_rng(seed).permutation(len(y))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            temperatures.append(fit_temperature(logits[order], y[order], method=method))
        if method == "ec":
            assert any("infinity" in str(w.message) for w in caught)
    if method == "ec":
        assert len(set(temperatures)) == 1
        spread = (logits.max(axis=1) - logits.min(axis=1)).max()
        assert temperatures[0] == pytest.approx(spread * 1e3)
    else:
        np.testing.assert_allclose(temperatures, temperatures[0], rtol=1e-9)


@pytest.mark.parametrize(("n", "n_classes"), [(1000, 10), (20000, 100), (300, 3)])
def test_bcts_on_random_logits_warns(n, n_classes):
    """Logits independent of the labels: BCTS warns (likelihood ratio against
    the class biases alone), even where T stays finite (T ~ 400 on 20,000 x
    100, where the old test of T against the logits' spread was silent)."""
    rng = np.random.default_rng(n)
    logits = rng.normal(size=(n, n_classes))
    y = rng.integers(0, n_classes, size=n)
    with pytest.warns(UserWarning, match="no better than chance"):
        fit_bias_corrected_temperature(logits, y)


def test_bcts_on_logits_equal_within_rows_warns_only_its_own_warning():
    """Logits equal within every row: T = 1 and the class biases, with the
    "no better than chance" warning alone. NumPy's divide-by-zero warning
    leaked three times before it (the Newton step in log a is exactly 0)."""
    y = np.random.default_rng(0).integers(0, 3, 500)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.warns(UserWarning, match="no better than chance"):
            temperature, bias = fit_bias_corrected_temperature(np.zeros((500, 3)), y)
    assert temperature == 1.0
    counts = np.bincount(y, minlength=3)
    np.testing.assert_allclose(bias, np.log(counts) - np.log(counts).mean(), atol=1e-6)


@pytest.mark.parametrize("name", ["lenet-5-cifar-100", "wideresnet-16-4-cifar-10"])
def test_bcts_on_real_logits_does_not_warn(name):
    """Real model outputs, even a weak model, on 500 rows and at least 10 per
    parameter (T and the biases: K) do not warn."""
    proba, y = load_model_outputs(name)
    n_rows = max(500, 10 * proba.shape[1])
    logits = np.log(proba[:n_rows].astype(np.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        temperature, _ = fit_bias_corrected_temperature(logits, y[:n_rows])
    assert 0.1 < temperature < 10


def test_bcts_on_few_rows_per_parameter_warns():
    """K = 30 classes on 60 rows: the 30 parameters over-fit (on new rows the
    biases do worse than a temperature alone), and it says so."""
    rng = np.random.default_rng(0)
    y = np.arange(60) % 30
    logits = 2.0 * np.eye(30)[y] + rng.normal(size=(60, 30))
    with pytest.warns(UserWarning, match="fits 30 free parameters on 60"):
        fit_bias_corrected_temperature(logits, y)


def test_cross_val_predict_with_string_labels_around_a_fitted_model():
    """cross_val_predict label-encodes y for predict_proba; the wrapper reads the
    codes as column positions, as CalibratedClassifierCV(FrozenEstimator(model))
    does, and gives the probabilities of the same call with the string labels."""
    from sklearn.model_selection import KFold, cross_val_predict

    X, y = make_classification(
        n_samples=400, n_classes=3, n_informative=3, flip_y=0.2, random_state=0
    )
    names = np.array(["ant", "bee", "cat"])[y]
    model = LogisticRegression(max_iter=1000).fit(X[::2], names[::2])
    X_val, names_val = X[1::2], names[1::2]
    folds = KFold(3, shuffle=True, random_state=0)
    with pytest.warns(UserWarning, match="read as column positions"):
        proba = cross_val_predict(
            TemperatureCalibratedClassifier(model, method="nll"),
            X_val,
            names_val,
            cv=folds,
            method="predict_proba",
        )
    expected = np.empty_like(proba)
    for train, test in folds.split(X_val):
        wrapper = TemperatureCalibratedClassifier(model, method="nll")
        wrapper.fit(X_val[train], names_val[train])
        expected[test] = wrapper.predict_proba(X_val[test])
    np.testing.assert_allclose(proba, expected, rtol=1e-12)
    if parse_version(sklearn.__version__) < parse_version("1.8"):
        return  # (the reference below needs CalibratedClassifierCV's temperature)
    reference = cross_val_predict(
        CalibratedClassifierCV(FrozenEstimator(model), method="temperature"),
        X_val,
        names_val,
        cv=folds,
        method="predict_proba",
    )
    assert reference.shape == proba.shape


@pytest.mark.parametrize("method", ["ec", "nll"])
def test_temperature_on_a_tiny_fit_set_warns(method):
    """A temperature from fewer than 10 rows is mostly noise (from 10 rows it
    made new data's log loss worse in 35 of 200 draws): a warning, as the
    class-wise fits give; none from 10 rows on."""
    rng = np.random.default_rng(3)
    y = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    logits = rng.normal(size=(8, 3)) + 0.5 * np.eye(3)[y]
    with pytest.warns(UserWarning, match="fits 1 free parameter on 8"):
        fit_temperature(logits, y, method=method)
    y = np.r_[y, 2, 0]
    logits = rng.normal(size=(10, 3)) + 0.5 * np.eye(3)[y]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_temperature(logits, y, method=method)
