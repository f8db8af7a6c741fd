"""The one pass of an interval: the moments of the EM gradients.

Of the batch (:func:`batch_moments`: the information ``J = sum_i g_i g_i^T``
and ``sum_i g_i``, with each row's key for the repeated rows) and of a
labelled calibration set (:func:`calibration_moments`: the class sums of
``g`` and the weighted ``sum_i g_i g_i^T``), per row block in the namespace
and on the device of the rows, only ``K x K`` numbers crossing to the host.
The maths that uses them is in ``_intervals.py``.
"""

import operator
import typing

import numpy as np

from skprior._utils._array_api import (
    block_totals,
    blocks,
    device_of,
    from_host,
    get_namespace,
    is_dask,
    weighted_counts,
    work_dtype,
)
from skprior._utils._kernels import row_blocks
from skprior._utils._validation import check_proba
from skprior._utils._validation_labels import check_class_indices, check_sample_weight
from skprior.label_shift._repeats import hash_vector


def _gradients(xp, rows, weights, inverse_train):
    """Per-row gradients ``g_i = a_i / D_i`` of a block (0 where ``D_i = 0``)."""
    d = rows @ weights
    positive = d > 0
    inverse = xp.where(positive, 1.0 / xp.where(positive, d, 1.0), 0.0)
    return rows * inverse_train[None, :] * inverse[:, None]


def _work(xp, proba, prior, train_prior):
    """The pass's constants on the device of ``proba``, in its working dtype."""
    device = device_of(proba)
    dtype = work_dtype(xp, device)
    weights = from_host(xp, prior / train_prior, device, dtype)
    return dtype, weights, from_host(xp, 1.0 / train_prior, device, dtype)


def batch_moments(proba, train_prior, prior, keys=False):
    """``(J, sum_i g_i)`` of the batch at ``prior``, lazily (one pass).

    With ``keys``, also each row's key ``x_i . v`` (an ``n``-vector) for
    :func:`repeated_rows`, from the same read of the block.
    """
    xp, _ = get_namespace(proba)
    if is_dask(xp):
        return _dask_batch_moments(proba, train_prior, prior, keys)
    dtype, weights, inverse_train = _work(xp, proba, prior, train_prior)
    n_samples, n_classes = proba.shape
    hashing = from_host(xp, hash_vector(n_classes), device_of(proba), dtype)
    totals, parts = None, []
    for block in blocks(xp, n_samples, n_classes):
        rows = xp.astype(proba[block, :], dtype)
        g = _gradients(xp, rows, weights, inverse_train)
        sums = (g.T @ g, xp.sum(g, axis=0))
        totals = sums if totals is None else tuple(map(operator.add, totals, sums))
        if keys:
            parts.append(rows @ hashing)
    if not keys:
        return totals
    return (*totals, parts[0] if len(parts) == 1 else xp.concat(parts, axis=0))


def _dask_batch_moments(proba, train_prior, prior, keys):
    """:func:`batch_moments` of a Dask array: one task per chunk, lazily.

    Each task reads its chunk once and returns its ``K * K + K`` sums (the
    keys: a second map of the chunks, in the same compute), so a chunk's
    float64 gradients live only in its task (as shared lazy nodes, those of
    many chunks at once: ``skprior adapt --out-of-core`` peaked at 2.3x).
    """
    n_classes = proba.shape[1]
    weights, inverse_train = prior / train_prior, 1.0 / train_prior
    hashing = hash_vector(n_classes)

    def chunk_sums(chunk):
        sums = np.zeros((1, n_classes * n_classes + n_classes))
        for block in row_blocks(chunk.shape[0], n_classes):
            g = _gradients(np, chunk[block].astype(np.float64), weights, inverse_train)
            sums[0, : n_classes * n_classes] += (g.T @ g).ravel()
            sums[0, n_classes * n_classes :] += g.sum(axis=0)
        return sums

    parts = proba.map_blocks(
        chunk_sums,
        chunks=((1,) * proba.numblocks[0], (n_classes * n_classes + n_classes,)),
        dtype=np.float64,
        meta=np.empty((0, 0)),
    )
    totals = parts.sum(axis=0)
    moments = (totals[: n_classes * n_classes].reshape(n_classes, n_classes),)
    moments += (totals[n_classes * n_classes :],)
    if not keys:
        return moments
    row_keys = proba.map_blocks(
        lambda chunk: chunk.astype(np.float64) @ hashing,
        drop_axis=1,
        dtype=np.float64,
        meta=np.empty((0,)),
    )
    return (*moments, row_keys)


