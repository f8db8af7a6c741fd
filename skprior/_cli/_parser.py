"""The ``skprior`` command line (``skprior ...`` or ``python -m skprior ...``).

``skprior demo`` fits a model on a shipped dataset; the other commands work on
stored model outputs (probabilities or logits in .npy, .npz or .csv files), for
users whose model is not a scikit-learn estimator. Exit codes: 0 success, 2 a
usage or input error (bad option, missing or malformed file, mismatched shapes;
one line on stderr, no traceback), 1 an unexpected error (a bug: traceback).

This module builds the parser from :mod:`skprior._utils._options` alone, so that
``--help`` and ``--version`` answer without importing NumPy, SciPy or
scikit-learn; the commands themselves live in :mod:`skprior._cli._commands`.
"""

import argparse
import re
import sys
import textwrap

from skprior import __version__
from skprior._cli._common import MEMORY_FACTOR
from skprior._utils._options import (
    DEFAULT_ALPHA,
    DEFAULT_DIRICHLET_ALPHA,
    DEFAULT_K,
    DEFAULT_MAX_ITER,
    DEFAULT_N_ITER,
    DEFAULT_PRIOR_METHOD,
    DEFAULT_REG_LAMBDA,
    DEFAULT_REG_MU,
    DEFAULT_SHIFT_LEVEL,
    DEFAULT_SOLVER,
    DEFAULT_TAU,
    DEFAULT_TEMPERATURE_METHOD,
    DEFAULT_TOL,
    DEFAULT_UNCERTAINTY,
    ESTIMATOR_CALIBRATION_METHODS,
    PRIOR_METHODS,
    SHIPPED_DATASETS,
    SOLVERS,
    UNCERTAINTY_KINDS,
)

EXIT_CODES = """\
file formats:
  .npy one array; .npz named arrays (--key picks one; default: the only array,
  else 'predictions', 'proba' or 'logits'; labels: 'labels', 'ground_truth' or
  'y'); .csv/.txt numbers separated by commas (or by spaces or tabs, as
  numpy.savetxt writes), one sample per line (UTF-8, a BOM is fine). A first
  line with no numbers, or pandas' default header 0,1,...,K-1 over float
  lines, is skipped as a header and reported; any other line that is not all
  numbers is an error. Labels are class indices 0..m-1 (column
  numbers of the outputs). Outputs written to .npz use the key 'proba'.

exit codes:
  0 success; 2 usage or input error (one line on stderr); 1 unexpected error;
  130 interrupted (Ctrl-C); 141 the reader of stdout left (| head).
"""

# What each method of a --method option does, for its help (the choices and
# the default come from skprior._utils._options).
ADAPT_METHODS_HELP = {
    "mle": "maximum likelihood (EM or --solver)",
    "map": "with a Dirichlet hyper-prior (--dirichlet-alpha)",
    "bbse": "black-box shift estimation (needs --val-outputs and --val-labels)",
    "rlls": "BBSE regularised towards no shift (needs --val-outputs, --val-labels)",
    "known": "use --test-prior",
}
CALIBRATION_METHODS_HELP = {
    "ec": "mean confidence = accuracy",
    "nll": "minimum log loss",
    "bcts": "temperature and class biases by log loss",
    "nbvs": "one factor per class by log loss (no-bias vector scaling)",
    "vs": "one factor and one bias per class by log loss (vector scaling)",
    "dirichlet": "Dirichlet calibration, a K x K matrix with ODIR "
    "(--reg-lambda, --reg-mu)",
}
# Options whose value is a comma list that may start with a minus sign, which
# argparse would take for an option ("--test-prior -1,1,1").
LIST_OPTIONS = ("--prior", "--test-prior")
_NEGATIVE_FIRST = re.compile(r"^-\.?[0-9]")


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error message (argparse prints the usage too)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help').\n")


def _or_auto(convert, what):
    """An option type: ``convert(text)``, or "auto" (ranges: the library's)."""

    def read(text):
        if text == "auto":
            return text
        try:
            return convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is neither {what} nor 'auto'"
            ) from None

    return read


def _seed(text):
    """--seed: an integer 0 .. 2**32 - 1 (what NumPy's generators take)."""
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if not 0 <= seed < 2**32:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a seed: give a whole number from 0 to 4294967295"
        )
    return seed


_k = _or_auto(int, "an integer")  # --k
_reg_lambda = _or_auto(float, "a number")  # --reg-lambda


