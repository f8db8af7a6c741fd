"""Confidence intervals of the estimated test prior (its confidence_interval).

Against naive references written from the formulas (the information matrix
by finite differences of the log-likelihood; the delta method in the first
``K - 1`` coordinates, row by row), on simulated batches whose coverage is
known, on the CIFAR-10 outputs, on every namespace, and on bad input.
"""

import dataclasses
import warnings

import numpy as np
import pytest
from conftest import load_model_outputs
from scipy.special import ndtri, softmax

from skprior import estimate_test_prior
from skprior._utils._array_api import get_namespace
from skprior.label_shift._interval_moments import batch_moments
from skprior.label_shift._prior import PriorEstimate
from skprior.label_shift._repeats import repeated_rows
from tests._namespaces import Namespace

K = 4
MEANS = 2.2 * np.eye(K)


def simulate(counts, rng, temperature=1.0, bias=None):
    """Posteriors of Gaussian classes (unit variance, means 2.2 e_k) under the
    uniform prior, exact for ``temperature=1`` and no ``bias``; and labels."""
    y = np.repeat(np.arange(K), counts)
    x = MEANS[y] + rng.normal(size=(len(y), K))
    logits = x @ MEANS.T - 0.5 * (MEANS**2).sum(axis=1)
    if bias is not None:
        logits = logits + bias
    return softmax(logits / temperature, axis=1), y


def _batch(rng, n, prior, **miscalibration):
    counts = rng.multinomial(n, prior)
    proba, y = simulate(counts, rng, **miscalibration)
    return proba, counts / n, y


UNIFORM = np.full(K, 1 / K)


def _naive_interval(proba, q, prior, target, calibration=None, level=0.95):
    """The delta interval in the coordinates theta = prior[:-1], row by row."""
    n = len(proba)
    g = np.array([row / q / (row @ (prior / q)) for row in proba])
    transform = np.hstack([np.eye(K - 1), -np.ones((K - 1, 1))])  # u -> theta
    info = sum(np.outer(t, t) for t in g @ transform.T) / n
    if target == "prior":
        centred = g @ transform.T - (g @ transform.T).mean(axis=0)
        spread = centred.T @ centred / n / n
        extra = _naive_clusters(proba, q, prior, [g.mean(axis=0)] * K)
        spread += transform @ extra @ transform.T
        score = np.zeros(K - 1)
    elif calibration is None:
        spread, means = np.zeros((K, K)), []
        for j in range(K):
            r = prior[j] * g[:, j]  # responsibilities of class j
            means.append(r @ g / r.sum())
            spread += sum(
                r[i] * np.outer(g[i] - means[j], g[i] - means[j]) for i in range(n)
            )
        spread += n * n * _naive_clusters(proba, q, prior, means)
        spread = transform @ spread @ transform.T / n / n
        score = np.zeros(K - 1)
    else:
        # The batch's mean gradient given the labels, sum_j y_j mu_j, solved
        # for y = (theta, 1 - sum(theta)) from the first K - 1 equations.
        proba_cal, y_cal = calibration
        g_cal = np.array([row / q / (row @ (prior / q)) for row in proba_cal])
        spread, means = np.zeros((K, K)), np.zeros((K, K))
        for j in range(K):
            rows = g_cal[y_cal == j]
            weight = prior[j] * (1 / n + prior[j] / len(rows))
            spread += weight * np.cov(rows.T, bias=True)
            means[j] = rows.mean(axis=0)
        spread += _naive_clusters(proba, q, prior, means)
        system = (means[:-1] - means[-1]).T[:-1]  # [k, j] = mu_jk - mu_Kk
        rhs = g.mean(axis=0)[:-1] - means[-1, :-1]
        theta = np.linalg.solve(system, rhs)
        inverse = np.linalg.inv(system)
        covariance = inverse @ spread[:-1, :-1] @ inverse.T
    if target == "prior" or calibration is None:
        inverse = np.linalg.inv(info)
        covariance = inverse @ spread @ inverse
        theta = prior[:-1] - inverse @ score
    centre = np.append(theta, 1 - theta.sum())
    full = np.vstack([np.eye(K - 1), -np.ones((1, K - 1))])
    se = np.sqrt(np.diag(full @ covariance @ full.T))
    z = ndtri(0.5 + level / 2)
    return np.clip(centre - z * se, 0, 1), np.clip(centre + z * se, 0, 1)


