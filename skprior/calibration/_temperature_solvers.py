"""The numerics of temperature scaling: EC, NLL and BCTS on shifted logits.

Solvers behind :func:`skprior.fit_temperature` and
:func:`skprior.fit_bias_corrected_temperature`, on validated float64 logits
shifted so that each row's maximum is 0 (no input checks here).

How the temperature is found
----------------------------
Both one-parameter methods reduce to the root of a function of ``log T`` that
never increases with ``T``, solved with Brent's method in ``log T``:

* EC: ``mean_i max_k softmax(z_i / T)_k - accuracy``.
* NLL: the derivative of the mean log loss with respect to ``beta = 1 / T``,
  ``mean_i (E_{softmax(beta z_i)}[z_i] - z_{i y_i})``; the log loss is convex
  in ``beta``, so its derivative increases with ``beta``.

Both functions have closed-form limits at ``T -> 0`` and ``T -> infinity``;
comparing them with zero tells whether a root exists before any search. The
search interval is derived from the logits themselves (the smallest gap between
the top logit and the next one, and the largest spread within a row), so that
logits of any scale are handled, and widened until the sign changes. Everything
is computed on ``d = z - max_k z``, which is invariant for the softmax and keeps
every exponent at most 0.
"""

import warnings

import numpy as np
from scipy.optimize import brentq, minimize
from sklearn.exceptions import ConvergenceWarning

from skprior._utils._kernels import row_blocks
from skprior._utils._validation import warn_user

# Search interval before widening: T from (smallest top-logit gap) / 40, where
# every softmax is one-hot to double precision, to 1000 x (largest spread of a
# row), where every softmax is uniform to about 1e-3.
_LOW_FACTOR = 1.0 / 40.0
_HIGH_FACTOR = 1e3
_MAX_WIDENINGS = 40
# BCTS's likelihood-ratio test against the class biases alone: the 99%
# quantile of the chi-square distribution with one degree of freedom (the
# temperature is the one parameter the logits add).
_CHI2_1DF_99 = 6.634896601021214


def shifted(z):
    """``d = z - max_k z`` (every entry <= 0, top entries exactly 0)."""
    return z - z.max(axis=1, keepdims=True)


# Rows per block of the root searches' evaluations: about 2**16 entries, whose
# float64 temporaries (512 KB each) stay in the CPU cache, so that a block's
# several passes cost one read of the logits. Every evaluation sums per row
# first, so the result does not depend on the blocks.
_EVALUATION_BLOCK = 2**16


class ShiftedLogits:
    """Validated logits ``z`` seen as ``d = z - max_k z`` in float64.

    ``z`` (float32 or float64) is kept as it is, never written to, and ``d``
    is formed one block of rows at a time: a float64 copy of a float32 batch
    would be twice its size. Each block of ``d`` equals the same rows of
    ``shifted(z.astype(np.float64))`` exactly (a float32 maximum converts
    exactly, and the subtraction is the same float64 operation).
    """

    def __init__(self, z, top=None):
        self.z = z
        self.shape = z.shape
        self.top = z.max(axis=1).astype(np.float64) if top is None else top

    def block(self, rows):
        """``d[rows]``, a new float64 array (``rows`` a slice)."""
        d = self.z[rows].astype(np.float64)
        d -= self.top[rows, None]
        return d

    def blocks(self, elements=None):
        """``(slice, d[slice])`` over the rows, about ``elements`` entries each."""
        for rows in row_blocks(*self.shape, elements=elements):
            yield rows, self.block(rows)

    def true_entries(self, y):
        """``d[i, y_i]`` of every row, float64."""
        return self.z[np.arange(self.shape[0]), y].astype(np.float64) - self.top

    def __getitem__(self, keep):
        """The rows selected by a boolean mask, as a new ``ShiftedLogits``."""
        return ShiftedLogits(self.z[keep], self.top[keep])


# -- the two monotone functions of log T ----------------------------------------


def _mean_confidence(d, weights, temperature):
    """Weighted mean over rows of ``max_k softmax(d / T)`` (``d``: ShiftedLogits)."""
    sums = np.empty(d.shape[0])
    for block, rows in d.blocks(_EVALUATION_BLOCK):  # (temporaries of one block)
        rows /= temperature
        with np.errstate(over="ignore", under="ignore"):
            sums[block] = np.exp(rows, out=rows).sum(axis=1)
    return np.dot(weights, 1.0 / sums) / weights.sum()


def _nll_slope(d, d_true, weights, temperature):
    """Derivative of the mean log loss with respect to ``beta = 1 / T``."""
    expected = np.empty(d.shape[0])
    for block, rows in d.blocks(_EVALUATION_BLOCK):  # (temporaries of one block)
        with np.errstate(over="ignore", under="ignore"):
            e = np.exp(rows / temperature)
        sums = e.sum(axis=1)
        # (e is 0 at the -inf entries: left there, not 0 * -inf)
        np.multiply(e, rows, out=e, where=np.isfinite(rows))
        expected[block] = e.sum(axis=1) / sums
    return np.dot(weights, expected - d_true) / weights.sum()


