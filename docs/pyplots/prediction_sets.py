"""Coverage and size of prediction sets against the strength of the shift.

Run by the ``.. plot::`` directive when the documentation is built: stored
CIFAR-10 and CIFAR-100 outputs (WideResNet-16-4), calibrated by BCTS on a
labelled half that is also the conformal calibration set; batches of 1,000
rows from the other half at class proportions from Dirichlet(c) for several
c (small c: strong shift), 40 batches each. Sets at alpha = 0.1 (LAC): plain
split conformal, weighted by the batch's EM estimate (the default) and
class-conditional; the per-batch coverage (mean and 10th percentile) and the
mean set size.
"""

import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import skprior
from skprior import (
    conformal_prediction_set,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    softmax_temperature,
)

DATA = Path(skprior.__file__).resolve().parent.parent / "benchmarks" / "data"
CONCENTRATIONS = [0.03, 0.1, 0.3, 1.0, 10.0, 1000.0]
MODES = {"split": "split", "weighted (default)": "weighted", "class": "class"}
rng = np.random.default_rng(0)

fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
for column, name in enumerate(["cifar-10", "cifar-100"]):
    stored = np.load(DATA / "model_outputs" / f"netcal_wideresnet-16-4-{name}.npz")
    proba, labels = stored["predictions"].astype(np.float64), stored["ground_truth"]
    n_classes = proba.shape[1]
    cal = rng.permutation(len(labels)) < len(labels) // 2
    logits = np.log(np.maximum(proba, 1e-300))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, bias = fit_bias_corrected_temperature(logits[cal], labels[cal])
    proba = softmax_temperature(logits, t, bias)
    p_cal, y_cal, p_pool, y_pool = proba[cal], labels[cal], proba[~cal], labels[~cal]
    q = np.bincount(y_cal, minlength=n_classes) / len(y_cal)
    by_class = [np.flatnonzero(y_pool == k) for k in range(n_classes)]
    results = {mode: [] for mode in MODES}
    for concentration in CONCENTRATIONS:
        values = {mode: [] for mode in MODES}
        for _ in range(40):
            counts = rng.multinomial(
                1000, rng.dirichlet(np.full(n_classes, concentration))
            )
            rows = np.concatenate(
                [rng.choice(by_class[k], m) for k, m in enumerate(counts)]
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prior = estimate_test_prior(p_pool[rows], q, solver="squarem").prior
                for label, mode in MODES.items():
                    sets = conformal_prediction_set(
                        p_cal,
                        y_cal,
                        p_pool[rows],
                        mode=mode,
                        test_prior=prior if mode == "weighted" else None,
                        delta=0.15 if mode != "split" else None,
                    )
                    covered = sets[np.arange(1000), y_pool[rows]].mean()
                    values[label].append((covered, sets.sum(axis=1).mean()))
        for label in MODES:
            coverage, size = np.array(values[label]).T
            results[label].append(
                (coverage.mean(), np.percentile(coverage, 10), size.mean())
            )
    for (label, rows), color in zip(results.items(), ["C3", "C0", "C2"], strict=True):
        mean, low, size = np.array(rows).T
        axes[0, column].plot(CONCENTRATIONS, mean, "o-", color=color, label=label)
        axes[0, column].plot(CONCENTRATIONS, low, "o--", color=color, alpha=0.6)
        axes[1, column].plot(CONCENTRATIONS, size, "o-", color=color, label=label)
    axes[0, column].axhline(0.9, color="black", linewidth=0.8)
    axes[0, column].set_title(f"WideResNet-16-4, {name.upper()}", fontsize=10)
    axes[1, column].set_xlabel("Dirichlet concentration of the batch prior (log)")
    axes[1, column].set_xscale("log")
axes[0, 0].set_ylabel("coverage per batch\n(solid: mean, dashed: 10th pct)")
axes[1, 0].set_ylabel("mean set size")
axes[0, 0].legend(fontsize=8, loc="lower right")
