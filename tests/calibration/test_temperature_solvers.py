"""The second-order temperature solvers against naive references.

EC and NLL: safeguarded Halley steps in ``log T`` on the value and first two
derivatives of a monotone function, all from one pass (``_derivatives``);
BCTS: Newton's method on the loss, gradient and Hessian of one pass
(``_bcts_pass``) up to ``_NEWTON_MAX_CLASSES`` classes, L-BFGS with its biases
preconditioned by the class frequencies above (tested here by lowering the
threshold). Each is checked against the formula written plainly in NumPy
(finite differences for the derivatives, ``brentq`` / ``scipy.optimize.
minimize`` for the solutions), on real CIFAR outputs and on synthetic logits
with weights and ``-inf`` entries, and for the number of passes it takes.
"""

import numpy as np
import pytest
from conftest import load_model_outputs
from scipy.optimize import brentq, minimize
from scipy.special import logsumexp, softmax

import skprior.calibration._temperature_solvers as solvers
from skprior import fit_bias_corrected_temperature, fit_temperature
from skprior.calibration._rows import fit_rows


def real_logits(name, n_rows):
    proba, labels = load_model_outputs(name)
    with np.errstate(divide="ignore"):
        return np.log(proba[:n_rows].astype(np.float64)), labels[:n_rows]


