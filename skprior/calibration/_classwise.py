"""Class-wise calibration: vector scaling and Dirichlet calibration.

Calibrators with one parameter (or more) per class, fitted by log loss on
held-out logits: no-bias vector scaling and vector scaling
(:func:`fit_vector_scaling`, applied by :func:`softmax_vector_scaling`) and
Dirichlet calibration with ODIR regularisation
(:func:`fit_dirichlet_calibration`, :func:`select_dirichlet_regularization`,
applied by :func:`softmax_dirichlet_calibration`).
:class:`~skprior.TemperatureCalibratedClassifier` calls them for
``method="nbvs"``, ``"vs"`` and ``"dirichlet"``. The L-BFGS fits are in
``_classwise_solvers.py``.

The names say what is returned or applied, as ``fit_temperature`` and
``softmax_temperature`` do: ``fit_*`` learns parameters from labelled logits,
``softmax_*`` turns logits into probabilities with them.
"""

import numpy as np

from skprior._utils._constraints import constraints
from skprior._utils._options import DEFAULT_REG_LAMBDA, DEFAULT_REG_MU
from skprior._utils._sklearn_compat import validate_params
from skprior._utils._validation import check_class_count
from skprior.calibration._checks import (
    dirichlet_free_parameters,
    require_every_class,
    warn_if_few_rows,
    warn_if_separable,
)
from skprior.calibration._classwise_solvers import (
    fit_dirichlet,
    fit_vs,
    floored_log_proba,
    select_dirichlet,
    vector_scaled,
)
from skprior.calibration._rows import (
    Rows,
    check_vector,
    fit_rows,
    map_logits,
    map_rows,
    parameter_array,
)

# The full Dirichlet map has K**2 parameters: above this, refused (with the
# alternatives) rather than left to run for many minutes.
MAX_DIRICHLET_CLASSES = 1000

# -- vector scaling -------------------------------------------------------------------


