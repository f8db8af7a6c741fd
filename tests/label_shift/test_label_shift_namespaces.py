"""Label shift on arrays of other libraries: the same values, in their namespace.

The functions that only took NumPy arrays before (the source prior, the
confusion matrix, RLLS, the test of no shift, the effective training prior)
and the stream (the trackers, and the wrapper's ``update_prior`` /
``predict_proba_online`` / ``reset_prior``) are run on PyTorch (CPU, and CUDA
where there is a GPU), CuPy (where installed) and ``array-api-strict`` arrays
and compared with NumPy, whose own results the other modules test against
naive references.
"""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin

from skprior import (
    FLHFTL,
    CumulativePrior,
    FollowTheHistory,
    PriorAdaptedClassifier,
    effective_train_prior,
    estimate_source_prior,
    joint_confusion_matrix,
    label_shift_test,
    rlls_test_prior,
)

array_api_compat = pytest.importorskip("array_api_compat")

BACKENDS = ["array_api_strict", "torch", "torch-cuda", "cupy"]
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12}


class _Backend:
    """``asarray`` onto a library's (default) device."""

    def __init__(self, name):
        self.module = pytest.importorskip(name.partition("-")[0])
        self.device = None
        if name == "torch-cuda":
            if not self.module.cuda.is_available():
                pytest.skip("no CUDA device")
            self.device = "cuda"

    def asarray(self, array):
        if self.device is None:
            return self.module.asarray(array)
        return self.module.asarray(array, device=self.device)


@pytest.fixture(params=BACKENDS)
def backend(request):
    return _Backend(request.param)


@pytest.fixture(params=[np.float32, np.float64], ids=["float32", "float64"])
def dtype(request):
    return request.param


@pytest.fixture(scope="module")
def outputs(cifar10):
    """1,500 CIFAR-10 posteriors, renormalised in float64, and their labels."""
    proba, labels = cifar10
    proba = proba[:1500].astype(np.float64)
    return proba / proba.sum(axis=1, keepdims=True), labels[:1500]


def _host(array):
    if hasattr(array, "detach"):
        return array.detach().cpu().numpy()
    if hasattr(array, "get"):  # (CuPy)
        return array.get()
    return np.asarray(array)


def _check(result, like, expected, tolerance):
    """``result`` is an array of the namespace, device and float dtype of
    ``like`` (float64 for integer labels), equal to ``expected`` (NumPy's
    result, of the same dtype)."""
    xp = array_api_compat.array_namespace(like)
    assert array_api_compat.array_namespace(result) is xp
    assert array_api_compat.device(result) == array_api_compat.device(like)
    single = like.dtype == xp.float32
    assert result.dtype == (xp.float32 if single else xp.float64)
    assert expected.dtype == (np.float32 if single else np.float64)
    np.testing.assert_allclose(_host(result), expected, rtol=0, atol=tolerance)


def test_source_prior_and_confusion(backend, dtype, outputs):
    """estimate_source_prior, joint_confusion_matrix and RLLS return arrays
    of the caller's library with NumPy's values."""
    proba, labels = outputs
    proba = proba.astype(dtype)
    weights = np.random.default_rng(0).random(len(labels))
    p, y, w = (backend.asarray(a) for a in (proba, labels, weights))
    tol = TOLERANCE[dtype]
    for source in ("labels", "mean_posterior"):
        expected = estimate_source_prior(proba, labels, source=source)
        _check(estimate_source_prior(p, y, source=source), p, expected, tol)
        expected = estimate_source_prior(
            proba, labels, source=source, sample_weight=weights
        )
        result = estimate_source_prior(p, y, source=source, sample_weight=w)
        _check(result, p, expected, tol)
    expected = joint_confusion_matrix(proba, labels, sample_weight=weights)
    confusion = joint_confusion_matrix(p, y, sample_weight=w)
    _check(confusion, p, expected, 1e-12)  # (counts: exact in every dtype)
    expected = joint_confusion_matrix(proba, labels)
    confusion = joint_confusion_matrix(p, y)
    _check(confusion, p, expected, 0)
    expected = rlls_test_prior(proba[:300], expected)
    _check(rlls_test_prior(p[:300, :], _host(confusion)), p, expected, 1e-9)


def test_source_prior_refuses_bad_labels_in_namespace(backend, outputs):
    """Labels out of range are refused as on NumPy."""
    proba, labels = outputs
    p = backend.asarray(proba)
    bad = backend.asarray(np.where(np.arange(len(labels)) == 3, 10, labels))
    for call in (estimate_source_prior, joint_confusion_matrix):
        with pytest.raises(ValueError, match="outside 0..9"):
            call(p, bad)


def test_label_shift_test_and_effective_prior(backend, dtype, outputs):
    """The test of no shift gives NumPy's statistic for both references, and
    the effective training prior comes back in the namespace of y."""
    proba, labels = outputs
    proba = proba.astype(dtype)
    batch = proba[np.argsort(proba[:, 0])[-200:]]
    for reference in (proba[:1000], np.full(10, 0.1)):
        expected = label_shift_test(batch, reference)
        result = label_shift_test(backend.asarray(batch), backend.asarray(reference))
        assert result.shifted == expected.shifted and result.dof == expected.dof
        assert np.isclose(result.statistic, expected.statistic, rtol=1e-6)
    expected = effective_train_prior(labels, class_weight="balanced")
    y = backend.asarray(labels)
    _check(effective_train_prior(y, class_weight="balanced"), y, expected, 1e-15)


