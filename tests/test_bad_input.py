"""The bad-input table: every public entry point against every kind of bad input.

Each case calls one public function or estimator method with valid arguments
except one, and expects a ``ValueError`` or ``TypeError`` whose message names
that argument. The table is also run by ``benchmarks/adversarial_inputs.py``,
which counts the outcomes: *clear* (the expected error, naming the argument),
*unclear* (the expected error type, but a message that does not name it),
*traceback* (another exception: an internal failure) and *silent* (no error
at all: a possibly wrong answer).
"""

import re
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

import skprior
import skprior.metrics
from skprior import (
    CANClassifier,
    PriorAdaptedClassifier,
    ReliabilityDisplay,
    TemperatureCalibratedClassifier,
)
from skprior.metrics import expected_calibration_error, reliability_curve

N_CLASSES = 3


def _valid_proba(n=6):
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(N_CLASSES), size=n)
    proba[:3] = np.eye(N_CLASSES) * 0.9 + 0.1 / N_CLASSES  # some confident rows
    return proba


P = _valid_proba()
Z = np.log(P)
Y = np.array([0, 1, 2, 0, 1, 2])
Q = np.array([0.3, 0.3, 0.4])
W = np.ones(len(Y))
CONFUSION = np.full((N_CLASSES, N_CLASSES), 1 / N_CLASSES**2)

# -- bad values, by kind of argument ------------------------------------------------


def _with(array, index, value):
    array = np.array(array, dtype=np.float64)
    array[index] = value
    return array


# (label, value): inputs that no matrix of probabilities may be.
BAD_MATRIX = [
    ("1-D", P[0]),
    ("3-D", P[None]),
    ("NaN", _with(P, (1, 1), np.nan)),
    ("inf", _with(P, (1, 1), np.inf)),
    ("empty", np.empty((0, N_CLASSES))),
    ("empty 1-D", np.array([])),
    ("ragged", [[0.5, 0.5, 0.0], [1.0, 0.0]]),
    ("None", None),
    ("string", "proba.npy"),
    ("strings", np.array([["a", "b", "c"]] * 6)),
    ("one column", np.ones((6, 1))),
    ("complex", P.astype(complex)),
    ("scalar", 0.5),
]
BAD_PROBA = [
    *BAD_MATRIX,
    ("negative", _with(_with(P, (1, 1), -0.2), (1, 0), P[1, 0] + P[1, 1] + 0.2)),
    ("rows != 1", P * 2),
    ("sparse", sp.csr_matrix(P)),
]
BAD_LOGITS = [
    (label, value)
    for label, value in BAD_MATRIX
    if label not in ("1-D", "empty 1-D")  # a 1-D score is a binary problem
] + [
    ("all -inf row", _with(Z, 1, -np.inf)),
    ("sparse", sp.csr_matrix(Z)),
    ("empty 1-D", np.array([])),
]
BAD_INDICES = [  # encoded labels, one per row
    ("short", Y[:-1]),
    ("NaN", _with(Y, 1, np.nan)),
    ("inf", _with(Y, 1, np.inf)),
    ("fractional", _with(Y, 1, 0.5)),
    ("negative", np.array([0, 1, 2, 0, 1, -1])),
    ("too large", np.array([0, 1, 2, 0, 1, N_CLASSES])),
    ("strings", np.array(["a", "b", "c", "a", "b", "c"])),
    ("2-D", np.column_stack([Y, Y])),
    ("ragged", [[0], [1, 2], [0], [1], [2], [0]]),
    ("None", None),
    ("empty", np.array([], dtype=int)),
    ("sparse", sp.csr_matrix(Y)),
]
BAD_LABELS = [  # class labels (metrics and estimators)
    ("short", Y[:-1]),
    ("NaN", _with(Y, 1, np.nan)),
    ("inf", _with(Y, 1, np.inf)),
    ("2-D", np.column_stack([Y, Y])),
    ("ragged", [[0], [1, 2], [0], [1], [2], [0]]),
    ("None", None),
    ("empty", np.array([], dtype=int)),
    ("unknown label", np.array([0, 1, 2, 0, 1, 7])),
]
BAD_PRIOR = [
    ("short", Q[:-1]),
    ("negative", np.array([-0.2, 0.6, 0.6])),
    ("NaN", np.array([np.nan, 0.5, 0.5])),
    ("inf", np.array([np.inf, 0.5, 0.5])),
    ("sum != 1", np.array([0.3, 0.3, 0.3])),
    ("string", "uniform"),
    ("strings", ["a", "b", "c"]),
    ("2-D", Q[None]),
    ("ragged", [[0.3], [0.3, 0.4]]),
    ("scalar", 1.0),
    ("empty", np.array([])),
    ("dict, wrong keys", {"a": 0.3, "b": 0.3, "c": 0.4}),
    ("sparse", sp.csr_matrix(Q)),
    ("complex", Q.astype(complex)),
]
BAD_TRAIN_PRIOR = [*BAD_PRIOR, ("zero", np.array([0.0, 0.5, 0.5]))]
BAD_WEIGHTS = [
    ("short", W[:-1]),
    ("negative", _with(W, 1, -1.0)),
    ("NaN", _with(W, 1, np.nan)),
    ("inf", _with(W, 1, np.inf)),
    ("all zero", np.zeros(len(W))),
    ("string", "balanced"),
    ("strings", np.array(["a"] * len(W))),
    ("2-D", W[None]),
    ("ragged", [[1.0], [1.0, 2.0], [1.0], [1.0], [1.0], [1.0]]),
    ("sparse", sp.csr_matrix(W)),
]
BAD_TEMPERATURE = [
    ("zero", 0.0),
    ("negative", -1.0),
    ("NaN", np.nan),
    ("inf", np.inf),
    ("string", "1.5"),
    ("None", None),
    ("array", np.array([1.0, 2.0])),
]
BAD_K = [("one", 1), ("string", "three"), ("float", 2.5), ("too large", 5)]
BAD_UNIT = [("negative", -0.1), ("above 1", 1.5), ("NaN", np.nan), ("string", "x")]
BAD_POSITIVE = [("zero", 0), ("negative", -1.0), ("NaN", np.nan), ("string", "x")]
BAD_COUNT = [("zero", 0), ("negative", -2), ("float", 1.5), ("string", "x")]
BAD_OPTION = [("unknown", "nope"), ("None", None), ("number", 1)]
BAD_VERBOSE = [("negative", -1), ("string", "x"), ("float", 1.5)]