def _naive_clusters(proba, q, prior, means):
    """What repeated rows add, cluster by cluster: a row repeated ``w`` times
    counts ``w**2`` times in the spread of the batch's mean gradient, not
    ``w`` (its deviation from its class mean, over its responsibilities)."""
    clusters = {}
    for row in proba:
        clusters[row.tobytes()] = (row, clusters.get(row.tobytes(), (row, 0))[1] + 1)
    extra = np.zeros((K, K))
    for row, w in clusters.values():
        g = row / q / (row @ (prior / q))
        for j in range(K):
            deviation = g - means[j]
            extra += w * (w - 1) * prior[j] * g[j] * np.outer(deviation, deviation)
    return extra / len(proba) ** 2


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    proba, truth, y = _batch(rng, 400, [0.5, 0.3, 0.15, 0.05], temperature=1.4)
    proba_cal, y_cal = simulate([150, 150, 150, 150], rng, temperature=1.4)
    return proba, truth, y, (proba_cal, y_cal)


def test_information_is_the_hessian_by_finite_differences(data):
    proba = data[0]
    q, point = UNIFORM, np.array([0.4, 0.3, 0.2, 0.1])

    def loglik(prior):
        return np.log(proba @ (prior / q)).sum()

    step, hessian = 1e-4, np.zeros((K, K))
    for a in range(K):
        for b in range(K):
            ea, eb = step * np.eye(K)[a], step * np.eye(K)[b]
            hessian[a, b] = (
                loglik(point + ea + eb)
                - loglik(point + ea - eb)
                - loglik(point - ea + eb)
                + loglik(point - ea - eb)
            ) / (4 * step**2)
    information, gradient_sum = batch_moments(proba, q, point)
    np.testing.assert_allclose(-information, hessian, rtol=1e-5, atol=1e-4)
    gradient = [
        (loglik(point + step * e) - loglik(point - step * e)) / (2 * step)
        for e in np.eye(K)
    ]
    np.testing.assert_allclose(gradient_sum, gradient, rtol=1e-7)


