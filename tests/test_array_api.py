"""Every public array function on arrays of other libraries (the array API).

Each function is run on NumPy, ``array-api-strict`` and PyTorch (CPU) arrays,
in float32 and float64, and compared with the NumPy path (itself tested
against naive implementations in the other test modules): the values agree
within 1e-12 (float64) or 1e-5 (float32), and the output is an array of the
input's namespace, on its device, in its floating dtype.
"""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from skprior import (
    adjust_to_prior,
    alternating_normalization,
    bbse_test_prior,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    fit_dirichlet_calibration,
    fit_temperature,
    fit_vector_scaling,
    joint_confusion_matrix,
    softmax_dirichlet_calibration,
    softmax_temperature,
    softmax_vector_scaling,
    topk_entropy,
)
from skprior.metrics import expected_calibration_error, reliability_curve
from tests._namespaces import run_under_dispatch

array_api_compat = pytest.importorskip("array_api_compat")

BACKENDS = ["numpy", "array_api_strict", "torch"]
DTYPES = [np.float32, np.float64]
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12}


def _convert(backend):
    if backend == "numpy":
        return np.asarray
    module = pytest.importorskip(backend)
    return module.asarray


@pytest.fixture(params=BACKENDS)
def to_backend(request):
    """Converts a NumPy array to the backend's array (CPU device)."""
    return _convert(request.param)


@pytest.fixture(params=DTYPES, ids=["float32", "float64"])
def dtype(request):
    return request.param


@pytest.fixture(scope="module")
def outputs(cifar10):
    """1,500 CIFAR-10 posteriors (WideResNet) and their labels."""
    proba, labels = cifar10
    return proba[:1500].astype(np.float64), labels[:1500]


@pytest.fixture(scope="module")
def logits_data():
    """Over-confident synthetic logits with a -inf entry and zero weights."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, size=1500)
    logits = 3.0 * (rng.normal(size=(1500, 4)) + 1.5 * np.eye(4)[y])
    logits[0, (y[0] + 1) % 4] = -np.inf
    logits[5, y[5]] = -np.inf  # a true class at probability 0
    weights = rng.random(1500)
    weights[:10] = 0.0
    return logits, y, weights


def _assert_like(result, like, expected):
    """``result`` is an array of the namespace and device of ``like``, with the
    dtype of the NumPy result ``expected`` (the input's for maps, float64 for
    priors, biases and per-row values, as on the NumPy path)."""
    xp = array_api_compat.array_namespace(like)
    assert array_api_compat.array_namespace(result) is xp
    assert array_api_compat.device(result) == array_api_compat.device(like)
    wanted = xp.float32 if expected.dtype == np.float32 else xp.float64
    assert result.dtype == wanted


def _host(array):
    if hasattr(array, "detach"):
        return array.detach().cpu().numpy()
    return np.asarray(array)


def _close(actual, expected, dtype, scale=1.0):
    np.testing.assert_allclose(
        _host(actual), expected, rtol=0, atol=TOLERANCE[dtype] * scale
    )


# -- temperature -----------------------------------------------------------------------


def test_softmax_temperature(to_backend, dtype, logits_data):
    """softmax(z / T + b) equals the NumPy result, in the input's namespace."""
    logits = logits_data[0].astype(dtype)
    bias = np.array([0.3, -0.1, 0.0, -0.2])
    expected = softmax_temperature(logits, 1.7, bias)
    result = softmax_temperature(to_backend(logits), 1.7, bias)
    _assert_like(result, to_backend(logits), expected)
    _close(result, expected, dtype)


def test_softmax_temperature_binary_score(to_backend, dtype):
    """A 1-D score s stands for the rows (0, s) on every backend."""
    score = np.linspace(-3, 3, 11).astype(dtype)
    result = softmax_temperature(to_backend(score), 2.0)
    _close(result, softmax_temperature(score, 2.0), dtype)


@pytest.mark.parametrize("method", ["ec", "nll"])
def test_fit_temperature(to_backend, dtype, logits_data, method):
    """EC and NLL temperatures equal NumPy's, with zero weights and -inf."""
    logits, y, weights = logits_data
    logits = logits.astype(dtype)
    expected = fit_temperature(logits, y, method=method, sample_weight=weights)
    result = fit_temperature(
        to_backend(logits), to_backend(y), method=method, sample_weight=weights
    )
    assert isinstance(result, float)
    assert abs(result - expected) <= TOLERANCE[np.float64] * expected