# -- the cases ------------------------------------------------------------------------


@dataclass
class Case:
    """One call with one bad argument."""

    id: str
    call: object  # a function of no arguments
    names: str  # regex the message must match (the argument's name)
    exceptions: tuple = (ValueError, TypeError)
    setup: object = None  # returns the object whose method is called
    extra: dict = field(default_factory=dict)


CASES = []


def _add(owner, argument, bad_values, call, names=None):
    """A case per bad value: ``call(value)`` must raise naming ``argument``."""
    pattern = names or rf"(?<![\w.]){re.escape(argument)}(?!\w)"
    for label, value in bad_values:
        CASES.append(
            Case(
                f"{owner}-{argument}-{label}",
                lambda call=call, value=value: call(value),
                pattern,
            )
        )


# softmax_temperature
_add(
    "softmax_temperature",
    "logits",
    BAD_LOGITS,
    lambda v: skprior.softmax_temperature(v, 1.5),
)
_add(
    "softmax_temperature",
    "temperature",
    BAD_TEMPERATURE,
    lambda v: skprior.softmax_temperature(Z, v),
)
_add(
    "softmax_temperature",
    "bias",
    [
        (label, v)
        for label, v in BAD_PRIOR
        if label not in ("negative", "sum != 1", "dict, wrong keys")
    ],
    lambda v: skprior.softmax_temperature(Z, 1.5, v),
)


for _name, _method in (("fit_temperature", "ec"), ("fit_temperature[nll]", "nll")):
    _add(
        _name,
        "logits",
        BAD_LOGITS,
        lambda v, m=_method: skprior.fit_temperature(v, Y, method=m),
    )
    _add(
        _name,
        "y",
        BAD_INDICES,
        lambda v, m=_method: skprior.fit_temperature(Z, v, method=m),
    )
    _add(
        _name,
        "sample_weight",
        BAD_WEIGHTS,
        lambda v, m=_method: skprior.fit_temperature(Z, Y, method=m, sample_weight=v),
    )
_add(
    "fit_temperature",
    "method",
    BAD_OPTION,
    lambda v: skprior.fit_temperature(Z, Y, method=v),
)

_add(
    "fit_bias_corrected_temperature",
    "logits",
    BAD_LOGITS,
    lambda v: skprior.fit_bias_corrected_temperature(v, Y),
)
_add(
    "fit_bias_corrected_temperature",
    "y",
    BAD_INDICES,
    lambda v: skprior.fit_bias_corrected_temperature(Z, v),
)
_add(
    "fit_bias_corrected_temperature",
    "sample_weight",
    BAD_WEIGHTS,
    lambda v: skprior.fit_bias_corrected_temperature(Z, Y, sample_weight=v),
)

