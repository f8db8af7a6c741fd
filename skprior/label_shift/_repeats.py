"""Repeated rows of a batch: found exactly, and what they add to the spread.

A batch that holds a row ``w`` times (an image submitted twice, a batch
resampled from a finite pool) holds one draw of its class, not ``w``: the
deviation of that row from its class mean enters the batch's mean gradient
``w`` times, its variance ``w**2`` times. The intervals of ``_intervals.py``
count it so (the derivation is there); this module finds the groups of
identical rows (one sort of ``n`` keys) and sums their part of the spread.
"""

import typing

import numpy as np

from skprior._utils._array_api import (
    device_of,
    from_host,
    get_namespace,
    to_host,
    work_dtype,
)


def hash_vector(n_classes):
    """Fixed positive weights in ``[1, 2)``: no cancellation in ``x_i . v``."""
    return 1.0 + np.random.default_rng(27).random(n_classes)


class Repeats(typing.NamedTuple):
    """The batch's rows that occur more than once, one per group, on the host."""

    rows: np.ndarray  # (float64, one row per group)
    multiplicity: np.ndarray  # (how many times each occurs, >= 2)
    index: np.ndarray  # (the position of one of its copies in the batch)
    members: np.ndarray  # (the positions of every copy of every group)


def repeated_rows(xp, proba, keys):
    """The batch's repeated rows (:class:`Repeats`), or None where none repeats.

    Identical rows have keys ``x_i . v`` equal up to the rounding of a sum
    of ``K`` positive terms (the order of a BLAS kernel's additions may
    differ between rows); rows whose keys are that close are candidates, and
    the candidates are grouped by their exact bytes (so distinct rows never
    merge). One sort of the ``n`` keys; only the candidates leave the device.
    """
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    tolerance = 8 * len(hash_vector(proba.shape[1])) * np.finfo(np.float64).eps
    near = np.diff(ordered) <= tolerance * np.abs(ordered[1:])
    if not near.any():
        return None
    flagged = np.zeros(len(keys), dtype=bool)
    flagged[:-1] |= near
    flagged[1:] |= near
    candidates = np.sort(order[flagged])
    (rows,) = to_host(
        xp, xp.take(proba, from_host(xp, candidates, device_of(proba)), axis=0)
    )
    rows = np.ascontiguousarray(rows)
    _, first, inverse, counts = np.unique(
        rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel(),
        return_index=True,
        return_inverse=True,
        return_counts=True,
    )
    repeated = counts > 1
    if not repeated.any():
        return None
    members = candidates[np.isin(inverse, np.flatnonzero(repeated))]
    return Repeats(
        rows[first[repeated]].astype(np.float64),
        counts[repeated],
        candidates[first[repeated]],
        members,
    )


def _host_gradients(rows, train_prior, prior):
    """``g`` and the responsibilities ``rho = prior * g`` of host rows."""
    a = rows / train_prior
    d = a @ prior
    g = np.divide(a, d[:, None], out=np.zeros_like(a), where=d[:, None] > 0)
    return g, g * prior


def cluster_spread(clusters, train_prior, prior, class_means):
    r"""The variance the repeated rows add: ``sum_r w_r (w_r - 1) S_r``.

    ``S_r = sum_j rho_rj (g_r - mu_j)(g_r - mu_j)^T`` for a row repeated
    ``w_r`` times (``rho`` its responsibilities, ``mu_j`` the rows of
    ``class_means``): the ``w_r**2`` of one cluster of identical rows less the
    ``w_r`` that the independent-rows formula counts (see the module notes).
    """
    multiplicity = clusters.multiplicity
    weights = multiplicity * (multiplicity - 1.0)
    g, rho = _host_gradients(clusters.rows, train_prior, prior)
    outer = (g * weights[:, None]).T
    mixed = (outer @ rho) @ class_means
    return (
        outer @ g
        - mixed
        - mixed.T
        + class_means.T @ ((weights @ rho)[:, None] * class_means)
    )


def group_classes(clusters, train_prior, prior):
    """The repeated groups' responsibilities (rows sum to 1)."""
    _, rho = _host_gradients(clusters.rows, train_prior, prior)
    return rho / np.where(rho.sum(axis=1) > 0, rho.sum(axis=1), 1.0)[:, None]


def class_repeats(clusters, rho, rng):
    """The repeated groups' multiplicities, per class drawn from ``rho``.

    A bootstrap batch repeats rows as the batch does.
    """
    draw = rng.random(len(rho))[:, None] > np.cumsum(rho, axis=1)
    classes = np.minimum(draw.sum(axis=1), rho.shape[1] - 1)
    return [clusters.multiplicity[classes == j] for j in range(rho.shape[1])]


def discrete_outputs(xp, proba, share=0.01):
    """Whether ``proba``'s rows tie exactly more often than distinct inputs do.

    Rows of a labelled calibration set are distinct inputs: where more than
    ``share`` of them share their posterior with another (a tree's leaves,
    k-NN's vote shares, binned calibration), the model's outputs are
    discrete, and identical rows of a batch are independent draws that
    happen to tie, not one input repeated (counting them as one made the
    intervals of a 20-NN about 3x wider than their coverage needs).
    """
    dtype = work_dtype(xp, device_of(proba))
    hashing = from_host(xp, hash_vector(proba.shape[1]), device_of(proba), dtype)
    (keys,) = to_host(xp, xp.astype(proba, dtype) @ hashing)
    groups = repeated_rows(xp, proba, keys)
    return groups is not None and len(groups.members) > share * proba.shape[0]


def batch_repeats(xp, proba, keys, calibration):
    """The batch's repeated rows; None where the calibration set's rows tie.

    (The calibration set is read for its ties only where the batch has
    repeats: one more pass, one more compute for Dask, only then.)
    """
    repeats = repeated_rows(xp, proba, keys)
    if repeats is None or calibration is None:
        return repeats
    cal_xp = get_namespace(calibration.proba)[0]
    return None if discrete_outputs(cal_xp, calibration.proba) else repeats
