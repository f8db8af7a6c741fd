"""The numerics of temperature scaling: EC, NLL and BCTS on shifted logits.

Solvers behind :func:`skprior.fit_temperature` and
:func:`skprior.fit_bias_corrected_temperature`, on validated logits
(:class:`~skprior.calibration._rows.Rows` of any array namespace) shifted so
that each row's maximum is 0 (no input checks here). Every evaluation (a
function with its first two derivatives, or BCTS's loss with its gradient and,
for Newton's method, its Hessian) is one pass over the logits on their device
that returns scalars, ``K``-vectors or a ``(K + 1) x (K + 1)`` matrix; rows
that must not count have weight 0.

How the temperature is found
----------------------------
Both one-parameter methods reduce to the root of a function of ``log T`` that
never increases with ``T``, solved by Halley's method in ``log T``, safeguarded
by a bracket:

* EC: ``mean_i max_k softmax(z_i / T)_k - accuracy``.
* NLL: the derivative of the mean log loss with respect to ``beta = 1 / T``,
  ``mean_i (E_{softmax(beta z_i)}[z_i] - z_{i y_i})``; the log loss is convex
  in ``beta``, so its derivative increases with ``beta``.

The derivatives come from the same pass: with ``p = softmax(beta d)``, the top
probability ``c = 1 / sum_k exp(beta d_k)`` has ``dc / dbeta = -c E_p[d]``, and
``E_p[d]`` has the variance of ``d`` under ``p`` as its derivative, which has
the third central moment as its own.

Both functions have closed-form limits at ``T -> 0`` and ``T -> infinity``;
comparing them with zero tells whether a root exists before any search. The
search interval is derived from the logits themselves (the smallest gap between
the top logit and the next one, and the largest spread within a row), so that
logits of any scale are handled, and widened until the sign changes. Everything
is computed on ``d = z - max_k z``, which is invariant for the softmax and keeps
every exponent at most 0.

BCTS minimises its log loss, convex in ``(1 / T, b)``, by Newton's method up
to ``_NEWTON_MAX_CLASSES`` classes and by L-BFGS above (:func:`fit_bcts`).
"""

import warnings
from functools import partial

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from skprior._utils._kernels import single_blas_thread
from skprior._utils._validation import warn_user
from skprior.calibration._checks import effective_rows
from skprior.calibration._rows import (
    exp_,
    finite_product,
    softmax_loss,
    softmax_residual,
)

# Search interval before widening: T from (smallest top-logit gap) / 40, where
# every softmax is one-hot to double precision, to 1000 x (largest spread of a
# row), where every softmax is uniform to about 1e-3.
_LOW_FACTOR = 1.0 / 40.0
_HIGH_FACTOR = 1e3
_WIDENING = 40 * np.log(10.0)  # (40 decades either way)
# A Halley (Newton) step this small in log T is the last: the error after it
# is of the order of its cube (square), 1e-18.
_HALLEY_STEP, _NEWTON_STEP = 1e-6, 1e-9
_MAX_STEPS = 200
# BCTS's likelihood-ratio test against the class biases alone: the 99%
# quantile of the chi-square distribution with one degree of freedom (the
# temperature is the one parameter the logits add).
_CHI2_1DF_99 = 6.634896601021214


# Rows per block of the root searches' evaluations on NumPy: about 2**16
# entries, whose float64 temporaries (512 KB each) stay in the CPU cache, so
# that a block's several passes cost one read of the logits. Every evaluation
# sums per row first, so the result does not depend on the blocks.
_EVALUATION_BLOCK = 2**16
# (BCTS's passes too: with 2**22 entries, 32 MB temporaries, 5 times slower.)
# BCTS by Newton's method up to this many classes: its pass adds a K x K
# product per block (at K = 100 a pass costs about twice L-BFGS's, and a fit
# takes 20 passes against 33); above, by L-BFGS. Newton stops by the decrement.
_NEWTON_MAX_CLASSES = 128
_DECREMENT = 1e-12
_MAX_NEWTON_STEPS, _MAX_HALVINGS = 100, 20


