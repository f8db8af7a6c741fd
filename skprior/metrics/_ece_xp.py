"""Calibration metrics on arrays of other libraries (the array API path).

The per-bin sums of ``_metrics.py`` as one reduction over the rows on the
device (a one-hot product in place of ``bincount``, which the standard
lacks): the bin of a value is the number of inner edges strictly below it,
as ``searchsorted(..., side="left")`` gives it. Labels are matched to the
columns on the device too. ``strategy="quantile"`` sorts the confidences (an
``n``-vector) on the device; a Dask array has no global sort, and is refused
there with the fix.
"""

import numpy as np

from skprior._utils._array_api import (
    blocks,
    device_of,
    from_host,
    is_dask,
    per_row,
    result_array,
    sum_blocks,
    to_host,
    work_dtype,
)


def _labels_of(xp, y, n_classes, labels):
    """The class of each column (host array), as ``check_scored_proba``."""
    if labels is not None:
        labels = np.asarray(labels).reshape(-1)
        if len(np.unique(labels)) != len(labels):
            raise ValueError(f"labels must not repeat a class, got {list(labels)}.")
        if len(labels) != n_classes:
            raise ValueError(
                f"labels has {len(labels)} entries but y_proba has {n_classes} "
                f"columns; give one label per column."
            )
        return labels
    low, high = (int(v) for v in to_host(xp, xp.min(y), xp.max(y)))
    if high - low >= 4 * n_classes:  # more distinct values than columns
        raise ValueError(
            f"y_true holds labels from {low} to {high}, more distinct values than "
            f"y_proba's {n_classes} columns. Pass labels= the classes in the "
            f"column order of y_proba."
        )
    values = xp.arange(low, high + 1, device=device_of(y), dtype=y.dtype)
    (counts,) = sum_blocks(
        xp,
        y.shape[0],
        values.shape[0],
        lambda block: (
            xp.sum(xp.astype(y[block][:, None] == values[None, :], xp.int64), axis=0),
        ),
    )
    present = np.arange(low, high + 1)[counts > 0]
    if len(present) != n_classes:
        raise ValueError(
            f"y_true has {len(present)} distinct labels but y_proba has "
            f"{n_classes} columns, so the column of each label is unknown. Pass "
            f"labels= the classes in the column order of y_proba (for a "
            f"scikit-learn model, model.classes_)."
        )
    return present


def check_scored_proba_xp(xp, y_true, y_proba, labels, sample_weight):
    """``check_scored_proba`` on the device.

    Returns the column index of each label (an integer array), the
    probabilities and the weights.
    """
    from skprior._utils._validation_xp import check_proba_xp, check_sample_weight_xp

    if y_proba.ndim == 1:
        finite, low, high = to_host(
            xp, xp.all(xp.isfinite(y_proba)), xp.min(y_proba), xp.max(y_proba)
        )
        if not finite or low < 0 or high > 1:
            raise ValueError(
                "A 1-D y_proba is read as P(positive class) and must lie in "
                "[0, 1]. For scores or logits, apply a sigmoid first."
            )
        positive = xp.astype(y_proba, xp.float64)
        y_proba = xp.stack([1 - positive, positive], axis=1)
    proba = check_proba_xp(xp, y_proba, name="y_proba")
    y = per_row(xp, y_true, proba)
    if y.ndim != 1 or y.shape[0] != proba.shape[0]:
        raise ValueError(
            f"y_true must be 1-D with one label per row of y_proba "
            f"({proba.shape[0]}), got shape {tuple(y.shape)}."
        )
    labels = _labels_of(xp, y, proba.shape[1], labels)
    if not np.issubdtype(labels.dtype, np.number):
        raise ValueError(
            "On arrays of other libraries the labels must be numbers; encode "
            "string labels first, e.g. with sklearn.preprocessing.LabelEncoder."
        )
    device_labels = from_host(xp, labels, device_of(proba), y.dtype)
    hit = y[:, None] == device_labels[None, :]
    y_index = xp.argmax(xp.astype(hit, xp.int8), axis=1)
    (n_unknown,) = to_host(xp, xp.sum(xp.astype(~xp.any(hit, axis=1), xp.int64)))
    if n_unknown:
        raise ValueError(
            f"y_true contains {int(n_unknown)} labels that are not in labels "
            f"{labels.tolist()[:20]}. Pass only labels the model knows."
        )
    weights = check_sample_weight_xp(xp, sample_weight, proba)
    return y_index, proba, weights


