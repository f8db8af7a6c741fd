"""Tests of the confusion-based prior estimates: BBSE's projection and RLLS.

RLLS (Azizzadenesheli et al. 2019) is checked against a reference written here
from its formula: an enumeration of the coordinates held at the bound -1, each
sub-problem solved from its stationarity condition in closed form and by
bisection (the package finds the active set by NNLS and the root by Brent's
method); against a lower bound from the dual problem solved by scipy's SLSQP,
which certifies optimality by another formulation; and against scipy's bounded
least squares for ``reg = 0``.
"""

import itertools
import warnings

import numpy as np
import pytest
from scipy.optimize import lsq_linear, minimize
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression

from skprior import (
    PriorAdaptedClassifier,
    bbse_test_prior,
    effective_train_prior,
    joint_confusion_matrix,
    rlls_test_prior,
)

# -- references, written from the formulas ---------------------------------------------


def rlls_objective(theta, confusion, b, reg):
    return np.linalg.norm(confusion @ theta - b) + reg * np.linalg.norm(theta)


def ridge_path_subproblem(matrix, target, reg, n_fixed):
    """Minimise ||M x - c|| + reg sqrt(||x||^2 + n_fixed) over all x.

    At a minimum with both terms smooth, M^T r / ||r|| + reg x / s = 0
    (r = M x - c, s = sqrt(||x||^2 + n_fixed)): x is the ridge solution
    (M^T M + lam I)^{-1} M^T c with lam = reg ||r|| / s, a scalar equation in
    lam, solved here by bisection on log lam. The ends (lam -> 0: least
    squares; lam -> infinity: x = 0) are returned as well, as candidates.
    """

    def ridge(lam):
        gram = matrix.T @ matrix + lam * np.eye(matrix.shape[1])
        return np.linalg.solve(gram, matrix.T @ target)

    def gap(log_lam):
        x = ridge(np.exp(log_lam))
        rho = np.linalg.norm(matrix @ x - target)
        return np.exp(log_lam) * np.sqrt(x @ x + n_fixed) - reg * rho

    ends = [np.linalg.lstsq(matrix, target, rcond=None)[0], np.zeros(matrix.shape[1])]
    scale = np.log(np.linalg.norm(matrix, 2) ** 2)
    grid = scale + np.arange(-30, 30.01, 1.0)
    values = [gap(g) for g in grid]
    for left, right, v_left, v_right in zip(
        grid[:-1], grid[1:], values[:-1], values[1:], strict=True
    ):
        if v_left * v_right > 0:
            continue
        for _ in range(60):  # bisection on every sign change of the grid
            middle = (left + right) / 2
            if (gap(middle) < 0) == (v_left < 0):
                left = middle
            else:
                right = middle
        ends.append(ridge(np.exp((left + right) / 2)))
    return ends


def reference_rlls(confusion, b, reg):
    """argmin over theta >= -1 of ||C theta - b|| + reg ||theta||, by enumeration.

    Every set of coordinates held at the bound -1 is tried; the rest is
    minimised without constraint (``ridge_path_subproblem``), and the best
    candidate that satisfies theta >= -1 is the optimum (the candidate of the
    optimum's own active set is the optimum).
    """
    k = b.size
    candidates = [np.zeros(k)]
    for mask in itertools.product([False, True], repeat=k):
        fixed = np.array(mask)
        theta = -np.ones(k)
        if fixed.all():
            candidates.append(theta)
            continue
        free = ~fixed
        target = b + confusion[:, fixed].sum(axis=1)
        for x in ridge_path_subproblem(confusion[:, free], target, reg, fixed.sum()):
            theta = -np.ones(k)
            theta[free] = x
            candidates.append(theta)
    feasible = [t for t in candidates if t.min() >= -1 - 1e-12]
    return min(feasible, key=lambda t: rlls_objective(t, confusion, b, reg))


