"""Temperature scaling on arrays of other libraries (the array API path).

The same EC, NLL and BCTS fits as ``_temperature_solvers.py``, with the
logits left in their namespace and on their device: every evaluation of the
function whose root Brent's method finds, and every loss-and-gradient of
L-BFGS, is one pass over the logits that returns a scalar or a ``K``-vector
(one Dask compute). The shifted logits ``d = z - max_k z`` are formed block
by block in the working dtype, never stored. Rows that must not count (weight
0, and for the log loss a true class at ``-inf``) keep their place with
weight 0, so that a Dask array keeps its known chunks.
"""

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from skprior._utils._array_api import (
    device_of,
    from_host,
    is_dask,
    map_blocks,
    scalars_to_host,
    sum_blocks,
    to_host,
    work_dtype,
)
from skprior.calibration._checks import warn_separable
from skprior.calibration._temperature_solvers import (
    _HIGH_FACTOR,
    _describe_ec,
    _describe_nll,
    _solve_log_temperature,
)


def softmax_xp(xp, z, temperature, bias):
    """``softmax(z / T + b)`` on an array API array (a lazy map for Dask).

    Block by block in the working dtype, returned in the dtype of ``z``.
    """
    device = device_of(z)
    dtype = work_dtype(xp, device)
    temperature = float(temperature)  # (a NumPy scalar is no array API operand)
    if bias is not None:
        bias = from_host(xp, bias, device, dtype)

    def one_block(block):
        rows = xp.astype(z[block, :], dtype)
        scaled = (rows - xp.max(rows, axis=1, keepdims=True)) / temperature
        if bias is not None:
            scaled = scaled + bias
        top = xp.max(scaled, axis=1, keepdims=True)
        log_total = xp.log(xp.sum(xp.exp(scaled - top), axis=1, keepdims=True))
        return xp.astype(xp.exp(scaled - top - log_total), z.dtype, copy=False)

    return map_blocks(xp, *z.shape, one_block)


class XpLogits:
    """Validated logits, labels and weights on one device.

    ``weights`` is 0 on the rows left out; ``shifted(block)`` is
    ``z - max_k z`` of a block in the working dtype.
    """

    def __init__(self, xp, z, y, weights):
        self.xp, self.z, self.y = xp, z, y
        self.device = device_of(z)
        self.dtype = work_dtype(xp, self.device)
        self.weights = weights
        self.shape = z.shape
        self.classes = xp.arange(z.shape[1], device=self.device)
        # In memory (not Dask) the shifted blocks are kept, as the NumPy path
        # keeps its float64 copy: an evaluation is then two passes, not six.
        self._kept = None if is_dask(xp) else {}

    def shifted(self, block):
        key = (block.start, block.stop)
        if self._kept is not None and key in self._kept:
            return self._kept[key]
        rows = self.xp.astype(self.z[block, :], self.dtype)
        d = rows - self.xp.max(rows, axis=1, keepdims=True)
        if self._kept is not None:
            self._kept[key] = d
        return d

    def true_mask(self, block):
        """``y_i == k`` for the rows of ``block``: the one-hot of the true class."""
        return self.y[block][:, None] == self.classes[None, :]

    def true_entries(self, block, d, mask=None):
        """``d[i, y_i]`` of the rows of ``block`` (``mask``: their true_mask).

        A one-hot sum: the standard has no ``take_along_axis``.
        """
        mask = self.true_mask(block) if mask is None else mask
        return self.xp.sum(self.xp.where(mask, d, 0.0), axis=1)

    def sum_blocks(self, function):
        return sum_blocks(self.xp, *self.shape, function)

    def leave_out_infinite_truth(self):
        """Weights with the rows whose true logit is ``-inf`` set to 0."""
        xp = self.xp

        def one_block(block):
            d = self.shifted(block)
            keep = xp.isfinite(self.true_entries(block, d))
            return (xp.where(keep, self.weights[block], 0.0),)

        self.weights = map_blocks(xp, *self.shape, lambda b: one_block(b)[0])
        (kept,) = scalars_to_host(xp, xp.sum(self.weights))
        if not kept > 0:
            raise ValueError(
                "Every sample gives its true class logit -inf (probability 0): the "
                "log loss is infinite at every temperature. Use method='ec'."
            )

    def scale_terms(self, block, d):
        """Per block: smallest top-logit gap and largest spread of kept rows.

        As ``temperature_scale``.
        """
        xp = self.xp
        finite = xp.isfinite(d)
        kept = self.weights[block] > 0
        gaps = -xp.max(xp.where(finite & (d < 0), d, -xp.inf), axis=1)
        spreads = -xp.min(xp.where(finite, d, 0.0), axis=1)
        gap = xp.min(xp.where(kept & xp.isfinite(gaps), gaps, xp.inf))
        spread = xp.max(xp.where(kept, spreads, 0.0))
        return gap, spread


