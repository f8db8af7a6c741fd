"""Conversions shared by the input checkers, and warnings that point at the caller.

:mod:`skprior._utils._validation` and :mod:`skprior._utils._validation_labels`
build their checkers on these: reading an array-like as numbers or labels with
messages that name the argument, the float dtype of another library's array,
and the lazy check of each block of a Dask array.
"""

import contextlib
import os
import re
import sys
import warnings

import numpy as np
from scipy import sparse
from sklearn.exceptions import DataConversionWarning

from skprior._utils._array_api import namespace_of, to_host

# -- warnings that point at the caller -----------------------------------------------

# (the package, not this folder: every skprior frame is skipped)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Frames of these scikit-learn wrappers sit between skprior and its caller.
_WRAPPER_FILES = ("_param_validation.py", os.path.join("sklearn", "base.py"))


def warn_user(message, category=UserWarning):
    """Warn with the caller's line: the first frame outside skprior.

    A fixed ``stacklevel`` points inside the package as soon as a call goes
    through another of its functions, an estimator or scikit-learn's
    parameter validation.
    """
    # (stacklevel=1 is this function, 2 its caller: sys._getframe(1); the
    # frames of contextlib's __exit__ are skipped too, which run a context
    # manager of the package, such as the one that names a label's warnings)
    frame, level = sys._getframe(1), 2
    while frame is not None and (
        frame.f_code.co_filename.startswith(_PACKAGE_DIR)
        or frame.f_code.co_filename.endswith(_WRAPPER_FILES)
        or frame.f_code.co_filename == contextlib.__file__
    ):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


# -- conversion to arrays ----------------------------------------------------------


def on_host(value):
    """``value``, or a NumPy copy of it when it is another library's array.

    For the small inputs that are read on the host (priors, labels): one
    transfer, and NumPy's conversion rules and messages from there on.
    """
    xp = namespace_of(value)
    if xp is None:
        return value
    refuse_meta(value, "An input")
    return to_host(xp, value)[0]


def refuse_meta(array, name):
    """Refuse a tensor on PyTorch's ``meta`` device: a shape without values."""
    if getattr(array, "is_meta", False):
        raise ValueError(
            f"{name} is on PyTorch's 'meta' device, which holds shapes but no "
            f"values: there is nothing to compute with. Create it on a real "
            f"device (or .to('cpu') one that has its values)."
        )


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
        arr = np.asarray(on_host(value))
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
        raise _complex_error(name)
    try:  # (every other real dtype converts; strings and objects may not)
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
        arr = np.asarray(on_host(value))
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
            f"array of shape {arr.shape}. For one-hot labels (one 1 per row) "
            f"pass {name}.argmax(axis=1); for multi-label indicators (any number "
            f"of 1s per row) run the function label by label with "
            f"skprior.per_label."
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


def _complex_error(name):
    return ValueError(
        f"{name} holds complex numbers; it must be real. If the imaginary parts "
        f"are 0, pass {name}.real."
    )


def as_float(xp, array, name):
    """An array of another library as float32 or float64, on its device.

    float32 and float64 stay as they are; other real numbers become float64,
    as :func:`as_numeric` converts them.
    """
    refuse_meta(array, name)
    if array.dtype in (xp.float32, xp.float64):
        return array
    if xp.isdtype(array.dtype, ("bool", "integral", "real floating")):
        return xp.astype(array, xp.float64)
    if xp.isdtype(array.dtype, "complex floating"):
        raise _complex_error(name)
    raise ValueError(
        f"{name} must hold numbers, got dtype {array.dtype}. Convert it to a "
        f"float array first."
    )


def checked_lazily(array, check, name, **options):
    """``array`` (Dask) with ``check(block, name=name, **options)`` in each block.

    A map stays lazy: each block is checked when it is computed (no pass of
    its own), and a bad block raises then, naming its first row.
    """
    array = array.rechunk({1: -1})
    return array.map_blocks(
        _checked_block, check, name, options, dtype=array.dtype, meta=array._meta
    )


def _checked_block(block, check, name, options, block_info=None):
    try:
        check(block, name=name, **options)
    except ValueError as exc:
        start = block_info[0]["array-location"][0][0] if block_info else 0
        # (the check counts the block's rows: its message gets the array's)
        # (and "Row 45 of logits is -inf in every column": both cases)
        message = re.sub(
            r"\b([Rr]ow) (\d+)",
            lambda m: f"{m.group(1)} {int(m.group(2)) + start}",
            str(exc),
        )
        raise ValueError(message) from exc
    return block


def check_out(out, proba):
    """``out`` checked as the destination of a result shaped as ``proba``.

    As NumPy's ``out=``: a writeable ndarray of ``proba``'s shape and dtype,
    which may be ``proba`` itself (returned then, so that ``out is proba``
    tells an in-place call) but not overlap it otherwise.
    """
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a NumPy array; got {type(out).__name__}.")
    if out.shape != proba.shape or out.dtype != proba.dtype:
        raise ValueError(
            f"out has shape {out.shape} and dtype {out.dtype}; the result has "
            f"shape {proba.shape} and dtype {proba.dtype}. Pass an array of "
            f"those (np.empty({proba.shape}, dtype=np.{proba.dtype})), or proba "
            f"itself to work in place where it has that dtype."
        )
    if not out.flags.writeable:
        raise ValueError("out is read-only; pass a writeable array.")
    same = out.__array_interface__ == proba.__array_interface__
    if same:
        return proba
    if np.shares_memory(out, proba):
        raise ValueError(
            "out overlaps proba without being the same array; pass proba "
            "itself to work in place, or an array of its own."
        )
    return out


def same_value(value, given):
    """Whether a parameter ``value`` is still the ``given`` one (or equal to it)."""
    if value is given:
        return True
    if (
        value is None
        or given is None
        or isinstance(value, str) != isinstance(given, str)
    ):
        return False
    try:
        if isinstance(value, dict) or isinstance(given, dict):
            return (
                isinstance(value, dict)
                and isinstance(given, dict)
                and (
                    value.keys() == given.keys()
                    and all(np.array_equal(value[key], given[key]) for key in value)
                )
            )
        return bool(np.array_equal(np.asarray(value), np.asarray(given)))
    except (TypeError, ValueError):  # (values of no common array form)
        return False