# The help of each option, by flag (for --method: the tables above). Its choices
# and defaults are the library's, from skprior._utils._options.
HELP = {
    "outputs": "model outputs, one row per sample (.npy, .npz, .csv)",
    "--key": "array name inside .npz outputs files",
    "--logits": "every outputs file of the command holds logits: apply a softmax to "
    "each row first (a file of probabilities is refused)",
    "--output": "write the adjusted probabilities here (.npy, .npz, .csv)",
    "--labels": "true labels of OUTPUTS: print accuracy, ECE and NLL before and after "
    "(out of core: accuracy and ECE)",
    "--labels-key": "array name inside .npz labels files",
    "--diagram": "with --labels: save a reliability diagram, before and after",
    "--quiet": "no progress messages on stderr",
    "--out-of-core": "process a .npy OUTPUTS block by block with Dask (automatic for "
    ".zarr, and for a .npy file whose in-memory run would take over half the "
    "available memory: its size times "
    + ", ".join(f"{factor:g} for {name}" for name, factor in MEMORY_FACTOR.items())
    + ")",
    "--prior": "training prior: a comma list (0.2,0.3,0.5, or counts; one entry per "
    "class) or a file holding one vector",
    "--prior-from-labels": "count the training prior from this file of training labels",
    "--k": "top classes in the uncertainty: an integer >= 2, or auto = min(3, "
    "classes) (default: %(default)s)",
    "--uncertainty": "the uncertainty measure compared with tau (default: %(default)s)",
    "--tau": "rows with uncertainty >= tau are corrected (default: %(default)s)",
    "--alpha": "power before each column normalisation (default: %(default)s)",
    "--n-iter": "number of alternating normalisation steps (default: %(default)s)",
    "--reference": "take the confident rows from these outputs (held-out data) "
    "instead of OUTPUTS itself",
    "--solver": f"solver of mle/map (default: {DEFAULT_SOLVER}, the fastest; em "
    f"is plain EM)",
    "--dirichlet-alpha": f"concentration a >= 1 of the map hyper-prior (default: "
    f"{DEFAULT_DIRICHLET_ALPHA})",
    "--max-iter": f"iterations of mle/map (default: {DEFAULT_MAX_ITER})",
    "--tol": f"L1 tolerance of mle/map (default: {DEFAULT_TOL})",
    "--test-prior": "the known test prior (--method known): a comma list or a file",
    "--shift-level": f"level of the test of no shift run before adapting (default: "
    f"{DEFAULT_SHIFT_LEVEL}); 1 adapts every batch",
    "--val-outputs": "held-out outputs without shift: the reference of the test of "
    "no shift (recommended), and with --val-labels the confusion matrix of bbse "
    "and rlls",
    "--val-labels": "labels of --val-outputs (bbse, rlls; for mle/map they recentre "
    "the interval of the batch's class proportions on the model's misfit)",
    "--fit-labels": "labels of the outputs the temperature is fitted on",
    "--fit-outputs": "outputs to fit the temperature on (default: OUTPUTS)",
    "--reg-lambda": f"dirichlet: off-diagonal penalty lambda >= 0, or 'auto' (chosen "
    f"by cross-validation) (default: {DEFAULT_REG_LAMBDA})",
    "--reg-mu": f"dirichlet: bias penalty mu >= 0 (default: {DEFAULT_REG_MU}, that "
    f"is mu = lambda)",
    "--seed": "random seed of the splits",
}


def _add(parser, *flags, **kwargs):
    """``parser.add_argument(*flags, ...)`` with the help of its last flag in HELP."""
    kwargs.setdefault("help", HELP.get(flags[-1]))
    return parser.add_argument(*flags, **kwargs)


def _add_method(parser, helps, choices, default):
    """--method: the library's choices and default, each described by ``helps``."""
    described = "; ".join(f"{name}: {helps.get(name, name)}" for name in choices)
    help = f"{described} (default: {default})"
    _add(parser, "--method", choices=choices, default=default, help=help)


def _outputs_parser():
    """Options shared by every command on stored outputs."""
    parent = argparse.ArgumentParser(add_help=False)
    _add(parent, "outputs", metavar="OUTPUTS")
    _add(parent, "--key")
    _add(parent, "--logits", action="store_true")
    _add(parent, "-o", "--output", metavar="FILE")
    _add(parent, "--labels", metavar="FILE")
    _add(parent, "--labels-key", metavar="KEY")
    _add(parent, "--diagram", metavar="PNG")
    _add(parent, "-q", "--quiet", action="store_true")
    _add(parent, "--out-of-core", action="store_true")
    return parent


# The commands on stored outputs: their help in the list of commands, and their
# description.
COMMANDS = {
    "can": (
        "apply CAN (alternating normalization) to stored outputs",
        "Correct the low-confidence rows of OUTPUTS with CAN (Jia et al., 2021) "
        "against the confident rows and the training prior.",
    ),
    "adapt": (
        "estimate the test prior of stored outputs and adapt them to it",
        "Estimate the class prior of the batch OUTPUTS (label shift) and move its "
        "posteriors from the training prior to it by Bayes' rule; print the test "
        "prior. First a test of no shift compares the batch's mean posterior with "
        "that of --val-outputs (the model's outputs on validation data) or, "
        "without them, with the training prior; a batch it finds unshifted is "
        "left as it is (--shift-level), and so is one that differs only from the "
        "training prior, which a miscalibrated model's batch does without any "
        "shift: pass --val-outputs. The posteriors should be calibrated (see "
        "'skprior calibrate'). The training prior must be the one the posteriors "
        "are calibrated to.",
    ),
    "calibrate": (
        "fit a calibration on labelled outputs and apply it",
        "Fit a calibration on labelled outputs (--fit-outputs, default OUTPUTS "
        "itself, with --fit-labels) and apply it to OUTPUTS: a temperature T "
        "(softmax(logits / T), with class biases for bcts), one factor per class "
        "(nbvs, vs) or Dirichlet calibration. Probabilities are read as logits "
        "log(p). Prints what was fitted.",
    ),
}


