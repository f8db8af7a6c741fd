"""Temperature calibration: EC, NLL and bias-corrected temperature scaling.

The array functions :func:`softmax_temperature`, :func:`fit_temperature` and
:func:`fit_bias_corrected_temperature`, then the estimator
:class:`TemperatureCalibratedClassifier` that calls them. The root finding and
the L-BFGS fit are in ``_temperature_solvers.py``.
"""

import numpy as np
from scipy.special import logsumexp

from skprior._array_api import namespace_of
from skprior._base import BasePriorClassifier
from skprior._calibration_checks import warn_if_separable
from skprior._classwise import (
    fit_dirichlet_calibration,
    fit_vector_scaling,
    select_dirichlet_regularization,
    softmax_dirichlet_calibration,
    softmax_vector_scaling,
)
from skprior._constraints import (
    CONSTRAINTS,
    constraints,
)
from skprior._kernels import row_blocks
from skprior._options import (
    DEFAULT_REG_LAMBDA,
    DEFAULT_REG_MU,
    DEFAULT_TEMPERATURE_METHOD,
)
from skprior._sklearn_compat import HasMethods, StrOptions, validate_params
from skprior._temperature_solvers import (
    ShiftedLogits,
    fit_bcts,
    fit_ec,
    fit_nll,
    nll_rows,
    shifted,
)
from skprior._temperature_xp import (
    fit_bias_corrected_temperature_xp,
    fit_temperature_xp,
    log_of_proba_xp,
    softmax_xp,
)
from skprior._validation import (
    as_numeric,
    check_logits,
    warn_if_probabilities,
    warn_user,
)
from skprior._validation_labels import (
    check_class_indices,
    check_sample_weight,
)
from skprior._validation_xp import check_logits_lazy, check_logits_xp


@validate_params(
    constraints(logits="array", temperature="temperature", bias="optional_array"),
    prefer_skip_nested_validation=True,
)
def softmax_temperature(logits, temperature, bias=None):
    r"""Class probabilities from logits at a temperature: ``softmax(z / T + b)``.

    .. math::

        p_{ik} = \frac{\exp(z_{ik} / T + b_k)}{\sum_j \exp(z_{ij} / T + b_j)}

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes) or (n_samples,)
        Logits :math:`z`. A 1-D array is the score :math:`s` of the second of two
        classes and stands for the rows :math:`(0, s)`. ``-inf`` (the log of a
        zero probability) gives probability 0. float32 stays float32 (the
        arithmetic is done in float64).
    temperature : float
        Temperature :math:`T > 0`.
    bias : array-like of shape (n_classes,), default=None
        Per-class bias :math:`b` added after the division (bias-corrected
        temperature scaling); ``None`` means 0.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes)
        Rows sum to one.

    See Also
    --------
    fit_temperature : Find ``T`` on held-out logits and labels.

    References
    ----------
    .. [1] Guo, Pleiss, Sun and Weinberger, "On Calibration of Modern Neural
       Networks", ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import softmax_temperature
    >>> softmax_temperature(np.array([[0.0, np.log(3.0)]]), 1.0)
    array([[0.25, 0.75]])
    >>> softmax_temperature(np.array([[0.0, np.log(3.0)]]), 1e6).round(3)
    array([[0.5, 0.5]])
    """
    xp = namespace_of(logits)
    if xp is None:
        z, dtype = check_logits(logits, as_float64=False)
    else:
        z = check_logits_lazy(xp, logits)
    n_classes = z.shape[1]
    if bias is not None:
        bias = as_numeric(bias, "bias", f"({n_classes},)")
        if bias.shape != (n_classes,) or not np.all(np.isfinite(bias)):
            raise ValueError(
                f"bias must be a finite 1-D array with one entry per class "
                f"({n_classes}), got shape {bias.shape}."
            )
    if xp is not None:
        return softmax_xp(xp, z, temperature, bias)
    proba = np.empty(z.shape, dtype=dtype)
    # Block by block, so that the float64 temporaries stay small (a few times
    # one block, not ten times the batch).
    for block in row_blocks(*z.shape):
        with np.errstate(over="ignore", under="ignore"):
            scaled = shifted(z[block].astype(np.float64))
            scaled /= temperature
            if bias is not None:
                scaled += bias
            scaled -= logsumexp(scaled, axis=1, keepdims=True)
            proba[block] = np.exp(scaled, out=scaled)
    return proba


