"""Calibration metrics: expected calibration error and the reliability curve.

Both bin predictions by confidence. The bins are right-closed: with edges
``0 = e_0 < e_1 < ... < e_B = 1`` bin ``b`` holds the values in
``(e_{b-1}, e_b]``, and the first bin also holds 0.

Written once for every array namespace: the inputs stay where they are, and
only the per-bin sums (and the bin edges) cross to the host. NumPy counts the
bins with ``bincount``; the standard has none, so other libraries take a
one-hot product per row block, every sum of one call in one pass (one
``dask.compute``).
"""

import numpy as np

from skprior._utils._array_api import (
    block_totals,
    device_of,
    from_host,
    get_namespace,
    is_dask,
    result_array,
    to_host,
    work_dtype,
)
from skprior._utils._constraints import constraints
from skprior._utils._options import BIN_STRATEGIES, DEFAULT_N_BINS, ECE_KINDS
from skprior._utils._sklearn_compat import validate_params
from skprior._utils._validation import _dtype_name
from skprior._utils._validation_labels import check_scored_proba

_BINNING = constraints(n_bins="n_bins", strategy="strategy")
_SCORED = constraints(
    y_true="array",
    y_proba="array",
    sample_weight="optional_array",
    labels="optional_array",
)


def _scored(y_true, y_proba, labels, sample_weight):
    """The checked inputs, their namespace and the float dtype to bin in."""
    y_index, proba, weights = check_scored_proba(y_true, y_proba, labels, sample_weight)
    xp, is_numpy = get_namespace(proba)
    dtype = work_dtype(xp, device_of(proba))
    return xp, is_numpy, dtype, y_index, proba, weights


def _float_precision(proba, checked):
    """The NumPy float dtype of ``proba`` as given (any library), float64 if none.

    bfloat16 and non-float inputs count as float64: their edges are not
    rounded (bfloat16 has no NumPy dtype; integers are exact). Input without
    a dtype of its own (a DataFrame, a list of rows) counts as ``checked``,
    the array it was read into (float32 columns stay float32 there).
    """
    if getattr(proba, "dtype", None) is None:
        proba = checked
    try:
        dtype = np.dtype(_dtype_name(proba))
    except TypeError:
        return np.dtype(np.float64)
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


def _top_label(xp, dtype, y_index, proba):
    """Confidence (top probability) and correctness of each row, in ``dtype``."""
    confidence = xp.astype(xp.max(proba, axis=1), dtype)
    return confidence, xp.astype(xp.argmax(proba, axis=1) == y_index, dtype)


def _inner_edges(xp, values, weights, n_bins, strategy, given):
    """The inner bin edges (a host array): equal width, or weighted quantiles.

    ``given`` is the dtype of the probabilities as the caller gave them.
    """
    if strategy == "uniform":
        # k / n_bins correctly rounded (linspace puts some a rounding step
        # below), so that a confidence of exactly k / n_bins, as k-NN and small
        # forests give, falls in the bin that ends there; rounded to the
        # probabilities' own precision (float32's 0.8 is above float64's, and
        # fell a bin up: another ECE than the same float64 rows).
        return (np.arange(1, n_bins) / n_bins).astype(given).astype(np.float64)
    if is_dask(xp):
        raise ValueError(
            "strategy='quantile' sorts every confidence, which a Dask array "
            "cannot do out of core; use strategy='uniform'."
        )
    # Inverted-CDF quantiles: the smallest value whose cumulative weight reaches
    # the level, so that integer weights act like repeated rows.
    order = xp.argsort(values, stable=True)
    cumulative = xp.cumulative_sum(xp.take(weights, order))
    (total,) = to_host(xp, cumulative[-1])
    # "Reaches" up to the sums' rounding: k / n_bins * total rounded above a
    # whole number (63.00000000000001 for 9 / 11 * 77), and 0.3 + 0.3 + 0.3
    # below 0.9, moved edges by a row (weights of 0.3 gave another ECE than
    # none). A float64 sum's drift, or a few ulps of a float32 one.
    ulp = np.finfo(np.float32 if cumulative.dtype == xp.float32 else np.float64).eps
    slack = max(4 * order.shape[0] * np.finfo(np.float64).eps, 4 * ulp)
    levels = np.arange(1, n_bins) * total / n_bins * (1 - slack)
    levels = from_host(xp, levels, device_of(values), cumulative.dtype)
    index = xp.searchsorted(cumulative, levels, side="left")
    return to_host(xp, xp.take(xp.take(values, order), index))[0]


