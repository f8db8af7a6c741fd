"""CAN: the array functions against naive loops written from the formulas.

Every test runs twice: on the NumPy path and on the compiled kernel (numba,
optional: ``skprior/can/_compiled.py``), which serves NumPy batches of at least
``COMPILED_MIN_ELEMENTS`` entries; the fixture :func:`can_path` forces it on
for every size by setting that to 0, and off with ``SKPRIOR_NO_NUMBA=1``.
"""

import importlib.util
import warnings

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from skprior import CANClassifier, alternating_normalization, topk_entropy
from skprior.can import _can
from skprior.can._solvers import TAU_ROUNDING as _TAU_ROUNDING

HAVE_NUMBA = importlib.util.find_spec("numba") is not None


@pytest.fixture(
    autouse=True,
    params=[
        "numpy",
        pytest.param(
            "compiled",
            marks=pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed"),
        ),
    ],
)
def can_path(request, monkeypatch):
    """``"numpy"`` or ``"compiled"``: the path that CAN takes in this test."""
    if request.param == "numpy":
        monkeypatch.setenv("SKPRIOR_NO_NUMBA", "1")
    else:
        monkeypatch.delenv("SKPRIOR_NO_NUMBA", raising=False)
        monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", 0)
    return request.param


# -- naive references, written from SPEC §1 / the paper, one row at a time -----------


def naive_entropy(p):
    return -sum(x * np.log(x) for x in p if x > 0)


def naive_topk_entropy(row, k, kind):
    ordered = sorted(row, reverse=True)
    m = len(row)
    if kind == "renormalized":
        top = np.array(ordered[:k]) / sum(ordered[:k])
        return naive_entropy(top) / np.log(k)
    if kind == "unrenormalized":
        return naive_entropy(ordered[:k]) / np.log(m)
    values = []
    for j in range(2, m + 1):
        top = np.array(ordered[:j]) / sum(ordered[:j])
        values.append(naive_entropy(top) / np.log(j))
    return max(values)


def naive_can_row(confident, row, prior, alpha, n_iter):
    """One low-confidence row against the confident block, as in the paper."""
    L = np.vstack([confident, row]).astype(np.float64)
    for _ in range(n_iter):
        S = L**alpha
        for j in range(S.shape[1]):
            total = S[:, j].sum()
            S[:, j] = S[:, j] / total if total > 0 else 0.0
        L = S * prior
        for i in range(L.shape[0]):
            L[i] = L[i] / L[i].sum()
    return L[-1]


def naive_can(proba, prior, k, tau, alpha, n_iter, rows=None, kind="renormalized"):
    """Indices of low-confidence rows, and the corrected value of ``rows`` of them."""
    u = np.array([naive_topk_entropy(p, k, kind) for p in proba])
    low = np.flatnonzero(u >= tau)
    confident = proba[u < tau]
    rows = low if rows is None else rows
    return low, {
        i: naive_can_row(confident, proba[i], prior, alpha, n_iter) for i in rows
    }


# -- data


def synthetic_proba(n, m, seed, concentration=0.3):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(m, concentration), size=n)


@pytest.fixture(scope="module")
def cifar100_subset(cifar100):
    proba, _ = cifar100
    return proba[:1500].astype(np.float64)


# -- the uncertainty


@pytest.mark.parametrize("kind", ["renormalized", "unrenormalized", "max_over_k"])
@pytest.mark.parametrize("k", [2, 3, 7])
def test_topk_entropy_matches_naive(kind, k):
    """Each definition equals the sorted-loop reference, exact zeros included."""
    proba = synthetic_proba(60, 7, seed=k, concentration=0.2)
    proba[::5, :3] = 0
    proba /= proba.sum(axis=1, keepdims=True)
    expected = [naive_topk_entropy(p, k, kind) for p in proba]
    np.testing.assert_allclose(topk_entropy(proba, k, kind=kind), expected, atol=1e-12)


def test_topk_entropy_bounds_and_zeros():
    """One-hot rows give 0, uniform top-k gives 1, zeros give no NaN."""
    proba = np.array([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [0.5, 0.5, 0, 0]])
    u = topk_entropy(proba, k=2)
    np.testing.assert_allclose(u, [0.0, 1.0, 1.0])
    assert np.all(np.isfinite(topk_entropy(proba, k=4, kind="max_over_k")))