@pytest.mark.parametrize("target", ["prior", "batch", "calibrated"])
def test_delta_method_matches_naive_reference(data, target):
    proba, _, _, calibration = data
    estimate = estimate_test_prior(proba, UNIFORM, tol=1e-12)
    assert np.all(estimate.prior > 1 / len(proba))  # (all classes interior)
    calibration = calibration if target == "calibrated" else None
    kind = "prior" if target == "prior" else "batch"
    low, high = estimate.confidence_interval(0.95, target=kind, calibration=calibration)
    expected = _naive_interval(
        proba, UNIFORM, estimate.prior, kind, calibration=calibration
    )
    np.testing.assert_allclose(low, expected[0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(high, expected[1], rtol=1e-6, atol=1e-9)


def _coverage(n, shifts, seed, calibrate, **miscalibration):
    rng = np.random.default_rng(seed)
    calibration = simulate([400] * K, rng, **miscalibration) if calibrate else None
    hits = []
    for _ in range(shifts):
        prior = rng.dirichlet(np.full(K, 3.0))
        proba, truth, _ = _batch(rng, n, prior, **miscalibration)
        estimate = estimate_test_prior(proba, UNIFORM, solver="squarem")
        low, high = estimate.confidence_interval(calibration=calibration)
        hits.append((low <= truth) & (truth <= high))
    return np.mean(hits)


def test_batch_interval_covers_calibrated_posteriors():
    # Exact posteriors: the label-conditional interval covers the batch's
    # proportions at its nominal level (and the Fisher one is not needed).
    assert 0.91 <= _coverage(1000, 150, 0, calibrate=False) <= 0.99


def test_calibration_set_restores_coverage_under_miscalibration():
    # Overconfident posteriors with a class bias: the label-conditional
    # interval is centred on a biased estimate and misses as n grows; the
    # calibration set measures the bias and its noise.
    miscalibration = {"temperature": 0.6, "bias": np.array([0.4, 0.0, -0.2, 0.0])}
    naive = _coverage(4000, 60, 1, calibrate=False, **miscalibration)
    honest = _coverage(4000, 60, 1, calibrate=True, **miscalibration)
    assert naive < 0.75
    assert 0.9 <= honest <= 0.99


def test_fisher_interval_is_wider_than_the_batch_interval(data):
    estimate = estimate_test_prior(data[0], UNIFORM)
    fisher = np.subtract(*estimate.confidence_interval(target="prior")[::-1])
    batch = np.subtract(*estimate.confidence_interval()[::-1])
    assert np.all(fisher > batch)


def _delta_and_bootstrap(estimate, target, calibration):
    """Both intervals (300 seeded resamples) and the bootstrap's width over
    the delta method's, class by class."""
    delta = estimate.confidence_interval(target=target, calibration=calibration)
    boot = estimate.confidence_interval(
        target=target,
        calibration=calibration,
        method="bootstrap",
        n_resamples=300,
        random_state=0,
    )
    return delta, boot, (boot[1] - boot[0]) / (delta[1] - delta[0])


@pytest.mark.parametrize("target", ["prior", "batch"])
def test_bootstrap_agrees_with_delta_method(data, target):
    proba, _, _, calibration = data
    estimate = estimate_test_prior(proba, UNIFORM)
    calibration = calibration if target == "batch" else None
    delta, boot, ratio = _delta_and_bootstrap(estimate, target, calibration)
    assert np.all((0.75 < ratio) & (ratio < 1.33)), ratio
    # (seeded: the same draws again)
    again = estimate.confidence_interval(
        target=target,
        calibration=calibration,
        method="bootstrap",
        n_resamples=300,
        random_state=0,
    )
    np.testing.assert_array_equal(boot[0], again[0])


def test_class_at_the_boundary_gets_a_one_sided_bound():
    rng = np.random.default_rng(3)
    proba, truth, _ = _batch(rng, 2000, [0.5, 0.3, 0.2, 0.0])
    estimate = estimate_test_prior(proba, UNIFORM, solver="squarem")
    assert estimate.prior[3] < 0.5 / 2000
    for kwargs in ({}, {"target": "prior"}, {"method": "bootstrap"}):
        low, high = estimate.confidence_interval(**kwargs, random_state=0)
        assert low[3] == 0 and 0 < high[3] < 0.01, (kwargs, high)
        assert np.all((low <= truth) & (truth <= high))


@pytest.mark.parametrize("target", ["prior", "batch"])
def test_bootstrap_at_the_boundary_keeps_the_profile_bound(target):
    """A class the MLE puts at 0 although the batch holds 2 of its rows: most
    resamples put it at 0 again (the percentile bootstrap fails on the
    boundary), so its bound is at least the profile likelihood's."""
    rng = np.random.default_rng(0)
    means = np.array([0.0, 1.5, 3.0])
    y = rng.choice(3, size=300, p=[0.695, 0.3, 0.005])
    x = means[y] + rng.normal(size=300)
    proba = softmax(-((x[:, None] - means) ** 2) / 2, axis=1)
    estimate = estimate_test_prior(proba, np.full(3, 1 / 3))
    assert estimate.prior[2] < 0.5 / 300 and np.sum(y == 2) == 2
    options = {"target": target, "random_state": 0}
    _, profile = estimate.confidence_interval(**options)
    low, high = estimate.confidence_interval(method="bootstrap", **options)
    assert low[2] == 0 and high[2] >= profile[2] > 0.005
    assert low[2] <= np.mean(y == 2) <= high[2]


def test_boundary_class_with_a_calibration_set_takes_the_larger_bound(data):
    # A class the MLE puts at 0 is in the calibration set's moment equation
    # like any other: its interval is the solve's (clipped at 0), raised to
    # the profile-likelihood bound where that is higher.
    rng = np.random.default_rng(3)
    proba, truth, _ = _batch(rng, 2000, [0.5, 0.3, 0.2, 0.0])
    calibration = simulate([300] * K, rng)
    estimate = estimate_test_prior(proba, UNIFORM, solver="squarem", tol=1e-12)
    assert estimate.prior[3] < 0.5 / 2000
    low, high = estimate.confidence_interval(calibration=calibration)
    profile = estimate.confidence_interval()[1][3]  # (the bound without one)
    assert low[3] == 0 and 0 < profile <= high[3] < 0.01
    assert np.all((low <= truth) & (truth <= high))


@pytest.mark.parametrize("rank", ["full", "deficient"])
def test_boundary_solves_equal_one_pseudo_inverse_per_class(rank):
    """The bordered solves of the boundary classes (O(m^2) each) give what a
    pseudo-inverse of each class's system gives; near rank-deficient
    equations take the pseudo-inverse itself."""
    from skprior.label_shift._intervals import (
        _boundary_moment_solves,
        _moment_solve,
    )

    rng = np.random.default_rng(4)
    for _ in range(30):
        n_classes = int(rng.integers(3, 30))
        class_means = rng.random((n_classes, n_classes)) + 2 * np.eye(n_classes)
        if rank == "deficient":
            class_means[:, 1] = class_means[:, 0]  # (two classes alike)
        factor = rng.normal(size=(n_classes, n_classes))
        spread = factor @ factor.T
        prior = rng.dirichlet(np.ones(n_classes))
        active = rng.random(n_classes) < 0.6
        active[:2] = [True, False]
        prior[~active] = 1e-5 * rng.random((~active).sum())
        index, boundary = np.flatnonzero(active), np.flatnonzero(~active)
        gradient = rng.normal(size=n_classes)
        own, se = _boundary_moment_solves(
            class_means, spread, gradient, prior, index, boundary
        )
        for position, k in enumerate(boundary):
            centre, covariance = _moment_solve(
                class_means, spread, gradient, prior, np.append(index, k)
            )
            np.testing.assert_allclose(own[position], centre[k], rtol=1e-8, atol=1e-10)
            np.testing.assert_allclose(
                se[position], np.sqrt(max(covariance[-1, -1], 0.0)), rtol=1e-8
            )


def test_boundary_bound_is_the_profile_likelihood_root():
    # Two classes, class 1 at 0: the profile likelihood is the likelihood
    # itself along [1 - t, t]; the bound is where it drops by z**2 / 2
    # (to second order, which a small t makes exact).
    rng = np.random.default_rng(4)
    p1 = rng.uniform(0.0, 0.3, size=500)
    proba = np.column_stack([1 - p1, p1])
    q = np.array([0.5, 0.5])
    estimate = estimate_test_prior(proba, q, solver="squarem", tol=1e-12)
    assert estimate.prior[1] < 1e-3 / 500
    high = float(estimate.confidence_interval(0.95)[1][1])

    def drop(t):
        at = np.array([1 - t, t])
        return (
            np.log(proba @ (estimate.prior / q)).sum() - np.log(proba @ (at / q)).sum()
        )

    z = ndtri(0.95)
    assert drop(high) == pytest.approx(z**2 / 2, rel=0.05)


@pytest.mark.parametrize("method", ["mle", "map"])
@pytest.mark.parametrize("solver", ["em", "squarem", "pga"])
def test_every_method_and_solver(data, method, solver):
    proba, truth, _, calibration = data
    estimate = estimate_test_prior(proba, UNIFORM, method=method, solver=solver)
    reference = estimate_test_prior(proba, UNIFORM, method=method, tol=1e-12)
    low, high = estimate.confidence_interval(calibration=calibration)
    ref_low, ref_high = reference.confidence_interval(calibration=calibration)
    np.testing.assert_allclose(low, ref_low, atol=1e-4)
    np.testing.assert_allclose(high, ref_high, atol=1e-4)
    assert np.all((low <= truth) & (truth <= high))


def test_map_interval_corrects_the_dirichlet_pull():
    # A large Dirichlet(a) pulls the MAP estimate towards uniform; the
    # interval is centred back on the data (the known bias of the prior term),
    # on the MLE's interval.
    rng = np.random.default_rng(5)
    proba, _, _ = _batch(rng, 3000, [0.7, 0.2, 0.07, 0.03])
    mle = estimate_test_prior(proba, UNIFORM)
    estimate = estimate_test_prior(proba, UNIFORM, method="map", dirichlet_alpha=10)
    assert np.abs(estimate.prior - mle.prior).max() > 0.005  # (pulled)
    low, high = estimate.confidence_interval()
    mle_low, mle_high = mle.confidence_interval()
    half = (mle_high - mle_low) / 2
    assert np.all(np.abs((low + high) / 2 - (mle_low + mle_high) / 2) < 0.1 * half)
    np.testing.assert_allclose(high - low, mle_high - mle_low, rtol=0.05)


def test_cifar10_with_bcts_calibration(cifar10):
    from skprior import fit_bias_corrected_temperature, softmax_temperature

    proba, labels = cifar10
    logits = np.log(proba.astype(np.float64))
    t, bias = fit_bias_corrected_temperature(logits[:5000], labels[:5000])
    calibrated = softmax_temperature(logits, t, bias)
    cal, y_cal = calibrated[:5000], labels[:5000]
    q = np.bincount(y_cal, minlength=10) / 5000
    rng = np.random.default_rng(0)
    pool = [np.flatnonzero(labels[5000:] == k) + 5000 for k in range(10)]
    hits, fisher_hits = [], []
    for _ in range(40):
        counts = rng.multinomial(1000, rng.dirichlet(np.ones(10)))
        rows = np.concatenate([rng.choice(pool[k], c) for k, c in enumerate(counts)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimate = estimate_test_prior(calibrated[rows], q, solver="squarem")
        low, high = estimate.confidence_interval(calibration=(cal, y_cal))
        hits.append((low <= counts / 1000) & (counts / 1000 <= high))
        low, high = estimate.confidence_interval(target="prior")
        fisher_hits.append((low <= counts / 1000) & (counts / 1000 <= high))
    assert 0.9 <= np.mean(hits) <= 0.99
    assert np.mean(fisher_hits) > np.mean(hits)


def test_calibration_share_is_the_spread_over_refitted_calibration_sets():
    # The honest interval's calibration term, sum_j pi_j^2 / n_j W_j carried
    # through the solve, against a naive loop on a weak real model (LeNet-5,
    # 53 % accurate): the calibration set resampled within each class, BCTS
    # refitted on it (the map is fitted on the same set, in sample), the
    # batch recalibrated, re-estimated and its interval's centre recorded.
    from skprior import fit_bias_corrected_temperature, softmax_temperature

    proba, labels = load_model_outputs("lenet-5-cifar-10")
    logits = np.log(proba.astype(np.float64))
    y_cal = labels[:5000]
    rng = np.random.default_rng(0)
    prior = [0.2, 0.15, 0.15, 0.1, 0.1, 0.1, 0.08, 0.05, 0.04, 0.03]
    batch = np.concatenate(
        [
            rng.choice(np.flatnonzero(labels[5000:] == k) + 5000, c, replace=False)
            for k, c in enumerate(np.rint(2000 * np.array(prior)).astype(int))
        ]
    )  # (distinct rows: no repeats)
    q = np.bincount(y_cal, minlength=10) / 5000

    def honest(pick, tiles=1):
        t, bias = fit_bias_corrected_temperature(logits[pick], y_cal[pick])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimate = estimate_test_prior(
                softmax_temperature(logits[batch], t, bias), q, solver="squarem"
            )
        cal = softmax_temperature(logits[pick], t, bias)
        return estimate.confidence_interval(
            calibration=(np.tile(cal, (tiles, 1)), np.tile(y_cal[pick], tiles))
        )

    z = ndtri(0.975)
    low, high = honest(np.arange(5000))
    # The batch's share alone: the same class means from 1,000 times the rows.
    batch_low, batch_high = honest(np.arange(5000), tiles=1000)
    share = ((high - low) ** 2 - (batch_high - batch_low) ** 2) / (2 * z) ** 2
    classes = [np.flatnonzero(y_cal == k) for k in range(10)]
    centres = []
    for _ in range(100):
        low, high = honest(np.concatenate([rng.choice(c, len(c)) for c in classes]))
        centres.append((low + high) / 2)
    ratio = np.std(centres, axis=0) / np.sqrt(share)
    assert np.all((0.7 < ratio) & (ratio < 1.4)), ratio
    assert 0.9 < ratio.mean() < 1.15, ratio


def test_result_fields_print_and_compare_as_before(data):
    estimate = estimate_test_prior(data[0], UNIFORM)
    names = [field.name for field in dataclasses.fields(estimate)]
    assert names == ["prior", "n_iter", "n_passes", "converged", "objective"]
    assert "proba" not in repr(estimate)
    by_hand = PriorEstimate(estimate.prior, 1, 2, True, 0.0)
    with pytest.raises(ValueError, match="not returned by estimate_test_prior"):
        by_hand.confidence_interval()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"level": 1.0}, r"level must be a confidence level in \(0, 1\)"),
        ({"level": 0.0}, r"level must be a confidence level in \(0, 1\)"),
        ({"level": "0.9"}, r"level must be a confidence level in \(0, 1\)"),
        ({"level": True}, r"level must be a confidence level in \(0, 1\)"),
        ({"method": "profile"}, "method must be one of"),
        ({"target": "population"}, "target must be one of"),
        ({"method": "bootstrap", "n_resamples": 3}, "n_resamples must be an integer"),
        ({"calibration": np.ones((5, 4))}, r"calibration must be a pair"),
        (
            {"calibration": (np.full((5, 3), 1 / 3), [0, 1, 2, 0, 1])},
            "proba_cal has 3 classes, the batch 4",
        ),
        (
            {"calibration": (np.full((5, 4), 0.25), [0, 1, 2, 0, 1])},
            "y_cal has no row of class 3",
        ),
        (
            {"calibration": (np.full((5, 4), 0.25), [0, 1, 2, 3])},
            "y has 4 labels but proba_cal has 5 rows",
        ),
    ],
)
def test_bad_input_is_refused(data, kwargs, message):
    estimate = estimate_test_prior(data[0], UNIFORM)
    with pytest.raises(ValueError, match=message):
        estimate.confidence_interval(**kwargs)