# verbose (scikit-learn's convention), on each fit that takes it
for _name, _fit in {
    "fit_temperature": lambda v: skprior.fit_temperature(Z, Y, verbose=v),
    "fit_bias_corrected_temperature": lambda v: skprior.fit_bias_corrected_temperature(
        Z, Y, verbose=v
    ),
    "fit_vector_scaling": lambda v: skprior.fit_vector_scaling(Z, Y, verbose=v),
    "fit_dirichlet_calibration": lambda v: skprior.fit_dirichlet_calibration(
        Z, Y, reg_lambda=1.0, verbose=v
    ),
    "select_dirichlet_regularization": lambda v: (
        skprior.select_dirichlet_regularization(Z, Y, verbose=v)
    ),
    "estimate_test_prior": lambda v: skprior.estimate_test_prior(P, Q, verbose=v),
}.items():
    _add(_name, "verbose", BAD_VERBOSE, _fit)

# class-wise calibration
BAD_VECTOR = [
    (label, v)
    for label, v in BAD_PRIOR
    if label not in ("negative", "sum != 1", "dict, wrong keys")
]
BAD_PENALTY = [("negative", -1.0), ("NaN", np.nan), ("string", "x"), ("array", W)]
_add(
    "fit_vector_scaling",
    "logits",
    BAD_LOGITS,
    lambda v: skprior.fit_vector_scaling(v, Y),
)
_add("fit_vector_scaling", "y", BAD_INDICES, lambda v: skprior.fit_vector_scaling(Z, v))
_add(
    "fit_vector_scaling",
    "sample_weight",
    BAD_WEIGHTS,
    lambda v: skprior.fit_vector_scaling(Z, Y, sample_weight=v),
)
_add(
    "fit_vector_scaling",
    "bias",
    [("string", "yes"), ("None", None), ("number", 2)],
    lambda v: skprior.fit_vector_scaling(Z, Y, bias=v),
)
_add(
    "softmax_vector_scaling",
    "logits",
    BAD_LOGITS,
    lambda v: skprior.softmax_vector_scaling(v, np.ones(N_CLASSES)),
)
_add(
    "softmax_vector_scaling",
    "weights",
    [*BAD_VECTOR, ("None", None)],
    lambda v: skprior.softmax_vector_scaling(Z, v),
)
_add(
    "softmax_vector_scaling",
    "bias",
    BAD_VECTOR,
    lambda v: skprior.softmax_vector_scaling(Z, np.ones(N_CLASSES), v),
)
for _name, _func in (
    ("fit_dirichlet_calibration", skprior.fit_dirichlet_calibration),
    ("select_dirichlet_regularization", skprior.select_dirichlet_regularization),
):
    _add(_name, "logits", BAD_LOGITS, lambda v, f=_func: f(v, Y, reg_mu=1.0))
    _add(_name, "y", BAD_INDICES, lambda v, f=_func: f(Z, v, reg_mu=1.0))
    _add(
        _name,
        "sample_weight",
        BAD_WEIGHTS,
        lambda v, f=_func: f(Z, Y, reg_mu=1.0, sample_weight=v),
    )
    _add(_name, "reg_mu", BAD_PENALTY, lambda v, f=_func: f(Z, Y, reg_mu=v))
_add(
    "fit_dirichlet_calibration",
    "reg_lambda",
    [*BAD_PENALTY, ("None", None)],
    lambda v: skprior.fit_dirichlet_calibration(Z, Y, reg_lambda=v),
)
_add(
    "softmax_dirichlet_calibration",
    "logits",
    BAD_LOGITS,
    lambda v: skprior.softmax_dirichlet_calibration(v, np.eye(N_CLASSES)),
)
_add(
    "softmax_dirichlet_calibration",
    "matrix",
    [
        ("short", np.eye(2)),
        ("1-D", np.ones(N_CLASSES)),
        ("NaN", _with(np.eye(N_CLASSES), (0, 1), np.nan)),
        ("strings", np.array([["a"] * 3] * 3)),
        ("string", "eye"),
        ("None", None),
        ("complex", np.eye(N_CLASSES).astype(complex)),
    ],
    lambda v: skprior.softmax_dirichlet_calibration(Z, v),
)
_add(
    "softmax_dirichlet_calibration",
    "bias",
    BAD_VECTOR,
    lambda v: skprior.softmax_dirichlet_calibration(Z, np.eye(N_CLASSES), v),
)