def dual_bound(confusion, b, reg):
    """A lower bound on the RLLS optimum from its dual, solved by SLSQP.

    ||x|| = max_{||u|| <= 1} u.x turns the problem into
    max -u.b - 1.(C^T u + v) over ||u|| <= 1, ||v|| <= reg, C^T u + v >= 0
    (minimising the Lagrangian over theta >= -1 needs C^T u + v >= 0).
    """
    k = b.size

    def negative_dual(z):
        u, v = z[:k], z[k:]
        return u @ b + np.sum(confusion.T @ u + v)

    constraints = [
        {"type": "ineq", "fun": lambda z: 1 - z[:k] @ z[:k]},
        {"type": "ineq", "fun": lambda z: reg**2 - z[k:] @ z[k:]},
        {"type": "ineq", "fun": lambda z: confusion.T @ z[:k] + z[k:]},
    ]
    result = minimize(
        negative_dual,
        np.zeros(2 * k),
        method="SLSQP",
        constraints=constraints,
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    return -result.fun


def one_hot_batch(frequencies, n):
    """A batch of one-hot posteriors whose hard predictions have these counts."""
    counts = np.round(np.asarray(frequencies) * n).astype(int)
    return np.eye(len(counts))[np.repeat(np.arange(len(counts)), counts)]


def random_problem(rng, k):
    confusion = np.diag(rng.uniform(0.4, 1.0, k)) + rng.uniform(0, 0.3, (k, k))
    confusion /= confusion.sum()
    prior = rng.dirichlet(np.full(k, 0.5))
    mu = confusion @ (prior / confusion.sum(axis=0)) + rng.normal(0, 0.03, k)
    mu = np.abs(mu)
    return confusion, mu / mu.sum()


# -- RLLS ------------------------------------------------------------------------------


def test_rlls_equals_enumeration_reference():
    """RLLS's weights equal the brute-force reference to 1e-8, in every regime."""
    from skprior.label_shift._confusion import rlls_weights

    rng = np.random.default_rng(0)
    regimes = set()
    for trial in range(16):
        k = 2 + trial % 4
        confusion, mu = random_problem(rng, k)
        b = mu - confusion.sum(axis=1)
        sigma = np.linalg.svd(confusion, compute_uv=False)
        for reg in (1e-3, 0.3 * sigma[-1], 2 * sigma[-1], 0.5 * sigma[0]):
            theta = rlls_weights(mu, confusion, reg) - 1
            expected = reference_rlls(confusion, b, reg)
            np.testing.assert_allclose(theta, expected, atol=1e-8, rtol=0)
            if np.all(theta == 0):
                regimes.add("no shift")
            elif np.any(theta <= -1 + 1e-12):
                regimes.add("bound active")
            else:
                regimes.add("interior")
    assert regimes == {"no shift", "bound active", "interior"}


def test_rlls_is_optimal_by_the_dual_on_real_outputs(cifar10):
    """On CIFAR-10 outputs RLLS's objective meets a dual lower bound to 1e-9."""
    from skprior.label_shift._confusion import rlls_weights

    proba, labels = cifar10
    confusion = joint_confusion_matrix(proba[:5000], labels[:5000])
    rng = np.random.default_rng(3)
    pool = np.arange(5000, 10000)
    keep = pool[labels[pool] < 4]  # a strong shift: four classes of ten
    batch = proba[rng.choice(keep, size=300)]
    mu = np.bincount(batch.argmax(axis=1), minlength=10) / 300
    b = mu - confusion.sum(axis=1)
    sigma_min = np.linalg.svd(confusion, compute_uv=False)[-1]
    for reg in (0.2 * sigma_min, 2 * sigma_min, 5 * sigma_min):
        theta = rlls_weights(mu, confusion, reg) - 1
        assert theta.min() >= -1
        value = rlls_objective(theta, confusion, b, reg)
        assert value - dual_bound(confusion, b, reg) < 1e-9
        # the prior is q * (1 + theta), renormalised
        expected = confusion.sum(axis=0) * (1 + theta)
        np.testing.assert_allclose(
            rlls_test_prior(batch, confusion, reg=reg), expected / expected.sum()
        )


def test_rlls_reg_zero_is_bounded_least_squares():
    """reg = 0: least squares under w >= 0 (scipy's bounded least squares)."""
    from skprior.label_shift._confusion import rlls_weights

    rng = np.random.default_rng(1)
    for k in (2, 3, 5, 8):
        confusion, mu = random_problem(rng, k)
        b = mu - confusion.sum(axis=1)
        expected = lsq_linear(confusion, b, bounds=(-1, np.inf), tol=1e-14).x
        theta = rlls_weights(mu, confusion, 0.0) - 1
        np.testing.assert_allclose(theta, expected, atol=1e-8)


def test_rlls_large_reg_gives_no_shift():
    """reg >= ||C^T b|| / ||b|| gives theta = 0 (the held-out prior); below, not."""
    rng = np.random.default_rng(2)
    confusion, mu = random_problem(rng, 4)
    batch = one_hot_batch(mu, 1000)
    mu = batch.mean(axis=0)
    b = mu - confusion.sum(axis=1)
    threshold = np.linalg.norm(confusion.T @ b) / np.linalg.norm(b)
    q = confusion.sum(axis=0)
    np.testing.assert_allclose(rlls_test_prior(batch, confusion, reg=10.0), q)
    np.testing.assert_allclose(
        rlls_test_prior(batch, confusion, reg=threshold * 1.0001), q
    )
    moved = rlls_test_prior(batch, confusion, reg=threshold * 0.9)
    assert np.abs(moved - q).sum() > 1e-3


def test_rlls_small_reg_keeps_a_feasible_bbse_solution(cifar10):
    """Below sigma_min(C) a feasible BBSE solution is the RLLS solution."""
    proba, labels = cifar10
    confusion = joint_confusion_matrix(proba[:5000], labels[:5000])
    batch = proba[5000:8000]
    sigma_min = np.linalg.svd(confusion, compute_uv=False)[-1]
    bbse = bbse_test_prior(batch, confusion)
    assert bbse.min() > 0  # the unconstrained solution is feasible here
    np.testing.assert_allclose(
        rlls_test_prior(batch, confusion, reg=0.5 * sigma_min), bbse, atol=1e-10
    )


def test_rlls_auto_reg_is_the_documented_formula(cifar10):
    """reg="auto" is sigma_min(C) sqrt(log(2K / 0.05) / n), n the batch size."""
    proba, labels = cifar10
    confusion = joint_confusion_matrix(proba[:5000], labels[:5000])
    for n in (20, 200):
        batch = proba[5000 : 5000 + n]
        sigma_min = np.linalg.svd(confusion, compute_uv=False)[-1]
        reg = sigma_min * np.sqrt(np.log(2 * 10 / 0.05) / n)
        np.testing.assert_array_equal(
            rlls_test_prior(batch, confusion),
            rlls_test_prior(batch, confusion, reg=reg),
        )


def test_rlls_bad_input_names_the_argument():
    """A negative reg or a confusion of the wrong shape is refused."""
    confusion = np.array([[0.4, 0.1], [0.1, 0.4]])
    proba = np.array([[0.9, 0.1], [0.2, 0.8]])
    with pytest.raises(ValueError, match="reg"):
        rlls_test_prior(proba, confusion, reg=-1.0)
    with pytest.raises(ValueError, match="confusion must be of shape"):
        rlls_test_prior(proba, np.eye(3) / 3)
    with pytest.raises(ValueError, match="joint distribution"):
        rlls_test_prior(proba, confusion * 2)


def test_rlls_does_not_modify_inputs():
    """The caller's arrays are left as they were."""
    confusion = np.array([[0.4, 0.1], [0.1, 0.4]])
    proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]])
    before = confusion.copy(), proba.copy()
    rlls_test_prior(proba, confusion, reg=0.01)
    np.testing.assert_array_equal(confusion, before[0])
    np.testing.assert_array_equal(proba, before[1])


