"""The one place where skprior imports scikit-learn's private helpers.

They change between releases; keeping them here means one file to mend.
"""

import inspect

from sklearn.base import _fit_context
from sklearn.utils._param_validation import (
    HasMethods,
    Hidden,
    Interval,
    StrOptions,
    validate_parameter_constraints,
)
from sklearn.utils._param_validation import validate_params as _validate_params
from sklearn.utils.validation import _num_samples



def validate_params(parameter_constraints, *, prefer_skip_nested_validation):
    """scikit-learn's ``validate_params``, with the function's signature read once.

    Its wrapper calls ``inspect.signature`` at every call (30-60 us, a tenth of a
    CAN call on 20,000 rows); ``inspect.signature`` returns a function's
    ``__signature__`` when it has one, so it is set here, at import.
    """
    decorate = _validate_params(
        parameter_constraints, prefer_skip_nested_validation=prefer_skip_nested_validation
    )

    def decorator(func):
        func.__signature__ = inspect.signature(func)
        return decorate(func)

    return decorator


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
