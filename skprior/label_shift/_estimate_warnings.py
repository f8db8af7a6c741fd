"""The run-time warnings of an estimated test prior.

An estimate that is noise rather than a prior (fewer rows than classes; a
weak or miscalibrated model driving classes to ~0), or the constrained
optimum rather than the MLE (classes pinned at 0 by ``init``), says so
when it is made, with the fix: :func:`~skprior.estimate_test_prior` (MLE,
MAP) and BBSE from the counts of hard predictions.
"""

import numpy as np

from skprior._utils._validation import warn_user
from skprior.label_shift._solvers import _Problem, mean_posterior


def warn_if_pinned(proba, train_prior, tol, start, prior):
    """Warn when classes that ``init`` puts at 0, where EM keeps them, would rise.

    At the MLE a class at 0 has likelihood gradient ``g_k <= 1``; above 1 the
    data pull it up, and the estimate is the constrained one, not the MLE.
    One more pass, only when ``init`` has zeros. Returns whether it warned.
    """
    gradient, _ = _Problem(proba, train_prior, 0.0, tol, "em").evaluate(prior)
    pulled = np.flatnonzero((start == 0) & (gradient > 1 + tol))
    if len(pulled):
        warn_user(
            f"init is 0 for classes {pulled.tolist()}, and EM keeps a class at 0 "
            f"where it starts, but the batch pulls them up (likelihood gradient "
            f"{np.round(gradient[pulled], 3).tolist()} > 1): the estimate is "
            f"not the MLE. Pass an init that is positive on them, or "
            f"solver='pga'."
        )
    return len(pulled) > 0


def warn_if_degenerate(proba, train_prior, prior, method):
    """Warn when the estimate is noise or miscalibration rather than a prior.

    Two signs: a batch with fewer rows than classes (a single row's MLE is the
    vertex of its largest ``p_k / q_k``), and classes driven to ~0 that hold
    most of the batch's posterior mass -- a class really absent from the batch
    holds little of it, one removed by a weak or miscalibrated model its share.
    """
    n_rows, n_classes = proba.shape
    fix = (
        "Adapt only batches that a test finds shifted (label_shift_test; "
        "PriorAdaptedClassifier does by default), calibrate the model first"
    )
    # (MAP's own advice is not to use MAP; its estimate is no vertex)
    or_map = ", or use method='map'" if method == "mle" else ""
    if n_rows < n_classes:
        what = "a single row" if n_rows == 1 else f"{n_rows} rows"
        vertex = (
            " (from a single row, the vertex of the largest p_k / q_k), and "
            "posteriors adjusted to it come out near one-hot"
        )
        warn_user(
            f"The {method.upper()} test prior is estimated from {what} for "
            f"{n_classes} classes: it is mostly noise{vertex if or_map else ''}."
            f" Estimate from larger batches or keep the training prior{or_map}.",
        )
        return
    # The classes driven to ~0 (below 1% of their training prior) and the
    # share of the batch's mean posterior they hold: a really absent class
    # holds little of it, one removed by miscalibration or noise its share.
    gone = prior < 1e-2 * train_prior
    if not gone.any():  # (no class driven to ~0: no pass for the mass)
        return
    count, mass = int(gone.sum()), float(mean_posterior(proba)[gone].sum())
    if mass > 0.5:
        warn_user(
            f"The {method.upper()} test prior drives {count} of {n_classes} "
            f"classes to ~0 (below 1% of their training prior) although they "
            f"hold {mass:.0%} of the batch's posterior mass: the signature of a "
            f"weak or class-wise miscalibrated model rather than of absent "
            f"classes, and adapting to it can cost much accuracy and log loss. "
            f"{fix}{or_map}.",
        )


def warn_if_few_predictions(n_rows, n_classes, method):
    """Warn when a batch has fewer rows than classes to count predictions of.

    Most classes then have no prediction, and the estimate from the counts
    is mostly noise: from one row a vertex of the simplex, and posteriors
    adjusted to it one-hot (a true class at probability 0 in a third of the
    2-row batches of 3 classes), as the MLE's from so few rows.
    """
    if n_rows < n_classes:
        what = "a single row" if n_rows == 1 else f"{n_rows} rows"
        warn_user(
            f"The {method} test prior is estimated from the hard predictions of "
            f"{what} for {n_classes} classes: most classes have none, the "
            f"estimate is mostly noise, and posteriors adjusted to it come out "
            f"near one-hot. Estimate from larger batches or keep the training "
            f"prior."
        )