def test_fit_bias_corrected_temperature(to_backend, dtype, logits_data):
    """BCTS temperature and biases equal NumPy's; biases in the namespace."""
    logits, y, weights = logits_data
    logits = logits.astype(dtype) - np.array([1.0, 0.0, 0.0, 0.0], dtype=dtype)
    expected_t, expected_b = fit_bias_corrected_temperature(
        logits, y, sample_weight=weights
    )
    temperature, bias = fit_bias_corrected_temperature(
        to_backend(logits), y, sample_weight=weights
    )
    assert abs(temperature - expected_t) <= 1e-8 * expected_t
    _assert_like(bias, to_backend(logits), expected_b)
    _close(bias, expected_b, dtype, scale=1e4 if dtype == np.float64 else 1)


@pytest.mark.parametrize("backend", ["array_api_strict", "torch"])
def test_bcts_separability_warning_as_on_numpy(backend, logits_data):
    """BCTS warns on fit data it separates in every namespace, as on NumPy.

    And stays quiet where NumPy does (the held-out ``logits_data``).
    """
    to_backend = _convert(backend)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=300)
    separable = 3 * np.eye(3)[y] + 0.3 * rng.normal(size=(300, 3))
    with pytest.warns(UserWarning, match="was fitted on data it separates"):
        fit_bias_corrected_temperature(separable, y)
    with pytest.warns(UserWarning, match="was fitted on data it separates"):
        fit_bias_corrected_temperature(to_backend(separable), y)
    logits, y, weights = logits_data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_bias_corrected_temperature(logits, y, sample_weight=weights)
        fit_bias_corrected_temperature(to_backend(logits), y, sample_weight=weights)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bcts_chance_warning_in_every_namespace(backend):
    """Logits no better than chance: BCTS warns in every namespace (same T)."""
    to_backend = _convert(backend)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=400)
    logits = rng.normal(size=(400, 3))  # independent of y
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected, _ = fit_bias_corrected_temperature(logits, y)
    with pytest.warns(UserWarning, match="no better than chance"):
        temperature, _ = fit_bias_corrected_temperature(to_backend(logits), y)
    assert abs(temperature - expected) <= 1e-8 * expected


def _exactly_at_chance(method, rng):
    """Logits whose limit at T -> infinity is 0 in exact arithmetic.

    EC: accuracy exactly 1/3. NLL: each row (0, -a) twice, once of each
    class, so that the terms ``mean(d) - d_true`` are +a/2 and -a/2.
    """
    if method == "ec":
        logits = rng.normal(size=(300, 3))
        y = np.argmax(logits, axis=1)
        y[:200] = (y[:200] + 1 + rng.integers(0, 2, size=200)) % 3
        return logits, y
    gaps = np.tile(rng.uniform(0.5, 3.0, size=150), 2)
    return np.column_stack([np.zeros(300), -gaps]), np.repeat([0, 1], 150)