@pytest.mark.parametrize("budget", [200, 0])
def test_cumulative_prior_in_namespace(backend, dtype, outputs, budget):
    """CumulativePrior on batches of another library: the same estimate after
    every batch, within the budget (exact MLE) and past it (on-line EM)."""
    proba = outputs[0][:600].astype(dtype)
    q = np.full(10, 0.1)
    expected = CumulativePrior(q, budget=budget, tol=1e-12)
    tracker = CumulativePrior(backend.asarray(q), budget=budget, tol=1e-12)
    _check(tracker.prior_, backend.asarray(q), expected.prior_, 0)
    for batch in np.split(proba, 6):
        expected.update(batch)
        batch = backend.asarray(batch)
        _check(tracker.update(batch).prior_, batch, expected.prior_, 1e-9)
    assert (tracker.n_seen_, tracker.n_folded_) == (600, expected.n_folded_)


@pytest.mark.parametrize("make", [FollowTheHistory, FLHFTL])
def test_drift_trackers_in_namespace(backend, make):
    """FollowTheHistory and FLHFTL take estimates of any library and return
    their prediction in it."""
    rng = np.random.default_rng(0)
    estimates = rng.dirichlet(np.ones(4), size=20) * 1.2 - 0.05  # (< 0 too; sum 1)
    expected = make(np.full(4, 0.25))
    start = backend.asarray(np.full(4, 0.25))
    tracker = make(start)
    _check(tracker.prior_, start, expected.prior_, 0)
    for estimate in estimates:
        expected.update(estimate)
        estimate = backend.asarray(estimate)
        _check(tracker.update(estimate).prior_, estimate, expected.prior_, 1e-12)


class _GivenProba(ClassifierMixin, BaseEstimator):
    """A fitted "model" whose posteriors are its input rows, in a library."""

    def __init__(self, library=None):
        self.library = library

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def predict_proba(self, X):
        X = np.asarray(X)
        return X if self.library is None else self.library.asarray(X)


@pytest.mark.parametrize("method", ["mle", "bbse", "rlls"])
@pytest.mark.parametrize("online", ["cumulative", "fth", "flh-ftl"])
def test_wrapper_stream_in_namespace(backend, outputs, method, online):
    """update_prior / predict_proba_online / reset_prior with an inner model
    that returns arrays of another library: the on-line prior and the
    posteriors are of that library, with NumPy's values; the shift monitor
    decides alike."""
    proba, labels = outputs
    fit, stream = slice(0, 800), np.flatnonzero(labels[800:] < 3) + 800
    kwargs = dict(method=method, online=online, online_budget=100)
    wrappers = [
        PriorAdaptedClassifier(_GivenProba(library).fit(proba, labels), **kwargs)
        for library in (None, backend)
    ]
    for wrapper in wrappers:
        wrapper.fit(proba[fit], labels[fit])
    expected, wrapper = wrappers
    for batch in np.array_split(stream, 4):
        expected.update_prior(proba[batch])
        wrapper.update_prior(proba[batch])
        like = backend.asarray(proba[batch])
        _check(wrapper.online_prior_, like, expected.online_prior_, 1e-9)
        assert wrapper.online_shifted_ == expected.online_shifted_
        assert wrapper.n_seen_ == expected.n_seen_
        out = wrapper.predict_proba_online(proba[batch])
        assert array_api_compat.array_namespace(
            out
        ) is array_api_compat.array_namespace(like)
        np.testing.assert_allclose(
            _host(out), expected.predict_proba_online(proba[batch]), atol=1e-9
        )
    assert expected.online_shifted_  # (the stream holds only classes 0-2)
    wrapper.reset_prior()
    assert wrapper.n_seen_ == 0 and not wrapper.online_shifted_
    np.testing.assert_array_equal(wrapper.online_prior_, wrapper.train_prior_)


_WITHOUT_OPTIONAL = """
import sys, warnings


class Absent:  # an import hook: these packages are not installed
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("array_api_strict", "dask", "torch", "cupy",
                                      "jax"):
            raise ImportError(f"No module named {name!r}")


sys.meta_path.insert(0, Absent())
warnings.simplefilter("ignore")
import numpy as np
from sklearn.linear_model import LogisticRegression
import skprior as s

rng = np.random.default_rng(0)
y = rng.integers(0, 3, 300)
X = rng.normal(size=(300, 2)) + y[:, None]
proba = LogisticRegression().fit(X, y).predict_proba(X)
q = np.full(3, 1 / 3)
s.estimate_test_prior(proba, q, init=[0.5, 0.5, 0.0])
C = s.joint_confusion_matrix(proba, y)
s.estimate_source_prior(proba, y), s.estimate_source_prior(proba, source="labels", y=y)
s.estimate_source_prior(proba, source="mean_posterior")
s.bbse_test_prior(proba, C), s.rlls_test_prior(proba, C)
s.label_shift_test(proba[:50], proba), s.label_shift_test(proba[:50], q)
s.effective_train_prior(y, class_weight="balanced")
s.CumulativePrior(q, budget=100).update(proba).update(proba)
s.FLHFTL(q).update(q), s.FollowTheHistory(q).update(q)
for method in ("mle", "bbse"):
    for online in ("cumulative", "flh-ftl"):
        wrapper = s.PriorAdaptedClassifier(method=method, online=online).fit(X, y)
        wrapper.predict_proba(X[y == 0]), wrapper.update_prior(X[y == 0])
        wrapper.predict_proba_online(X[:5]), wrapper.reset_prior()
print("ok")
"""


def test_label_shift_without_the_optional_libraries():
    """Every label-shift function, the trackers and the wrapper's stream run on
    NumPy with array-api-compat, Dask, PyTorch, CuPy and JAX unavailable."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_OPTIONAL], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"
