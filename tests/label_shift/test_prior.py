"""Tests of prior adaptation: the array functions and PriorAdaptedClassifier.

Numerics are checked against naive references written here from the formulas
(Saerens et al. 2002 EM, the MAP M-step of Sulc and Matas 2019, Bayes' rule,
Lipton et al. 2018 BBSE), on real CIFAR outputs and on synthetic data.
"""

import pickle
import re
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import make_classification
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.naive_bayes import GaussianNB

from skprior import (
    PriorAdaptedClassifier,
    adjust_to_prior,
    bbse_test_prior,
    estimate_test_prior,
)
from skprior.label_shift._solvers import _squarem_point, project_to_simplex

SOLVERS = ["em", "squarem", "pga"]


# -- naive references, written from the formulas ---------------------------------------


def naive_em(proba, q, a=1.0, tol=1e-13, max_iter=200_000):
    """Saerens et al. EM with the MAP M-step, one sample and class at a time."""
    proba = np.asarray(proba, dtype=np.float64)
    n, k = proba.shape
    pi = np.array(q, dtype=np.float64)
    for _ in range(max_iter):
        counts = np.zeros(k)
        for i in range(n):
            r = proba[i] * pi / q
            counts += r / r.sum()
        new = (counts + a - 1) / (n + k * (a - 1))
        if np.abs(new - pi).sum() < tol:
            return new
        pi = new
    raise AssertionError("the naive EM did not converge")


def naive_bayes_rule(proba, q, pi):
    out = np.empty_like(proba, dtype=np.float64)
    for i, row in enumerate(proba):
        for c in range(len(q)):
            out[i, c] = row[c] * pi[c] / q[c]
        out[i] /= out[i].sum()
    return out


def shifted_sample(labels, n, alpha, rng):
    """Indices of n rows drawn per class at Dirichlet(alpha) proportions."""
    n_classes = labels.max() + 1
    counts = rng.multinomial(n, rng.dirichlet(np.full(n_classes, alpha)))
    return np.concatenate(
        [
            rng.choice(np.flatnonzero(labels == c), size=m, replace=True)
            for c, m in enumerate(counts)
        ]
    )


def frequencies(labels, n_classes):
    return np.bincount(labels, minlength=n_classes) / len(labels)


@pytest.fixture(scope="module")
def cifar100_shifted(cifar100):
    """2,000 rows of CIFAR-100 outputs at Dirichlet(10) proportions (interior)."""
    proba, labels = cifar100
    rng = np.random.default_rng(0)
    idx = shifted_sample(labels, 2000, 10.0, rng)
    return proba[idx], frequencies(labels, 100)


class CountingClassifier(ClassifierMixin, BaseEstimator):
    """A logistic regression that counts the calls to ``fit`` (class-wide)."""

    n_fits = 0

    def fit(self, X, y):
        type(self).n_fits += 1
        self.model_ = LogisticRegression(max_iter=1000).fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X):
        return self.model_.predict_proba(X)


class FrozenFloat32(ClassifierMixin, BaseEstimator):
    """A fitted model whose posteriors come in float32."""

    def __init__(self, model):
        self.model = model

    def fit(self, X, y):
        self.classes_ = self.model.classes_
        return self

    def predict_proba(self, X):
        return self.model.predict_proba(X).astype(np.float32)


@pytest.fixture(scope="module")
def blobs():
    X, y = make_classification(
        n_samples=3000,
        n_features=6,
        n_informative=4,
        n_redundant=0,
        n_classes=3,
        n_clusters_per_class=1,
        class_sep=1.0,
        random_state=0,
    )
    return X, y


# -- adjust_to_prior ------------------------------------------------------------


def test_adjust_matches_bayes_rule_on_cifar(cifar10):
    """Bayes' rule equals the per-element formula on real float32 outputs."""
    proba, labels = cifar10
    proba = proba[:500]
    q = frequencies(labels, 10)
    pi = np.random.default_rng(0).dirichlet(np.ones(10))
    before = proba.copy()
    out = adjust_to_prior(proba, q, pi)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, naive_bayes_rule(proba, q, pi), atol=1e-6)
    np.testing.assert_array_equal(proba, before)


@pytest.mark.parametrize("model", [LinearDiscriminantAnalysis(), GaussianNB()])
def test_known_prior_is_exact_for_generative_models(blobs, model):
    """Adjusting a generative model to a prior equals refitting with priors=."""
    X, y = blobs
    new_prior = np.array([0.7, 0.2, 0.1])
    fitted = model.fit(X, y)
    q = getattr(fitted, "priors_", None)
    q = fitted.class_prior_ if q is None else q
    refit = type(model)(priors=new_prior).fit(X, y)
    expected = refit.predict_proba(X)
    np.testing.assert_allclose(
        adjust_to_prior(fitted.predict_proba(X), q, new_prior), expected, atol=1e-8
    )
    wrapper = PriorAdaptedClassifier(fitted, method="known", test_prior=new_prior)
    wrapper.fit(X, y)
    np.testing.assert_allclose(wrapper.predict_proba(X), expected, atol=1e-8)
    assert not wrapper.__sklearn_tags__().non_deterministic