@pytest.mark.parametrize("kind", ["renormalized", "unrenormalized", "max_over_k"])
@pytest.mark.parametrize("m", [3, 5, 7, 100])
def test_uniform_rows_are_low_confidence_at_tau_1(kind, m):
    """A uniform row's uncertainty rounds to 1 - 2e-16; at tau=1 it is still
    corrected (here, sent to the prior: there is no confident row)."""
    proba = np.full((4, m), 1 / m)
    uncertainty = topk_entropy(proba, k=m, kind=kind)
    assert np.all((uncertainty > 1 - 1e-12) & (uncertainty <= 1))
    prior = np.arange(1, m + 1) / (m * (m + 1) / 2)
    with pytest.warns(UserWarning, match="no confident"):
        out = alternating_normalization(proba, prior, k=m, tau=1.0, uncertainty=kind)
    np.testing.assert_allclose(out, np.tile(prior, (4, 1)), rtol=1e-12)


def test_max_over_k_does_not_use_k():
    """uncertainty="max_over_k" ignores k, so a k above the class count is fine."""
    proba = synthetic_proba(30, 3, seed=0)
    np.testing.assert_array_equal(
        topk_entropy(proba, k=5, kind="max_over_k"),
        topk_entropy(proba, k=2, kind="max_over_k"),
    )


def test_screening_keeps_the_exact_mask(cifar100):
    """The fast p1 screen selects exactly the rows the entropy selects."""
    proba, _ = cifar100
    for k, tau in [(2, 0.5), (3, 0.9), (5, 0.7), (3, 0.2)]:
        u = topk_entropy(proba, k)
        out = alternating_normalization(proba, np.full(100, 0.01), k=k, tau=tau)
        changed = np.any(out != proba, axis=1)
        # every changed row is low-confidence; every confident row is unchanged
        assert not np.any(changed & (u < tau))
        np.testing.assert_array_equal(out[u < tau], proba[u < tau])


# -- exactness of CAN