def weighted_limit(weights, terms):
    """``sum_i w_i t_i / sum_i w_i`` and a bound on its rounding error.

    A limit that is exactly 0 in exact arithmetic (accuracy exactly at
    chance) comes out as a few 1e-17 of either sign, depending on the order
    of the rows; within the bound it is taken as 0. The bound is that of a
    sum of ``n`` rounded products, ``n * eps * sum_i |w_i t_i|``, with a
    factor 4 for the weights' sum and the divisions.
    """
    total = weights.sum()
    value = np.dot(weights, terms) / total
    scale = np.dot(weights, np.abs(terms)) / total
    return value, 4 * len(terms) * np.finfo(np.float64).eps * scale


def temperature_scale(d):
    """Smallest positive top-logit gap and largest row spread of ``d``.

    ``d`` is a :class:`ShiftedLogits`, read one block at a time.
    """
    gap, spread = np.inf, 0.0
    for _, rows in d.blocks():
        finite = np.isfinite(rows)
        # (reductions with where=: no further float temporary)
        gaps = -np.max(rows, axis=1, where=finite & (rows < 0), initial=-np.inf)
        spreads = -np.min(rows, axis=1, where=finite, initial=0.0)
        gap = min(gap, gaps.min(initial=np.inf))
        spread = max(spread, spreads.max(initial=0.0))
    if not np.isfinite(gap):
        return None, None
    return gap, spread


def _solve_log_temperature(func, d, limit_low, limit_high, describe, scale=None):
    """Root in ``log T`` of a non-increasing ``func(T)`` with known limits.

    ``limit_low`` and ``limit_high`` are ``(value, rounding bound)`` of the
    limits of ``func`` at ``T -> 0`` and ``T -> infinity``
    (:func:`weighted_limit`); a limit within its bound of 0 counts as 0.
    Without a root, warn with ``describe(which)`` and return the end of the
    search interval on that side.
    ``scale`` is ``temperature_scale(d)`` when the caller has it (``d`` is
    then unused).
    """
    gap, spread = temperature_scale(d) if scale is None else scale
    if gap is None:
        warn_user(
            "Every row of logits has all its finite entries equal, so the "
            "probabilities do not depend on the temperature; returning T = 1."
        )
        return 1.0
    log_low = np.log(gap * _LOW_FACTOR)
    log_high = np.log(spread * _HIGH_FACTOR)

    def f(log_t):
        return func(np.exp(log_t))

    if limit_low[0] <= limit_low[1]:
        warn_user(describe("low"))
        return float(np.exp(log_low))
    if limit_high[0] >= -limit_high[1]:
        warn_user(describe("high"))
        return float(np.exp(log_high))
    f_low, f_high = f(log_low), f(log_high)
    step = np.log(10.0)
    for _ in range(_MAX_WIDENINGS):
        if f_low > 0:
            break
        log_low -= step
        f_low = f(log_low)
    for _ in range(_MAX_WIDENINGS):
        if f_high < 0:
            break
        log_high += step
        f_high = f(log_high)
    if f_low <= 0:
        # The limit is positive but too close to 0 for double precision.
        warn_user(describe("low"))
        return float(np.exp(log_low))
    if f_high >= 0:
        warn_user(describe("high"))
        return float(np.exp(log_high))
    root = brentq(f, log_low, log_high, xtol=1e-13, rtol=4 * np.finfo(float).eps)
    return float(np.exp(root))


def fit_ec(d, y, weights):
    """EC temperature of the :class:`ShiftedLogits` ``d``."""
    # The accuracy of argmax(z), first index on ties, as predict() has it
    # (the shift keeps the order and the ties of every row).
    correct = np.argmax(d.z, axis=1) == y
    accuracy = np.dot(weights, correct) / weights.sum()
    n_top = np.empty(d.shape[0], dtype=np.intp)
    n_finite = np.empty(d.shape[0], dtype=np.intp)
    for block, rows in d.blocks():
        n_top[block] = (rows == 0).sum(axis=1)
        n_finite[block] = np.isfinite(rows).sum(axis=1)
    limit_low = weighted_limit(weights, 1.0 / n_top - correct)
    limit_high = weighted_limit(weights, 1.0 / n_finite - correct)

    def describe(side):
        return _describe_ec(side, accuracy)

    def func(temperature):
        return _mean_confidence(d, weights, temperature) - accuracy

    return _solve_log_temperature(func, d, limit_low, limit_high, describe)


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


