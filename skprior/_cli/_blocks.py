"""The out-of-core steps of the ``skprior`` commands, on files larger than memory.

An OUTPUTS file in .zarr, any .npy file with ``--out-of-core``, or a .npy
file whose in-memory run would take more than half the available memory
(:func:`wants_out_of_core`), is read as a Dask array of row blocks
(:mod:`skprior._utils._npy_blocks`) and the library's functions run on it as
on any Dask array: the estimate of the prior is one pass per EM step, CAN
(``--n-iter 1``, or a ``--reference`` held in memory) one pass for its
column sums, a calibration a pass per step of its fit, and the result is
computed and written to ``--output`` (.npy or .zarr) block by block, into a
temporary renamed once complete. Memory holds a few blocks (of
:data:`BLOCK_BYTES`) per Dask thread, whatever the file size. .npy and
.zarr labels are read by blocks too, and checked in one pass before the
passes over OUTPUTS. ``--labels`` prints the accuracy and
the ECE before and after (a pass each); ``--diagram`` needs the outputs in
memory and is refused.
"""

import contextlib
import os
import re
import sys
import tempfile
from functools import partial
from pathlib import Path

import numpy as np

from skprior._cli._common import (
    MEMORY_FACTOR,
    InputError,
    check_output_folder,
    library_errors,
)
from skprior._cli._io import (
    logits_dtype,
    numeric_matrix,
    read_labels,
    refuse_probabilities,
)

LAZY_SUFFIXES = (".zarr",)
OUTPUT_SUFFIXES = (".npy", ".zarr")

# The share of the available memory an in-memory run may take.
COMFORTABLE = 0.5
# The size of the row blocks out of core. The work on a block holds several
# times its bytes (the float64 temporaries of float32 outputs, the result),
# and each Dask thread works on a block at a time: at 16 MB a thread holds
# about 150 MB (at 128 MB, 1.2 GB), and the passes are no slower.
BLOCK_BYTES = 16 * 2**20