@pytest.mark.parametrize("method", ["delta", "bootstrap"])
def test_calibration_with_the_prior_target_warns_and_changes_nothing(data, method):
    """target="prior" does not use calibration=: a warning says so, and the
    interval is the one without it."""
    estimate = estimate_test_prior(data[0], UNIFORM)
    options = {"target": "prior", "method": method, "random_state": 0}
    with pytest.warns(UserWarning, match="target='prior'.*does not use it"):
        given = estimate.confidence_interval(calibration=data[3], **options)
    np.testing.assert_array_equal(given, estimate.confidence_interval(**options))


def test_inputs_are_not_modified(data):
    proba, _, _, (proba_cal, y_cal) = data
    copies = [array.copy() for array in (proba, proba_cal, y_cal)]
    estimate = estimate_test_prior(proba, UNIFORM)
    estimate.confidence_interval(calibration=(proba_cal, y_cal))
    estimate.confidence_interval(
        calibration=(proba_cal, y_cal), method="bootstrap", random_state=0
    )
    for array, copy in zip((proba, proba_cal, y_cal), copies, strict=True):
        np.testing.assert_array_equal(array, copy)


@pytest.mark.parametrize(
    "combination",
    [
        ("array_api_strict", "CPU_DEVICE", "float64"),
        ("array_api_strict", "device1", "float32"),
        ("torch", "cpu", "float32"),
        ("torch", "cpu", "float64"),
        ("torch", "cuda", "float32"),
        ("dask", None, "float64"),
    ],
    ids=lambda c: "-".join(part for part in c if part),
)
@pytest.mark.parametrize("target", ["prior", "batch", "calibrated"])
def test_every_namespace_gives_numpy_values(data, combination, target):
    proba, _, _, calibration = data
    kind = "prior" if target == "prior" else "batch"
    calibrated = target == "calibrated"
    _assert_namespace_matches(combination, proba, calibration, kind, calibrated)


