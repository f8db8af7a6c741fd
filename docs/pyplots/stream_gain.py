"""Accuracy gain over the rounds of a drifting stream, per tracker.

Run by the ``.. plot::`` directive when the documentation is built, with the
protocol of ``benchmarks/bench_stream.py``: BCTS-calibrated DenseNet-BC-100 /
CIFAR-100 outputs, 500 rounds of 10 rows whose prior switches between two
Dirichlet(0.5) draws (Bernoulli, p = 1/sqrt(500)), 3 seeds; each method
adapts round t with its prior from the rounds before t. Plotted: the
accuracy gain over the unadapted model, averaged over the rounds so far.
"""

import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import skprior

BENCHMARKS = Path(skprior.__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from _data import load_model_outputs  # noqa: E402
from _stream_protocol import (  # noqa: E402
    Setup,
    make_methods,
    prior_path,
    run_stream,
    two_priors,
)

MODEL, PROCESS, BATCH, ROUNDS, SEEDS = (
    "densenet-bc-100-cifar-100",
    "bernoulli",
    10,
    500,
    3,
)
SHOWN = {
    "oracle": "oracle (knows each round's prior)",
    "AggregatingPrior": "AggregatingPrior (default, online='aggregate')",
    "window 100": "MAP on the last 100 rows",
    "window 400": "MAP on the last 400 rows",
    "CumulativePrior": "CumulativePrior (online='cumulative')",
    "FLH-FTL (BBSE)": "FLH-FTL on BBSE estimates",
}


def correct(setup, rows, priors):
    """Whether each row's adjusted posterior ranks its label first, (rounds, b)."""
    proba = setup.proba[rows] * (priors / setup.q)[:, None, :]
    return proba.argmax(axis=2) == setup.labels[rows]


setup = Setup(MODEL, *load_model_outputs(MODEL))
gains = {name: np.zeros(ROUNDS) for name in SHOWN}
for seed in range(SEEDS):
    rng = np.random.default_rng([seed, BATCH, 2])
    mu1, mu2 = two_priors(setup.n_classes, seed)
    path = prior_path(PROCESS, ROUNDS, mu1, mu2, setup.fit_prior, rng)
    rows = setup.draw(path, BATCH, rng)
    methods = make_methods(
        setup,
        windows=(100, 400),
        online=(),
        trackers=("AggregatingPrior", "CumulativePrior", "FLH-FTL (BBSE)"),
    )
    priors, _ = run_stream(setup, rows, methods)
    priors["oracle"] = path
    base = correct(setup, rows, np.tile(setup.q, (ROUNDS, 1))).mean(axis=1)
    for name in SHOWN:
        gains[name] += (correct(setup, rows, priors[name]).mean(axis=1) - base) / SEEDS

fig, ax = plt.subplots(figsize=(10, 3.8))
so_far = np.arange(1, ROUNDS + 1)
for name, label in SHOWN.items():
    style = {"color": "black", "linewidth": 2} if name == "oracle" else {}
    ax.plot(100 * np.cumsum(gains[name]) / so_far, label=label, **style)
ax.axhline(0, color="grey", linewidth=0.8)
# (the cumulative MLE and FLH-FTL start 30 points down: cut there)
ax.set_ylim(-8, 12)
ax.set_xlabel("round (a batch of 10 rows)")
ax.set_ylabel("accuracy gain so far (points)")
ax.legend(fontsize=8, loc="lower right", ncols=2)
ax.set_title(
    "A prior that switches (Bernoulli, p = 1/sqrt(T)), DenseNet-BC-100 / CIFAR-100",
    fontsize=10,
)
fig.tight_layout()