def _binned_sums(xp, is_numpy, values, hits, weights, n_bins, strategy, given):
    """Per bin: total weight, weighted sums of ``values`` and of ``hits``.

    Right-closed bins: the bin of a value is the number of inner edges
    strictly below it. Off NumPy (no ``bincount`` in the standard) a one-hot
    product per row block, the sums left on the device (lazy for Dask).
    """
    inner = _inner_edges(xp, values, weights, n_bins, strategy, given)
    if is_numpy:
        at = np.searchsorted(inner, values, side="left")
        # (one weighted column alive at a time: each product a temporary)
        return [np.bincount(at, weights * x, n_bins) for x in (1.0, values, hits)]
    device = device_of(values)
    inner = from_host(xp, inner, device, values.dtype)
    bins = xp.arange(n_bins, device=device)

    def one_block(block):
        v, h, w = values[block], hits[block], weights[block]
        index = xp.sum(xp.astype(v[:, None] > inner[None, :], xp.int64), axis=1)
        onehot = xp.astype(index[:, None] == bins[None, :], v.dtype)
        return w @ onehot, (w * v) @ onehot, (w * h) @ onehot

    return block_totals(xp, values.shape[0], n_bins, one_block)


@validate_params(
    {**_SCORED, **_BINNING, **constraints(kind="ece_kind")},
    prefer_skip_nested_validation=True,
)
def expected_calibration_error(
    y_true,
    y_proba,
    *,
    n_bins=DEFAULT_N_BINS,
    strategy=BIN_STRATEGIES[0],
    kind=ECE_KINDS[0],
    sample_weight=None,
    labels=None,
):
    r"""Expected calibration error (ECE) of multiclass probabilities.

    Top-label (default; Guo et al. 2017): the confidence of a sample is its top
    probability :math:`c_i = \max_k p_{ik}`, its hit :math:`h_i = [\arg\max_k
    p_{ik} = y_i]`. With bins :math:`B_1, \dots, B_M` of the confidences and
    weights :math:`w_i`,

    .. math::

        \mathrm{ECE} = \sum_{m=1}^{M} \frac{W_m}{W}
        \left| \frac{\sum_{i \in B_m} w_i h_i}{W_m}
             - \frac{\sum_{i \in B_m} w_i c_i}{W_m} \right|,
        \qquad W_m = \sum_{i \in B_m} w_i, \quad W = \sum_i w_i .

    Class-wise (Kull et al. 2019): the same with :math:`c_i = p_{ik}` and
    :math:`h_i = [y_i = k]` for each class :math:`k`, binned per class, and
    averaged over the classes.

    Bins are right-closed: with edges :math:`0 = e_0 < \dots < e_M = 1`, bin
    :math:`m` holds the values in :math:`(e_{m-1}, e_m]`; the first also holds
    0. ``"uniform"`` edges are equally spaced; ``"quantile"`` inner edges are the
    weighted quantiles of the values at levels :math:`m/M` (inverted CDF: the
    smallest value whose cumulative weight reaches the level), so bins hold
    about equal weight. Empty bins contribute nothing.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities, columns in the order of ``labels`` (sorted
        labels of ``y_true`` by default). A 1-D array is P(positive class),
        the second of two labels.
    n_bins : int, default=15
        Number of bins :math:`M`.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width or equal-weight bins.
    kind : {"top_label", "classwise"}, default="top_label"
        Which calibration error.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights; ``None`` means 1.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_proba`` (for a model,
        ``model.classes_``). Needed when ``y_true`` does not show every class.

    Returns
    -------
    ece : float
        In [0, 1]; 0 is perfectly calibrated on these bins.

    See Also
    --------
    reliability_curve : The per-bin accuracies and confidences.
    ReliabilityDisplay : Plot them.

    References
    ----------
    .. [1] Naeini, Cooper and Hauskrecht, "Obtaining well calibrated
       probabilities using Bayesian binning", AAAI 2015.
    .. [2] Guo, Pleiss, Sun and Weinberger, "On calibration of modern neural
       networks", ICML 2017.
    .. [3] Kull, Perello-Nieto, Kängsepp, Silva Filho, Song and Flach, "Beyond
       temperature scaling: obtaining well-calibrated multiclass probabilities
       with Dirichlet calibration", NeurIPS 2019.

    Examples
    --------
    Two samples at confidence 0.9 and 0.6, one right, one wrong, in the bins
    (0.8, 1] and (0.4, 0.6]: ECE = ``(|0 - 0.9| + |1 - 0.6|) / 2``.

    >>> from skprior.metrics import expected_calibration_error
    >>> y_proba = [[0.9, 0.1], [0.4, 0.6]]
    >>> round(expected_calibration_error([1, 1], y_proba, n_bins=5, labels=[0, 1]), 6)
    0.65
    """
    xp, is_numpy, dtype, y_index, proba, weights = _scored(
        y_true, y_proba, labels, sample_weight
    )
    given = _float_precision(y_proba, proba)  # (before float16 is widened)
    if kind == "top_label":
        columns = [_top_label(xp, dtype, y_index, proba)]
    else:
        # (a generator: one column's float64 copies alive at a time, where a
        # list held all of them, 4x a float32 input)
        columns = (
            (xp.astype(proba[:, k], dtype), xp.astype(y_index == k, dtype))
            for k in range(proba.shape[1])
        )
    gaps = []  # (every column's, reduced together: one pass, one Dask compute)
    for values, hits in columns:
        _, value_sum, hit_sum = _binned_sums(
            xp, is_numpy, values, hits, weights, n_bins, strategy, given
        )
        gaps.append(xp.sum(xp.abs(hit_sum - value_sum)))
    total, *gaps = to_host(xp, xp.sum(weights), *gaps)
    return float(np.mean(np.asarray(gaps, dtype=np.float64) / total))


