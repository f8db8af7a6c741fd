"""``TemperatureCalibratedClassifier``: the estimator of temperature calibration.

It fits one of the calibrations of :mod:`skprior.calibration._temperature`
(EC, NLL, BCTS) or of :mod:`skprior.calibration._classwise` (NBVS, VS,
Dirichlet) on held-out data and applies it to the inner model's outputs; the
numerics are in those modules' array functions, which it only calls.
"""

import numpy as np

from skprior._base import BasePriorClassifier
from skprior._utils._array_api import get_namespace, safe_log, working_dtype_results
from skprior._utils._constraints import constraints
from skprior._utils._options import (
    DEFAULT_REG_LAMBDA,
    DEFAULT_REG_MU,
    DEFAULT_TEMPERATURE_METHOD,
)
from skprior._utils._sklearn_compat import HasMethods
from skprior._utils._validation import check_logits, warn_user
from skprior.calibration._classwise import (
    fit_dirichlet_calibration,
    fit_vector_scaling,
    select_dirichlet_regularization,
    softmax_dirichlet_calibration,
    softmax_vector_scaling,
)
from skprior.calibration._classwise_solvers import fold_progress
from skprior.calibration._temperature import (
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

    The class-wise calibrators learn more than a temperature:
    ``softmax(w * logits + b)`` with one factor (and one bias) per class
    (``"nbvs"``, ``"vs"``), or ``softmax(W log p + b)`` with a full matrix
    (``"dirichlet"``); they can change ``predict`` too.

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
        training data. ``None`` means ``LogisticRegression()``. To search over
        fitted models (``GridSearchCV(..., {"estimator": [a, b]})``), wrap each
        in ``sklearn.frozen.FrozenEstimator``: the search clones the values it
        tries, and a clone is unfitted (``fit`` warns where it sees this).
    method : {"ec", "nll", "bcts", "nbvs", "vs", "dirichlet"}, default="ec"
        ``"ec"``: expectation consistency, mean confidence equal to accuracy
        (Clarté et al. 2023). ``"nll"``: minimum log loss (Guo et al. 2017).
        ``"bcts"``: temperature and class biases by minimum log loss
        (Alexandari et al. 2020). ``"nbvs"``, ``"vs"``: one factor per class,
        without and with class biases (:func:`fit_vector_scaling`).
        ``"dirichlet"``: Dirichlet calibration with ODIR regularisation (Kull
        et al. 2019, :func:`fit_dirichlet_calibration`). See also
        :func:`fit_temperature` and :func:`fit_bias_corrected_temperature`.
    reg_lambda : float >= 0 or "auto", default="auto"
        Off-diagonal penalty λ of ``"dirichlet"``; ``"auto"``
        chooses it by 5-fold cross-validation on the ``fit`` data
        (:func:`select_dirichlet_regularization`). Used by ``"dirichlet"``
        only (a warning otherwise).
    reg_mu : float >= 0, default=None
        Bias penalty μ of ``"dirichlet"``; ``None`` means
        μ = λ. Used by ``"dirichlet"`` only.
    verbose : int, default=0
        Print the calibration's fit as it goes (to stdout, as scikit-learn
        does): a line when it stops and, for ``reg_lambda="auto"``, one per
        value of λ tried (1); a line per step (2). See the ``verbose`` of
        :func:`fit_temperature`, :func:`fit_bias_corrected_temperature`,
        :func:`fit_vector_scaling` and :func:`fit_dirichlet_calibration`.

    Attributes
    ----------
    estimator_ : classifier
        The fitted inner model (the given one itself when it was fitted).
    temperature_ : float
        The fitted temperature :math:`T`; with ``"ec"``, ``"nll"``, ``"bcts"``.
    bias_ : ndarray of shape (n_classes,)
        Per-class biases (mean zero); with ``"bcts"``, ``"vs"`` and
        ``"dirichlet"``.
    weights_ : ndarray of shape (n_classes,)
        Per-class factors :math:`w`; with ``"nbvs"`` and ``"vs"``.
    matrix_ : ndarray of shape (n_classes, n_classes)
        :math:`W` of Dirichlet calibration; with ``"dirichlet"``.
    reg_lambda_, reg_mu_ : float
        The penalties used (chosen, for ``reg_lambda="auto"``); with
        ``"dirichlet"``.
    cv_scores_ : dict
        ``{lambda: mean held-out log loss}`` of the cross-validation; with
        ``"dirichlet"`` and ``reg_lambda="auto"``.
    train_prior_ : ndarray of shape (n_classes,)
        The weighted label frequencies of the ``fit`` data (not used by the
        calibration).
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
       for calibration of neural networks", arXiv:2303.02644, 2023.
    .. [2] Guo, Pleiss, Sun and Weinberger, "On calibration of modern neural
       networks", ICML 2017.
    .. [3] Alexandari, Kundaje and Shrikumar, "Maximum likelihood with
       bias-corrected calibration is hard-to-beat at label shift adaptation",
       ICML 2020.
    .. [4] Kull, Perello-Nieto, Kängsepp, Silva Filho, Song and Flach,
       "Beyond temperature scaling: obtaining well-calibrated multiclass
       probabilities with Dirichlet calibration", NeurIPS 2019.

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
        **{
            name: constraint
            for name, constraint in BasePriorClassifier._parameter_constraints.items()
            if name != "train_prior"  # (not a parameter: see _given_train_prior)
        },
        "estimator": [
            HasMethods(["fit", "predict_proba"]),
            HasMethods(["fit", "decision_function"]),
            None,
        ],
        **constraints(
            method="calibration_method", reg_lambda="reg_lambda", reg_mu="reg_mu"
        ),
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        estimator=None,
        *,
        method=DEFAULT_TEMPERATURE_METHOD,
        reg_lambda=DEFAULT_REG_LAMBDA,
        reg_mu=DEFAULT_REG_MU,
        verbose=0,
    ):
        self.estimator = estimator
        self.method = method
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.verbose = verbose

    def _given_train_prior(self):
        # (no train_prior parameter: the calibration does not use a prior,
        # and an outer PriorAdaptedClassifier or CANClassifier takes its own;
        # train_prior_ holds the fit labels' frequencies, for such a wrapper)
        return None

    def _inner_output(self, X):
        """The inner model's logits for ``X``, shape (n_samples, n_classes)."""
        if not hasattr(self.estimator_, "decision_function"):
            proba = self._inner_proba(X)  # (its columns checked against classes_)
            xp, _ = get_namespace(proba)
            return safe_log(xp, xp.astype(proba, xp.float64))  # (log 0 = -inf)
        n_classes = self._n_classes()
        final = self.estimator_
        while hasattr(final, "steps"):  # (a pipeline: its final step scores)
            final = final.steps[-1][1]
        if n_classes > 2 and getattr(final, "decision_function_shape", "") == "ovo":
            # (K = 3 gives 3 columns too: the width cannot tell)
            raise ValueError(
                f"{type(final).__name__}(decision_function_shape='ovo') scores "
                f"pairs of classes, not classes: its columns are not logits. "
                f"Fit it with decision_function_shape='ovr' (the default)."
            )
        scores = self._call_inner("decision_function", X)
        # (array API dispatch: the scores stay in their namespace, on device)
        _, is_numpy = get_namespace(scores)
        scores = np.asarray(scores) if is_numpy else scores
        name = f"{type(self.estimator_).__name__}.decision_function(X)"
        if scores.ndim == 1 and n_classes != 2:
            raise ValueError(
                f"{name} is 1-D but the model has {n_classes} classes; a 1-D "
                f"score is read as binary."
            )
        logits, _ = check_logits(scores, name, is_numpy)
        if logits.shape[1] != n_classes:
            raise ValueError(
                f"{name} has {logits.shape[1]} columns but the model has "
                f"{n_classes} classes."
            )
        return logits

    # (fitted state in float64 whatever the dtype of the inner model's output)
    @working_dtype_results()
    def _fit_post_hoc(self, X, y_index, sample_weight):
        for name in _FITTED:  # left by an earlier fit with another method
            if hasattr(self, name):
                delattr(self, name)
        if self._n_classes() < 2:
            raise ValueError(
                f"{type(self.estimator_).__name__} knows one class only "
                f"(classes_ = {np.asarray(self.classes_).tolist()}): its "
                f"probability is 1 and there is no temperature to fit. Fit the "
                f"model on data with two classes or more (in a multi-label fit: "
                f"on rows where the label is both present and absent)."
            )
        if self.method != "dirichlet" and (
            not (isinstance(self.reg_lambda, str) and self.reg_lambda == "auto")
            or self.reg_mu is not None
        ):
            warn_user(
                f"reg_lambda and reg_mu are used only by method='dirichlet'; "
                f"method={self.method!r} ignores them. Leave them at their "
                f"defaults, or pass method='dirichlet'."
            )
        fitted = fit_calibration(
            self.method,
            self._inner_output(X),
            y_index,
            reg_lambda=self.reg_lambda,
            reg_mu=self.reg_mu,
            sample_weight=sample_weight,
            verbose=self.verbose,
        )
        for name, value in fitted.items():
            setattr(self, name + "_", value)

    def _adjust_proba(self, logits):
        # (by what fit learned, not by self.method, which set_params may have
        # changed since)
        fitted = {name[:-1]: getattr(self, name, None) for name in _FITTED}
        return apply_calibration(logits, fitted)