def _add_command(commands, name, parent):
    help, description = COMMANDS[name]
    return commands.add_parser(
        name,
        parents=[parent],
        help=help,
        description=textwrap.fill(description, 79),
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _add_train_prior(command):
    prior = command.add_mutually_exclusive_group(required=True)
    _add(prior, "--prior", metavar="PRIOR")
    _add(prior, "--prior-from-labels", metavar="FILE")


def build_parser():
    """The argument parser of the ``skprior`` command."""
    parser = _Parser(
        prog="skprior",
        description="Improve a classifier's probabilities with the class prior.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"skprior {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="fit a model on a shipped real dataset and show accuracy with CAN",
        description="Fit logistic regression on a shipped PMLB dataset, then "
        "print test accuracy alone, with CAN at its defaults, and with CAN tuned "
        "by GridSearchCV on a validation split (the model is fitted once).",
    )
    _add(demo, "--dataset", choices=SHIPPED_DATASETS, default=SHIPPED_DATASETS[0])
    _add(demo, "--seed", type=_seed, default=0)

    # The commands on stored outputs: their shared options, then each one's.
    parent = _outputs_parser()
    can = _add_command(commands, "can", parent)
    _add_train_prior(can)
    _add(can, "--k", type=_k, default=DEFAULT_K)
    _add(can, "--uncertainty", choices=UNCERTAINTY_KINDS, default=DEFAULT_UNCERTAINTY)
    _add(can, "--tau", type=float, default=DEFAULT_TAU)
    _add(can, "--alpha", type=float, default=DEFAULT_ALPHA)
    _add(can, "--n-iter", type=int, default=DEFAULT_N_ITER)
    _add(can, "--reference", metavar="FILE")

    adapt = _add_command(commands, "adapt", parent)
    _add_train_prior(adapt)
    _add_method(adapt, ADAPT_METHODS_HELP, PRIOR_METHODS, DEFAULT_PRIOR_METHOD)
    # (default None: an option the method does not use is refused, not ignored)
    _add(adapt, "--solver", choices=SOLVERS)
    _add(adapt, "--dirichlet-alpha", type=float)
    _add(adapt, "--max-iter", type=int)
    _add(adapt, "--tol", type=float)
    _add(adapt, "--test-prior", metavar="PRIOR")
    _add(adapt, "--shift-level", type=float)
    _add(adapt, "--val-outputs", metavar="FILE")
    _add(adapt, "--val-labels", metavar="FILE")

    calibrate = _add_command(commands, "calibrate", parent)
    _add(calibrate, "--fit-labels", metavar="FILE", required=True)
    _add(calibrate, "--fit-outputs", metavar="FILE")
    methods = ESTIMATOR_CALIBRATION_METHODS
    default = DEFAULT_TEMPERATURE_METHOD
    _add_method(calibrate, CALIBRATION_METHODS_HELP, methods, default)
    _add(calibrate, "--reg-lambda", type=_reg_lambda)
    _add(calibrate, "--reg-mu", type=float)
    return parser


def _join_negative_lists(argv):
    """``--test-prior -1,1,1`` as ``--test-prior=-1,1,1``.

    argparse reads a value that starts with "-" and is not a plain negative
    number as the next option, and then reports a missing value: joined, the
    list reaches the prior's own check, which says what is wrong with it.
    """
    joined = []
    for arg in argv:
        if joined and joined[-1] in LIST_OPTIONS and _NEGATIVE_FIRST.match(arg):
            joined[-1] = f"{joined[-1]}={arg}"
        else:
            joined.append(arg)
    return joined


def main(argv=None):
    """Run the ``skprior`` command; return its exit code (0, 1, 2, 130 or 141)."""
    argv = sys.argv[1:] if argv is None else [str(arg) for arg in argv]
    parser = build_parser()
    try:
        args = parser.parse_args(_join_negative_lists(argv))
    except SystemExit as exc:  # --help, --version (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 0
    # (imported only now: NumPy, SciPy and scikit-learn take seconds to load,
    # in which Ctrl-C is the same quiet interrupt as during the command)
    try:
        from skprior._cli._commands import run
    except KeyboardInterrupt:
        print(f"skprior {args.command}: interrupted", file=sys.stderr)
        return 130
    return run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
