"""The input checks of labels, sample weights and scored ``(y_true, y_proba)`` pairs.

Part of skprior's one validation system (with :mod:`skprior._utils._validation`,
which checks probabilities, logits and priors): each turns bad input into an
error that says what is wrong and how to fix it, and none modifies the caller's
array. Labels and weights go with an array of data (``like``) and come back in
its namespace, on its device: checked there when they are arrays of the same
library (a failed check is repeated on the host for its message), else checked
on the host and moved there (an ``n``-vector, not the ``n x K`` data).
"""

import numpy as np
from scipy import sparse

from skprior._utils._array_api import (
    device_of,
    get_namespace,
    is_dask,
    known_rows,
    namespace_of,
    per_row,
    to_host,
    work_dtype,
)
from skprior._utils._validation import _precision_dtype, check_proba, warn_user
from skprior._utils._validation_arrays import (
    _first,
    as_float,
    as_labels,
    as_numeric,
    check_length,
)


def _describe_labels(y):
    if y.dtype.kind == "f":
        bad = y[y != np.round(y)]
        return f"non-integer values such as {bad[0]:g}"
    return f"dtype {y.dtype} (such as {_first(y)!r})"


def check_class_indices(y, n_samples, n_classes, *, name="logits", like=None):
    """Validate encoded labels: integers in ``[0, n_classes)``.

    Returns an integer array: NumPy's ``intp`` without ``like`` or with a
    NumPy ``like``, else int64 in the namespace of ``like`` (chunked as its
    rows for Dask).
    """
    xp = None if like is None else namespace_of(like)
    # (the shape is checked before the labels are put in rows of ``like``: a
    # Dask rechunk to rows of another length would fail with its own message)
    if xp is not None and _same_library(y, like, "y", name) is not None:
        if y.ndim == 1 and y.shape[0] == n_samples:
            y = per_row(xp, y, like)
            integral = xp.isdtype(y.dtype, "integral")
            if integral or xp.isdtype(y.dtype, "real floating"):
                checks = [xp.min(y), xp.max(y)]
                if not integral:  # (NaN fails this one; inf the range)
                    checks.append(xp.all(y == xp.round(y)))
                low, high, *whole = to_host(xp, *checks)
                if low >= 0 and high < n_classes and all(whole):
                    return xp.astype(y, xp.int64)
        y = to_host(namespace_of(y), y)[0]  # (NumPy's checks, for their message)
    if xp is not None:
        y = check_class_indices(y, n_samples, n_classes, name=name)
        return xp.astype(per_row(xp, y, like), xp.int64)
    y = as_labels(y, "y")
    check_length(y, n_samples, "y", name, what="label")
    if y.dtype.kind not in "biu" and not (
        y.dtype.kind == "f" and np.all(y == np.round(y))
    ):
        raise ValueError(
            f"y must hold class indices 0..{n_classes - 1} (the column of the true "
            f"class in {name}), got {_describe_labels(y)}. Encode string labels "
            f"first, e.g. with sklearn.preprocessing.LabelEncoder."
        )
    y = y.astype(np.intp)
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise ValueError(
            f"y holds class indices outside 0..{n_classes - 1} (min {y.min()}, "
            f"max {y.max()}); {name} has {n_classes} columns."
        )
    return y


