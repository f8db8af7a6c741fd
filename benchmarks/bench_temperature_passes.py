"""Temperature fits in "logsumexp passes" (issue 28).

Stored CIFAR-100 outputs (DenseNet-BC-100, 10,000 test rows, float32
probabilities; logits ``log p``) are tiled to ``--rows`` x 100 float32. Each
fit at its defaults (``fit_temperature`` with ``method="ec"`` and ``"nll"``,
``fit_bias_corrected_temperature``) is timed, and so is one
``scipy.special.logsumexp(z, axis=1)`` over the same array in the same run
(best of a few): passes = fit time / logsumexp time, a figure that does not
depend much on the machine. Printed with the seconds, the fitted ``T`` and,
for BCTS, the mean log loss of the fit, next to the figures measured before
the second-order solvers (``BEFORE``; the main tree at e772ebf, measured with
``PYTHONPATH`` set to it, on the same shared 2-core machine).

Measured on the shared 2-core machine (other processes busy: the spread is
theirs; best of 3 at 200,000 rows, one run at 1e6), passes (seconds):

* 200,000 rows, before (main at e772ebf): EC 16.1 (1.86 s), NLL 16.3
  (1.88 s), BCTS 192.6 (22.3 s).
* 200,000 rows, this tree: EC 5.0-7.4 (0.57-1.25 s), NLL 6.0-7.2
  (0.83-1.02 s), BCTS 33.0 (5.6 s); with Newton's method for BCTS (commit
  5edf410): BCTS 20.2 (2.3 s).
* 1,000,000 rows, this tree: EC 5.5, NLL 5.8, BCTS 25.0 (23.3 s, at a load
  of 3.9); with Newton's method (5edf410): EC 5.2, NLL 5.3, BCTS 18.1
  (11.5 s).

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_temperature_passes.py [--rows 1000000]

(``PYTHONPATH`` picks the tree whose ``skprior`` is timed.)
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import best_time  # noqa: E402
from _data import load_model_outputs  # noqa: E402

from skprior import fit_bias_corrected_temperature, fit_temperature  # noqa: E402

MODEL = "densenet-bc-100-cifar-100"
# Measured once before the change: {rows: {fit: (passes, seconds, T, loss)}}.
BEFORE = {
    200_000: {
        "ec": (16.1, 1.862, 2.1370314041, None),
        "nll": (16.3, 1.878, 2.1176094921, None),
        "bcts": (192.6, 22.254, 2.0940768770, 0.8608648015),
    },
}


def logits_of(n_rows):
    """``n_rows`` x 100 float32 logits (the stored rows tiled) and their labels."""
    proba, labels = load_model_outputs(MODEL)
    with np.errstate(divide="ignore"):
        logits = np.log(proba.astype(np.float32))
    reps = -(-n_rows // len(labels))
    return np.tile(logits, (reps, 1))[:n_rows], np.tile(labels, reps)[:n_rows]


def bcts_loss(z, y, temperature, bias):
    """Mean log loss of ``softmax(z / T + b)`` (float64, row by row blocks)."""
    total = 0.0
    for start in range(0, len(y), 50_000):
        u = z[start : start + 50_000].astype(np.float64) / temperature + bias
        u_true = u[np.arange(len(u)), y[start : start + 50_000]]
        total += float(np.sum(logsumexp(u, axis=1) - u_true))
    return total / len(y)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fits", nargs="+", default=["ec", "nll", "bcts"])
    args = parser.parse_args()
    z, y = logits_of(args.rows)
    one_pass, _ = best_time(lambda: logsumexp(z, axis=1), 5)
    print(f"{args.rows:,} x {z.shape[1]} float32; one logsumexp: {one_pass:.4f} s")
    print(f"{'fit':6} {'passes':>8} {'seconds':>9} {'T':>12} {'loss':>12}   before")
    fits = {
        "ec": lambda: (fit_temperature(z, y, method="ec"), None),
        "nll": lambda: (fit_temperature(z, y, method="nll"), None),
        "bcts": lambda: fit_bias_corrected_temperature(z, y),
    }
    for name in args.fits:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            seconds, (temperature, bias) = best_time(fits[name], args.repeats)
        loss = "" if bias is None else f"{bcts_loss(z, y, temperature, bias):.10f}"
        before = BEFORE.get(args.rows, {}).get(name)
        before = (
            ""
            if before is None
            else f"{before[0]:.1f} passes, {before[1]:.2f} s, T {before[2]:.10f}"
            + ("" if before[3] is None else f", loss {before[3]:.10f}")
        )
        print(
            f"{name:6} {seconds / one_pass:8.1f} {seconds:9.3f} "
            f"{temperature:12.10f} {loss:>12}   {before}"
        )


if __name__ == "__main__":
    main()