def test_adjust_rows_ruled_out_by_the_prior():
    """A row sure of classes the new prior rules out gets the prior itself."""
    proba = np.array([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    out = adjust_to_prior(proba, [1 / 3, 1 / 3, 1 / 3], [0.5, 0.0, 0.5])
    np.testing.assert_allclose(out, [[0.5, 0.0, 0.5], [1.0, 0.0, 0.0]])
    # with a training prior that is not uniform too (not pi / q renormalised)
    out = adjust_to_prior([[0.0, 0.0, 1.0]], [0.5, 0.3, 0.2], [0.5, 0.5, 0.0])
    np.testing.assert_allclose(out, [[0.5, 0.5, 0.0]])


def test_zero_training_prior_is_refused():
    """q_c = 0 makes p/q undefined: a clear error, in both functions."""
    proba = np.array([[0.5, 0.5, 0.0]])
    with pytest.raises(ValueError, match="train_prior is 0"):
        adjust_to_prior(proba, [0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3])
    with pytest.raises(ValueError, match="train_prior is 0"):
        estimate_test_prior(proba, [0.5, 0.5, 0.0])


def test_one_dimensional_scores_are_refused_with_advice():
    """A binary P(class 1) vector must be given as two columns."""
    with pytest.raises(ValueError, match="column_stack"):
        estimate_test_prior(np.array([0.2, 0.9]), [0.5, 0.5])


# -- estimate_test_prior ------------------------------------------------------------


@pytest.mark.parametrize("method, a", [("mle", 1.0), ("map", 3.0)])
@pytest.mark.parametrize("solver", SOLVERS)
def test_estimate_matches_naive_em_on_cifar100(cifar100_shifted, method, a, solver):
    """MLE and MAP equal the naive EM (run to 1e-13) to 1e-6 in L1, every solver."""
    proba, q = cifar100_shifted
    reference = naive_em(proba, q, a=a)
    result = estimate_test_prior(
        proba, q, method=method, solver=solver, dirichlet_alpha=a, tol=1e-10
    )
    assert result.converged
    assert np.abs(result.prior - reference).sum() < 1e-6


@pytest.mark.parametrize("method", ["mle", "map"])
def test_float32_passes_stop_where_float64_passes_do(cifar10, method):
    """200,000 CIFAR-10 rows in float32 (read by float32 products, 26,214 rows
    a block): the same steps and estimate as in float64. (One float32 product
    per block erred by 1.5e-5 in the gradient, and EM never met tol=1e-6.)"""
    proba, labels = cifar10
    rows = np.random.default_rng(0).choice(len(labels), size=200_000)
    batch = np.ascontiguousarray(proba[rows], dtype=np.float32)
    q = frequencies(labels, 10)
    wide = estimate_test_prior(batch.astype(np.float64), q, method=method)
    narrow = estimate_test_prior(batch, q, method=method, max_iter=100)
    assert narrow.converged and narrow.n_iter == wide.n_iter
    np.testing.assert_allclose(narrow.prior, wide.prior, rtol=1e-5)


@pytest.mark.parametrize("method", ["mle", "map"])
def test_solvers_agree_on_boundary_optimum(cifar10, method):
    """With classes absent from the batch EM, SQUAREM and PGA reach one optimum."""
    proba, labels = cifar10
    keep = np.flatnonzero(labels < 6)  # classes 6..9 absent
    proba = proba[keep[:1500]]
    q = frequencies(labels, 10)
    estimates = [
        estimate_test_prior(proba, q, method=method, solver=s, tol=1e-9).prior
        for s in SOLVERS
    ]
    for estimate in estimates[1:]:
        assert np.abs(estimate - estimates[0]).sum() < 1e-6


def test_absent_classes_mle_to_zero_map_positive(cifar10):
    """Absent classes: MLE on (or near) the boundary, MAP >= (a-1)/(N+K(a-1)).

    An absent class has MLE exactly 0 only when the model gives it little
    mass on the batch (KKT: mean_i (p_ik / q_k) / D_i <= 1); on CIFAR-10 with
    classes 0, 1, 8, 9 absent, classes 1 and 8 are at 0 and 0, 9 below a fifth
    of their training prior.
    """
    proba, labels = cifar10
    absent = [0, 1, 8, 9]
    proba = proba[~np.isin(labels, absent)][:2000]
    q = frequencies(labels, 10)
    mle = estimate_test_prior(proba, q, solver="squarem", tol=1e-10)
    em = estimate_test_prior(proba, q, solver="em", tol=1e-10, max_iter=100_000)
    assert np.all(mle.prior[[1, 8]] < 1e-10)
    assert np.all(mle.prior[absent] < q[absent] / 5)
    assert np.abs(mle.prior - em.prior).sum() < 1e-8
    assert mle.n_passes < em.n_passes
    a = 2.0
    map_ = estimate_test_prior(proba, q, method="map", dirichlet_alpha=a)
    assert np.all(map_.prior[absent] >= (a - 1) / (len(proba) + 10 * (a - 1)))
    assert map_.prior.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("method", ["mle", "map"])
def test_squarem_fallback_keeps_objective_and_optimum(method):
    """An extrapolation that lowers the objective falls back to the EM point.

    Each SQUAREM cycle costs two passes; a fallback costs one more, so
    ``n_passes > 1 + 2 * n_iter`` shows the branch was taken. Small random
    problems are searched for it here (seeds found once, 8 and 0, stopped
    taking it in a fresh environment of 2026-11-26), and every
    estimate that took it is still the naive-EM one.
    """
    a = 2.0 if method == "map" else 1.0
    fallbacks = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        n, k = int(rng.integers(2, 30)), int(rng.integers(2, 6))
        alpha = float(rng.choice([0.1, 0.5, 1.0]))
        proba = rng.dirichlet(np.full(k, alpha), size=n)
        q = rng.dirichlet(np.ones(k))
        with warnings.catch_warnings():  # (tiny problems: noise, by design)
            warnings.simplefilter("ignore", UserWarning)
            result = estimate_test_prior(
                proba, q, method=method, dirichlet_alpha=a, solver="squarem", tol=1e-10
            )
        if not (result.converged and result.n_passes > 1 + 2 * result.n_iter):
            continue
        fallbacks += 1
        reference = naive_em(proba, q, a=a)
        assert np.abs(result.prior - reference).sum() < 1e-6, seed
    assert fallbacks >= 3


def test_squarem_accelerates_with_a_class_started_at_zero(cifar10):
    """A class started at 0 stays at 0 without stopping the extrapolation.

    Class 1 is absent and its MLE is 0 (see the test above), so the KKT test
    of the stopping rule is met with it held at 0.
    """
    proba, labels = cifar10
    proba = proba[~np.isin(labels, [0, 1, 8, 9])][:2000]
    q = frequencies(labels, 10)
    init = q.copy()
    init[1] = 0.0
    init /= init.sum()
    em = estimate_test_prior(
        proba, q, init=init, solver="em", tol=1e-8, max_iter=100_000
    )
    sq = estimate_test_prior(proba, q, init=init, solver="squarem", tol=1e-8)
    assert sq.prior[1] == 0.0 and em.prior[1] == 0.0
    assert np.abs(sq.prior - em.prior).sum() < 1e-6
    assert sq.n_passes < em.n_passes


def test_squarem_never_returns_a_negative_prior(cifar100):
    """A class that EM underflows to 0 stays at exactly 0, never below.

    On this batch (seed found by search; 23 classes end at 0) the
    extrapolation used to leave -3e-323 in the estimate, which
    ``adjust_to_prior`` then refused as a negative prior.
    """
    proba, labels = cifar100
    proba = proba[shifted_sample(labels, 1000, 0.1, np.random.default_rng(14))]
    q = frequencies(labels, 100)
    result = estimate_test_prior(proba, q, solver="squarem", tol=1e-10)
    assert not np.signbit(result.prior).any()
    em = estimate_test_prior(proba, q, solver="em", tol=1e-10, max_iter=100_000)
    assert np.abs(result.prior - em.prior).sum() < 1e-7
    adjusted = adjust_to_prior(proba, q, result.prior)
    assert np.all(adjusted[:, result.prior == 0] == 0)


def test_squarem_point_holds_zero_classes_at_zero():
    """With p1_k = p2_k = 0 the extrapolation p0_k (1 + s)**2 can round below 0.

    The numbers are picked so that it does (-1.1e-16 without the cap); the
    class with p2_k > 0 is left to the extrapolation.
    """
    p0 = np.array([0.8095364830391015, 0.1904635169608985])
    p1 = p2 = np.array([0.0, 1.0])
    r = p1 - p0
    v = p2 - p1 - r
    step = -1.0000000037357617
    raw = p0 - 2 * step * r + step**2 * v
    assert raw[0] < 0  # the rounding the cap guards against
    point = _squarem_point(p0, r, v, p2, step)
    assert point[0] == 0.0 and not np.signbit(point[0])
    assert point[1] == raw[1]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("method", ["mle", "map"])
def test_estimate_is_always_a_prior(solver, method):
    """Any solver, on small random batches with absent classes, zero posteriors
    and tight tolerances, returns a prior: no negative entry (nor -0.0), sum 1,
    and one that ``adjust_to_prior`` accepts."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        n, k = int(rng.integers(1, 40)), int(rng.integers(2, 8))
        proba = rng.dirichlet(np.full(k, float(rng.choice([0.05, 0.3, 1.0]))), size=n)
        proba[:, rng.random(k) < 0.3] = 0.0  # classes with no posterior mass
        proba[proba.sum(axis=1) == 0, 0] = 1.0
        proba /= proba.sum(axis=1, keepdims=True)
        q = rng.dirichlet(np.ones(k))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            warnings.simplefilter("ignore", UserWarning)  # (degenerate estimates)
            prior = estimate_test_prior(
                proba, q, method=method, solver=solver, tol=1e-12, max_iter=20_000
            ).prior
        assert not np.signbit(prior).any()
        assert prior.sum() == pytest.approx(1.0, abs=1e-12)
        adjust_to_prior(proba, q, prior)


def test_map_with_alpha_one_is_mle(cifar100_shifted):
    """The Dirichlet(1) hyper-prior is flat: MAP equals MLE."""
    proba, q = cifar100_shifted
    mle = estimate_test_prior(proba, q, solver="squarem", tol=1e-10).prior
    map_ = estimate_test_prior(
        proba, q, method="map", dirichlet_alpha=1.0, solver="squarem", tol=1e-10
    ).prior
    np.testing.assert_allclose(map_, mle, atol=1e-9)


def test_no_shift_estimate_stays_at_training_prior(blobs):
    """On fresh data from the training distribution the MLE is q up to noise.

    The fresh batch is drawn per class at the training frequencies q, so the
    only error left is the estimator's own: tolerance 0.05 in L1, for 3 classes
    and ~1,500 rows (sampling noise of the MLE ~ sqrt(K / n) ~ 0.045 at worst,
    observed ~0.01). On the fit data itself a logistic regression with an
    intercept has mean posterior equal to the label frequencies, so q is the EM
    fixed point: equal to 1e-3 (lbfgs's tolerance).
    """
    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X[:1000], y[:1000])
    q = frequencies(y[:1000], 3)
    counts = np.round(q * 1500).astype(int)
    fresh_rows = np.concatenate(
        [1000 + np.flatnonzero(y[1000:] == c)[:m] for c, m in enumerate(counts)]
    )
    fresh = estimate_test_prior(model.predict_proba(X[fresh_rows]), q).prior
    assert np.abs(fresh - q).sum() < 0.05
    same = estimate_test_prior(model.predict_proba(X[:1000]), q).prior
    assert np.abs(same - q).sum() < 1e-3


def test_batch_of_one():
    """MLE from one row is the vertex maximising p/q; MAP stays inside."""
    proba = np.array([[0.5, 0.3, 0.2]])
    q = np.array([0.6, 0.3, 0.1])  # p/q = 0.83, 1.0, 2.0
    with pytest.warns(UserWarning, match="a single row"):
        mle = estimate_test_prior(proba, q, solver="squarem", tol=1e-10)
    np.testing.assert_allclose(mle.prior, [0, 0, 1], atol=1e-6)
    with pytest.warns(UserWarning, match="a single row"):
        map_ = estimate_test_prior(proba, q, method="map", dirichlet_alpha=2.0)
    assert np.all(map_.prior > 0)
    np.testing.assert_allclose(map_.prior, naive_em(proba, q, a=2.0), atol=1e-6)


def test_zero_posteriors_and_float32():
    """Exact zeros (trees, naive Bayes) and float32 give finite estimates."""
    proba = np.array([[1, 0, 0], [0, 1, 0], [0, 0.5, 0.5], [1, 0, 0]], dtype=np.float32)
    before = proba.copy()
    for solver in SOLVERS:
        result = estimate_test_prior(proba, [1 / 3] * 3, solver=solver, tol=1e-10)
        assert np.all(np.isfinite(result.prior))
        # l = 2 log pi_0 + log pi_1 + log (pi_1 + pi_2) / 2: moving mass from
        # class 2 to class 1 raises both terms, so pi_2 = 0.
        np.testing.assert_allclose(result.prior, [0.5, 0.5, 0.0], atol=1e-6)
    np.testing.assert_array_equal(proba, before)


def test_ten_thousand_classes():
    """10,000 classes: the estimate runs and equals one naive EM step check."""
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.full(10_000, 0.05), size=200)
    q = np.full(10_000, 1e-4)
    with pytest.warns(UserWarning, match="200 rows for 10000 classes"):
        result = estimate_test_prior(proba, q, method="map", solver="squarem")
    assert result.converged and np.all(result.prior > 0)
    # The MAP optimum is a fixed point of the MAP-EM map.
    r = proba * result.prior / q
    r /= r.sum(axis=1, keepdims=True)
    fixed = (r.sum(axis=0) + 1.0) / (200 + 10_000)
    assert np.abs(fixed - result.prior).sum() < 1e-5


@pytest.mark.parametrize(
    "solver, max_iter, remedy",
    [("em", 2, "solver='squarem'"), (None, 1, "Increase max_iter or tol")],
)
def test_non_convergence_warns(cifar10, solver, max_iter, remedy):
    """max_iter too small: a ConvergenceWarning that names the remedies (EM's
    include SQUAREM, the default; two SQUAREM cycles converge here)."""
    proba, labels = cifar10
    kwargs = {} if solver is None else {"solver": solver}
    with pytest.warns(ConvergenceWarning, match=re.escape(remedy)):
        result = estimate_test_prior(
            proba[:300], frequencies(labels, 10), max_iter=max_iter, **kwargs
        )
    assert not result.converged and result.n_iter == max_iter


def test_bad_arguments_are_refused():
    proba = np.array([[0.5, 0.5]])
    with pytest.raises(ValueError, match="method"):
        estimate_test_prior(proba, [0.5, 0.5], method="ml")
    with pytest.raises(ValueError, match="solver"):
        estimate_test_prior(proba, [0.5, 0.5], solver="newton")
    with pytest.raises(ValueError, match="dirichlet_alpha"):
        estimate_test_prior(proba, [0.5, 0.5], method="map", dirichlet_alpha=0.5)
    with pytest.raises(ValueError, match="one entry per class"):
        estimate_test_prior(proba, [1 / 3] * 3)


def test_projection_onto_simplex_matches_bisection():
    """The sort-based projection equals a bisection on the threshold."""
    rng = np.random.default_rng(0)
    for v in rng.normal(size=(20, 7)) * 3:
        low, high = v.min() - 1, v.max()
        for _ in range(200):
            theta = (low + high) / 2
            if np.maximum(v - theta, 0).sum() > 1:
                low = theta
            else:
                high = theta
        np.testing.assert_allclose(
            project_to_simplex(v), np.maximum(v - theta, 0), atol=1e-12
        )


def test_projection_of_huge_entries_and_pga_on_a_tiny_training_prior(cifar10):
    """From a largest entry of 2**53 the first test u_1 - (u_1 - 1) > 0
    cancelled to 0 and no rank passed: an IndexError, which PGA's long steps
    met on a training prior with a class at 1e-30 (EM and SQUAREM went on)."""
    np.testing.assert_array_equal(project_to_simplex([1e17, 0.5, 0.2]), [1, 0, 0])
    np.testing.assert_allclose(project_to_simplex([1e300, 1e300, 0.0]), [0.5, 0.5, 0])
    proba, labels = cifar10
    proba = proba[:2000].astype(np.float64)
    proba /= proba.sum(axis=1, keepdims=True)
    q = np.r_[frequencies(labels[:5000], 10)[:-1], 1e-30]
    q /= q.sum()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        estimates = [
            estimate_test_prior(proba, q, solver=solver, tol=1e-10).prior
            for solver in ("em", "pga")
        ]
    np.testing.assert_allclose(estimates[1], estimates[0], atol=1e-6)


def vectorized_em(proba, q, tol):
    """Saerens et al. EM (MLE) from the formula, whole matrices in float64."""
    proba = np.asarray(proba, dtype=np.float64)
    pi = np.array(q, dtype=np.float64)
    for _ in range(100_000):
        r = proba * (pi / q)
        new = (r / r.sum(axis=1, keepdims=True)).mean(axis=0)
        if np.abs(new - pi).sum() <= tol:
            return new
        pi = new
    raise AssertionError("the EM did not converge")


@pytest.mark.parametrize("solver", ["em", "squarem"])
def test_float32_passes_give_the_float64_estimate(cifar100, solver):
    """A float32 input of several blocks is read by float32 products (issue 28).

    At the default tolerance the estimate equals the one from float64 passes
    (the same values as float64) to the tolerance, and the exact MLE (EM from
    the formula, to 1e-13) about as closely; the passes are about as many.
    """
    from skprior.label_shift._solvers import _Problem

    proba, labels = cifar100  # 10,000 x 100: four blocks of a pass
    q = frequencies(labels, 100)
    problem = _Problem(proba, q, 0.0, 1e-6, solver)
    assert len(problem.blocks) > 1 and problem.dtype == np.float32
    narrow = estimate_test_prior(proba, q, solver=solver)
    wide = estimate_test_prior(proba.astype(np.float64), q, solver=solver)
    exact = vectorized_em(proba, q, tol=1e-13)
    assert narrow.converged
    assert np.abs(narrow.prior - wide.prior).sum() < 1e-6
    gaps = [np.abs(r.prior - exact).sum() for r in (narrow, wide)]
    assert gaps[0] < gaps[1] + 1e-6
    assert abs(narrow.n_passes - wide.n_passes) <= 2
    assert narrow.objective == pytest.approx(wide.objective, rel=1e-6)


def test_float64_passes_where_float32_would_not_do(cifar100):
    """PGA, tolerances below 1e-6 and inputs of one block keep float64 passes."""
    from skprior.label_shift._solvers import _Problem

    proba, labels = cifar100
    q = frequencies(labels, 100)
    assert _Problem(proba, q, 0.0, 1e-6, "pga").dtype == np.float64
    assert _Problem(proba, q, 0.0, 1e-7, "em").dtype == np.float64
    assert _Problem(proba[:2000], q, 0.0, 1e-6, "em").dtype == np.float64
    assert _Problem(proba, q, 0.0, 1e-6, "em").dtype == np.float32


def test_float32_pass_near_underflow_equals_float64():
    """Rows whose ``D_i`` float32 would hold as a subnormal are done in float64.

    With the weights scaled to a largest entry of 1, a row with all its mass on
    a class of weight 1e-44 has ``D_i`` = 1e-44, below float32's smallest
    normal number (1.2e-38), where float32 keeps one significant digit.
    """
    from skprior._utils._kernels import row_blocks
    from skprior.label_shift._solvers import _pass_numpy

    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(4), size=600).astype(np.float32)
    proba[::7] = [0.0, 0.0, 0.0, 1.0]
    weights = np.array([2.0, 1.0, 0.5, 2e-44])
    blocks = row_blocks(600, 4, elements=400)
    gradient, log_d = _pass_numpy(proba, weights, blocks, np.float32)
    wide = proba.astype(np.float64)
    d = wide @ weights
    np.testing.assert_allclose(gradient, (wide / d[:, None]).sum(axis=0), rtol=1e-6)
    assert log_d == pytest.approx(np.log(d).sum(), rel=1e-9)


# -- BBSE ------------------------------------------------------------


def test_bbse_matches_linear_solve(cifar10):
    """BBSE equals solving C w = mu by hand, on a real validation/test split."""
    proba, labels = cifar10
    val, test = np.arange(5000), np.arange(5000, 10000)
    confusion = np.zeros((10, 10))
    for pred, true in zip(proba[val].argmax(axis=1), labels[val], strict=True):
        confusion[pred, true] += 1
    confusion /= confusion.sum()
    rng = np.random.default_rng(1)
    idx = test[shifted_sample(labels[test], 3000, 1.0, rng)]
    mu = np.bincount(proba[idx].argmax(axis=1), minlength=10) / len(idx)
    w = np.maximum(np.linalg.solve(confusion, mu), 0)
    expected = w * confusion.sum(axis=0)
    expected /= expected.sum()
    np.testing.assert_allclose(
        bbse_test_prior(proba[idx], confusion, projection="clip"), expected
    )
    assert np.abs(expected - frequencies(labels[idx], 10)).sum() < 0.1


def test_bbse_singular_confusion_is_defined():
    """A class never predicted makes C singular; least squares still answers,
    with a warning that the answer is partly arbitrary."""
    confusion = np.array([[0.5, 0.2, 0.1], [0.0, 0.2, 0.0], [0.0, 0.0, 0.0]])
    confusion /= confusion.sum()
    proba = np.array([[0.9, 0.1, 0.0], [0.2, 0.8, 0.0], [0.6, 0.4, 0.0]])
    with pytest.warns(UserWarning, match="rank 2 for 3 classes"):
        prior = bbse_test_prior(proba, confusion)
    assert np.all(np.isfinite(prior)) and prior.sum() == pytest.approx(1.0)


# -- PriorAdaptedClassifier ------------------------------------------------------------


@pytest.mark.parametrize("method", ["mle", "map", "bbse"])
def test_wrapper_matches_array_functions(blobs, method):
    """predict_proba = Bayes' rule to the prior estimated from the batch."""
    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    wrapper = PriorAdaptedClassifier(model, method=method).fit(
        X[1500:2200], y[1500:2200]
    )
    batch = X[2200:][y[2200:] != 1]
    proba = model.predict_proba(batch)
    q = frequencies(y[1500:2200], 3)
    np.testing.assert_allclose(wrapper.train_prior_, q)
    if method == "bbse":
        prior = bbse_test_prior(proba, wrapper.confusion_)
    else:
        prior = estimate_test_prior(proba, q, method=method).prior
    np.testing.assert_allclose(wrapper.estimate_prior(batch), prior)
    np.testing.assert_allclose(
        wrapper.predict_proba(batch), naive_bayes_rule(proba, q, prior), atol=1e-12
    )
    assert wrapper.__sklearn_tags__().non_deterministic


def test_adaptation_helps_under_shift(blobs):
    """On a shifted batch the MLE moves toward the truth and accuracy does not drop."""
    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    wrapper = PriorAdaptedClassifier(model).fit(X[1500:2200], y[1500:2200])
    rng = np.random.default_rng(0)
    idx = 2200 + shifted_sample(y[2200:], 800, 0.3, rng)
    truth = frequencies(y[idx], 3)
    estimate = wrapper.estimate_prior(X[idx])
    assert np.abs(estimate - truth).sum() < np.abs(wrapper.train_prior_ - truth).sum()
    assert wrapper.score(X[idx], y[idx]) >= model.score(X[idx], y[idx]) - 0.01


def test_binary_logistic_regression(blobs):
    """Two classes (a binary model with a 1-D decision score) work end to end."""
    X, y = blobs
    X, y = X[y < 2], y[y < 2]
    model = LogisticRegression().fit(X[:800], y[:800])
    wrapper = PriorAdaptedClassifier(model, solver="squarem").fit(X[800:], y[800:])
    batch = X[800:][y[800:] == 0]
    prior = wrapper.estimate_prior(batch)
    assert prior.shape == (2,) and prior[0] > 0.85
    assert wrapper.predict_proba(batch).shape == (len(batch), 2)


def test_string_labels_follow_classes_order(blobs):
    """String labels: priors and test_prior are in the order of classes_."""
    X, y = blobs
    names = np.array(["cat", "ant", "bee"])[y]
    model = GaussianNB().fit(X, names)
    assert list(model.classes_) == ["ant", "bee", "cat"]
    test_prior = [0.2, 0.3, 0.5]
    wrapper = PriorAdaptedClassifier(model, method="known", test_prior=test_prior)
    wrapper.fit(X, names)
    expected = GaussianNB(priors=test_prior).fit(X, names).predict_proba(X)
    np.testing.assert_allclose(wrapper.predict_proba(X), expected, atol=1e-8)
    assert set(wrapper.predict(X)) <= {"ant", "bee", "cat"}


def test_zero_training_prior_in_fit(blobs):
    """A class absent from fit's y: clear error, or fine with train_prior=."""
    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X, y)
    held_out = y[2000:] != 2
    with pytest.raises(ValueError, match="train_prior="):
        PriorAdaptedClassifier(model).fit(X[2000:][held_out], y[2000:][held_out])
    wrapper = PriorAdaptedClassifier(model, train_prior=frequencies(y, 3))
    wrapper.fit(X[2000:][held_out], y[2000:][held_out])
    assert np.all(np.isfinite(wrapper.predict_proba(X[:10])))


def test_mean_posterior_source_prior(blobs):
    """source_prior='mean_posterior' uses the mean predicted posterior on fit data."""
    X, y = blobs
    model = GaussianNB().fit(X[:1500], y[:1500])
    wrapper = PriorAdaptedClassifier(model, source_prior="mean_posterior")
    wrapper.fit(X[1500:], y[1500:])
    np.testing.assert_allclose(
        wrapper.train_prior_, model.predict_proba(X[1500:]).mean(axis=0)
    )
    # Then q is the EM fixed point on the fit data: a single pass.
    assert wrapper.n_iter_ == 1


def test_known_needs_a_test_prior(blobs):
    X, y = blobs
    with pytest.raises(ValueError, match="test_prior="):
        PriorAdaptedClassifier(method="known").fit(X, y)
    with pytest.raises(ValueError, match="one entry per class"):
        PriorAdaptedClassifier(method="known", test_prior=[0.5, 0.5]).fit(X, y)


def test_test_prior_with_an_estimating_method_warns(blobs):
    """A test_prior that the method ignores is not dropped silently."""
    X, y = blobs
    with pytest.warns(UserWarning, match="only by method='known'"):
        PriorAdaptedClassifier(test_prior=[0.5, 0.3, 0.2]).fit(X, y)


def test_priors_keyed_by_class_follow_classes_(blobs):
    """A dict or Series prior is matched to classes_ by label, not by position."""
    pd = pytest.importorskip("pandas")
    X, y = blobs
    labels = np.array(["ant", "bee", "cat"])[y]
    by_position = PriorAdaptedClassifier(
        method="known", test_prior=[0.6, 0.3, 0.1], train_prior=[0.2, 0.3, 0.5]
    ).fit(X, labels)
    by_label = PriorAdaptedClassifier(
        method="known",
        test_prior={"cat": 0.1, "ant": 0.6, "bee": 0.3},
        train_prior=pd.Series([0.5, 0.3, 0.2], index=["cat", "bee", "ant"]),
    ).fit(X, labels)
    np.testing.assert_array_equal(by_label.test_prior_, by_position.test_prior_)
    np.testing.assert_array_equal(by_label.train_prior_, by_position.train_prior_)
    with pytest.raises(ValueError, match="keyed by .* not classes_"):
        PriorAdaptedClassifier(
            method="known", test_prior={"ant": 0.5, "dog": 0.5, "cat": 0.0}
        ).fit(X, labels)


def test_array_functions_read_a_keyed_prior_by_column_position():
    """Without class labels, a dict or Series prior is keyed by column 0, 1, ..."""
    pd = pytest.importorskip("pandas")
    proba = np.array([[0.2, 0.8], [0.6, 0.4]])
    expected = adjust_to_prior(proba, [0.5, 0.5], [0.9, 0.1])
    for target in ({1: 0.1, 0: 0.9}, pd.Series([0.1, 0.9], index=[1, 0])):
        np.testing.assert_array_equal(
            adjust_to_prior(proba, [0.5, 0.5], target), expected
        )
    with pytest.raises(ValueError, match="not the columns"):
        adjust_to_prior(proba, [0.5, 0.5], {"a": 0.9, "b": 0.1})


@pytest.mark.parametrize("solver", ["em", "squarem", "pga"])
def test_init_with_zero_likelihood_is_refused(solver):
    """An init that is 0 on all of a row's classes is refused, not NaN."""
    proba = np.array([[0.0, 0.0, 1.0], [0.6, 0.4, 0.0]])
    with pytest.raises(ValueError, match="init is 0 on every class that row 0"):
        estimate_test_prior(proba, [0.5, 0.3, 0.2], init=[0.5, 0.5, 0.0], solver=solver)
    # a zero that strands no row is allowed, and EM keeps that class at 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)  # (2 rows for 3 classes)
        result = estimate_test_prior(
            proba, [0.5, 0.3, 0.2], init=[0.5, 0.0, 0.5], solver="em", max_iter=50
        )
    assert result.prior[1] == 0 and np.all(np.isfinite(result.prior))


@pytest.mark.parametrize("solver", ["em", "squarem"])
def test_init_at_zero_on_a_class_the_batch_holds(solver):
    """EM keeps a class at 0 where init puts it. It used to count that class's
    pull in its convergence test and so ran all max_iter passes, then advised
    "Increase max_iter"; now it stops at the constrained estimate and says why
    it is not the MLE (what pga, which can leave 0, finds)."""
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.ones(3), size=200)
    proba[:100] = [0.05, 0.05, 0.9]
    q = np.ones(3) / 3
    with pytest.warns(UserWarning, match=r"init is 0 for classes \[2\].*not the MLE"):
        result = estimate_test_prior(proba, q, init=[0.5, 0.5, 0.0], solver=solver)
    assert result.converged and result.n_passes < 100 and result.prior[2] == 0
    # the constrained optimum: the MLE of the two classes left
    two = proba[:, :2] / proba[:, :2].sum(axis=1, keepdims=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = estimate_test_prior(two, q[:2] / q[:2].sum(), tol=1e-12).prior
    np.testing.assert_allclose(result.prior[:2], want, atol=1e-4)
    mle = estimate_test_prior(proba, q, init=[0.5, 0.5, 0.0], solver="pga").prior
    assert mle[2] > 0.5
    # a zero on a class the batch does not pull up: no warning
    absent = proba.copy()
    absent[:, 2] = 1e-9
    absent /= absent.sum(axis=1, keepdims=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        estimate_test_prior(absent, q, init=[0.5, 0.5, 0.0], solver=solver)
    # the other warnings still look at an estimate whose init has zeros
    with pytest.warns(UserWarning, match="estimated from a single row"):
        estimate_test_prior(absent[:1], q, init=[0.5, 0.5, 0.0], solver=solver)


def test_fitted_model_is_never_refitted(blobs):
    """No fit of a fitted inner model in fit, predict, or GridSearchCV."""
    X, y = blobs
    model = CountingClassifier().fit(X[:1500], y[:1500])
    CountingClassifier.n_fits = 0
    wrapper = PriorAdaptedClassifier(model, method="map").fit(X[1500:], y[1500:])
    wrapper.predict(X[:100])
    search = GridSearchCV(
        PriorAdaptedClassifier(model, method="map"),
        {"dirichlet_alpha": [1.0, 2.0, 10.0]},
        cv=3,
    ).fit(X[1500:], y[1500:])
    search.predict(X[:100])
    assert CountingClassifier.n_fits == 0


def test_online_estimate_uses_every_sample_seen(blobs):
    """update_prior accumulates; predict_proba is unchanged; reset forgets."""
    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    wrapper = PriorAdaptedClassifier(
        model, solver="squarem", tol=1e-10, online="cumulative"
    )
    wrapper.fit(X[1500:2000], y[1500:2000])
    stream = X[2000:][y[2000:] != 2]
    batches = np.array_split(stream, 4)
    probe = X[2000:2050]
    before = wrapper.predict_proba(probe)
    np.testing.assert_allclose(wrapper.online_prior_, wrapper.train_prior_)
    for batch in batches:
        wrapper.update_prior(batch)
    assert wrapper.n_seen_ == len(stream)
    expected = estimate_test_prior(
        model.predict_proba(stream), wrapper.train_prior_, solver="squarem", tol=1e-10
    ).prior
    np.testing.assert_allclose(wrapper.online_prior_, expected, atol=1e-7)
    np.testing.assert_array_equal(wrapper.predict_proba(probe), before)
    online = wrapper.predict_proba_online(probe)
    np.testing.assert_allclose(online[:5], wrapper.predict_proba_online(probe[:5]))
    np.testing.assert_allclose(
        online,
        naive_bayes_rule(model.predict_proba(probe), wrapper.train_prior_, expected),
        atol=1e-6,
    )
    wrapper.reset_prior()
    assert wrapper.n_seen_ == 0
    np.testing.assert_allclose(wrapper.online_prior_, wrapper.train_prior_)


def test_online_prior_has_the_dtype_of_the_posteriors(blobs):
    """float32 posteriors give a float32 online_prior_ and float32 adapted
    posteriors (float32 in, float32 out)."""
    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    wrapper = PriorAdaptedClassifier(
        FrozenFloat32(FrozenEstimator(model)), shift_level=None
    )
    wrapper.fit(X[1500:2000], y[1500:2000])
    wrapper.update_prior(X[2000:2300])
    assert wrapper.online_prior_.dtype == np.float32
    # The adapted posteriors too (they came back float64 on NumPy, float32 in
    # every other namespace), and they are the float64 ones to float32 rounding.
    proba = FrozenFloat32(FrozenEstimator(model)).predict_proba(X[2300:2400])
    for got, prior in (
        (wrapper.predict_proba(X[2300:2400]), wrapper.estimate_prior(X[2300:2400])),
        (wrapper.predict_proba_online(X[2300:2400]), wrapper.online_prior_),
    ):
        assert got.dtype == np.float32
        expected = naive_bayes_rule(
            proba.astype(np.float64), wrapper.train_prior_, prior.astype(np.float64)
        )
        np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("solver", ["em", "squarem"])
def test_online_estimate_recovers_after_a_batch_of_one(blobs, solver):
    """A first batch of one sample puts the estimate at a vertex (other classes
    near 0); the next batch must still lead to the estimate on all samples."""
    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    wrapper = PriorAdaptedClassifier(
        model, solver=solver, tol=1e-10, online="cumulative"
    )
    wrapper.fit(X[1500:2000], y[1500:2000])
    wrapper.update_prior(X[2000:2001])
    assert wrapper.online_prior_.max() > 0.99
    wrapper.update_prior(X[2001:2900])
    expected = estimate_test_prior(
        model.predict_proba(X[2000:2900]), wrapper.train_prior_, tol=1e-10
    ).prior
    np.testing.assert_allclose(wrapper.online_prior_, expected, atol=1e-6)


@pytest.mark.parametrize("solver", ["em", "squarem", "pga"])
def test_start_near_a_vertex_is_not_taken_for_the_optimum(solver):
    """From init = (1 - 2e-12, 1e-12, 1e-12) one EM step is tiny, but the
    gradient pulls the small classes up: the solvers must not stop there."""
    proba = np.random.default_rng(0).dirichlet(np.ones(3), size=500)
    q = np.full(3, 1 / 3)
    result = estimate_test_prior(
        proba, q, init=[1 - 2e-12, 1e-12, 1e-12], solver=solver, tol=1e-10
    )
    expected = naive_em(proba, q, tol=1e-13)
    assert result.converged
    np.testing.assert_allclose(result.prior, expected, atol=1e-6)


def test_online_bbse_counts_predictions(blobs):
    """On-line BBSE equals BBSE of the whole stream at once."""
    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    # (shift_level=None: estimate_prior gives the estimate, not the test's verdict)
    wrapper = PriorAdaptedClassifier(model, method="bbse", shift_level=None).fit(
        X[1500:2000], y[1500:2000]
    )
    stream = X[2000:]
    for batch in np.array_split(stream, 3):
        wrapper.update_prior(batch)
    np.testing.assert_allclose(wrapper.online_prior_, wrapper.estimate_prior(stream))


def test_not_fitted_errors():
    wrapper = PriorAdaptedClassifier()
    for call in (wrapper.update_prior, wrapper.estimate_prior, wrapper.predict):
        with pytest.raises(NotFittedError):
            call(np.zeros((2, 3)))


def test_predict_on_a_batch_of_one_is_defined(blobs):
    """A single row: MLE answers its vertex quietly, MAP stays smooth."""
    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X, y)
    for method in ("mle", "map"):
        wrapper = PriorAdaptedClassifier(model, method=method, solver="squarem")
        wrapper.fit(X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            proba = wrapper.predict_proba(X[:1])
        assert proba.shape == (1, 3) and np.isfinite(proba).all()


def test_nests_around_temperature_calibration(blobs):
    """PriorAdaptedClassifier(TemperatureCalibratedClassifier(model)): calibrate,
    then adapt; equals Bayes' rule on the calibrated posteriors, no refit."""
    from skprior import TemperatureCalibratedClassifier

    X, y = blobs
    model = CountingClassifier().fit(X[:1500], y[:1500])
    CountingClassifier.n_fits = 0
    calibrated = TemperatureCalibratedClassifier(model, method="nll")
    wrapper = PriorAdaptedClassifier(calibrated, source_prior="mean_posterior")
    wrapper.fit(X[1500:2200], y[1500:2200])
    batch = X[2200:][y[2200:] != 0]
    proba = wrapper.estimator_.predict_proba(batch)
    prior = estimate_test_prior(proba, wrapper.train_prior_).prior
    np.testing.assert_allclose(wrapper.estimate_prior(batch), prior)
    np.testing.assert_allclose(
        wrapper.predict_proba(batch),
        naive_bayes_rule(proba, wrapper.train_prior_, prior),
        atol=1e-12,
    )
    assert CountingClassifier.n_fits == 0  # the fitted model is cloned frozen


def test_squarem_convergence_warning_does_not_advise_squarem(cifar10):
    """The ConvergenceWarning of solver='squarem' does not advise squarem."""
    proba, _ = cifar10
    train = np.full(10, 0.1)
    with pytest.warns(ConvergenceWarning) as caught:
        estimate_test_prior(proba[:500], train, solver="squarem", max_iter=1)
    message = str(caught[0].message)
    assert "solver='squarem'" not in message and "max_iter" in message
    with pytest.warns(ConvergenceWarning, match="solver='squarem'"):
        estimate_test_prior(proba[:500], train, solver="em", max_iter=1)


def test_parameters_changed_after_fit_are_refused_clearly(blobs):
    """set_params after fit: a new method needs a new fit, new stream settings
    a reset_prior; shift_level=None mid-stream adapts from then on."""
    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    wrapper = PriorAdaptedClassifier(model).fit(X[1500:2000], y[1500:2000])
    wrapper.update_prior(X[2000:2050])
    for params in (
        {"method": "rlls"},
        {"method": "map"},
        {"method": "known", "test_prior": [0.2, 0.3, 0.5]},
    ):
        changed = pickle.loads(pickle.dumps(wrapper)).set_params(**params)
        # (prior_interval too: it returned the new method's interval, or the
        # estimator's refusal of 'bbse' in its own words)
        for call in (
            changed.predict_proba,
            changed.update_prior,
            changed.prior_interval,
        ):
            with pytest.raises(ValueError, match="after fit; call fit again"):
                call(X[:10])
    changed = pickle.loads(pickle.dumps(wrapper)).set_params(online="fth")
    with pytest.raises(ValueError, match=r"^online changed .* call reset_prior\(\)"):
        changed.update_prior(X[:10])
    changed.reset_prior().update_prior(X[:10])  # (then it works)
    forced = pickle.loads(pickle.dumps(wrapper)).set_params(shift_level=None)
    forced.update_prior(X[2050:2100])
    assert forced.online_shifted_
    np.testing.assert_allclose(
        forced.predict_proba_online(X[:5]),
        naive_bayes_rule(
            model.predict_proba(X[:5]), forced.train_prior_, forced.online_prior_
        ),
        atol=1e-12,
    )


def test_reset_prior_takes_the_settings_as_they_are(blobs):
    """reset_prior starts a stream with the settings set since fit: a
    misspelt online= is refused there (it built FLH-FTL, the last branch),
    and after a multi-label fit every label's stream takes them (each kept
    its fit-time copy: aggregate, level 0.01)."""
    from sklearn.multioutput import MultiOutputClassifier
    from sklearn.utils._param_validation import InvalidParameterError

    from skprior import FollowTheHistory

    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    wrapper = PriorAdaptedClassifier(model).fit(X[1500:2000], y[1500:2000])
    wrapper.update_prior(X[2000:2050])
    with pytest.raises(InvalidParameterError, match="'online' parameter"):
        wrapper.set_params(online="cumulativ").reset_prior()
    Y = np.column_stack([y == 0, y == 1]).astype(int)
    multi = MultiOutputClassifier(LogisticRegression(max_iter=1000))
    multi.fit(X[:1500], Y[:1500])
    wrapper = PriorAdaptedClassifier(multi).fit(X[1500:2000], Y[1500:2000])
    wrapper.set_params(online="fth", shift_level=None).reset_prior()
    for label in wrapper.label_estimators_:
        assert isinstance(label._stream.tracker, FollowTheHistory)
        assert label.shift_level is None and label.online_shifted_


@pytest.mark.parametrize(
    "online, params",
    [
        ("aggregate", {"online_budget": 50, "online_learning_rate": 2.0, "tol": 1e-3}),
        ("fth", {"online_budget": 50, "online_learning_rate": 2.0, "max_iter": 7}),
        ("flh-ftl", {"online_budget": 50, "dirichlet_alpha": 50.0}),
        ("cumulative", {"online_learning_rate": 2.0}),
    ],
)
def test_settings_a_stream_does_not_keep_may_change_mid_stream(blobs, online, params):
    """Only the settings the stream's tracker was built with are refused
    mid-stream: others (online_budget under "aggregate", the learning rate
    under "fth", ...) leave the stream as it is, without a reset_prior()."""
    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    wrapper = PriorAdaptedClassifier(
        model, method="map", online=online, shift_level=None
    ).fit(X[1500:2000], y[1500:2000])
    wrapper.update_prior(X[2000:2050])
    kept = pickle.loads(pickle.dumps(wrapper))
    changed = pickle.loads(pickle.dumps(wrapper)).set_params(**params)
    changed.update_prior(X[2050:2100])
    if online in ("aggregate", "cumulative"):  # (none of them read per batch)
        kept.update_prior(X[2050:2100])
        np.testing.assert_array_equal(changed.online_prior_, kept.online_prior_)
    assert changed.n_seen_ == 100


@pytest.mark.parametrize(
    "params",
    [{"dirichlet_alpha": 50.0}, {"solver": "em"}, {"max_iter": 7}, {"tol": 1e-3}],
)
def test_cumulative_settings_changed_mid_stream_are_refused(blobs, params):
    """online="cumulative" keeps the estimator's settings from the stream's
    start: a set_params of one of them mid-stream is refused (not ignored), and
    applies after reset_prior; online="fth" reads them at each batch."""
    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    wrapper = PriorAdaptedClassifier(
        model, method="map", online="cumulative", solver="squarem", shift_level=None
    ).fit(X[1500:2000], y[1500:2000])
    wrapper.update_prior(X[2000:2050])
    changed = pickle.loads(pickle.dumps(wrapper)).set_params(**params)
    ((name, value),) = params.items()
    with pytest.raises(ValueError, match=rf"^{name} changed .* reset_prior\(\)"):
        changed.update_prior(X[2050:2060])
    changed.reset_prior().update_prior(X[2050:2060])
    assert getattr(changed._stream.tracker, name) == value
    fth = wrapper.set_params(online="fth").reset_prior()
    fth.update_prior(X[2050:2060])
    fth.set_params(**params).update_prior(X[2060:2070])  # (taken at once)


def test_map_warnings_do_not_advise_map():
    """MAP's warnings give MAP's advice: not "use method='map'", and no MLE
    vertex for a MAP estimate from one row (which is no vertex)."""
    one_row = np.array([[0.3, 0.7, 0.0]])
    q = np.ones(3) / 3
    for method, vertex in (("mle", True), ("map", False)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            estimate_test_prior(one_row, q, method=method)
            proba = np.random.default_rng(0).dirichlet(np.ones(5), size=50)
            estimate_test_prior(proba, np.ones(5) / 5, method=method, max_iter=1)
        messages = [str(w.message) for w in caught]
        assert len(messages) == 2 and "mostly noise" in messages[0]
        assert "did not converge" in messages[1]
        assert ("vertex" in messages[0]) == vertex
        for message in messages:
            assert ("method='map'" in message) == (method == "mle")


def test_pga_on_exact_zeros_is_silent():
    """k-NN posteriors (exact zeros) with a class nearly absent: the projected
    gradient puts that class at 0 under its one-hot rows, where the gradient
    is infinite, and warned "overflow encountered in divide" at each such
    step although the estimate is right (it matches SQUAREM's)."""
    from sklearn.datasets import load_digits
    from sklearn.neighbors import KNeighborsClassifier

    X, y = load_digits(return_X_y=True)
    model = KNeighborsClassifier(5).fit(X[::2], y[::2])
    test, labels = X[1::2], y[1::2]
    keep = np.r_[np.flatnonzero(labels != 9), np.flatnonzero(labels == 9)[:2]]
    proba = model.predict_proba(test[keep])
    q = np.bincount(y[::2]) / len(y[::2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = estimate_test_prior(proba, q, solver="pga")
    exact = estimate_test_prior(proba, q, solver="squarem", tol=1e-10)
    assert found.converged
    np.testing.assert_allclose(found.prior, exact.prior, atol=1e-6)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("test_prior", [0.1, 0.1, 0.8]),
        ("train_prior", [0.2, 0.3, 0.5]),
        ("source_prior", "mean_posterior"),
    ],
)
def test_priors_changed_after_fit_are_refused(blobs, name, value):
    """train_prior, source_prior and test_prior are read by fit only: set after
    it they were ignored without a word (the output unchanged); they are now
    refused as a changed method is. The same values again are no change."""
    X, y = blobs
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    wrapper = PriorAdaptedClassifier(model, method="known", test_prior=[0.8, 0.1, 0.1])
    wrapper.fit(X[1500:2200], y[1500:2200])
    expected = wrapper.predict_proba(X[2200:])
    wrapper.set_params(**wrapper.get_params(deep=False))
    wrapper.set_params(test_prior=np.array([0.8, 0.1, 0.1]))  # (equal values)
    np.testing.assert_array_equal(wrapper.predict_proba(X[2200:]), expected)
    wrapper.set_params(**{name: value})
    with pytest.raises(ValueError, match=f"{name} was changed after fit"):
        wrapper.predict_proba(X[2200:])
    wrapper.fit(X[1500:2200], y[1500:2200])
    assert not np.array_equal(wrapper.predict_proba(X[2200:]), expected)


def test_prior_estimates_compare_by_value():
    """Two results of the same estimate are equal (and one of another batch
    is not); == raised "truth value of an array is ambiguous"."""
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(3), size=50)
    first = estimate_test_prior(proba, [1 / 3] * 3)
    assert first == estimate_test_prior(proba, [1 / 3] * 3)
    assert first != estimate_test_prior(proba[:40], [1 / 3] * 3)
