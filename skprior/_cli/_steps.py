"""The steps that the ``skprior`` commands on stored outputs share.

Reading OUTPUTS and the labels files (through :mod:`skprior._cli._io`, in
memory, or :mod:`skprior._cli._blocks`, out of core), the progress messages,
the report of --labels, writing --output, and the library's refusals of bad
arguments turned into input errors that name the options.
"""

import contextlib
import sys
import time
from functools import partial

import numpy as np

from skprior._cli import _blocks as _cli_blocks
from skprior._cli._blocks import wants_out_of_core
from skprior._cli._common import InputError
from skprior._cli._io import read_labels, read_outputs, write_array
from skprior._cli._progress import bar, ticking
from skprior._cli._report import (
    diagram,
    print_change,
    row_summaries,
    summary_scores,
)
from skprior._utils._kernels import row_blocks

# Entries per row block of the in-memory steps that write a row-wise result
# into an array that exists already (:func:`by_blocks`): 2**18 (1 MB of
# float32), so that the library's temporaries for one block weigh nothing
# against the input, and the command holds its input and at most one other
# array of its size.
BLOCK_ENTRIES = 2**18


def _say(args, message):
    """A progress message on stderr (silenced by --quiet)."""
    if not getattr(args, "quiet", False):
        print(f"skprior {args.command}: {message}", file=sys.stderr)


def _note(args):
    """The function that reports a skipped line (never silenced: it is data)."""
    return partial(print, f"skprior {args.command}: note:", file=sys.stderr)


# -- shared steps of the commands on stored outputs ------------------------------------


def _load(args, path=None, option="OUTPUTS", read=read_outputs, n_classes=None):
    """Read the outputs file (``args.outputs`` unless ``path``) with ``read``.

    ``read_outputs`` (the default) gives probabilities, ``read_logits`` logits.
    Other outputs than OUTPUTS must have its ``n_classes`` (the same model's).
    """
    path = args.outputs if path is None else path
    start = time.perf_counter()
    # (a text file of millions of rows takes tens of seconds to parse)
    with ticking(args, f"reading {path}"):
        proba = read(
            path, option=option, key=args.key, logits=args.logits, note=_note(args)
        )
    _say(
        args,
        f"read {path}: {proba.shape[0]} rows, {proba.shape[1]} classes "
        f"({time.perf_counter() - start:.1f}s)",
    )
    if n_classes is not None and proba.shape[1] != n_classes:
        raise InputError(
            f"{option} {path} has {proba.shape[1]} classes (columns) but OUTPUTS "
            f"has {n_classes}; both must come from the same model."
        )
    return proba


def _labels(args, path, option, shape, rows_of="OUTPUTS"):
    """The labels in ``path``, one per row of outputs of ``shape``.

    ``shape`` is (n_samples, n_classes); ``n_samples=None`` takes any number
    of labels (training labels).
    """
    return read_labels(
        path,
        *shape,
        option=option,
        key=args.labels_key,
        note=_note(args),
        rows_of=rows_of,
    )


def _report_labels(args, outputs):
    """The --labels of OUTPUTS (None without), read before any long computation.

    Out of core (``outputs`` a Dask array), lazily for .npy and .zarr files.
    """
    if not isinstance(outputs, np.ndarray):
        return _cli_blocks.report_labels(args, outputs)
    if args.labels is None:
        return None
    return _labels(args, args.labels, "--labels", outputs.shape)


def _outputs(args):
    """OUTPUTS as probabilities, and its --labels (None without).

    Out of core (:mod:`skprior._cli._blocks`), OUTPUTS is a Dask array of row
    blocks, and so are the labels of a .npy or .zarr file, checked now (one
    pass over them) rather than after the long passes over OUTPUTS.
    """
    if not wants_out_of_core(args):
        proba = _load(args)
        return proba, _report_labels(args, proba)
    proba = _cli_blocks.open_outputs(args)
    _say(
        args,
        f"{args.outputs}: {proba.shape[0]} rows, {proba.shape[1]} classes, "
        f"{len(proba.chunks[0])} blocks (out of core)",
    )
    return proba, _report_labels(args, proba)


def _finish(args, before, after, labels, extra=None, old=None):
    """Write --output, print the report and draw --diagram (with --labels).

    ``old`` are the rows' summaries of ``before`` (:func:`summaries`) when
    the caller took them already (``before`` is then None): the report and
    the diagram need no more of it.
    """
    if not isinstance(after, np.ndarray):  # (out of core: a Dask array)
        return _cli_blocks.finish(args, before, after, labels, _say)
    draw = labels is not None and args.diagram is not None
    if labels is not None:
        old = summaries(args, None, before, labels, "before") if old is None else old
        new = summaries(args, None, after, labels, "after")
        print_change(summary_scores(*old), summary_scores(*new))
    # (both files are written beside their paths, then renamed together: a
    # diagram that cannot be written leaves --output as it was, and so on)
    with contextlib.ExitStack() as stack:
        if args.output is not None:
            with ticking(args, f"writing {args.output}"):
                write_array(args.output, after, extra, stack)
        if draw:
            diagram(args.diagram, old, new, f"skprior {args.command}", stack)
    for path in (args.output, args.diagram if draw else None):
        if path is not None:
            _say(args, f"wrote {path}")
    return 0


def by_blocks(function, source, out):
    """``out[rows] = function(source[rows])`` over row blocks; returns ``out``.

    ``function(source)`` for a row-wise ``function`` without its whole-array
    temporaries or result: ``out`` may be ``source`` itself (in place) or an
    array the caller no longer needs, of ``source``'s shape.
    """
    for rows in row_blocks(*source.shape, BLOCK_ENTRIES):
        out[rows] = function(source[rows])
    return out


def summaries(args, function, source, labels, which):
    """The rows' :func:`row_summaries` of ``function(source)`` (--labels).

    Made by row blocks, with a bar: only a few bytes a row are held, never
    ``function(source)`` whole (``function=None``: ``source`` itself).
    """
    parts, rows = [], list(row_blocks(*source.shape, BLOCK_ENTRIES))
    with bar(args, f"scores {which} (--labels)", len(rows)) as progress:
        for block in rows:
            values = source[block] if function is None else function(source[block])
            parts.append(row_summaries(values, labels[block]))
            progress.update()
    return tuple(np.concatenate(column) for column in zip(*parts, strict=True))


def _check_method_options(args, table):
    """Refuse the options of ``table`` that --method does not use; fill defaults."""
    for option, (methods, default) in table.items():
        name = option[2:].replace("-", "_")
        if getattr(args, name) is not None and args.method not in methods:
            raise InputError(
                f"{option} is used only with --method {' or '.join(methods)}; "
                f"--method {args.method} does not use it. Drop {option}, or pass "
                f"--method {methods[0]}."
            )
        if getattr(args, name) is None:
            setattr(args, name, default)
