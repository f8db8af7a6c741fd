"""The inputs and outputs of the ``skprior`` commands.

The readers return checked arrays: model outputs as probabilities or logits,
labels as class indices, priors as vectors summing to one. Each reads its
file through :func:`skprior._cli._formats.read_array`, and raises
:class:`~skprior._cli.InputError` with a message that names the option, the
file, the problem and the fix (the command prints it as one line, exit code
2).
"""

import os
from pathlib import Path

import numpy as np

from skprior._cli._common import InputError, check_output_folder
from skprior._cli._formats import (
    LABEL_KEYS,
    OUTPUT_KEYS,
    SUFFIXES,
    TEXT_SUFFIXES,
    checked_suffix,
    describe,
    no_note,
    read_array,
)


def numeric_matrix(array, where):
    """``array`` if it is a numeric (n_samples, n_classes) matrix, else why not."""
    if array.ndim != 2 or array.shape[1] < 2:
        fix = (
            " For a binary problem stored as P(class 1), save "
            "numpy.column_stack([1 - p, p])."
            if array.ndim == 1
            else ""
        )
        raise InputError(
            f"{where}: expected a 2-D array of shape (n_samples, n_classes) with at "
            f"least 2 classes, got shape {array.shape}.{fix}"
        )
    if array.shape[0] == 0:
        raise InputError(f"{where} holds no rows (shape {array.shape}).")
    if array.dtype.kind not in "iuf":
        raise InputError(
            f"{where}: expected numbers, got dtype {array.dtype}; save the outputs "
            f"as floats: numpy.asarray(outputs, dtype=float)."
        )
    return array


# Rows of probabilities written as text with a few decimals (df.round(4),
# float_format="%.6f") sum to 1 only within the rounding: up to this far off,
# each is divided by its sum, with a note.
ROUNDED_ROW_SUM = 1e-2


def refuse_probabilities(array, where):
    """Refuse, under --logits, a file whose rows are probabilities.

    --logits applies to every outputs file of a command, and the softmax of
    probabilities is a valid-looking wrong answer (a calibration fitted on
    them gave NLL 1.72 for 0.37). Every entry in [0, 1] and every row summing
    to one is no accident for logits: the library's own test
    (``warn_if_probabilities``), with float16's looser sums.
    """
    sums = array.sum(axis=1, dtype=np.float64)
    low = array.min()
    _refuse_percentages(low, sums, where)
    tolerance = ROUNDED_ROW_SUM  # (rounded probabilities too)
    if low >= 0 and array.max() <= 1 and np.abs(sums - 1).max() <= tolerance:
        raise InputError(
            f"{where} holds probabilities (every entry in [0, 1], every row "
            f"summing to 1), but --logits says that every outputs file of the "
            f"command holds logits. Drop --logits if every file holds "
            f"probabilities, or save this one as logits: numpy.log(proba)."
        )


def _refuse_percentages(low, sums, where):
    """Refuse rows of percentages (``low``: the smallest entry; ``sums``: the rows')."""
    if sums.size and low >= 0 and np.abs(sums - 100).max() <= 100 * ROUNDED_ROW_SUM:
        raise InputError(
            f"{where}: every row sums to 100 (percentages); write probabilities "
            f"(each row divided by 100) and run the command on them."
        )


def _renormalise_rounded(array, where, note):
    """Text probabilities rounded to a few decimals, each row divided by its sum.

    Only rows within ``ROUNDED_ROW_SUM`` of 1, of entries in [0, 1]: anything
    further off is left to ``check_proba``'s error.
    """
    from skprior._utils._validation import _row_sum_tolerance

    # (NaN, which fails every comparison, is left to check_proba's error)
    if not array.size or not (array.min() >= 0 and array.max() <= 1):
        return array
    sums = array.sum(axis=1, dtype=np.float64)
    off = float(np.abs(sums - 1).max())
    if off <= _row_sum_tolerance(array.dtype, array.shape[1]) or off > ROUNDED_ROW_SUM:
        return array
    note(
        f"{where}: the rows sum to 1 only within {off:.2g} (probabilities rounded "
        f"when written as text); each row is divided by its sum"
    )
    return array / sums[:, None]