@pytest.mark.parametrize("n_iter", [1, 2, 3, 5])
@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("k, tau", [(2, 0.9), (3, 0.9), ("m", 0.5)])
def test_can_equals_naive_loop_on_cifar100(cifar100_subset, n_iter, alpha, k, tau):
    """Real CIFAR-100 outputs: every checked row equals the one-by-one loop to 1e-12."""
    proba = cifar100_subset
    m = proba.shape[1]
    k = m if k == "m" else k
    prior = np.random.default_rng(1).dirichlet(np.full(m, 10.0))
    out = alternating_normalization(
        proba, prior, k=k, tau=tau, alpha=alpha, n_iter=n_iter
    )
    u = topk_entropy(proba, k)
    low = np.flatnonzero(u >= tau)
    assert 5 <= low.size < len(proba)
    confident = proba[u < tau]
    for i in low[:: max(1, low.size // 6)]:
        expected = naive_can_row(confident, proba[i], prior, alpha, n_iter)
        np.testing.assert_allclose(out[i], expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(out[u < tau], proba[u < tau])


@pytest.mark.parametrize("n_iter", [1, 2, 3, 5])
@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("k", [2, 3, 6])
def test_can_equals_naive_loop_on_synthetic(n_iter, alpha, k):
    """Synthetic rows with exact zeros: every row equals the loop to 1e-12."""
    proba = synthetic_proba(80, 6, seed=n_iter * 10 + k)
    proba[::7, 1] = 0
    proba[::3, 4] = 0
    proba /= proba.sum(axis=1, keepdims=True)
    prior = np.array([0.1, 0.3, 0.2, 0.15, 0.15, 0.1])
    tau = 0.6
    out = alternating_normalization(
        proba, prior, k=k, tau=tau, alpha=alpha, n_iter=n_iter
    )
    low, expected = naive_can(proba, prior, k, tau, alpha, n_iter)
    assert 0 < low.size < len(proba)
    for i, row in expected.items():
        np.testing.assert_allclose(out[i], row, rtol=0, atol=1e-12)
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize("kind", ["unrenormalized", "max_over_k"])
def test_can_with_other_uncertainties_matches_naive(kind):
    """The uncertainty variants select the rows the naive definition selects."""
    proba = synthetic_proba(50, 5, seed=3)
    prior = np.full(5, 0.2)
    out = alternating_normalization(
        proba, prior, k=3, tau=0.5, n_iter=2, uncertainty=kind
    )
    low, expected = naive_can(proba, prior, 3, 0.5, 1.0, 2, kind=kind)
    assert 0 < low.size < len(proba)
    for i, row in expected.items():
        np.testing.assert_allclose(out[i], row, atol=1e-12)


def test_paper_teaser():
    """Jia et al.'s teaser: A0 = [[0, 1]], b0 = [0.5, 0.5] gives [0.75, 0.25]."""
    out = alternating_normalization(np.array([[0.0, 1.0], [0.5, 0.5]]), [0.5, 0.5], k=2)
    np.testing.assert_allclose(out[1], [0.75, 0.25], atol=1e-15)
    np.testing.assert_array_equal(out[0], [0.0, 1.0])


def naive_can_row_in_logs(confident, row, prior, alpha, n_iter):
    """The same loop on log-probabilities (exact where powers underflow)."""
    from scipy.special import logsumexp

    with np.errstate(divide="ignore", invalid="ignore"):
        log_l = np.log(np.vstack([confident, row]))
        for _ in range(n_iter):
            scaled = alpha * log_l
            for j in range(scaled.shape[1]):
                total = logsumexp(scaled[:, j])
                scaled[:, j] = scaled[:, j] - total if np.isfinite(total) else -np.inf
            scaled = scaled + np.log(prior)
            for i in range(scaled.shape[0]):
                scaled[i] = scaled[i] - logsumexp(scaled[i])
            log_l = scaled
    return np.exp(log_l[-1])


@pytest.mark.parametrize(
    "alpha, n_iter",
    [(30.0, 5), (30.0, 1), (0.1, 5), (10.0, 18), (1e5, 4)],
)
def test_extreme_alpha_and_iterations_stay_exact(cifar100_subset, alpha, n_iter):
    """The paper's grid edge, alpha = 30 with d = 5, raises A0 to 30**5: the
    result stays finite and equals the loop computed in logs. So beyond
    alpha**d ~ 1e17, where a factored form with separate log scales cancelled
    two numbers of that size (every corrected row wrong, argmax moved)."""
    proba = cifar100_subset[:400]
    prior = np.random.default_rng(0).dirichlet(np.full(100, 10.0))
    out = alternating_normalization(
        proba, prior, k=3, tau=0.8, alpha=alpha, n_iter=n_iter
    )
    assert np.all(np.isfinite(out))
    # (the stored float32 rows themselves sum to 1 within ~3e-7)
    np.testing.assert_allclose(out.sum(axis=1), 1, atol=1e-6)
    u = topk_entropy(proba, 3)
    low = np.flatnonzero(u >= 0.8)
    for i in low[:: max(1, low.size // 5)]:
        expected = naive_can_row_in_logs(proba[u < 0.8], proba[i], prior, alpha, n_iter)
        np.testing.assert_allclose(out[i], expected, atol=1e-10)


@pytest.mark.parametrize("alpha, n_iter", [(10.0, 3), (5.0, 5), (4.0, 5), (2.0, 5)])
def test_large_alpha_power_in_small_batches_is_exact(cifar100, alpha, n_iter):
    """alpha**d of 16 to 3,125 on batches of 32 real rows: every corrected row
    equals the loop in logs. (The factored form's powers underflow there while
    its rows still sum to one, so a row-sum check cannot tell.)"""
    proba = cifar100[0].astype(np.float64)
    prior = np.random.default_rng(1).dirichlet(np.full(100, 10.0))
    checked = 0
    for start in range(0, 320, 32):
        batch = proba[start : start + 32]
        out = alternating_normalization(batch, prior, alpha=alpha, n_iter=n_iter)
        u = topk_entropy(batch, 3)
        for i in np.flatnonzero(u >= 0.9):
            expected = naive_can_row_in_logs(
                batch[u < 0.9], batch[i], prior, alpha, n_iter
            )
            np.testing.assert_allclose(out[i], expected, rtol=1e-9, atol=1e-12)
            checked += 1
    assert checked >= 10


def test_one_step_where_both_powers_underflow():
    """d = 1, alpha = 30: b**alpha and the reference column sum both underflow
    in the last column, whose true ratio b**alpha / (C + b**alpha) is near 1."""
    proba = np.array(
        [
            [0.98, 0.02 - 1e-12, 1e-12],
            [0.03, 0.97 - 1e-12, 1e-12],
            [0.5, 0.5 - 1e-11, 1e-11],
        ]
    )
    prior = np.array([0.4, 0.4, 0.2])
    out = alternating_normalization(proba, prior, k=2, alpha=30.0)
    expected = naive_can_row_in_logs(proba[:2], proba[2], prior, 30.0, 1)
    assert expected[2] > 0.99
    np.testing.assert_allclose(out[2], expected, rtol=1e-9, atol=1e-15)


# -- edge cases


def test_all_rows_confident_returns_input():
    """With no low-confidence row the output equals the input (a new array)."""
    proba = np.array([[0.98, 0.01, 0.01], [0.01, 0.97, 0.02]])
    out = alternating_normalization(proba, [1 / 3] * 3, k=2, tau=0.9)
    np.testing.assert_array_equal(out, proba)
    assert out is not proba


def test_no_confident_rows_gives_prior_with_warning():
    """No confident reference: documented result (the prior on the row's support)."""
    proba = np.array([[0.4, 0.35, 0.25], [0.5, 0.5, 0.0]])
    prior = np.array([0.5, 0.3, 0.2])
    with pytest.warns(UserWarning, match="no confident"):
        out = alternating_normalization(proba, prior, k=2, tau=0.1)
    np.testing.assert_allclose(out[0], prior)
    np.testing.assert_allclose(out[1], [0.5 / 0.8, 0.3 / 0.8, 0.0])
    _, expected = naive_can(proba, prior, 2, 0.1, 1.0, 1)
    for i, row in expected.items():
        np.testing.assert_allclose(out[i], row)


def test_batch_of_one_with_reference():
    """A single uncertain sample is corrected against a reference set."""
    reference = np.array([[0.0, 1.0], [0.05, 0.95]])
    out = alternating_normalization(
        np.array([[0.5, 0.5]]), [0.5, 0.5], k=2, reference=reference
    )
    expected = naive_can_row(
        reference, np.array([0.5, 0.5]), np.array([0.5, 0.5]), 1, 1
    )
    np.testing.assert_allclose(out[0], expected)


def test_float32_stays_float32_and_matches_float64(cifar100):
    """float32 input gives float32 output equal to the float64 result to 1e-6."""
    proba32 = cifar100[0][:2000]
    prior = np.full(100, 0.01)
    for n_iter in (1, 3):
        out32 = alternating_normalization(proba32, prior, n_iter=n_iter)
        out64 = alternating_normalization(
            proba32.astype(np.float64), prior, n_iter=n_iter
        )
        assert out32.dtype == np.float32
        np.testing.assert_allclose(out32, out64, atol=1e-6)


def test_ten_thousand_classes():
    """10,000 classes, peaked rows: finite, normalised, confident rows unchanged."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(60, 10_000))
    logits[np.arange(60), rng.integers(0, 10_000, 60)] += np.linspace(0, 20, 60)
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    prior = np.full(10_000, 1e-4)
    out = alternating_normalization(proba, prior, k=3, tau=0.5, n_iter=2)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out.sum(axis=1), 1)


def test_caller_arrays_are_not_modified():
    """proba, prior and reference are left as they were."""
    proba = synthetic_proba(30, 4, seed=0)
    prior = np.array([0.1, 0.2, 0.3, 0.4])
    reference = synthetic_proba(20, 4, seed=1)
    copies = [proba.copy(), prior.copy(), reference.copy()]
    alternating_normalization(proba, prior, k=2, tau=0.5, n_iter=3, reference=reference)
    for original, copy in zip((proba, prior, reference), copies, strict=True):
        np.testing.assert_array_equal(original, copy)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"k": 4}, ValueError, "k=4 is larger than the number of classes"),
        ({"k": 1}, ValueError, "'k' parameter .* must be an int in the range"),
        ({"k": 2.5}, TypeError, "'k' parameter .* must be an int"),
        ({"tau": 1.5}, ValueError, r"'tau' parameter .* in the range \[0.0, 1.0\]"),
        ({"tau": -0.1}, ValueError, r"'tau' parameter .* in the range \[0.0, 1.0\]"),
        ({"tau": float("nan")}, ValueError, "'tau' parameter"),
        ({"alpha": 0}, ValueError, r"'alpha' parameter .* range \(0.0, inf\)"),
        ({"n_iter": 0}, ValueError, "'n_iter' parameter .* range"),
        ({"uncertainty": "gini"}, ValueError, "'uncertainty' parameter .* among"),
        ({"prior": [0.5, 0.5]}, ValueError, "one entry per class"),
        ({"prior": [0.5, 0.5, 0.0]}, ValueError, "prior is 0 .* must be positive"),
        ({"reference": np.full((2, 2), 0.5)}, ValueError, "reference has 2 columns"),
    ],
)
def test_bad_parameters_are_refused(kwargs, error, match):
    """Each bad parameter gets an error that names it."""
    proba = np.array([[0.6, 0.3, 0.1], [0.4, 0.3, 0.3]])
    kwargs = {"prior": [0.3, 0.3, 0.4], **kwargs}
    with pytest.raises(error, match=match):
        alternating_normalization(proba, **kwargs)


@pytest.mark.parametrize(
    "proba, match",
    [
        ([[0.5, np.nan], [0.5, 0.5]], "NaN or infinite"),
        ([[0.5, np.inf], [0.5, 0.5]], "NaN or infinite"),
        ([[1.2, -0.2], [0.5, 0.5]], "negative"),
        ([[0.5, 0.5], [0.5, -np.nan]], "NaN or infinite"),
        ([[0.5, 0.5], [1.0, -np.inf]], "NaN or infinite"),
        ([[0.5, 0.5], [1.0, -1e-30]], "negative"),
        ([[0.5, 0.6], [0.5, 0.5]], "sum to 1"),
        # (a row of zeros: the kernel divided by its sum, ZeroDivisionError)
        ([[0.5, 0.5], [0.0, 0.0]], "sums to 0"),
        ([[2.0, -1.0, 0.5]], "negative"),
        ([0.5, 0.5], "1-D"),
        ([[1.0], [1.0]], "at least 2 columns"),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bad_probabilities_are_refused(proba, match, dtype):
    """NaN, inf, negative values, rows not summing to 1, wrong shapes: clear errors."""
    proba = np.asarray(proba, dtype=dtype)
    prior = np.full(proba.shape[-1], 1 / proba.shape[-1])
    with pytest.raises(ValueError, match=match):
        alternating_normalization(proba, prior, k=2)


def test_float16_rows_are_checked_at_float16_precision(cifar100):
    """Half-precision outputs sum to 1 only within ~5e-4: they are accepted, and
    their CAN equals the one-by-one loop on the same values in float64."""
    proba16 = cifar100[0][:400].astype(np.float16)
    values = proba16.astype(np.float64)
    assert np.abs(values.sum(axis=1) - 1).max() > 1e-4
    prior = np.full(values.shape[1], 1 / values.shape[1])
    out = alternating_normalization(proba16, prior, tau=0.5)
    low, expected = naive_can(values, prior, k=3, tau=0.5, alpha=1.0, n_iter=1)
    assert 0 < low.size < len(values)
    for i, row in expected.items():
        np.testing.assert_allclose(out[i], row, rtol=1e-10, atol=1e-15)
    confident = np.setdiff1d(np.arange(len(values)), low)
    np.testing.assert_array_equal(out[confident], values[confident])
    for bad, match in [
        ([[0.5, 0.52]], "sum to 1"),
        ([[1.2, -0.2]], "negative"),
        ([[0.5, np.nan]], "NaN"),
    ]:
        with pytest.raises(ValueError, match=match):
            alternating_normalization(np.array(bad, np.float16), [0.5, 0.5], k=2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_negative_zeros_are_zeros(dtype):
    """-0.0 is a valid probability: the result equals that of +0.0."""
    signed = np.array([[0.7, 0.3, -0.0], [0.4, 0.35, 0.25], [1.0, -0.0, -0.0]], dtype)
    caller = signed.copy()
    prior = [0.2, 0.3, 0.5]
    out = alternating_normalization(signed, prior, k=2, tau=0.5)
    expected = alternating_normalization(np.abs(signed), prior, k=2, tau=0.5)
    np.testing.assert_array_equal(out, expected)
    assert not np.any(np.signbit(out))
    np.testing.assert_array_equal(signed.view(np.uint8), caller.view(np.uint8))


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("tau", [0.3, 0.9, 0.999])
def test_screen_is_exact_at_the_threshold(k, tau):
    """Rows whose entropy sits within rounding of tau are classified as the
    entropy says (>= tau - 1e-12): the fast screen never drops a low-confidence
    row.

    A row [r, (1 - r) / (k - 1), ...] has exactly the largest entropy for its top
    share r, so rows with r on both sides of the root are the hardest case.
    """
    from scipy.optimize import brentq

    def row(r, m=k + 2):
        rest = (1 - r) / (k - 1)
        # two extra classes with tiny mass, so that the top k do not sum to 1
        p = np.array([r] + [rest] * (k - 1) + [1e-9, 1e-9])
        return p / p.sum()

    root = brentq(
        lambda r: naive_topk_entropy(row(r), k, "renormalized") - tau,
        1 / k + 1e-12,
        1 - 1e-12,
        xtol=1e-16,
    )
    shares = root + np.array([-1e-6, -1e-9, -1e-12, 0.0, 1e-12, 1e-9, 1e-6])
    proba = np.vstack([row(r) for r in shares] + [np.eye(k + 2)[0]])
    # (at the root itself the naive sum and the vectorised one may round to
    # different sides of tau; the screen must agree with the vectorised one)
    u = topk_entropy(proba, k)
    naive = np.array([naive_topk_entropy(p, k, "renormalized") for p in proba])
    np.testing.assert_allclose(u, naive, rtol=0, atol=1e-13)
    out = alternating_normalization(proba, np.full(k + 2, 1 / (k + 2)), k=k, tau=tau)
    changed = np.any(out != proba, axis=1)
    np.testing.assert_array_equal(changed, u >= tau - _TAU_ROUNDING)
    assert changed.any() and not changed.all()

    # float32 rows one ulp apart around the root, summing to 1 only within the
    # float32 tolerance: the screen's threshold must allow for the rounding of
    # the float32 row sums. (400 ulps each side: at tau = 0.999 the entropy
    # moves less than the float32 tolerance over 40.)
    top = np.float32(root)
    tops = [top]
    for _ in range(400):
        tops = [np.nextafter(tops[0], np.float32(0))] + tops
        tops = tops + [np.nextafter(tops[-1], np.float32(1))]
    rest = (1 - np.float64(tops)) / (k - 1)
    proba32 = np.column_stack(
        [np.array(tops, np.float32)]
        + [rest.astype(np.float32)] * (k - 1)
        + [np.zeros(len(tops), np.float32)] * 2
    )
    # (the screen works on the rows in float64; topk_entropy returns float32
    # for float32 rows, rounded, so the entropy compared is that of the rows
    # converted exactly to float64)
    u32 = topk_entropy(proba32.astype(np.float64), k)
    out32 = alternating_normalization(
        proba32, np.full(k + 2, 1 / (k + 2)), k=k, tau=tau
    )
    changed32 = np.any(out32 != proba32, axis=1)
    # (float32 rows: within their own rounding of tau, 1.2e-7)
    threshold32 = tau - float(np.finfo(np.float32).eps)
    np.testing.assert_array_equal(changed32, u32 >= threshold32)
    assert changed32.any() and not changed32.all()


@pytest.mark.parametrize("layout", ["fortran", "strided"])
def test_non_contiguous_input_gives_the_same_result(cifar100, layout):
    """Fortran-ordered and strided views take the same path to the same answer."""
    proba = cifar100[0][:3000].astype(np.float64)
    prior = np.full(100, 0.01)
    expected = alternating_normalization(proba, prior)
    if layout == "fortran":
        view = np.asfortranarray(proba)
    else:
        padded = np.zeros((proba.shape[0], 2 * proba.shape[1]))
        padded[:, ::2] = proba
        view = padded[:, ::2]
    np.testing.assert_array_equal(alternating_normalization(view, prior), expected)


@pytest.mark.parametrize("n_rows", [1, 15, 16, 1001])
def test_blocked_column_sums_match_exact_sums(cifar100, n_rows):
    """The blocked column sums of float32 rows are within 1e-6 (relative) of the
    exactly rounded sums, and those of float64 rows within 1e-14."""
    from math import fsum

    from skprior._utils._kernels import column_sums as _column_sums

    proba32 = cifar100[0][:n_rows]
    exact = np.array([fsum(column) for column in proba32.astype(np.float64).T])
    for proba, rtol in ((proba32, 1e-6), (proba32.astype(np.float64), 1e-14)):
        sums = _column_sums(proba)
        assert sums.dtype == np.float64
        np.testing.assert_allclose(sums, exact, rtol=rtol, atol=0)


def test_logits_are_refused_with_a_hint():
    """Logits passed as probabilities: the error says to apply a softmax."""
    with pytest.raises(ValueError, match="softmax"):
        alternating_normalization(np.array([[3.0, -1.0], [0.2, 0.1]]), [0.5, 0.5], k=2)


# -- the estimator


@pytest.fixture(scope="module")
def digits_split():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X / 16, y, test_size=0.5, random_state=0, stratify=y
    )
    model = LogisticRegression(C=0.05, max_iter=1000).fit(X_train, y_train)
    return model, X_train, X_test, y_train, y_test


def test_classifier_equals_array_function(digits_split):
    """predict_proba is alternating_normalization of the model's probabilities."""
    model, X_train, X_test, y_train, _ = digits_split
    can = CANClassifier(model, k=3, tau=0.5, alpha=2.0, n_iter=2).fit(X_train, y_train)
    expected = alternating_normalization(
        model.predict_proba(X_test),
        can.train_prior_,
        k=3,
        tau=0.5,
        alpha=2.0,
        n_iter=2,
    )
    np.testing.assert_array_equal(can.predict_proba(X_test), expected)


def test_fit_reference_predicts_single_samples(digits_split):
    """reference='fit': a row's output does not depend on the rest of the batch."""
    model, X_train, X_test, y_train, _ = digits_split
    can = CANClassifier(model, tau=0.4, reference="fit").fit(X_train, y_train)
    batch = can.predict_proba(X_test[:50])
    one_by_one = np.vstack([can.predict_proba(X_test[i : i + 1]) for i in range(50)])
    np.testing.assert_allclose(batch, one_by_one, atol=1e-15)
    expected = alternating_normalization(
        model.predict_proba(X_test[:50]),
        can.train_prior_,
        tau=0.4,
        reference=model.predict_proba(X_train),
    )
    np.testing.assert_allclose(batch, expected)


def test_batch_reference_is_declared_transductive():
    """The batch-dependent default is declared through the estimator tags."""
    from sklearn.utils import get_tags

    assert get_tags(CANClassifier(LogisticRegression())).non_deterministic
    assert not get_tags(
        CANClassifier(LogisticRegression(), reference="fit")
    ).non_deterministic


def test_binary_problem_with_k_2():
    """Two classes: k=2 works, and so does the default k="auto" (= 2 there); an
    explicit k=3 is refused with advice."""
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=200, random_state=0, flip_y=0.2)
    model = LogisticRegression().fit(X, y)
    proba = CANClassifier(model, k=2, tau=0.5).fit(X, y).predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1)
    np.testing.assert_array_equal(
        CANClassifier(model).fit(X, y).predict_proba(X),
        CANClassifier(model, k=2).fit(X, y).predict_proba(X),
    )
    with pytest.raises(
        ValueError, match="choose k between 2 and 2, or k=.auto. .with two classes"
    ):
        CANClassifier(model, k=3).fit(X, y)

    class NeverFitted(LogisticRegression):
        def fit(self, X, y, sample_weight=None):
            raise AssertionError("the k error must come before the inner fit")

    with pytest.raises(ValueError, match="choose k between 2 and 2"):
        CANClassifier(NeverFitted(), k=3).fit(X, y)


def test_class_absent_from_fit_labels_is_refused(digits_split):
    """A zero training prior would be divided by: a clear error, with the fix."""
    model, X_train, _, y_train, _ = digits_split
    keep = y_train != 9
    with pytest.raises(ValueError, match=r"\[9\].*train_prior="):
        CANClassifier(model).fit(X_train[keep], y_train[keep])
    can = CANClassifier(model, train_prior=np.full(10, 0.1)).fit(
        X_train[keep], y_train[keep]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        can.predict_proba(X_train[:5])


def test_can_changes_the_predictions_of_a_weak_model(digits_split):
    """A weak model on digits: CAN is no no-op, and some setting does not hurt."""
    model, X_train, X_test, y_train, y_test = digits_split
    base = model.score(X_test, y_test)
    scores = [
        CANClassifier(model, tau=tau, alpha=alpha)
        .fit(X_train, y_train)
        .score(X_test, y_test)
        for tau in (0.5, 0.7, 0.9)
        for alpha in (0.5, 1.0, 2.0)
    ]
    # CAN changes predictions here (it is not a no-op) ...
    assert len(set(scores)) > 1
    # ... and the best setting is not worse than the model alone.
    assert max(scores) >= base


@pytest.mark.parametrize("n_iter", [1, 3])
def test_no_confident_rows_with_several_iterations(n_iter):
    """The empty reference gives the same documented answer for every d."""
    proba = np.array([[0.4, 0.35, 0.25], [0.3, 0.3, 0.4]])
    prior = np.array([0.5, 0.3, 0.2])
    with pytest.warns(UserWarning, match="no confident"):
        out = alternating_normalization(proba, prior, k=2, tau=0.1, n_iter=n_iter)
    np.testing.assert_allclose(out, [prior, prior])


@pytest.mark.parametrize("n_iter", [1, 2, 4])
def test_reference_weight_equals_repeated_rows(n_iter):
    """A reference row of integer weight w counts as w copies of itself."""
    proba = synthetic_proba(20, 4, seed=5)
    reference = synthetic_proba(15, 4, seed=6, concentration=0.1)
    weight = np.arange(15) % 4
    prior = np.array([0.1, 0.2, 0.3, 0.4])
    kwargs = dict(k=2, tau=0.5, alpha=1.5, n_iter=n_iter)
    weighted = alternating_normalization(
        proba, prior, reference=reference, reference_weight=weight, **kwargs
    )
    repeated = alternating_normalization(
        proba, prior, reference=np.repeat(reference, weight, axis=0), **kwargs
    )
    np.testing.assert_allclose(weighted, repeated, atol=1e-13)


@pytest.mark.parametrize("alpha", [1.0, 1.5])
def test_equal_reference_weights_equal_repeated_rows(alpha):
    """Equal weights of 3 (the factored form's constant-weight branch) count
    as 3 copies of every confident row, for d > 1."""
    proba = synthetic_proba(20, 4, seed=5)
    reference = synthetic_proba(15, 4, seed=6, concentration=0.1)
    prior = np.array([0.1, 0.2, 0.3, 0.4])
    kwargs = dict(k=2, tau=0.5, alpha=alpha, n_iter=3)
    weighted = alternating_normalization(
        proba, prior, reference=reference, reference_weight=np.full(15, 3.0), **kwargs
    )
    repeated = alternating_normalization(
        proba, prior, reference=np.repeat(reference, 3, axis=0), **kwargs
    )
    np.testing.assert_allclose(weighted, repeated, atol=1e-13)


def test_bad_reference_weight_is_refused():
    """Negative or misshaped weights get an error naming reference_weight; so
    do weights beyond 2**+-256, which were rescaled near 1 silently (CAN
    weighs them against the corrected row's 1: 2.3e77 gave an error of 0.76)."""
    reference = synthetic_proba(5, 3, seed=0)
    for weight in ([1, 2, 3], [1, 1, 1, 1, -1], [1e78] * 5, [1e-78] * 5):
        with pytest.raises(ValueError, match="reference_weight"):
            alternating_normalization(
                reference,
                [0.2, 0.3, 0.5],
                k=2,
                reference=reference,
                reference_weight=weight,
            )
    # weights without a reference would be ignored: refused instead
    with pytest.raises(ValueError, match="no reference was given"):
        alternating_normalization(
            reference, [0.2, 0.3, 0.5], k=2, reference_weight=np.ones(5)
        )


def test_reference_of_another_library_than_a_numpy_batch():
    """A NumPy batch with a torch reference is refused clearly (it failed
    inside torch.sort); the other way round the reference follows the batch."""
    torch = pytest.importorskip("torch")
    proba = synthetic_proba(40, 3, seed=1)
    reference = synthetic_proba(30, 3, seed=2)
    with pytest.raises(ValueError, match=r"reference is a torch array but proba is"):
        alternating_normalization(
            proba, [0.2, 0.3, 0.5], reference=torch.tensor(reference)
        )
    result = alternating_normalization(
        torch.tensor(proba), [0.2, 0.3, 0.5], reference=reference
    )
    want = alternating_normalization(proba, [0.2, 0.3, 0.5], reference=reference)
    np.testing.assert_allclose(result.numpy(), want, rtol=0, atol=1e-12)


def test_tau_read_off_float32_entropies_counts_its_row():
    """A tau taken from topk_entropy of float32 rows is that row's entropy
    rounded to float32 (up to 6e-8 above the float64 value the screen
    computes): the row counts as low-confidence, on either path (47 of 100
    such rows were left uncorrected with the float64 tolerance of 1e-12)."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(400, 10)) * 1.5
    proba = softmax(logits, axis=1).astype(np.float32)
    prior = np.full(10, 0.1)
    entropy = topk_entropy(proba)
    assert entropy.dtype == np.float32
    for i in range(0, 400, 8):
        tau = float(entropy[i])
        if not 0 < tau < 1:
            continue
        out = alternating_normalization(proba, prior, tau=tau, alpha=2.0)
        assert not np.array_equal(out[i], proba[i]), i
        assert np.array_equal(out[entropy < tau - 1e-6], proba[entropy < tau - 1e-6])


def test_numpy_scalar_tau_and_alpha_on_another_library():
    """tau and alpha as NumPy scalars (np.quantile's, np.float32) on
    array-api-strict rows: the NumPy path's result. They reached the arrays
    as they were, and array-api-strict refused them (TypeError)."""
    xp = pytest.importorskip("array_api_strict")
    proba = synthetic_proba(40, 5, seed=3)
    prior = np.full(5, 0.2)
    expected = alternating_normalization(proba, prior, tau=0.5, alpha=2.0)
    assert not np.allclose(expected, proba)
    for tau, alpha in [(np.float64(0.5), 2.0), (0.5, np.float64(2.0))]:
        out = alternating_normalization(xp.asarray(proba), prior, tau=tau, alpha=alpha)
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-12)


def test_reference_on_another_device_of_the_same_library():
    """A reference on another array-api-strict device than the batch's is
    moved to the batch's (as other functions move labels and references):
    the result equals the NumPy path's. array-api-strict refused to mix the
    two devices, from inside CAN."""
    xp = pytest.importorskip("array_api_strict")
    proba = synthetic_proba(40, 5, seed=3)
    reference = synthetic_proba(30, 5, seed=4)
    prior = np.full(5, 0.2)
    expected = alternating_normalization(proba, prior, tau=0.5, reference=reference)
    out = alternating_normalization(
        xp.asarray(proba),
        prior,
        tau=0.5,
        reference=xp.asarray(reference, device=xp.Device("device1")),
    )
    assert out.device == xp.asarray(proba).device
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-12)
