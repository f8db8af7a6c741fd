"""The idea of CAN on a toy batch: 3 classes, 8 confident rows, 1 doubtful row.

Run by the ``.. plot::`` directive when the documentation is built.
"""

import matplotlib.pyplot as plt
import numpy as np

from skprior import alternating_normalization

confident = np.array(
    [
        [0.96, 0.02, 0.02],
        [0.94, 0.03, 0.03],
        [0.95, 0.04, 0.01],
        [0.97, 0.02, 0.01],
        [0.03, 0.95, 0.02],
        [0.02, 0.03, 0.95],
        [0.04, 0.02, 0.94],
        [0.01, 0.02, 0.97],
    ]
)
doubtful = np.array([0.45, 0.40, 0.15])
prior = np.full(3, 1 / 3)
batch = np.vstack([confident, doubtful])

# One CAN step by hand, to show the intermediate matrix.
columns = batch / batch.sum(axis=0)
corrected = alternating_normalization(batch, prior, k=3, tau=0.9)[-1]

fig, axes = plt.subplots(1, 3, figsize=(10, 3.8), width_ratios=[1, 1, 1.3])
labels = ["class 0", "class 1", "class 2"]
for ax, matrix, title in [
    (axes[0], batch, "1. the batch: confident rows\nand one doubtful row (last)"),
    (
        axes[1],
        columns,
        "2. each column divided by its sum:\nclass 0 is already 'taken'",
    ),
]:
    ax.imshow(matrix, cmap="Blues", vmin=0, vmax=1, aspect="auto")
    for (i, j), value in np.ndenumerate(matrix):
        weight = "bold" if i == len(matrix) - 1 else "normal"
        color = "white" if value > 0.6 else "black"
        ax.text(
            j,
            i,
            f"{value:.2f}",
            ha="center",
            va="center",
            color=color,
            fontweight=weight,
        )
    ax.axhline(len(matrix) - 1.5, color="crimson", linewidth=2)
    ax.set_xticks(range(3), labels)
    ax.set_yticks([])
    ax.set_title(title, fontsize=10)

x = np.arange(3)
axes[2].bar(x - 0.2, doubtful, width=0.4, label="doubtful row, before")
axes[2].bar(
    x + 0.2, corrected, width=0.4, label="after CAN (row x prior, renormalised)"
)
axes[2].set_xticks(x, labels)
axes[2].set_ylim(0, 1)
axes[2].set_title("3. the doubtful row changes its mind", fontsize=10)
axes[2].legend(fontsize=8, loc="upper right")