def _assert_namespace_matches(combination, proba, calibration, kind, calibrated):
    """The interval of ``proba`` (with the labelled ``calibration`` set when
    ``calibrated``) on the namespace of ``combination`` equals NumPy's, and
    the inputs are left unchanged."""
    proba_cal, y_cal = calibration
    ns = Namespace(*combination)
    dtype = np.dtype(combination[2])

    def run(batch, cal, labels, prior):
        given = (cal, labels) if calibrated else None
        tol = 1e-10 if dtype == np.float64 else 1e-6
        estimate = estimate_test_prior(batch, prior, solver="squarem", tol=tol)
        return estimate.confidence_interval(target=kind, calibration=given)

    expected = run(
        proba.astype(dtype), proba_cal.astype(dtype), y_cal, UNIFORM.astype(dtype)
    )
    result = run(ns.f(proba), ns.f(proba_cal), ns.i(y_cal), ns.f(UNIFORM))
    tol = 1e-9 if dtype == np.float64 else 2e-4
    ns.assert_matches(list(result), list(expected), tol, "interval")
    ns.assert_inputs_unchanged()


@pytest.mark.parametrize(
    "combination",
    [("torch", "cpu", "float64"), ("array_api_strict", "CPU_DEVICE", "float64")],
    ids=lambda c: "-".join(c),
)
@pytest.mark.parametrize("calibrated", [False, True])
def test_bootstrap_on_other_namespaces(data, combination, calibrated):
    proba, _, _, (proba_cal, y_cal) = data
    ns = Namespace(*combination)

    def run(batch, cal, labels, prior):
        estimate = estimate_test_prior(batch, prior, tol=1e-10)
        return estimate.confidence_interval(
            method="bootstrap",
            calibration=(cal, labels) if calibrated else None,
            n_resamples=20,
            random_state=1,
        )

    expected = run(proba, proba_cal, y_cal, UNIFORM)
    result = run(ns.f(proba), ns.f(proba_cal), ns.i(y_cal), ns.f(UNIFORM))
    ns.assert_matches(list(result), list(expected), 1e-7, "bootstrap")