def _sum_min_max(xp, logits, function):
    """One pass: ``function(block, d)`` returns (sums, min, max) parts."""
    totals = None
    for block in _blocks(logits):
        d = logits.shifted(block)
        sums, low, high = function(block, d)
        if totals is None:
            totals = [sums, low, high]
        else:
            totals = [
                tuple(map(lambda a, b: a + b, totals[0], sums)),
                xp.minimum(totals[1], low),
                xp.maximum(totals[2], high),
            ]
    values = to_host(xp, *totals[0], totals[1], totals[2])
    return [float(v) for v in values[:-2]], (float(values[-2]), float(values[-1]))


def _blocks(logits):
    from skprior._utils._array_api import blocks

    return blocks(logits.xp, *logits.shape)


def _scale(gap, spread):
    return (None, None) if not np.isfinite(gap) else (gap, spread)


def fit_ec_xp(logits):
    """EC temperature (see ``fit_ec``), each evaluation one pass."""
    xp = logits.xp

    def prepass(block, d):
        w = logits.weights[block]
        correct = xp.astype(xp.argmax(d, axis=1) == logits.y[block], logits.dtype)
        n_top = xp.sum(xp.astype(d == 0, logits.dtype), axis=1)
        n_finite = xp.sum(xp.astype(xp.isfinite(d), logits.dtype), axis=1)
        sums = (
            xp.sum(w * correct),
            xp.sum(w / n_top),
            xp.sum(w / n_finite),
            xp.sum(w),
        )
        return (sums, *logits.scale_terms(block, d))

    (correct, top, finite, total), scale = _sum_min_max(xp, logits, prepass)
    accuracy = correct / total

    def func(temperature):
        temperature = float(temperature)
        (inverse,) = logits.sum_blocks(
            lambda block: (
                xp.sum(
                    logits.weights[block]
                    / xp.sum(xp.exp(logits.shifted(block) / temperature), axis=1)
                ),
            )
        )
        return float(inverse) / total - accuracy

    # Each term of EC's limits lies in [-1, 1]: the rounding bound of their
    # weighted mean, as weighted_limit gives it on the NumPy path.
    bound = 4 * logits.shape[0] * np.finfo(np.float64).eps
    return _solve_log_temperature(
        func,
        None,
        (top / total - accuracy, bound),
        (finite / total - accuracy, bound),
        lambda side: _describe_ec(side, accuracy),
        scale=_scale(*scale),
    )