# Logits that differ by less than this within every row are refused (as those
# beyond 1e100 are): the derivatives in 1 / T underflow.
_SMALLEST_SPREAD = 1e-100


def _prepass(data, terms):
    """One pass: the weighted means of per-row terms, and the search scale.

    ``terms(rows, d)`` gives per-row vectors ``t``; returns, for each, the
    weighted mean ``sum_i w_i t_i / sum_i w_i`` and a bound on its rounding
    error: a limit that is exactly 0 in exact arithmetic (accuracy exactly at
    chance) comes out as a few 1e-17 of either sign, depending on the order
    of the rows, and within the bound it is taken as 0. The bound is that of
    a sum of ``n`` rounded products, ``n * eps * sum_i |w_i t_i|``, with a
    factor 4 for the weights' sum and the divisions. Sets ``data.total`` and
    ``data.scale``: the smallest positive top-logit gap and the largest row
    spread of the rows of positive weight (``(None, None)`` when no such row
    has two distinct finite entries).
    """
    xp, w = data.xp, data.weights

    def one_block(rows, d):
        # (per row: the gap from the top logit to the next, and the spread)
        finite = xp.isfinite(d)
        gap = -xp.max(xp.where(finite & (d < 0), d, -xp.inf), axis=1)
        spread = -xp.min(xp.where(finite, d, 0.0), axis=1)
        return (*terms(rows, d), gap, spread)

    *parts, gaps, spreads = data.per_row(one_block, _EVALUATION_BLOCK)
    kept = w > 0
    sums = [xp.sum(w), xp.min(xp.where(kept, gaps, xp.inf))]
    sums += [xp.max(xp.where(kept, spreads, 0.0))]
    for t in parts:
        sums += [data.dot(w, t), data.dot(w, xp.abs(t))]
    data.total, gap, spread, *sums = (float(v) for v in data.host(*sums))
    data.scale = (gap, spread) if np.isfinite(gap) else (None, None)
    bound = 4 * data.shape[0] * np.finfo(np.float64).eps / data.total
    return [
        (v / data.total, bound * m) for v, m in zip(sums[::2], sums[1::2], strict=True)
    ]


# -- the two monotone functions of log T ----------------------------------------


def _derivatives(data, row_terms, log_t):
    """``f(log T)`` and its first two derivatives: one pass.

    ``row_terms(rows, c, m1, m2, m3)`` gives, per row, a summand of ``f`` and
    its first two derivatives in ``beta = 1 / T``, from the top probability
    ``c = 1 / sum_k exp(beta d_k)`` and the moments ``m_j = E_p[d^j]`` of
    ``p = softmax(beta d)``; the weighted means are taken to ``log T``.
    """
    xp, beta = data.xp, float(np.exp(-log_t))

    def one_block(rows, d):
        e = exp_(xp, d * beta)
        d = xp.where(xp.isfinite(d), d, 0.0)  # (e is 0 at the -inf entries)
        s0, moments = xp.sum(e, axis=1), []
        for _ in range(3):
            e *= d
            moments.append(xp.sum(e, axis=1) / s0)
        return row_terms(rows, 1.0 / s0, *moments)

    parts = data.per_row(one_block, _EVALUATION_BLOCK)
    f, f1, f2 = (
        np.float64(v) / data.total  # (a float64: 0 / 0 is NaN, not an error)
        for v in data.host(*(data.dot(data.weights, t) for t in parts))
    )
    return f, -beta * f1, beta * f1 + beta * beta * f2