def test_class_at_exactly_zero_gives_a_finite_bound_without_warning():
    rng = np.random.default_rng(3)
    proba, truth, _ = _batch(rng, 2000, [0.5, 0.3, 0.2, 0.0])
    estimate = estimate_test_prior(proba, UNIFORM, init=[0.5, 0.3, 0.2, 0.0])
    assert estimate.prior[3] == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        low, high = estimate.confidence_interval()
    assert np.all(np.isfinite(high)) and 0 < high[3] < 0.01
    assert np.all((low <= truth) & (truth <= high))


@pytest.mark.parametrize("method", ["delta", "bootstrap"])
@pytest.mark.parametrize("target", ["batch", "prior"])
def test_one_class_off_the_boundary_is_what_the_others_leave(target, method):
    """Two classes, one at 0: the other's interval mirrors its bound,
    [1 - high, 1] (it has no tangent of its own to be expanded along). The
    bootstrap's re-estimates all put it at 1, which gave [1, 1] before."""
    rng = np.random.default_rng(0)
    y = (rng.random(300) < 0.03).astype(int)
    x = np.array([0.0, 1.0])[y] + rng.normal(size=300)
    proba = softmax(-((x[:, None] - np.array([0.0, 1.0])) ** 2) / 2, axis=1)
    estimate = estimate_test_prior(proba, [0.5, 0.5])
    assert estimate.prior[1] < 0.5 / 300
    low, high = estimate.confidence_interval(
        target=target, method=method, n_resamples=50, random_state=0
    )
    assert low[1] == 0 and 0 < high[1] < 0.2
    np.testing.assert_allclose([low[0], high[0]], [1 - high[1], 1.0])
    truth = np.bincount(y, minlength=2) / 300
    assert np.all((low <= truth) & (truth <= high))


