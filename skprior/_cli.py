"""The ``skprior`` command line (``skprior ...`` or ``python -m skprior ...``).

``skprior demo`` fits a model on a shipped dataset; the other commands work on
stored model outputs (probabilities or logits in .npy, .npz or .csv files), for
users whose model is not a scikit-learn estimator. Exit codes: 0 success, 2 a
usage or input error (bad option, missing or malformed file, mismatched shapes;
one line on stderr, no traceback), 1 an unexpected error (a bug: traceback).
"""

import argparse
import contextlib
import sys
import textwrap
import time
import traceback
import warnings

import numpy as np

from skprior._cli_io import (
    InputError,
    check_output_path,
    parse_prior,
    read_labels,
    read_logits,
    read_outputs,
    write_array,
)
from skprior._cli_report import check_diagram_path, diagram, report

EXIT_CODES = """\
file formats:
  .npy one array; .npz named arrays (--key picks one; default: the only array,
  else 'predictions', 'proba' or 'logits'; labels: 'labels', 'ground_truth' or
  'y'); .csv/.txt comma-separated numbers, one sample per line, a first line that
  is not all numbers is skipped as a header. Labels are class indices 0..m-1
  (column numbers of the outputs). Outputs written to .npz use the key 'proba'.

exit codes:
  0 success; 2 usage or input error (message on stderr); 1 unexpected error.
"""


def _say(args, message):
    """A progress message on stderr (silenced by --quiet)."""
    if not getattr(args, "quiet", False):
        print(f"skprior {args.command}: {message}", file=sys.stderr)


# -- the demo ------------------------------------------------------------------------


def _demo(args):
    """Fit a model on a shipped dataset and show accuracy before and after CAN."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, PredefinedSplit, train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skprior import CANClassifier
    from skprior.datasets import load_pmlb

    X, y = load_pmlb(args.dataset)
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, test_size=0.5, stratify=y, random_state=args.seed
    )
    X_val, X_test, y_val, y_test = train_test_split(
        X_rest, y_rest, test_size=0.5, stratify=y_rest, random_state=args.seed
    )
    print(
        f"dataset {args.dataset}: {X.shape[0]} rows, {X.shape[1]} features, "
        f"{len(np.unique(y))} classes; train/validation/test "
        f"{len(y_train)}/{len(y_val)}/{len(y_test)}"
    )
    start = time.perf_counter()
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    model.fit(X_train, y_train)
    print(f"fitted {model.steps[-1][1]!r} once ({time.perf_counter() - start:.1f}s)")
    prior = np.unique(y_train, return_counts=True)[1] / len(y_train)

    su = CANClassifier(model, train_prior=prior).fit(X_val, y_val)
    # Tune CAN on the validation half; the fitted model is never refitted.
    half = np.arange(len(y_val)) % 2
    grid = GridSearchCV(
        CANClassifier(model, train_prior=prior),
        {
            "k": [2, 3, 5],
            "tau": [0.5, 0.7, 0.9],
            "alpha": [0.5, 1.0, 2.0],
            "n_iter": [1, 3],
        },
        cv=PredefinedSplit(half),
    ).fit(X_val, y_val)
    before = model.score(X_test, y_test)
    rows = [
        ("model alone", before),
        ("CAN, Su's defaults (k=3, tau=0.9, alpha=1, d=1)", su.score(X_test, y_test)),
        (f"CAN tuned on validation {grid.best_params_}", grid.score(X_test, y_test)),
    ]
    print("test accuracy")
    for label, accuracy in rows:
        print(f"  {accuracy:.4f}  {label}  ({100 * (accuracy - before):+.2f} points)")
    return 0


# -- shared steps of the commands on stored outputs ------------------------------------


def _load(args, path=None):
    """Read the outputs file (``args.outputs`` unless ``path``) as probabilities."""
    path = args.outputs if path is None else path
    start = time.perf_counter()
    proba = read_outputs(path, key=args.key, logits=args.logits)
    _say(
        args,
        f"read {path}: {proba.shape[0]} rows, {proba.shape[1]} classes "
        f"({time.perf_counter() - start:.1f}s)",
    )
    return proba


def _load_labels(args, path, proba):
    return read_labels(path, proba.shape[0], proba.shape[1], key=args.labels_key)


def _report_labels(args, outputs):
    """The --labels of OUTPUTS (None without), read before any long computation."""
    if args.labels is None:
        return None
    return _load_labels(args, args.labels, outputs)


def _finish(args, before, after, labels, extra=None):
    """Write --output, print the report and draw --diagram (with --labels)."""
    if args.output is not None:
        write_array(args.output, after, extra)
        _say(args, f"wrote {args.output}")
    if labels is not None:
        report(before, after, labels)
    if args.diagram is not None:
        diagram(args.diagram, before, after, labels, f"skprior {args.command}")
        _say(args, f"wrote {args.diagram}")
    return 0


# -- skprior can -------------------------------------------------------------------


def _training_prior(args, n_classes):
    if args.prior is not None:
        return parse_prior(args.prior, n_classes)
    labels = read_labels(args.prior_from_labels, None, n_classes, key=args.labels_key)
    counts = np.bincount(labels, minlength=n_classes).astype(np.float64)
    if np.any(counts == 0):
        missing = np.flatnonzero(counts == 0).tolist()
        raise InputError(
            f"{args.prior_from_labels}: the classes {missing} never occur, so their "
            f"training prior would be 0 and the method divides by it. Pass --prior "
            f"instead."
        )
    return counts / counts.sum()


@contextlib.contextmanager
def _library_errors():
    """Report the library's refusals of bad arguments as input errors."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        raise InputError(str(exc)) from exc


