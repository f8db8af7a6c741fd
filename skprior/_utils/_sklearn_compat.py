"""The one place where skprior imports scikit-learn's private helpers.

They change between releases; keeping them here means one file to mend.
"""

import functools
import inspect

from sklearn import get_config
from sklearn.base import _fit_context
from sklearn.externals.array_api_compat import numpy as numpy_xp
from sklearn.utils._param_validation import (
    HasMethods,
    Hidden,
    Interval,
    StrOptions,
    make_constraint,
    validate_parameter_constraints,
)
from sklearn.utils.validation import _check_sample_weight, _num_samples

__all__ = [
    "HasMethods",
    "Hidden",
    "Interval",
    "StrOptions",
    "_check_sample_weight",
    "_fit_context",
    "_num_samples",
    "numpy_xp",
    "validate_params",
]


def validate_params(parameter_constraints, *, prefer_skip_nested_validation):
    """scikit-learn's ``validate_params``, at a small fraction of its cost.

    The same constraint objects, checks and messages as
    ``sklearn.utils.validate_params``, and the same global switch
    (``sklearn.set_config(skip_parameter_validation=True)``). scikit-learn's
    decorator reads and binds the signature, rebuilds every constraint object
    and enters a configuration context on every call: 0.1-0.3 ms, more than
    the array work of a small batch. Here the signature is read and the
    constraints are built once, a valid call costs one ``is_satisfied_by`` per
    argument, and only an invalid one goes through scikit-learn's checker for
    its message. Nested calls validate their own arguments (cheaply), so
    ``prefer_skip_nested_validation`` is accepted for the same signature and
    not needed.
    """
    del prefer_skip_nested_validation  # (see above)
    built = {
        name: [make_constraint(c) for c in options]
        for name, options in parameter_constraints.items()
    }

    def decorator(func):
        func._skl_parameter_constraints = parameter_constraints
        parameters = inspect.signature(func).parameters.values()
        names = [
            p.name
            for p in parameters
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        positional = [
            p.name
            for p in parameters
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        defaults = {p.name: p.default for p in parameters if p.default is not p.empty}
        known = set(names)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if (
                len(args) > len(positional)
                or not known.issuperset(kwargs)
                or get_config()["skip_parameter_validation"]
            ):
                # (a wrong call: the function itself raises its TypeError)
                return func(*args, **kwargs)
            params = {**defaults, **dict(zip(positional, args, strict=False)), **kwargs}
            if len(params) < len(names):  # a required argument is missing
                return func(*args, **kwargs)
            for name, value in params.items():
                options = built.get(name)
                if options is not None and not any(
                    c.is_satisfied_by(value) for c in options
                ):
                    # scikit-learn's checker raises with its message
                    validate_parameter_constraints(
                        parameter_constraints, params, caller_name=func.__qualname__
                    )
            return func(*args, **kwargs)

        return wrapper

    return decorator
