"""Input checks shared by the array functions and the estimators.

Every public function of skprior takes probabilities (or logits) as plain arrays.
These helpers turn bad input into an error that says what is wrong and how to fix
it, and never modify the caller's array.
"""

from collections.abc import Mapping

import numpy as np
from sklearn.utils import check_array


def _row_sum_tolerance(dtype, n_classes):
    """Tolerance on ``|row sum - 1|``, scaled to the precision of ``dtype``.

    A softmax computed in float32 over 100 classes is off by a few 1e-7; the
    tolerance grows with the number of classes so that honest model outputs pass
    while rows that are not probabilities at all (logits, scores) do not. It
    is capped at 1e-2: float16 rows (machine epsilon 1e-3) are off by a few
    1e-4, and a row off by more than 1% is no rounding error.
    """
    eps = np.finfo(dtype).eps
    return max(1e-6, min(64 * eps * n_classes, 1e-2))


def _precision_dtype(proba, arr):
    """The dtype whose rounding the row sums carry: the caller's, if coarser.

    float16 input is converted to float64 for the computation, but its rows
    sum to one only to float16 precision.
    """
    dtype = getattr(proba, "dtype", None)
    if (
        dtype is not None
        and np.issubdtype(dtype, np.floating)
        and np.finfo(dtype).eps > np.finfo(arr.dtype).eps
    ):
        return dtype
    return arr.dtype


def _as_proba_array(proba, name, min_classes):
    """``proba`` as a 2-D float array with enough columns (values not checked)."""
    arr = np.asarray(proba)
    if (
        type(proba) is np.ndarray
        and arr.ndim == 2
        and arr.dtype in (np.float32, np.float64)
        and arr.shape[0] >= 1
        and arr.shape[1] >= min_classes
    ):
        return arr  # nothing for check_array to convert or refuse (saves ~0.1 ms)
    if arr.ndim == 1:
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_classes), got a 1-D array "
            f"of shape {arr.shape}. For a binary problem given as P(class 1), pass "
            f"np.column_stack([1 - p, p]); for a single sample, pass p[None, :]."
        )
    arr = check_array(
        proba,
        dtype=[np.float64, np.float32],
        ensure_all_finite=False,
        ensure_min_samples=1,
        input_name=name,
    )
    if arr.shape[1] < min_classes:
        raise ValueError(
            f"{name} must have at least {min_classes} columns (one per class), "
            f"got {arr.shape[1]}."
        )
    return arr


def _row_sums(arr):
    # ``einsum`` is several times faster than ``sum(axis=1)`` on narrow rows,
    # and unlike a BLAS product it does not stall when the cores are busy.
    return np.einsum("ij->i", arr)


# Work done block by block keeps its temporaries near 2**22 entries (32 MB in
# float64) whatever the number of rows: a 50,000 x 10,000 float32 batch (2 GB)
# would otherwise need ten to fifteen times its size.
BLOCK_ELEMENTS = 2**22