def _can(args):
    """Apply CAN to stored outputs."""
    from skprior import alternating_normalization

    proba = _load(args)
    labels = _report_labels(args, proba)
    prior = _training_prior(args, proba.shape[1])
    reference = None if args.reference is None else _load(args, args.reference)
    start = time.perf_counter()
    with _library_errors():
        adjusted = alternating_normalization(
            proba,
            prior,
            k=args.k,
            tau=args.tau,
            alpha=args.alpha,
            n_iter=args.n_iter,
            reference=reference,
        )
    changed = int(np.any(adjusted != proba, axis=1).sum())
    _say(
        args,
        f"CAN changed {changed} of {proba.shape[0]} rows "
        f"({time.perf_counter() - start:.1f}s)",
    )
    return _finish(args, proba, adjusted, labels)


# -- skprior adapt -------------------------------------------------------------------


def _confusion(args, n_classes):
    """Joint confusion matrix P(predicted = i, true = j) of the validation files."""
    if args.val_outputs is None or args.val_labels is None:
        raise InputError(
            "--method bbse needs --val-outputs and --val-labels (labelled "
            "held-out outputs, for the confusion matrix)."
        )
    proba = _load(args, args.val_outputs)
    if proba.shape[1] != n_classes:
        raise InputError(
            f"{args.val_outputs} has {proba.shape[1]} classes but OUTPUTS has "
            f"{n_classes}."
        )
    labels = _load_labels(args, args.val_labels, proba)
    joint = np.zeros((n_classes, n_classes))
    np.add.at(joint, (np.argmax(proba, axis=1), labels), 1.0)
    return joint / joint.sum()


def _test_prior(args, proba, train_prior):
    """The test prior of ``args.method`` and a phrase that says how it was found."""
    from skprior import bbse_test_prior, estimate_test_prior

    n_classes = proba.shape[1]
    if args.method == "known" and args.test_prior is None:
        raise InputError(
            "--method known adjusts to a test prior that you give: pass it with "
            "--test-prior (a comma list such as 0.2,0.8, or a file)."
        )
    if args.method != "known" and args.test_prior is not None:
        raise InputError(
            f"--test-prior is used only with --method known; --method "
            f"{args.method} estimates the test prior. Drop --test-prior, or "
            f"pass --method known."
        )
    if args.method == "known":
        return parse_prior(args.test_prior, n_classes), "given"
    if args.method == "bbse":
        confusion = _confusion(args, n_classes)
        with _library_errors():
            return bbse_test_prior(proba, confusion), "estimated by BBSE"
    with _library_errors():
        result = estimate_test_prior(
            proba,
            train_prior,
            method=args.method,
            solver=args.solver,
            dirichlet_alpha=args.dirichlet_alpha,
            max_iter=args.max_iter,
            tol=args.tol,
        )
    state = "converged" if result.converged else "NOT converged"
    how = f"{args.method.upper()} by {args.solver}, {result.n_iter} iterations, {state}"
    return result.prior, how


def _adapt(args):
    """Estimate the test prior of stored outputs and adapt them to it."""
    from skprior import adjust_to_prior

    proba = _load(args)
    labels = _report_labels(args, proba)
    train_prior = _training_prior(args, proba.shape[1])
    start = time.perf_counter()
    test_prior, how = _test_prior(args, proba, train_prior)
    with _library_errors():
        adjusted = adjust_to_prior(proba, train_prior, test_prior)
    _say(args, f"test prior {how} ({time.perf_counter() - start:.1f}s)")
    print(f"test prior ({how}):")
    print(",".join(f"{value:.6f}" for value in test_prior))
    return _finish(args, proba, adjusted, labels, extra={"prior": test_prior})


