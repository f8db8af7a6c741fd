"""Level and power of ``label_shift_test`` when the classes are many against the rows.

Nothing shifted: a random split of the stored CIFAR outputs (the networks'
test sets) into a reference of ``m`` rows and a batch of ``n`` rows; the count
of batches declared shifted at level 0.01 should be about 1 in 100 (a
Binomial(trials, 0.01): at 100 trials, more than 4 has probability 0.003).
Synthetic ``K = 300`` (softmax of a one-hot logit of 3 plus standard normal
noise, 20,000 rows) goes where no real outputs exist.
Shifted: the batch drawn with weights ``pi_y / q_y``, ``pi`` from
Dirichlet(alpha) (alpha = 10: mild; alpha = 3), the share declared shifted is
the power. Each cell gives, on the same draws, ``label_shift_test`` / the
class-by-class statistic alone (standardised sum of squares, pooled class
variances, Satterthwaite tail) / Hotelling's T^2 with its F tail (computed
here from its formula). ``label_shift_test`` is Hotelling's from 50 reference
rows per class (and up to 1,000 classes), the class-by-class statistic below.

Hotelling alone over-rejects wherever the reference holds fewer than ~30 rows
per class: K = 100 at 1,000 / 500 rows 6 to 10 of 100, at 300 / 300 30 to 98;
K = 300 at 5,000 / 1,000 (17 per class) 18. The class-by-class statistic holds
the level in every cell (at most 2 of 100) but loses power against a weak
model's correlated posteriors: LeNet-5 / CIFAR-100 at 5,000 / 1,000 found 10
and 20 of 100 shifts where Hotelling found 28 and 49 (and held its level, 2).

Session 15, 100 trials, the two statistics before the switch (``label_shift_test``
was then the class-by-class statistic; class by class / Hotelling):

| outputs | K | ref / batch | no shift | alpha 10 | alpha 3 |
|---|---|---|---|---|---|
| lenet-5-cifar-10 | 10 | 1000 / 500 | 1 / 1 | 41 / 36 | 82 / 81 |
| lenet-5-cifar-10 | 10 | 300 / 300 | 0 / 2 | 9 / 8 | 49 / 51 |
| lenet-5-cifar-10 | 10 | 5000 / 1000 | 2 / 2 | 71 / 69 | 99 / 98 |
| wideresnet-16-4-cifar-10 | 10 | 1000 / 500 | 0 / 0 | 76 / 75 | 99 / 99 |
| wideresnet-16-4-cifar-10 | 10 | 300 / 300 | 0 / 1 | 39 / 36 | 88 / 87 |
| wideresnet-16-4-cifar-10 | 10 | 5000 / 1000 | 1 / 1 | 94 / 94 | 100 / 100 |
| lenet-5-cifar-100 | 100 | 1000 / 500 | 2 / 6 | 7 / 11 | 7 / 14 |
| lenet-5-cifar-100 | 100 | 300 / 300 | 2 / 30 | 2 / 37 | 6 / 35 |
| lenet-5-cifar-100 | 100 | 5000 / 1000 | 1 / 2 | 10 / 28 | 20 / 49 |
| wideresnet-16-4-cifar-100 | 100 | 1000 / 500 | 2 / 10 | 23 / 37 | 93 / 91 |
| wideresnet-16-4-cifar-100 | 100 | 300 / 300 | 1 / 98 | 11 / 96 | 57 / 100 |
| wideresnet-16-4-cifar-100 | 100 | 5000 / 1000 | 0 / 0 | 76 / 78 | 100 / 100 |
| densenet-bc-100-cifar-100 | 100 | 1000 / 500 | 1 / 8 | 16 / 26 | 87 / 86 |
| densenet-bc-100-cifar-100 | 100 | 300 / 300 | 2 / 95 | 10 / 92 | 35 / 97 |
| densenet-bc-100-cifar-100 | 100 | 5000 / 1000 | 0 / 0 | 74 / 73 | 100 / 100 |
| synthetic-300 | 300 | 1000 / 500 | 1 / 59 | 4 / 73 | 5 / 85 |
| synthetic-300 | 300 | 300 / 300 | 2 / 0 (a) | 3 / 0 | 8 / 0 |
| synthetic-300 | 300 | 5000 / 1000 | 1 / 18 | 18 / 55 | 68 / 88 |

(a) Hotelling cannot run: fewer reference rows than classes.

After the switch (this script; ``label_shift_test`` / class by class /
Hotelling, on the same draws; rows below 50 per class are the class-by-class
statistic, as before; CIFAR-10, then CIFAR-100 with ``--cells 5000/1000
5000/100``):

| outputs | K | ref / batch | no shift | alpha 10 | alpha 3 |
|---|---|---|---|---|---|
| lenet-5-cifar-10 | 10 | 1000 / 500 | 1 / 1 / 1 | 36 / 41 / 36 | 81 / 82 / 81 |
| lenet-5-cifar-10 | 10 | 300 / 300 | 0 / 0 / 2 | 9 / 9 / 8 | 49 / 49 / 51 |
| lenet-5-cifar-10 | 10 | 5000 / 1000 | 2 / 2 / 2 | 69 / 71 / 69 | 98 / 99 / 98 |
| lenet-5-cifar-10 | 10 | 5000 / 100 | 2 / 2 / 2 | 7 / 11 / 7 | 25 / 27 / 25 |
| wrn-16-4-cifar-10 | 10 | 1000 / 500 | 4 / 2 / 4 | 85 / 85 / 86 | 100 / 100 / 100 |
| wrn-16-4-cifar-10 | 10 | 300 / 300 | 0 / 0 / 1 | 40 / 40 / 33 | 88 / 88 / 88 |
| wrn-16-4-cifar-10 | 10 | 5000 / 1000 | 3 / 3 / 3 | 99 / 99 / 99 | 100 / 100 / 100 |
| wrn-16-4-cifar-10 | 10 | 5000 / 100 | 0 / 0 / 0 | 22 / 22 / 22 | 74 / 74 / 74 |
| lenet-5-cifar-100 | 100 | 5000 / 1000 | 0 / 1 / 0 | 22 / 9 / 22 | 56 / 33 / 56 |
| lenet-5-cifar-100 | 100 | 5000 / 100 | 4 / 2 / 4 | 5 / 4 / 5 | 11 / 5 / 11 |
| wrn-16-4-cifar-100 | 100 | 5000 / 1000 | 0 / 0 / 0 | 78 / 79 / 78 | 100 / 100 / 100 |
| wrn-16-4-cifar-100 | 100 | 5000 / 100 | 1 / 1 / 1 | 8 / 7 / 8 | 19 / 19 / 19 |
| densenet-c100 | 100 | 5000 / 1000 | 1 / 1 / 1 | 76 / 73 / 76 | 100 / 100 / 100 |
| densenet-c100 | 100 | 5000 / 100 | 1 / 1 / 1 | 2 / 2 / 2 | 19 / 14 / 19 |

Every cell holds the level (at most 4 of 100: LeNet-5 / CIFAR-100 with
100-row batches and WRN / CIFAR-10 at 1,000 / 500, the edge of Binomial(100,
0.01)). At K = 10 Hotelling's T^2 finds a few shifts fewer than the class-by-class
statistic on LeNet-5 (36 against 41, 7 against 11), the same on WRN.

Run: ``PYTHONPATH=$PWD python benchmarks/bench_shift_test_level.py --trials 100``
(``--names`` / ``--cells`` to restrict: the CIFAR-100 rows above ran with
``--names lenet-5-cifar-100 wideresnet-16-4-cifar-100 densenet-bc-100-cifar-100
--cells 5000/1000 5000/100``). About 45 minutes on a busy 2-core machine.
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
    parser.add_argument(
        "--cells",
        nargs="*",
        default=[f"{m}/{n}" for m, n in CELLS],
        help="reference / batch rows, e.g. 5000/1000",
    )
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
        for m, n in (map(int, text.split("/")) for text in args.cells):
            counts = [
                cell(proba, labels, m, n, alpha, args.trials, rng)
                for alpha in (None, 10.0, 3.0)
            ]
            shown = " | ".join(" / ".join(map(str, count)) for count in counts)
            print(f"| {name} | {proba.shape[1]} | {m} / {n} | {shown} |", flush=True)


if __name__ == "__main__":
    main()