def nll_rows(d, y, weights):
    """Rows usable by a log-loss fit: those whose true class is not at -inf.

    ``d`` is an array or a :class:`ShiftedLogits`.
    """
    if isinstance(d, ShiftedLogits):
        d_true = d.true_entries(y)
    else:
        d_true = d[np.arange(d.shape[0]), y]
    keep = np.isfinite(d_true) & (weights > 0)
    if not keep.any():
        raise ValueError(
            "Every sample gives its true class logit -inf (probability 0): the "
            "log loss is infinite at every temperature. Use method='ec'."
        )
    if keep.all():
        return d, y, d_true, weights
    return d[keep], y[keep], d_true[keep], weights[keep]


def fit_nll(d, y, weights):
    # Rows whose true class has probability exactly 0 have an infinite log loss
    # at every temperature, so they cannot move the minimiser: leave them out.
    d, y, d_true, weights = nll_rows(d, y, weights)
    uniform_mean = np.empty(d.shape[0])
    for block, rows in d.blocks():
        finite = np.isfinite(rows)
        uniform_mean[block] = np.sum(rows, axis=1, where=finite) / finite.sum(axis=1)
    limit_low = weighted_limit(weights, -d_true)
    limit_high = weighted_limit(weights, uniform_mean - d_true)

    def func(temperature):
        return _nll_slope(d, d_true, weights, temperature)

    return _solve_log_temperature(func, d, limit_low, limit_high, _describe_nll)


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


def _bcts_loss(params, d, y, weights, scale):
    """Mean log loss of ``softmax(exp(a) * scale * d + b)`` and its gradient.

    Summed over row blocks, so that the temporaries stay the size of a block.
    The ``-inf`` entries of ``d`` have probability exactly 0 and add nothing
    to the gradient (where ``0 * -inf`` would be NaN).
    """
    log_factor, bias = params[0], params[1:]
    factor = np.exp(log_factor) * scale
    loss, grad_scale, grad_bias = 0.0, 0.0, np.zeros(d.shape[1])
    for block, rows in d.blocks():
        w, labels = weights[block], y[block]
        with np.errstate(over="ignore", under="ignore"):
            t = rows * factor + bias
            top = t.max(axis=1, keepdims=True)
            e = np.exp(t - top)
        sums = e.sum(axis=1, keepdims=True)
        index = np.arange(rows.shape[0])
        loss += np.dot(w, (top + np.log(sums))[:, 0] - t[index, labels])
        e /= sums  # the residual: softmax minus the one-hot label
        e[index, labels] -= 1.0
        grad_bias += w @ e
        # (the residual is 0 at the -inf entries: left there, not 0 * -inf)
        np.multiply(e, rows, out=e, where=np.isfinite(rows))
        grad_scale += np.dot(w, e.sum(axis=1))
    total = weights.sum()
    return loss / total, np.concatenate(
        [[grad_scale / total * factor], grad_bias / total]
    )


def fit_bcts(d, y, weights):
    """Temperature and mean-zero class biases minimising the log loss of BCTS.

    ``d`` holds the usable rows (:func:`nll_rows`) of shifted logits, and every
    class has weight in ``y``. L-BFGS with the analytic gradient of
    :func:`_bcts_loss`, started from the NLL temperature: the free factor is
    then of order 1 at any logit scale, which keeps it well conditioned.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        start_temperature = fit_nll(d, y, weights)
    scale = 1.0 / start_temperature
    result = minimize(
        _bcts_loss,
        np.zeros(d.shape[1] + 1),
        args=(d, y, weights, scale),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 1000, "gtol": 1e-9, "ftol": 1e-13},
    )
    if not result.success:
        warn_user(
            f"Bias-corrected temperature scaling did not converge: {result.message}",
            ConvergenceWarning,
        )
    temperature = float(1.0 / (np.exp(result.x[0]) * scale))
    bias = result.x[1:] - result.x[1:].mean()
    _, spread = temperature_scale(d)
    gain = _likelihood_ratio(result.fun, y, weights, d.shape[1])
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


def _likelihood_ratio(loss, y, weights, n_classes):
    """``2 n (H - loss)``: the likelihood-ratio statistic of BCTS's fit.

    ``H`` is the weighted entropy of the label frequencies, the mean log loss
    of the class biases alone (BCTS as ``T -> infinity``), and ``n`` the
    effective number of samples, ``(sum w)^2 / sum w^2``. Under "the logits
    carry no information", it follows about a chi-square law with one degree
    of freedom (the one parameter, 1 / T, that the logits add).
    """
    frequencies = np.bincount(y, weights=weights, minlength=n_classes)
    frequencies = frequencies[frequencies > 0] / weights.sum()
    entropy = -np.dot(frequencies, np.log(frequencies))
    n_effective = weights.sum() ** 2 / np.dot(weights, weights)
    return 2.0 * n_effective * (entropy - loss)