@validate_params(
    {
        **constraints(logits="array", y="array", sample_weight="optional_array"),
        "bias": ["boolean"],
        "verbose": ["verbose"],
    },
    prefer_skip_nested_validation=True,
)
def fit_vector_scaling(logits, y, *, bias=True, sample_weight=None, verbose=0):
    r"""Vector scaling: one factor (and one bias) per class, by log loss.

    Minimises the weighted mean log loss of
    :math:`\operatorname{softmax}(w \odot z_i + b)` over :math:`w, b \in
    \mathbb{R}^K` (vector scaling, Guo et al. 2017), or over :math:`w` alone
    with :math:`b = 0` (no-bias vector scaling, NBVS, Alexandari et al. 2020):

    .. math::

        \min_{w, b} \frac{1}{\sum_i w_i} \sum_i w_i
        \Bigl[\log \sum_k e^{w_k z_{ik} + b_k} - w_{y_i} z_{i y_i} - b_{y_i}\Bigr].

    The loss is convex; it is minimised with L-BFGS and its analytic gradient
    (:math:`\partial/\partial u = \operatorname{softmax}(u) -
    \operatorname{onehot}(y)`, then the chain rule), starting from NLL
    temperature scaling (:math:`w = 1/T`, :math:`b = 0`).

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes) or (n_samples,)
        Held-out logits :math:`z` (a 1-D array is the score :math:`s` of the
        second of two classes, taken as the rows :math:`(0, s)`). For a model
        that gives probabilities only, pass ``np.log(proba)``; ``-inf`` (an
        exact zero) stays probability 0 whatever :math:`w`.
    y : array-like of shape (n_samples,)
        The true classes as column indices ``0..n_classes-1`` of ``logits``.
    bias : bool, default=True
        Fit the class biases (vector scaling); ``False`` fixes them at 0 (NBVS).
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights; ``None`` means 1.
    verbose : int, default=0
        Print (to stdout, as scikit-learn does) a line when L-BFGS stops (1)
        and one per evaluation of the loss (2).

    Returns
    -------
    weights : array of shape (n_classes,)
        The class factors :math:`w`, in the namespace, on the device and in
        the float dtype of ``logits`` (as are the biases; fitted in float64).
    bias : array of shape (n_classes,)
        :math:`b`, with mean zero (softmax does not change when a constant is
        added to every class); zeros when ``bias=False``.

    Warns
    -----
    ConvergenceWarning
        When L-BFGS stops before convergence.
    UserWarning
        When ``logits`` look like probabilities; when the fitted factors rank
        every fit sample's true class first (the data are separable: the
        loss has no minimum and the factors grow without bound); when there
        are fewer than 10 (effective) samples per free parameter (:math:`K`,
        or :math:`2K - 1` with biases).

    See Also
    --------
    softmax_vector_scaling : Apply ``w`` and ``b``.
    fit_bias_corrected_temperature : One factor for all classes, and biases.
    fit_dirichlet_calibration : A full matrix on the log-probabilities.

    Notes
    -----
    Unlike a temperature, one factor per class does not commute with adding a
    constant to a row of logits: the network's own logits and
    ``log(softmax(logits))`` give different fits (both are valid; pass the
    ones the model is used with). Every class needs weight in ``y``; samples
    whose true class has logit ``-inf`` are left out (infinite loss whatever
    the parameters).

    References
    ----------
    .. [1] Guo, Pleiss, Sun and Weinberger, "On calibration of modern neural
       networks", ICML 2017.
    .. [2] Alexandari, Kundaje and Shrikumar, "Maximum likelihood with
       bias-corrected calibration is hard-to-beat at label shift adaptation",
       ICML 2020.

    Examples
    --------
    Logits of which class 0's are twice too large: its factor halves them.

    >>> import numpy as np
    >>> from skprior import fit_vector_scaling
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, size=5000)
    >>> logits = 2 * np.eye(3)[y] + rng.normal(size=(5000, 3))
    >>> weights, bias = fit_vector_scaling(logits * [2.0, 1.0, 1.0], y)
    >>> bool(0.4 < weights[0] / weights[1] < 0.6)
    True
    >>> fit_vector_scaling(logits, y, bias=False)[1]
    array([0., 0., 0.])
    """
    # Rows whose true class has probability exactly 0 (and rows of weight 0)
    # cannot move the minimiser: they get weight 0 (Rows.usable).
    data = fit_rows(logits, y, sample_weight).usable()
    n_classes = data.shape[1]
    what = "Vector scaling" if bias else "No-bias vector scaling"
    require_every_class(
        data,
        what,
        "Fit on data that has every class, or use fit_temperature (one parameter).",
    )
    factors, offsets = fit_vs(data, bias, what, verbose)
    warn_if_few_rows(
        data,
        2 * n_classes - 1 if bias else n_classes,
        what,
        "Calibrate on more held-out data, or use a method with fewer parameters: "
        + ("no-bias vector scaling (bias=False, method='nbvs') or " if bias else "")
        + "a temperature (fit_temperature, method='nll').",
    )
    on_device = data.asarray(factors), data.asarray(offsets)
    warn_if_separable(
        data,
        lambda rows, z: vector_scaled(data.xp, z, *on_device),
        what,
        "the class factors grow without bound",
    )
    return data.result(factors), data.result(offsets)