def _solve_log_temperature(data, row_terms, limit_low, limit_high, describe, verbose=0):
    """Root in ``log T`` of a non-increasing ``f`` with known limits.

    ``f`` and its first two derivatives are those of :func:`_derivatives`
    with ``row_terms``. ``limit_low`` and ``limit_high`` are ``(value,
    rounding bound)`` of the limits of ``f`` at ``T -> 0`` and ``T ->
    infinity`` (:func:`_prepass`); a limit within its bound of 0 counts as 0.
    Halley's method from ``T = 1``, safeguarded: a step is at most ``cap``
    (doubled each time it binds, so any scale is reached in a few steps) and
    stays inside the bracket of the points evaluated so far (bisection
    otherwise), within the search interval widened by ``_WIDENING`` in ``log T``.
    Without a root, warn with ``describe(which)`` and return the end of that
    interval on that side. ``verbose`` prints a line at the end (1) and one
    per step, a pass each (2).
    """
    gap, spread = data.scale
    if gap is None:
        warn_user(
            "Every row of logits has all its finite entries equal, so the "
            "probabilities do not depend on the temperature; returning T = 1."
        )
        return 1.0
    if spread < _SMALLEST_SPREAD:
        # (1 / T squared times their squares: inf * 0 below it, a temperature
        # off by 11 orders at 1e-300, and BCTS's Newton solve hung on the NaN)
        raise ValueError(
            f"The logits differ by at most {spread:.3g} within a row: below "
            f"{_SMALLEST_SPREAD:g}, a temperature fit underflows. Multiply them "
            f"by a constant (by 1 / {spread:.3g}): the temperature scales with "
            f"them, and the probabilities do not change."
        )
    log_low, log_high = np.log(gap * _LOW_FACTOR), np.log(spread * _HIGH_FACTOR)
    if limit_low[0] <= limit_low[1] or limit_high[0] >= -limit_high[1]:
        side = "low" if limit_low[0] <= limit_low[1] else "high"
        warn_user(describe(side))
        return float(np.exp(log_low if side == "low" else log_high))
    ends = (log_low - _WIDENING, log_high + _WIDENING)
    bracket, known = list(ends), [False, False]
    x, cap, side = min(max(0.0, ends[0]), ends[1]), 2.0, None
    for n_steps in range(1, _MAX_STEPS + 1):
        with np.errstate(over="ignore", under="ignore"):  # (exp(d / T) -> 0)
            f, f1, f2 = _derivatives(data, row_terms, x)
        if verbose >= 2:
            print(f"temperature: step {n_steps}, T = {np.exp(x):.10g}, f = {f:.3g}")
        # (f > 0: the root is above x; toward: the bracket end on that side)
        below, toward = int(f < 0), int(f > 0)
        bracket[below], known[below] = x, True
        if x == ends[toward]:  # (no sign change over the widened interval)
            side = "high" if f > 0 else "low"
            break
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            newton = -f / f1
            halley = newton / (1 + newton * f2 / (2 * f1))
        step = halley if abs(halley - newton) < abs(newton) else newton
        if not np.sign(step) == np.sign(f) or abs(step) > cap:
            step, cap = np.sign(f) * cap, 2 * cap
        last, x = x, x + step
        if abs(step) <= (_HALLEY_STEP if step is halley else _NEWTON_STEP):
            break
        if not bracket[0] < x < bracket[1]:
            # (an unknown end is probed; a known one, halved toward)
            end = bracket[toward]
            x = (last + end) / 2 if known[toward] else end
        if bracket[1] - bracket[0] <= 1e-13 + 4 * np.finfo(float).eps * abs(x):
            break
    if side is not None:
        warn_user(describe(side))
    if verbose >= 1:  # (BCTS's start: one less, maybe -1)
        print(f"temperature: T = {np.exp(x):.10g} after {n_steps} steps")
    return float(np.exp(x))


def fit_ec(data, verbose=0):
    """EC temperature of the shifted rows ``data``."""
    xp = data.xp

    def terms(rows, d):
        # The accuracy of argmax(z), first index on ties, as predict() has it
        # (the shift keeps the order and the ties of every row).
        correct = xp.astype(xp.argmax(d, axis=1) == data.y[rows], data.dtype)
        n_top = xp.sum(xp.astype(d == 0, data.dtype), axis=1)
        n_finite = xp.sum(xp.astype(xp.isfinite(d), data.dtype), axis=1)
        return correct, 1.0 / n_top - correct, 1.0 / n_finite - correct

    (accuracy, _), limit_low, limit_high = _prepass(data, terms)

    def row_terms(rows, c, m1, m2, m3):
        # (c = max_k p_k and its derivatives in beta: dc = -c m1, since
        # d(sum_k exp(beta d_k)) = sum_k d_k exp(beta d_k))
        return c - accuracy, -c * m1, c * (2 * m1 * m1 - m2)

    describe = partial(_describe_ec, accuracy=accuracy)
    return _solve_log_temperature(
        data, row_terms, limit_low, limit_high, describe, verbose
    )


