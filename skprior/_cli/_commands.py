"""The commands of the ``skprior`` command line (its parser is in ``_parser.py``).

Each command reads its files through :mod:`skprior._cli._io` (which turns any
problem with them into an :class:`InputError`), checks the options the library
cannot see (an option the chosen method does not use is refused, not
ignored), calls the public array functions and writes, prints and draws the
results. :func:`run` turns an input error into one line on stderr and exit
code 2, a library warning into one line on stderr, and anything else into a
traceback and exit code 1 (a bug).
"""

import contextlib
import os
import signal
import sys
import time
import traceback
import warnings
from functools import partial

import numpy as np

from skprior._cli import _blocks as _cli_blocks
from skprior._cli._blocks import wants_out_of_core, why_out_of_core
from skprior._cli._calibrate import _calibrate
from skprior._cli._common import InputError, in_command_words, library_errors
from skprior._cli._demo import demo
from skprior._cli._io import (
    check_not_an_input,
    check_output_path,
    parse_prior,
)
from skprior._cli._progress import passes
from skprior._cli._report import check_diagram_path
from skprior._cli._steps import (
    _check_method_options,
    _finish,
    _labels,
    _load,
    _note,
    _outputs,
    _say,
    by_blocks,
    summaries,
)
from skprior._utils._constraints import constraints
from skprior._utils._options import (
    DEFAULT_DIRICHLET_ALPHA,
    DEFAULT_MAX_ITER,
    DEFAULT_SHIFT_LEVEL,
    DEFAULT_SOLVER,
    DEFAULT_TOL,
    ESTIMATE_METHODS,
)
from skprior._utils._sklearn_compat import validate_parameter_constraints

# -- skprior can -------------------------------------------------------------------

# The options of ``skprior can`` that are keywords of alternating_normalization.
CAN_OPTIONS = ("k", "tau", "alpha", "n_iter", "uncertainty")


def _training_prior(args, n_classes):
    if args.prior is not None:
        return parse_prior(
            args.prior, n_classes, option="--prior", positive=True, note=_note(args)
        )
    path = args.prior_from_labels
    labels = _labels(args, path, "--prior-from-labels", (None, n_classes))
    counts = np.bincount(labels, minlength=n_classes).astype(np.float64)
    if np.any(counts == 0):
        missing = np.flatnonzero(counts == 0).tolist()
        raise InputError(
            f"--prior-from-labels {path}: the classes {missing} never occur, so "
            f"their training prior would be 0 and the methods divide by it; pass "
            f"--prior instead (a count of at least 1 per class)."
        )
    return counts / counts.sum()


def _can(args):
    """Apply CAN to stored outputs."""
    from skprior.can._can import alternating_normalization_counts

    proba, labels = _outputs(args)
    prior = _training_prior(args, proba.shape[1])
    reference = None
    if args.reference is not None:
        reference = _load(args, args.reference, "--reference", n_classes=proba.shape[1])
    in_memory = isinstance(proba, np.ndarray)
    if not in_memory and args.n_iter > 1 and reference is None:
        raise InputError(
            f"--n-iter {args.n_iter} out of core needs --reference FILE (held-out "
            f"outputs, read into memory): with the batch as its own reference, "
            f"every low-confidence row depends on all the confident rows at each "
            f"step. Pass --reference, or --n-iter 1, or run in memory."
        )
    # In memory, the rows' summaries of --labels are taken first, then CAN
    # writes its result in place of the input, which the command read for
    # itself: it holds one array of the input's size (out of core, the
    # result is computed when written).
    old = None
    if in_memory and labels is not None:
        old = summaries(args, None, proba, labels, "before")
    start = time.perf_counter()
    options = {name: getattr(args, name) for name in CAN_OPTIONS}
    with library_errors():
        adjusted, n_low, _ = alternating_normalization_counts(
            proba,
            prior,
            reference=reference,
            out=proba if in_memory else None,
            **options,
        )
    if in_memory:
        _say(
            args,
            f"CAN corrected {n_low} of {proba.shape[0]} rows, those of top-k "
            f"uncertainty >= tau ({time.perf_counter() - start:.1f}s)",
        )
        proba = None
    return _finish(args, proba, adjusted, labels, old=old)


# -- skprior adapt -------------------------------------------------------------------