@validate_params(
    constraints(logits="array", weights="array", bias="optional_array"),
    prefer_skip_nested_validation=True,
)
def softmax_vector_scaling(logits, weights, bias=None):
    r"""Class probabilities from logits by vector scaling: ``softmax(w * z + b)``.

    .. math::

        p_{ik} = \frac{\exp(w_k z_{ik} + b_k)}{\sum_j \exp(w_j z_{ij} + b_j)}

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes) or (n_samples,)
        Logits :math:`z` (a 1-D array is the binary score :math:`s`, taken as
        :math:`(0, s)`). ``-inf`` gives probability 0 whatever :math:`w_k`.
        float32 stays float32 (the arithmetic is done in float64).
    weights : array-like of shape (n_classes,)
        Class factors :math:`w` (:func:`fit_vector_scaling`).
    bias : array-like of shape (n_classes,), default=None
        Class biases :math:`b`; ``None`` means 0.

    Returns
    -------
    proba : array of shape (n_samples, n_classes)
        Rows sum to one; an array of the namespace, device and dtype of
        ``logits`` (float64 for float16 logits; a lazy Dask array for Dask
        input).

    See Also
    --------
    fit_vector_scaling : Find ``w`` and ``b`` on held-out logits.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import softmax_vector_scaling
    >>> softmax_vector_scaling(np.array([[0.0, np.log(3.0)]]), [1.0, 1.0])
    array([[0.25, 0.75]])
    >>> softmax_vector_scaling(np.array([[1.0, -np.inf]]), [1.0, -2.0])
    array([[1., 0.]])
    """
    z, on_device, apply = map_logits(logits)
    n_classes = z.shape[1]
    factors = on_device(check_vector(weights, n_classes, "weights"))
    if bias is not None:
        bias = on_device(check_vector(bias, n_classes, "bias"))
    return apply(lambda xp, rows: vector_scaled(xp, rows, factors, bias))


# -- Dirichlet calibration ------------------------------------------------------------


def _dirichlet_inputs(logits, y, sample_weight):
    """Floored log-probabilities of the rows of positive weight, host labels.

    ``log p`` is kept in the precision of the logits (float32 logits:
    float32, the size of the input) and read in float64 row blocks; the rows
    of weight 0 are left out by index, not copied.
    """
    data = fit_rows(logits, y, sample_weight)
    check_class_count(
        data.shape[1],
        MAX_DIRICHLET_CLASSES,
        "Dirichlet calibration",
        "its K x K matrix is K**2 parameters, fitted by L-BFGS (319 s at 2,000)",
        "Use fit_vector_scaling (2 K parameters) or fit_temperature.",
    )
    require_every_class(
        data,
        "Dirichlet calibration",
        "Fit on data that has every class, or use fit_temperature.",
    )
    xp, z = data.xp, data.values
    log_proba = map_rows(xp, data.is_numpy, z, lambda u: floored_log_proba(xp, u))
    y, weights = data.host(data.y, data.weights)  # (labels for the folds)
    rows = Rows(xp, data.is_numpy, log_proba, data.y, data.weights)
    if not np.all(weights > 0):
        rows, y = rows.subset(np.flatnonzero(weights > 0)), y[weights > 0]
    return rows.totalled(), y