@validate_params({**_SCORED, **_BINNING}, prefer_skip_nested_validation=True)
def reliability_curve(
    y_true,
    y_proba,
    *,
    n_bins=DEFAULT_N_BINS,
    strategy=BIN_STRATEGIES[0],
    sample_weight=None,
    labels=None,
):
    r"""Top-label reliability curve: accuracy against confidence, per bin.

    The multiclass counterpart of :func:`sklearn.calibration.calibration_curve`.
    The confidence of a sample is its top probability :math:`c_i = \max_k
    p_{ik}`; the samples are binned by confidence (right-closed bins, see
    :func:`expected_calibration_error`) and each non-empty bin :math:`B_m`
    gives

    .. math::

        \mathrm{acc}_m = \frac{\sum_{i \in B_m} w_i [\arg\max_k p_{ik} = y_i]}
        {W_m}, \qquad
        \mathrm{conf}_m = \frac{\sum_{i \in B_m} w_i c_i}{W_m} .

    A calibrated model has :math:`\mathrm{acc}_m = \mathrm{conf}_m`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities, columns in the order of ``labels``; a 1-D
        array is P(positive class).
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width or equal-weight bins.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights; ``None`` means 1.
    labels : array-like of shape (n_classes,), default=None
        The class of each column (sorted labels of ``y_true`` by default).

    Returns
    -------
    accuracy : ndarray of shape (n_nonempty_bins,)
        Weighted accuracy in each non-empty bin.
    confidence : ndarray of shape (n_nonempty_bins,)
        Weighted mean confidence in each non-empty bin, increasing.
    bin_weight : ndarray of shape (n_nonempty_bins,)
        Fraction of the total weight in each non-empty bin.

        The three are arrays of the namespace, device and float dtype of
        ``y_proba`` (float32 in, float32 out; float64 for float16), computed
        in float64.

    See Also
    --------
    expected_calibration_error : The weighted mean of ``|accuracy - confidence|``.
    ReliabilityDisplay : Plot the curve.

    References
    ----------
    .. [1] Guo, Pleiss, Sun and Weinberger, "On Calibration of Modern Neural
       Networks", ICML 2017.

    Examples
    --------
    >>> from skprior.metrics import reliability_curve
    >>> y_proba = [[0.9, 0.1], [0.86, 0.14], [0.4, 0.6]]
    >>> accuracy, confidence, weight = reliability_curve([0, 1, 1], y_proba, n_bins=5)
    >>> accuracy, confidence.round(2), weight.round(2)
    (array([1. , 0.5]), array([0.6 , 0.88]), array([0.33, 0.67]))
    """
    xp, is_numpy, dtype, y_index, proba, weights = _scored(
        y_true, y_proba, labels, sample_weight
    )
    confidence, hits = _top_label(xp, dtype, y_index, proba)
    given = _float_precision(y_proba, proba)  # (before float16 is widened)
    sums = _binned_sums(
        xp, is_numpy, confidence, hits, weights, n_bins, strategy, given
    )
    weight, value_sum, hit_sum, total = to_host(xp, *sums, xp.sum(weights))
    full = weight > 0
    curve = (
        hit_sum[full] / weight[full],
        value_sum[full] / weight[full],
        weight[full] / total,
    )
    return tuple(result_array(xp, c, proba) for c in curve)