_add("adjust_to_prior", "proba", BAD_PROBA, lambda v: skprior.adjust_to_prior(v, Q, Q))
_add(
    "adjust_to_prior",
    "train_prior",
    BAD_TRAIN_PRIOR,
    lambda v: skprior.adjust_to_prior(P, v, Q),
)
_add(
    "adjust_to_prior",
    "test_prior",
    [*BAD_PRIOR, ("None", None)],
    lambda v: skprior.adjust_to_prior(P, Q, v),
)

_add(
    "estimate_test_prior",
    "proba",
    BAD_PROBA,
    lambda v: skprior.estimate_test_prior(v, Q),
)
_add(
    "estimate_test_prior",
    "train_prior",
    BAD_TRAIN_PRIOR,
    lambda v: skprior.estimate_test_prior(P, v),
)
_add(
    "estimate_test_prior",
    "init",
    BAD_PRIOR,
    lambda v: skprior.estimate_test_prior(P, Q, init=v),
)
_add(
    "estimate_test_prior",
    "method",
    BAD_OPTION,
    lambda v: skprior.estimate_test_prior(P, Q, method=v),
)
_add(
    "estimate_test_prior",
    "solver",
    BAD_OPTION,
    lambda v: skprior.estimate_test_prior(P, Q, solver=v),
)
_add(
    "estimate_test_prior",
    "dirichlet_alpha",
    [("below 1", 0.5), ("NaN", np.nan), ("string", "x")],
    lambda v: skprior.estimate_test_prior(P, Q, method="map", dirichlet_alpha=v),
)
_add(
    "estimate_test_prior",
    "max_iter",
    BAD_COUNT,
    lambda v: skprior.estimate_test_prior(P, Q, max_iter=v),
)
_add(
    "estimate_test_prior",
    "tol",
    BAD_POSITIVE,
    lambda v: skprior.estimate_test_prior(P, Q, tol=v),
)

_add(
    "bbse_test_prior",
    "proba",
    BAD_PROBA,
    lambda v: skprior.bbse_test_prior(v, CONFUSION),
)
_add(
    "bbse_test_prior",
    "confusion",
    [
        ("1-D", CONFUSION[0]),
        ("wrong shape", CONFUSION[:2]),
        ("NaN", _with(CONFUSION, (0, 0), np.nan)),
        ("negative", _with(CONFUSION, (0, 0), -0.1)),
        ("sum != 1", CONFUSION * 2),
        ("ragged", [[0.5, 0.5], [0.0]]),
        ("None", None),
        ("string", "confusion.npy"),
        ("sparse", sp.csr_matrix(CONFUSION)),
    ],
    lambda v: skprior.bbse_test_prior(P, v),
)

_add(
    "rlls_test_prior",
    "proba",
    BAD_PROBA,
    lambda v: skprior.rlls_test_prior(v, CONFUSION),
)
_add(
    "rlls_test_prior",
    "confusion",
    [("wrong shape", CONFUSION[:2]), ("NaN", _with(CONFUSION, (0, 0), np.nan))],
    lambda v: skprior.rlls_test_prior(P, v),
)
_add(
    "rlls_test_prior",
    "reg",
    [("negative", -1.0), ("NaN", np.nan), ("string", "x")],
    lambda v: skprior.rlls_test_prior(P, CONFUSION, reg=v),
)

_add(
    "effective_train_prior",
    "y",
    [("2-D", np.ones((3, 2))), ("None", None)],
    lambda v: skprior.effective_train_prior(v),
)
_add(
    "effective_train_prior",
    "sampling_ratio",
    [("negative", {0: -1.0, 1: 1.0, 2: 1.0}), ("string", "x")],
    lambda v: skprior.effective_train_prior(Y, sampling_ratio=v),
)
_add(
    "effective_train_prior",
    "sample_weight",
    BAD_WEIGHTS,
    lambda v: skprior.effective_train_prior(Y, sample_weight=v),
)

_add(
    "label_shift_test",
    "proba",
    BAD_PROBA,
    lambda v: skprior.label_shift_test(v, P),
)
_add(
    "label_shift_test",
    "level",
    [("above 1", 1.5), ("NaN", np.nan), ("string", "x")],
    lambda v: skprior.label_shift_test(P, P, level=v),
)

_add(
    "joint_confusion_matrix",
    "proba",
    BAD_PROBA,
    lambda v: skprior.joint_confusion_matrix(v, Y),
)
_add(
    "joint_confusion_matrix",
    "y",
    BAD_INDICES,
    lambda v: skprior.joint_confusion_matrix(P, v),
)
_add(
    "joint_confusion_matrix",
    "sample_weight",
    BAD_WEIGHTS,
    lambda v: skprior.joint_confusion_matrix(P, Y, sample_weight=v),
)