@validate_params(
    {
        **constraints(logits="array", y="array", method="temperature_method"),
        **constraints(sample_weight="optional_array"),
    },
    prefer_skip_nested_validation=True,
)
def fit_temperature(
    logits, y, *, method=DEFAULT_TEMPERATURE_METHOD, sample_weight=None
):
    r"""Find the temperature that calibrates held-out logits.

    ``method="ec"`` (expectation consistency, Clarté et al. 2023) solves

    .. math::

        \frac{\sum_i w_i \max_k \operatorname{softmax}(z_i / T)_k}{\sum_i w_i}
        = \frac{\sum_i w_i [\arg\max_k z_{ik} = y_i]}{\sum_i w_i},

    the mean confidence equals the accuracy. The left side never increases with
    :math:`T` and the right side does not depend on it, so the root is unique
    when it exists. ``method="nll"`` (temperature scaling, Guo et al. 2017)
    minimises the weighted mean log loss
    :math:`\sum_i w_i [\log \sum_k e^{z_{ik}/T} - z_{i y_i}/T] / \sum_i w_i`,
    which is convex in :math:`1/T`; the root of its derivative is found.

    Both are solved with Brent's method in :math:`\log T` on an interval derived
    from the logits (from the smallest gap between a row's top two logits to a
    multiple of the largest spread within a row) and widened until the sign
    changes, so the scale of the logits does not matter.

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes) or (n_samples,)
        Held-out logits :math:`z`. A 1-D array is the score :math:`s` of the
        second of two classes, taken as the rows :math:`(0, s)`. For a model
        that gives probabilities only, pass ``np.log(proba)`` (``-inf`` for exact
        zeros is allowed).
    y : array-like of shape (n_samples,)
        The true classes as column indices ``0..n_classes-1`` of ``logits``.
    method : {"ec", "nll"}, default="ec"
        Expectation consistency or minimum log loss.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights :math:`w_i`; ``None`` means 1.

    Returns
    -------
    temperature : float
        :math:`T > 0`; divide the logits by it (:func:`softmax_temperature`).

    Warns
    -----
    UserWarning
        When no temperature satisfies the criterion: with EC, when the accuracy
        is at least the mean confidence of the hard argmax (for example 1: no
        error on the data) or at most that of uniform probabilities; with NLL,
        when every sample's true class has the top logit, or the logits are no
        better than chance. The temperature is then clipped to the end of the
        search interval on that side (nearly one-hot or nearly uniform
        probabilities), and the warning says which. A limit within its
        rounding error of 0 (accuracy exactly at chance, say) counts as 0, so
        that the outcome does not depend on the order of the rows.

    See Also
    --------
    softmax_temperature : Apply the temperature.
    fit_bias_corrected_temperature : Temperature and per-class biases.
    TemperatureCalibratedClassifier : The same around a scikit-learn model.

    Notes
    -----
    The accuracy in EC is that of ``argmax(z)``, which the temperature does not
    change. For NLL, samples whose true class has logit ``-inf`` (probability
    exactly 0) have an infinite loss at every temperature and are left out.

    scikit-learn's ``CalibratedClassifierCV(method="temperature")`` maps a
    binary score :math:`s` to :math:`(-s, s)` rather than :math:`(0, s)`, so its
    binary temperature (``1 / beta_``) is twice the one returned here; the
    probabilities are the same.

    References
    ----------
    .. [1] Clarté, Loureiro, Krzakala and Zdeborová, "Expectation consistency
       for calibration of neural networks", arXiv:2303.02644, 2023.
    .. [2] Guo, Pleiss, Sun and Weinberger, "On calibration of modern neural
       networks", ICML 2017.

    Examples
    --------
    Over-confident logits: the right temperature is above 1.

    >>> import numpy as np
    >>> from skprior import fit_temperature
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, size=2000)
    >>> logits = rng.normal(size=(2000, 3)) + 1.5 * np.eye(3)[y]
    >>> T = fit_temperature(5 * logits, y, method="ec")
    >>> bool(T > 1)
    True
    >>> bool(abs(fit_temperature(5 * logits, y, method="nll") / T - 1) < 0.2)
    True
    """
    xp = namespace_of(logits)
    if xp is not None:
        return fit_temperature_xp(xp, logits, y, method, sample_weight)
    # (the caller's float32 or float64 array, never written to: the shifted
    # float64 logits are formed block by block, not copied whole)
    z, _ = check_logits(logits, as_float64=False)
    warn_if_probabilities(z)
    y = check_class_indices(y, z.shape[0], z.shape[1])
    weights = check_sample_weight(sample_weight, z.shape[0])
    # Rows of weight 0 must not count, not even in the search interval, so
    # that zero weights are the same as removing the rows.
    keep = weights > 0
    if not keep.all():
        z, y, weights = z[keep], y[keep], weights[keep]
    d = ShiftedLogits(z)
    if method == "ec":
        return fit_ec(d, y, weights)
    return fit_nll(d, y, weights)


