"""The input checks of skprior: one checker per kind of input, for every library.

Each kind of input has one checker -- probabilities, logits, a prior, a
confusion matrix here; class indices and sample weights in
:mod:`skprior._utils._validation_labels` -- that takes NumPy arrays and
array-likes, and arrays of any array API library. Each turns bad input into an
error that says what is wrong and how to fix it, the same error in every
namespace, and none modifies the caller's array.

An array of another library is checked where it lives: a few reductions,
brought to the host together (one transfer; one ``dask.compute`` for Dask, or
none at all with ``lazy=True``, where each block is checked when computed).
Only when a check fails do row-sized vectors cross to the host, for the
message that names the first bad row. A prior or a confusion matrix
(``K`` entries) is read on the host, where the solvers use it.
"""

from collections.abc import Mapping

import numpy as np

from skprior._utils._array_api import (
    device_of,
    get_namespace,
    is_dask,
    known_rows,
    to_host,
    work_dtype,
)
from skprior._utils._kernels import row_maxima
from skprior._utils._kernels import row_sums as row_sums_of
from skprior._utils._options import AUTO_K

# (the conversions are imported from here too, with the checkers)
from skprior._utils._validation_arrays import (  # noqa: F401
    as_float,
    as_labels,
    as_numeric,
    check_length,
    checked_lazily,
    on_host,
    warn_user,
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
    # (bfloat16, of torch and JAX, has float32's range and 8 bits of mantissa)
    eps = 2.0**-7 if dtype == "bfloat16" else np.finfo(dtype).eps
    return max(1e-6, min(64 * eps * n_classes, 1e-2))


def _dtype_name(array):
    """``"float32"``, ``"float16"``...: dtypes of every library compare by name."""
    dtype = getattr(array, "dtype", None)
    if isinstance(dtype, np.dtype):
        return dtype.name if dtype.kind != "f" else f"float{8 * dtype.itemsize}"
    return str(dtype).rpartition(".")[2]


def _precision_dtype(proba, arr):
    """The dtype whose rounding the row sums carry: the caller's, if coarser.

    float16 and bfloat16 input (the float dtypes coarser than float32) is
    converted for the computation, but its rows sum to one only to its own
    precision. A NumPy dtype, or ``"bfloat16"``, for the tolerance.
    """
    given = _dtype_name(proba)
    if given == "bfloat16":  # (no NumPy dtype: named, for the tolerance)
        return given
    if _dtype_name(arr) == "float32":  # (float16 input became float64, not float32)
        return np.dtype(np.float32)
    return np.dtype(np.float16 if given == "float16" else np.float64)


def _check_proba_shape(shape, name, min_classes):
    """Refuse anything but a 2-D shape with a row and ``min_classes`` columns."""
    shape = tuple(shape)
    if len(shape) == 1:
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_classes), got a 1-D array "
            f"of shape {shape}. For a binary problem given as P(class 1), pass "
            f"np.column_stack([1 - p, p]); for a single sample, pass p[None, :]."
        )
    if len(shape) != 2:
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_classes), got an array of "
            f"shape {shape}. Stack the batches into one 2-D array "
            f"(np.concatenate), or reshape it."
        )
    if shape[0] == 0:
        raise ValueError(
            f"{name} is empty (shape {shape}): pass at least one row of probabilities."
        )
    if shape[1] < min_classes:
        raise ValueError(
            f"{name} must have at least {min_classes} columns (one per class), "
            f"got {shape[1]}."
        )


def _as_proba_array(proba, name, min_classes):
    """``proba`` as a 2-D float ndarray with enough columns (values not checked)."""
    if (
        type(proba) is np.ndarray
        and proba.ndim == 2
        and proba.dtype in (np.float32, np.float64)
        and proba.shape[0] >= 1
        and proba.shape[1] >= min_classes
    ):
        return proba  # nothing to convert or refuse (the hot path of CAN)
    arr = as_numeric(proba, name, "(n_samples, n_classes)")
    _check_proba_shape(arr.shape, name, min_classes)
    return arr


# How a caller with logits in place of probabilities fixes them (the CLI has
# its own way: --logits).
_LOGITS_FIX = "apply scipy.special.softmax(scores, axis=1)"