@validate_params(
    constraints(
        logits="array",
        y="array",
        reg_lambda="reg_lambda",
        reg_mu="reg_mu",
        sample_weight="optional_array",
    )
    | {"verbose": ["verbose"]},
    prefer_skip_nested_validation=True,
)
def fit_dirichlet_calibration(
    logits,
    y,
    *,
    reg_lambda=DEFAULT_REG_LAMBDA,
    reg_mu=DEFAULT_REG_MU,
    sample_weight=None,
    verbose=0,
):
    r"""Dirichlet calibration with ODIR regularisation (Kull et al. 2019).

    Minimises the weighted mean log loss of
    :math:`\operatorname{softmax}(W \log p_i + b)` plus the ODIR penalty
    (off-diagonal and intercept regularisation):

    .. math::

        \min_{W, b} \frac{1}{\sum_i w_i} \sum_i w_i\,
        \ell\bigl(\operatorname{softmax}(W \log p_i + b), y_i\bigr)
        + \frac{\lambda}{K(K-1)} \sum_{k \ne j} W_{kj}^2
        + \frac{\mu}{K} \sum_k b_k^2,

    with :math:`W \in \mathbb{R}^{K \times K}`, :math:`b \in \mathbb{R}^K`
    and :math:`\log p_i` the log-softmax of the logits. L-BFGS with the
    analytic gradient, from the identity map (:math:`W = I`, :math:`b = 0`);
    the problem is convex.

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes) or (n_samples,)
        Held-out logits, or ``np.log(proba)`` (the same: only their
        log-softmax is used). A 1-D array is the binary score :math:`s`, taken
        as :math:`(0, s)`.
    y : array-like of shape (n_samples,)
        The true classes as column indices ``0..n_classes-1`` of ``logits``.
    reg_lambda : float >= 0 or "auto", default="auto"
        :math:`\lambda`, the off-diagonal penalty. ``"auto"`` chooses it by
        cross-validation (:func:`select_dirichlet_regularization`): with
        :math:`K^2` parameters an untuned small :math:`\lambda` over-fits
        badly on 100 classes.
    reg_mu : float >= 0, default=None
        :math:`\mu`, the bias penalty; ``None`` means :math:`\mu = \lambda`
        (also during the cross-validation of ``"auto"``).
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights; ``None`` means 1.
    verbose : int, default=0
        Print (to stdout, as scikit-learn does) a line per value of
        ``"auto"``'s grid and when the fit stops (1), and a line per fold fit
        (2) and per evaluation of the loss (3 for the folds, 2 for the fit).

    Returns
    -------
    matrix : array of shape (n_classes, n_classes)
        :math:`W`, in the namespace, on the device and in the float dtype of
        ``logits`` (fitted in float64).
    bias : array of shape (n_classes,)
        :math:`b`, with mean zero (likewise).

    Warns
    -----
    ConvergenceWarning
        When L-BFGS stops before convergence.
    UserWarning
        When ``logits`` look like probabilities; when the unpenalised part of
        the fit (the diagonal of :math:`W`, and the entries whose penalty is
        0) alone ranks every fit sample's true class first (no minimum: it
        grows without bound); when there are fewer than 10 (effective)
        samples per free parameter: the diagonal, and the entries whose
        penalty per entry, :math:`\lambda / (K(K-1))` or :math:`\mu / K`, is
        below :math:`1 / n_{\mathrm{eff}}` (weaker than one sample's share of
        the mean loss).

    See Also
    --------
    softmax_dirichlet_calibration : Apply ``W`` and ``b``.
    select_dirichlet_regularization : How ``reg_lambda="auto"`` chooses.
    fit_vector_scaling : One factor and one bias per class.

    Notes
    -----
    **Many classes.** More than 1,000 classes are refused: :math:`W` has
    :math:`K^2` parameters (the fit took 319 s at 2,000); vector scaling has
    :math:`2K`.

    **Exact zeros.** :math:`\log p` is floored at ``LOG_PROBA_FLOOR``
    (:math:`\log` of the smallest normal float32, about :math:`-87.3`):
    otherwise a single zero probability makes :math:`W \log p` NaN (an
    off-diagonal 0 times :math:`-\infty`). A probability of exactly 0 is
    therefore treated as :math:`1.2 \times 10^{-38}`, the smallest a float32
    softmax carries as a normal number; its calibrated probability is tiny
    but not exactly 0, and a sample whose true class has probability 0 takes
    part in the fit with a large, finite loss. Probabilities above the floor
    are used as they are; those below it (logit gaps beyond 87 nats) are
    floored too, and from about 8 % of the entries floored (logits of scale
    30) the fit is worse than a temperature's: divide such logits by a
    constant first, or use :func:`fit_bias_corrected_temperature`.

    **Memory.** :math:`\log p` is kept for the whole fit in the precision of
    the logits (float32 logits: float32, the size of the input) and read in
    float64 row blocks for the arithmetic; the cross-validation of
    ``reg_lambda="auto"`` reads its folds as row subsets of it, not copies.
    The peak is under twice a float32 input (measured at 10^6 x 100: 1.38x,
    and 1.46x with ``reg_lambda="auto"``). Arrays of other libraries keep
    :math:`\log p` on their device; only the labels and weights (one number
    per row, for the rows left out and the folds) and the parameters cross to
    the host.

    **Identifiability.** Softmax ignores a constant added to every class, so
    without a bias penalty :math:`b` is defined up to a constant (the one
    returned has mean zero), and without an off-diagonal penalty :math:`W` up
    to a vector added to all its rows. Every class needs weight in ``y``.

    References
    ----------
    .. [1] Kull, Perello-Nieto, Kängsepp, Silva Filho, Song and Flach,
       "Beyond temperature scaling: obtaining well-calibrated multiclass
       probabilities with Dirichlet calibration", NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import fit_dirichlet_calibration, softmax_dirichlet_calibration
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, size=3000)
    >>> logits = 3 * np.eye(3)[y] + rng.normal(size=(3000, 3))
    >>> matrix, bias = fit_dirichlet_calibration(logits, y, reg_lambda=1e-3)
    >>> matrix.shape, bias.shape
    ((3, 3), (3,))
    >>> softmax_dirichlet_calibration(logits[:2], matrix, bias).sum(axis=1)
    array([1., 1.])
    """
    log_proba, y = _dirichlet_inputs(logits, y, sample_weight)
    if reg_lambda == "auto":
        reg_lambda, _ = _select(log_proba, y, reg_mu, verbose)
    reg_mu = reg_lambda if reg_mu is None else reg_mu
    matrix, bias = fit_dirichlet(
        log_proba, float(reg_lambda), float(reg_mu), verbose=verbose
    )
    n_classes = log_proba.shape[1]
    free = dirichlet_free_parameters(log_proba, reg_lambda, reg_mu)
    warn_if_few_rows(
        log_proba,
        free,
        "Dirichlet calibration",
        "Calibrate on more held-out data, use a larger reg_lambda and reg_mu "
        "(or 'auto'), or a method with fewer parameters: method='nbvs' or a "
        "temperature (fit_temperature, method='nll').",
    )
    # The unpenalised part of the fit (the diagonal of W, and the rest of W or
    # b where their penalty is 0): if it alone ranks every true class first,
    # moving further along it lowers every sample's loss and leaves the
    # penalty as it is, so the fit has no finite minimiser.
    # (a weak penalty still has a minimum: only the unpenalised part counts)
    free_matrix = log_proba.asarray(
        matrix if reg_lambda == 0 else np.diag(np.diag(matrix))
    )
    free_bias = log_proba.asarray(bias if reg_mu == 0 else np.zeros(n_classes))
    warn_if_separable(
        log_proba,
        lambda rows, log_p: log_p @ free_matrix.T + free_bias,
        "Dirichlet calibration",
        "its unpenalised parameters grow (the diagonal of W, which ODIR leaves free)",
    )
    return log_proba.result(matrix), log_proba.result(bias)