def fit_nll_xp(logits):
    """NLL temperature (see ``fit_nll``), each evaluation one pass.

    Rows whose true logit is ``-inf`` must have weight 0 already.
    """
    xp = logits.xp

    def kept_true(block, d):
        kept = logits.weights[block] > 0
        return kept, xp.where(kept, logits.true_entries(block, d), 0.0)

    def prepass(block, d):
        w = logits.weights[block]
        _, d_true = kept_true(block, d)
        finite = xp.isfinite(d)
        uniform_mean = xp.sum(xp.where(finite, d, 0.0), axis=1) / xp.sum(
            xp.astype(finite, logits.dtype), axis=1
        )
        sums = (
            xp.sum(w * -d_true),
            xp.sum(w * (uniform_mean - d_true)),
            xp.sum(w),
        )
        return (sums, *logits.scale_terms(block, d))

    (low, high, total), scale = _sum_min_max(xp, logits, prepass)

    def slope(block, temperature):
        d = logits.shifted(block)
        _, d_true = kept_true(block, d)
        e = xp.exp(d / temperature)
        # (0 at the -inf entries, whose e is 0: not 0 * -inf)
        finite_d = xp.where(xp.isfinite(d), d, 0.0)
        expected = xp.sum(e * finite_d, axis=1) / xp.sum(e, axis=1)
        return (xp.sum(logits.weights[block] * (expected - d_true)),)

    def func(temperature):
        temperature = float(temperature)
        (value,) = logits.sum_blocks(lambda block: slope(block, temperature))
        return float(value) / total

    # (limits compared with 0 exactly: their terms are logit gaps, unbounded)
    return _solve_log_temperature(
        func,
        None,
        (low / total, 0.0),
        (high / total, 0.0),
        _describe_nll,
        scale=_scale(*scale),
    )


def class_weights_xp(logits):
    """Total weight of each class in ``y`` (a host ``K``-vector)."""
    xp = logits.xp

    def one_block(block):
        hit = logits.true_mask(block)
        return (xp.sum(xp.where(hit, logits.weights[block][:, None], 0.0), axis=0),)

    (weights,) = logits.sum_blocks(one_block)
    return weights


def _bcts_loss_xp(params, logits, scale, total):
    """``_bcts_loss`` with each evaluation one pass on the device."""
    xp = logits.xp
    factor = float(np.exp(params[0]) * scale)
    bias = from_host(xp, params[1:], logits.device, logits.dtype)

    def one_block(block):
        d = logits.shifted(block)
        w = logits.weights[block]
        kept = w > 0
        t = d * factor + bias
        top = xp.max(t, axis=1, keepdims=True)
        e = xp.exp(t - top)
        sums = xp.sum(e, axis=1, keepdims=True)
        hit = logits.true_mask(block)
        t_true = logits.true_entries(block, t, hit)
        loss = xp.where(kept, top[:, 0] + xp.log(sums[:, 0]) - t_true, 0.0)
        residual = e / sums - xp.astype(hit, e.dtype)
        # (the residual is 0 at the -inf entries: not 0 * -inf)
        scaled = xp.sum(residual * xp.where(xp.isfinite(d), d, 0.0), axis=1)
        return (
            xp.sum(w * loss),
            xp.sum(w * scaled),
            xp.sum(w[:, None] * residual, axis=0),
        )

    loss, grad_scale, grad_bias = logits.sum_blocks(one_block)
    gradient = np.concatenate([[float(grad_scale) / total * factor], grad_bias / total])
    return float(loss) / total, gradient