# The adapt options that only some methods use, and their defaults.
ADAPT_OPTIONS = {
    "--solver": (ESTIMATE_METHODS, DEFAULT_SOLVER),
    "--max-iter": (ESTIMATE_METHODS, DEFAULT_MAX_ITER),
    "--tol": (ESTIMATE_METHODS, DEFAULT_TOL),
    "--dirichlet-alpha": (("map",), DEFAULT_DIRICHLET_ALPHA),
    "--test-prior": (("known",), None),
    "--val-outputs": ((*ESTIMATE_METHODS, "bbse", "rlls"), None),
    "--val-labels": ((*ESTIMATE_METHODS, "bbse", "rlls"), None),
    "--shift-level": ((*ESTIMATE_METHODS, "bbse", "rlls"), DEFAULT_SHIFT_LEVEL),
}


def _check_adapt_options(args):
    """The adapt options: those of --method only, and what each method needs."""
    _check_method_options(args, ADAPT_OPTIONS)
    if args.method == "known" and args.test_prior is None:
        raise InputError(
            "--method known adjusts to a test prior that you give: pass it with "
            "--test-prior (a comma list such as 0.2,0.8, or a file)."
        )
    if args.method in ("bbse", "rlls") and None in (args.val_outputs, args.val_labels):
        raise InputError(
            f"--method {args.method} needs --val-outputs and --val-labels (labelled "
            "held-out outputs, for the confusion matrix)."
        )
    if args.val_labels is not None and args.val_outputs is None:
        raise InputError(
            "--val-labels are the labels of --val-outputs: pass the model's "
            "outputs on the labelled validation data with --val-outputs too."
        )


def _test_prior(args, proba, train_prior):
    """The test prior of ``args.method``, how it was found, whether it is used.

    Returns the prior, a phrase that says how it was found, whether the
    posteriors are adapted to it (False: it is the training prior, kept), and
    the 95% interval of the batch's class proportions (MLE and MAP estimates;
    else None).

    The library's policy (``shift_gated_prior``): the test of no shift, then
    the estimate only when it finds one. The test is against the posteriors
    of --val-outputs when given (as PriorAdaptedClassifier's, against its
    fit data); otherwise against the training prior, which holds for
    calibrated posteriors only: a rejection there leaves the posteriors
    unchanged, with a warning.
    """
    from skprior import label_shift
    from skprior._utils._validation import warn_user
    from skprior.label_shift._policy import ShiftGate, shift_gated_prior

    n_classes = proba.shape[1]
    if args.method == "known":
        prior = parse_prior(
            args.test_prior, n_classes, option="--test-prior", note=_note(args)
        )
        return prior, "given", True, None
    # Every input is checked before the first pass over a batch that may be
    # larger than memory: the options (by _adapt) and the labelled validation
    # outputs of BBSE and RLLS (in memory only).
    reference, against = train_prior, "the training prior"
    if args.val_outputs is not None:
        reference = _load(args, args.val_outputs, "--val-outputs", n_classes=n_classes)
        against = "--val-outputs"
    labels = None
    if args.val_labels is not None:
        labels = _labels(
            args, args.val_labels, "--val-labels", reference.shape, against
        )
        counts = np.bincount(np.asarray(labels, dtype=np.intp), minlength=n_classes)
        missing = np.flatnonzero(counts == 0)
        if args.method in ("mle", "map") and missing.size:
            # (the interval's recentring needs each class's rows: said now,
            # not after the passes over the batch)
            raise InputError(
                f"--val-labels {args.val_labels} has no row of class "
                f"{', '.join(map(str, missing[:10]))}: the 95% interval is "
                f"recentred on the misfit of every class, measured on its rows. "
                f"Add labelled rows of those classes, or drop --val-labels (the "
                f"interval then assumes calibrated outputs)."
            )
    if args.method in ("bbse", "rlls"):
        with library_errors():
            confusion = label_shift.joint_confusion_matrix(reference, labels)
    found = {"how": f"estimated by {args.method.upper()}"}

    def estimate(batch):
        if args.method == "bbse":
            return label_shift.bbse_test_prior(batch, confusion)
        if args.method == "rlls":
            return label_shift.rlls_test_prior(batch, confusion)
        options = ("method", "solver", "dirichlet_alpha", "max_iter", "tol")
        result = label_shift.estimate_test_prior(
            batch, train_prior, **{name: getattr(args, name) for name in options}
        )
        state = "converged" if result.converged else "NOT converged"
        found["how"] = (
            f"{args.method.upper()} by {args.solver}, {result.n_iter} iterations, "
            f"{result.n_passes} passes, {state}"
        )
        # The batch's class proportions, 95% intervals: honest for a
        # miscalibrated model when labelled validation outputs recentre them.
        calibration = None if labels is None else (reference, labels)
        bounds = result.confidence_interval(0.95, calibration=calibration)
        found["interval"] = (*map(np.asarray, bounds), calibration is not None)
        return np.asarray(result.prior)  # (computes a Dask estimate)

    level = None if args.shift_level == 1 else args.shift_level
    with library_errors():
        gate = None if level is None else ShiftGate(reference)
        prior, shift = shift_gated_prior(proba, train_prior, estimate, gate, level)
    if shift is not None:
        _say(
            args,
            f"test of no shift against {against}: T2 = {shift.statistic:.1f}, "
            f"{shift.dof} dof, p = {shift.pvalue:.3g}",
        )
    interval = found.get("interval")
    if shift is None or (shift.shifted and gate.conclusive):
        return prior, found["how"], True, interval
    if shift.shifted:
        warn_user(
            f"the batch's mean posterior differs from the training prior "
            f"(p = {shift.pvalue:.3g}), but without --val-outputs that cannot "
            f"tell a label shift from a miscalibrated model, whose mean posterior "
            f"differs from its label frequencies with no shift at all (adapting "
            f"then costs accuracy and log loss: up to 7.5 points on the stored "
            f"CIFAR outputs); posteriors left unchanged. Pass --val-outputs (the "
            f"model's outputs on the labelled validation data) to test against "
            f"them, or --shift-level 1 to adapt anyway."
        )
        return prior, "shift or miscalibration (no --val-outputs)", False, None
    why = (
        "too few rows to test for shift"
        if np.isnan(shift.pvalue)
        else f"no shift found (p = {shift.pvalue:.3g} > {level:g})"
    )
    return prior, why, False, None


