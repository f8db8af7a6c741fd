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
import re
import sys
import time
import traceback
import warnings
from functools import partial

import numpy as np

from skprior._cli import _blocks as _cli_blocks
from skprior._cli._blocks import wants_out_of_core
from skprior._cli._common import InputError
from skprior._cli._demo import demo
from skprior._cli._io import (
    check_not_an_input,
    check_output_path,
    parse_prior,
    read_labels,
    read_logits,
    read_outputs,
    write_array,
)
from skprior._cli._report import check_diagram_path, diagram, print_change, scores
from skprior._utils._constraints import constraints
from skprior._utils._options import (
    DEFAULT_DIRICHLET_ALPHA,
    DEFAULT_MAX_ITER,
    DEFAULT_REG_LAMBDA,
    DEFAULT_REG_MU,
    DEFAULT_SHIFT_LEVEL,
    DEFAULT_SOLVER,
    DEFAULT_TOL,
    ESTIMATE_METHODS,
)
from skprior._utils._sklearn_compat import validate_parameter_constraints


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
    """The --labels of OUTPUTS (None without), read before any long computation."""
    if args.labels is None:
        return None
    return _labels(args, args.labels, "--labels", outputs.shape)


def _outputs(args):
    """OUTPUTS as probabilities, and its --labels (None without).

    Out of core (:mod:`skprior._cli._blocks`), OUTPUTS is a Dask array of row
    blocks, and the labels are read when the report is printed.
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
    return proba, None


def _finish(args, before, after, labels, extra=None):
    """Write --output, print the report and draw --diagram (with --labels)."""
    if not isinstance(before, np.ndarray):  # (out of core: a Dask array)
        return _cli_blocks.finish(args, before, after, _say)
    if args.output is not None:
        write_array(args.output, after, extra)
        _say(args, f"wrote {args.output}")
    if labels is not None:
        print_change(scores(before, labels), scores(after, labels))
    if args.diagram is not None:
        diagram(args.diagram, before, after, labels, f"skprior {args.command}")
        _say(args, f"wrote {args.diagram}")
    return 0


# The library's messages name its parameters; the user typed options.
_PARAMETER = re.compile(r"The '(\w+)' parameter of \w+ ")
_OPTIONS = {"prior": "--prior", "train_prior": "--prior", "test_prior": "--test-prior"}


def _as_option(match):
    name = match.group(1)
    return _OPTIONS.get(name, "--" + name.replace("_", "-")) + " "


@contextlib.contextmanager
def _library_errors():
    """Report the library's refusals of bad arguments as input errors."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        raise InputError(_PARAMETER.sub(_as_option, str(exc))) from exc


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
    from skprior import alternating_normalization

    proba, labels = _outputs(args)
    prior = _training_prior(args, proba.shape[1])
    reference = None
    if args.reference is not None:
        reference = _load(args, args.reference, "--reference", n_classes=proba.shape[1])
    start = time.perf_counter()
    options = {name: getattr(args, name) for name in CAN_OPTIONS}
    with _library_errors():
        adjusted = alternating_normalization(
            proba, prior, reference=reference, **options
        )
    if isinstance(adjusted, np.ndarray):  # (out of core: computed when written)
        changed = int(np.any(adjusted != proba, axis=1).sum())
        _say(
            args,
            f"CAN changed {changed} of {proba.shape[0]} rows "
            f"({time.perf_counter() - start:.1f}s)",
        )
    return _finish(args, proba, adjusted, labels)


# -- skprior adapt -------------------------------------------------------------------


# The adapt options that only some methods use, and their defaults.
ADAPT_OPTIONS = {
    "--solver": (ESTIMATE_METHODS, DEFAULT_SOLVER),
    "--max-iter": (ESTIMATE_METHODS, DEFAULT_MAX_ITER),
    "--tol": (ESTIMATE_METHODS, DEFAULT_TOL),
    "--dirichlet-alpha": (("map",), DEFAULT_DIRICHLET_ALPHA),
    "--test-prior": (("known",), None),
    "--val-outputs": ((*ESTIMATE_METHODS, "bbse", "rlls"), None),
    "--val-labels": (("bbse", "rlls"), None),
    "--shift-level": ((*ESTIMATE_METHODS, "bbse", "rlls"), DEFAULT_SHIFT_LEVEL),
}


# The calibrate options that only some methods use, and their defaults.
CALIBRATE_OPTIONS = {
    "--reg-lambda": (("dirichlet",), DEFAULT_REG_LAMBDA),
    "--reg-mu": (("dirichlet",), DEFAULT_REG_MU),
}


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


