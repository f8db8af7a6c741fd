"""``skprior demo``: the main job on a built-in default, for a newcomer.

Fits a model once on a shipped PMLB dataset, then compares its test accuracy
with CAN at its defaults and CAN tuned by ``GridSearchCV`` on a validation
split (the model is never refitted).
"""

import time

import numpy as np

from skprior._utils._options import (
    DEFAULT_ALPHA,
    DEFAULT_K,
    DEFAULT_N_ITER,
    DEFAULT_TAU,
)


def demo(args):
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

    default = CANClassifier(model, train_prior=prior).fit(X_val, y_val)
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
    defaults = (
        f"k={DEFAULT_K}, tau={DEFAULT_TAU}, alpha={DEFAULT_ALPHA}, "
        f"n_iter={DEFAULT_N_ITER}"
    )
    rows = [
        ("model alone", before),
        (f"CAN at its defaults ({defaults})", default.score(X_test, y_test)),
        (f"CAN tuned on validation {grid.best_params_}", grid.score(X_test, y_test)),
    ]
    print("test accuracy")
    for label, accuracy in rows:
        print(f"  {accuracy:.4f}  {label}  ({100 * (accuracy - before):+.2f} points)")
    return 0