@pytest.mark.parametrize("method", ["ec", "nll"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_limits_at_chance_warn_in_every_namespace(backend, method):
    """A limit exactly 0 comes out as a few 1e-17 of either sign: within its
    rounding bound it counts as 0 in every namespace (the same warning, the
    same T), whatever the order of the rows."""
    to_backend = _convert(backend)
    rng = np.random.default_rng(3)
    logits, y = _exactly_at_chance(method, rng)
    for order in (np.arange(300), *(rng.permutation(300) for _ in range(5))):
        with pytest.warns(UserWarning, match="uniform|no better than chance"):
            expected = fit_temperature(logits[order], y[order], method=method)
        with pytest.warns(UserWarning, match="uniform|no better than chance"):
            result = fit_temperature(to_backend(logits[order]), y[order], method=method)
        assert result == pytest.approx(expected, rel=1e-12)


# -- class-wise calibration ----------------------------------------------------------

CLASSWISE_FITS = {
    "vs": lambda z, y, w: fit_vector_scaling(z, y, sample_weight=w),
    "nbvs": lambda z, y, w: fit_vector_scaling(z, y, bias=False, sample_weight=w),
    "dirichlet": lambda z, y, w: fit_dirichlet_calibration(
        z, y, reg_lambda=1.0, sample_weight=w
    ),
}


@pytest.mark.parametrize("method", list(CLASSWISE_FITS))
def test_classwise_fits(to_backend, dtype, logits_data, method):
    """Vector scaling and Dirichlet fits equal NumPy's (to L-BFGS's tolerance),
    and come back in the namespace and on the device of the logits."""
    logits, y, weights = logits_data
    logits = logits.astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the same warnings: not the point here)
        expected = CLASSWISE_FITS[method](logits, y, weights)
        result = CLASSWISE_FITS[method](to_backend(logits), to_backend(y), weights)
    for fitted, reference in zip(result, expected, strict=True):
        _assert_like(fitted, to_backend(logits), reference)
        np.testing.assert_allclose(_host(fitted), reference, rtol=0, atol=1e-8)


def test_classwise_maps(to_backend, dtype, logits_data):
    """softmax(w * z + b) and softmax(W log p + b) equal NumPy's, in the
    namespace and dtype of the logits, with parameters of that namespace."""
    logits = logits_data[0].astype(dtype)
    factors, bias = np.array([0.5, 1.0, -1.5, 2.0]), np.array([0.3, -0.1, 0.0, -0.2])
    matrix = np.eye(4) + 0.1 * np.arange(16).reshape(4, 4) / 16
    like = to_backend(logits)
    for apply, parameters in (
        (softmax_vector_scaling, (factors, bias)),
        (softmax_dirichlet_calibration, (matrix, bias)),
    ):
        expected = apply(logits, *parameters)
        result = apply(like, *(to_backend(p) for p in parameters))
        _assert_like(result, like, expected)
        _close(result, expected, dtype)


# -- prior adaptation ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "solver"),
    [("mle", "em"), ("mle", "squarem"), ("mle", "pga"), ("map", "em")],
)
def test_estimate_test_prior(to_backend, dtype, outputs, method, solver):
    """Every solver reaches NumPy's estimate with the same number of passes."""
    proba = outputs[0][:600].astype(dtype)
    train = np.full(10, 0.1)
    kwargs = dict(method=method, solver=solver, tol=1e-13, max_iter=100_000)
    expected = estimate_test_prior(proba, train, **kwargs)
    result = estimate_test_prior(to_backend(proba), train, **kwargs)
    _assert_like(result.prior, to_backend(proba), expected.prior)
    _close(result.prior, expected.prior, dtype)
    assert result.converged == expected.converged
    assert abs(result.objective - expected.objective) <= 1e-12


def test_adjust_to_prior(to_backend, dtype, outputs):
    """Bayes' rule to a new prior equals NumPy's, zero test-prior entries too."""
    proba = outputs[0].astype(dtype)
    train = np.full(10, 0.1)
    test = np.r_[np.full(5, 0.2), np.zeros(5)]
    expected = adjust_to_prior(proba, train, test)
    result = adjust_to_prior(to_backend(proba), train, test)
    _assert_like(result, to_backend(proba), expected)
    _close(result, expected, dtype)


def test_bbse_test_prior(to_backend, dtype, outputs):
    """BBSE's estimate equals NumPy's."""
    proba = outputs[0].astype(dtype)
    rng = np.random.default_rng(1)
    confusion = np.eye(10) * 0.08 + rng.random((10, 10)) * 0.002
    confusion /= confusion.sum()
    expected = bbse_test_prior(proba, confusion)
    result = bbse_test_prior(to_backend(proba), confusion)
    _assert_like(result, to_backend(proba), expected)
    _close(result, expected, dtype)


# -- CAN -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["renormalized", "unrenormalized", "max_over_k"])
def test_topk_entropy(to_backend, dtype, outputs, kind):
    """Each uncertainty equals NumPy's (top-k by torch.topk or a sort)."""
    proba = outputs[0].astype(dtype)
    expected = topk_entropy(proba, 3, kind=kind)
    result = topk_entropy(to_backend(proba), 3, kind=kind)
    _assert_like(result, to_backend(proba), expected)
    _close(result, expected, dtype)