def synthetic_logits(n_rows=500, n_classes=5, seed=0):
    """Over-confident logits with some -inf entries (never the true class)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n_rows)
    logits = 3 * (rng.normal(size=(n_rows, n_classes)) + 1.2 * np.eye(n_classes)[y])
    zero = (rng.random(size=logits.shape) < 0.1) & (np.eye(n_classes)[y] == 0)
    logits[zero] = -np.inf
    return logits, y, rng.uniform(0.2, 3.0, size=n_rows)


def problems():
    yield (
        "densenet-bc-100-cifar-100",
        (*real_logits("densenet-bc-100-cifar-100", 1000), None),
    )
    yield "lenet-5-cifar-10", (*real_logits("lenet-5-cifar-10", 2000), None)
    yield "synthetic", synthetic_logits()


PROBLEMS = dict(problems())


# -- naive references, written from the formulas -----------------------------------


def naive_probabilities(logits, temperature, bias=0.0):
    with np.errstate(invalid="ignore"):
        return softmax(logits / temperature + bias, axis=1)


def naive_ec(logits, y, weights, log_t):
    """Weighted mean of max_k softmax(z / T)_k, minus the weighted accuracy."""
    correct = np.argmax(logits, axis=1) == y
    confidence = naive_probabilities(logits, np.exp(log_t)).max(axis=1)
    return np.average(confidence - correct, weights=weights)


def naive_nll_slope(logits, y, weights, log_t):
    """d/d(1/T) of the weighted mean log loss: E_p[z] - z_y, p = softmax(z / T)."""
    p = naive_probabilities(logits, np.exp(log_t))
    expected = np.sum(p * np.where(np.isfinite(logits), logits, 0.0), axis=1)
    return np.average(expected - logits[np.arange(len(y)), y], weights=weights)


def naive_root(func, logits, y, weights):
    """The root in log T of func by brentq at full precision."""
    root = brentq(lambda x: func(logits, y, weights, x), -5, 5, xtol=1e-15, rtol=1e-15)
    return np.exp(root)


def naive_bcts_loss(params, logits, y, weights):
    """Weighted mean log loss of softmax(a z + b) and its gradient in (a, b)."""
    a, b = params[0], params[1:]
    u = a * logits + b
    loss = logsumexp(u, axis=1) - u[np.arange(len(y)), y]
    p = softmax(u, axis=1)
    residual = p - np.eye(len(b))[y]
    z = np.where(np.isfinite(logits), logits, 0.0)
    grad = np.concatenate(
        [[np.sum(residual * z, axis=1) @ weights], residual.T @ weights]
    )
    return loss @ weights / weights.sum(), grad / weights.sum()


def shifted_rows(logits, y, weights):
    data = fit_rows(logits, y, weights, shift=True).usable()
    data.totals = data.class_totals()
    return data


# -- EC and NLL -----------------------------------------------------------------------


def test_derivatives_are_the_weighted_moments_of_the_softmax():
    """One pass gives the weighted means of the row terms of c = max_k p_k and
    the moments E_p[d^j], carried to log T by the chain rule."""
    logits, y, weights = synthetic_logits()
    data = fit_rows(logits, y, weights, shift=True).totalled()
    log_t = 0.3
    f, f1, f2 = solvers._derivatives(
        data, lambda rows, c, m1, m2, m3: (c, m1, m3), log_t
    )
    d = logits - logits.max(axis=1, keepdims=True)
    p = naive_probabilities(d, np.exp(log_t))
    finite_d = np.where(np.isfinite(d), d, 0.0)
    c, m1, m3 = (
        p.max(axis=1),
        np.sum(p * finite_d, axis=1),
        np.sum(p * finite_d**3, axis=1),
    )
    beta = np.exp(-log_t)
    expected = [np.average(t, weights=weights) for t in (c, m1, m3)]
    expected = [
        expected[0],
        -beta * expected[1],
        beta * expected[1] + beta**2 * expected[2],
    ]
    np.testing.assert_allclose([f, f1, f2], expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("method", "naive"), [("ec", naive_ec), ("nll", naive_nll_slope)]
)
@pytest.mark.parametrize("log_t", [-0.5, 0.4, 1.5])
def test_ec_and_nll_derivatives_match_finite_differences(method, naive, log_t):
    """The first two derivatives in log T that steer Halley's steps are those
    of the naive function (central differences)."""
    logits, y, weights = synthetic_logits(seed=1)
    seen = []
    original = solvers._derivatives

    def spy(data, row_terms, x):
        seen.append(original(data, row_terms, log_t))
        return original(data, row_terms, x)

    solvers._derivatives = spy
    try:
        fit_temperature(logits, y, method=method, sample_weight=weights)
    finally:
        solvers._derivatives = original
    f, f1, f2 = seen[0]
    h = 1e-4
    values = [naive(logits, y, weights, log_t + k * h) for k in (-1, 0, 1)]
    assert f == pytest.approx(values[1], rel=1e-12, abs=1e-15)
    assert f1 == pytest.approx((values[2] - values[0]) / (2 * h), rel=1e-6)
    assert f2 == pytest.approx((values[2] - 2 * values[1] + values[0]) / h**2, rel=1e-4)


@pytest.mark.parametrize("name", sorted(PROBLEMS))
@pytest.mark.parametrize(
    ("method", "naive"), [("ec", naive_ec), ("nll", naive_nll_slope)]
)
def test_ec_and_nll_equal_a_naive_root(name, method, naive):
    """The temperature is the root of the naive function to 1e-12."""
    logits, y, weights = PROBLEMS[name]
    expected = naive_root(naive, logits, y, weights)
    found = fit_temperature(logits, y, method=method, sample_weight=weights)
    assert found == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name", sorted(PROBLEMS))
@pytest.mark.parametrize("method", ["ec", "nll"])
def test_ec_and_nll_take_few_passes(name, method):
    """From T = 1 the Halley steps need at most 5 passes besides the prepass
    (Brent's method took about 15)."""
    logits, y, weights = PROBLEMS[name]
    calls = []
    original = solvers._derivatives

    def count(*args):
        calls.append(args[-1])
        return original(*args)

    solvers._derivatives = count
    try:
        fit_temperature(logits, y, method=method, sample_weight=weights)
    finally:
        solvers._derivatives = original
    assert 1 <= len(calls) <= 5


@pytest.mark.parametrize("scale", [1e-6, 1e6])
@pytest.mark.parametrize("method", ["ec", "nll"])
def test_far_temperatures_are_reached_by_doubling_steps(scale, method):
    """T of 1e-6 or 1e6 (logits at that scale), far from the start T = 1: the
    capped steps double until the root is bracketed, and the root is exact."""
    logits, y, weights = synthetic_logits(seed=2)
    base = fit_temperature(logits, y, method=method, sample_weight=weights)
    scaled = fit_temperature(scale * logits, y, method=method, sample_weight=weights)
    assert scaled == pytest.approx(scale * base, rel=1e-11)


# -- BCTS -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_bcts_pass_matches_the_naive_gradient_and_its_differences(name):
    """_bcts_pass at theta = (log a, b): the loss and gradient of the naive loss
    (chain rule to log a), and the Hessian in (a, b) from central differences
    of the naive gradient, scaled by a, plus the rank-one term 1 on the biases."""
    logits, y, weights = PROBLEMS[name]
    weights = np.ones(len(y)) if weights is None else weights
    n_classes = logits.shape[1]
    rng = np.random.default_rng(3)
    a, b = 0.7, rng.normal(scale=0.3, size=n_classes)
    loss, grad, hess = solvers._bcts_pass(
        shifted_rows(logits, y, weights), np.concatenate([[np.log(a)], b])
    )
    d = logits - logits.max(axis=1, keepdims=True)
    params = np.concatenate([[a], b])
    naive_loss, naive_grad = naive_bcts_loss(params, d, y, weights)
    assert loss == pytest.approx(naive_loss, rel=1e-12)
    scale = np.concatenate([[a], np.ones(n_classes)])
    np.testing.assert_allclose(grad, scale * naive_grad, rtol=1e-9, atol=1e-14)
    h = 1e-6
    columns = [
        (
            naive_bcts_loss(params + h * e, d, y, weights)[1]
            - naive_bcts_loss(params - h * e, d, y, weights)[1]
        )
        / (2 * h)
        for e in np.eye(n_classes + 1)
    ]
    expected = scale[:, None] * np.array(columns) * scale[None, :]
    expected[1:, 1:] += 1.0
    np.testing.assert_allclose(hess, expected, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("name", sorted(PROBLEMS))
@pytest.mark.parametrize(
    ("solver", "loss_slack", "largest_gradient"),
    [("newton", 1e-13, 1e-9), ("lbfgs", 1e-12, 1e-6)],
)
def test_bcts_equals_naive_minimize(
    name, solver, loss_slack, largest_gradient, request
):
    """T and the mean-zero biases minimise the naive loss: the same minimum
    as scipy.optimize.minimize (L-BFGS on the naive loss and gradient in
    (1 / T, b), without preconditioning, run to its rounding), and a gradient
    at rounding level (Newton) or within L-BFGS's tolerance (L-BFGS, the
    solver above ``_NEWTON_MAX_CLASSES`` classes)."""
    if solver == "lbfgs":
        request.getfixturevalue("lbfgs")
    logits, y, weights = PROBLEMS[name]
    weights = np.ones(len(y)) if weights is None else weights
    temperature, bias = fit_bias_corrected_temperature(logits, y, sample_weight=weights)
    found = np.concatenate([[1 / temperature], bias])
    d = logits - logits.max(axis=1, keepdims=True)  # (the same softmax)
    reference = minimize(
        naive_bcts_loss,
        np.concatenate([[1.0], np.zeros(logits.shape[1])]),
        args=(d, y, weights),
        jac=True,
        method="L-BFGS-B",
        bounds=[(1e-6, None)] + [(None, None)] * len(bias),  # (a > 0: -inf stays)
        options={"gtol": 1e-11, "ftol": 1e-15, "maxiter": 10_000},
    )
    expected = reference.x - np.concatenate(
        [[0.0], np.full(len(bias), reference.x[1:].mean())]
    )
    loss, grad = naive_bcts_loss(found, d, y, weights)
    assert loss <= reference.fun + loss_slack
    assert np.max(np.abs(grad)) < largest_gradient
    # (the reference L-BFGS's own precision, some 1e-6 on 100 classes)
    np.testing.assert_allclose(found, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_bcts_takes_few_passes(name):
    """From the NLL temperature, Newton's method needs at most 7 passes (L-BFGS
    took well over 100)."""
    logits, y, weights = PROBLEMS[name]
    calls = []
    original = solvers._bcts_pass

    def count(data, theta):
        calls.append(theta.copy())
        return original(data, theta)

    solvers._bcts_pass = count
    try:
        fit_bias_corrected_temperature(logits, y, sample_weight=weights)
    finally:
        solvers._bcts_pass = original
    assert 1 <= len(calls) <= 7


@pytest.fixture
def lbfgs(monkeypatch):
    """BCTS by L-BFGS, the solver above ``_NEWTON_MAX_CLASSES`` classes."""
    monkeypatch.setattr(solvers, "_NEWTON_MAX_CLASSES", 1)


@pytest.mark.parametrize(
    ("name", "most"),
    [("densenet-bc-100-cifar-100", 40), ("lenet-5-cifar-10", 20), ("synthetic", 20)],
)
def test_bcts_lbfgs_takes_few_passes(name, most, lbfgs):
    """With the biases in units of 1 / sqrt(class frequency), L-BFGS needs
    about 25 passes on 100 classes (86 without)."""
    logits, y, weights = PROBLEMS[name]
    calls = []
    original = solvers._bcts_loss

    def count(*args):
        calls.append(args[0].copy())
        return original(*args)

    solvers._bcts_loss = count
    try:
        fit_bias_corrected_temperature(logits, y, sample_weight=weights)
    finally:
        solvers._bcts_loss = original
    assert 1 <= len(calls) <= most
