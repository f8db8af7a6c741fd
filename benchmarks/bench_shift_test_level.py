"""Level and power of ``label_shift_test`` when the classes are many against the rows.

Nothing shifted: a random split of the stored CIFAR outputs (the networks'
test sets) into a reference of ``m`` rows and a batch of ``n`` rows; the count
of batches declared shifted at level 0.01 should be about 1 in 100 (a
Binomial(trials, 0.01): at 100 trials, more than 4 has probability 0.003).
Synthetic ``K = 300`` and ``K = 1,000`` (softmax of a one-hot logit of 3 plus
standard normal noise, 20,000 rows) go where no real outputs exist.
Shifted: the batch drawn with weights ``pi_y / q_y``, ``pi`` from
Dirichlet(alpha) (alpha = 10: mild; alpha = 3), the share declared shifted is
the power. Each cell also reports Hotelling's T^2 with its F tail (the test
before issue 29), computed here from its formula, for comparison.

Run: ``PYTHONPATH=$PWD python benchmarks/bench_shift_test_level.py [--trials 100]``
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import load_model_outputs  # noqa: E402

from skprior import label_shift_test  # noqa: E402
from skprior.label_shift._shift_solvers import (  # noqa: E402
    NoShiftReference,
    weighted_moments,
)

CELLS = [(1000, 500), (300, 300), (5000, 1000), (5000, 100)]
REAL = [
    "lenet-5-cifar-10",
    "wideresnet-16-4-cifar-10",
    "lenet-5-cifar-100",
    "wideresnet-16-4-cifar-100",
    "densenet-bc-100-cifar-100",
]


def hotelling_pvalue(batch, reference):
    """Hotelling's T^2 against the reference's mean and covariance, F tail."""
    m, n = len(reference), len(batch)
    mean = reference.mean(axis=0)
    values, vectors = np.linalg.eigh(np.cov(reference.T, bias=True))
    keep = values > 1e-9 * values.max()
    z = (batch.mean(axis=0) - mean) @ (vectors[:, keep] / np.sqrt(values[keep]))
    dof = int(keep.sum())
    if m <= dof + 1:
        return np.nan
    t2 = z @ z / (1 / n + 1 / m)
    return stats.f.sf(t2 * (m - dof) / (dof * (m - 1)), dof, m - dof)


def synthetic(n_classes, rng, n_rows=20_000):
    labels = rng.integers(0, n_classes, n_rows)
    logits = rng.standard_normal((n_rows, n_classes))
    logits[np.arange(n_rows), labels] += 3.0
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    return proba / proba.sum(axis=1, keepdims=True), labels


def class_by_class_pvalue(batch, reference):
    """The standardised sum of squares with pooled class variances alone."""
    mean, variance, _ = weighted_moments(batch)
    return NoShiftReference.from_proba(reference).test(mean, len(batch), variance)[1]


def cell(proba, labels, m, n, alpha, trials, rng):
    """Declared shifted by label_shift_test, the class-by-class statistic and
    Hotelling's T^2 over the trials."""
    n_classes = proba.shape[1]
    ours = diagonal = old = 0
    for _ in range(trials):
        rows = rng.permutation(len(proba))
        reference, pool = proba[rows[:m]].astype(np.float64), rows[m:]
        if alpha is None:
            batch = proba[pool[:n]]
        else:
            prior = rng.dirichlet(np.full(n_classes, alpha))
            counts = np.bincount(labels[pool], minlength=n_classes)
            weights = prior[labels[pool]] / np.maximum(counts[labels[pool]], 1)
            batch = proba[rng.choice(pool, n, p=weights / weights.sum())]
        batch = batch.astype(np.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours += label_shift_test(batch, reference).shifted
            diagonal += bool(class_by_class_pvalue(batch, reference) <= 0.01)
            old += bool(hotelling_pvalue(batch, reference) <= 0.01)
    return ours, diagonal, old


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--names", nargs="*", default=REAL + ["synthetic-300"])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"level 0.01, {args.trials} trials per cell: declared shifted, "
          "label_shift_test / class by class / Hotelling")  # fmt: skip
    print("| outputs | K | reference / batch | no shift | alpha 10 | alpha 3 |")
    print("|---|---|---|---|---|---|")
    for name in args.names:
        if name.startswith("synthetic-"):
            proba, labels = synthetic(int(name.split("-")[1]), rng)
        else:
            proba, labels = load_model_outputs(name)
        for m, n in CELLS:
            counts = [
                cell(proba, labels, m, n, alpha, args.trials, rng)
                for alpha in (None, 10.0, 3.0)
            ]
            shown = " | ".join(" / ".join(map(str, count)) for count in counts)
            print(f"| {name} | {proba.shape[1]} | {m} / {n} | {shown} |", flush=True)


if __name__ == "__main__":
    main()
