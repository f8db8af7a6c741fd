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
    "CANClassifier": "skprior._can",
    "CumulativePrior": "skprior._stream",
    "FLHFTL": "skprior._stream",
    "FollowTheHistory": "skprior._stream",
    "PriorAdaptedClassifier": "skprior._prior_classifier",
    "PriorEstimate": "skprior._prior",
    "ReliabilityDisplay": "skprior._display",
    "ShiftTest": "skprior._shift",
    "TemperatureCalibratedClassifier": "skprior._temperature_classifier",
    "adjust_to_prior": "skprior._prior",
    "alternating_normalization": "skprior._can",
    "effective_train_prior": "skprior._resampling",
    "bbse_test_prior": "skprior._prior_confusion",
    "estimate_source_prior": "skprior._prior",
    "estimate_test_prior": "skprior._prior",
    "fit_bias_corrected_temperature": "skprior._temperature",
    "fit_temperature": "skprior._temperature",
    "fit_dirichlet_calibration": "skprior._classwise",
    "fit_vector_scaling": "skprior._classwise",
    "select_dirichlet_regularization": "skprior._classwise",
    "softmax_dirichlet_calibration": "skprior._classwise",
    "softmax_vector_scaling": "skprior._classwise",
    "joint_confusion_matrix": "skprior._prior_confusion",
    "per_label": "skprior._multilabel",
    "rlls_test_prior": "skprior._prior_confusion",
    "label_shift_test": "skprior._shift",
    "softmax_temperature": "skprior._temperature",
    "topk_entropy": "skprior._can",
}
# Public subpackages, reachable as attributes (skprior.metrics) without an import.
_SUBMODULES = ("datasets", "metrics")

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
