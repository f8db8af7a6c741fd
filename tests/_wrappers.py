"""The one list of wrapper configurations that the test modules share.

``CONFIGURATIONS`` maps a name to a wrapper class and its parameters.
``tests/test_common.py`` builds an instance of each around an unfitted model for
scikit-learn's ``parametrize_with_checks``, and ``tests/test_base.py`` builds
them around fitted and unfitted models for the package's own wrapper checks,
so a configuration added here is checked both ways.
"""

import numpy as np

from skprior import (
    CANClassifier,
    PriorAdaptedClassifier,
    TemperatureCalibratedClassifier,
)


class UniformKnownPrior(PriorAdaptedClassifier):
    """``method="known"`` with the uniform test prior of however many classes.

    scikit-learn's checks fit on 1, 2 or 3 classes, so no fixed ``test_prior``
    fits them all; a missing one resolves to the uniform prior of the classes
    seen, through the same code path.
    """

    def __init__(self, estimator=None, *, train_prior=None, max_iter=100, tol=1e-6):
        super().__init__(
            estimator,
            method="known",
            train_prior=train_prior,
            max_iter=max_iter,
            tol=tol,
        )

    def _fit_post_hoc(self, X, y_index, sample_weight):
        n_classes = len(self.classes_)
        self.test_prior = np.full(n_classes, 1 / n_classes)
        try:
            super()._fit_post_hoc(X, y_index, sample_weight)
        finally:
            self.test_prior = None
            # (the value fit read, for the check of a later set_params)
            if hasattr(self, "_fitted_priors"):
                self._fitted_priors["test_prior"] = None


# name -> (class, parameters); the defaults first.
CONFIGURATIONS = {
    "can-default": (CANClassifier, {}),
    "can-fit-reference": (CANClassifier, {"reference": "fit"}),
    "can-iterated": (CANClassifier, {"alpha": 2.0, "n_iter": 3, "tau": 0.5}),
    "temperature-default": (TemperatureCalibratedClassifier, {}),
    "temperature-nll": (TemperatureCalibratedClassifier, {"method": "nll"}),
    "temperature-bcts": (TemperatureCalibratedClassifier, {"method": "bcts"}),
    "temperature-nbvs": (TemperatureCalibratedClassifier, {"method": "nbvs"}),
    "temperature-vs": (TemperatureCalibratedClassifier, {"method": "vs"}),
    "temperature-dirichlet": (TemperatureCalibratedClassifier, {"method": "dirichlet"}),
    "temperature-dirichlet-fixed": (
        TemperatureCalibratedClassifier,
        {"method": "dirichlet", "reg_lambda": 1.0},
    ),
    "prior-default": (PriorAdaptedClassifier, {}),
    "prior-pga": (PriorAdaptedClassifier, {"solver": "pga"}),
    "prior-map-mean-posterior": (
        PriorAdaptedClassifier,
        {"method": "map", "solver": "squarem", "source_prior": "mean_posterior"},
    ),
    "prior-bbse": (PriorAdaptedClassifier, {"method": "bbse"}),
    "prior-rlls": (PriorAdaptedClassifier, {"method": "rlls"}),
    "prior-known-uniform": (UniformKnownPrior, {}),
}


def make(name, model, **extra):
    """The wrapper ``name`` of ``CONFIGURATIONS`` around ``model``."""
    cls, params = CONFIGURATIONS[name]
    return cls(model, **params, **extra)