# -- BBSE's projection -----------------------------------------------------------------


def naive_simplex_projection(v):
    """max(v - tau, 0) with tau found by bisection so that the result sums to 1."""
    low, high = v.min() - 1, v.max()
    for _ in range(200):
        tau = (low + high) / 2
        if np.maximum(v - tau, 0).sum() > 1:
            low = tau
        else:
            high = tau
    return np.maximum(v - (low + high) / 2, 0)


def test_bbse_projections_follow_their_formulas(cifar10):
    """simplex: the Euclidean projection of w * q; clip: max(w, 0) * q renormalised."""
    proba, labels = cifar10
    confusion = joint_confusion_matrix(proba[:5000], labels[:5000])
    pool = np.arange(5000, 10000)
    batch = proba[pool[labels[pool] < 3]]  # seven classes absent: w < 0 somewhere
    mu = np.bincount(batch.argmax(axis=1), minlength=10) / len(batch)
    w = np.linalg.solve(confusion, mu)
    q = confusion.sum(axis=0)
    assert w.min() < 0
    clipped = np.maximum(w, 0) * q
    np.testing.assert_allclose(
        bbse_test_prior(batch, confusion, projection="clip"),
        clipped / clipped.sum(),
    )
    np.testing.assert_allclose(
        bbse_test_prior(batch, confusion), naive_simplex_projection(w * q), atol=1e-12
    )


