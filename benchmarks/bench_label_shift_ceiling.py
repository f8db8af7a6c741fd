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

``--refit`` splits that calibration gap. It also draws the validation labels
from the BCTS posteriors and fits EC, NLL and BCTS again on them, with the log
BCTS posteriors as logits. Each calibrator family holds the true posteriors
(a temperature of 1, zero biases), so what the refitted posteriors lose
against the perfect ones is the noise of fitting the calibrator on a
validation split of the real size; the rest of a real cell's gap is
miscalibration that the calibrator cannot represent. Each ratio comes with a
95% bootstrap interval over the trials (``ratio_interval``).

Run: ``python benchmarks/bench_label_shift_ceiling.py`` (and ``--n 5000``,
``--refit``).
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
    CALIBRATIONS,
    CIFAR,
    PMLB,
    SHIFTS,
    calibrated_sets,
    datasets,
    draw_test_set,
    median_points,
    ratio_interval,
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


REFITTED = CALIBRATIONS[1:]


def posterior_sets(sets, label_rng, refit):
    """Pool labels drawn from the BCTS posteriors, and the posteriors to test.

    ``"perfect"``: the BCTS posteriors themselves, calibrated by construction.
    With ``refit``, validation labels are drawn the same way and EC, NLL and
    BCTS are fitted again on them (taking the log BCTS posteriors as logits):
    the calibration is then estimated from a validation split of the real size
    for a model it can represent exactly, so what it loses against "perfect"
    is the cost of fitting the calibrator on that many rows.
    """
    proba_val, proba_pool = sets["BCTS"]
    y_pool = labels_from(proba_pool, label_rng)
    out = {"perfect": (proba_val, proba_pool)}
    if refit:
        y_val = labels_from(proba_val, label_rng)
        with np.errstate(divide="ignore"):
            logits = [np.log(p) for p in (proba_val, proba_pool)]
        fitted = calibrated_sets(proba_val, proba_pool, *logits, y_val)
        out.update({f"refit {c}": fitted[c] for c in REFITTED})
    return y_pool, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--shifts", nargs="*", default=list(SHIFTS[:2]))
    parser.add_argument(
        "--refit",
        action="store_true",
        help="also refit EC, NLL and BCTS on validation labels drawn the same way",
    )
    parser.add_argument("--out", default=None)
    parser.add_argument("--pmlb", nargs="*", default=list(PMLB))
    parser.add_argument("--cifar", nargs="*", default=list(CIFAR))
    args = parser.parse_args()

    start = time.perf_counter()
    columns = ["perfect"] + [f"refit {c}" for c in REFITTED if args.refit]
    lines = [
        "| dataset | model | shift | "
        + " | ".join(
            f"{c}: oracle / MLE / ratio (95% interval) / L1 MLE" for c in columns
        )
        + " |",
        "|---|---|---|" + "---|" * len(columns),
    ]
    for name, model_name, sets, _, _, _, _ in datasets(args.pmlb, args.cifar):
        label_rng = np.random.default_rng(zlib.crc32(f"{name}/{model_name}".encode()))
        y_pool, posteriors = posterior_sets(sets, label_rng, args.refit)
        for shift in args.shifts:
            s = SHIFTS.index(shift)
            entries = []
            for proba_val, proba_pool in posteriors.values():
                # The same seed for every set of posteriors: the same test sets.
                rng = np.random.default_rng([zlib.crc32(name.encode()), s])
                q = proba_val.mean(axis=0)
                q /= q.sum()
                cell = ceiling_cell(
                    proba_pool, y_pool, q, shift, args.n, args.trials, rng
                )
                oracle = median_points(cell["oracle"])
                mle = median_points(cell["MLE"])
                ratio = "\u2013"
                if oracle >= 0.5:
                    lo, hi = ratio_interval(cell["oracle"], cell["MLE"], rng)
                    ratio = f"{mle / oracle:.3f} ({lo:.3f}\u2013{hi:.3f})"
                entries.append(
                    f"{oracle:+.2f} / {mle:+.2f} / {ratio} / "
                    f"{np.median(cell['L1']):.3f}"
                )
            lines.append(
                f"| {name} | {model_name} | {shift} | " + " | ".join(entries) + " |"
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