def _inner_edges(xp, values, weights, n_bins, strategy):
    """Inner bin edges on the host (``_metrics._bin_edges`` without 0 and 1)."""
    if strategy == "uniform":
        return np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
    if is_dask(xp):
        raise ValueError(
            "strategy='quantile' sorts every confidence, which a Dask array "
            "cannot do out of core; use strategy='uniform'."
        )
    order = xp.argsort(values, stable=True)
    cumulative = xp.cumulative_sum(xp.take(weights, order))
    (total,) = to_host(xp, cumulative[-1])
    levels = np.arange(1, n_bins) / n_bins * float(total)
    levels = from_host(xp, levels, device_of(values), cumulative.dtype)
    index = xp.searchsorted(cumulative, levels, side="left")
    (inner,) = to_host(xp, xp.take(xp.take(values, order), index))
    return inner


def _binned_sums_xp(xp, values, hits, weights, edges, n_bins):
    """Per bin: total weight and weighted sums of ``values`` and ``hits``.

    Host vectors, from one pass.
    """
    return to_host(xp, *_binned_sums_device(xp, values, hits, weights, edges, n_bins))


def _binned_sums_device(xp, values, hits, weights, edges, n_bins):
    """:func:`_binned_sums_xp` left on the device (lazy for Dask)."""
    device = device_of(values)
    inner = from_host(xp, edges, device, values.dtype)
    bins = xp.arange(n_bins, device=device)

    def one_block(block):
        v, h, w = values[block], hits[block], weights[block]
        index = xp.sum(xp.astype(v[:, None] > inner[None, :], xp.int64), axis=1)
        onehot = xp.astype(index[:, None] == bins[None, :], v.dtype)
        return w @ onehot, (w * v) @ onehot, (w * h) @ onehot

    totals = None
    for block in blocks(xp, values.shape[0], n_bins):
        parts = one_block(block)
        totals = (
            parts
            if totals is None
            else tuple(a + b for a, b in zip(totals, parts, strict=True))
        )
    return totals


def _top_label(xp, y_index, proba, dtype):
    predicted = xp.argmax(proba, axis=1)
    confidence = xp.astype(xp.max(proba, axis=1), dtype)
    return confidence, xp.astype(predicted == y_index, dtype)


def ece_xp(xp, y_true, y_proba, n_bins, strategy, kind, sample_weight, labels):
    """:func:`skprior.metrics.expected_calibration_error` on the device."""
    y_index, proba, weights = check_scored_proba_xp(
        xp, y_true, y_proba, labels, sample_weight
    )
    dtype = work_dtype(xp, device_of(proba))
    if kind == "top_label":
        confidence, hits = _top_label(xp, y_index, proba, dtype)
        edges = _inner_edges(xp, confidence, weights, n_bins, strategy)
        weight, value_sum, hit_sum = _binned_sums_xp(
            xp, confidence, hits, weights, edges, n_bins
        )
        return float(np.abs(hit_sum - value_sum).sum() / weight.sum())
    (total,) = to_host(xp, xp.sum(weights))
    # Every class's sums are reduced together: one pass (one Dask compute).
    sums = []
    for k in range(proba.shape[1]):
        values = xp.astype(proba[:, k], dtype)
        hits = xp.astype(y_index == k, dtype)
        edges = _inner_edges(xp, values, weights, n_bins, strategy)
        _, value_sum, hit_sum = _binned_sums_device(
            xp, values, hits, weights, edges, n_bins
        )
        sums.append(xp.sum(xp.abs(hit_sum - value_sum)))
    errors = np.asarray(to_host(xp, *sums), dtype=np.float64) / total
    return float(np.mean(errors))


def reliability_curve_xp(xp, y_true, y_proba, n_bins, strategy, sample_weight, labels):
    """:func:`skprior.metrics.reliability_curve` on the device.

    The per-bin arrays come back in the namespace of ``y_proba``.
    """
    y_index, proba, weights = check_scored_proba_xp(
        xp, y_true, y_proba, labels, sample_weight
    )
    dtype = work_dtype(xp, device_of(proba))
    confidence, hits = _top_label(xp, y_index, proba, dtype)
    edges = _inner_edges(xp, confidence, weights, n_bins, strategy)
    weight, value_sum, hit_sum = _binned_sums_xp(
        xp, confidence, hits, weights, edges, n_bins
    )
    full = weight > 0
    return tuple(
        result_array(xp, values, proba)
        for values in (
            hit_sum[full] / weight[full],
            value_sum[full] / weight[full],
            weight[full] / weight.sum(),
        )
    )
