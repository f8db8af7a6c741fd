"""How much of the oracle's gain MLE can reach when calibration is perfect.

``bench_label_shift.py`` measures, per cell, the share of the oracle's median
accuracy gain that MLE recovers from calibrated posteriors. This script asks
what share is attainable at all with those posteriors and that test-set size:
it takes the BCTS-calibrated posteriors of each dataset and model as the truth
and draws every pool row's label from its own posterior, so the posteriors are
perfectly calibrated by construction. It then runs the same protocol on these
labels: test sets of n rows from ``draw_test_set`` at the same shifts, the
realised frequencies as the oracle's prior, MLE (SQUAREM) with the mean
posterior on the validation split as the source prior, Δaccuracy against the
unadapted posteriors. What separates this ratio from 1 is the sampling noise
of estimating the prior from n rows with posteriors this sharp; what separates
the real cell from this ratio is calibration.

Run: ``python benchmarks/bench_label_shift_ceiling.py`` (and ``--n 5000``).
"""

import argparse
import sys
import time
import warnings
import zlib
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_label_shift import (  # noqa: E402
    CIFAR,
    PMLB,
    SHIFTS,
    datasets,
    draw_test_set,
    median_points,
)

from skprior import adjust_to_prior, estimate_test_prior  # noqa: E402


def labels_from(proba, rng):
    """One label per row, drawn from the row's own posterior."""
    return (proba.cumsum(axis=1) > rng.uniform(size=(len(proba), 1))).argmax(axis=1)


def ceiling_cell(proba_pool, y_pool, q, shift, n, n_trials, rng):
    """Per-trial accuracy change of the oracle and MLE, and MLE's L1 error."""
    by_class = [np.flatnonzero(y_pool == c) for c in range(proba_pool.shape[1])]
    out = {"oracle": [], "MLE": [], "L1": []}
    for _ in range(n_trials):
        idx, truth = draw_test_set(by_class, shift, n, rng)
        y, proba = y_pool[idx], proba_pool[idx]
        base = np.mean(proba.argmax(axis=1) == y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            mle = estimate_test_prior(proba, q, solver="squarem").prior
        for name, prior in (("oracle", truth), ("MLE", mle)):
            adjusted = adjust_to_prior(proba, q, prior)
            out[name].append(100 * (np.mean(adjusted.argmax(axis=1) == y) - base))
        out["L1"].append(np.abs(mle - truth).sum())
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--shifts", nargs="*", default=list(SHIFTS[:2]))
    parser.add_argument("--out", default=None)
    parser.add_argument("--pmlb", nargs="*", default=list(PMLB))
    parser.add_argument("--cifar", nargs="*", default=list(CIFAR))
    args = parser.parse_args()

    start = time.perf_counter()
    lines = [
        "| dataset | model | shift | oracle | MLE | ratio | L1 MLE |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, model_name, sets, _, _, _, _ in datasets(args.pmlb, args.cifar):
        proba_val, proba_pool = sets["BCTS"]
        label_rng = np.random.default_rng(zlib.crc32(f"{name}/{model_name}".encode()))
        y_pool = labels_from(proba_pool, label_rng)
        q = proba_val.mean(axis=0)
        q /= q.sum()
        for shift in args.shifts:
            s = SHIFTS.index(shift)
            rng = np.random.default_rng([zlib.crc32(name.encode()), s])
            cell = ceiling_cell(proba_pool, y_pool, q, shift, args.n, args.trials, rng)
            oracle, mle = median_points(cell["oracle"]), median_points(cell["MLE"])
            ratio = f"{mle / oracle:.3f}" if oracle >= 0.5 else "\u2013"
            lines.append(
                f"| {name} | {model_name} | {shift} | {oracle:+.2f} | {mle:+.2f} "
                f"| {ratio} | {np.median(cell['L1']):.3f} |"
            )
        print(
            f"{name} / {model_name}: {time.perf_counter() - start:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    header = (
        f"Labels drawn from the BCTS posteriors; n = {args.n} per test set, "
        f"{args.trials} trials per cell; total "
        f"{(time.perf_counter() - start) / 60:.1f} min."
    )
    text = "\n".join([header, "", *lines]) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    with threadpool_limits(1):
        main()
