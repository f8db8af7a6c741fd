"""The estimator of temperature calibration (the array functions it calls are
in ``_temperature_scaling.py``)."""

import numpy as np

from skprior._base import BasePriorClassifier
from skprior._sklearn_compat import HasMethods, StrOptions
from skprior._temperature_scaling import (
    _check_logits,
    fit_bias_corrected_temperature,
    fit_temperature,
    softmax_temperature,
)


class TemperatureCalibratedClassifier(BasePriorClassifier):
    """Calibrate any classifier by a temperature learned on held-out data.

    ``fit(X, y)`` learns a temperature :math:`T` (and, for ``"bcts"``, one bias
    per class) from the inner model's logits on ``(X, y)``;
    ``predict_proba`` returns ``softmax(logits / T + bias)``. The temperature
    does not change which class has the top logit, so ``predict`` is the inner
    model's (``"ec"``, ``"nll"``); biases can change it (``"bcts"``).

    Logits are the inner model's ``decision_function`` when it has one, else
    ``log(predict_proba)`` (then ``softmax(log p / T)`` is :math:`p^{1/T}`
    renormalised, exact for softmax models; exact zeros stay zero). A binary
    1-D score :math:`s` becomes the logits :math:`(0, s)`.

    Parameters
    ----------
    estimator : classifier, default=None
        Any classifier with ``predict_proba`` or ``decision_function``, fitted
        or not. A fitted model is used as it is and never refitted; ``fit``
        should then be given held-out data. An unfitted model is cloned and
        fitted on the data given to ``fit`` -- and calibrated on that same data,
        which makes sense only for models that are not over-confident on their
        training data. ``None`` means ``LogisticRegression()``.
    method : {"ec", "nll", "bcts"}, default="ec"
        ``"ec"``: expectation consistency, mean confidence equal to accuracy
        (Clarté et al. 2023). ``"nll"``: minimum log loss (Guo et al. 2017).
        ``"bcts"``: temperature and class biases by minimum log loss
        (Alexandari et al. 2020). See :func:`fit_temperature` and
        :func:`fit_bias_corrected_temperature`.
    train_prior : array-like of shape (n_classes,), dict or Series, default=None
        The training prior, in the order of ``classes_`` (or keyed by class
        label); not used by the calibration, kept for nesting in
        prior-adapting wrappers. ``None`` counts the weighted label
        frequencies of ``y`` in ``fit``.

    Attributes
    ----------
    estimator_ : classifier
        The fitted inner model (the given one itself when it was fitted).
    temperature_ : float
        The fitted temperature :math:`T`.
    bias_ : ndarray of shape (n_classes,)
        Per-class biases (mean zero); only with ``method="bcts"``.
    train_prior_ : ndarray of shape (n_classes,)
        The training prior.
    classes_ : ndarray of shape (n_classes,)
        Class labels, from the inner model.
    n_features_in_ : int
        Number of features, when the inner model has it.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Feature names, when the inner model has them.

    Warns
    -----
    UserWarning
        In ``fit``, when EC or NLL has no solution on the data (for example, the
        model makes no error on it); see :func:`fit_temperature`.

    See Also
    --------
    fit_temperature : The array function behind ``method="ec"`` and ``"nll"``.
    sklearn.calibration.CalibratedClassifierCV : ``method="temperature"`` is
        NLL temperature scaling with cross-validation.

    Notes
    -----
    scikit-learn's ``CalibratedClassifierCV(method="temperature")`` maps a
    binary score :math:`s` to the logits :math:`(-s, s)`, so its temperature
    (``1 / beta_``) is twice ``temperature_`` on binary problems; the calibrated
    probabilities are the same. For probabilities it takes ``log(p + 1e-12)``
    rather than ``log p``.

    References
    ----------
    .. [1] Clarté, Loureiro, Krzakala and Zdeborová, "Expectation consistency
       for calibration of neural networks", UAI 2023. arXiv:2303.02644.
    .. [2] Guo, Pleiss, Sun and Weinberger, "On calibration of modern neural
       networks", ICML 2017.
    .. [3] Alexandari, Kundaje and Shrikumar, "Maximum likelihood with
       bias-corrected calibration is hard-to-beat at label shift adaptation",
       ICML 2020.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from sklearn.model_selection import train_test_split
    >>> from skprior import TemperatureCalibratedClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> X_train, X_cal, y_train, y_cal = train_test_split(X, y, random_state=0)
    >>> forest = RandomForestClassifier(random_state=0).fit(X_train, y_train)
    >>> calibrated = TemperatureCalibratedClassifier(forest).fit(X_cal, y_cal)
    >>> bool(calibrated.temperature_ < 1)  # forests are under-confident
    True
    >>> calibrated.predict_proba(X_cal[:2]).shape
    (2, 10)
    """

    _parameter_constraints: dict = {
        **BasePriorClassifier._parameter_constraints,
        "estimator": [
            HasMethods(["fit", "predict_proba"]),
            HasMethods(["fit", "decision_function"]),
            None,
        ],
        "method": [StrOptions({"ec", "nll", "bcts"})],
    }

    def __init__(self, estimator=None, *, method="ec", train_prior=None):
        self.estimator = estimator
        self.method = method
        self.train_prior = train_prior

    def _inner_output(self, X):
        """The inner model's logits for ``X``, shape (n_samples, n_classes)."""
        n_classes = len(self.classes_)
        if hasattr(self.estimator_, "decision_function"):
            scores = np.asarray(self.estimator_.decision_function(X))
            name = f"{type(self.estimator_).__name__}.decision_function(X)"
            if scores.ndim == 1 and n_classes != 2:
                raise ValueError(
                    f"{name} is 1-D but the model has {n_classes} classes; a 1-D "
                    f"score is read as binary."
                )
            logits, _ = _check_logits(scores, name=name)
        else:
            proba = self._inner_proba(X)
            with np.errstate(divide="ignore"):
                logits = np.log(proba.astype(np.float64))
            name = f"{type(self.estimator_).__name__}.predict_proba(X)"
        if logits.shape[1] != n_classes:
            raise ValueError(
                f"{name} has {logits.shape[1]} columns but the model has "
                f"{n_classes} classes."
            )
        return logits

    def _fit_post_hoc(self, X, y_index, sample_weight):
        logits = self._inner_output(X)
        if self.method == "bcts":
            self.temperature_, self.bias_ = fit_bias_corrected_temperature(
                logits, y_index, sample_weight=sample_weight
            )
        else:
            self.temperature_ = fit_temperature(
                logits, y_index, method=self.method, sample_weight=sample_weight
            )
            if hasattr(self, "bias_"):
                del self.bias_

    def _adjust_proba(self, logits):
        return softmax_temperature(
            logits, self.temperature_, getattr(self, "bias_", None)
        )