def _select(log_proba, y, reg_mu, verbose):
    counts = np.bincount(y, minlength=log_proba.shape[1])
    if counts.min() < 2:
        raise ValueError(
            f"reg_lambda='auto' chooses the penalty by stratified "
            f"cross-validation, which needs at least 2 samples of every class; "
            f"class {int(np.argmin(counts))} has {int(counts.min())}. Pass a "
            f"number as reg_lambda (for example 1.0), or fit on more data."
        )
    return select_dirichlet(log_proba, y, reg_mu, verbose=verbose)


@validate_params(
    constraints(
        logits="array", y="array", reg_mu="reg_mu", sample_weight="optional_array"
    )
    | {"verbose": ["verbose"]},
    prefer_skip_nested_validation=True,
)
def select_dirichlet_regularization(
    logits, y, *, reg_mu=None, sample_weight=None, verbose=0
):
    r"""The ODIR penalty of Dirichlet calibration, by cross-validation.

    What :func:`fit_dirichlet_calibration` does for ``reg_lambda="auto"``:
    :math:`\lambda` is chosen from the grid :math:`10^{-2}, 10^{-1}, \dots,
    10^{6}` by the weighted mean held-out log loss over a stratified 5-fold
    split (fewer folds when a class has fewer than 5 samples; shuffled with a
    fixed seed, so the choice is deterministic), as ``LogisticRegressionCV``
    chooses ``C``. :math:`\mu = \lambda` unless ``reg_mu`` is given.

    The grid is walked from the strongest penalty down, each fold's fit
    starting from its previous one; the walk stops once the held-out loss is
    above the best so far at two values in a row, or by more than 0.5% at one
    (weaker penalties only over-fit more, and are the slowest fits). On a tie
    the stronger penalty wins.

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes) or (n_samples,)
        Held-out logits or ``np.log(proba)``, as for
        :func:`fit_dirichlet_calibration`.
    y : array-like of shape (n_samples,)
        The true classes as column indices ``0..n_classes-1`` of ``logits``.
    reg_mu : float >= 0, default=None
        A fixed bias penalty :math:`\mu`; ``None`` ties it to :math:`\lambda`.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights; ``None`` means 1.
    verbose : int, default=0
        Print (to stdout) a line per value of the grid (1), per fold fit (2)
        and per evaluation of the loss (3).

    Returns
    -------
    reg_lambda : float
        The chosen :math:`\lambda`.
    cv_scores : dict
        ``{lambda: mean held-out log loss}`` for every value tried.

    See Also
    --------
    fit_dirichlet_calibration : The fit this tunes.

    Notes
    -----
    The penalty of one off-diagonal entry is :math:`\lambda / (K(K-1))`, so
    the useful :math:`\lambda` grows with the number of classes: on the
    stored CIFAR-100 outputs (5,000 rows to fit) the choice is
    :math:`10^4`; :math:`\lambda \le 1` over-fits there.

    References
    ----------
    .. [1] Kull, Perello-Nieto, Kängsepp, Silva Filho, Song and Flach,
       "Beyond temperature scaling: obtaining well-calibrated multiclass
       probabilities with Dirichlet calibration", NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import select_dirichlet_regularization
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, size=600)
    >>> logits = 2 * np.eye(3)[y] + rng.normal(size=(600, 3))
    >>> reg_lambda, cv_scores = select_dirichlet_regularization(logits, y)
    >>> reg_lambda in cv_scores
    True
    """
    log_proba, y = _dirichlet_inputs(logits, y, sample_weight)
    reg_lambda, scores = _select(log_proba, y, reg_mu, verbose)
    return float(reg_lambda), {float(k): float(v) for k, v in scores.items()}