def encode_labels(
    y,
    classes,
    *,
    name="y",
    owner="the classifier was not fitted on",
    positions=False,
):
    """Map labels ``y`` to their positions in ``classes``.

    Raises a ``ValueError`` naming the labels that ``classes`` does not hold.
    With ``positions=True``, labels that are every column position
    ``0..n_classes-1``, some of them not a class, are read as positions: this
    is how scikit-learn's ``cross_val_predict`` passes ``y`` for
    ``method="predict_proba"``, and ``VotingClassifier``, ``BaggingClassifier``
    and ``StackingClassifier`` to their estimators (label-encoded, in the
    sorted order of the classes), and how ``CalibratedClassifierCV`` reads it
    around a frozen model; it warns, since the same ``y`` may be another
    model's labels (``0..2`` for classes ``[5, 6, 7]``). Codes that are not
    every position are refused: ``[0, 1]`` for classes ``[1, 2, 3]`` (a label
    0 by mistake, or codes without a class), and ``[0, 1]`` for classes
    ``['a', 'b', 'c']`` (from an encoder fitted without ``'b'``, 1 is ``'c'``).
    """
    position = {label: i for i, label in enumerate(np.asarray(classes).tolist())}
    uniques, inverse = np.unique(np.asarray(y), return_inverse=True)
    unknown = [label for label in uniques.tolist() if label not in position]
    if unknown and positions and _are_positions(uniques, position):
        # (never silently: the same y may be labels of another model)
        classes = np.asarray(classes).tolist()
        read = ", ".join(f"{i} as {classes[i]!r}" for i in uniques.tolist()[:5])
        warn_user(
            f"{name} holds integers {uniques.tolist()[:10]} and {unknown[:10]} "
            f"{'is' if len(unknown) == 1 else 'are'} not a class of the model "
            f"({classes[:20]}): they are read as column positions ({read}), as "
            f"cross_val_predict(method='predict_proba') and VotingClassifier pass "
            f"them. If they are labels, pass the model's own labels."
        )
        return uniques.astype(np.intp)[inverse.reshape(-1)]
    if unknown:
        hint = ""
        if positions and _are_positions(uniques, position, every=False):
            hint = (
                f" {name} looks label-encoded (integer codes below "
                f"{len(classes)}), but without every code 0..{len(classes) - 1}, "
                f"which cannot be read safely: an encoder fitted on labels that "
                f"lack a class (VotingClassifier's, StackingClassifier's) numbers "
                f"the classes after it one lower. Pass the labels themselves, or "
                f"wrap an unfitted model."
            )
        elif positions and _looks_encoded(uniques, classes):
            hint = (
                f" {name} looks label-encoded (0..{len(classes) - 1}), as "
                f"cross_val_predict(method='predict_proba') and StackingClassifier "
                f"pass it around a fitted model, but without every position, and "
                f"with integer classes that overlap those positions it cannot be "
                f"read either way. Fit the model on labels 0..{len(classes) - 1} "
                f"or on strings, or wrap an unfitted model."
            )
        raise ValueError(
            f"{name} contains labels {unknown[:10]} that {owner}; the classes are "
            f"{np.asarray(classes).tolist()[:20]}. Pass only labels the model "
            f"knows, or refit the model on data that has them.{hint}"
        )
    codes = np.array([position[label] for label in uniques.tolist()], dtype=np.intp)
    return codes[inverse.reshape(-1)]


def _looks_encoded(uniques, classes):
    """Whether ``uniques`` are positions ``0..K-1`` of integer classes (not those)."""
    classes = np.asarray(classes)
    return (
        classes.dtype.kind in "iu"
        and uniques.dtype.kind in "iu"
        and bool(np.all((uniques >= 0) & (uniques < len(classes))))
        and not np.array_equal(classes, np.arange(len(classes)))
    )


def _are_positions(uniques, position, every=True):
    """Whether the sorted labels ``uniques`` (some not a class) are positions.

    They are when they are every position ``0..K-1``: label-encoded ``y``,
    as scikit-learn's ensembles and ``cross_val_predict`` pass it, whether
    the model's classes are strings or integers that overlap the positions
    (``[1, 2, 3]`` or ``[0, 2, 5]``; labels missing a class and holding a
    non-class in its stead are a rarer mistake, and warned of). Codes that
    miss a position are ambiguous -- an encoder fitted on labels without
    class ``k`` numbers the classes after ``k`` one lower -- and are not
    read (``every=False``: whether ``uniques`` are such codes, none a class).
    """
    if uniques.dtype.kind not in "iu" or not uniques.size:
        return False
    values = uniques.tolist()
    if values[0] < 0 or values[-1] >= len(position):
        return False
    if every:
        return values == list(range(len(position)))
    return not any(value in position for value in values)


def label_frequencies(y_index, n_classes, sample_weight=None):
    """Weighted frequencies of the encoded labels ``y_index`` (sum to one)."""
    counts = np.bincount(y_index, weights=sample_weight, minlength=n_classes)
    total = counts.sum()
    if total <= 0:
        raise ValueError("sample_weight sums to zero: no class prior can be counted.")
    return counts / total


def _same_library(values, like, name, like_name):
    """The namespace of ``values`` (None for host values).

    Refused when it is another library's than ``like``'s (a torch tensor of
    logits with Dask labels: each library's operations fail on the other's
    arrays).
    """
    xp = namespace_of(values)
    if xp is not None and xp is not namespace_of(like):
        raise TypeError(
            f"{name} is an array of {type(values).__module__.partition('.')[0]} "
            f"and {like_name} one of {type(like).__module__.partition('.')[0]}: pass "
            f"{name} as an array of the same library as {like_name}, or as a "
            f"NumPy array."
        )
    return xp


