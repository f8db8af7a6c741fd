"""The parameter constraints every public function and estimator of skprior reads.

The functions' ``@validate_params`` and the estimators' ``_parameter_constraints``
are built from the same objects (scikit-learn's constraint classes), so a
parameter is checked the same way, with the same message, wherever it is given.
The checks of the inputs themselves (arrays, labels, weights) are in
:mod:`skprior._utils._validation` and :mod:`skprior._utils._validation_labels`.
"""

from numbers import Integral, Real

from skprior._utils._options import (
    BBSE_PROJECTIONS,
    BIN_STRATEGIES,
    CAN_REFERENCES,
    ECE_KINDS,
    ESTIMATE_METHODS,
    ESTIMATOR_CALIBRATION_METHODS,
    ONLINE_METHODS,
    PRIOR_METHODS,
    SOLVERS,
    SOURCE_PRIORS,
    TEMPERATURE_METHODS,
    UNCERTAINTY_KINDS,
)
from skprior._utils._sklearn_compat import (
    HasMethods,
    Hidden,
    Interval,
    StrOptions,
    validate_parameter_constraints,
)

_PRIOR_LIKE = ["array-like", dict]


CONSTRAINTS = {
    # (sparse matrices pass here, unmentioned, to be refused by the checkers,
    # whose message says how to convert them)
    "array": ["array-like", Hidden("sparse matrix")],
    "optional_array": ["array-like", Hidden("sparse matrix"), None],
    "prior": _PRIOR_LIKE,
    "optional_prior": [*_PRIOR_LIKE, None],
    "estimator": [HasMethods(["fit", "predict_proba"]), None],
    "k": [Interval(Integral, 2, None, closed="left"), StrOptions({"auto"})],
    "tau": [Interval(Real, 0, 1, closed="both")],
    "alpha": [Interval(Real, 0, None, closed="neither")],
    "n_iter": [Interval(Integral, 1, None, closed="left")],
    "uncertainty": [StrOptions(set(UNCERTAINTY_KINDS))],
    "can_reference": [StrOptions(set(CAN_REFERENCES))],
    "estimate_method": [StrOptions(set(ESTIMATE_METHODS))],
    "prior_method": [StrOptions(set(PRIOR_METHODS))],
    "solver": [StrOptions(set(SOLVERS))],
    "source_prior": [StrOptions(set(SOURCE_PRIORS))],
    "dirichlet_alpha": [Interval(Real, 1, None, closed="left")],
    "bbse_projection": [StrOptions(set(BBSE_PROJECTIONS))],
    "rlls_reg": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "tol": [Interval(Real, 0, None, closed="neither")],
    "online": [StrOptions(set(ONLINE_METHODS))],
    "stream_budget": [Interval(Integral, 0, None, closed="left")],
    "learning_rate": [Interval(Real, 0, None, closed="neither")],
    "shift_level": [Interval(Real, 0, 1, closed="right")],
    "optional_shift_level": [Interval(Real, 0, 1, closed="right"), None],
    "temperature": [Interval(Real, 0, None, closed="neither")],
    "temperature_method": [StrOptions(set(TEMPERATURE_METHODS))],
    "calibration_method": [StrOptions(set(ESTIMATOR_CALIBRATION_METHODS))],
    # (a penalty beyond 1e100 times squared weights overflows; it is already
    # a fit of all-zero weights)
    "reg_lambda": [Interval(Real, 0, 1e100, closed="both"), StrOptions({"auto"})],
    "reg_mu": [Interval(Real, 0, 1e100, closed="both"), None],
    "n_bins": [Interval(Integral, 1, None, closed="left")],
    "strategy": [StrOptions(set(BIN_STRATEGIES))],
    "ece_kind": [StrOptions(set(ECE_KINDS))],
}


def constraints(**names):
    """``{parameter: CONSTRAINTS[kind]}`` for ``parameter=kind`` pairs."""
    return {parameter: CONSTRAINTS[kind] for parameter, kind in names.items()}


def check_level(level, optional=False):
    """Refuse a ``shift_level`` outside (0, 1] (or None, with ``optional``).

    For the places that read a level after ``fit`` (``set_params`` sets it
    unchecked, and scikit-learn checks an estimator's parameters in ``fit``
    only): the message is scikit-learn's, with the range to pick from.
    """
    kind = "optional_shift_level" if optional else "shift_level"
    validate_parameter_constraints(
        constraints(shift_level=kind),
        {"shift_level": level},
        caller_name="the test of label shift (set_params(shift_level=...))",
    )