def _check_estimate_options(args):
    """The options of the estimate, by the library's constraints."""
    names = dict(shift_level="shift_level", method="prior_method", solver="solver")
    names.update(dirichlet_alpha="dirichlet_alpha", max_iter="max_iter", tol="tol")
    with library_errors():
        options = {name: getattr(args, name) for name in names}
        validate_parameter_constraints(constraints(**names), options, "adapt")


def _adapt(args):
    """Estimate the test prior of stored outputs and adapt them to it."""
    _check_adapt_options(args)
    if args.method != "known":
        _check_estimate_options(args)
    proba, labels = _outputs(args)
    train_prior = _training_prior(args, proba.shape[1])
    in_memory = isinstance(proba, np.ndarray)
    if args.method in ("bbse", "rlls") and not in_memory:
        raise InputError(
            f"--method {args.method} is not available out of core; use mle, map "
            f"or known."
        )
    if args.logits and args.method in ESTIMATE_METHODS and not in_memory:
        # (out of core, the estimate's passes read the softmax from a file;
        # writing it is the first read of the logits, which checks them)
        with contextlib.ExitStack() as stack:
            with library_errors():
                proba = stack.enter_context(_cli_blocks.softmax_once(args, proba, _say))
            return _adapt_batch(args, proba, labels, train_prior)
    return _adapt_batch(args, proba, labels, train_prior)


def _adapt_batch(args, proba, labels, train_prior):
    """Adapt ``proba`` (in memory or a Dask array) to its estimated prior."""
    from skprior import adjust_to_prior

    start = time.perf_counter()
    test_prior, how, adapted, interval = _test_prior(args, proba, train_prior)
    adjust = partial(adjust_to_prior, train_prior=train_prior, test_prior=test_prior)
    before, old = proba, None
    if isinstance(proba, np.ndarray):
        # In place, by row blocks, once the rows' summaries of --labels are
        # taken (for the report and the diagram): the command holds its input
        # and a few bytes a row.
        if labels is not None:
            old = summaries(args, None, proba, labels, "before")
        before = None
        adjust = partial(by_blocks, adjust, out=proba)
    with library_errors():
        # (not adapted: the posteriors as read, not Bayes' rule from the
        # training prior to itself, which moves entries by a rounding)
        adjusted = adjust(proba) if adapted else proba
    # (the values printed are the prior the output is adapted to: without an
    # adaptation, the training prior, and the heading says so)
    what = "test prior" if adapted else "not adapted, training prior kept"
    _say(args, f"{what}: {how} ({time.perf_counter() - start:.1f}s)")
    print(f"{what} ({how}):" if adapted else f"{what} ({how}; posteriors unchanged):")
    print(",".join(f"{value:.6f}" for value in test_prior))
    if interval is not None:
        low, high, calibrated = interval
        basis = (
            "recentred on --val-outputs/--val-labels"
            if calibrated
            else "assuming calibrated outputs; --val-labels recentre it"
        )
        print(f"95% interval of the batch's class proportions ({basis}):")
        print("low:  " + ",".join(f"{value:.6f}" for value in low))
        print("high: " + ",".join(f"{value:.6f}" for value in high))
    return _finish(args, before, adjusted, labels, extra={"prior": test_prior}, old=old)