@validate_params(
    constraints(logits="array", y="array", sample_weight="optional_array"),
    prefer_skip_nested_validation=True,
)
def fit_bias_corrected_temperature(logits, y, *, sample_weight=None):
    r"""Bias-corrected temperature scaling (BCTS): a temperature and class biases.

    Minimises the weighted mean log loss of
    :math:`\operatorname{softmax}(z_i / T + b)` over :math:`T > 0` and one bias
    :math:`b_k` per class (Alexandari et al. 2020):

    .. math::

        \min_{T, b} \frac{1}{\sum_i w_i} \sum_i w_i
        \Bigl[\log \sum_k e^{z_{ik}/T + b_k} - z_{i y_i}/T - b_{y_i}\Bigr].

    The loss is convex in :math:`(1/T, b)`; it is minimised with L-BFGS and an
    analytic gradient, starting from the NLL temperature
    (:func:`fit_temperature`) and zero biases. The biases are defined up to a
    common constant; the one returned has mean zero.

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes) or (n_samples,)
        Held-out logits (a 1-D array is the score :math:`s` of the second of two
        classes, taken as the rows :math:`(0, s)`); ``-inf`` is allowed.
    y : array-like of shape (n_samples,)
        The true classes as column indices ``0..n_classes-1`` of ``logits``.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights; ``None`` means 1.

    Returns
    -------
    temperature : float
        :math:`T > 0`.
    bias : ndarray of shape (n_classes,)
        :math:`b`, with mean zero.

    Warns
    -----
    ConvergenceWarning
        When L-BFGS stops before convergence.
    UserWarning
        When the logits are no better than chance: the fitted log loss beats
        that of the class biases alone (the label frequencies, ``T -> inf``)
        by a likelihood ratio ``2 n (H - loss)`` below 6.63, the 1% level of
        a chi-square with one degree of freedom (``n`` the effective number
        of samples, ``H`` the entropy of the label frequencies); when the
        fitted ``softmax(z / T + b)`` ranks every fit sample's true class
        first (the data are separable: the loss has no minimum, ``T -> 0``);
        or when ``logits`` look like probabilities.

    See Also
    --------
    fit_temperature : The temperature alone (EC or NLL).
    softmax_temperature : Apply ``T`` and ``b``.

    Notes
    -----
    Every class needs weight in ``y``: the loss of a class that never occurs
    keeps decreasing as its bias goes to :math:`-\infty`. Samples whose true
    class has logit ``-inf`` are left out (their loss is infinite whatever
    :math:`T` and :math:`b`).

    References
    ----------
    .. [1] Alexandari, Kundaje and Shrikumar, "Maximum likelihood with
       bias-corrected calibration is hard-to-beat at label shift adaptation",
       ICML 2020. arXiv:1901.06852.

    Examples
    --------
    Logits whose class 0 is under-weighted by 1: the bias puts it back.

    >>> import numpy as np
    >>> from skprior import fit_bias_corrected_temperature
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, size=5000)
    >>> logits = 2 * np.eye(3)[y] + rng.normal(size=(5000, 3))
    >>> T, bias = fit_bias_corrected_temperature(logits - [1.0, 0.0, 0.0], y)
    >>> bool(bias[0] > bias[1] and bias[0] > bias[2])
    True
    """
    xp = namespace_of(logits)
    if xp is not None:
        return fit_bias_corrected_temperature_xp(xp, logits, y, sample_weight)
    z, _ = check_logits(logits, as_float64=False)  # (never written to)
    warn_if_probabilities(z)
    n_classes = z.shape[1]
    y = check_class_indices(y, z.shape[0], n_classes)
    weights = check_sample_weight(sample_weight, z.shape[0])
    d, y, _, weights = nll_rows(ShiftedLogits(z), y, weights)
    class_weight = np.bincount(y, weights=weights, minlength=n_classes)
    if np.any(class_weight <= 0):
        missing = np.flatnonzero(class_weight <= 0).tolist()
        raise ValueError(
            f"Bias-corrected temperature scaling needs every class in y, but the "
            f"classes at columns {missing} have no (weighted, finite-logit) "
            f"sample: their bias would go to -infinity. Fit on data that has "
            f"every class, or use fit_temperature (one parameter)."
        )
    temperature, bias = fit_bcts(d, y, weights)
    warn_if_separable(
        lambda block: d.block(block) / temperature + bias,
        y,
        weights,
        *d.shape,
        "Bias-corrected temperature scaling",
        "T -> 0 (and the biases grow with 1 / T)",
    )
    return temperature, bias


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
        training data. ``None`` means ``LogisticRegression()``.
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
    train_prior : array-like of shape (n_classes,), dict or Series, \
            default="deprecated"
        Deprecated since 0.2, to be removed in 0.3 (a ``FutureWarning``): the
        calibration does not use it, and an outer ``PriorAdaptedClassifier``
        or ``CANClassifier`` takes its own. Given, it is stored as
        ``train_prior_`` as before.

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
        **BasePriorClassifier._parameter_constraints,
        "estimator": [
            HasMethods(["fit", "predict_proba"]),
            HasMethods(["fit", "decision_function"]),
            None,
        ],
        **constraints(
            method="calibration_method", reg_lambda="reg_lambda", reg_mu="reg_mu"
        ),
        "train_prior": [*CONSTRAINTS["optional_prior"], StrOptions({"deprecated"})],
    }

    def __init__(
        self,
        estimator=None,
        *,
        method=DEFAULT_TEMPERATURE_METHOD,
        reg_lambda=DEFAULT_REG_LAMBDA,
        reg_mu=DEFAULT_REG_MU,
        train_prior="deprecated",
    ):
        self.estimator = estimator
        self.method = method
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.train_prior = train_prior

    def _given_train_prior(self):
        if isinstance(self.train_prior, str) and self.train_prior == "deprecated":
            return None
        warn_user(
            "train_prior of TemperatureCalibratedClassifier is deprecated and will "
            "be removed in skprior 0.3: the calibration does not use it. An outer "
            "PriorAdaptedClassifier or CANClassifier takes its own train_prior.",
            FutureWarning,
        )
        return self.train_prior

    def _inner_output(self, X):
        """The inner model's logits for ``X``, shape (n_samples, n_classes)."""
        n_classes = len(self.classes_)
        if hasattr(self.estimator_, "decision_function"):
            scores = self._call_inner("decision_function", X)
            xp = namespace_of(scores)  # (array API dispatch: stays on its device)
            if xp is None:
                scores = np.asarray(scores)
            name = f"{type(self.estimator_).__name__}.decision_function(X)"
            if scores.ndim == 1 and n_classes != 2:
                raise ValueError(
                    f"{name} is 1-D but the model has {n_classes} classes; a 1-D "
                    f"score is read as binary."
                )
            if xp is None:
                logits, _ = check_logits(scores, name=name)
            else:
                logits, _ = check_logits_xp(xp, scores, name=name)
        else:
            proba = self._inner_proba(X)
            xp = namespace_of(proba)
            if xp is None:
                with np.errstate(divide="ignore"):
                    logits = np.log(proba.astype(np.float64))
            else:
                logits = log_of_proba_xp(xp, proba)
            name = f"{type(self.estimator_).__name__}.predict_proba(X)"
        if logits.shape[1] != n_classes:
            raise ValueError(
                f"{name} has {logits.shape[1]} columns but the model has "
                f"{n_classes} classes."
            )
        return logits

    def _fit_post_hoc(self, X, y_index, sample_weight):
        for name in _FITTED:  # left by an earlier fit with another method
            if hasattr(self, name):
                delattr(self, name)
        if self.method != "dirichlet" and (
            not (isinstance(self.reg_lambda, str) and self.reg_lambda == "auto")
            or self.reg_mu is not None
        ):
            warn_user(
                f"reg_lambda and reg_mu are used only by method='dirichlet'; "
                f"method={self.method!r} ignores them. Leave them at their "
                f"defaults, or pass method='dirichlet'."
            )
        logits = self._inner_output(X)
        if self.method == "bcts":
            self.temperature_, self.bias_ = fit_bias_corrected_temperature(
                logits, y_index, sample_weight=sample_weight
            )
        elif self.method in ("nbvs", "vs"):
            self.weights_, bias = fit_vector_scaling(
                logits, y_index, bias=self.method == "vs", sample_weight=sample_weight
            )
            if self.method == "vs":
                self.bias_ = bias
        elif self.method == "dirichlet":
            self._fit_dirichlet(logits, y_index, sample_weight)
        else:
            self.temperature_ = fit_temperature(
                logits, y_index, method=self.method, sample_weight=sample_weight
            )

    def _fit_dirichlet(self, logits, y_index, sample_weight):
        reg_lambda = self.reg_lambda
        if isinstance(reg_lambda, str) and reg_lambda == "auto":
            reg_lambda, self.cv_scores_ = select_dirichlet_regularization(
                logits, y_index, reg_mu=self.reg_mu, sample_weight=sample_weight
            )
        self.reg_lambda_ = float(reg_lambda)
        self.reg_mu_ = self.reg_lambda_ if self.reg_mu is None else float(self.reg_mu)
        self.matrix_, self.bias_ = fit_dirichlet_calibration(
            logits,
            y_index,
            reg_lambda=self.reg_lambda_,
            reg_mu=self.reg_mu_,
            sample_weight=sample_weight,
        )

    def _adjust_proba(self, logits):
        # (by what fit learned, not by self.method, which set_params may have
        # changed since)
        if hasattr(self, "matrix_"):
            return softmax_dirichlet_calibration(logits, self.matrix_, self.bias_)
        if hasattr(self, "weights_"):
            return softmax_vector_scaling(
                logits, self.weights_, getattr(self, "bias_", None)
            )
        return softmax_temperature(
            logits, self.temperature_, getattr(self, "bias_", None)
        )


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
