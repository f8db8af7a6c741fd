"""Input checks shared by the array functions and the estimators.

Every public function of skprior takes probabilities (or logits) as plain arrays.
These helpers turn bad input into an error that says what is wrong and how to fix
it, and never modify the caller's array.
"""

import numpy as np
from sklearn.utils import check_array


def _row_sum_tolerance(dtype, n_classes):
    """Tolerance on ``|row sum - 1|``, scaled to the precision of ``dtype``.

    A softmax computed in float32 over 100 classes is off by a few 1e-7; the
    tolerance grows with the number of classes so that honest model outputs pass
    while rows that are not probabilities at all (logits, scores) do not.
    """
    eps = np.finfo(dtype).eps
    return max(1e-6, 64 * eps * n_classes)


def check_proba(proba, *, name="proba", min_classes=2):
    """Validate a matrix of class probabilities, one row per sample.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Probabilities; float32 stays float32, anything else becomes float64.
    name : str, default="proba"
        Name used in error messages.
    min_classes : int, default=2
        Smallest allowed number of columns.

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
    arr = np.asarray(proba)
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
    n_classes = arr.shape[1]
    if n_classes < min_classes:
        raise ValueError(
            f"{name} must have at least {min_classes} columns (one per class), "
            f"got {n_classes}."
        )
    # One pass finds NaN and inf too: they make the row sum non-finite.
    # ``einsum`` is several times faster than ``sum(axis=1)`` on narrow rows,
    # and unlike a BLAS product it does not stall when the cores are busy.
    row_sums = np.einsum("ij->i", arr)
    if not np.all(np.isfinite(row_sums)):
        bad = int(np.flatnonzero(~np.isfinite(row_sums))[0])
        raise ValueError(
            f"{name} contains NaN or infinite values (first in row {bad}). "
            f"Probabilities must be finite; check the model's outputs."
        )
    if arr.min() < 0:
        bad = int(np.flatnonzero((arr < 0).any(axis=1))[0])
        raise ValueError(
            f"{name} contains negative values (first in row {bad}), so it is not "
            f"a matrix of probabilities. If these are logits or decision scores, "
            f"convert them with scipy.special.softmax(scores, axis=1) first."
        )
    tol = _row_sum_tolerance(arr.dtype, n_classes)
    off = np.abs(row_sums - 1)
    if off.max() > tol:
        bad = int(np.argmax(off))
        raise ValueError(
            f"The rows of {name} must sum to 1 (within {tol:.1e}); row {bad} sums "
            f"to {row_sums[bad]:.6g}. If these are logits or scores, apply "
            f"scipy.special.softmax(scores, axis=1); if they are unnormalised "
            f"weights, divide each row by its sum."
        )
    return arr


def check_prior(prior, n_classes, *, name="prior", positive=False):
    """Validate a class prior and return it as float64 summing exactly to one.

    Parameters
    ----------
    prior : array-like of shape (n_classes,)
        Class probabilities, non-negative, summing to one (within 1e-6).
    n_classes : int
        Expected length.
    name : str, default="prior"
        Name used in error messages.
    positive : bool, default=False
        Whether every entry must be strictly positive.

    Returns
    -------
    prior : ndarray of shape (n_classes,), dtype float64
        A new array, renormalised to sum to one.
    """
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
