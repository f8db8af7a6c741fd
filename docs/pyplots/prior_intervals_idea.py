"""Three 95 % intervals for one batch's class proportions, from one estimate.

Run by the ``.. plot::`` directive when the documentation is built: Gaussian
classes seen through an overconfident, biased model, recalibrated by BCTS on
a labelled set; one shifted batch of 5,000 fresh rows.
"""

import matplotlib.pyplot as plt
import numpy as np

from skprior import (
    estimate_test_prior,
    fit_bias_corrected_temperature,
    softmax_temperature,
)

K = 6
means, bias = 2.0 * np.eye(K), np.linspace(-0.5, 0.5, K)
rng = np.random.default_rng(3)


def model_logits(counts):
    y = np.repeat(np.arange(K), counts)
    x = means[y] + rng.normal(size=(len(y), K))
    return x @ means.T / 0.6 + bias, y  # (overconfident and biased)


logits_cal, y_cal = model_logits(np.full(K, 800))
t, b = fit_bias_corrected_temperature(logits_cal, y_cal)
proba_cal = softmax_temperature(logits_cal, t, b)
train_prior = np.bincount(y_cal) / len(y_cal)

counts = rng.multinomial(5000, [0.35, 0.25, 0.2, 0.1, 0.07, 0.03])
logits, _ = model_logits(counts)
estimate = estimate_test_prior(softmax_temperature(logits, t, b), train_prior)

intervals = {
    "Fisher (target='prior')": estimate.confidence_interval(target="prior"),
    "assuming calibration": estimate.confidence_interval(),
    "with calibration=(proba_cal, y_cal)": estimate.confidence_interval(
        calibration=(proba_cal, y_cal)
    ),
}
fig, ax = plt.subplots(figsize=(8, 3.4))
for offset, (name, (low, high)) in zip(
    (-0.2, 0.0, 0.2), intervals.items(), strict=True
):
    ax.errorbar(
        np.arange(K) + offset,
        (low + high) / 2 - counts / 5000,
        yerr=(high - low) / 2,
        fmt="o",
        capsize=3,
        label=name,
    )
ax.plot(np.arange(K), estimate.prior - counts / 5000, "k_", ms=14, label="estimate")
ax.axhline(0, color="grey", lw=0.8)
ax.set(
    xlabel="class",
    ylabel="minus the batch's true share",
    title="95 % intervals minus the batch's true shares: covered where a bar crosses 0",
)
ax.legend(fontsize=7)