@pytest.mark.parametrize(
    ("n_iter", "alpha", "with_reference"),
    [(1, 1.0, False), (1, 40.0, False), (3, 2.0, False), (2, 1.0, True)],
)
def test_alternating_normalization(
    to_backend, dtype, outputs, n_iter, alpha, with_reference
):
    """CAN equals NumPy's: the closed form, its log form (alpha = 40), the
    iteration, and a reference set."""
    proba = outputs[0][:400].astype(dtype)
    reference = outputs[0][1000:1300].astype(dtype) if with_reference else None
    prior = np.full(10, 0.1)
    kwargs = dict(tau=0.3, alpha=alpha, n_iter=n_iter, reference=reference)
    expected = alternating_normalization(proba, prior, **kwargs)
    result = alternating_normalization(to_backend(proba), prior, **kwargs)
    _assert_like(result, to_backend(proba), expected)
    _close(result, expected, dtype, scale=10)


def test_alternating_normalization_log_domain_rows(to_backend):
    """Rows whose factored iteration loses digits (alpha**d = 3125) are
    redone in logs, as on the NumPy path."""
    rng = np.random.default_rng(3)
    proba = rng.dirichlet(np.full(6, 0.3), size=60)
    prior = np.full(6, 1 / 6)
    kwargs = dict(tau=0.4, alpha=5.0, n_iter=5)
    expected = alternating_normalization(proba, prior, **kwargs)
    result = alternating_normalization(to_backend(proba), prior, **kwargs)
    _close(result, expected, np.float64, scale=1e3)


@pytest.mark.parametrize("n_iter", [1, 2])
def test_alternating_normalization_reference_weight(to_backend, outputs, n_iter):
    """Weighted reference rows (weights on the host or the device) give
    NumPy's result, a weight of 2 counting a row twice."""
    proba, reference = outputs[0][:200], outputs[0][1000:1300]
    weight = np.arange(300) % 3
    prior = np.full(10, 0.1)
    kwargs = dict(tau=0.3, n_iter=n_iter)
    expected = alternating_normalization(
        proba, prior, reference=reference, reference_weight=weight, **kwargs
    )
    for given in (weight, to_backend(weight.astype(np.float64))):
        result = alternating_normalization(
            to_backend(proba),
            prior,
            reference=reference,
            reference_weight=given,
            **kwargs,
        )
        _close(result, expected, np.float64, scale=10)


def test_alternating_normalization_same_warning_and_errors(to_backend, outputs):
    """No confident row warns as on NumPy (every corrected row the prior on
    its support); a reference with other columns and reference_weight without
    reference are refused with NumPy's messages."""
    proba, prior = outputs[0][:50], np.full(10, 0.1)
    with pytest.warns(UserWarning, match="no confident reference row"):
        expected = alternating_normalization(proba, prior, tau=0.0)
    with pytest.warns(UserWarning, match="no confident reference row"):
        result = alternating_normalization(to_backend(proba), prior, tau=0.0)
    _close(result, expected, np.float64)
    with pytest.raises(ValueError, match="reference has 9 columns but proba has 10"):
        alternating_normalization(
            to_backend(proba), prior, reference=np.full((4, 9), 1 / 9)
        )
    with pytest.raises(ValueError, match="but no reference was given"):
        alternating_normalization(to_backend(proba), prior, reference_weight=[1.0])


# -- calibration metrics --------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("kind", ["top_label", "classwise"])
def test_expected_calibration_error(to_backend, dtype, outputs, strategy, kind):
    """ECE equals NumPy's, weighted, for both bin strategies and kinds."""
    proba, labels = outputs
    proba = proba.astype(dtype)
    weights = np.random.default_rng(2).random(len(labels))
    kwargs = dict(strategy=strategy, kind=kind, sample_weight=weights)
    expected = expected_calibration_error(labels, proba, **kwargs)
    result = expected_calibration_error(
        to_backend(labels.astype(np.int64)), to_backend(proba), **kwargs
    )
    assert isinstance(result, float)
    assert abs(result - expected) <= 1e-12


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_reliability_curve(to_backend, dtype, outputs, strategy):
    """The per-bin accuracy, confidence and weight equal NumPy's."""
    proba, labels = outputs
    proba = proba.astype(dtype)
    expected = reliability_curve(labels, proba, strategy=strategy)
    result = reliability_curve(
        to_backend(labels.astype(np.int64)), to_backend(proba), strategy=strategy
    )
    for actual, wanted in zip(result, expected, strict=True):
        _assert_like(actual, to_backend(proba), wanted)
        _close(actual, wanted, dtype)


