"""The input checks of :mod:`skprior._utils._validation` for arrays of other libraries.

The same rules on the namespace's own arrays, as reductions on their device:
no host copy of the data. The reductions of one check are computed together
(:func:`skprior._utils._array_api.to_host`), so that on a Dask array a whole check
is one pass over the data. Only when a check fails are row-sized vectors
brought to the host, to name the first bad row with the NumPy checkers'
messages.
"""

import numpy as np

from skprior._utils._array_api import (
    device_of,
    is_dask,
    per_row,
    scalars_to_host,
    to_host,
    work_dtype,
)
from skprior._utils._validation import (
    _LOGITS_FIX,
    _check_row_sums,
    _raise_if_negative,
    _row_sum_tolerance,
)


def _numpy_dtype(xp, dtype):
    """The NumPy float dtype of a float32 or float64 ``dtype`` of ``xp``."""
    return np.dtype(np.float32 if dtype == xp.float32 else np.float64)


def _precision(xp, original, converted):
    """The dtype whose rounding the row sums carry (float16 is coarser)."""
    if original == getattr(xp, "float16", None):
        return np.dtype(np.float16)
    return _numpy_dtype(xp, converted)


def _as_float(xp, array, name):
    """float32 and float64 stay; other numbers become float64."""
    if array.dtype in (xp.float32, xp.float64):
        return array
    if xp.isdtype(array.dtype, ("bool", "integral", "real floating")):
        return xp.astype(array, xp.float64)
    raise ValueError(f"{name} must hold real numbers, got dtype {array.dtype}.")


def check_shape(array, name, min_classes):
    """Refuse anything but a 2-D array with ``min_classes`` columns and a row."""
    if array.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_classes), got an array "
            f"of shape {tuple(array.shape)}."
        )
    if array.shape[0] is not None and array.shape[0] < 1:
        raise ValueError(f"{name} has no rows; pass at least one sample.")
    if array.shape[1] < min_classes:
        raise ValueError(
            f"{name} must have at least {min_classes} columns (one per class), "
            f"got {array.shape[1]}."
        )


def check_proba_xp(xp, proba, *, name="proba", min_classes=2, logits_fix=_LOGITS_FIX):
    """:func:`skprior._utils._validation.check_proba` on the device: one pass.

    Returns the probabilities as float32 or float64 (other dtypes converted);
    never a copy when no conversion is needed.
    """
    check_shape(proba, name, min_classes)
    arr = _as_float(xp, proba, name)
    precision = _precision(xp, proba.dtype, arr.dtype)
    row_sums = xp.sum(arr, axis=1)
    finite, smallest, off = to_host(
        xp,
        xp.all(xp.isfinite(row_sums)),
        xp.min(arr),
        xp.max(xp.abs(row_sums - 1)),
    )
    tol = _row_sum_tolerance(precision, arr.shape[1])
    if finite and smallest >= 0 and off <= tol:
        return arr
    stand_in = np.empty((0, arr.shape[1]), dtype=_numpy_dtype(xp, arr.dtype))
    (host_sums,) = to_host(xp, row_sums)
    if finite and smallest < 0:
        (negative,) = to_host(xp, xp.any(arr < 0, axis=1))
        _raise_if_negative(-negative[:, None].astype(np.float64), name, logits_fix)
    _check_row_sums(host_sums, stand_in, name, precision, logits_fix)
    raise AssertionError("unreachable")  # pragma: no cover


def check_logits_xp(xp, logits, *, name="logits", warn_probabilities=False):
    """:func:`skprior._utils._validation.check_logits` on the device: one pass.

    A 1-D score ``s`` becomes the rows ``(0, s)``. Returns the float32 or
    float64 logits and whether they look like probabilities (computed in the
    same pass when ``warn_probabilities``).
    """
    if logits.ndim == 1:
        logits = _as_float(xp, logits, name)
        logits = xp.stack([xp.zeros_like(logits), logits], axis=1)
    if logits.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_classes) or 1-D, got "
            f"shape {tuple(logits.shape)}."
        )
    if logits.shape[1] < 2:
        raise ValueError(
            f"{name} must have at least 2 columns (one per class), got "
            f"{logits.shape[1]}. For a binary problem pass the 1-D score of the "
            f"positive class."
        )
    z = _as_float(xp, logits, name)
    top = xp.max(z, axis=1)
    checks = [xp.all(z < xp.inf), xp.any(top == -xp.inf)]
    if warn_probabilities:
        checks += [xp.min(z), xp.max(z), xp.max(xp.abs(xp.sum(z, axis=1) - 1))]
    values = to_host(xp, *checks)
    if not values[0]:
        (bad,) = to_host(xp, xp.any(~(z < xp.inf), axis=1))
        raise ValueError(
            f"{name} contains NaN or +inf (first in row {int(np.flatnonzero(bad)[0])})"
            f". Logits must be finite or -inf (the log of a zero probability)."
        )
    if values[1]:
        (bad,) = to_host(xp, top == -xp.inf)
        raise ValueError(
            f"Row {int(np.flatnonzero(bad)[0])} of {name} is -inf in every column, "
            f"so it is not the log of a probability vector. Check the model's "
            f"outputs."
        )
    looks_like_proba = (
        warn_probabilities and values[2] >= 0 and values[3] <= 1 and values[4] <= 1e-4
    )
    return z, bool(looks_like_proba)