def _finite_logits(array, where, dtype=np.float64):
    """``array`` (the caller's own) as ``dtype`` logits, checked as the library does.

    ``-inf`` is a logit (the log of a zero probability, as the probabilities
    of OUTPUTS are read); NaN, ``+inf`` and rows of ``-inf`` only are refused,
    in the library's words, naming the file, as out of core. No copy when it
    has that dtype already, and no temporary of its size: a row holds none of
    those exactly when its maximum is finite.
    """
    array = np.asarray(array, dtype=dtype)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(array.max(axis=1))
    if bad.any():
        raise InputError(
            f"{where} contains NaN or +inf, or a row of -inf only (first in row "
            f"{int(np.flatnonzero(bad)[0])}). Logits must be finite or -inf (the "
            f"log of a zero probability). Check the model's outputs."
        )
    return array


def _softmax_in_place(logits):
    """``scipy.special.softmax(logits, axis=1)``'s steps, written into ``logits``."""
    logits -= logits.max(axis=1, keepdims=True)
    np.exp(logits, out=logits)
    logits /= logits.sum(axis=1, keepdims=True)
    return logits


def _read_outputs_array(path, option, key, logits, note):
    """The outputs array of ``path``; under --logits an .npz's ``logits`` first.

    An .npz holding ``predictions`` and ``logits`` (netcal's stored outputs
    do) gave ``predictions`` to --logits, which then refused them as
    probabilities.
    """
    keys = ("logits", *(k for k in OUTPUT_KEYS if k != "logits"))
    return read_array(
        path,
        option=option,
        key=key,
        note=note,
        default_keys=keys if logits else OUTPUT_KEYS,
    )


def read_outputs(path, *, option="OUTPUTS", key=None, logits=False, note=no_note):
    """Model outputs as probabilities (n_samples, n_classes), float64 or float32.

    With ``logits=True`` the array is passed through a softmax over each row,
    in place, in float32 for float16 and float32 logits (as probabilities of
    those types are kept in float32), else in float64.
    """
    from skprior._utils._validation import check_proba

    where = describe(option, path)
    array = numeric_matrix(_read_outputs_array(path, option, key, logits, note), where)
    if logits:
        refuse_probabilities(array, where)
        array = _softmax_in_place(_finite_logits(array, where, logits_dtype(array)))
    elif Path(path).suffix.lower() in TEXT_SUFFIXES:
        array = _renormalise_rounded(array, where, note)
    try:
        proba = check_proba(array, name=where, logits_fix="pass --logits")
    except ValueError as exc:
        # (a pass of its own only once the check has failed)
        if array.size and array.ndim == 2:
            _refuse_percentages(array.min(), array.sum(axis=1), where)
        raise InputError(str(exc)) from exc
    if array.dtype == np.float16:
        # Checked at float16 precision, its rows sum to 1 within ~1e-3 only:
        # renormalised, so that the commands' float64 steps accept them.
        proba = proba / proba.sum(axis=1, keepdims=True)
    return proba


def read_logits(path, *, option="OUTPUTS", key=None, logits=False, note=no_note):
    """Model outputs as logits (n_samples, n_classes), float32 or float64.

    Logits are returned as they are (finite or ``-inf``); probabilities are
    validated and their logarithm returned (``-inf`` for exact zeros), whose
    softmax gives the probabilities back. The array read is converted in
    place where its type allows.
    """
    if not logits:
        proba = read_outputs(path, option=option, key=key, note=note)
        # (proba is this reader's own: converted in place)
        logits = np.asarray(proba, dtype=logits_dtype(proba))
        with np.errstate(divide="ignore"):
            return np.log(logits, out=logits)
    where = describe(option, path)
    array = numeric_matrix(_read_outputs_array(path, option, key, logits, note), where)
    refuse_probabilities(array, where)
    return _finite_logits(array, where, logits_dtype(array))


def logits_dtype(array):
    """float32 for float16 and float32 outputs, else float64.

    The library fits and applies a calibration in float32 passes on float32
    logits and returns float32 probabilities: a float64 copy would double
    the command's memory for digits that float32 outputs never had.
    """
    return np.float32 if array.dtype in (np.float16, np.float32) else np.float64