def check_sample_weight(
    sample_weight, n_samples, *, name="sample_weight", like=None, scale_free=True
):
    """Validate weights: one finite, non-negative float per sample, sum > 0.

    ``None`` means all ones. Without ``like`` (or with a NumPy ``like``) a new
    float64 ndarray: a fitted attribute built from it never aliases the
    caller's array. With an array ``like`` of another library, weights in its
    namespace, on its device, in the working float dtype (float64 where the
    device has it).
    """
    xp = None if like is None else namespace_of(like)
    if xp is not None:
        dtype = work_dtype(xp, device_of(like))
        if sample_weight is None:  # (for Dask, chunked as the rows of like)
            rows = {"chunks": (like.chunks[0],)} if is_dask(xp) else {}
            return xp.ones(n_samples, dtype=dtype, device=device_of(like), **rows)
        if _same_library(sample_weight, like, name, "the data") is None:
            # (host weights: checked here)
            weights = check_sample_weight(
                sample_weight, n_samples, name=name, scale_free=scale_free
            )
            return per_row(xp, weights, like, dtype=dtype)
        weights = as_float(xp, sample_weight, name)
        if is_dask(xp) and weights.ndim == 1:
            # (filtered weights, w[mask]: their number of rows is NaN until
            # their chunk sizes are computed, as the data's are)
            weights = known_rows(weights)
        if weights.ndim == 1 and weights.shape[0] == n_samples:  # (as the labels)
            weights = per_row(xp, weights, like, dtype=dtype)
            finite, smallest, largest = to_host(
                xp, xp.all(xp.isfinite(weights)), xp.min(weights), xp.max(weights)
            )
            if finite and smallest >= 0 and largest > 0:
                return _near_one(weights, float(largest), name, scale_free)
        sample_weight = to_host(xp, weights)[0]  # (NumPy's checks: the message)
    if sample_weight is None:
        return np.ones(n_samples)
    weights = as_numeric(sample_weight, name, "(n_samples,)")
    if weights.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D with one weight per sample ({n_samples}), got an "
            f"array of shape {weights.shape}."
        )
    if weights.shape[0] != n_samples:
        raise ValueError(
            f"{name} has {weights.shape[0]} entries but there are {n_samples} "
            f"samples; give one weight per sample."
        )
    if not np.all(np.isfinite(weights)):
        bad = int(np.flatnonzero(~np.isfinite(weights))[0])
        raise ValueError(
            f"{name} contains NaN or infinite values (first at position {bad}); "
            f"weights must be finite."
        )
    if np.any(weights < 0):
        bad = int(np.flatnonzero(weights < 0)[0])
        raise ValueError(
            f"{name} contains negative values (first at position {bad}: "
            f"{weights[bad]:g}); weights must be non-negative. Give a sample "
            f"that should not count weight 0."
        )
    largest = float(weights.max())
    if largest <= 0:
        raise ValueError(
            f"{name} sums to zero: every sample has weight 0. Give at least one "
            f"sample a positive weight."
        )
    weights = np.array(weights, dtype=np.float64, copy=True)
    return _near_one(weights, largest, name, scale_free)


def _near_one(weights, largest, name, scale_free):
    """``weights`` (of maximum ``largest``) scaled near 1 if they are far from it.

    Weights are scale-free in most uses (they divide by their total; not
    where ``scale_free`` is False: refused there), but their sums and squares
    overflow from about 1e154 up and lose every digit near 1e-320
    (subnormal): weights that far from 1 are scaled by a power of two, which
    is exact (in two steps: 2**1074 itself is not a float), and the others
    returned as they are.
    """
    if 2.0**-256 <= largest <= 2.0**256:
        return weights
    if not scale_free:  # (CAN: a reference row of weight w against the row's 1)
        raise ValueError(
            f"{name}'s largest weight is {largest:g}, outside [2**-256, 2**256] "
            f"(about 1e-77 to 1e77): here the weights' scale matters (each counts "
            f"against a weight of 1), and sums that far from 1 overflow or lose "
            f"their digits. Rescale them into that range."
        )
    half = 2.0 ** (-int(np.frexp(largest)[1]) / 2)
    return weights * half * half


