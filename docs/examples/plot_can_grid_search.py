"""
===================================================
Tune CAN around a fitted model without refitting it
===================================================

You have a model that took a while to train. :class:`~skprior.CANClassifier`
wraps it as it is, and ``GridSearchCV`` tunes CAN's four hyper-parameters on
held-out data. The model is never fitted again: every candidate costs
predictions only.
"""

# %%
# A model, fitted once
# --------------------
# UCI Letter Recognition (26 classes, shipped with skprior), split into
# training, validation and test thirds. The model is a scikit-learn
# ``Pipeline``; to show that it is fitted exactly once, its final step counts
# the calls to ``fit``.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skprior import CANClassifier
from skprior.datasets import load_pmlb


class CountingLogisticRegression(LogisticRegression):
    """LogisticRegression that counts how often it is fitted."""

    n_fit_calls = 0

    def fit(self, X, y, sample_weight=None):
        CountingLogisticRegression.n_fit_calls += 1
        return super().fit(X, y, sample_weight=sample_weight)


X, y = load_pmlb("letter")
X_train, X_rest, y_train, y_rest = train_test_split(
    X, y, test_size=2 / 3, stratify=y, random_state=0
)
X_val, X_test, y_val, y_test = train_test_split(
    X_rest, y_rest, test_size=0.5, stratify=y_rest, random_state=0
)
model = make_pipeline(StandardScaler(), CountingLogisticRegression(max_iter=2000))
model.fit(X_train, y_train)
coef_before = model[-1].coef_.copy()
print(f"model fitted {CountingLogisticRegression.n_fit_calls} time(s)")
print(f"test accuracy of the model alone: {model.score(X_test, y_test):.4f}")

# %%
# Wrap it, then grid-search CAN on the validation data
# ----------------------------------------------------
# ``fit`` of the wrapper sees the validation data. It would count the training
# prior from those labels; the model's actual training prior is known, so it
# is given. ``GridSearchCV`` clones the wrapper for each candidate and fold; the
# clones hold the fitted model frozen, so their ``fit`` does not refit it.
train_prior = np.unique(y_train, return_counts=True)[1] / len(y_train)
can = CANClassifier(model, train_prior=train_prior)
grid = GridSearchCV(
    can,
    {
        "k": [2, 3, 5],
        "tau": [0.5, 0.7, 0.9],
        "alpha": [0.5, 1.0, 2.0],
        "n_iter": [1, 2],
    },
    cv=3,
)
grid.fit(X_val, y_val)
print(f"{len(grid.cv_results_['params'])} candidates x 3 folds evaluated")
print(f"best parameters: {grid.best_params_}")
print(f"model fitted {CountingLogisticRegression.n_fit_calls} time(s) in all")
print(f"coefficients unchanged: {np.array_equal(model[-1].coef_, coef_before)}")

# %%
# Held-out comparison
# -------------------
# Su's defaults (k=3, tau=0.9, alpha=1, one step) beside the tuned CAN. The
# tuned wrapper refitted by ``GridSearchCV`` on the whole validation split
# still holds the same model.
defaults = CANClassifier(model, train_prior=train_prior).fit(X_val, y_val)
scores = {
    "model alone": model.score(X_test, y_test),
    "CAN, Su's defaults": defaults.score(X_test, y_test),
    "CAN, tuned": grid.score(X_test, y_test),
}
for name, score in scores.items():
    print(f"{name:20} {score:.4f}")

# %%
# How the validation accuracy depends on tau and alpha
# ----------------------------------------------------
# At the best ``k`` and ``n_iter``: small ``tau`` corrects more rows.
results = grid.cv_results_
best = grid.best_params_
fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
for alpha in [0.5, 1.0, 2.0]:
    chosen = [
        i
        for i, params in enumerate(results["params"])
        if params["alpha"] == alpha
        and params["k"] == best["k"]
        and params["n_iter"] == best["n_iter"]
    ]
    taus = [results["params"][i]["tau"] for i in chosen]
    ax.plot(
        taus, results["mean_test_score"][chosen], marker="o", label=f"alpha={alpha}"
    )
ax.axhline(model.score(X_val, y_val), color="gray", linestyle="--", label="model alone")
ax.set_xlabel("tau (rows with uncertainty >= tau are corrected)")
ax.set_ylabel("validation accuracy")
ax.set_title(f"CAN on Letter, k={best['k']}, n_iter={best['n_iter']}")
ax.legend()
plt.show()