def _test_prior(args, proba, train_prior):
    """The test prior of ``args.method``, how it was found, whether it is used.

    Returns the prior, a phrase that says how it was found, and whether the
    posteriors are adapted to it (False: it is the training prior, kept).

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
        return prior, "given", True
    # Every input is checked before the first pass over a batch that may be
    # larger than memory: the options (by the library's constraints) and the
    # labelled validation outputs of BBSE and RLLS (in memory only).
    names = dict(shift_level="shift_level", method="prior_method", solver="solver")
    names.update(dirichlet_alpha="dirichlet_alpha", max_iter="max_iter", tol="tol")
    with _library_errors():
        options = {name: getattr(args, name) for name in names}
        validate_parameter_constraints(constraints(**names), options, "adapt")
    reference, against = train_prior, "the training prior"
    if args.val_outputs is not None:
        reference = _load(args, args.val_outputs, "--val-outputs", n_classes=n_classes)
        against = "--val-outputs"
    if args.method in ("bbse", "rlls"):
        labels = _labels(
            args, args.val_labels, "--val-labels", reference.shape, against
        )
        with _library_errors():
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
        return np.asarray(result.prior)  # (computes a Dask estimate)

    level = None if args.shift_level == 1 else args.shift_level
    with _library_errors():
        gate = None if level is None else ShiftGate(reference)
        prior, shift = shift_gated_prior(proba, train_prior, estimate, gate, level)
    if shift is not None:
        _say(
            args,
            f"test of no shift against {against}: T2 = {shift.statistic:.1f}, "
            f"{shift.dof} dof, p = {shift.pvalue:.3g}",
        )
    if shift is None or (shift.shifted and gate.conclusive):
        return prior, found["how"], True
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
        return prior, "shift or miscalibration (no --val-outputs)", False
    why = (
        "too few rows to test for shift"
        if np.isnan(shift.pvalue)
        else f"no shift found (p = {shift.pvalue:.3g} > {level:g})"
    )
    return prior, why, False


def _adapt(args):
    """Estimate the test prior of stored outputs and adapt them to it."""
    from skprior import adjust_to_prior

    _check_adapt_options(args)
    proba, labels = _outputs(args)
    train_prior = _training_prior(args, proba.shape[1])
    if args.method in ("bbse", "rlls") and not isinstance(proba, np.ndarray):
        raise InputError(
            f"--method {args.method} is not available out of core; use mle, map "
            f"or known."
        )
    start = time.perf_counter()
    test_prior, how, adapted = _test_prior(args, proba, train_prior)
    with _library_errors():
        adjusted = adjust_to_prior(proba, train_prior, test_prior)
    # (the values printed are the prior the output is adapted to: without an
    # adaptation, the training prior, and the heading says so)
    what = "test prior" if adapted else "not adapted, training prior kept"
    _say(args, f"{what}: {how} ({time.perf_counter() - start:.1f}s)")
    print(f"{what} ({how}):" if adapted else f"{what} ({how}; posteriors unchanged):")
    print(",".join(f"{value:.6f}" for value in test_prior))
    return _finish(args, proba, adjusted, labels, extra={"prior": test_prior})


# -- skprior calibrate -----------------------------------------------------------------


def _fit_logits(args, logits):
    """The logits and labels the temperature is fitted on."""
    if args.fit_outputs is None:
        fit_logits, rows_of = logits, "OUTPUTS"
    else:
        fit_logits = _load(
            args, args.fit_outputs, "--fit-outputs", read_logits, logits.shape[1]
        )
        rows_of = "--fit-outputs"
    labels = _labels(args, args.fit_labels, "--fit-labels", fit_logits.shape, rows_of)
    return fit_logits, labels


def _fit_calibration(args, fit_logits, fit_labels):
    """Fit --method; return (what to print, its parameters, saved in .npz)."""
    from skprior.calibration._classifier import fit_calibration

    fitted = fit_calibration(
        args.method,
        fit_logits,
        fit_labels,
        reg_lambda=args.reg_lambda,
        reg_mu=args.reg_mu,
    )
    fitted.pop("cv_scores", None)
    if "matrix" in fitted:
        auto = " (auto)" if args.reg_lambda == "auto" else ""
        return fitted, (
            f"Dirichlet calibration, reg_lambda {fitted['reg_lambda']:.6g}{auto}, "
            f"reg_mu {fitted['reg_mu']:.6g}"
        )
    if "weights" not in fitted:
        return fitted, f"temperature {fitted['temperature']:.6g}"
    weights = fitted["weights"]
    what = f"class factors from {weights.min():.6g} to {weights.max():.6g}"
    bias = fitted.setdefault("bias", np.zeros_like(weights))  # (nbvs: no bias)
    if args.method == "vs":
        what += f", biases from {bias.min():.6g} to {bias.max():.6g}"
    return fitted, what


def _calibrate(args):
    """Fit a calibration on labelled outputs and apply it to OUTPUTS."""
    from skprior import softmax_temperature
    from skprior.calibration._classifier import apply_calibration

    _check_method_options(args, CALIBRATE_OPTIONS)
    logits = _load(args, read=read_logits)
    labels = _report_labels(args, logits)
    fit_logits, fit_labels = _fit_logits(args, logits)
    start = time.perf_counter()
    with _library_errors():
        fitted, what = _fit_calibration(args, fit_logits, fit_labels)
        before = softmax_temperature(logits, 1.0)
        after = apply_calibration(logits, fitted)
    source = args.outputs if args.fit_outputs is None else args.fit_outputs
    _say(args, f"fitted in {time.perf_counter() - start:.1f}s")
    print(f"{what} ({args.method}, fitted on {fit_logits.shape[0]} rows of {source})")
    return _finish(args, before, after, labels, fitted)


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
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return COMMANDS[args.command](args)
        finally:  # (also when the command fails: a warning may explain why)
            for warning in caught:
                message = " ".join(str(warning.message).split())
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


def run(args):
    """Run the parsed command; return its exit code (0, 1, 2 or 130)."""
    try:
        code = _run(args)
        sys.stdout.flush()  # (a full stdout fails here, not silently at exit)
        return code
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