def _check_column_names(y_proba, labels):
    """Refuse a DataFrame whose columns name the labels in another order.

    Columns are read by position, as scikit-learn's metrics read them; columns
    that name the classes in a different order would be read wrong, silently.
    Columns named 0, 1, ..., k-1 (pandas' default) name positions, not
    classes, and are left alone.
    """
    columns = getattr(y_proba, "columns", None)
    if columns is None:
        return
    columns, labels = [str(c) for c in columns], [str(c) for c in labels.tolist()]
    if columns == [str(i) for i in range(len(columns))]:
        return
    if columns != labels and sorted(columns) == sorted(labels):
        raise ValueError(
            f"y_proba's columns name the classes {columns[:20]}, in another order "
            f"than labels {labels[:20]}; columns are read by position. Reorder "
            f"them first: y_proba[labels]."
        )


def check_scored_proba(y_true, y_proba, labels, sample_weight):
    """Validate the inputs of a calibration metric.

    Returns the column index of each label, the probabilities (a 1-D
    ``y_proba`` is P(positive class) and becomes two columns) and the weights,
    all in the namespace of ``y_proba``. The labels are encoded on the host,
    by the same rules in every namespace: they are an ``n``-vector, a
    ``K``-th of the data, and may be strings.
    """
    y_true = as_labels(y_true, "y_true")
    if sparse.issparse(y_proba):
        raise TypeError(
            "y_proba is a sparse matrix, which the calibration metrics do not "
            "support. Pass a dense array: y_proba.toarray()."
        )
    xp, is_numpy = get_namespace(y_proba)
    shape_text = "(n_samples, n_classes) or (n_samples,)"
    if not is_numpy:
        proba = as_float(xp, y_proba, "y_proba")
    elif type(y_proba) is np.ndarray:
        proba = y_proba
    else:
        proba = as_numeric(y_proba, "y_proba", shape_text)
    binary_score = proba.ndim == 1
    if binary_score:
        if proba.shape[0] != len(y_true):
            raise ValueError(
                f"y_proba is 1-D (P(positive class) per sample) with "
                f"{proba.shape[0]} entries but y_true has {len(y_true)} labels; "
                f"give one probability per label, or a 2-D y_proba of shape "
                f"(n_samples, n_classes)."
            )
        if proba.shape[0] == 0:
            raise ValueError(
                "y_proba is empty: pass at least one sample's probabilities."
            )
        if is_numpy:
            proba = as_numeric(proba, "y_proba", "(n_samples,)")
        finite, low, high = to_host(
            xp, xp.all(xp.isfinite(proba)), xp.min(proba), xp.max(proba)
        )
        if not finite or low < 0 or high > 1:
            raise ValueError(
                "A 1-D y_proba is read as P(positive class) and must lie in "
                "[0, 1]. For scores or logits, apply a sigmoid first."
            )
        # (a float score keeps its dtype: float32 in, float32 out)
        floating = xp.isdtype(proba.dtype, "real floating")
        positive = proba if floating else xp.astype(proba, xp.float64)
        proba = xp.stack([1 - positive, positive], axis=1)
    # (the tolerance of y_proba's own dtype: float16 became float64 above)
    proba = check_proba(
        proba, name="y_proba", precision=_precision_dtype(y_proba, proba)
    )
    if len(y_true) != proba.shape[0]:
        raise ValueError(
            f"y_true has {len(y_true)} labels but y_proba has {proba.shape[0]} "
            f"rows; give one label per row."
        )
    n_classes = proba.shape[1]

    if labels is None:
        labels = np.unique(y_true)
        if len(labels) != n_classes:
            raise ValueError(
                f"y_true has {len(labels)} distinct labels but y_proba has "
                f"{n_classes} columns, so the column of each label is unknown. "
                f"Pass labels= the classes in the column order of y_proba (for "
                f"a scikit-learn model, model.classes_)."
            )
    else:
        labels = as_labels(labels, "labels", "(n_classes,)")
        if len(np.unique(labels)) != len(labels):
            raise ValueError(
                f"labels must not repeat a class, got {labels.tolist()}: give "
                f"each class once, in the column order of y_proba."
            )
        if len(labels) != n_classes:
            raise ValueError(
                f"labels has {len(labels)} entries but y_proba has {n_classes} "
                f"columns; give one label per column"
                + (" (two for a 1-D y_proba)." if binary_score else ".")
            )
    _check_column_names(y_proba, labels)
    y_index = encode_labels(y_true, labels, name="y_true", owner="are not in labels")
    weights = check_sample_weight(sample_weight, len(y_index), like=proba)
    if not is_numpy:
        y_index = xp.astype(per_row(xp, y_index, proba), xp.int64)
    return y_index, proba, weights
