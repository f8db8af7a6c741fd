"""Coverage and size of prediction sets under label shift, on the stored CIFAR outputs.

Protocol (issue 27):

* Each stored output (10,000 test rows of a CIFAR network) is split at random,
  stratified, into a labelled half (calibration) and a test pool, ``--splits``
  times. On each split the posteriors are calibrated by BCTS
  (``fit_bias_corrected_temperature`` on the log posteriors of the labelled
  half), as a user would before estimating a prior, and the same labelled
  half is the conformal calibration set (as in ``PriorAdaptedClassifier``,
  whose ``fit`` data serves for both).
* Per split, ``--batches`` test batches of ``--n`` rows (1,000): class
  proportions from Dirichlet(``--concentration`` = 0.1), counts multinomial,
  rows drawn from the pool class by class with replacement. ``--no-shift``
  draws at the pool's own class frequencies instead.
* Sets at ``--alpha`` (0.1), LAC score, from the same calibration rows:
  ``split`` (plain split conformal, skprior), ``MAPIE split`` (MAPIE's
  ``SplitConformalClassifier``, LAC, prefit, on the same rows), ``split,
  delta`` (split conformal at the training-conditional level), ``weighted``
  (Podkopaev and Ramdas: the prior ratio with the batch's EM estimate, the
  default of ``conformal_prediction_set``, ``delta=0.15``), ``weighted,
  marginal`` (the same with ``delta=None``), ``weighted, oracle`` (the ratio
  of the batch's true class frequencies, for reference) and ``class`` (the
  class-conditional sets). ``--score aps`` for the APS score.
* Reported per output and method: the per-batch coverage (mean, 10th
  percentile, worst) and the mean set size, with its ratio to plain split
  conformal's. The targets: 10th percentile >= 0.875, mean in 0.885-0.93,
  size <= 1.25x split's (``weighted``); without shift, sets that match split
  conformal's at the same ``delta`` (the share of rows with the same set is
  printed).

Run (a few minutes): ``python benchmarks/bench_prediction_sets.py``; the full
run of the documented figures: ``--splits 10 --batches 50`` (500 batches per
output) and the same with ``--no-shift``.
"""

import argparse
import importlib.util
import time
import warnings

import numpy as np
from _common import StoredOutputsClassifier
from _data import CIFAR_OUTPUTS, load_model_outputs

from skprior import (
    conformal_prediction_set,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    softmax_temperature,
)

METHODS = (
    "split",
    "MAPIE split",
    "split, delta",
    "weighted",
    "weighted, marginal",
    "weighted, oracle",
    "class",
    "class, marginal",
)


# (weighted, split) pairs whose sets are compared row by row (no shift: equal)
PAIRS = (("weighted", "split, delta"), ("weighted, marginal", "split"))


