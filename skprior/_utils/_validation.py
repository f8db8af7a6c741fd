"""Every input check of skprior, and the parameter constraints.

The public functions and the estimators validate the same parameters with the
same constraint objects (``CONSTRAINTS``, read by scikit-learn's
``validate_params`` and ``_parameter_constraints``), and each kind of input has
one checker: probabilities, logits, a prior, sample weights, labels. Each turns
bad input into an error that says what is wrong and how to fix it, and none
modifies the caller's array.
"""

import os
import sys
import warnings
from collections.abc import Mapping

import numpy as np
from scipy import sparse
from sklearn.exceptions import DataConversionWarning

from skprior._utils._kernels import row_maxima
from skprior._utils._kernels import row_sums as row_sums_of
from skprior._utils._options import AUTO_K

# -- parameter constraints (scikit-learn's validation system) --------------------------


# -- warnings that point at the caller -----------------------------------------------

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# Frames of these scikit-learn wrappers sit between skprior and its caller.
_WRAPPER_FILES = ("_param_validation.py", os.path.join("sklearn", "base.py"))


def warn_user(message, category=UserWarning):
    """Warn with the caller's line: the first frame outside skprior.

    A fixed ``stacklevel`` points inside the package as soon as a call goes
    through another of its functions, an estimator or scikit-learn's
    parameter validation.
    """
    # (stacklevel=1 is this function, 2 its caller: sys._getframe(1))
    frame, level = sys._getframe(1), 2
    while frame is not None and (
        frame.f_code.co_filename.startswith(_PACKAGE_DIR)
        or frame.f_code.co_filename.endswith(_WRAPPER_FILES)
    ):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


# -- conversion to arrays ----------------------------------------------------------


def _first(arr):
    """The first entry of ``arr`` (for messages)."""
    return arr.reshape(-1)[0] if arr.size else None


def as_numeric(value, name, shape_text):
    """``value`` as a real float32 or float64 ndarray (shape not checked).

    numpy's and scikit-learn's conversion errors do not name the argument
    ("inhomogeneous shape", "could not convert string to float"); this one
    turns each kind of unconvertible input into a message that names it and
    says what to pass instead. float32 stays float32; every other real dtype
    becomes float64. An ndarray that needs no conversion is returned as it is.
    """
    if sparse.issparse(value):
        raise TypeError(
            f"{name} is a sparse matrix, which is not supported here. Pass a "
            f"dense array: {name}.toarray()."
        )
    if isinstance(value, (str, bytes)):
        fix = (
            "For class-balanced weights, pass sklearn.utils.class_weight."
            "compute_sample_weight('balanced', y)."
            if "weight" in name
            else "If it names a file, load it first (np.load, np.loadtxt or "
            "pandas.read_csv)."
        )
        raise TypeError(
            f"{name} must be an array of shape {shape_text}, got the string "
            f"{value!r}. {fix}"
        )
    if value is None:
        raise TypeError(f"{name} must be an array of shape {shape_text}, got None.")
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:
        if "inhomogeneous" in str(exc) or "sequence" in str(exc):
            raise ValueError(
                f"{name} must be a rectangular array of shape {shape_text}, got "
                f"a ragged nested list (rows of different lengths). Give every "
                f"row the same number of entries."
            ) from exc
        raise TypeError(
            f"{name} could not be read as an array of shape {shape_text} ({exc})."
        ) from exc
    if arr.dtype in (np.float64, np.float32):
        return arr
    if arr.dtype.kind == "c":
        raise ValueError(
            f"{name} holds complex numbers; it must be real. If the imaginary "
            f"parts are 0, pass {name}.real."
        )
    if arr.dtype.kind in "biuf":
        return arr.astype(np.float64)
    try:
        return arr.astype(np.float64)
    except (ValueError, TypeError) as exc:
        what = "strings" if arr.dtype.kind in "US" else f"{arr.dtype} values"
        raise ValueError(
            f"{name} must hold numbers, got {what} such as {_first(arr)!r}. "
            f"Convert it to a float array first."
        ) from exc


