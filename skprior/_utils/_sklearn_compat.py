"""The one place where skprior imports scikit-learn's private helpers.

They change between releases; keeping them here means one file to mend.
"""

from sklearn.base import _fit_context
from sklearn.utils._param_validation import (
    HasMethods,
    Hidden,
    Interval,
    StrOptions,
    validate_parameter_constraints,
    validate_params,
)
from sklearn.utils.validation import _num_samples

__all__ = [
    "HasMethods",
    "Hidden",
    "Interval",
    "StrOptions",
    "_fit_context",
    "_num_samples",
    "validate_parameter_constraints",
    "validate_params",
]
