"""skprior: better class probabilities from any classifier, using the class prior.

scikit-learn compatible meta-estimators that post-process ``predict_proba``, and
the pure array functions behind them for users who hold model outputs only.
"""

# The public names are imported on first use (PEP 562), not here: the
# ``skprior`` command imports this package before its own module, and its
# ``--help`` and ``--version`` must not wait for scikit-learn and SciPy.
# ``from skprior import X``, ``skprior.X``, ``dir(skprior)`` and the docs all
# work as with eager imports. Every new public name is registered here, in
# _PUBLIC (name -> the module that defines it); ``__all__`` is read from it.
import importlib

__version__ = "0.1.0.dev0"

_PUBLIC = {
    "AggregatingPrior": "skprior.label_shift",
    "CANClassifier": "skprior.can",
    "CumulativePrior": "skprior.label_shift",
    "FLHFTL": "skprior.label_shift",
    "FollowTheHistory": "skprior.label_shift",
    "PriorAdaptedClassifier": "skprior.label_shift",
    "PriorEstimate": "skprior.label_shift",
    "ReliabilityDisplay": "skprior.metrics._display",
    "ShiftTest": "skprior.label_shift",
    "TemperatureCalibratedClassifier": "skprior.calibration",
    "adjust_to_prior": "skprior.label_shift",
    "alternating_normalization": "skprior.can",
    "effective_train_prior": "skprior.label_shift",
    "bbse_test_prior": "skprior.label_shift",
    "conformal_prediction_set": "skprior.label_shift",
    "estimate_source_prior": "skprior.label_shift",
    "estimate_test_prior": "skprior.label_shift",
    "fit_bias_corrected_temperature": "skprior.calibration",
    "fit_temperature": "skprior.calibration",
    "fit_dirichlet_calibration": "skprior.calibration",
    "fit_vector_scaling": "skprior.calibration",
    "select_dirichlet_regularization": "skprior.calibration",
    "softmax_dirichlet_calibration": "skprior.calibration",
    "softmax_vector_scaling": "skprior.calibration",
    "joint_confusion_matrix": "skprior.label_shift",
    "per_label": "skprior._per_label",
    "rlls_test_prior": "skprior.label_shift",
    "label_shift_test": "skprior.label_shift",
    "softmax_temperature": "skprior.calibration",
    "topk_entropy": "skprior.can",
}
# Public subpackages, one per method, reachable as attributes (skprior.can)
# without an import.
_SUBMODULES = ("calibration", "can", "datasets", "label_shift", "metrics")

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted({*globals(), *__all__, *_SUBMODULES})