# -- validation on the device ----------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p * 2, "must sum to 1"),
        (lambda p: p - p.max(), "negative values"),
        (lambda p: np.where(p > 0.9, np.nan, p), "NaN or infinite"),
    ],
)
def test_bad_probabilities_refused_in_namespace(to_backend, outputs, change, message):
    """Probabilities that are not probabilities raise NumPy's errors."""
    proba = change(outputs[0][:50].copy())
    with pytest.raises(ValueError, match=message):
        adjust_to_prior(to_backend(proba), np.full(10, 0.1), np.full(10, 0.1))


def test_bad_logits_refused_in_namespace(to_backend, logits_data):
    """NaN logits raise the NumPy error with the row."""
    logits = logits_data[0].copy()
    logits[7, 2] = np.nan
    with pytest.raises(ValueError, match="first in row 7"):
        fit_temperature(to_backend(logits), logits_data[1])


def test_labels_out_of_range_refused(to_backend, logits_data):
    """Labels outside the columns raise, as on the NumPy path."""
    logits, y, _ = logits_data
    y = y.copy()
    y[3] = 9
    with pytest.raises(ValueError, match="outside 0..3"):
        fit_temperature(to_backend(logits), to_backend(y))


def test_caller_array_not_modified(to_backend, outputs):
    """The input array is left as it was."""
    proba = outputs[0][:100].copy()
    array = to_backend(proba)
    alternating_normalization(array, np.full(10, 0.1), tau=0.3)
    softmax_temperature(array, 2.0)
    np.testing.assert_array_equal(_host(array), proba)


def test_mixed_libraries_refused():
    """Arrays of two libraries in one call are refused with the fix."""
    torch = pytest.importorskip("torch")
    strict = pytest.importorskip("array_api_strict")
    proba = np.full((4, 2), 0.5)
    with pytest.raises(TypeError, match="different libraries"):
        alternating_normalization(
            torch.asarray(proba), [0.5, 0.5], reference=strict.asarray(proba)
        )


def test_labels_and_weights_of_another_library_refused():
    """Labels or weights of one library with data of another were internal
    errors ("len() of unsized object", "Cannot interpret 'torch.int64'"):
    refused, naming the argument and both libraries. NumPy labels and
    weights are taken with any data."""
    torch = pytest.importorskip("torch")
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(0)
    logits, y = rng.normal(size=(100, 3)), rng.integers(0, 3, 100)
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    cases = [
        (
            lambda: fit_temperature(torch.asarray(logits), da.from_array(y)),
            "y is an array of dask",
        ),
        (
            lambda: joint_confusion_matrix(torch.asarray(proba), da.from_array(y)),
            "y is",
        ),
        (
            lambda: fit_temperature(
                torch.asarray(logits), y, sample_weight=da.ones(100, chunks=50)
            ),
            "sample_weight is an array of dask and the data one of torch",
        ),
        (
            lambda: fit_temperature(
                da.from_array(logits, chunks=50), y, sample_weight=torch.ones(100)
            ),
            "sample_weight is an array of torch",
        ),
    ]
    for call, message in cases:
        with pytest.raises(TypeError, match=message):
            call()
    expected = fit_temperature(logits, y, sample_weight=np.arange(100.0) + 1)
    found = fit_temperature(
        torch.asarray(logits), y, sample_weight=np.arange(100.0) + 1
    )
    assert float(found) == pytest.approx(float(expected), rel=1e-10)