def test_bbse_projection_is_never_farther_from_the_truth():
    """The projection is at most as far (L2) from any prior as the raw estimate."""
    rng = np.random.default_rng(4)
    for _ in range(50):
        confusion, mu = random_problem(rng, 5)
        batch = one_hot_batch(mu, 400)
        mu = batch.mean(axis=0)
        raw = np.linalg.solve(confusion, mu) * confusion.sum(axis=0)
        truth = rng.dirichlet(np.ones(5))
        projected = bbse_test_prior(batch, confusion)
        distance = np.linalg.norm(projected - truth)
        assert distance <= np.linalg.norm(raw - truth) + 1e-12


# -- PriorAdaptedClassifier(method="rlls") ---------------------------------------------


@pytest.fixture(scope="module")
def three_classes():
    X, y = make_classification(
        n_samples=3000,
        n_features=6,
        n_informative=4,
        n_redundant=0,
        n_classes=3,
        n_clusters_per_class=1,
        random_state=0,
    )
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    return model, X, y


@pytest.mark.parametrize("rlls_reg", ["auto", 0.0, 0.05])
def test_wrapper_rlls_matches_array_function(three_classes, rlls_reg):
    """method="rlls" adapts to rlls_test_prior of the batch with the fit confusion."""
    model, X, y = three_classes
    wrapper = PriorAdaptedClassifier(model, method="rlls", rlls_reg=rlls_reg)
    wrapper.fit(X[1500:2200], y[1500:2200])
    np.testing.assert_allclose(
        wrapper.confusion_,
        joint_confusion_matrix(model.predict_proba(X[1500:2200]), y[1500:2200]),
    )
    batch = X[2200:][y[2200:] != 1][:200]
    proba = model.predict_proba(batch)
    prior = rlls_test_prior(proba, wrapper.confusion_, reg=rlls_reg)
    np.testing.assert_allclose(wrapper.estimate_prior(batch), prior)
    expected = proba * prior / wrapper.train_prior_
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(wrapper.predict_proba(batch), expected, atol=1e-12)


def test_online_rlls_equals_rlls_of_the_whole_stream(three_classes):
    """update_prior for "rlls" keeps counts: the estimate of the stream so far
    (compared with the estimate itself, so without the test of no shift)."""
    model, X, y = three_classes
    wrapper = PriorAdaptedClassifier(model, method="rlls", shift_level=None).fit(
        X[1500:2000], y[1500:2000]
    )
    stream = X[2000:2600]
    for batch in np.array_split(stream, 3):
        wrapper.update_prior(batch)
    assert wrapper.n_seen_ == 600
    np.testing.assert_allclose(wrapper.online_prior_, wrapper.estimate_prior(stream))


@pytest.mark.parametrize("reg", [True, False])
def test_rlls_penalty_given_as_a_bool_is_refused(reg):
    """reg=True was taken as the penalty 1.0 (a bool is an int)."""
    rng = np.random.default_rng(0)
    proba, y = rng.dirichlet(np.ones(3), 200), rng.integers(0, 3, 200)
    confusion = joint_confusion_matrix(proba, y)
    with pytest.raises(ValueError, match=r"reg=(True|False): RLLS takes.*reg='auto'"):
        rlls_test_prior(proba, confusion, reg=reg)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"y": np.array([0.0, 1.0, np.nan, 1.0])}, "NaN or infinite labels"),
        (
            {"y": np.array([0, 1, 2, 1]), "sample_weight": np.array([1, 1, 0, 1.0])},
            r"classes \[2\] weight 0",
        ),
    ],
)
def test_effective_train_prior_refuses_what_no_prior_can_hold(kwargs, match):
    """NaN labels were counted as a class, and a class whose weights are all 0
    gave a prior with a 0 entry, which every function taking a prior refuses."""
    with pytest.raises(ValueError, match=match):
        effective_train_prior(**kwargs)