def as_labels(value, name, shape_text="(n_samples,)"):
    """``value`` as a 1-D ndarray of labels, with NaN and inf refused.

    Labels may be numbers or strings (not converted).
    """
    if sparse.issparse(value):
        raise TypeError(
            f"{name} is a sparse matrix; labels must be a 1-D array. Pass "
            f"{name}.toarray().ravel()."
        )
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(
            f"{name} must be a 1-D array of labels of shape {shape_text}, got "
            f"{value!r}."
        )
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"{name} must be a 1-D array of labels of shape {shape_text}, got a "
            f"ragged nested list. Give one label per sample."
        ) from exc
    if arr.ndim == 2 and arr.shape[1] == 1:
        warn_user(
            f"A column-vector {name} was passed when a 1d array was expected "
            f"(as scikit-learn words it); it is read as one label per row. Pass "
            f"{name}.ravel() to silence this warning.",
            DataConversionWarning,
        )
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D array of labels of shape {shape_text}, got an "
            f"array of shape {arr.shape}. For one-hot labels pass "
            f"{name}.argmax(axis=1)."
        )
    if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(
            f"{name} contains NaN or infinite values (first at position {bad}); "
            f"every sample needs a class label. Drop the unlabelled samples."
        )
    return arr


def check_length(arr, n_samples, name, other, what="entry"):
    """Raise unless ``arr`` has one ``what`` per row of ``other``."""
    if len(arr) != n_samples:
        plural = "entries" if what == "entry" else f"{what}s"
        raise ValueError(
            f"{name} has {len(arr)} {plural} but {other} has {n_samples} rows; "
            f"give one {what} per row."
        )


# -- probabilities -------------------------------------------------------------------


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
    try:
        dtype = np.dtype(getattr(proba, "dtype", None))
    except TypeError:  # another library's dtype (torch.float32): not float16
        return arr.dtype
    if (
        np.issubdtype(dtype, np.floating)
        and np.finfo(dtype).eps > np.finfo(arr.dtype).eps
    ):
        return dtype
    return arr.dtype


def _as_proba_array(proba, name, min_classes):
    """``proba`` as a 2-D float array with enough columns (values not checked)."""
    if (
        type(proba) is np.ndarray
        and proba.ndim == 2
        and proba.dtype in (np.float32, np.float64)
        and proba.shape[0] >= 1
        and proba.shape[1] >= min_classes
    ):
        return proba  # nothing to convert or refuse (the hot path of CAN)
    arr = as_numeric(proba, name, "(n_samples, n_classes)")
    if arr.ndim == 1:
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_classes), got a 1-D array "
            f"of shape {arr.shape}. For a binary problem given as P(class 1), pass "
            f"np.column_stack([1 - p, p]); for a single sample, pass p[None, :]."
        )
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_classes), got an array of "
            f"shape {arr.shape}. Stack the batches into one 2-D array "
            f"(np.concatenate), or reshape it."
        )
    if arr.shape[0] == 0:
        raise ValueError(
            f"{name} is empty (shape {arr.shape}): pass at least one row of "
            f"probabilities."
        )
    if arr.shape[1] < min_classes:
        raise ValueError(
            f"{name} must have at least {min_classes} columns (one per class), "
            f"got {arr.shape[1]}."
        )
    return arr


# How a caller with logits in place of probabilities fixes them (the CLI has
# its own way: --logits).
_LOGITS_FIX = "apply scipy.special.softmax(scores, axis=1)"


def _check_row_sums(row_sums, arr, name, precision=None, logits_fix=_LOGITS_FIX):
    """Raise if a row sum is not finite or not 1.

    Within the tolerance of ``precision``, by default ``arr.dtype``.
    """
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
    row_sums = row_sums_of(arr)
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
    row_sums = row_sums_of(arr)
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
            f"({np.asarray(keys).tolist()[:20]}). Key it by exactly those labels, "
            f"or pass an array "
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
    arr = np.array(as_numeric(prior, name, f"({n_classes},)"), dtype=np.float64)
    if arr.ndim != 1 or arr.shape[0] != n_classes:
        raise ValueError(
            f"{name} must be a 1-D array with one entry per class ({n_classes}), "
            f"got shape {arr.shape}."
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(
            f"{name} must be finite and non-negative, got {arr}. Pass class "
            f"frequencies (counts divided by their total)."
        )
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


def prior_length(prior, name="prior"):
    """The number of classes of a prior given on its own (no classes to match).

    For the objects whose prior sets the number of classes: its length, with
    the input errors of :func:`check_prior` for what has none.
    """
    if isinstance(prior, Mapping):
        return len(prior)
    arr = as_numeric(prior, name, "(n_classes,)")
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D array with one entry per class, got shape "
            f"{arr.shape}."
        )
    return arr.shape[0]