_add(
    "conformal_prediction_set",
    "proba_cal",
    BAD_PROBA,
    lambda v: skprior.conformal_prediction_set(v, Y, P, mode="split"),
)
_add(
    "conformal_prediction_set",
    "y",
    BAD_INDICES,
    lambda v: skprior.conformal_prediction_set(P, v, P, mode="split"),
)
_add(
    "conformal_prediction_set",
    "proba_test",
    [*BAD_PROBA, ("other classes", np.full((6, 2), 0.5))],
    lambda v: skprior.conformal_prediction_set(P, Y, v, mode="split"),
)
_add(
    "conformal_prediction_set",
    "test_prior",
    [*BAD_PRIOR, ("None", None)],
    lambda v: skprior.conformal_prediction_set(P, Y, P, test_prior=v),
)
_add(
    "conformal_prediction_set",
    "train_prior",
    BAD_TRAIN_PRIOR,
    lambda v: skprior.conformal_prediction_set(P, Y, P, test_prior=Q, train_prior=v),
)
_add(
    "conformal_prediction_set",
    "sample_weight",
    BAD_WEIGHTS,
    lambda v: skprior.conformal_prediction_set(P, Y, P, mode="split", sample_weight=v),
)
for _argument, _bad in (
    ("alpha", [("zero", 0.0), ("one", 1.0), ("NaN", np.nan), ("string", "x")]),
    ("delta", [("zero", 0.0), ("above 1", 1.5), ("string", "x")]),
    ("score", BAD_OPTION),
    ("mode", BAD_OPTION),
):
    _add(
        "conformal_prediction_set",
        _argument,
        _bad,
        lambda v, argument=_argument: skprior.conformal_prediction_set(
            P, Y, P, test_prior=Q, **{argument: v}
        ),
    )

_add(
    "estimate_source_prior",
    "proba",
    BAD_PROBA,
    lambda v: skprior.estimate_source_prior(v, Y),
)
_add(
    "estimate_source_prior",
    "y",
    [(label, v) for label, v in BAD_INDICES if label != "None"],
    lambda v: skprior.estimate_source_prior(P, v),
)
_add(
    "estimate_source_prior",
    "sample_weight",
    BAD_WEIGHTS,
    lambda v: skprior.estimate_source_prior(P, Y, sample_weight=v),
)
_add(
    "estimate_source_prior",
    "source",
    BAD_OPTION,
    lambda v: skprior.estimate_source_prior(P, Y, source=v),
)

_add("topk_entropy", "proba", BAD_PROBA, lambda v: skprior.topk_entropy(v))
_add("topk_entropy", "k", BAD_K, lambda v: skprior.topk_entropy(P, v))
_add("topk_entropy", "kind", BAD_OPTION, lambda v: skprior.topk_entropy(P, kind=v))

_add(
    "alternating_normalization",
    "proba",
    BAD_PROBA,
    lambda v: skprior.alternating_normalization(v, Q),
)
_add(
    "alternating_normalization",
    "prior",
    BAD_TRAIN_PRIOR,
    lambda v: skprior.alternating_normalization(P, v),
)
_add(
    "alternating_normalization",
    "k",
    BAD_K,
    lambda v: skprior.alternating_normalization(P, Q, k=v),
)
_add(
    "alternating_normalization",
    "tau",
    BAD_UNIT,
    lambda v: skprior.alternating_normalization(P, Q, tau=v),
)
_add(
    "alternating_normalization",
    "alpha",
    BAD_POSITIVE,
    lambda v: skprior.alternating_normalization(P, Q, alpha=v),
)
_add(
    "alternating_normalization",
    "n_iter",
    BAD_COUNT,
    lambda v: skprior.alternating_normalization(P, Q, n_iter=v),
)
_add(
    "alternating_normalization",
    "reference",
    [(label, v) for label, v in BAD_PROBA if label != "None"],
    lambda v: skprior.alternating_normalization(P, Q, reference=v),
)
_add(
    "alternating_normalization",
    "reference_weight",
    [*BAD_WEIGHTS, ("without reference", W)],
    lambda v: skprior.alternating_normalization(
        P, Q, reference=None if v is W else P, reference_weight=v
    ),
)
_add(
    "alternating_normalization",
    "uncertainty",
    BAD_OPTION,
    lambda v: skprior.alternating_normalization(P, Q, uncertainty=v),
)