@validate_params(
    constraints(logits="array", matrix="array", bias="optional_array"),
    prefer_skip_nested_validation=True,
)
def softmax_dirichlet_calibration(logits, matrix, bias=None):
    r"""Class probabilities by Dirichlet calibration: ``softmax(W log p + b)``.

    .. math::

        p'_{i} = \operatorname{softmax}\bigl(W \max(\log p_i, f) + b\bigr),
        \qquad \log p_i = z_i - \log \sum_j e^{z_{ij}},

    with the floor :math:`f` = ``LOG_PROBA_FLOOR`` (about :math:`-87.3`; see
    :func:`fit_dirichlet_calibration`).

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes) or (n_samples,)
        Logits or ``np.log(proba)``; a 1-D array is the binary score
        :math:`s`, taken as :math:`(0, s)`. float32 stays float32.
    matrix : array-like of shape (n_classes, n_classes)
        :math:`W`.
    bias : array-like of shape (n_classes,), default=None
        :math:`b`; ``None`` means 0.

    Returns
    -------
    proba : array of shape (n_samples, n_classes)
        Rows sum to one; an array of the namespace, device and dtype of
        ``logits`` (float64 for float16 logits; a lazy Dask array for Dask
        input).

    See Also
    --------
    fit_dirichlet_calibration : Find ``W`` and ``b`` on held-out data.

    Examples
    --------
    The identity map gives back the probabilities.

    >>> import numpy as np
    >>> from skprior import softmax_dirichlet_calibration
    >>> proba = np.array([[0.2, 0.8], [0.5, 0.5]])
    >>> softmax_dirichlet_calibration(np.log(proba), np.eye(2))
    array([[0.2, 0.8],
           [0.5, 0.5]])
    """
    z, on_device, apply = map_logits(logits)
    n_classes = z.shape[1]
    matrix = parameter_array(
        matrix,
        (n_classes, n_classes),
        "matrix",
        f"one row and one column per class ({n_classes})",
    )
    bias = (
        np.zeros(n_classes) if bias is None else check_vector(bias, n_classes, "bias")
    )
    matrix, bias = on_device(matrix), on_device(bias)
    return apply(lambda xp, rows: floored_log_proba(xp, rows) @ matrix.T + bias)
