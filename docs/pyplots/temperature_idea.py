"""What a temperature does, and how expectation consistency chooses it.

Run by the ``.. plot::`` directive when the documentation is built; reads the
stored CIFAR-100 outputs of an over-confident DenseNet from benchmarks/data.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from skprior import fit_temperature, softmax_temperature

here = Path.cwd()
root = next(p for p in [here, *here.parents] if (p / "benchmarks" / "data").is_dir())
stored = np.load(
    root / "benchmarks/data/model_outputs/netcal_densenet-bc-100-cifar-100.npz"
)
proba = stored["predictions"][:5000].astype(np.float64)
labels = stored["ground_truth"][:5000]
with np.errstate(divide="ignore"):
    logits = np.log(proba)

fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
row = logits[np.argsort(proba.max(axis=1))[len(proba) // 3]]
top = np.argsort(row)[::-1][:6]
for shift, temperature in zip([-0.27, 0, 0.27], [0.5, 1.0, 2.0], strict=True):
    p = softmax_temperature(row[None, :], temperature)[0]
    axes[0].bar(np.arange(6) + shift, p[top], width=0.27, label=f"T = {temperature}")
axes[0].set_xticks(range(6), [f"class {c}" for c in top], fontsize=8)
axes[0].set_title(
    "one image: T > 1 flattens, T < 1 sharpens;\n"
    "the order of the classes never changes",
    fontsize=10,
)
axes[0].legend(fontsize=8)

temperatures = np.geomspace(0.5, 5, 60)
confidence = [softmax_temperature(logits, t).max(axis=1).mean() for t in temperatures]
accuracy = np.mean(proba.argmax(axis=1) == labels)
chosen = fit_temperature(logits, labels, method="ec")
axes[1].plot(temperatures, confidence, label="mean confidence (top probability)")
axes[1].axhline(accuracy, color="tab:orange", label=f"accuracy {accuracy:.3f}")
axes[1].axvline(
    chosen, color="gray", linestyle="--", label=f"EC temperature {chosen:.2f}"
)
axes[1].set_xscale("log")
axes[1].set_xticks([0.5, 1, 2, 5], ["0.5", "1", "2", "5"])
axes[1].minorticks_off()
axes[1].set_xlabel("temperature T")
axes[1].set_title(
    f"CIFAR-100 DenseNet: confident {proba.max(axis=1).mean():.2f} on average,\n"
    f"right {accuracy:.2f} of the time",
    fontsize=10,
)
axes[1].legend(fontsize=8)