# -- skprior calibrate -----------------------------------------------------------------


def _fit_logits(args, logits):
    """The logits and labels the temperature is fitted on."""
    if args.fit_outputs is None:
        fit_logits = logits
    else:
        fit_logits = read_logits(args.fit_outputs, args.key, args.logits)
        if fit_logits.shape[1] != logits.shape[1]:
            raise InputError(
                f"{args.fit_outputs} has {fit_logits.shape[1]} classes but OUTPUTS "
                f"has {logits.shape[1]}."
            )
    labels = read_labels(
        args.fit_labels, fit_logits.shape[0], fit_logits.shape[1], key=args.labels_key
    )
    return fit_logits, labels


def _calibrate(args):
    """Fit a temperature on labelled outputs and apply it to OUTPUTS."""
    from skprior import (
        fit_bias_corrected_temperature,
        fit_temperature,
        softmax_temperature,
    )

    logits = read_logits(args.outputs, args.key, args.logits)
    _say(
        args, f"read {args.outputs}: {logits.shape[0]} rows, {logits.shape[1]} classes"
    )
    labels = _report_labels(args, logits)
    fit_logits, fit_labels = _fit_logits(args, logits)
    start = time.perf_counter()
    bias = None
    with _library_errors():
        if args.method == "bcts":
            temperature, bias = fit_bias_corrected_temperature(fit_logits, fit_labels)
        else:
            temperature = fit_temperature(fit_logits, fit_labels, method=args.method)
        before = softmax_temperature(logits, 1.0)
        after = softmax_temperature(logits, temperature, bias)
    source = args.outputs if args.fit_outputs is None else args.fit_outputs
    _say(args, f"fitted in {time.perf_counter() - start:.1f}s")
    print(
        f"temperature {temperature:.6g} ({args.method}, fitted on "
        f"{fit_logits.shape[0]} rows of {source})"
    )
    extra = {"temperature": np.float64(temperature)}
    if bias is not None:
        extra["bias"] = bias
    return _finish(args, before, after, labels, extra)


# -- the parser ----------------------------------------------------------------------