def _check_rows(row_sums, negative, n_classes, name, precision, logits_fix):
    """Raise the error of the first rule that the rows break, if any (host vectors).

    ``row_sums`` and ``negative`` (whether each row has a negative entry,
    or None where none has) hold one value per row. The rules, in order:
    finite, non-negative, summing to one within the tolerance of
    ``precision``.
    """
    tol, off = _row_sum_tolerance(precision, n_classes), np.abs(row_sums - 1)
    if off.max() <= tol and (negative is None or not np.any(negative)):
        return  # (NaN fails the comparison)
    if not np.all(np.isfinite(row_sums)):
        bad = int(np.flatnonzero(~np.isfinite(row_sums))[0])
        raise ValueError(
            f"{name} contains NaN or infinite values (first in row {bad}). "
            f"Probabilities must be finite; check the model's outputs."
        )
    if negative is not None and np.any(negative):
        raise ValueError(
            f"{name} contains negative values (first in row "
            f"{int(np.flatnonzero(negative)[0])}), so it is not a matrix of "
            f"probabilities. If these are logits or decision scores, {logits_fix}."
        )
    bad = int(np.argmax(off))  # (finite and non-negative: a row sum is off)
    raise ValueError(
        f"The rows of {name} must sum to 1 (within {tol:.1e}); row {bad} sums "
        f"to {row_sums[bad]:.6g}. If these are logits or scores, {logits_fix}; "
        f"if they are unnormalised weights, divide each row by its sum."
    )


def check_proba(
    proba,
    *,
    name="proba",
    min_classes=2,
    logits_fix=_LOGITS_FIX,
    lazy=False,
    precision=None,
):
    """Validate a matrix of class probabilities, one row per sample.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Probabilities, a NumPy array or array-like, or an array of another
        array API library (checked on its device); float32 stays float32,
        anything else becomes float64.
    name : str, default="proba"
        Name used in error messages.
    min_classes : int, default=2
        Smallest allowed number of columns.
    logits_fix : str, default="apply scipy.special.softmax(scores, axis=1)"
        What the error messages advise for logits given as probabilities.
    lazy : bool, default=False
        For a Dask array: check each block when it is computed (for a map,
        which then needs no pass of its own) instead of now (one
        ``dask.compute``). Other arrays are checked now. A Dask array whose
        chunk sizes are unknown (boolean filtering) costs one more pass, to
        learn them, either way (:func:`~skprior._utils._array_api.known_rows`).
    precision : dtype or "bfloat16", default=None
        The dtype whose rounding the row sums carry, for an array already
        converted from a coarser one (each block of a lazy check, or a
        caller's float16 made float64), which would else be held to the
        tolerance of its new dtype. None takes it from ``proba``.

    Returns
    -------
    proba : array of shape (n_samples, n_classes)
        The validated array, in the namespace and on the device of the input
        (the caller's array itself when no conversion was needed: callers
        must not write into it).

    Raises
    ------
    ValueError
        If the array is not 2-D, has too few columns, holds NaN, infinite or
        negative values, or rows that do not sum to one.
    """
    xp, is_numpy = get_namespace(proba)
    if is_numpy:
        arr = _as_proba_array(proba, name, min_classes)
    else:
        _check_proba_shape(proba.shape, name, min_classes)
        arr = as_float(xp, proba, name)
        if is_dask(xp):  # (unknown sizes computed: NaN rows otherwise)
            arr = known_rows(arr, merge=not lazy)
            _check_proba_shape(arr.shape, name, min_classes)
    if precision is None:  # (taken now: float16 input became float64 above)
        precision = _precision_dtype(proba, arr)
    if lazy and is_dask(xp):
        return checked_lazily(
            arr, check_proba, name, precision=precision, logits_fix=logits_fix
        )
    row_sums = row_sums_of(arr) if is_numpy else xp.sum(arr, axis=1)
    # NaN and inf make the row sum non-finite: the reductions find them too.
    finite, smallest, off = to_host(
        xp, xp.all(xp.isfinite(row_sums)), xp.min(arr), xp.max(xp.abs(row_sums - 1))
    )
    if not (
        finite and smallest >= 0 and off <= _row_sum_tolerance(precision, arr.shape[1])
    ):
        negative = xp.any(arr < 0, axis=1)
        _check_rows(
            *to_host(xp, row_sums, negative), arr.shape[1], name, precision, logits_fix
        )
    return arr