def check_class_indices_xp(xp, y, like, n_classes, *, name="logits"):
    """:func:`skprior._utils._validation_labels.check_class_indices` on the device.

    Returns the labels as an integer array in the namespace of ``like``
    (chunked as its rows for Dask).
    """
    y = per_row(xp, y, like)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D, one label per row, got shape {y.shape}.")
    if y.shape[0] != like.shape[0]:
        raise ValueError(
            f"y has {y.shape[0]} entries but {name} has {like.shape[0]} rows; give "
            f"one label per row."
        )
    integral = xp.isdtype(y.dtype, "integral")
    checks = [xp.min(y), xp.max(y)]
    if not integral:
        if not xp.isdtype(y.dtype, "real floating"):
            raise ValueError(
                f"y must hold class indices 0..{n_classes - 1}, got dtype {y.dtype}."
            )
        checks.append(xp.all(y == xp.round(y)))
    values = to_host(xp, *checks)
    if not integral and not values[2]:
        raise ValueError(
            f"y must hold class indices 0..{n_classes - 1} (the column of the true "
            f"class in {name}), got non-integer values."
        )
    if values[0] < 0 or values[1] >= n_classes:
        raise ValueError(
            f"y holds class indices outside 0..{n_classes - 1} (min {values[0]}, "
            f"max {values[1]}); {name} has {n_classes} columns."
        )
    return xp.astype(y, xp.int64)


def check_sample_weight_xp(xp, sample_weight, like, *, name="sample_weight"):
    """Weights as an array of the working dtype beside ``like`` (ones for None)."""
    dtype = work_dtype(xp, device_of(like))
    if sample_weight is None:
        if is_dask(xp):
            import dask.array as da

            return da.ones(like.shape[0], chunks=(like.chunks[0],), dtype=np.float64)
        return xp.ones(like.shape[0], dtype=dtype, device=device_of(like))
    weights = per_row(xp, sample_weight, like, dtype=dtype)
    if weights.ndim != 1 or weights.shape[0] != like.shape[0]:
        raise ValueError(
            f"{name} must be 1-D with one weight per row ({like.shape[0]}), got "
            f"shape {tuple(weights.shape)}."
        )
    finite, smallest, total = scalars_to_host(
        xp, xp.all(xp.isfinite(weights)), xp.min(weights), xp.sum(weights)
    )
    if not finite or smallest < 0:
        raise ValueError(f"{name} must be finite and non-negative.")
    if total <= 0:
        raise ValueError(f"{name} sums to zero: every sample has weight 0.")
    return weights


def check_proba_lazy(xp, proba, *, name="proba"):
    """:func:`check_proba_xp`, deferred into the blocks of a Dask array.

    A map of a Dask array stays lazy: each block is checked by
    :func:`skprior._utils._validation.check_proba` when it is computed (no pass of
    its own; a bad block raises at compute time). Other arrays are checked now.
    """
    if not is_dask(xp):
        return check_proba_xp(xp, proba, name=name)
    check_shape(proba, name, 2)
    proba = proba.rechunk({1: -1})
    if proba.dtype not in (np.float32, np.float64):
        proba = proba.astype(np.float64)
    return proba.map_blocks(_checked_block, name, dtype=proba.dtype, meta=proba._meta)


def _checked_block(block, name, block_info=None):
    from skprior._utils._validation import check_proba

    try:
        check_proba(block, name=name)
    except ValueError as exc:
        start = block_info[0]["array-location"][0][0] if block_info else 0
        raise ValueError(
            f"{exc} (Dask chunk starting at row {start}: rows counted from it)"
        ) from exc
    return block


def check_logits_lazy(xp, logits, *, name="logits"):
    """:func:`check_logits_xp`, deferred into the blocks of a Dask array."""
    if not is_dask(xp):
        return check_logits_xp(xp, logits, name=name)[0]
    if logits.ndim == 1:
        logits = xp.stack([xp.zeros_like(logits), logits], axis=1)
    if logits.ndim != 2 or logits.shape[1] < 2:
        raise ValueError(
            f"{name} must be 2-D with at least 2 columns, or 1-D, got shape "
            f"{tuple(logits.shape)}."
        )
    logits = logits.rechunk({1: -1})
    if logits.dtype not in (np.float32, np.float64):
        logits = logits.astype(np.float64)
    return logits.map_blocks(
        _checked_logits_block, name, dtype=logits.dtype, meta=logits._meta
    )


def _checked_logits_block(block, name, block_info=None):
    from skprior._utils._validation import check_logits

    try:
        check_logits(block, name=name, as_float64=False)
    except ValueError as exc:
        start = block_info[0]["array-location"][0][0] if block_info else 0
        raise ValueError(
            f"{exc} (Dask chunk starting at row {start}: rows counted from it)"
        ) from exc
    return block
