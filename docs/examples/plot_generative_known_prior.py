"""
=======================================================
A known test prior is exact for a generative classifier
=======================================================

Linear discriminant analysis models each class by a Gaussian density
:math:`p(x|c)` and combines it with the class prior by Bayes' rule. When the
test data have another class prior, nothing about :math:`p(x|c)` changes, so
refitting the model with ``priors=`` the test prior and moving the fitted
model's posteriors to that prior (:func:`~skprior.adjust_to_prior`, or
:class:`~skprior.PriorAdaptedClassifier` with ``method="known"``) must agree
-- to rounding. When the test prior is not known, it can be estimated from
the unlabelled test batch.
"""

# %%
# A model fitted on balanced data, a test set that is not
# -------------------------------------------------------
# UCI Letter Recognition (26 classes, about equally frequent). The test set is
# drawn from the held-out half with class proportions from a Dirichlet
# distribution: some letters become common, others rare (every letter keeps at
# least one example, so that LDA can be refitted with the realised prior).
import matplotlib.pyplot as plt
import numpy as np
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.model_selection import train_test_split

from skprior import PriorAdaptedClassifier
from skprior.datasets import load_pmlb

X, y = load_pmlb("letter")
X_train, X_pool, y_train, y_pool = train_test_split(
    X, y, test_size=0.5, stratify=y, random_state=0
)
classes = np.unique(y)
rng = np.random.default_rng(0)
counts = 1 + rng.multinomial(3000 - len(classes), rng.dirichlet(np.ones(len(classes))))
test_index = np.concatenate(
    [
        rng.choice(np.flatnonzero(y_pool == c), size=n, replace=True)
        for c, n in zip(classes, counts, strict=True)
    ]
)
X_test, y_test = X_pool[test_index], y_pool[test_index]
test_prior = counts / counts.sum()  # the realised class frequencies

lda = LinearDiscriminantAnalysis().fit(X_train, y_train)
print(f"accuracy of LDA on the shifted test set: {lda.score(X_test, y_test):.4f}")

# %%
# Known prior: adapting equals refitting
# --------------------------------------
# The wrapper does not refit ``lda``; ``fit`` only counts the training prior
# from ``y_train`` (the prior LDA was fitted with).
adapted = PriorAdaptedClassifier(lda, method="known", test_prior=test_prior)
adapted.fit(X_train, y_train)
refitted = LinearDiscriminantAnalysis(priors=test_prior).fit(X_train, y_train)

difference = np.abs(adapted.predict_proba(X_test) - refitted.predict_proba(X_test))
print(f"largest difference of the probabilities: {difference.max():.1e}")
print(f"accuracy, adapted to the known prior: {adapted.score(X_test, y_test):.4f}")
print(f"accuracy, LDA refitted with priors=:  {refitted.score(X_test, y_test):.4f}")

# %%
# Unknown prior: estimate it from the test batch
# ----------------------------------------------
# ``method="mle"`` estimates the test prior of the batch given to
# ``predict_proba`` by EM (Saerens et al., 2002), then adapts to it. LDA's
# posteriors are reasonably calibrated, which EM needs.
estimated = PriorAdaptedClassifier(lda, method="mle").fit(X_train, y_train)
mle_prior = estimated.estimate_prior(X_test)
print(f"accuracy, adapted to the MLE prior:  {estimated.score(X_test, y_test):.4f}")
print(f"L1 error of the MLE prior: {np.abs(mle_prior - test_prior).sum():.3f}")

order = np.argsort(test_prior)[::-1]
x = np.arange(len(classes))
fig, ax = plt.subplots(figsize=(8, 3.5), layout="constrained")
ax.bar(x - 0.2, test_prior[order], width=0.4, label="true test prior")
ax.bar(x + 0.2, mle_prior[order], width=0.4, label="estimated from the batch (MLE)")
ax.axhline(
    1 / len(classes), color="gray", linestyle="--", label="training prior (about 1/26)"
)
ax.set_xticks(x, [chr(ord("A") + int(c) - int(classes.min())) for c in classes[order]])
ax.set_ylabel("share of the test set")
ax.legend()
plt.show()