def _describe_ec(side, accuracy):
    """The warning when no temperature solves EC: ``side`` is "low" or "high"."""
    if side == "low":
        return (
            f"EC found no temperature: the accuracy on the fit data "
            f"({accuracy:.6g}) is at least the mean confidence of the hard "
            f"argmax (T -> 0). The temperature is clipped to the low end of "
            f"its search interval, which makes the probabilities (nearly) "
            f"one-hot. This happens when the model makes no error on the fit "
            f"data; calibrate on held-out data where it does."
        )
    return (
        f"EC found no temperature: the accuracy on the fit data "
        f"({accuracy:.6g}) is at most that of uniform probabilities "
        f"(T -> infinity). The temperature is clipped to the high end of its "
        f"search interval, which makes the probabilities (nearly) uniform. "
        f"The model does no better than chance on the fit data."
    )


def fit_nll(data, verbose=0):
    """NLL temperature of the shifted rows ``data`` (:meth:`Rows.usable`)."""
    xp = data.xp

    def terms(rows, d):
        finite = xp.isfinite(d)
        uniform_mean = xp.sum(xp.where(finite, d, 0.0), axis=1) / xp.sum(
            xp.astype(finite, data.dtype), axis=1
        )
        d_true = data.d_true[rows]
        return -d_true, uniform_mean - d_true

    limit_low, limit_high = _prepass(data, terms)

    def row_terms(rows, c, m1, m2, m3):
        # (the mean of d under p, its variance and third central moment)
        variance = m2 - m1 * m1
        return m1 - data.d_true[rows], variance, m3 - m1 * (3 * variance + m1 * m1)

    return _solve_log_temperature(
        data, row_terms, limit_low, limit_high, _describe_nll, verbose
    )


def _describe_nll(side):
    """The warning when NLL has no minimum: ``side`` is "low" or "high"."""
    if side == "low":
        return (
            "NLL temperature scaling found no minimum: every sample's true "
            "class has the top logit, so the log loss keeps decreasing as "
            "T -> 0. The temperature is clipped to the low end of its search "
            "interval (nearly one-hot probabilities). Calibrate on held-out "
            "data where the model makes errors."
        )
    return (
        "NLL temperature scaling found no minimum: the log loss keeps "
        "decreasing as T -> infinity (the logits are no better than "
        "chance). The temperature is clipped to the high end of its search "
        "interval (nearly uniform probabilities)."
    )


# -- public array functions --------------------------------------------------------


def _bcts_loss(params, data, scale):
    """Mean log loss of BCTS and its gradient in ``params = (a, c)``.

    The logits are ``exp(a) * scale[0] * d + c * scale[1:]``. One pass over
    the row blocks. The ``-inf`` entries of ``d`` have probability exactly 0
    and add nothing to the gradient.
    """
    xp = data.xp
    factor = float(np.exp(params[0]) * scale[0])
    bias = data.asarray(params[1:] * scale[1:])

    def one_block(rows, d):
        w = data.weights[rows]
        loss, residual = softmax_residual(data, rows, d * factor + bias)
        grad_bias = w @ residual
        scaled = xp.sum(finite_product(xp, residual, d), axis=1)
        return loss, data.dot(w, scaled), grad_bias

    with np.errstate(over="ignore", under="ignore"):
        loss, grad_scale, grad_bias = data.sums(one_block, _EVALUATION_BLOCK)
    total = data.total
    return float(loss) / total, np.concatenate(
        [[float(grad_scale) / total * factor], grad_bias / total * scale[1:]]
    )