@pytest.mark.parametrize("method", ["delta", "bootstrap"])
@pytest.mark.parametrize("target", ["batch", "prior"])
def test_intervals_are_nested_in_the_level_below_one_half(target, method):
    """A lower level gives a narrower interval, the boundary's bound too: at
    levels below 0.5 the one-sided quantile is negative, and its square made
    the bound at level 1e-6 wider than at 0.95."""
    rng = np.random.default_rng(3)
    proba, _, _ = _batch(rng, 2000, [0.5, 0.3, 0.2, 0.0])
    estimate = estimate_test_prior(proba, UNIFORM, init=[0.5, 0.3, 0.2, 0.0])
    assert estimate.prior[3] == 0.0
    widths = []
    for level in [1e-6, 0.1, 0.3, 0.5, 0.7, 0.95]:
        low, high = estimate.confidence_interval(
            level, target=target, method=method, n_resamples=40, random_state=0
        )
        widths.append(high - low)
    widths = np.array(widths)
    assert np.all(np.diff(widths[:, 3]) >= 0), widths[:, 3]
    assert widths[0, 3] < 1e-6 and widths[-1, 3] > 1e-3
    if method == "delta":  # (the bootstrap's quantiles are nested per draw set)
        assert np.all(np.diff(widths, axis=0) >= -1e-12)


@pytest.mark.parametrize("method", ["mle", "map"])
@pytest.mark.parametrize("rows", ["uniform", "more classes than rows"])
def test_batches_that_leave_no_class_off_the_boundary(method, rows):
    """Every class below 1 / (2 n): the largest is expanded, the others
    bounded; rows that say nothing of a class bound it at 1 (the MLE)."""
    rng = np.random.default_rng(5)
    n_classes, n_rows = (10, 2) if rows == "uniform" else (20, 5)
    proba = (
        np.full((n_rows, n_classes), 1 / n_classes)
        if rows == "uniform"
        else softmax(rng.normal(size=(n_rows, n_classes)), axis=1)
    )
    with pytest.warns(UserWarning, match="mostly noise"):
        estimate = estimate_test_prior(
            proba, np.full(n_classes, 1 / n_classes), method=method
        )
    low, high = estimate.confidence_interval()
    assert np.all(np.isfinite(low) & np.isfinite(high))
    assert np.all((0 <= low) & (low <= estimate.prior) & (estimate.prior <= high))
    assert np.all(high <= 1)
    if rows == "uniform" and method == "mle":  # (MAP's hyper-prior bounds them)
        np.testing.assert_array_equal(high, 1.0)


@pytest.fixture(scope="module")
def repeated(data):
    """A batch drawn with replacement from the 400 rows of ``data``: rows
    repeat (up to 6 times), as in a batch resampled from a finite pool."""
    index = np.random.default_rng(11).choice(len(data[0]), size=700)
    return data[0][index]


