"""The ``skprior`` command line (``skprior ...`` or ``python -m skprior ...``)."""

import argparse
import sys
import time


def _demo(args):
    """Fit a model on a shipped dataset and show accuracy before and after CAN."""
    import numpy as np
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


def build_parser():
    """The argument parser of the ``skprior`` command."""
    parser = argparse.ArgumentParser(
        prog="skprior",
        description="Improve a classifier's probabilities with the class prior.",
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
    return parser


def main(argv=None):
    """Run the ``skprior`` command; return its exit code."""
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
