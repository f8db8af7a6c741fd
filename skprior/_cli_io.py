"""Reading and writing stored model outputs for the ``skprior`` command line.

Formats, chosen by the file's extension:

``.npy``
    One array.
``.npz``
    Several named arrays; ``key`` picks one. Without a key: the only array, or
    else the first of the default names present (``predictions``, ``proba``,
    ``logits`` for outputs; ``labels``, ``ground_truth``, ``y`` for labels).
    The key applies to .npz files only (the other formats hold one array), so
    that .npz and .npy files can be mixed in one command.
``.csv`` / ``.txt``
    Comma-separated numbers, one sample per line, no index column. A first
    line that is not all numbers is a header and is skipped; every other line
    must be numbers only.

Every problem with a file raises :class:`InputError`, whose message the command
line prints without a traceback (exit code 2).
"""

import csv
import zipfile
from pathlib import Path

import numpy as np
from scipy.special import softmax

from skprior._validation import check_proba

OUTPUT_KEYS = ("predictions", "proba", "logits")
LABEL_KEYS = ("labels", "ground_truth", "y")
TEXT_SUFFIXES = (".csv", ".txt")
SUFFIXES = (".npy", ".npz", *TEXT_SUFFIXES)


class InputError(Exception):
    """A problem with the user's input: reported in one line, exit code 2."""


def _suffix(path):
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(
            f"{path}: unknown file type {suffix or '(none)'!r}; use one of "
            f"{', '.join(SUFFIXES)}."
        )
    return suffix


def _read_npz(path, key, default_keys):
    with np.load(path, allow_pickle=False) as stored:
        names = list(stored.keys())
        if key is None:
            if len(names) == 1:
                key = names[0]
            else:
                key = next((name for name in default_keys if name in names), None)
                if key is None:
                    raise InputError(
                        f"{path} holds the arrays {names}; choose one with the "
                        f"key option (defaults tried: {', '.join(default_keys)})."
                    )
        elif key not in names:
            raise InputError(f"{path} has no array {key!r}; it holds {names}.")
        return stored[key]


def _read_text(path):
    with open(path, newline="") as handle:
        rows = [
            row for row in csv.reader(handle) if row and any(c.strip() for c in row)
        ]
    if rows and not _is_numeric(rows[0]):
        rows = rows[1:]  # a header line
    for number, row in enumerate(rows, start=1):
        if not _is_numeric(row):
            raise InputError(
                f"{path}: data line {number} is not all numbers: {row[:5]}"
            )
    if not rows:
        raise InputError(f"{path} holds no data lines.")
    widths = {len(row) for row in rows}
    if len(widths) > 1:
        raise InputError(
            f"{path}: lines have different numbers of columns {sorted(widths)}."
        )
    array = np.array(rows, dtype=np.float64)
    n_rows = array.shape[0]
    if n_rows >= 3 and array.shape[1] >= 2:
        for start in (0, 1):
            if np.array_equal(array[:, 0], np.arange(start, start + n_rows)):
                raise InputError(
                    f"{path}: the first column is {start}, {start + 1}, ..., "
                    f"{start + n_rows - 1}, a row index, not data. pandas writes "
                    f"one unless told not to: to_csv(path, index=False, "
                    f"header=False)."
                )
    return array[:, 0] if array.shape[1] == 1 else array


def _is_numeric(row):
    try:
        [float(cell) for cell in row]
    except ValueError:
        return False
    return True


def read_array(path, key=None, default_keys=OUTPUT_KEYS):
    """Read one array from ``path`` (.npy, .npz or .csv/.txt)."""
    suffix = _suffix(path)
    if not Path(path).is_file():
        raise InputError(f"{path}: no such file.")
    try:
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if suffix == ".npz":
            return _read_npz(path, key, default_keys)  # (key: .npz files only)
        return _read_text(path)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path}: cannot be read as a {suffix} file ({exc}).") from exc


def read_logits(path, key=None, logits=False):
    """Model outputs as float64 logits (n_samples, n_classes).

    Logits are returned as they are (finite values only); probabilities are
    validated and their logarithm returned (``-inf`` for exact zeros), whose
    softmax gives the probabilities back.
    """
    if not logits:
        proba = read_outputs(path, key)
        with np.errstate(divide="ignore"):
            return np.log(proba.astype(np.float64))
    array = _numeric_matrix(path, read_array(path, key))
    if not np.all(np.isfinite(array)):
        raise InputError(f"{path}: the logits contain NaN or infinite values.")
    return array.astype(np.float64)