def fit_bcts_xp(logits):
    """BCTS (see ``fit_bcts``): L-BFGS on the host, each evaluation one pass."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        start_temperature = fit_nll_xp(logits)
    scale = 1.0 / start_temperature
    xp = logits.xp

    def prepass(block, d):
        return ((xp.sum(logits.weights[block]),), *logits.scale_terms(block, d))

    (total,), scale_terms = _sum_min_max(xp, logits, prepass)
    _, spread = _scale(*scale_terms)
    result = minimize(
        _bcts_loss_xp,
        np.zeros(logits.shape[1] + 1),
        args=(logits, scale, total),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 1000, "gtol": 1e-9, "ftol": 1e-13},
    )
    if not result.success:
        warnings.warn(
            f"Bias-corrected temperature scaling did not converge: {result.message}",
            ConvergenceWarning,
            stacklevel=3,
        )
    temperature = float(1.0 / (np.exp(result.x[0]) * scale))
    bias = result.x[1:] - result.x[1:].mean()
    if spread is not None and temperature > spread * _HIGH_FACTOR:
        warnings.warn(
            f"Bias-corrected temperature scaling went to T = {temperature:.3g}, "
            f"past the point where every softmax of the logits is uniform to "
            f"1e-3: the logits are no better than chance on this data, and the "
            f"probabilities are those of the class biases alone.",
            UserWarning,
            stacklevel=3,
        )
    return temperature, bias


def prepare_logits_xp(xp, logits, y, sample_weight):
    """Validate the inputs of a fit (one pass over the logits).

    And warn when the logits look like probabilities, as
    :func:`skprior._utils._validation.warn_if_probabilities`.
    """
    from skprior._utils._validation import warn_if_probabilities
    from skprior._utils._validation_xp import (
        check_class_indices_xp,
        check_logits_xp,
        check_sample_weight_xp,
    )

    z, looks_like_proba = check_logits_xp(xp, logits, warn_probabilities=True)
    if looks_like_proba:
        # (the NumPy check on a row that is a probability vector: its warning,
        # worded in one place)
        warn_if_probabilities(np.array([[0.5, 0.5]]))
    y = check_class_indices_xp(xp, y, z, z.shape[1])
    weights = check_sample_weight_xp(xp, sample_weight, z)
    return XpLogits(xp, z, y, weights)


def fit_temperature_xp(xp, logits, y, method, sample_weight):
    """:func:`skprior.fit_temperature` on an array API array."""
    logits = prepare_logits_xp(xp, logits, y, sample_weight)
    if method == "ec":
        return fit_ec_xp(logits)
    logits.leave_out_infinite_truth()
    return fit_nll_xp(logits)


def fit_bias_corrected_temperature_xp(xp, logits, y, sample_weight):
    """:func:`skprior.fit_bias_corrected_temperature` on an array API array.

    The biases come back in the namespace, on the device of ``logits``.
    """
    from skprior._utils._array_api import result_array

    data = prepare_logits_xp(xp, logits, y, sample_weight)
    data.leave_out_infinite_truth()
    class_weight = class_weights_xp(data)
    if np.any(class_weight <= 0):
        missing = np.flatnonzero(class_weight <= 0).tolist()
        raise ValueError(
            f"Bias-corrected temperature scaling needs every class in y, but the "
            f"classes at columns {missing} have no (weighted, finite-logit) "
            f"sample: their bias would go to -infinity. Fit on data that has "
            f"every class, or use fit_temperature (one parameter)."
        )
    temperature, bias = fit_bcts_xp(data)
    if separates_xp(data, temperature, bias):
        warn_separable(
            "Bias-corrected temperature scaling",
            "T -> 0 (and the biases grow with 1 / T)",
        )
    return temperature, result_array(xp, bias, data.z)


def separates_xp(logits, temperature, bias):
    """Whether ``d / T + b`` ranks every kept row's true class strictly first.

    :func:`skprior.calibration._checks.separates` in one pass on the device
    (a tie with another class counts as not separated).
    """
    xp = logits.xp
    bias = from_host(xp, bias, logits.device, logits.dtype)

    def one_block(block):
        u = logits.shifted(block) / float(temperature) + bias
        hit = logits.true_mask(block)
        true = logits.true_entries(block, u, hit)
        other = xp.max(xp.where(hit, -xp.inf, u), axis=1)
        missed = (logits.weights[block] > 0) & ~(true > other)
        return (xp.sum(xp.astype(missed, logits.dtype)),)

    (n_missed,) = logits.sum_blocks(one_block)
    return float(n_missed) == 0


def log_of_proba_xp(xp, proba):
    """``log(proba)`` in the working dtype, ``-inf`` for exact zeros."""
    dtype = work_dtype(xp, device_of(proba))
    proba = xp.astype(proba, dtype)
    positive = proba > 0
    return xp.where(positive, xp.log(xp.where(positive, proba, 1.0)), -xp.inf)
