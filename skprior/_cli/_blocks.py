"""The out-of-core steps of the ``skprior`` commands, on files larger than memory.

An OUTPUTS file in .zarr, a .npy file larger than half the machine's memory,
or any .npy file with ``--out-of-core``, is read as a Dask array of row
blocks (:mod:`skprior._utils._npy_blocks`) and the library's functions run on it as
on any Dask array: the estimate of the prior is one pass per EM step, CAN
(``--n-iter 1``, or a ``--reference`` held in memory) one pass for its
column sums, and the result is computed and written to ``--output`` (.npy or
.zarr) block by block. Memory holds a few blocks whatever the file size.
``--labels`` prints the accuracy and the ECE before and after (a pass each);
``--diagram`` needs the outputs in memory and is refused.
"""

import os
import re
from pathlib import Path

import numpy as np

from skprior._cli._common import InputError
from skprior._cli._io import numeric_matrix, read_labels, refuse_probabilities

LAZY_SUFFIXES = (".zarr",)
OUTPUT_SUFFIXES = (".npy", ".zarr")


def _memory_bytes():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return None


def wants_out_of_core(args):
    """Whether OUTPUTS is to be processed block by block."""
    path = Path(args.outputs)
    if path.suffix.lower() in LAZY_SUFFIXES or getattr(args, "out_of_core", False):
        return True
    memory = _memory_bytes()
    return (
        path.suffix.lower() == ".npy"
        and path.is_file()
        and memory is not None
        and path.stat().st_size > memory // 2
    )


def open_outputs(args):
    """OUTPUTS as a Dask array of probabilities (a softmax of --logits), lazily.

    The paths of --output and --diagram are checked first, before any work.
    """
    from skprior._utils._npy_blocks import open_lazy

    _check_output(args)
    path = args.outputs
    suffix = Path(path).suffix.lower()
    if suffix not in (".npy", ".zarr"):
        raise InputError(
            f"{path}: out-of-core processing reads .npy or .zarr files, not "
            f"{suffix}; convert it, or drop --out-of-core."
        )
    if not Path(path).exists():
        raise InputError(f"{path}: no such file.")
    try:
        array = open_lazy(path)
    except ImportError as exc:
        raise InputError(str(exc)) from exc
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot be read ({exc}).") from exc
    array = numeric_matrix(array, path)
    if args.logits:
        from skprior import softmax_temperature

        # (its first block tells: a pass over the file for this would cost
        # as much as the command)
        refuse_probabilities(array[: array.chunks[0][0]].compute(), f"OUTPUTS {path}")

        return softmax_temperature(array, 1.0)
    return array


def _is_zarr_array(path):
    """Whether the folder ``path`` holds one Zarr array and nothing else.

    Its metadata (``.zarray``, Zarr 2; ``zarr.json`` of an array, Zarr 3), its
    attributes, and chunks (names of digits and dots, or Zarr 3's ``c``).
    """
    entries = {entry.name for entry in Path(path).iterdir()}
    if ".zarray" in entries:
        metadata = {".zarray", ".zattrs"}
    elif "zarr.json" in entries:
        text = (Path(path) / "zarr.json").read_text(errors="replace")
        if '"array"' not in text:
            return False
        metadata = {"zarr.json", "c"}
    else:
        return False
    return all(name in metadata or _CHUNK.fullmatch(name) for name in entries)


_CHUNK = re.compile(r"[0-9]+([./][0-9]+)*")


def _check_output(args):
    if args.diagram is not None:
        raise InputError(
            "--diagram needs the outputs in memory; out-of-core runs print the "
            "accuracy and ECE only. Drop --diagram."
        )
    if args.output is None:
        return
    output = Path(args.output)
    suffix = output.suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        raise InputError(
            f"--output {output}: out-of-core output is written block by block to "
            f".npy or .zarr, not {suffix}."
        )
    if not output.resolve().parent.is_dir():
        raise InputError(f"--output {output}: the folder does not exist.")
    if suffix == ".npy" and output.is_dir():
        raise InputError(f"--output {output} is a folder; name a .npy file.")
    # A .zarr output replaces an earlier result, never a folder of other files.
    if suffix == ".zarr" and output.exists():
        if not output.is_dir() or not _is_zarr_array(output):
            raise InputError(
                f"--output {output} exists and is not a Zarr array that an "
                f"earlier run wrote (it holds other files, or is a group); it "
                f"is replaced as a whole, so name a new .zarr folder."
            )


def _labels(args, n_rows, n_columns):
    """The --labels, lazily for .npy and .zarr files, checked in one pass."""
    from skprior._utils._npy_blocks import open_lazy

    if args.labels is None:
        return None
    where = f"--labels {args.labels}"
    if Path(args.labels).suffix.lower() not in (".npy", ".zarr"):
        return read_labels(
            args.labels, n_rows, n_columns, option="--labels", key=args.labels_key
        )
    try:
        labels = open_lazy(args.labels)
    except (OSError, ValueError) as exc:
        raise InputError(f"{where} cannot be read ({exc}).") from exc
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1 or labels.dtype.kind not in "iuf":
        raise InputError(
            f"{where}: labels must be one class index 0..{n_columns - 1} per row "
            f"(a 1-D array of integers), got shape {labels.shape} and dtype "
            f"{labels.dtype}; save numpy.asarray(labels, dtype=int)."
        )
    if labels.shape[0] != n_rows:
        raise InputError(
            f"{where} has {labels.shape[0]} labels but the outputs have {n_rows} "
            f"rows; give one label per row, in the same order."
        )
    import dask
    import dask.array as da

    bad = ~da.isfinite(labels) | (labels != da.round(labels))
    bad |= (labels < 0) | (labels >= n_columns)
    if dask.compute(bad.any())[0]:
        row = int(da.argmax(bad).compute())
        value = float(labels[row : row + 1].compute()[0])
        raise InputError(
            f"{where}: label {row} (counting from 0) is {value:g}; labels are "
            f"class indices 0..{n_columns - 1} (the column numbers of the "
            f"outputs): whole numbers in that range (if they count from 1, "
            f"subtract 1)."
        )
    return labels.astype(np.int64)


def _report(before, after, labels):
    """Accuracy and top-label ECE before and after (one pass each)."""
    import dask

    from skprior._cli._report import print_change
    from skprior.metrics import expected_calibration_error

    n_classes = before.shape[1]
    hits = [(proba.argmax(axis=1) == labels).mean() for proba in (before, after)]
    accuracy = dask.compute(*hits)
    ece = [
        expected_calibration_error(labels, proba, labels=range(n_classes))
        for proba in (before, after)
    ]
    old, new = ({"accuracy": a, "ECE": e} for a, e in zip(accuracy, ece, strict=True))
    print_change(old, new)


def finish(args, before, after, say):
    """Write --output block by block and print the report of --labels.

    The labels are read and checked first, so that a bad labels file is
    reported before the long pass that writes the output.
    """
    labels = _labels(args, *before.shape)
    if args.output is not None:
        from skprior._utils._npy_blocks import store_lazy

        try:
            store_lazy(args.output, after)
        except OSError as exc:
            raise InputError(
                f"--output {args.output} cannot be written ({exc}); nothing was "
                f"written (a partial result is removed)."
            ) from exc
        say(args, f"wrote {args.output} block by block")
    if labels is not None:
        _report(before, after, labels)
    return 0