def check_proba_with_row_max(proba, *, name="proba"):
    """:func:`check_proba` of a NumPy array that also returns row maxima and sums.

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
    _check_rows(
        row_sums, None, arr.shape[1], name, _precision_dtype(proba, arr), _LOGITS_FIX
    )
    return arr, row_max.view(arr.dtype), row_sums


def _prior_in_class_order(prior, n_classes, classes, name):
    """A prior keyed by class (dict, pandas Series) as values in ``classes`` order.

    Anything else is returned as it is, to be read in order. Keys are matched
    by label, the same for a dict and a Series: a Series with the default
    index 0, 1, ... is read in order (it was built from a list) only where
    those cannot be the classes (``classes`` ``[2, 1, 0]`` read it by label).
    """
    where = "classes_" if classes is not None else "the columns"
    keys = list(range(n_classes)) if classes is None else list(classes)
    if isinstance(prior, Mapping):
        labels, values = list(prior.keys()), list(prior.values())
    elif hasattr(prior, "index") and hasattr(prior, "to_numpy"):
        labels, values = list(prior.index), prior.to_numpy()
        if labels == list(range(len(labels))) and set(labels) != set(keys):
            return values
    else:
        return prior
    position = {label: i for i, label in enumerate(labels)}
    if len(labels) != len(keys) or any(key not in position for key in keys):
        raise ValueError(
            f"{name} is keyed by {labels[:20]}, which are not {where} "
            f"({np.asarray(keys).tolist()[:20]}). Key it by exactly those labels, "
            f"or pass an array with one entry per class in the order of {where}."
        )
    return [values[position[key]] for key in keys]


def check_prior(prior, n_classes, *, name="prior", classes=None):
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
    total = arr.sum()
    if not ((arr >= 0).all() and np.isfinite(total)):  # (NaN fails both)
        raise ValueError(
            f"{name} must be finite and non-negative, got {arr}. Pass class "
            f"frequencies (counts divided by their total)."
        )
    if abs(total - 1) > 1e-6:
        raise ValueError(
            f"{name} must sum to 1, got {total:.6g}. Pass class frequencies "
            f"divided by their total."
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


_SMALLEST_TRAIN_PRIOR = 1e-300


def check_train_prior(
    prior, n_classes, *, name="train_prior", classes=None, from_labels=False
):
    """:func:`check_prior` for a training prior, which must be positive.

    Every method divides by the training prior (``p(c|x) / q_c``), so a class
    with ``q_c = 0`` is refused with the fix: the prior the model was trained
    with, where every class it predicts had examples. ``from_labels``: the
    prior is the class frequencies of a wrapper's ``fit`` labels, and a 0 is
    a class they lack, which the message says.
    """
    prior = check_prior(prior, n_classes, name=name, classes=classes)
    # (below 1e-300, p / q_c and its sums over the classes overflow)
    tiny = prior < _SMALLEST_TRAIN_PRIOR
    if tiny.any():
        zero = (
            np.flatnonzero(tiny).tolist()
            if classes is None
            else np.asarray(classes)[tiny].tolist()
        )
        where = "classes" if classes is not None else "classes at positions"
        if len(zero) > 10:  # (thousands of classes: a readable message)
            zero = f"{zero[:10]} and {len(zero) - 10} more"
        if from_labels:
            raise ValueError(
                f"y has no rows of the {where} {zero} (or only rows of weight "
                f"0), and the training prior that fit learns from y's class "
                f"frequencies is 0 there; the methods divide the posteriors by "
                f"it (p(c|x) / q_c). Fit on data holding every class the model "
                f"predicts, or pass train_prior= (the prior the model was "
                f"trained with)."
            )
        raise ValueError(
            f"{name} is {prior[tiny][0]:.3g} for the {where} {zero}: the methods "
            f"divide the posteriors by it (p(c|x) / q_c), so it must be positive "
            f"(at least {_SMALLEST_TRAIN_PRIOR:g}). Pass the prior the model was "
            f"trained with (every class it predicts had training examples), for "
            f"example as train_prior= of the wrappers."
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


def check_logits(
    logits, name="logits", as_float64=True, *, warn_probabilities=False, lazy=False
):
    """Validate logits; a 1-D binary score ``s`` becomes the rows ``(0, s)``.

    ``-inf`` is allowed (the log of an exact zero probability); NaN, ``+inf``
    and rows with no finite entry are not. Logits of another array API
    library are checked on their device and stay there.

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes) or (n_samples,)
        The logits, of any namespace.
    name : str, default="logits"
        Name used in error messages.
    as_float64 : bool, default=True
        Return a float64 copy (the working float dtype on a device without
        float64); ``False`` returns the validated float32 or float64 array
        without a copy, for a caller that converts it block by block and never
        writes to it.
    warn_probabilities : bool, default=False
        Warn when the logits look like probabilities
        (:func:`warn_if_probabilities`), computed in the same pass.
    lazy : bool, default=False
        For a Dask array: check each block when it is computed, instead of
        now (see :func:`check_proba`, also for unknown chunk sizes).

    Returns
    -------
    logits : array of shape (n_samples, n_classes)
        The validated logits, in the namespace of the input.
    dtype : dtype
        The float dtype of the input (after conversion of non-float numbers).
    """
    xp, is_numpy = get_namespace(logits)
    if is_numpy:
        arr = as_numeric(logits, name, "(n_samples, n_classes)")
    else:
        arr = as_float(xp, logits, name)
    if arr.ndim not in (1, 2):
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_classes) (or 1-D for the "
            f"score of the positive class of a binary problem), got an array of "
            f"shape {tuple(arr.shape)}."
        )
    one_d = arr.ndim == 1
    if one_d:
        arr = xp.stack([xp.zeros_like(arr), arr], axis=1)
    if is_dask(xp):  # (unknown sizes computed: NaN rows otherwise)
        arr = known_rows(arr, merge=not lazy)
    if arr.shape[0] == 0:
        shape = (0,) if one_d else tuple(arr.shape)
        raise ValueError(
            f"{name} is empty (shape {shape}): pass at least one row of logits."
        )
    dtype = arr.dtype
    if arr.shape[1] < 2:
        raise ValueError(
            f"{name} must have at least 2 columns (one per class), got "
            f"{arr.shape[1]}. For a binary problem pass the 1-D score of the "
            f"positive class."
        )
    if lazy and is_dask(xp):
        arr = checked_lazily(arr, check_logits, name, as_float64=False)
    else:
        _check_logit_values(xp, is_numpy, arr, name, warn_probabilities)
    if as_float64:
        arr = xp.astype(arr, xp.float64 if is_numpy else work_dtype(xp, device_of(arr)))
    return arr, dtype


# Finite logits beyond this are refused: divided by a temperature below 1, or
# summed in a matrix product, they overflow (no model's logits come near).
_LARGEST_LOGIT = 1e100


def _check_logit_values(xp, is_numpy, z, name, warn_probabilities):
    """Refuse NaN, ``+inf`` and all ``-inf`` rows: one pass, one transfer."""
    top = xp.max(z, axis=1)
    # (float32 cannot hold 1e100, and its logits, however large, are fitted
    # in float64 on the host)
    limit = _LARGEST_LOGIT if z.dtype == xp.float64 else xp.inf
    checks = [xp.all(z < limit), xp.any(top == -xp.inf), xp.min(z)]
    # (NumPy's test stops at the first rule that fails; on a device every
    # reduction is taken in the one pass)
    probe = warn_probabilities and not is_numpy
    if probe:
        checks += [xp.max(z), xp.max(xp.abs(xp.sum(z, axis=1) - 1))]
    values = to_host(xp, *checks)
    if not values[0]:
        (bad,) = to_host(xp, xp.any(~(z < xp.inf), axis=1))
        if bad.any():
            raise ValueError(
                f"{name} contains NaN or +inf (first in row "
                f"{int(np.flatnonzero(bad)[0])}). Logits must be finite or -inf "
                f"(the log of a zero probability)."
            )
    if limit < np.inf and (not values[0] or values[2] <= -limit):
        (bad,) = to_host(xp, xp.any((xp.abs(z) >= limit) & (z != -xp.inf), axis=1))
        if bad.any():
            raise ValueError(
                f"{name} has entries beyond +-{_LARGEST_LOGIT:g} (first in row "
                f"{int(np.flatnonzero(bad)[0])}): scaled or combined, logits "
                f"that large overflow (and the softmax of such a row is one-hot). "
                f"Divide them by a constant, or pass the model's log-probabilities."
            )
    if values[1]:
        (bad,) = to_host(xp, top == -xp.inf)
        raise ValueError(
            f"Row {int(np.flatnonzero(bad)[0])} of {name} is -inf in every column, "
            f"so it is not the log of a probability vector. Check the model's "
            f"outputs."
        )
    if probe and values[2] >= 0 and values[3] <= 1 and values[4] <= _SUMS_TO_ONE:
        warn_user(_PROBABILITIES_AS_LOGITS)
    elif warn_probabilities and is_numpy:
        warn_if_probabilities(z)


# Row sums of probabilities are within this of 1 (float16's off by a few 1e-4).
_SUMS_TO_ONE = 1e-3
_PROBABILITIES_AS_LOGITS = (
    "The logits look like probabilities (every entry in [0, 1], every row summing "
    "to 1). Temperature scaling divides logits: pass np.log(proba) for a model "
    "that gives probabilities."
)


def warn_if_probabilities(z):
    """Warn when the NumPy "logits" ``z`` are rows of probabilities (a mix-up).

    Probabilities in place of logits give a wrong temperature without any
    error: every entry in [0, 1] and every row summing to one is no accident
    for logits. (Each test runs only when the one before it passed; the two
    columns at least are :func:`check_logits`'s.)
    """
    if z.min() >= 0 and z.max() <= 1 and np.abs(z.sum(1) - 1).max() <= _SUMS_TO_ONE:
        warn_user(_PROBABILITIES_AS_LOGITS)


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


def check_class_count(n_classes, limit, method, cost, alternative):
    """Refuse a method whose cost at ``n_classes`` classes is out of reach.

    ``cost`` says what grows (and how long it took where measured), and
    ``alternative`` what to use instead; the limits are documented with the
    methods.
    """
    if n_classes > limit:
        raise ValueError(
            f"{method} takes at most {limit:,} classes, got {n_classes:,}: {cost}. "
            f"{alternative}"
        )