def calibrated_halves(proba, labels, rng):
    """(cal proba, cal labels, pool proba, pool labels), BCTS-calibrated."""
    n_classes = proba.shape[1]
    cal = np.zeros(len(labels), dtype=bool)
    for k in range(n_classes):  # (stratified halves)
        rows = np.flatnonzero(labels == k)
        cal[rng.choice(rows, size=len(rows) // 2, replace=False)] = True
    with np.errstate(divide="ignore"):
        logits = np.log(proba.astype(np.float64))
    logits = np.maximum(logits, -1e3)  # (a posterior of 0: a finite logit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, bias = fit_bias_corrected_temperature(logits[cal], labels[cal])
    calibrated = softmax_temperature(logits, t, bias)
    return calibrated[cal], labels[cal], calibrated[~cal], labels[~cal]


# MAPIE is a peer, not a dependency: its column where it installs (pip install
# mapie), left out with a note otherwise.
HAVE_MAPIE = importlib.util.find_spec("mapie") is not None


def mapie_sets(proba_cal, y_cal, proba_test, alpha):
    """MAPIE's split-conformal LAC sets on the same calibration rows."""
    from mapie.classification import SplitConformalClassifier

    n_cal = len(y_cal)
    model = StoredOutputsClassifier(np.vstack([proba_cal, proba_test])).fit()
    mapie = SplitConformalClassifier(
        model, confidence_level=1 - alpha, conformity_score="lac", prefit=True
    )
    mapie.conformalize(np.arange(n_cal)[:, None], y_cal)
    rows = n_cal + np.arange(len(proba_test))
    return mapie.predict_set(rows[:, None])[1][:, :, 0]


def run_split(proba, labels, args, rng):
    """{method: [(coverage, size), ...]} and the no-shift agreement, one split."""
    p_cal, y_cal, p_pool, y_pool = calibrated_halves(proba, labels, rng)
    n_classes = proba.shape[1]
    by_class = [np.flatnonzero(y_pool == k) for k in range(n_classes)]
    q_cal = np.bincount(y_cal, minlength=n_classes) / len(y_cal)
    out = {method: [] for method in METHODS}
    same = {pair: [] for pair in PAIRS}
    for _ in range(args.batches):
        if args.no_shift:
            prior = np.array([len(rows) for rows in by_class]) / len(y_pool)
        else:
            prior = rng.dirichlet(np.full(n_classes, args.concentration))
        counts = rng.multinomial(args.n, prior)
        idx = np.concatenate([rng.choice(by_class[k], m) for k, m in enumerate(counts)])
        batch, y = p_pool[idx], y_pool[idx]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimate = estimate_test_prior(batch, q_cal, solver="squarem").prior
            common = {"alpha": args.alpha, "score": args.score, "delta": args.delta}
            marginal = {**common, "delta": None}
            sets = {
                "split": conformal_prediction_set(
                    p_cal, y_cal, batch, mode="split", **marginal
                ),
                "split, delta": conformal_prediction_set(
                    p_cal, y_cal, batch, mode="split", **common
                ),
                "weighted": conformal_prediction_set(
                    p_cal, y_cal, batch, test_prior=estimate, **common
                ),
                "weighted, marginal": conformal_prediction_set(
                    p_cal, y_cal, batch, test_prior=estimate, **marginal
                ),
                "weighted, oracle": conformal_prediction_set(
                    p_cal, y_cal, batch, test_prior=counts / args.n, **common
                ),
                "class": conformal_prediction_set(
                    p_cal, y_cal, batch, mode="class", **common
                ),
                "class, marginal": conformal_prediction_set(
                    p_cal, y_cal, batch, mode="class", **marginal
                ),
            }
            if args.score == "lac" and HAVE_MAPIE:
                sets["MAPIE split"] = mapie_sets(p_cal, y_cal, batch, args.alpha)
        for method, s in sets.items():
            out[method].append((s[np.arange(args.n), y].mean(), s.sum(axis=1).mean()))
        for method, plain in PAIRS:
            agree = np.all(sets[method] == sets[plain], axis=1).mean()
            same[method, plain].append(agree)
    return out, same


def report(name, results, same, args):
    split_size = np.mean([size for _, size in results["split"]])
    print(f"\n{name}  ({len(results['split'])} batches)")
    print(
        f"  {'method':18s} {'mean cov':>9s} {'p10 cov':>8s} {'worst':>7s} "
        f"{'size':>7s} {'x split':>8s}"
    )
    for method, values in results.items():
        if not values:
            continue
        coverage, size = np.array(values).T
        print(
            f"  {method:18s} {coverage.mean():9.4f} "
            f"{np.percentile(coverage, 10):8.4f} {coverage.min():7.4f} "
            f"{size.mean():7.3f} {size.mean() / split_size:8.3f}"
        )
    if args.no_shift:
        for (method, plain), shares in same.items():
            print(f"  rows whose {method!r} set is {plain!r}'s: {np.mean(shares):.4f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cifar", nargs="*", default=list(CIFAR_OUTPUTS))
    parser.add_argument("--splits", type=int, default=4)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--concentration", type=float, default=0.1)
    parser.add_argument("--delta", type=float, default=0.15)
    parser.add_argument("--score", default="lac", choices=["lac", "aps"])
    parser.add_argument("--no-shift", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.score == "lac" and not HAVE_MAPIE:
        print("MAPIE is not installed (pip install mapie): its column is left out.")
    start = time.perf_counter()
    for name in args.cifar:
        rng = np.random.default_rng(args.seed)
        proba, labels = load_model_outputs(name)
        results = {method: [] for method in METHODS}
        same = {pair: [] for pair in PAIRS}
        for _ in range(args.splits):
            out, agree = run_split(proba, labels, args, rng)
            for method in METHODS:
                results[method] += out[method]
            for method in same:
                same[method] += agree[method]
        report(name, results, same, args)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
