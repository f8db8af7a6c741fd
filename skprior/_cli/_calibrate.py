"""``skprior calibrate``: fit a calibration on labelled outputs and apply it.

In memory, or out of core (:mod:`skprior._cli._blocks`): the fits are
passes over row blocks, as the library runs them on any Dask array.
"""

import inspect
import time
from functools import partial

import numpy as np

from skprior._cli import _blocks as _cli_blocks
from skprior._cli._blocks import wants_out_of_core
from skprior._cli._common import InputError, library_errors
from skprior._cli._io import read_logits
from skprior._cli._progress import bar, ticking
from skprior._cli._steps import (
    _check_method_options,
    _finish,
    _labels,
    _load,
    _report_labels,
    _say,
    by_blocks,
    summaries,
)
from skprior._utils._options import DEFAULT_REG_LAMBDA, DEFAULT_REG_MU

# The calibrate options that only some methods use, and their defaults.
CALIBRATE_OPTIONS = {
    "--reg-lambda": (("dirichlet",), DEFAULT_REG_LAMBDA),
    "--reg-mu": (("dirichlet",), DEFAULT_REG_MU),
}

# -- skprior calibrate -----------------------------------------------------------------


def _fit_logits(args, logits):
    """The logits and labels the calibration is fitted on.

    Out of core (``logits`` a Dask array), .npy and .zarr files are read
    lazily, block by block, as OUTPUTS is.
    """
    lazy = not isinstance(logits, np.ndarray)
    source, rows_of = logits, "OUTPUTS"
    if args.fit_outputs is not None:
        rows_of = "--fit-outputs"
        if lazy and args.fit_outputs.lower().endswith((".npy", ".zarr")):
            source = _cli_blocks.open_logits(args, args.fit_outputs, rows_of)
        else:
            source = _load(args, args.fit_outputs, rows_of, read_logits)
        if source.shape[1] != logits.shape[1]:
            raise InputError(
                f"--fit-outputs {args.fit_outputs} has {source.shape[1]} classes "
                f"(columns) but OUTPUTS has {logits.shape[1]}; both must come "
                f"from the same model."
            )
    if lazy:
        labels = _cli_blocks.lazy_labels(
            args, args.fit_labels, "--fit-labels", *source.shape, rows_of
        )
        if not isinstance(source, np.ndarray) and not isinstance(labels, np.ndarray):
            labels = labels.rechunk((source.chunks[0],))
    else:
        labels = _labels(args, args.fit_labels, "--fit-labels", source.shape, rows_of)
    return source, labels


def _advance(progress, done, total):
    """Move the bar ``progress`` to ``done`` of ``total`` (the most there may be)."""
    progress.total = total
    progress.update(done - progress.n)
    progress.refresh()  # (each fit is long: drawn at once, whatever tqdm's pace)


def _fit_calibration(args, fit_logits, fit_labels):
    """Fit --method; return (its parameters, saved in .npz, and what to print)."""
    from skprior.calibration._classifier import fit_calibration

    options = {"reg_lambda": args.reg_lambda, "reg_mu": args.reg_mu}
    # The cross-validation of reg_lambda="auto" is the long fit (89 s at 5,000
    # x 100): a bar over its fold fits, where the library reports them.
    auto = args.method == "dirichlet" and args.reg_lambda == "auto"
    progress = ticking(args, f"fitting {args.method}")
    if auto and "progress" in inspect.signature(fit_calibration).parameters:
        progress = bar(args, "choosing reg_lambda (fold fits)")
        options["progress"] = partial(_advance, progress)
    with progress:
        fitted = fit_calibration(args.method, fit_logits, fit_labels, **options)
    fitted.pop("cv_scores", None)
    # (on the host: out of core, the parameters may be Dask arrays)
    fitted = {
        name: float(value) if np.ndim(value) == 0 else np.asarray(value)
        for name, value in fitted.items()
    }
    if "matrix" in fitted:
        auto = " (auto)" if args.reg_lambda == "auto" else ""
        return fitted, (
            f"Dirichlet calibration, reg_lambda {fitted['reg_lambda']:.6g}{auto}, "
            f"reg_mu {fitted['reg_mu']:.6g}"
        )
    if "weights" not in fitted:
        what = f"temperature {fitted['temperature']:.6g}"
        if "bias" in fitted:  # (bcts)
            bias = fitted["bias"]
            what += f", class biases from {bias.min():.6g} to {bias.max():.6g}"
        return fitted, what
    weights = fitted["weights"]
    what = f"class factors from {weights.min():.6g} to {weights.max():.6g}"
    bias = fitted.setdefault("bias", np.zeros_like(weights))  # (nbvs: no bias)
    if args.method == "vs":
        what += f", biases from {bias.min():.6g} to {bias.max():.6g}"
    return fitted, what


def _calibrate(args):
    """Fit a calibration on labelled outputs and apply it to OUTPUTS.

    In memory, the logits keep the input's float32 (float16 is read as
    float32) and the result is written in it.
    """
    from skprior import softmax_temperature
    from skprior.calibration._classifier import apply_calibration

    _check_method_options(args, CALIBRATE_OPTIONS)
    if wants_out_of_core(args):
        logits = _cli_blocks.open_logits(args)
        _say(
            args,
            f"{args.outputs}: {logits.shape[0]} rows, {logits.shape[1]} classes, "
            f"{len(logits.chunks[0])} blocks (out of core)",
        )
    else:
        logits = _load(args, read=read_logits)
    labels = _report_labels(args, logits)
    fit_logits, fit_labels = _fit_logits(args, logits)
    start = time.perf_counter()
    with library_errors():
        fitted, what = _fit_calibration(args, fit_logits, fit_labels)
    source = args.outputs if args.fit_outputs is None else args.fit_outputs
    _say(args, f"fitted in {time.perf_counter() - start:.1f}s")
    print(f"{what} ({args.method}, fitted on {fit_logits.shape[0]} rows of {source})")
    del fit_logits, fit_labels
    if not isinstance(logits, np.ndarray):
        before = softmax_temperature(logits, 1.0)
        with library_errors():
            after = apply_calibration(logits, fitted)
        return _cli_blocks.finish(args, before, after, labels, _say)
    # In memory: the rows' summaries of --labels before the calibration (for
    # the report and the diagram) from the softmax of one row block at a
    # time, then the calibration by row blocks in place of the logits: the
    # command holds the logits and a few bytes a row.
    before, old = None, None
    if labels is not None:
        softmax = partial(softmax_temperature, temperature=1.0)
        old = summaries(args, softmax, logits, labels, "before")
    with library_errors():
        after = by_blocks(partial(apply_calibration, fitted=fitted), logits, logits)
    return _finish(args, before, after, labels, fitted, old=old)