def _outputs_parser():
    """Options shared by every command on stored outputs."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "outputs",
        metavar="OUTPUTS",
        help="model outputs, one row per sample (.npy, .npz, .csv)",
    )
    parent.add_argument("--key", help="array name inside .npz outputs files")
    parent.add_argument(
        "--logits",
        action="store_true",
        help="the outputs files hold logits: apply a softmax to each row first",
    )
    parent.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the adjusted probabilities here (.npy, .npz, .csv)",
    )
    parent.add_argument(
        "--labels",
        metavar="FILE",
        help="true labels of OUTPUTS: print accuracy, ECE and NLL before and after",
    )
    parent.add_argument(
        "--labels-key", metavar="KEY", help="array name inside .npz labels files"
    )
    parent.add_argument(
        "--diagram",
        metavar="PNG",
        help="with --labels: save a reliability diagram, before and after",
    )
    parent.add_argument(
        "-q", "--quiet", action="store_true", help="no progress messages on stderr"
    )
    return parent


def _add_command(commands, name, handler, parent, help, description):
    command = commands.add_parser(
        name,
        parents=[parent],
        help=help,
        description=textwrap.fill(description, 79),
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.set_defaults(handler=handler)
    return command


def _add_train_prior(command):
    prior = command.add_mutually_exclusive_group(required=True)
    prior.add_argument(
        "--prior",
        metavar="PRIOR",
        help="training prior: a comma list (0.2,0.3,0.5, or counts) or a file "
        "holding one vector",
    )
    prior.add_argument(
        "--prior-from-labels",
        metavar="FILE",
        help="count the training prior from this file of training labels",
    )


def _add_can(commands, parent):
    can = _add_command(
        commands,
        "can",
        _can,
        parent,
        help="apply CAN (alternating normalization) to stored outputs",
        description="Correct the low-confidence rows of OUTPUTS with CAN "
        "(Jia et al., 2021) against the confident rows and the training prior.",
    )
    _add_train_prior(can)
    can.add_argument(
        "--k", type=int, default=3, help="top classes in the uncertainty (3)"
    )
    can.add_argument(
        "--tau",
        type=float,
        default=0.9,
        help="rows with uncertainty >= tau are corrected (0.9)",
    )
    can.add_argument(
        "--alpha",
        type=float,
        default=1.0,
        help="power before each column normalisation (1.0)",
    )
    can.add_argument(
        "--n-iter",
        type=int,
        default=1,
        help="number of alternating normalisation steps (1)",
    )
    can.add_argument(
        "--reference",
        metavar="FILE",
        help="take the confident rows from these outputs (held-out data) "
        "instead of OUTPUTS itself",
    )


def _add_adapt(commands, parent):
    adapt = _add_command(
        commands,
        "adapt",
        _adapt,
        parent,
        help="estimate the test prior of stored outputs and adapt them to it",
        description="Estimate the class prior of the batch OUTPUTS (label "
        "shift) and move its posteriors from the training prior to it by "
        "Bayes' rule; print the test prior. The posteriors should be "
        "calibrated (see 'skprior calibrate'). The training prior must be the "
        "one the posteriors are calibrated to.",
    )
    _add_train_prior(adapt)
    adapt.add_argument(
        "--method",
        choices=["mle", "map", "bbse", "known"],
        default="mle",
        help="mle: maximum likelihood by EM (default); map: with a Dirichlet "
        "hyper-prior; bbse: black-box shift estimation (needs --val-outputs and "
        "--val-labels); known: use --test-prior",
    )
    adapt.add_argument(
        "--solver",
        choices=["em", "squarem", "pga"],
        default="em",
        help="solver of mle/map (em); squarem is faster when classes are absent",
    )
    adapt.add_argument(
        "--dirichlet-alpha",
        type=float,
        default=2.0,
        help="concentration a >= 1 of the map hyper-prior (2.0)",
    )
    adapt.add_argument(
        "--max-iter", type=int, default=10_000, help="iterations of mle/map (10000)"
    )
    adapt.add_argument(
        "--tol", type=float, default=1e-6, help="L1 tolerance of mle/map (1e-6)"
    )
    adapt.add_argument(
        "--test-prior", metavar="PRIOR", help="the known test prior (--method known)"
    )
    adapt.add_argument(
        "--val-outputs", metavar="FILE", help="labelled held-out outputs (bbse)"
    )
    adapt.add_argument(
        "--val-labels", metavar="FILE", help="labels of --val-outputs (bbse)"
    )


def _add_calibrate(commands, parent):
    calibrate = _add_command(
        commands,
        "calibrate",
        _calibrate,
        parent,
        help="fit a temperature on labelled outputs and apply it",
        description="Fit a temperature T on labelled outputs (--fit-outputs, "
        "default OUTPUTS itself, with --fit-labels) and write softmax(logits / T) "
        "of OUTPUTS. Probabilities are read as logits log(p). Prints T.",
    )
    calibrate.add_argument(
        "--fit-labels",
        metavar="FILE",
        required=True,
        help="labels of the outputs the temperature is fitted on",
    )
    calibrate.add_argument(
        "--fit-outputs",
        metavar="FILE",
        help="outputs to fit the temperature on (default: OUTPUTS)",
    )
    calibrate.add_argument(
        "--method",
        choices=["ec", "nll", "bcts"],
        default="ec",
        help="ec: mean confidence = accuracy (default); nll: minimum log loss; "
        "bcts: temperature and class biases by log loss",
    )


def build_parser():
    """The argument parser of the ``skprior`` command."""
    parser = argparse.ArgumentParser(
        prog="skprior",
        description="Improve a classifier's probabilities with the class prior.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="fit a model on a shipped real dataset and show accuracy with CAN",
        description="Fit logistic regression on a shipped PMLB dataset, then "
        "print test accuracy alone, with CAN at Su's defaults, and with CAN tuned "
        "by GridSearchCV on a validation split (the model is fitted once).",
    )
    demo.add_argument("--dataset", choices=["letter", "vowel"], default="letter")
    demo.add_argument("--seed", type=int, default=0, help="random seed of the splits")
    demo.set_defaults(handler=_demo)
    parent = _outputs_parser()
    _add_can(commands, parent)
    _add_adapt(commands, parent)
    _add_calibrate(commands, parent)
    return parser


def _run(args):
    """Run a command; library warnings become one line on stderr."""
    if getattr(args, "diagram", None) is not None and args.labels is None:
        raise InputError("--diagram needs --labels (the true labels of OUTPUTS).")
    if getattr(args, "output", None) is not None:
        check_output_path(args.output)
    if getattr(args, "diagram", None) is not None:
        check_diagram_path(args.diagram)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return args.handler(args)
        finally:  # (also when the command fails: a warning may explain why)
            for warning in caught:
                print(
                    f"skprior {args.command}: warning: {warning.message}",
                    file=sys.stderr,
                )


def main(argv=None):
    """Run the ``skprior`` command; return its exit code (0, 1 or 2)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 0
    try:
        return _run(args)
    except InputError as exc:
        print(f"skprior {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"skprior {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        print(
            f"skprior {args.command}: unexpected error (a bug: please report it "
            f"with the traceback above)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