def _first_line(path):
    """The first non-blank line of a text file ('' if none or unreadable)."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as handle:
            return next((line.strip() for line in handle if line.strip()), "")
    except OSError:
        return ""


def read_labels(
    path, n_samples, n_classes, *, option, key=None, note=no_note, rows_of="OUTPUTS"
):
    """Integer labels in ``0..n_classes-1``, one per row of the outputs.

    ``n_samples=None`` accepts any number of labels (training labels).
    ``rows_of`` names the outputs the labels belong to, in messages.
    """
    where = describe(option, path)
    labels = read_array(
        path,
        option=option,
        key=key,
        key_option="--labels-key",
        default_keys=LABEL_KEYS,
        note=note,
        what="labels",
    )
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        fix = (
            " If these are one-hot rows, save labels.argmax(axis=1)."
            if labels.ndim == 2
            else ""
        )
        raise InputError(
            f"{where}: labels must be 1-D (one class index per sample), got shape "
            f"{labels.shape}.{fix}"
        )
    text = Path(path).suffix.lower() in TEXT_SUFFIXES
    if n_samples is not None and labels.shape[0] != n_samples:
        hint = (
            " Its first line '0' looks like the column name pandas writes: save "
            "with to_csv(path, index=False, header=False)."
            if text and labels.shape[0] == n_samples + 1 and _first_line(path) == "0"
            else ""
        )
        raise InputError(
            f"{where} has {labels.shape[0]} labels but {rows_of} has {n_samples} "
            f"rows; give one label per row, in the same order.{hint}"
        )
    if labels.shape[0] == 0:
        raise InputError(f"{where} holds no labels; write one label per line.")
    if labels.dtype.kind not in "iuf":
        raise InputError(
            f"{where}: labels must be class indices 0..{n_classes - 1} (the column "
            f"numbers of the outputs), got dtype {labels.dtype}; map each class "
            f"name to its column number."
        )
    bad = ~np.isfinite(labels) | (labels != np.round(labels))
    if np.any(bad):
        row = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{where}: label {row} (counting from 0) is {labels[row]:g}, not a "
            f"whole number; labels are class indices 0..{n_classes - 1} (the "
            f"column numbers of the outputs)."
        )
    if labels.min() < 0 or labels.max() >= n_classes:
        raise InputError(
            f"{where}: labels must lie in 0..{n_classes - 1} (one per column of the "
            f"outputs), got values from {labels.min():g} to {labels.max():g}; if "
            f"they count from 1, subtract 1."
        )
    if n_samples is None and text and _first_line(path) == "0":
        note(
            f"{where}: line 1 '0' read as a label; if it is the column name pandas "
            f"writes, save with to_csv(path, index=False, header=False)."
        )
    return labels.astype(np.int64)


def parse_prior(text, n_classes, *, option, positive=False, note=no_note):
    """A class prior from a comma list (``"0.2,0.8"``) or a file of one vector.

    Non-negative numbers that do not sum to one are treated as counts and
    divided by their total. ``positive=True`` refuses a zero entry (a
    training prior, which the methods divide by).
    """
    if Path(text).suffix.lower() in SUFFIXES:
        where = describe(option, text)
        values = read_array(
            text,
            option=option,
            note=note,
            what="prior",
            # (adapt's .npz output holds the prior beside the posteriors)
            default_keys=("prior",),
            key_option="an archive of that one array, or one named 'prior'",
        )
        if values.ndim == 2 and 1 in values.shape:
            values = np.ravel(values)  # one row or one column
        if values.ndim != 1 or values.dtype.kind not in "iuf":
            raise InputError(
                f"{where}: a prior file must hold one vector of numbers, got an "
                f"array of shape {values.shape} and dtype {values.dtype}."
            )
        values = values.astype(np.float64)
    else:
        where = f"{option} {text!r}"
        try:
            values = np.array([float(v) for v in text.split(",")], dtype=np.float64)
        except ValueError as exc:
            raise InputError(
                f"{where} is neither a file (.npy, .npz, .csv, .txt) nor a "
                f"comma-separated list of numbers such as 0.2,0.8."
            ) from exc
    if values.shape[0] != n_classes:
        raise InputError(
            f"{where} has {values.shape[0]} entries but the outputs have "
            f"{n_classes} classes; give one weight per class."
        )
    bad = ~np.isfinite(values) | (values < 0)
    with np.errstate(over="ignore"):  # (counts near float64's largest: below)
        total = values.sum()
    if np.any(bad) or total <= 0:
        problem = (
            f"entry {int(np.argmax(bad))} is {values[np.argmax(bad)]:g}"
            if np.any(bad)
            else "every entry is 0"
        )
        raise InputError(
            f"{where}: {problem}; a prior is non-negative numbers with a positive "
            f"sum (probabilities, or counts), one per class."
        )
    if positive and np.any(values == 0):
        zero = np.flatnonzero(values == 0).tolist()
        raise InputError(
            f"{where} is 0 for the classes {zero}: the methods divide by the "
            f"training prior, so give every class a positive weight (a count of "
            f"at least 1)."
        )
    if not np.isfinite(total):  # (the counts' sum overflows: scale them first)
        values = values / values.max()
        total = values.sum()
    return values / total


def check_output_path(path, option="--output"):
    """Refuse an output path with an unknown extension, a missing or read-only folder.

    Returns the extension; called before any computation, so that a typo in
    ``--output`` costs nothing.
    """
    suffix = checked_suffix(path, option)
    check_output_folder(path, option)
    if Path(path).is_dir():
        raise InputError(f"{option} {path} is a folder; name a file.")
    # (refused now, not after the work: the result keeps a file's mode, and a
    # read-only one is a sign that it is not to be replaced)
    if Path(path).exists() and not os.access(path, os.W_OK):
        raise InputError(
            f"{option} {path} exists and is read-only; make it writable to "
            f"replace it, or name another file."
        )
    return suffix


def write_array(path, proba, extra, stack):
    """Write ``proba`` to ``path``; the format follows the extension.

    ``.npz`` files hold ``proba`` under the key ``proba`` and the arrays of
    ``extra`` (a dict or None) under their names; .npy and .csv hold
    ``proba`` only. The file is written beside ``path`` and renamed to it at
    the end of ``stack`` (a :class:`contextlib.ExitStack`), with the other
    files written in it (the diagram): a failure (a full disk) leaves no
    partial result and every existing file as it was.
    """
    from skprior._utils._npy_blocks import replaced_atomically

    suffix = check_output_path(path)
    try:
        temporary = stack.enter_context(replaced_atomically(path))
        # (through a file object: given a name, numpy would append ".npy" or
        # ".npz" to an upper-case extension; closed inside the block, so that
        # an error of the last write is raised before the rename)
        with open(temporary, "wb") as handle:
            if suffix == ".npy":
                np.save(handle, proba)
            elif suffix == ".npz":
                np.savez(handle, proba=proba, **(extra or {}))
            else:
                # Enough digits to read the same floats back.
                digits = 9 if proba.dtype == np.float32 else 17
                np.savetxt(handle, proba, delimiter=",", fmt=f"%.{digits}g")
    except OSError as exc:
        raise InputError(f"--output {path} cannot be written ({exc}).") from exc


# The options that name a file the command reads (the prior options when
# they name a file rather than list numbers).
INPUT_OPTIONS = {
    "outputs": "OUTPUTS",
    "labels": "--labels",
    "prior": "--prior",
    "prior_from_labels": "--prior-from-labels",
    "reference": "--reference",
    "test_prior": "--test-prior",
    "val_outputs": "--val-outputs",
    "val_labels": "--val-labels",
    "fit_outputs": "--fit-outputs",
    "fit_labels": "--fit-labels",
}


def _is_within(path, target):
    """Whether ``path`` is the file ``target``, or inside the .zarr ``target``."""
    path, target = Path(path), Path(target)
    inside = target.suffix.lower() == ".zarr" and path.resolve().is_relative_to(
        target.resolve()
    )
    if path.resolve() == target.resolve() or inside:
        return True
    try:  # (another name of the same file: a hard link)
        return path.exists() and target.exists() and path.samefile(target)
    except OSError:
        return False


def check_not_an_input(args):
    """Refuse an --output or --diagram that names a file the command reads.

    Called before anything is read: writing the result over an input would
    destroy the input (and, out of core, the result is computed from it as
    it is being written).
    """
    written = {"--output": getattr(args, "output", None)}
    written["--diagram"] = getattr(args, "diagram", None)
    read = [
        (option, getattr(args, name))
        for name, option in INPUT_OPTIONS.items()
        if getattr(args, name, None) is not None
    ]
    if None not in written.values():
        read.append(("--output", written["--output"]))
    for option, target in written.items():
        for source_option, source in read:
            if target is not None and option != source_option:
                if _is_within(source, target):
                    raise InputError(
                        f"{option} {target} is also {source_option} ({source}): "
                        f"writing it would destroy that file, which the command "
                        f"reads. Name another file for {option}."
                    )
