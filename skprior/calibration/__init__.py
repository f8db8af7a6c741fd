"""Calibration on held-out data: one temperature, or a class-wise map.

Temperature scaling by expectation consistency or NLL and bias-corrected
temperature scaling; vector scaling and Dirichlet calibration with ODIR; and
the estimator :class:`TemperatureCalibratedClassifier` that fits any of them.
"""

from skprior.calibration._classifier import TemperatureCalibratedClassifier
from skprior.calibration._classwise import (
    fit_dirichlet_calibration,
    fit_vector_scaling,
    select_dirichlet_regularization,
    softmax_dirichlet_calibration,
    softmax_vector_scaling,
)
from skprior.calibration._temperature import (
    fit_bias_corrected_temperature,
    fit_temperature,
    softmax_temperature,
)

__all__ = [
    "TemperatureCalibratedClassifier",
    "fit_bias_corrected_temperature",
    "fit_dirichlet_calibration",
    "fit_temperature",
    "fit_vector_scaling",
    "select_dirichlet_regularization",
    "softmax_dirichlet_calibration",
    "softmax_temperature",
    "softmax_vector_scaling",
]
