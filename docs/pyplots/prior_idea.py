"""Label shift in one dimension: the class densities stay, the prior moves.

Run by the ``.. plot::`` directive when the documentation is built.
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import norm

from skprior import adjust_to_prior

x = np.linspace(-4, 6, 400)
density = np.column_stack([norm.pdf(x, 0, 1), norm.pdf(x, 2, 1)])  # p(x | c)
train_prior = np.array([0.5, 0.5])
test_prior = np.array([0.85, 0.15])


def posterior(prior):
    joint = density * prior
    return joint / joint.sum(axis=1, keepdims=True)


fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
for prior, style, name in [(train_prior, "-", "training"), (test_prior, "--", "test")]:
    for c, color in enumerate(["tab:blue", "tab:orange"]):
        axes[0].plot(
            x,
            density[:, c] * prior[c],
            style,
            color=color,
            label=f"class {c}, {name} prior {prior[c]:.2f}",
        )
axes[0].set_title("p(x | c) x prior: same shapes, new weights", fontsize=10)
axes[0].set_xlabel("x")
axes[0].legend(fontsize=8)

trained = posterior(train_prior)
adapted = adjust_to_prior(trained, train_prior, test_prior)
axes[1].plot(x, trained[:, 1], label="P(class 1 | x), training prior")
axes[1].plot(x, adapted[:, 1], "--", label="moved to the test prior (Bayes' rule)")
axes[1].axhline(0.5, color="gray", linewidth=0.8)
for curve, style in [(trained, "-"), (adapted, "--")]:
    boundary = x[np.argmax(curve[:, 1] > 0.5)]
    axes[1].axvline(boundary, color="gray", linestyle=style, linewidth=0.8)
axes[1].set_title("the decision boundary moves towards the rarer class", fontsize=10)
axes[1].set_xlabel("x")
axes[1].legend(fontsize=8, loc="lower right")