# Fitted attributes of the calibration, whichever the method.
_FITTED = (
    "temperature_",
    "bias_",
    "weights_",
    "matrix_",
    "reg_lambda_",
    "reg_mu_",
    "cv_scores_",
)


def fit_calibration(
    method,
    logits,
    y,
    *,
    reg_lambda,
    reg_mu,
    sample_weight=None,
    verbose=0,
    progress=None,
):
    """The parameters of the calibration ``method`` fitted on ``logits`` and ``y``.

    A dict keyed by the names of the estimator's fitted attributes without
    their trailing underscore (``"temperature"``, ``"bias"``, ``"weights"``,
    ``"matrix"``, ``"reg_lambda"``, ``"reg_mu"``, ``"cv_scores"``), holding
    those of ``method`` only; ``reg_lambda`` and ``reg_mu`` are used by
    ``"dirichlet"`` only. Shared with ``skprior calibrate``, whose progress
    bar is ``progress(done, total)``, called after each fold fit of
    ``reg_lambda="auto"`` with the fits done and the most there may be.
    """
    weight = {"sample_weight": sample_weight, "verbose": verbose}
    if method == "bcts":
        temperature, bias = fit_bias_corrected_temperature(logits, y, **weight)
        return {"temperature": temperature, "bias": bias}
    if method in ("nbvs", "vs"):
        has_bias = method == "vs"
        weights, bias = fit_vector_scaling(logits, y, bias=has_bias, **weight)
        return {"weights": weights, **({"bias": bias} if has_bias else {})}
    if method != "dirichlet":
        return {"temperature": fit_temperature(logits, y, method=method, **weight)}
    scores = {}
    if isinstance(reg_lambda, str) and reg_lambda == "auto":
        with fold_progress(progress):
            reg_lambda, scores["cv_scores"] = select_dirichlet_regularization(
                logits, y, reg_mu=reg_mu, **weight
            )
    reg_lambda = float(reg_lambda)
    reg_mu = reg_lambda if reg_mu is None else float(reg_mu)
    matrix, bias = fit_dirichlet_calibration(
        logits, y, reg_lambda=reg_lambda, reg_mu=reg_mu, **weight
    )
    return {
        "matrix": matrix,
        "bias": bias,
        "reg_lambda": reg_lambda,
        "reg_mu": reg_mu,
        **scores,
    }


def apply_calibration(logits, fitted):
    """The probabilities of ``logits`` under the calibration ``fitted``.

    ``fitted`` is a dict of :func:`fit_calibration`; its ``None`` entries are
    parameters the calibration does not have.
    """
    bias = fitted.get("bias")
    if fitted.get("matrix") is not None:
        return softmax_dirichlet_calibration(logits, fitted["matrix"], bias)
    if fitted.get("weights") is not None:
        return softmax_vector_scaling(logits, fitted["weights"], bias)
    return softmax_temperature(logits, fitted["temperature"], bias)