def row_blocks(n_rows, n_columns, elements=None):
    """Slices over ``range(n_rows)``, each covering about ``elements`` entries
    (default ``BLOCK_ELEMENTS``).

    Examples
    --------
    >>> row_blocks(5, 4, elements=8)
    [slice(0, 2, None), slice(2, 4, None), slice(4, 6, None)]
    """
    if elements is None:
        elements = BLOCK_ELEMENTS
    step = max(1, elements // max(n_columns, 1))
    return [slice(start, start + step) for start in range(0, n_rows, step)]


def row_maxima(arr):
    """Row maxima of a C-contiguous 2-D array.

    ``maximum.reduceat`` over the flat array runs one loop over all rows,
    where ``max(axis=1)`` starts a reduction per row: 2-3x faster on narrow
    rows.
    """
    n_rows, n_columns = arr.shape
    if not arr.flags.c_contiguous or n_columns == 0:
        return arr.max(axis=1)
    starts = np.arange(0, n_rows * n_columns, n_columns)
    return np.maximum.reduceat(arr.reshape(-1), starts)


# How a caller with logits in place of probabilities fixes them (the CLI has
# its own way: --logits).
_LOGITS_FIX = "apply scipy.special.softmax(scores, axis=1)"


def _check_row_sums(row_sums, arr, name, precision=None, logits_fix=_LOGITS_FIX):
    """Raise if a row sum is not finite or not 1 (within the tolerance of
    ``precision``, by default ``arr.dtype``)."""
    if not np.all(np.isfinite(row_sums)):
        bad = int(np.flatnonzero(~np.isfinite(row_sums))[0])
        raise ValueError(
            f"{name} contains NaN or infinite values (first in row {bad}). "
            f"Probabilities must be finite; check the model's outputs."
        )
    tol = _row_sum_tolerance(
        arr.dtype if precision is None else precision, arr.shape[1]
    )
    off = np.abs(row_sums - 1)
    if off.max() > tol:
        bad = int(np.argmax(off))
        raise ValueError(
            f"The rows of {name} must sum to 1 (within {tol:.1e}); row {bad} sums "
            f"to {row_sums[bad]:.6g}. If these are logits or scores, {logits_fix}; "
            f"if they are unnormalised weights, divide each row by its sum."
        )


def _raise_if_negative(arr, name, logits_fix=_LOGITS_FIX):
    if arr.min() < 0:
        bad = int(np.flatnonzero((arr < 0).any(axis=1))[0])
        raise ValueError(
            f"{name} contains negative values (first in row {bad}), so it is not "
            f"a matrix of probabilities. If these are logits or decision scores, "
            f"{logits_fix}."
        )


def check_proba(proba, *, name="proba", min_classes=2, logits_fix=_LOGITS_FIX):
    """Validate a matrix of class probabilities, one row per sample.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Probabilities; float32 stays float32, anything else becomes float64.
    name : str, default="proba"
        Name used in error messages.
    min_classes : int, default=2
        Smallest allowed number of columns.
    logits_fix : str, default="apply scipy.special.softmax(scores, axis=1)"
        What the error messages advise for logits given as probabilities.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes)
        The validated array (the caller's array itself when no conversion was
        needed: callers must not write into it).

    Raises
    ------
    ValueError
        If the array is not 2-D, has too few columns, holds NaN, infinite or
        negative values, or rows that do not sum to one.
    """
    arr = _as_proba_array(proba, name, min_classes)
    # NaN and inf make the row sum non-finite: one pass finds them too.
    row_sums = _row_sums(arr)
    if np.all(np.isfinite(row_sums)):
        _raise_if_negative(arr, name, logits_fix)
    _check_row_sums(row_sums, arr, name, _precision_dtype(proba, arr), logits_fix)
    return arr


def check_proba_with_row_max(proba, *, name="proba"):
    """:func:`check_proba` that also returns each row's maximum and sum.

    Two passes over the array instead of three: seen as unsigned integers of
    the same width, non-negative floats order as their values do, ``+inf`` and
    NaN lie above every finite float and negative values (sign bit set) above
    those, so one integer row maximum gives the row maxima and, compared with
    the bits of ``+inf``, finds every value that is not a finite non-negative
    float. Only then is the slower :func:`check_proba` run, for its message.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes)
        As :func:`check_proba` returns it, except that negative zeros, which
        are valid, come back as positive zeros (in a copy).
    row_max : ndarray of shape (n_samples,)
        The largest entry of each row, in the dtype of ``proba``.
    row_sums : ndarray of shape (n_samples,)
        The sum of each row.
    """
    arr = _as_proba_array(proba, name, min_classes=2)
    unsigned = np.uint32 if arr.dtype == np.float32 else np.uint64
    inf_bits = np.array(np.inf, dtype=arr.dtype).view(unsigned)
    row_max = row_maxima(arr.view(unsigned))
    if row_max.max() >= inf_bits:
        arr = check_proba(arr, name=name)  # raises, unless all are -0.0
        arr = arr + 0.0  # -0.0 + 0.0 is +0.0
        row_max = row_maxima(arr.view(unsigned))
    row_sums = _row_sums(arr)
    _check_row_sums(row_sums, arr, name, _precision_dtype(proba, arr))
    return arr, row_max.view(arr.dtype), row_sums


def _prior_in_class_order(prior, n_classes, classes, name):
    """A prior keyed by class (dict, pandas Series) as values in ``classes`` order.

    Anything else is returned as it is, to be read in order. A Series with the
    default index 0, 1, ... is read in order too (it was built from a list).
    """
    if isinstance(prior, Mapping):
        labels, values = list(prior.keys()), list(prior.values())
    elif hasattr(prior, "index") and hasattr(prior, "to_numpy"):
        labels, values = list(prior.index), prior.to_numpy()
        if labels == list(range(len(labels))):
            return values
    else:
        return prior
    where = "classes_" if classes is not None else "the columns"
    keys = list(range(n_classes)) if classes is None else list(classes)
    position = {label: i for i, label in enumerate(labels)}
    if len(labels) != len(keys) or any(key not in position for key in keys):
        raise ValueError(
            f"{name} is keyed by {labels[:20]}, which are not {where} "
            f"({keys[:20]}). Key it by exactly those labels, or pass an array "
            f"with one entry per class in the order of {where}."
        )
    return [values[position[key]] for key in keys]


def check_prior(prior, n_classes, *, name="prior", positive=False, classes=None):
    """Validate a class prior and return it as float64 summing exactly to one.

    Parameters
    ----------
    prior : array-like of shape (n_classes,), dict or pandas Series
        Class probabilities, non-negative, summing to one (within 1e-6). An
        array is read in order; a dict or Series is matched to ``classes`` by
        its keys (column positions 0, 1, ... when ``classes`` is None).
    n_classes : int
        Expected length.
    name : str, default="prior"
        Name used in error messages.
    positive : bool, default=False
        Whether every entry must be strictly positive.
    classes : array-like of shape (n_classes,), default=None
        The class labels, in the order the prior's entries must follow.

    Returns
    -------
    prior : ndarray of shape (n_classes,), dtype float64
        A new array, renormalised to sum to one.
    """
    prior = _prior_in_class_order(prior, n_classes, classes, name)
    arr = np.array(prior, dtype=np.float64, copy=True)
    if arr.ndim != 1 or arr.shape[0] != n_classes:
        raise ValueError(
            f"{name} must be a 1-D array with one entry per class ({n_classes}), "
            f"got shape {arr.shape}."
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and non-negative, got {arr}.")
    total = arr.sum()
    if abs(total - 1) > 1e-6:
        raise ValueError(
            f"{name} must sum to 1, got {total:.6g}. Pass class frequencies "
            f"divided by their total."
        )
    if positive and np.any(arr == 0):
        zero = np.flatnonzero(arr == 0).tolist()
        raise ValueError(
            f"{name} is 0 for the classes at positions {zero}; this method needs "
            f"a strictly positive prior. Pass a smoothed prior (for example, add "
            f"one pseudo-count to each class before normalising)."
        )
    return arr / total


def check_real(value, name, *, low=-np.inf, high=np.inf, closed="both"):
    """Check that ``value`` is a real number in an interval and return it as float.

    ``closed`` is one of ``"both"``, ``"left"``, ``"right"``, ``"neither"``,
    as in scikit-learn's ``Interval``. NaN is always rejected.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    value = float(value)
    low_ok = value >= low if closed in ("both", "left") else value > low
    high_ok = value <= high if closed in ("both", "right") else value < high
    if not (low_ok and high_ok):
        left = "[" if closed in ("both", "left") else "("
        right = "]" if closed in ("both", "right") else ")"
        raise ValueError(f"{name} must be in {left}{low}, {high}{right}, got {value}.")
    return value


def check_int(value, name, *, low, high=None):
    """Check that ``value`` is an integer in ``[low, high]`` and return it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    value = int(value)
    if value < low or (high is not None and value > high):
        bounds = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bounds}, got {value}.")
    return value