for _metric in (expected_calibration_error, reliability_curve):
    _name = _metric.__name__
    _add(_name, "y_true", BAD_LABELS, lambda v, f=_metric: f(v, P))
    _add(
        _name,
        "y_proba",
        [
            *BAD_PROBA,
            ("1-D above 1", np.full(len(Y), 1.5)),
            ("1-D NaN", _with(P[:, 0], 0, np.nan)),
        ],
        lambda v, f=_metric: f(Y, v),
        names=r"(?<![\w.])y_proba(?!\w)",
    )
    _add(
        _name,
        "sample_weight",
        BAD_WEIGHTS,
        lambda v, f=_metric: f(Y, P, sample_weight=v),
    )
    _add(
        _name,
        "labels",
        [
            ("too few", [0, 1]),
            ("repeated", [0, 1, 1]),
            ("missing a label", [0, 1, 5]),
            ("2-D", [[0, 1, 2]]),
            ("string", "abc"),
        ],
        lambda v, f=_metric: f(Y, P, labels=v),
    )
    _add(_name, "n_bins", BAD_COUNT, lambda v, f=_metric: f(Y, P, n_bins=v))
    _add(_name, "strategy", BAD_OPTION, lambda v, f=_metric: f(Y, P, strategy=v))
_add(
    "expected_calibration_error",
    "kind",
    BAD_OPTION,
    lambda v: expected_calibration_error(Y, P, kind=v),
)