def _bcts_lbfgs(data, start_temperature, verbose):
    """BCTS by L-BFGS with the gradient of :func:`_bcts_loss`: ``(T, b, loss)``.

    Started from the NLL temperature: the free factor is then of order 1 at
    any logit scale, which keeps it well conditioned; so are the biases, in
    units of ``1 / sqrt(class frequency)`` (without that, 100 classes took
    about four times the passes).
    """
    # (the biases in units of 1 / sqrt(class frequency), where their Hessian,
    # about diag(frequencies) - outer(frequencies), is about the identity)
    frequencies = data.totals / data.total
    scale = np.concatenate([[1.0 / start_temperature], 1.0 / np.sqrt(frequencies)])

    def loss(params):  # (verbose >= 2: a line per evaluation, a pass each)
        value, grad = _bcts_loss(params, data, scale)
        if verbose >= 2:
            _print_step(value)
        return value, grad

    result = minimize(
        loss,
        np.zeros(data.shape[1] + 1),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 1000, "gtol": 1e-9, "ftol": 1e-13},
    )
    if not result.success:
        warn_user(
            f"Bias-corrected temperature scaling did not converge: {result.message}",
            ConvergenceWarning,
        )
    temperature = float(1.0 / (np.exp(result.x[0]) * scale[0]))
    return temperature, result.x[1:] * scale[1:], result.fun


def _bcts_pass(data, theta):
    """BCTS's mean log loss, gradient and Hessian at ``theta``: one pass.

    ``theta = (log a, b)``, the logits ``a d + b``. The Hessian is that in
    ``(a, b)``, where the loss is convex (``sum_i w_i J_i^T (diag(p_i) - p_i
    p_i^T) J_i`` with ``J_i = [d_i, I]``: one product ``P^T diag(w) P`` per
    block), scaled by ``a`` in the first row and column; it lacks the term
    ``a dL/da`` of the Hessian in ``log a``, which is 0 at the minimum and
    would make the matrix indefinite away from it. The ``-inf`` entries of
    ``d`` have probability exactly 0.
    """
    xp, factor = data.xp, float(np.exp(theta[0]))
    bias = data.asarray(theta[1:])

    def one_block(rows, d):
        w = data.weights[rows]
        loss, p = softmax_loss(data, rows, d * factor + bias)
        d = xp.where(xp.isfinite(d), d, 0.0)  # (p is 0 at the -inf entries)
        pd = p * d
        m = xp.sum(pd, axis=1)
        return (
            loss,
            data.dot(w, m - data.d_true[rows]),
            data.dot(w, xp.sum(pd * d, axis=1) - m * m),
            w @ p,
            w @ pd - (w * m) @ p,
            p.T @ (w[:, None] * p),
        )

    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        loss, slope, curve, weight, cross, outer = data.sums(
            one_block, _EVALUATION_BLOCK
        )
    grad = np.concatenate([[factor * slope], weight - data.totals])
    hess = np.diag(np.concatenate([[factor * factor * curve], weight]))
    # (+ 1 on the bias block: the loss does not see the biases' common
    # constant, the Newton step then keeps sum_k b_k)
    hess[1:, 1:] += data.total - outer
    hess[0, 1:] = hess[1:, 0] = factor * cross
    return float(loss) / data.total, grad / data.total, hess / data.total


def _print_step(loss):
    """Print BCTS's loss after a step (``verbose >= 2``)."""
    print(f"BCTS: step, loss {loss:.10g}")