def check_train_prior(prior, n_classes, *, name="train_prior", classes=None):
    """:func:`check_prior` for a training prior, which must be positive.

    Every method divides by the training prior (``p(c|x) / q_c``), so a class
    with ``q_c = 0`` is refused with the fix: the prior the model was trained
    with, where every class it predicts had examples.
    """
    prior = check_prior(prior, n_classes, name=name, classes=classes)
    if np.any(prior == 0):
        zero = (
            np.flatnonzero(prior == 0).tolist()
            if classes is None
            else np.asarray(classes)[prior == 0].tolist()
        )
        where = "classes" if classes is not None else "classes at positions"
        raise ValueError(
            f"{name} is 0 for the {where} {zero}: the methods divide the "
            f"posteriors by it (p(c|x) / q_c), so it must be positive. Pass the "
            f"prior the model was trained with (every class it predicts had "
            f"training examples), for example as train_prior= of the wrappers."
        )
    return prior


def check_confusion(confusion, n_classes, *, name="confusion"):
    """Validate a joint confusion matrix ``P(predicted = i, true = j)``.

    Returns a float64 copy of shape ``(n_classes, n_classes)``: finite,
    non-negative and summing to one (within 1e-6).
    """
    shape = f"({n_classes}, {n_classes})"
    confusion = np.array(as_numeric(confusion, name, shape), dtype=np.float64)
    if confusion.shape != (n_classes, n_classes):
        raise ValueError(
            f"{name} must be of shape ({n_classes}, {n_classes}) for "
            f"{n_classes} classes, got {confusion.shape}."
        )
    if (
        not np.all(np.isfinite(confusion))
        or np.any(confusion < 0)
        or abs(confusion.sum() - 1) > 1e-6
    ):
        raise ValueError(
            f"{name} must be a joint distribution: finite, non-negative, "
            f"summing to 1 (divide the counts by their total)."
        )
    return confusion


# -- logits --------------------------------------------------------------------------


def check_logits(logits, name="logits", as_float64=True):
    """Validate logits; a 1-D binary score ``s`` becomes the rows ``(0, s)``.

    Returns a float64 array (a new one) and the caller's dtype. ``-inf`` is
    allowed (the log of an exact zero probability); NaN, ``+inf`` and rows
    with no finite entry are not. ``as_float64=False`` returns the validated
    float32 or float64 array without a copy, for a caller that converts it
    block by block and never writes to it.
    """
    arr = as_numeric(logits, name, "(n_samples, n_classes)")
    if arr.ndim not in (1, 2):
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_classes) (or 1-D for the "
            f"score of the positive class of a binary problem), got an array of "
            f"shape {arr.shape}."
        )
    if arr.shape[0] == 0:
        raise ValueError(
            f"{name} is empty (shape {arr.shape}): pass at least one row of logits."
        )
    if arr.ndim == 1:
        arr = np.stack([np.zeros_like(arr), arr], axis=1)
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


def warn_if_probabilities(z):
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
        warn_user(
            "The logits look like probabilities (every entry in [0, 1], every "
            "row summing to 1). Temperature scaling divides logits: pass "
            "np.log(proba) for a model that gives probabilities."
        )


def resolve_k(k, n_classes, kind):
    """``k`` as an int suited to ``n_classes`` (``"auto"``: min(3, n_classes))."""
    if k == "auto":
        return min(AUTO_K, n_classes)
    if k > n_classes and kind != "max_over_k":  # "max_over_k" does not use k
        hint = " (with two classes, k=2 is the entropy of the row)"
        raise ValueError(
            f"k={k} is larger than the number of classes ({n_classes}); "
            f"choose k between 2 and {n_classes}, or k='auto'"
            f"{hint if n_classes == 2 else ''}."
        )
    return int(k)


# -- calibration metrics ---------------------------------------------------------------
