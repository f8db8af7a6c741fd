"""Temperature scaling on arrays of logits: EC, NLL and bias-corrected (BCTS).

The array functions :func:`softmax_temperature`, :func:`fit_temperature` and
:func:`fit_bias_corrected_temperature`; the estimator
:class:`~skprior.TemperatureCalibratedClassifier` (in ``_temperature.py``)
calls them.

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
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_array
from sklearn.utils.validation import column_or_1d

from skprior._sklearn_compat import _check_sample_weight
from skprior._validation import check_real, row_blocks

TEMPERATURE_METHODS = ("ec", "nll")

# Search interval before widening: T from (smallest top-logit gap) / 40, where
# every softmax is one-hot to double precision, to 1000 x (largest spread of a
# row), where every softmax is uniform to about 1e-3.
_LOW_FACTOR = 1.0 / 40.0
_HIGH_FACTOR = 1e3
_MAX_WIDENINGS = 40


# -- input checks ------------------------------------------------------------------


def _check_logits(logits, name="logits", as_float64=True):
    """Validate logits; a 1-D binary score ``s`` becomes the rows ``(0, s)``.

    Returns a float64 array (a new one) and the caller's dtype. ``-inf`` is
    allowed (the log of an exact zero probability); NaN, ``+inf`` and rows
    with no finite entry are not. ``as_float64=False`` returns the validated
    float32 or float64 array without a copy, for a caller that converts it
    block by block and never writes to it.
    """
    arr = np.asarray(logits)
    if arr.ndim == 1:
        arr = check_array(
            arr,
            dtype=[np.float64, np.float32],
            ensure_2d=False,
            ensure_all_finite=False,
            input_name=name,
        )
        arr = np.stack([np.zeros_like(arr), arr], axis=1)
    else:
        arr = check_array(
            arr,
            dtype=[np.float64, np.float32],
            ensure_all_finite=False,
            input_name=name,
        )
    dtype = arr.dtype
    if arr.shape[1] < 2:
        raise ValueError(
            f"{name} must have at least 2 columns (one per class), got "
            f"{arr.shape[1]}. For a binary problem pass the 1-D score of the "
            f"positive class."
        )
    if np.isnan(arr).any() or np.isposinf(arr).any():
        bad = int(np.flatnonzero((np.isnan(arr) | np.isposinf(arr)).any(axis=1))[0])
        raise ValueError(
            f"{name} contains NaN or +inf (first in row {bad}). Logits must be "
            f"finite or -inf (the log of a zero probability)."
        )
    top = arr.max(axis=1)
    if np.isneginf(top).any():
        bad = int(np.flatnonzero(np.isneginf(top))[0])
        raise ValueError(
            f"Row {bad} of {name} is -inf in every column, so it is not the log "
            f"of a probability vector. Check the model's outputs."
        )
    return (arr.astype(np.float64) if as_float64 else arr), dtype


def _warn_if_probabilities(z, stacklevel=3):
    """Warn when the "logits" are rows of probabilities (a likely mix-up).

    Probabilities in place of logits give a wrong temperature without any
    error: every entry in [0, 1] and every row summing to one is no accident
    for logits.
    """
    if (
        z.shape[1] >= 2
        and z.min() >= 0
        and z.max() <= 1
        and np.abs(z.sum(axis=1) - 1).max() <= 1e-4
    ):
        warnings.warn(
            "The logits look like probabilities (every entry in [0, 1], every "
            "row summing to 1). Temperature scaling divides logits: pass "
            "np.log(proba) for a model that gives probabilities.",
            UserWarning,
            stacklevel=stacklevel,
        )


def _check_targets(y, n_samples, n_classes):
    """Validate encoded labels: integers in ``[0, n_classes)``."""
    y = column_or_1d(np.asarray(y), warn=True)
    if y.shape[0] != n_samples:
        raise ValueError(
            f"y has {y.shape[0]} entries but logits has {n_samples} rows; give one "
            f"label per row."
        )
    if y.dtype.kind not in "iu" and not (
        y.dtype.kind == "f" and np.all(np.isfinite(y)) and np.all(y == np.round(y))
    ):
        raise ValueError(
            f"y must hold class indices 0..{n_classes - 1} (the column of the true "
            f"class in logits), got dtype {y.dtype}. Encode string labels first, "
            f"e.g. with sklearn.preprocessing.LabelEncoder."
        )
    y = y.astype(np.intp)
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise ValueError(
            f"y holds class indices outside 0..{n_classes - 1} (min {y.min()}, "
            f"max {y.max()}); logits has {n_classes} columns."
        )
    return y


def _check_weights(sample_weight, n_samples):
    if sample_weight is None:
        return np.ones(n_samples)
    weights = _check_sample_weight(
        sample_weight, np.empty((n_samples, 0)), ensure_non_negative=True
    )
    if weights.sum() <= 0:
        raise ValueError("sample_weight sums to zero: nothing to fit.")
    return np.asarray(weights, dtype=np.float64)


def _shifted(z):
    """``d = z - max_k z`` (every entry <= 0, top entries exactly 0)."""
    return z - z.max(axis=1, keepdims=True)


# -- the two monotone functions of log T ----------------------------------------


def _mean_confidence(d, weights, temperature):
    """Weighted mean over rows of ``max_k softmax(d / T)``."""
    sums = np.empty(d.shape[0])
    for block in row_blocks(*d.shape):  # (temporaries of one block)
        with np.errstate(over="ignore", under="ignore"):
            sums[block] = np.exp(d[block] / temperature).sum(axis=1)
    return np.dot(weights, 1.0 / sums) / weights.sum()


def _nll_slope(d, d_true, weights, temperature):
    """Derivative of the mean log loss with respect to ``beta = 1 / T``."""
    expected = np.empty(d.shape[0])
    for block in row_blocks(*d.shape):  # (temporaries of one block)
        rows = d[block]
        with np.errstate(over="ignore", under="ignore"):
            e = np.exp(rows / temperature)
        sums = e.sum(axis=1)
        # (e is 0 at the -inf entries: left there, not 0 * -inf)
        np.multiply(e, rows, out=e, where=np.isfinite(rows))
        expected[block] = e.sum(axis=1) / sums
    return np.dot(weights, expected - d_true) / weights.sum()


def _temperature_scale(d):
    """Smallest positive top-logit gap and largest row spread of ``d``."""
    finite = np.isfinite(d)
    # (reductions with where=: no float temporary the size of d)
    gaps = -np.max(d, axis=1, where=finite & (d < 0), initial=-np.inf)
    spreads = -np.min(d, axis=1, where=finite, initial=0.0)
    gaps = gaps[np.isfinite(gaps)]
    if gaps.size == 0:
        return None, None
    return gaps.min(), spreads.max()


def _solve_log_temperature(func, d, limit_low, limit_high, describe):
    """Root in ``log T`` of a non-increasing ``func(T)`` with known limits.

    ``limit_low`` and ``limit_high`` are the limits of ``func`` at ``T -> 0``
    and ``T -> infinity``. Without a root, warn with ``describe(which)`` and
    return the end of the search interval on that side.
    """
    gap, spread = _temperature_scale(d)
    if gap is None:
        warnings.warn(
            "Every row of logits has all its finite entries equal, so the "
            "probabilities do not depend on the temperature; returning T = 1.",
            UserWarning,
            stacklevel=3,
        )
        return 1.0
    log_low = np.log(gap * _LOW_FACTOR)
    log_high = np.log(spread * _HIGH_FACTOR)

    def f(log_t):
        return func(np.exp(log_t))

    if limit_low <= 0:
        warnings.warn(describe("low"), UserWarning, stacklevel=3)
        return float(np.exp(log_low))
    if limit_high >= 0:
        warnings.warn(describe("high"), UserWarning, stacklevel=3)
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
        warnings.warn(describe("low"), UserWarning, stacklevel=3)
        return float(np.exp(log_low))
    if f_high >= 0:
        warnings.warn(describe("high"), UserWarning, stacklevel=3)
        return float(np.exp(log_high))
    root = brentq(f, log_low, log_high, xtol=1e-13, rtol=4 * np.finfo(float).eps)
    return float(np.exp(root))


def _fit_ec(d, y, weights):
    # The accuracy of argmax(z), first index on ties, as predict() has it.
    correct = np.argmax(d, axis=1) == y
    accuracy = np.dot(weights, correct) / weights.sum()
    n_top = (d == 0).sum(axis=1)
    n_finite = np.isfinite(d).sum(axis=1)
    limit_low = np.dot(weights, 1.0 / n_top) / weights.sum() - accuracy
    limit_high = np.dot(weights, 1.0 / n_finite) / weights.sum() - accuracy

    def describe(side):
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

    def func(temperature):
        return _mean_confidence(d, weights, temperature) - accuracy

    return _solve_log_temperature(func, d, limit_low, limit_high, describe)


def _nll_rows(d, y, weights):
    """Rows usable by a log-loss fit: those whose true class is not at -inf."""
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


def _fit_nll(d, y, weights):
    # Rows whose true class has probability exactly 0 have an infinite log loss
    # at every temperature, so they cannot move the minimiser: leave them out.
    d, y, d_true, weights = _nll_rows(d, y, weights)
    finite = np.isfinite(d)
    uniform_mean = np.sum(d, axis=1, where=finite) / finite.sum(axis=1)
    limit_low = np.dot(weights, -d_true) / weights.sum()
    limit_high = np.dot(weights, uniform_mean - d_true) / weights.sum()

    def describe(side):
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

    def func(temperature):
        return _nll_slope(d, d_true, weights, temperature)

    return _solve_log_temperature(func, d, limit_low, limit_high, describe)


# -- public array functions --------------------------------------------------------


def softmax_temperature(logits, temperature, bias=None):
    r"""Class probabilities from logits at a temperature: ``softmax(z / T + b)``.

    .. math::

        p_{ik} = \frac{\exp(z_{ik} / T + b_k)}{\sum_j \exp(z_{ij} / T + b_j)}

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes) or (n_samples,)
        Logits :math:`z`. A 1-D array is the score :math:`s` of the second of two
        classes and stands for the rows :math:`(0, s)`. ``-inf`` (the log of a
        zero probability) gives probability 0. float32 stays float32 (the
        arithmetic is done in float64).
    temperature : float
        Temperature :math:`T > 0`.
    bias : array-like of shape (n_classes,), default=None
        Per-class bias :math:`b` added after the division (bias-corrected
        temperature scaling); ``None`` means 0.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes)
        Rows sum to one.

    See Also
    --------
    fit_temperature : Find ``T`` on held-out logits and labels.

    References
    ----------
    .. [1] Guo, Pleiss, Sun and Weinberger, "On Calibration of Modern Neural
       Networks", ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import softmax_temperature
    >>> softmax_temperature(np.array([[0.0, np.log(3.0)]]), 1.0)
    array([[0.25, 0.75]])
    >>> softmax_temperature(np.array([[0.0, np.log(3.0)]]), 1e6).round(3)
    array([[0.5, 0.5]])
    """
    z, dtype = _check_logits(logits, as_float64=False)
    temperature = check_real(temperature, "temperature", low=0, closed="neither")
    n_classes = z.shape[1]
    if bias is not None:
        bias = np.asarray(bias, dtype=np.float64)
        if bias.shape != (n_classes,) or not np.all(np.isfinite(bias)):
            raise ValueError(
                f"bias must be a finite 1-D array with one entry per class "
                f"({n_classes}), got shape {bias.shape}."
            )
    proba = np.empty(z.shape, dtype=dtype)
    # Block by block, so that the float64 temporaries stay small (a few times
    # one block, not ten times the batch).
    for block in row_blocks(*z.shape):
        with np.errstate(over="ignore", under="ignore"):
            scaled = _shifted(z[block].astype(np.float64))
            scaled /= temperature
            if bias is not None:
                scaled += bias
            scaled -= logsumexp(scaled, axis=1, keepdims=True)
            proba[block] = np.exp(scaled, out=scaled)
    return proba


def fit_temperature(logits, y, *, method="ec", sample_weight=None):
    r"""Find the temperature that calibrates held-out logits.

    ``method="ec"`` (expectation consistency, Clarté et al. 2023) solves

    .. math::

        \frac{\sum_i w_i \max_k \operatorname{softmax}(z_i / T)_k}{\sum_i w_i}
        = \frac{\sum_i w_i [\arg\max_k z_{ik} = y_i]}{\sum_i w_i},

    the mean confidence equals the accuracy. The left side never increases with
    :math:`T` and the right side does not depend on it, so the root is unique
    when it exists. ``method="nll"`` (temperature scaling, Guo et al. 2017)
    minimises the weighted mean log loss
    :math:`\sum_i w_i [\log \sum_k e^{z_{ik}/T} - z_{i y_i}/T] / \sum_i w_i`,
    which is convex in :math:`1/T`; the root of its derivative is found.

    Both are solved with Brent's method in :math:`\log T` on an interval derived
    from the logits (from the smallest gap between a row's top two logits to a
    multiple of the largest spread within a row) and widened until the sign
    changes, so the scale of the logits does not matter.

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes) or (n_samples,)
        Held-out logits :math:`z`. A 1-D array is the score :math:`s` of the
        second of two classes, taken as the rows :math:`(0, s)`. For a model
        that gives probabilities only, pass ``np.log(proba)`` (``-inf`` for exact
        zeros is allowed).
    y : array-like of shape (n_samples,)
        The true classes as column indices ``0..n_classes-1`` of ``logits``.
    method : {"ec", "nll"}, default="ec"
        Expectation consistency or minimum log loss.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights :math:`w_i`; ``None`` means 1.

    Returns
    -------
    temperature : float
        :math:`T > 0`; divide the logits by it (:func:`softmax_temperature`).

    Warns
    -----
    UserWarning
        When no temperature satisfies the criterion: with EC, when the accuracy
        is at least the mean confidence of the hard argmax (for example 1: no
        error on the data) or at most that of uniform probabilities; with NLL,
        when every sample's true class has the top logit, or the logits are no
        better than chance. The temperature is then clipped to the end of the
        search interval on that side (nearly one-hot or nearly uniform
        probabilities), and the warning says which.

    See Also
    --------
    softmax_temperature : Apply the temperature.
    fit_bias_corrected_temperature : Temperature and per-class biases.
    TemperatureCalibratedClassifier : The same around a scikit-learn model.

    Notes
    -----
    The accuracy in EC is that of ``argmax(z)``, which the temperature does not
    change. For NLL, samples whose true class has logit ``-inf`` (probability
    exactly 0) have an infinite loss at every temperature and are left out.

    scikit-learn's ``CalibratedClassifierCV(method="temperature")`` maps a
    binary score :math:`s` to :math:`(-s, s)` rather than :math:`(0, s)`, so its
    binary temperature (``1 / beta_``) is twice the one returned here; the
    probabilities are the same.

    References
    ----------
    .. [1] Clarté, Loureiro, Krzakala and Zdeborová, "Expectation consistency
       for calibration of neural networks", UAI 2023. arXiv:2303.02644.
    .. [2] Guo, Pleiss, Sun and Weinberger, "On calibration of modern neural
       networks", ICML 2017.

    Examples
    --------
    Over-confident logits: the right temperature is above 1.

    >>> import numpy as np
    >>> from skprior import fit_temperature
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, size=2000)
    >>> logits = rng.normal(size=(2000, 3)) + 1.5 * np.eye(3)[y]
    >>> T = fit_temperature(5 * logits, y, method="ec")
    >>> bool(T > 1)
    True
    >>> bool(abs(fit_temperature(5 * logits, y, method="nll") / T - 1) < 0.2)
    True
    """
    if method not in TEMPERATURE_METHODS:
        raise ValueError(
            f"method must be one of {TEMPERATURE_METHODS}, got {method!r}. For "
            f"bias-corrected temperature scaling use "
            f"fit_bias_corrected_temperature."
        )
    z, _ = _check_logits(logits)
    _warn_if_probabilities(z)
    y = _check_targets(y, z.shape[0], z.shape[1])
    weights = _check_weights(sample_weight, z.shape[0])
    # Rows of weight 0 must not count, not even in the search interval, so
    # that zero weights are the same as removing the rows.
    keep = weights > 0
    if not keep.all():
        z, y, weights = z[keep], y[keep], weights[keep]
    d = z  # (our own float64 copy: shifted in place)
    d -= d.max(axis=1, keepdims=True)
    if method == "ec":
        return _fit_ec(d, y, weights)
    return _fit_nll(d, y, weights)


def _bcts_loss(params, d, y, weights, scale):
    """Mean log loss of ``softmax(exp(a) * scale * d + b)`` and its gradient.

    Summed over row blocks, so that the temporaries stay the size of a block.
    The ``-inf`` entries of ``d`` have probability exactly 0 and add nothing
    to the gradient (where ``0 * -inf`` would be NaN).
    """
    log_factor, bias = params[0], params[1:]
    factor = np.exp(log_factor) * scale
    loss, grad_scale, grad_bias = 0.0, 0.0, np.zeros(d.shape[1])
    for block in row_blocks(*d.shape):
        rows, w, labels = d[block], weights[block], y[block]
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


def fit_bias_corrected_temperature(logits, y, *, sample_weight=None):
    r"""Bias-corrected temperature scaling (BCTS): a temperature and class biases.

    Minimises the weighted mean log loss of
    :math:`\operatorname{softmax}(z_i / T + b)` over :math:`T > 0` and one bias
    :math:`b_k` per class (Alexandari et al. 2020):

    .. math::

        \min_{T, b} \frac{1}{\sum_i w_i} \sum_i w_i
        \Bigl[\log \sum_k e^{z_{ik}/T + b_k} - z_{i y_i}/T - b_{y_i}\Bigr].

    The loss is convex in :math:`(1/T, b)`; it is minimised with L-BFGS and an
    analytic gradient, starting from the NLL temperature
    (:func:`fit_temperature`) and zero biases. The biases are defined up to a
    common constant; the one returned has mean zero.

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes) or (n_samples,)
        Held-out logits (a 1-D array is the score :math:`s` of the second of two
        classes, taken as the rows :math:`(0, s)`); ``-inf`` is allowed.
    y : array-like of shape (n_samples,)
        The true classes as column indices ``0..n_classes-1`` of ``logits``.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights; ``None`` means 1.

    Returns
    -------
    temperature : float
        :math:`T > 0`.
    bias : ndarray of shape (n_classes,)
        :math:`b`, with mean zero.

    Warns
    -----
    ConvergenceWarning
        When L-BFGS stops before convergence.
    UserWarning
        When the temperature goes so high that every softmax is uniform (the
        logits are no better than chance), or when ``logits`` look like
        probabilities.

    See Also
    --------
    fit_temperature : The temperature alone (EC or NLL).
    softmax_temperature : Apply ``T`` and ``b``.

    Notes
    -----
    Every class needs weight in ``y``: the loss of a class that never occurs
    keeps decreasing as its bias goes to :math:`-\infty`. Samples whose true
    class has logit ``-inf`` are left out (their loss is infinite whatever
    :math:`T` and :math:`b`).

    References
    ----------
    .. [1] Alexandari, Kundaje and Shrikumar, "Maximum likelihood with
       bias-corrected calibration is hard-to-beat at label shift adaptation",
       ICML 2020. arXiv:1901.06852.

    Examples
    --------
    Logits whose class 0 is under-weighted by 1: the bias puts it back.

    >>> import numpy as np
    >>> from skprior import fit_bias_corrected_temperature
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, size=5000)
    >>> logits = 2 * np.eye(3)[y] + rng.normal(size=(5000, 3))
    >>> T, bias = fit_bias_corrected_temperature(logits - [1.0, 0.0, 0.0], y)
    >>> bool(bias[0] > bias[1] and bias[0] > bias[2])
    True
    """
    z, _ = _check_logits(logits)
    _warn_if_probabilities(z)
    n_classes = z.shape[1]
    y = _check_targets(y, z.shape[0], n_classes)
    weights = _check_weights(sample_weight, z.shape[0])
    z -= z.max(axis=1, keepdims=True)  # (our own copy: shifted in place)
    d, y, _, weights = _nll_rows(z, y, weights)
    class_weight = np.bincount(y, weights=weights, minlength=n_classes)
    if np.any(class_weight <= 0):
        missing = np.flatnonzero(class_weight <= 0).tolist()
        raise ValueError(
            f"Bias-corrected temperature scaling needs every class in y, but the "
            f"classes at columns {missing} have no (weighted, finite-logit) "
            f"sample: their bias would go to -infinity. Fit on data that has "
            f"every class, or use fit_temperature (one parameter)."
        )
    # Start from the NLL temperature: the free factor is then of order 1 at any
    # logit scale, which keeps L-BFGS well conditioned.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        start_temperature = _fit_nll(d, y, weights)
    scale = 1.0 / start_temperature
    result = minimize(
        _bcts_loss,
        np.zeros(n_classes + 1),
        args=(d, y, weights, scale),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 1000, "gtol": 1e-9, "ftol": 1e-13},
    )
    if not result.success:
        warnings.warn(
            f"Bias-corrected temperature scaling did not converge: {result.message}",
            ConvergenceWarning,
            stacklevel=2,
        )
    temperature = float(1.0 / (np.exp(result.x[0]) * scale))
    bias = result.x[1:] - result.x[1:].mean()
    _, spread = _temperature_scale(d)
    if spread is not None and temperature > spread * _HIGH_FACTOR:
        warnings.warn(
            f"Bias-corrected temperature scaling went to T = {temperature:.3g}, "
            f"past the point where every softmax of the logits is uniform to "
            f"1e-3: the logits are no better than chance on this data, and the "
            f"probabilities are those of the class biases alone.",
            UserWarning,
            stacklevel=2,
        )
    return temperature, bias