def test_many_classes_finish_quickly():
    """K = 2,000 on 4,000 rows (RLLS took 296 s, the test of shift and BBSE
    minutes at 10,000): the test of shift and BBSE answer, RLLS refuses with
    the alternative (its solves grow faster than K^3)."""
    from skprior import label_shift_test

    n_classes, rng = 2000, np.random.default_rng(0)
    y = np.arange(2 * n_classes) % n_classes
    logits = rng.standard_normal((len(y), n_classes))
    logits[np.arange(len(y)), y] += 5
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    confusion = joint_confusion_matrix(proba, y)
    half = rng.permutation(len(y))[:n_classes]  # (no shift: a random half)
    assert not label_shift_test(proba[half], proba).shifted
    # (two rows a class: some class is never predicted, a zero row of C)
    with pytest.warns(UserWarning, match="the confusion matrix has rank"):
        prior = bbse_test_prior(proba[half], confusion)
    assert prior.shape == (n_classes,) and abs(prior.sum() - 1) < 1e-9
    with pytest.raises(
        ValueError, match="RLLS takes at most 1,000.*estimate_test_prior"
    ):
        rlls_test_prior(proba, confusion)


@pytest.mark.parametrize("estimate", ["bbse", "rlls"])
def test_class_missing_from_the_held_out_labels_warns(cifar10, estimate):
    """A class without held-out rows is a zero column of C: nothing in the
    batch's predictions tells its share, and BBSE / RLLS set it near 0 (0.006
    for a true 0.10) silently. A warning names the class."""
    proba, labels = cifar10
    held_out = np.flatnonzero(labels[:5000] != 3)
    confusion = joint_confusion_matrix(proba[held_out], labels[held_out])
    batch = proba[5000:]
    function = bbse_test_prior if estimate == "bbse" else rlls_test_prior
    with pytest.warns(UserWarning, match=r"classes at columns \[3\] have no rows"):
        prior = function(batch, confusion)
    assert prior[3] < 0.05  # (the arbitrary value the warning speaks of)
    full = joint_confusion_matrix(proba[:5000], labels[:5000])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        function(batch, full)


def test_bbse_with_a_singular_confusion_matrix_warns(cifar10):
    """A class never predicted on the held-out data (a zero row of C), or
    classes that the hard predictions do not tell apart (dependent columns),
    leave the weights free along the null space of C: lstsq's least-norm
    solution sets that part arbitrarily (a constant C gave the uniform prior
    for any batch). That was documented only; a warning now says so."""
    proba, labels = cifar10
    held_out = np.flatnonzero(proba[:5000].argmax(axis=1) != 9)
    confusion = joint_confusion_matrix(proba[held_out], labels[held_out])
    assert np.all(confusion[9] == 0) and np.all(confusion.sum(axis=0) > 0)
    with pytest.warns(UserWarning, match="rank 9 for 10 classes with held-out"):
        bbse_test_prior(proba[5000:], confusion)
    constant = np.full((3, 3), 1 / 9)
    batch = np.eye(3)[[0, 0, 0, 1]]
    with pytest.warns(UserWarning, match="rank 1 for 3 classes"):
        prior = bbse_test_prior(batch, constant)
    np.testing.assert_allclose(prior, 1 / 3)  # (whatever the batch holds)


def test_bbse_from_fewer_rows_than_classes_warns():
    """BBSE from the hard predictions of fewer rows than classes is mostly
    noise (from one row, a vertex: posteriors adjusted to it one-hot, a true
    class at probability 0 in a third of 2-row batches), and now says so, as
    the MLE does; silent before. A batch of as many rows as classes does not."""
    X, y = make_classification(
        n_samples=600, n_classes=3, n_informative=3, n_redundant=0, random_state=0
    )
    model = LogisticRegression().fit(X[:300], y[:300])
    confusion = joint_confusion_matrix(model.predict_proba(X[300:500]), y[300:500])
    batch = model.predict_proba(X[500:])
    with pytest.warns(UserWarning, match="hard predictions of a single row for 3"):
        prior = bbse_test_prior(batch[:1], confusion)
    assert np.sort(prior).tolist() == [0.0, 0.0, 1.0]
    wrapper = PriorAdaptedClassifier(model, method="bbse", shift_level=None)
    wrapper.fit(X[300:500], y[300:500])
    with pytest.warns(UserWarning, match="hard predictions of 2 rows for 3"):
        wrapper.predict_proba(X[500:502])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bbse_test_prior(batch[:3], confusion)
        wrapper.predict_proba(X[500:503])