@pytest.mark.parametrize("target", ["prior", "batch", "calibrated"])
def test_repeated_rows_match_naive_cluster_loop(data, repeated, target):
    calibration = data[3] if target == "calibrated" else None
    kind = "prior" if target == "prior" else "batch"
    estimate = estimate_test_prior(repeated, UNIFORM, tol=1e-12)
    low, high = estimate.confidence_interval(target=kind, calibration=calibration)
    expected = _naive_interval(
        repeated, UNIFORM, estimate.prior, kind, calibration=calibration
    )
    np.testing.assert_allclose(low, expected[0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(high, expected[1], rtol=1e-6, atol=1e-9)
    # (wider than the same rows taken as independent)
    independent = repeated + np.arange(len(repeated))[:, None] * 1e-13
    alone = estimate_test_prior(independent, UNIFORM, tol=1e-12)
    low_alone, high_alone = alone.confidence_interval(
        target=kind, calibration=calibration
    )
    assert np.all(high - low > 1.1 * (high_alone - low_alone))


@pytest.mark.parametrize("target", ["prior", "batch"])
def test_every_row_twice_gives_the_interval_of_the_rows_once(data, target):
    # Two copies of each row hold no more information than one: the
    # multiplicity-weighted spread (w**2 / (2 n)**2 = 1 / n**2 per row)
    # gives exactly the interval of the batch itself.
    proba = data[0]
    once = estimate_test_prior(proba, UNIFORM, tol=1e-13)
    twice = estimate_test_prior(np.concatenate([proba, proba]), UNIFORM, tol=1e-13)
    expected = once.confidence_interval(target=target)
    result = twice.confidence_interval(target=target)
    np.testing.assert_allclose(result, expected, rtol=1e-7)


def test_only_identical_rows_are_repeats(data):
    proba = data[0][:50].copy()
    proba[1] = proba[0]  # (a repeat)
    proba[2] = np.nextafter(proba[0], 1.0)  # (one ulp away in every entry)
    proba[3, 0] = np.nextafter(proba[3, 0], 1.0)  # (and one in one entry)
    proba[4] = proba[3]
    proba[5] = data[0][3]
    xp, _ = get_namespace(proba)
    keys = np.asarray(batch_moments(proba, UNIFORM, UNIFORM, keys=True)[2])
    rows, counts, index, members = repeated_rows(xp, proba, keys)
    np.testing.assert_array_equal(counts, [2, 2])
    np.testing.assert_array_equal(np.sort(members), [0, 1, 3, 4])
    assert {tuple(index[counts == 2])} <= {(0, 3), (3, 0)}
    assert {row.tobytes() for row in rows} == {proba[0].tobytes(), proba[3].tobytes()}
    assert (
        repeated_rows(
            xp,
            data[0],
            np.asarray(batch_moments(data[0], UNIFORM, UNIFORM, keys=True)[2]),
        )
        is None
    )


@pytest.mark.parametrize(
    "combination",
    [
        ("array_api_strict", "device1", "float32"),
        ("torch", "cpu", "float64"),
        ("torch", "cuda", "float32"),
        ("dask", None, "float64"),
    ],
    ids=lambda c: "-".join(part for part in c if part),
)
def test_repeated_rows_on_every_namespace(data, repeated, combination):
    _assert_namespace_matches(combination, repeated, data[3], "batch", True)


@pytest.mark.parametrize("target", ["prior", "batch"])
def test_bootstrap_repeats_rows_as_the_batch_does(data, repeated, target):
    # The bootstrap redraws groups of identical rows whole, so it widens with
    # the delta method's multiplicity-weighted spread.
    calibration = data[3] if target == "batch" else None
    estimate = estimate_test_prior(repeated, UNIFORM)
    delta, boot, ratio = _delta_and_bootstrap(estimate, target, calibration)
    assert np.all((0.8 < ratio) & (ratio < 1.25)), ratio


@pytest.mark.parametrize(
    "weights, method",
    [
        ("integers", "delta"),
        ("zeros and ones", "delta"),
        ("zeros and ones", "bootstrap"),
    ],
)
def test_calibration_weights_count_as_repeated_rows(data, weights, method):
    """calibration=(proba_cal, y_cal, sample_weight): frequency weights, a
    row of weight w counting as w rows (weight 0: dropped), as in the
    wrapper's fit and the prediction sets. (The bootstrap draws a weighted
    pool by its probabilities, not by repeats: compared on weights 0 and 1.)"""
    rng = np.random.default_rng(11)
    proba_cal, y_cal = simulate([150] * K, rng, temperature=0.7)
    w = rng.integers(0, 4 if weights == "integers" else 2, size=len(y_cal))
    estimate = estimate_test_prior(data[0], UNIFORM)
    options = {"method": method, "n_resamples": 30, "random_state": 4}
    low, high = estimate.confidence_interval(
        calibration=(proba_cal, y_cal, w.astype(float)), **options
    )
    repeated = np.repeat(np.arange(len(y_cal)), w)
    expected = estimate.confidence_interval(
        calibration=(proba_cal[repeated], y_cal[repeated]), **options
    )
    np.testing.assert_allclose(np.stack([low, high]), expected, atol=1e-10)
    unweighted = estimate.confidence_interval(calibration=(proba_cal, y_cal))
    assert not np.allclose(np.stack([low, high]), unweighted, atol=1e-4)


def test_ties_of_a_discrete_model_are_not_repeated_inputs(data, repeated):
    """Where the calibration set's own rows tie (a tree, k-NN's vote shares:
    distinct inputs, one posterior), a batch's identical rows are independent
    draws that tie: counted once each, as distinct rows, not as one input
    repeated (a 20-NN's intervals were 3x wider than their coverage needs)."""
    proba_cal, y_cal = data[3]
    grid = np.round(proba_cal * 20)
    discrete = (grid / grid.sum(axis=1, keepdims=True), y_cal)
    estimate = estimate_test_prior(repeated, UNIFORM, tol=1e-12)
    independent = repeated + np.arange(len(repeated))[:, None] * 1e-13
    alone = estimate_test_prior(independent, UNIFORM, tol=1e-12)
    for method in ("delta", "bootstrap"):
        options = {"method": method, "n_resamples": 20, "random_state": 0}
        got = estimate.confidence_interval(calibration=discrete, **options)
        want = alone.confidence_interval(calibration=discrete, **options)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    counted = estimate.confidence_interval(calibration=data[3])
    low, high = alone.confidence_interval(calibration=data[3])
    assert np.all(counted[1] - counted[0] > 1.1 * (high - low))