def calibration_moments(proba, y, train_prior, prior, row_weights, weights=None):
    """Class sums of ``w_i g_i`` and ``sum_i w_i r_{y_i} g_i g_i^T``, lazily.

    One pass; ``r = row_weights`` (host, one per class), ``w`` the rows'
    frequency weights (1 without ``weights``: a row of weight 2 counts as two).
    """
    xp, _ = get_namespace(proba)
    n_classes = proba.shape[1]
    dtype, ratios, inverse_train = _work(xp, proba, prior, train_prior)
    classes = from_host(xp, np.arange(n_classes), device_of(proba), y.dtype)
    class_weights = from_host(xp, row_weights, device_of(proba), dtype)

    def one_block(block):
        g = _gradients(xp, xp.astype(proba[block, :], dtype), ratios, inverse_train)
        onehot = xp.astype(y[block][:, None] == classes[None, :], dtype)
        if weights is not None:
            onehot = onehot * xp.astype(weights[block], dtype)[:, None]
        weighted = g * (onehot @ class_weights)[:, None]
        return onehot.T @ g, weighted.T @ g

    return block_totals(xp, *proba.shape, one_block)


def check_calibration(calibration, n_classes):
    """Validate ``calibration=(proba_cal, y_cal[, sample_weight])``.

    Returns the arrays, each class's total weight (host), and the weights on
    the rows' device (None without them: every row counts once).
    """
    if not (isinstance(calibration, (tuple, list)) and len(calibration) in (2, 3)):
        raise ValueError(
            "calibration must be a pair (proba_cal, y_cal): held-out posteriors of "
            "the same model and their true classes (or a triple with their "
            "sample_weight), got "
            f"{type(calibration).__name__}. Pass calibration=(proba_cal, y_cal), or "
            "None for the interval that assumes calibrated posteriors."
        )
    proba_cal = check_proba(calibration[0], name="proba_cal")
    if proba_cal.shape[1] != n_classes:
        raise ValueError(
            f"proba_cal has {proba_cal.shape[1]} classes, the batch {n_classes}. "
            f"Pass the calibration posteriors of the same model, same class order."
        )
    n_rows = proba_cal.shape[0]
    y = check_class_indices(
        calibration[1], n_rows, n_classes, name="proba_cal", like=proba_cal
    )
    weights = None
    if len(calibration) == 3 and calibration[2] is not None:
        weights = check_sample_weight(calibration[2], n_rows, like=proba_cal)
    counts = weighted_counts(y, weights, n_classes)
    if np.any(counts == 0):
        missing = np.flatnonzero(counts == 0)
        raise ValueError(
            f"y_cal has no row of class {missing[0]} ({len(missing)} classes "
            f"missing{'' if weights is None else ', or only rows of weight 0'}): "
            f"the calibration set must hold every class to measure the "
            f"model's misfit on it. Use a larger calibration set, or "
            f"calibration=None."
        )
    return Calibration(proba_cal, y, counts, weights)


class Calibration(typing.NamedTuple):
    """A checked calibration set (see :func:`check_calibration`)."""

    proba: object
    y: object
    counts: np.ndarray  # (the total weight of each class, host)
    weights: object  # (None, or per row on the rows' device)


def calibration_pool(y, weights, j):
    """Class ``j``'s pool of the calibration set and its size.

    With frequency weights, its rows of positive weight drawn in proportion
    to them, as many as their total weight (at least one): the pool of the
    rows repeated as often as they weigh.
    """
    rows = np.flatnonzero(y == j)
    if weights is None:
        return rows, None, len(rows)
    rows = rows[weights[rows] > 0]
    if np.all(weights[rows] == 1):  # (as without weights, the same draws)
        return rows, None, len(rows)
    total = weights[rows].sum()
    return rows, weights[rows] / total, max(int(round(total)), 1)