def _plot(**kwargs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        return ReliabilityDisplay.from_predictions(**kwargs)
    finally:
        plt.close("all")


_add(
    "ReliabilityDisplay.from_predictions",
    "y_proba",
    BAD_PROBA,
    lambda v: _plot(y_true=Y, y_proba=v),
)
_add(
    "ReliabilityDisplay.from_predictions",
    "y_true",
    BAD_LABELS,
    lambda v: _plot(y_true=v, y_proba=P),
)


# -- multi-label -------------------------------------------------------------------

# per_label: ``P`` read as 3 labels (each column a probability of "present"),
# ``Q`` as their priors of "present".
_add(
    "per_label",
    "func",
    [("not callable", 3), ("None", None), ("string", "adjust_to_prior")],
    lambda v: skprior.per_label(v, P, Q, Q),
)
_add(
    "per_label",
    "proba",
    [
        (label, v)
        for label, v in BAD_PROBA
        # (one column is one label; three columns summing to 2 are three labels)
        if label not in ("one column", "rows != 1")
    ]
    + [("list with 3 columns", [P, P]), ("too large", P + 1)],
    lambda v: skprior.per_label(skprior.adjust_to_prior, v, Q, Q),
)
_add(
    "per_label",
    "train_prior",
    [
        (label, v)
        for label, v in BAD_TRAIN_PRIOR
        if label != "sum != 1"  # (three labels' priors need not sum to 1)
    ]
    + [("above 1", np.array([0.3, 1.5, 0.4])), ("3 x 3", np.full((3, 3), 1 / 3))],
    lambda v: skprior.per_label(skprior.adjust_to_prior, P, v, Q),
)
_add(
    "per_label",
    "y",
    [("1-D", Y), ("short", (P > 0.5)[:-1]), ("2 labels", (P > 0.5)[:, :2])],
    lambda v: skprior.per_label(skprior.joint_confusion_matrix, P, v),
)
_add(
    "per_label",
    "temperature",
    BAD_TEMPERATURE,
    lambda v: skprior.per_label(skprior.softmax_temperature, Z, v),
)


# -- stream trackers -----------------------------------------------------------------

_add(
    "CumulativePrior",
    "train_prior",
    BAD_TRAIN_PRIOR[1:] + [("None", None)],  # (its length sets the classes)
    lambda v: skprior.CumulativePrior(v),
)
_add(
    "CumulativePrior.update",
    "proba",
    [*BAD_PROBA, ("wrong width", P[:, :2] / P[:, :2].sum(axis=1, keepdims=True))],
    lambda v: skprior.CumulativePrior(Q).update(v),
)
_add(
    "CumulativePrior",
    "budget",
    BAD_COUNT[1:],
    lambda v: skprior.CumulativePrior(Q, budget=v),
)
_add(
    "AggregatingPrior",
    "train_prior",
    BAD_TRAIN_PRIOR[1:] + [("None", None)],
    lambda v: skprior.AggregatingPrior(v),
)
_add(
    "AggregatingPrior.update",
    "proba",
    [*BAD_PROBA, ("wrong width", P[:, :2] / P[:, :2].sum(axis=1, keepdims=True))],
    lambda v: skprior.AggregatingPrior(Q).update(v),
)
for _tracker in ("FollowTheHistory", "FLHFTL"):
    _add(
        _tracker,
        "start",
        BAD_PRIOR[1:] + [("None", None)],
        lambda v, t=_tracker: getattr(skprior, t)(v),
    )
    _add(
        f"{_tracker}.update",
        "estimate",
        [
            ("short", Q[:-1]),
            ("NaN", np.array([np.nan, 0.5, 0.5])),
            ("inf", np.array([np.inf, 0.5, 0.5])),
            ("string", "prior"),
            ("strings", ["a", "b", "c"]),
            ("2-D", Q[None]),
            ("ragged", [[0.3], [0.3, 0.4]]),
            ("None", None),
            ("sparse", sp.csr_matrix(Q)),
        ],
        lambda v, t=_tracker: getattr(skprior, t)(Q).update(v),
    )
_add(
    "FLHFTL",
    "learning_rate",
    BAD_POSITIVE,
    lambda v: skprior.FLHFTL(Q, learning_rate=v),
)


# -- estimators ---------------------------------------------------------------------

_X_FIT = np.random.default_rng(1).normal(size=(60, 4))
_Y_FIT = np.arange(60) % N_CLASSES
_X_FIT[:, 0] += _Y_FIT  # a little signal
_MODEL = LogisticRegression().fit(_X_FIT, _Y_FIT)
X = _X_FIT[:6]

ESTIMATORS = {
    "CANClassifier": lambda **kw: CANClassifier(_MODEL, **kw),
    "CANClassifier[fit]": lambda **kw: CANClassifier(_MODEL, reference="fit", **kw),
    "PriorAdaptedClassifier": lambda **kw: PriorAdaptedClassifier(_MODEL, **kw),
    "TemperatureCalibratedClassifier": lambda **kw: TemperatureCalibratedClassifier(
        _MODEL, **kw
    ),
}
BAD_X = [
    ("NaN", _with(X, (1, 1), np.nan)),
    ("inf", _with(X, (1, 1), np.inf)),
    ("1-D", X[0]),
    ("3-D", X[None]),
    ("wrong width", X[:, :3]),
    ("empty", np.empty((0, 4))),
    ("ragged", [[0.0, 1.0, 2.0, 3.0], [1.0]]),
    ("None", None),
    ("string", "X.csv"),
    ("strings", np.array([["a"] * 4] * 6)),
]
BAD_Y = [
    ("short", Y[:-1]),
    ("NaN", _with(Y, 1, np.nan)),
    ("inf", _with(Y, 1, np.inf)),
    ("2-D", np.column_stack([Y, Y])),
    ("ragged", [[0], [1, 2], [0], [1], [2], [0]]),
    ("None", None),
    ("unknown label", np.array([0, 1, 2, 0, 1, 7])),
    ("continuous", np.linspace(0, 1, 6)),
]
for _est, _make in ESTIMATORS.items():
    _add(f"{_est}.fit", "X", BAD_X, lambda v, m=_make: m().fit(v, Y), names=r"\bX\b")
    _add(f"{_est}.fit", "y", BAD_Y, lambda v, m=_make: m().fit(X, v))
    _add(
        f"{_est}.fit",
        "sample_weight",
        [(label, v) for label, v in BAD_WEIGHTS if label != "sparse"],
        lambda v, m=_make: m().fit(X, Y, sample_weight=v),
    )
    for _method in ("predict_proba", "predict", "predict_log_proba"):
        _add(
            f"{_est}.{_method}",
            "X",
            BAD_X,
            lambda v, m=_make, meth=_method: getattr(m().fit(X, Y), meth)(v),
            names=r"\bX\b",
        )
    if not _est.startswith("Temperature"):
        _add(
            f"{_est}(train_prior=).fit",
            "train_prior",
            BAD_TRAIN_PRIOR,
            lambda v, m=_make: m(train_prior=v).fit(X, Y),
        )
for _method in (
    "estimate_prior",
    "update_prior",
    "predict_proba_online",
    "predict_set",
):
    _add(
        f"PriorAdaptedClassifier.{_method}",
        "X",
        BAD_X,
        lambda v, meth=_method: getattr(PriorAdaptedClassifier(_MODEL).fit(X, Y), meth)(
            v
        ),
        names=r"\bX\b",
    )
_add(
    "PriorAdaptedClassifier.predict_set",
    "alpha",
    [("zero", 0.0), ("one", 1.0), ("NaN", np.nan), ("string", "x"), ("bool", True)],
    lambda v: PriorAdaptedClassifier(_MODEL).fit(X, Y).predict_set(X, alpha=v),
)
for _param, _bad in (
    ("set_score", [*BAD_OPTION, ("randomized", "aps_randomized")]),
    ("set_mode", BAD_OPTION),
    ("set_delta", [("zero", 0.0), ("above 1", 1.5), ("string", "x")]),
):
    _add(
        "PriorAdaptedClassifier.fit",
        _param,
        _bad,
        lambda v, param=_param: PriorAdaptedClassifier(_MODEL, **{param: v}).fit(X, Y),
    )
_add(
    "PriorAdaptedClassifier(method='known').fit",
    "test_prior",
    [*BAD_PRIOR, ("None", None)],
    lambda v: PriorAdaptedClassifier(_MODEL, method="known", test_prior=v).fit(X, Y),
)
_add("CANClassifier.fit", "k", BAD_K, lambda v: CANClassifier(_MODEL, k=v).fit(X, Y))
_add(
    "CANClassifier.fit",
    "tau",
    BAD_UNIT,
    lambda v: CANClassifier(_MODEL, tau=v).fit(X, Y),
)
_add(
    "PriorAdaptedClassifier.fit",
    "method",
    BAD_OPTION,
    lambda v: PriorAdaptedClassifier(_MODEL, method=v).fit(X, Y),
)
_add(
    "TemperatureCalibratedClassifier.fit",
    "method",
    BAD_OPTION,
    lambda v: TemperatureCalibratedClassifier(_MODEL, method=v).fit(X, Y),
)
for _param in ("reg_lambda", "reg_mu"):
    _add(
        "TemperatureCalibratedClassifier.fit",
        _param,
        BAD_PENALTY,
        lambda v, p=_param: TemperatureCalibratedClassifier(
            _MODEL, method="dirichlet", **{p: v}
        ).fit(X, Y),
    )
_add(
    "CANClassifier.fit",
    "estimator",
    [("no predict_proba", object()), ("string", "LogisticRegression")],
    lambda v: CANClassifier(v).fit(X, Y),
)


# -- running and counting -------------------------------------------------------------

OUTCOMES = ("clear", "unclear", "traceback", "silent")


def run_case(case):
    """Run ``case``: return its outcome and the exception (or result)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = case.call()
        except case.exceptions as exc:
            if re.search(case.names, str(exc)):
                return "clear", exc
            return "unclear", exc
        except Exception as exc:  # noqa: BLE001 - counted as an internal failure
            return "traceback", exc
    return "silent", result


def count_outcomes(cases=CASES):
    """``{outcome: [(case, detail), ...]}`` over ``cases``."""
    outcomes = {outcome: [] for outcome in OUTCOMES}
    for case in cases:
        outcome, detail = run_case(case)
        outcomes[outcome].append((case, detail))
    return outcomes


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_refused_with_its_name(case):
    """A bad argument raises ValueError/TypeError whose message names it."""
    outcome, detail = run_case(case)
    assert outcome == "clear", f"{outcome}: {type(detail).__name__}: {detail}"


def test_the_table_covers_every_public_function():
    """Every public function and estimator appears in the table."""
    covered = {
        case.id.split("-")[0].split(".")[0].split("[")[0].split("(")[0]
        for case in CASES
    }
    public = set(skprior.__all__) | set(skprior.metrics.__all__)
    public -= {"PriorEstimate", "ShiftTest"}  # result types, not entry points
    assert public <= covered, sorted(public - covered)


@pytest.mark.parametrize("wrapper", [CANClassifier, PriorAdaptedClassifier])
def test_fit_labels_lacking_a_class_say_so(wrapper):
    """Fit data without rows of a class the model predicts: the training prior
    learned from y is 0 there. The message said "train_prior is 0" to a user
    who passed no train_prior; it now names the missing class in y."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 300)
    X = rng.normal(size=(300, 3)) + y[:, None]
    model = LogisticRegression().fit(X, y)
    keep = y != 2
    with pytest.raises(ValueError, match=r"y has no rows of the classes \[2\]"):
        wrapper(model).fit(X[keep], y[keep])
    with pytest.raises(ValueError, match=r"train_prior is 0 for the classes \[2\]"):
        wrapper(model, train_prior=[0.5, 0.5, 0.0]).fit(X[keep], y[keep])
    weights = (y != 2).astype(float)  # (the class there, with weight 0)
    with pytest.raises(ValueError, match="or only rows of weight 0"):
        wrapper(model).fit(X, y, sample_weight=weights)