def _available_bytes():
    """The memory available to a new allocation (MemAvailable; else physical)."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return None


def wants_out_of_core(args):
    """Whether OUTPUTS is to be processed block by block.

    Asked for (--out-of-core), a .zarr store, or a .npy file whose in-memory
    run (its size times the command's :data:`MEMORY_FACTOR`) would take more
    than half of the memory available now.
    """
    path = Path(args.outputs)
    if path.suffix.lower() in LAZY_SUFFIXES or getattr(args, "out_of_core", False):
        return True
    return why_out_of_core(args) is not None


def why_out_of_core(args):
    """Why a .npy OUTPUTS goes out of core unasked (None where it does not).

    The sentence that errors of such a run end with: a user who did not ask
    for --out-of-core learns why its options are refused.
    """
    path = Path(args.outputs)
    if path.suffix.lower() != ".npy" or not path.is_file():
        return None
    memory = _available_bytes()
    factor = MEMORY_FACTOR.get(args.command, 3)
    peak = path.stat().st_size * factor
    if memory is None or peak <= COMFORTABLE * memory:
        return None
    return (
        f"This run went out of core by itself: {args.command} on {path} "
        f"({_size(path.stat().st_size)}) would hold about {_size(peak)} in "
        f"memory, more than half of the {_size(memory)} available now; free "
        f"memory to run it in memory, or split the file."
    )


def _size(n_bytes):
    """``n_bytes`` in MB (in kB below one)."""
    if n_bytes < 2**20:
        return f"{n_bytes / 2**10:,.0f} kB"
    return f"{n_bytes / 2**20:,.0f} MB"


def _open(path, option):
    """The .npy or .zarr file ``path`` as a lazy Dask matrix of row blocks."""
    from skprior._utils._npy_blocks import open_lazy

    where = f"{option} {path}"
    suffix = Path(path).suffix.lower()
    if suffix not in (".npy", ".zarr"):
        raise InputError(
            f"{where}: out-of-core processing reads .npy or .zarr files, not "
            f"{suffix}; convert it, or drop --out-of-core."
        )
    if not Path(path).exists():
        raise InputError(f"{where}: no such file.")
    if suffix == ".npy" and Path(path).is_file():
        from skprior._cli._formats import MAGIC, wrong_content

        with open(path, "rb") as handle:
            head = handle.read(8)
        if not head.startswith(MAGIC[".npy"]):  # (named, with the fix, as in memory)
            raise InputError(wrong_content(where, head, suffix))
    try:
        array = open_lazy(path)
        if array.ndim == 2:  # (again, in the commands' blocks)
            array = open_lazy(path, rows=block_rows(*array.shape[1:], array.dtype))
    except ImportError as exc:
        raise InputError(str(exc)) from exc
    except (OSError, ValueError) as exc:
        raise InputError(f"{where} cannot be read ({exc}).") from exc
    return numeric_matrix(array, where)


def block_rows(n_columns, dtype):
    """Rows per block of a matrix read out of core: :data:`BLOCK_BYTES` at most.

    Also at most the chunks of :mod:`skprior._utils._npy_blocks`.
    """
    from skprior._utils import _npy_blocks

    size = min(BLOCK_BYTES, _npy_blocks.CHUNK_BYTES)
    return max(1, size // max(1, n_columns * np.dtype(dtype).itemsize))


def _first_block(array):
    return array[: array.chunks[0][0]].compute()


def open_outputs(args):
    """OUTPUTS as a Dask array of probabilities (a softmax of --logits), lazily.

    The paths of --output and --diagram are checked first, before any work.
    """
    _check_output(args)
    array = _open(args.outputs, "OUTPUTS")
    if args.logits:
        from skprior import softmax_temperature
        from skprior._utils._validation import check_logits

        # (its first block tells: a pass over the file for this would cost
        # as much as the command)
        name = f"OUTPUTS {args.outputs}"
        refuse_probabilities(_first_block(array), name)
        # (checked as each block is computed, naming the file, as in memory;
        # float16 logits as float32, as in memory: _io.logits_dtype)
        array = array.astype(logits_dtype(array))
        return softmax_temperature(check_logits(array, name, False, lazy=True)[0], 1.0)
    from skprior._utils._validation import check_proba

    # (checked here, block by block as it is computed, so that an error names
    # the file and the command line's fix, as in memory)
    proba = check_proba(
        array, name=f"OUTPUTS {args.outputs}", logits_fix="pass --logits", lazy=True
    )
    if array.dtype == np.float16:
        # Checked at float16 precision, its rows sum to 1 within ~1e-3 only:
        # renormalised, as in memory (_io.read_outputs), for the float64 steps.
        proba = proba / proba.sum(axis=1, keepdims=True)
    return proba


@contextlib.contextmanager
def softmax_once(args, proba, say):
    """The lazy ``proba``, a softmax of --logits, computed once for many passes.

    Written block by block to a hidden temporary .npy file beside --output
    (else OUTPUTS) and read from there: an estimate of the prior takes a
    pass per step, and each would otherwise compute the softmax of every
    block again (its exponentials cost more than reading the block). The
    file, of the input's size, is removed when the block ends; where it
    cannot be written (a read-only folder, a full disk), the softmax is
    computed in every pass, as it is said on stderr.
    """
    import dask.array as da

    from skprior._utils._npy_blocks import NpyRowWriter, open_lazy

    target = Path(args.output if args.output is not None else args.outputs)
    options = dict(prefix=f".{target.name}.softmax.", suffix=".partial.npy")
    path, cached = None, None
    try:
        try:
            handle, path = tempfile.mkstemp(dir=target.resolve().parent, **options)
            os.close(handle)
            da.store(proba, NpyRowWriter(path, proba.shape, proba.dtype), lock=False)
            cached = open_lazy(path, rows=proba.chunks[0][0])
        except OSError as exc:
            say(
                args,
                f"the softmax of the logits cannot be kept on disk ({exc}): it is "
                f"computed again in every pass",
            )
        yield proba if cached is None else cached
    finally:
        if path is not None:
            with contextlib.suppress(OSError):
                os.remove(path)


def _log(block, dtype):
    with np.errstate(divide="ignore"):  # (log 0 = -inf, a valid logit)
        return np.log(block.astype(dtype))


def open_logits(args, path=None, option="OUTPUTS"):
    """``path`` (OUTPUTS by default) as lazy logits, float32 or float64.

    Files of --logits as they are; probabilities (checked block by block, as
    they are computed) as their logarithm, as in memory; float32 for float16
    and float32 files (:func:`logits_dtype`).
    """
    from skprior._utils._validation import check_proba

    if path is None:
        _check_output(args)
    path = args.outputs if path is None else path
    array = _open(path, option)
    dtype = logits_dtype(array)
    if array.dtype == np.float16 and not args.logits:
        # (float16 probabilities are renormalised in float64, in memory too:
        # _io.read_outputs; their logarithm is float64 there)
        dtype = np.float64
    if args.logits:
        from skprior._utils._validation import check_logits

        refuse_probabilities(_first_block(array), f"{option} {path}")
        # (checked block by block as it is computed, naming the file, as in
        # memory)
        name = f"{option} {path}"
        return check_logits(array.astype(dtype), name, False, lazy=True)[0]
    proba = check_proba(
        array, name=f"{option} {path}", logits_fix="pass --logits", lazy=True
    )
    return proba.map_blocks(_log, dtype, dtype=dtype)


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
    check_output_folder(output, "--output")
    if suffix == ".npy" and output.is_dir():
        raise InputError(f"--output {output} is a folder; name a .npy file.")
    if suffix == ".npy" and output.exists() and not os.access(output, os.W_OK):
        raise InputError(
            f"--output {output} exists and is read-only; make it writable to "
            f"replace it, or name another file."
        )
    # A .zarr output replaces an earlier result, never a folder of other files
    # (nor an empty one, which may be a mount point or meant for other files).
    if suffix == ".zarr" and output.exists():
        if not output.is_dir() or not _is_zarr_array(output):
            empty = output.is_dir() and not any(output.iterdir())
            what = "an empty folder" if empty else "it holds other files, or is a group"
            raise InputError(
                f"--output {output} exists and is not a Zarr array that an "
                f"earlier run wrote ({what}); it is replaced as a whole, so name "
                f"a new .zarr folder."
            )


def lazy_labels(args, path, option, n_rows, n_columns, rows_of="the outputs"):
    """The labels in ``path``: lazily for .npy and .zarr files, checked in a pass.

    Text files are read in memory (:func:`read_labels`).
    """
    import dask
    import dask.array as da

    from skprior._utils._npy_blocks import open_lazy

    where = f"{option} {path}"
    if Path(path).suffix.lower() not in (".npy", ".zarr"):
        # (skipped lines reported as in memory: _steps._note, not imported here,
        # which imports this module)
        note = partial(print, f"skprior {args.command}: note:", file=sys.stderr)
        return read_labels(
            path,
            n_rows,
            n_columns,
            option=option,
            key=args.labels_key,
            rows_of=rows_of,
            note=note,
        )
    try:
        labels = open_lazy(path)
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
            f"{where} has {labels.shape[0]} labels but {rows_of} have {n_rows} "
            f"rows; give one label per row, in the same order."
        )
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


def report_labels(args, outputs):
    """The --labels of the Dask ``outputs`` (None without), checked."""
    if args.labels is None:
        return None
    return lazy_labels(args, args.labels, "--labels", *outputs.shape)


def finish(args, before, after, labels, say):
    """Write --output block by block and print the report of ``labels``.

    A bad row that only these passes compute (a method whose fit read other
    files) is refused as in memory, by the lazy checks' messages. Without
    either, one pass computes ``after`` all the same: its rows are then
    checked as they are in memory, where the file is read whole (a NaN in a
    file of ``adapt --method known`` exited 0, the file never read).
    """
    if args.output is None and labels is None:
        with library_errors():
            after.sum(axis=0).compute()
    # (the report first, as in memory: an interrupt during it left the
    # output already replaced, with the command exiting "interrupted")
    if labels is not None:
        with library_errors():
            _report(before, after, labels)
    if args.output is not None:
        from skprior._utils._npy_blocks import store_lazy

        try:
            with library_errors():
                store_lazy(args.output, after)
        except OSError as exc:
            raise InputError(
                f"--output {args.output} cannot be written ({exc}); nothing was "
                f"written (a partial result is removed)."
            ) from exc
        say(args, f"wrote {args.output} block by block")
    return 0