def _numeric_matrix(path, array):
    if array.ndim != 2 or array.shape[1] < 2:
        raise InputError(
            f"{path}: expected a 2-D array of shape (n_samples, n_classes) with at "
            f"least 2 classes, got shape {array.shape}."
        )
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(
        array.dtype, np.complexfloating
    ):
        raise InputError(f"{path}: expected numbers, got dtype {array.dtype}.")
    return array


def read_outputs(path, key=None, logits=False):
    """Model outputs as probabilities (n_samples, n_classes), float64 or float32.

    With ``logits=True`` the array is passed through a softmax over each row.
    """
    array = _numeric_matrix(path, read_array(path, key))
    if logits:
        if not np.all(np.isfinite(array)):
            raise InputError(f"{path}: the logits contain NaN or infinite values.")
        array = softmax(array.astype(np.float64), axis=1)
    try:
        proba = check_proba(array, name=str(path), logits_fix="pass --logits")
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    if array.dtype == np.float16:
        # Checked at float16 precision, its rows sum to 1 within ~1e-3 only:
        # renormalised, so that the commands' float64 steps accept them.
        proba = proba / proba.sum(axis=1, keepdims=True)
    return proba


def read_labels(path, n_samples, n_classes, key=None):
    """Integer labels in ``0..n_classes-1``, one per row of the outputs.

    ``n_samples=None`` accepts any number of labels (training labels).
    """
    labels = read_array(path, key, default_keys=LABEL_KEYS)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise InputError(f"{path}: labels must be 1-D, got shape {labels.shape}.")
    if n_samples is not None and labels.shape[0] != n_samples:
        raise InputError(
            f"{path} has {labels.shape[0]} labels but the outputs have {n_samples} "
            f"rows; the label file must match the outputs row for row."
        )
    if not np.issubdtype(labels.dtype, np.number) or np.any(labels != np.round(labels)):
        raise InputError(
            f"{path}: labels must be integer class indices (column numbers)."
        )
    labels = labels.astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        raise InputError(
            f"{path}: labels must lie in 0..{n_classes - 1} (one per column of the "
            f"outputs), got values from {labels.min()} to {labels.max()}."
        )
    return labels


def parse_prior(text, n_classes):
    """A class prior from a comma list (``"0.2,0.8"``) or a file of one vector.

    Non-negative numbers that do not sum to one are treated as counts and
    divided by their total.
    """
    if Path(text).suffix.lower() in SUFFIXES:
        values = read_array(text)
        if values.ndim == 2 and 1 in values.shape:
            values = np.ravel(values)  # one row or one column
        if values.ndim != 1 or not np.issubdtype(values.dtype, np.number):
            raise InputError(
                f"{text}: a prior file must hold one vector of numbers, got an "
                f"array of shape {values.shape} and dtype {values.dtype}."
            )
        values = values.astype(np.float64)
    else:
        try:
            values = np.array([float(v) for v in text.split(",")], dtype=np.float64)
        except ValueError as exc:
            raise InputError(
                f"prior {text!r} is neither a file (.npy, .npz, .csv, .txt) nor a "
                f"comma-separated list of numbers."
            ) from exc
    if values.shape[0] != n_classes:
        raise InputError(
            f"the prior has {values.shape[0]} entries but the outputs have "
            f"{n_classes} classes."
        )
    if not np.all(np.isfinite(values)) or np.any(values < 0) or values.sum() <= 0:
        raise InputError(
            f"the prior must be non-negative numbers with a positive sum, got {values}."
        )
    return values / values.sum()


def check_output_path(path):
    """Refuse an output path with an unknown extension or a missing folder.

    Returns the extension; called before any computation, so that a typo in
    ``--output`` costs nothing.
    """
    suffix = _suffix(path)
    folder = Path(path).resolve().parent
    if not folder.is_dir():
        raise InputError(f"{path}: the folder {folder} does not exist.")
    return suffix


def write_array(path, proba, extra=None):
    """Write ``proba`` to ``path``; the format follows the extension.

    ``.npz`` files hold ``proba`` under the key ``proba`` and the arrays of
    ``extra`` (a dict) under their names; .npy and .csv hold ``proba`` only.
    """
    suffix = check_output_path(path)
    try:
        # (through a file object: given a name, numpy would append ".npy" or
        # ".npz" to an upper-case extension)
        if suffix == ".npy":
            with open(path, "wb") as handle:
                np.save(handle, proba)
        elif suffix == ".npz":
            with open(path, "wb") as handle:
                np.savez(handle, proba=proba, **(extra or {}))
        else:
            # Enough digits to read the same floats back.
            digits = 9 if proba.dtype == np.float32 else 17
            np.savetxt(path, proba, delimiter=",", fmt=f"%.{digits}g")
    except OSError as exc:
        raise InputError(f"{path}: cannot be written ({exc}).") from exc