COMMANDS = {"demo": demo, "can": _can, "adapt": _adapt, "calibrate": _calibrate}


def _run(args):
    """Run a command; library warnings become one line on stderr."""
    if getattr(args, "diagram", None) is not None and args.labels is None:
        raise InputError("--diagram needs --labels (the true labels of OUTPUTS).")
    check_not_an_input(args)
    # (--output comes with OUTPUTS; out of core it is checked by _cli_blocks,
    # which writes .npy and .zarr)
    if getattr(args, "output", None) is not None and not wants_out_of_core(args):
        check_output_path(args.output)
    if getattr(args, "diagram", None) is not None:
        check_diagram_path(args.diagram)
    lazy = getattr(args, "outputs", None) is not None and wants_out_of_core(args)
    unasked = lazy and not getattr(args, "out_of_core", False) and why_out_of_core(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with passes(args) if lazy else contextlib.nullcontext():
                return COMMANDS[args.command](args)
        except InputError as exc:
            if not unasked:
                raise
            raise InputError(f"{exc} {unasked}") from exc
        finally:  # (also when the command fails: a warning may explain why)
            # (once each: a step run by row blocks may warn once per block)
            messages = (
                in_command_words(" ".join(str(w.message).split())) for w in caught
            )
            for message in dict.fromkeys(messages):
                print(f"skprior {args.command}: warning: {message}", file=sys.stderr)


def _drop_stdout():
    """Flush stdout, or send what it holds to the null device if it cannot.

    Python would otherwise report the failed flush of stdout again at exit.
    """
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError, ValueError):
        os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (``timeout``, Slurm, ``docker stop``, ``kill``).

    Raised by the signal's handler in the main thread, so that the cleanup a
    Ctrl-C runs (the hidden partial files of an unfinished output) runs too;
    without it the process died at once and left them.
    """

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum, frame):
    raise Terminated(signum)


@contextlib.contextmanager
def _terminations_interrupt():
    """SIGTERM and SIGHUP raise :class:`Terminated` within the block (main thread)."""
    names = [name for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    try:
        before = {
            name: signal.signal(getattr(signal, name), _raise_terminated)
            for name in names
        }
    except ValueError:  # (not the main thread: leave the handlers alone)
        before = {}
    try:
        yield
    finally:
        for name, handler in before.items():
            signal.signal(getattr(signal, name), handler)


def run(args):
    """Run the parsed command; return its exit code (0, 1, 2, 130 or 128 + signal)."""
    try:
        with _terminations_interrupt():
            code = _run(args)
        sys.stdout.flush()  # (a full stdout fails here, not silently at exit)
        return code
    except Terminated as exc:
        print(f"skprior {args.command}: terminated", file=sys.stderr)
        return 128 + exc.signum
    except MemoryError:
        print(
            f"skprior {args.command}: error: not enough memory to run it on these "
            f"inputs in memory; pass --out-of-core (a .npy OUTPUTS is then read "
            f"block by block), or run it on a machine with more memory.",
            file=sys.stderr,
        )
        return 2
    except InputError as exc:
        message = " ".join(str(exc).split())  # one line, whatever numpy said
        print(f"skprior {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"skprior {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of stdout left (skprior adapt ... | head -1): nothing is
        # wrong.
        _drop_stdout()
        return 141  # 128 + SIGPIPE, as a shell reports it
    except OSError as exc:
        # The readers turn their own failures into input errors: this is
        # stdout or a file being written failing (a full disk, /dev/full).
        print(
            f"skprior {args.command}: error: cannot write the results ({exc}); "
            f"free some space or write them elsewhere.",
            file=sys.stderr,
        )
        _drop_stdout()
        return 2
    except Exception:
        traceback.print_exc()
        print(
            f"skprior {args.command}: unexpected error (a bug: please report it "
            f"with the traceback above)",
            file=sys.stderr,
        )
        return 1
