"""
=========================================
CAN on stored network outputs (CIFAR-100)
=========================================

A deep-learning model is rarely a scikit-learn estimator; what you keep are its
outputs on a validation and a test set. skprior's array functions work on those
arrays directly. Here: the softmax outputs of a WideResNet-16-4 on the
CIFAR-100 test set (stored in the repository, from the netcal project), split
into a validation half, to choose CAN's settings, and a test half.
"""

# %%
# Load the stored outputs
# -----------------------
# ``predictions`` holds float32 softmax probabilities, one row per image, and
# ``ground_truth`` the labels. If your model gives logits, apply
# ``scipy.special.softmax(logits, axis=1)`` first (or use the command line's
# ``--logits``). The CIFAR-100 training set has 500 images of every class, so
# the training prior is uniform.
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from skprior import alternating_normalization, topk_entropy

here = Path.cwd()
root = next(p for p in [here, *here.parents] if (p / "benchmarks" / "data").is_dir())
stored = np.load(
    root / "benchmarks/data/model_outputs/netcal_wideresnet-16-4-cifar-100.npz"
)
proba, labels = stored["predictions"], stored["ground_truth"]
n_classes = proba.shape[1]
train_prior = np.full(n_classes, 1 / n_classes)

val, test = slice(0, 5000), slice(5000, None)
proba_val, y_val = proba[val], labels[val]
proba_test, y_test = proba[test], labels[test]


def accuracy(p, y):
    return np.mean(p.argmax(axis=1) == y)


print(f"{proba.shape[0]} images, {n_classes} classes")
print(f"test accuracy of the network: {accuracy(proba_test, y_test):.4f}")

# %%
# How doubtful is the network?
# ----------------------------
# :func:`~skprior.topk_entropy` is CAN's uncertainty: the entropy of the top
# ``k`` probabilities, renormalised, divided by ``log k``. Rows at or above
# ``tau`` are corrected; the others are the confident reference.
uncertainty = topk_entropy(proba_val, k=3)
correct = proba_val.argmax(axis=1) == y_val
fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
bins = np.linspace(0, 1, 41)
ax.hist(uncertainty[correct], bins=bins, alpha=0.7, label="correct predictions")
ax.hist(uncertainty[~correct], bins=bins, alpha=0.7, label="wrong predictions")
ax.axvline(0.9, color="black", linestyle="--", label="tau = 0.9 (Su's default)")
ax.set_xlabel("top-3 entropy (uncertainty)")
ax.set_ylabel("images")
ax.legend()
plt.show()

# %%
# Choose tau and alpha on the validation half
# -------------------------------------------
# A plain loop over the settings: each one is a single call on an array.
taus = [0.5, 0.6, 0.7, 0.8, 0.9]
alphas = [0.5, 1.0, 2.0, 4.0]
gain = np.array(
    [
        [
            accuracy(
                alternating_normalization(proba_val, train_prior, tau=tau, alpha=alpha),
                y_val,
            )
            - accuracy(proba_val, y_val)
            for alpha in alphas
        ]
        for tau in taus
    ]
)
best_tau, best_alpha = np.unravel_index(np.argmax(gain), gain.shape)
tau, alpha = taus[best_tau], alphas[best_alpha]

fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
image = ax.imshow(100 * gain, cmap="RdBu", vmin=-1, vmax=1)
ax.set_xticks(range(len(alphas)), alphas)
ax.set_yticks(range(len(taus)), taus)
ax.set_xlabel("alpha")
ax.set_ylabel("tau")
ax.set_title("validation accuracy gain (points)")
fig.colorbar(image)
plt.show()
print(f"chosen on validation: tau={tau}, alpha={alpha}")

# %%
# Apply to the test half
# ----------------------
# Only the low-confidence rows change. ``reference=proba_val`` would instead
# take the confident rows from the validation outputs, so that each test image
# is corrected on its own (for example when test images arrive one at a time).
adjusted = alternating_normalization(proba_test, train_prior, tau=tau, alpha=alpha)
changed = np.any(adjusted != proba_test, axis=1)
inductive = alternating_normalization(
    proba_test, train_prior, tau=tau, alpha=alpha, reference=proba_val
)
print(f"rows corrected: {changed.sum()} of {len(changed)}")
print(f"test accuracy, network alone:          {accuracy(proba_test, y_test):.4f}")
print(f"test accuracy, CAN on the test batch:  {accuracy(adjusted, y_test):.4f}")
print(f"test accuracy, CAN against validation: {accuracy(inductive, y_test):.4f}")

# %%
# On this network CAN changes little: the gain chosen on the validation half
# does not carry over to the test half by more than a few images. That is what
# the published numbers lead one to expect (gains of a fraction of a point),
# and why the settings must be checked on held-out data before use.
