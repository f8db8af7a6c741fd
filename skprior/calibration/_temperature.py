"""Temperature calibration: EC, NLL and bias-corrected temperature scaling.

The array functions :func:`softmax_temperature`, :func:`fit_temperature` and
:func:`fit_bias_corrected_temperature`, one code path for NumPy and every
array API namespace (the logits stay on their device; see ``_rows.py``); the
estimator that calls them, :class:`TemperatureCalibratedClassifier`, is in
``_classifier.py``. The root finding and the Newton / L-BFGS fit are in
``_temperature_solvers.py``.
"""

from skprior._utils._constraints import constraints
from skprior._utils._options import DEFAULT_TEMPERATURE_METHOD
from skprior._utils._sklearn_compat import validate_params
from skprior.calibration._checks import (
    require_every_class,
    warn_if_few_rows,
    warn_if_separable,
)
from skprior.calibration._rows import check_vector, fit_rows, map_logits
from skprior.calibration._temperature_solvers import fit_bcts, fit_ec, fit_nll


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
    proba : array of shape (n_samples, n_classes)
        Rows sum to one; an array of the namespace, device and dtype of
        ``logits`` (float64 for float16 logits; a lazy Dask array for Dask
        input).

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
    z, on_device, apply = map_logits(logits)
    if bias is not None:
        bias = on_device(check_vector(bias, z.shape[1], "bias"))
    temperature = float(temperature)  # (a NumPy scalar is no array API operand)

    def transform(xp, rows):
        rows -= xp.max(rows, axis=1, keepdims=True)
        rows /= temperature
        if bias is not None:
            rows += bias
        return rows

    return apply(transform)


@validate_params(
    {
        **constraints(logits="array", y="array", method="temperature_method"),
        **constraints(sample_weight="optional_array"),
        "verbose": ["verbose"],
    },
    prefer_skip_nested_validation=True,
)
def fit_temperature(
    logits, y, *, method=DEFAULT_TEMPERATURE_METHOD, sample_weight=None, verbose=0
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

    Both are solved by Halley's method in :math:`\log T` from :math:`T = 1`
    (the function and its first two derivatives from one pass over the data),
    safeguarded by a bracket inside an interval derived from the logits (from
    the smallest gap between a row's top two logits to a multiple of the
    largest spread within a row, widened until the sign changes), so the scale
    of the logits does not matter (from 1e-100 to 1e100: outside, they are
    refused) and a fit takes a few passes.

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
    verbose : int, default=0
        Print (to stdout, as scikit-learn does) a line when the fit stops (1)
        and one per step, a pass over the rows each (2).

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
        that the outcome does not depend on the order of the rows. Also when
        the fit has fewer than 10 (effective) samples.

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
    # (the caller's array, never written to: the shifted working-dtype rows
    # are formed block by block, not copied whole)
    data = fit_rows(logits, y, sample_weight, shift=True)
    if method == "ec":
        temperature = fit_ec(data, verbose)
    else:
        data = data.usable()
        temperature = fit_nll(data, verbose)
    # (from 10 rows, a temperature made the log loss of new data worse in 35
    # of 200 draws; from 30, in 2)
    warn_if_few_rows(
        data,
        1,
        f"Temperature scaling (method={method!r})",
        "Calibrate on more held-out data.",
    )
    return temperature


@validate_params(
    constraints(logits="array", y="array", sample_weight="optional_array")
    | {"verbose": ["verbose"]},
    prefer_skip_nested_validation=True,
)
def fit_bias_corrected_temperature(logits, y, *, sample_weight=None, verbose=0):
    r"""Bias-corrected temperature scaling (BCTS): a temperature and class biases.

    Minimises the weighted mean log loss of
    :math:`\operatorname{softmax}(z_i / T + b)` over :math:`T > 0` and one bias
    :math:`b_k` per class (Alexandari et al. 2020):

    .. math::

        \min_{T, b} \frac{1}{\sum_i w_i} \sum_i w_i
        \Bigl[\log \sum_k e^{z_{ik}/T + b_k} - z_{i y_i}/T - b_{y_i}\Bigr].

    The loss is convex in :math:`(1/T, b)`; it is minimised by Newton's method
    (gradient and Hessian from one pass over the logits, a backtracking line
    search) up to 128 classes and by L-BFGS with the analytic gradient above,
    starting from the NLL temperature (:func:`fit_temperature`) and zero
    biases. The biases are defined up to a
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
    verbose : int, default=0
        Print (to stdout, as scikit-learn does) a line when the fit stops (1),
        one per step (2), and those of its start, the NLL temperature (2, 3).

    Returns
    -------
    temperature : float
        :math:`T > 0`.
    bias : array of shape (n_classes,)
        :math:`b`, with mean zero; in the namespace, on the device and in the
        float dtype of ``logits`` (fitted in float64).

    Warns
    -----
    ConvergenceWarning
        When the solver (Newton's method or L-BFGS) stops before convergence.
    UserWarning
        When the logits are no better than chance: the fitted log loss beats
        that of the class biases alone (the label frequencies, ``T -> inf``)
        by a likelihood ratio ``2 n (H - loss)`` below 6.63, the 1% level of
        a chi-square with one degree of freedom (``n`` the effective number
        of samples, ``H`` the entropy of the label frequencies); when the
        fitted ``softmax(z / T + b)`` ranks every fit sample's true class
        first (the data are separable: the loss has no minimum, ``T -> 0``);
        when the effective number of samples is below 10 per free parameter
        (``K``: ``T`` and the biases, whose mean is free), where the biases
        over-fit; or when ``logits`` look like probabilities.

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
    data = fit_rows(logits, y, sample_weight, shift=True).usable()
    require_every_class(
        data,
        "Bias-corrected temperature scaling",
        "Fit on data that has every class, or use fit_temperature (one parameter).",
    )
    temperature, bias = fit_bcts(data, verbose)
    warn_if_few_rows(  # (T and K - 1 biases: their mean is free)
        data,
        data.shape[1],
        "Bias-corrected temperature scaling",
        "Calibrate on more held-out data, or use a temperature alone "
        "(fit_temperature, method='nll').",
    )
    on_device = data.asarray(bias)
    warn_if_separable(
        data,
        lambda rows, d: d / temperature + on_device,
        "Bias-corrected temperature scaling",
        "T -> 0 (and the biases grow with 1 / T)",
    )
    return temperature, data.result(bias)