def _bcts_newton(data, start_temperature, verbose):
    """BCTS by Newton's method in ``(log a, b)``: ``(T, b, loss)``.

    The gradient and Hessian of :func:`_bcts_pass`, a backtracking (Armijo)
    line search, started from the NLL temperature and zero biases; the
    biases' common constant, which the loss does not see, is fixed by a
    rank-one term on the Hessian (the Newton step then keeps ``sum_k b_k``).
    It stops once the Newton decrement, twice the decrease the step predicts,
    is below ``_DECREMENT`` of the loss (the step is then taken: the error
    after it is of the order of its square), or when no step along the Newton
    direction decreases the loss (it is at its rounding level: so where the
    logits carry no information and ``a`` tends to 0, its limit).
    """
    theta = np.concatenate([[-np.log(start_temperature)], np.zeros(data.shape[1])])
    loss, grad, hess = _bcts_pass(data, theta)
    for _ in range(_MAX_NEWTON_STEPS):
        step = np.linalg.lstsq(hess, -grad, rcond=None)[0]
        if -grad @ step <= _DECREMENT * max(loss, 1.0):
            theta += step
            break
        # (T changes by at most e**2 a step: where the logits carry no
        # information, a tends to 0 and the full step would overflow it)
        # (a step of 0 in log a, logits equal within every row: left as it is)
        if abs(step[0]) > 2.0:
            step *= 2.0 / abs(step[0])
        for t in 0.5 ** np.arange(_MAX_HALVINGS):
            new = _bcts_pass(data, theta + t * step)
            if new[0] <= loss + 1e-4 * t * (grad @ step):  # (Armijo)
                break
        else:  # (no decrease left to find: the loss is at its rounding)
            break
        theta, (loss, grad, hess) = theta + t * step, new
        if verbose >= 2:
            _print_step(new[0])
    else:
        warn_user(
            f"Bias-corrected temperature scaling did not converge in "
            f"{_MAX_NEWTON_STEPS} Newton steps.",
            ConvergenceWarning,
        )
    return float(np.exp(-theta[0])), theta[1:], loss


def fit_bcts(data, verbose=0):
    """Temperature and mean-zero class biases minimising the log loss of BCTS.

    ``data`` are shifted rows (:meth:`Rows.usable`) in which every class has
    weight. Started from the NLL temperature; Newton's method
    (:func:`_bcts_newton`) up to ``_NEWTON_MAX_CLASSES`` classes, L-BFGS
    (:func:`_bcts_lbfgs`) above, where the Newton pass's ``K x K`` product
    per block would cost more than the passes it saves.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        start_temperature = fit_nll(data, verbose - 1)
    data.totals = data.class_totals()
    solve = _bcts_newton if data.shape[1] <= _NEWTON_MAX_CLASSES else _bcts_lbfgs
    with single_blas_thread():  # (small products, one or two per block)
        temperature, bias, loss = solve(data, start_temperature, verbose)
    if verbose >= 1:
        print(f"BCTS: T = {temperature:.10g}, loss {loss:.10g}")
    bias = bias - bias.mean()
    _, spread = data.scale
    gain = _likelihood_ratio(loss, data)
    if gain < _CHI2_1DF_99 or (
        spread is not None and temperature > spread * _HIGH_FACTOR
    ):
        warn_user(
            f"Bias-corrected temperature scaling found the logits no better "
            f"than chance on this data: the fitted probabilities beat the class "
            f"biases alone (the label frequencies) by a likelihood ratio of "
            f"{gain:.3g}, below {_CHI2_1DF_99:.2f} (the 1% level of a "
            f"chi-square with one degree of freedom), so T = {temperature:.3g} "
            f"is not supported by the data. Check that the logits and labels "
            f"belong together, or calibrate on more data.",
        )
    return temperature, bias


def _likelihood_ratio(loss, data):
    """``2 n (H - loss)``: the likelihood-ratio statistic of BCTS's fit.

    ``H`` is the weighted entropy of the label frequencies, the mean log loss
    of the class biases alone (BCTS as ``T -> infinity``), and ``n`` the
    effective number of samples, ``(sum w)^2 / sum w^2``. Under "the logits
    carry no information", it follows about a chi-square law with one degree
    of freedom (the one parameter, 1 / T, that the logits add).
    """
    frequencies = data.class_totals()
    frequencies = frequencies[frequencies > 0] / data.total
    entropy = -np.dot(frequencies, np.log(frequencies))
    return 2.0 * effective_rows(data) * (entropy - loss)