def test_stream_takes_batches_of_another_library():
    """CumulativePrior's window (the last rows) follows a batch of another
    library: torch after NumPy (or Dask) failed in torch.cat. Same estimate as
    NumPy throughout, prior_ in the latest batch's library."""
    torch = pytest.importorskip("torch")
    da = pytest.importorskip("dask.array")
    from skprior import CumulativePrior

    rng = np.random.default_rng(0)
    z = rng.normal(size=(400, 5)) * 2
    proba = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    reference = CumulativePrior(np.full(5, 0.2), budget=150)
    for batch in np.split(proba, 4):
        reference.update(batch)
    to = {
        "numpy": np.asarray,
        "torch": torch.asarray,
        "dask": lambda a: da.from_array(a, chunks=50),
    }
    for order in (
        ["numpy", "torch", "dask", "torch"],
        ["dask", "torch", "numpy", "dask"],
    ):
        tracker = CumulativePrior(np.full(5, 0.2), budget=150)
        for name, batch in zip(order, np.split(proba, 4), strict=True):
            tracker.update(to[name](batch))
        assert type(tracker.prior_).__module__.startswith(order[-1])
        np.testing.assert_allclose(
            np.asarray(tracker.prior_), reference.prior_, rtol=1e-10
        )


# -- the wrappers with scikit-learn's array API dispatch ------------------------------

_WRAPPER_SCRIPT = textwrap.dedent(
    """
    import numpy as np, sklearn, torch
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from skprior import (CANClassifier, PriorAdaptedClassifier,
                         TemperatureCalibratedClassifier)

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=300)
    X = rng.normal(size=(300, 4)) + y[:, None]
    X_t, y_t = torch.asarray(X), torch.asarray(y)
    prior = [1 / 3, 1 / 3, 1 / 3]
    calibrations = ("ec", "nll", "bcts", "nbvs", "vs", "dirichlet")
    for make in (
        lambda m: PriorAdaptedClassifier(m, method="mle", train_prior=prior),
        lambda m: CANClassifier(m, tau=0.5, train_prior=prior),
        *(
            lambda m, c=c: TemperatureCalibratedClassifier(m, method=c)
            for c in calibrations
        ),
    ):
        with sklearn.config_context(array_api_dispatch=True):
            wrapper = make(LinearDiscriminantAnalysis()).fit(X_t, y_t)
            out = wrapper.predict_proba(X_t)
            log_out, predicted = wrapper.predict_log_proba(X_t), wrapper.predict(X_t)
        assert isinstance(out, torch.Tensor), (type(wrapper), type(out))
        assert isinstance(log_out, torch.Tensor) and isinstance(predicted, torch.Tensor)
        fitted = make(LinearDiscriminantAnalysis()).fit(X, y)
        expected = fitted.predict_proba(X)
        # (the L-BFGS fits agree to the optimiser's tolerance)
        lbfgs = getattr(wrapper, "method", None) in calibrations[2:]
        tol = 1e-6 if lbfgs else 1e-8
        assert np.abs(out.numpy() - expected).max() < tol, type(wrapper)
        assert np.abs(log_out.numpy() - fitted.predict_log_proba(X)).max() < tol
        assert (predicted.numpy() == fitted.predict(X)).all(), type(wrapper)
    print("ok")
    """
)


def test_wrappers_keep_the_namespace():
    """With array_api_dispatch=True and an inner model that returns torch
    tensors, each wrapper's predict_proba (and predict_log_proba, predict) is
    a torch tensor equal to the NumPy one (in a subprocess: SciPy reads
    SCIPY_ARRAY_API at import)."""
    pytest.importorskip("torch")
    done = run_under_dispatch("-c", _WRAPPER_SCRIPT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")


def test_works_without_the_optional_libraries():
    """skprior imports and runs on NumPy with Dask, PyTorch and
    array-api-strict unavailable (they are imported only when used;
    array-api-compat is a dependency)."""
    script = textwrap.dedent(
        """
        import sys

        class Absent:  # an import hook: these packages are not installed
            NAMES = ("array_api_strict", "dask", "torch")

            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in self.NAMES:
                    raise ImportError(f"No module named {name!r}")

        sys.meta_path.insert(0, Absent())
        import numpy as np
        from skprior import adjust_to_prior, estimate_test_prior
        proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
        prior = estimate_test_prior(proba, [0.5, 0.5]).prior
        print(adjust_to_prior(proba, [0.5, 0.5], prior).shape)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "(3, 2)"
