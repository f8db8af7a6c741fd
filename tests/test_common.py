"""scikit-learn's own estimator checks, run over every public wrapper.

Each wrapper wraps an *unfitted* LogisticRegression, as the checks expect.

- CAN uses k=2 because the checks include binary problems and k may not exceed
  the number of classes (a clear error otherwise, tested in test_can.py).
- ``PriorAdaptedClassifier(method="known")`` needs a ``test_prior`` with one entry
  per class, and the checks fit on 1, 2 or 3 classes, so no fixed prior fits them
  all: ``_UniformKnownPrior`` resolves a missing ``test_prior`` to the uniform
  prior of the classes seen, and runs the same code path.
- Transductive configurations (CAN with reference="batch"; prior estimation by
  MLE, MAP or BBSE) declare it through the ``non_deterministic`` tag, so
  scikit-learn itself skips its subset-invariance check; the inductive CAN
  (reference="fit") and the known prior run every check.
"""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

from skprior import (
    CANClassifier,
    PriorAdaptedClassifier,
    TemperatureCalibratedClassifier,
)


class _UniformKnownPrior(PriorAdaptedClassifier):
    """``method="known"`` with the uniform test prior of however many classes."""

    def __init__(self, estimator=None, *, max_iter=100, tol=1e-6):
        super().__init__(estimator, method="known", max_iter=max_iter, tol=tol)

    def _fit_post_hoc(self, X, y_index, sample_weight):
        n_classes = len(self.classes_)
        self.test_prior = np.full(n_classes, 1 / n_classes)
        try:
            super()._fit_post_hoc(X, y_index, sample_weight)
        finally:
            self.test_prior = None


def _model():
    # max_iter=1000: the checks fit iris unscaled, where lbfgs's default 100
    # iterations warn (the inner model's warning, not the wrapper's).
    return LogisticRegression(max_iter=1000)


ESTIMATORS = [
    CANClassifier(_model(), k=2),
    CANClassifier(_model(), k=2, reference="fit"),
    CANClassifier(_model(), k=2, alpha=2.0, n_iter=3, tau=0.5),
    *(
        TemperatureCalibratedClassifier(_model(), method=m)
        for m in ("ec", "nll", "bcts")
    ),
    PriorAdaptedClassifier(_model(), method="mle"),
    PriorAdaptedClassifier(_model(), method="mle", solver="pga"),
    PriorAdaptedClassifier(
        _model(), method="map", solver="squarem", source_prior="mean_posterior"
    ),
    PriorAdaptedClassifier(_model(), method="bbse"),
    _UniformKnownPrior(_model()),
]


# scikit-learn < 1.8 gives parametrize a generator, which pytest >= 9 refuses:
# the same mark with the checks listed works with every version.
_CHECKS = parametrize_with_checks(ESTIMATORS)
_CHECKS = pytest.mark.parametrize(
    _CHECKS.args[0], list(_CHECKS.args[1]), **_CHECKS.kwargs
)


# The checks fit on tiny data, sometimes pure noise, sometimes perfectly
# separable. These are the documented warnings for such data, each tested where
# its method is tested: CAN with no confident row falls back to the prior; EC and
# NLL with no error on the fit data clip the temperature to their bound.
@pytest.mark.filterwarnings("ignore:CAN found .* no confident reference row")
@pytest.mark.filterwarnings("ignore:EC found no temperature:UserWarning")
@pytest.mark.filterwarnings("ignore:NLL temperature scaling found no minimum")
@_CHECKS
def test_sklearn_compatible(estimator, check):
    """Every scikit-learn API and behaviour check passes."""
    check(estimator)
