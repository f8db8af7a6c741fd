"""Calibration metrics: expected calibration error and the reliability curve.

Both bin predictions by confidence. The bins are right-closed: with edges
``0 = e_0 < e_1 < ... < e_B = 1`` bin ``b`` holds the values in
``(e_{b-1}, e_b]``, and the first bin also holds 0.
"""

import numpy as np
from sklearn.utils.validation import check_consistent_length, column_or_1d

from skprior._sklearn_compat import _check_sample_weight
from skprior._validation import check_int, check_proba

STRATEGIES = ("uniform", "quantile")
ECE_KINDS = ("top_label", "classwise")


def _check_column_names(y_proba, labels):
    """Refuse a DataFrame whose columns name the labels in another order.

    Columns are read by position, as scikit-learn's metrics read them; columns
    that name the classes in a different order would be read wrong, silently.
    Columns named 0, 1, ..., k-1 (pandas' default) name positions, not
    classes, and are left alone.
    """
    columns = getattr(y_proba, "columns", None)
    if columns is None:
        return
    columns, labels = [str(c) for c in columns], [str(c) for c in labels.tolist()]
    if columns == [str(i) for i in range(len(columns))]:
        return
    if columns != labels and sorted(columns) == sorted(labels):
        raise ValueError(
            f"y_proba's columns name the classes {columns[:20]}, in another order "
            f"than labels {labels[:20]}; columns are read by position. Reorder "
            f"them first: y_proba[labels]."
        )


def _check_inputs(y_true, y_proba, labels, sample_weight):
    """Validate, and return (column index of each label, proba, weights)."""
    y_true = column_or_1d(y_true, warn=True)
    proba = np.asarray(y_proba)
    binary_score = proba.ndim == 1
    if binary_score:
        check_consistent_length(y_true, proba)
        if not np.all(np.isfinite(proba)) or proba.min() < 0 or proba.max() > 1:
            raise ValueError(
                "A 1-D y_proba is read as P(positive class) and must lie in "
                "[0, 1]. For scores or logits, apply a sigmoid first."
            )
        proba = np.column_stack([1 - proba.astype(np.float64), proba])
    proba = check_proba(proba, name="y_proba")
    check_consistent_length(y_true, proba)
    n_classes = proba.shape[1]

    if labels is None:
        labels = np.unique(y_true)
        if len(labels) != n_classes:
            raise ValueError(
                f"y_true has {len(labels)} distinct labels but y_proba has "
                f"{n_classes} columns, so the column of each label is unknown. "
                f"Pass labels= the classes in the column order of y_proba (for "
                f"a scikit-learn model, model.classes_)."
            )
    else:
        labels = column_or_1d(labels)
        if len(np.unique(labels)) != len(labels):
            raise ValueError(f"labels must not repeat a class, got {list(labels)}.")
        if len(labels) != n_classes:
            raise ValueError(
                f"labels has {len(labels)} entries but y_proba has {n_classes} "
                f"columns; give one label per column"
                + (" (two for a 1-D y_proba)." if binary_score else ".")
            )
    _check_column_names(y_proba, labels)
    position = {label: i for i, label in enumerate(labels.tolist())}
    unknown = [label for label in np.unique(y_true).tolist() if label not in position]
    if unknown:
        raise ValueError(
            f"y_true contains labels {unknown[:10]} that are not in labels "
            f"{labels.tolist()[:20]}."
        )
    y_index = np.array([position[label] for label in y_true.tolist()], dtype=np.intp)

    if sample_weight is None:
        weights = np.ones(len(y_index))
    else:
        weights = _check_sample_weight(sample_weight, proba, ensure_non_negative=True)
        weights = np.asarray(weights, dtype=np.float64)
        if weights.sum() <= 0:
            raise ValueError("sample_weight sums to zero: nothing to measure.")
    return y_index, proba, weights


def _check_binning(n_bins, strategy):
    n_bins = check_int(n_bins, "n_bins", low=1)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}.")
    return n_bins


def _bin_edges(values, weights, n_bins, strategy):
    """Bin edges from 0 to 1: equal width, or weighted quantiles of ``values``."""
    if strategy == "uniform":
        return np.linspace(0.0, 1.0, n_bins + 1)
    # Inverted-CDF quantiles: the smallest value whose cumulative weight reaches
    # the level, so that integer weights act like repeated rows.
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    levels = np.arange(1, n_bins) / n_bins * cumulative[-1]
    inner = values[order][np.searchsorted(cumulative, levels, side="left")]
    return np.concatenate([[0.0], inner, [1.0]])


def _binned_sums(values, hits, weights, n_bins, strategy):
    """Per bin: total weight, weighted sum of ``values`` and of ``hits``."""
    edges = _bin_edges(values, weights, n_bins, strategy)
    # Right-closed bins: the index is the number of inner edges strictly below.
    index = np.searchsorted(edges[1:-1], values, side="left")
    weight = np.bincount(index, weights=weights, minlength=n_bins)
    value_sum = np.bincount(index, weights=weights * values, minlength=n_bins)
    hit_sum = np.bincount(index, weights=weights * hits, minlength=n_bins)
    return weight, value_sum, hit_sum


def _top_label(y_index, proba):
    """Confidence (top probability, float64) and correctness of each row."""
    predicted = np.argmax(proba, axis=1)
    confidence = proba[np.arange(len(proba)), predicted].astype(np.float64)
    return confidence, (predicted == y_index).astype(np.float64)


def expected_calibration_error(
    y_true,
    y_proba,
    *,
    n_bins=15,
    strategy="uniform",
    kind="top_label",
    sample_weight=None,
    labels=None,
):
    r"""Expected calibration error (ECE) of multiclass probabilities.

    Top-label (default; Guo et al. 2017): the confidence of a sample is its top
    probability :math:`c_i = \max_k p_{ik}`, its hit :math:`h_i = [\arg\max_k
    p_{ik} = y_i]`. With bins :math:`B_1, \dots, B_M` of the confidences and
    weights :math:`w_i`,

    .. math::

        \mathrm{ECE} = \sum_{m=1}^{M} \frac{W_m}{W}
        \left| \frac{\sum_{i \in B_m} w_i h_i}{W_m}
             - \frac{\sum_{i \in B_m} w_i c_i}{W_m} \right|,
        \qquad W_m = \sum_{i \in B_m} w_i, \quad W = \sum_i w_i .

    Class-wise (Kull et al. 2019): the same with :math:`c_i = p_{ik}` and
    :math:`h_i = [y_i = k]` for each class :math:`k`, binned per class, and
    averaged over the classes.

    Bins are right-closed: with edges :math:`0 = e_0 < \dots < e_M = 1`, bin
    :math:`m` holds the values in :math:`(e_{m-1}, e_m]`; the first also holds
    0. ``"uniform"`` edges are equally spaced; ``"quantile"`` inner edges are the
    weighted quantiles of the values at levels :math:`m/M` (inverted CDF: the
    smallest value whose cumulative weight reaches the level), so bins hold
    about equal weight. Empty bins contribute nothing.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities, columns in the order of ``labels`` (sorted
        labels of ``y_true`` by default). A 1-D array is P(positive class),
        the second of two labels.
    n_bins : int, default=15
        Number of bins :math:`M`.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width or equal-weight bins.
    kind : {"top_label", "classwise"}, default="top_label"
        Which calibration error.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights; ``None`` means 1.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_proba`` (for a model,
        ``model.classes_``). Needed when ``y_true`` does not show every class.

    Returns
    -------
    ece : float
        In [0, 1]; 0 is perfectly calibrated on these bins.

    See Also
    --------
    reliability_curve : The per-bin accuracies and confidences.
    ReliabilityDisplay : Plot them.

    References
    ----------
    .. [1] Naeini, Cooper and Hauskrecht, "Obtaining well calibrated
       probabilities using Bayesian binning", AAAI 2015.
    .. [2] Guo, Pleiss, Sun and Weinberger, "On calibration of modern neural
       networks", ICML 2017.
    .. [3] Kull, Perello-Nieto, Kängsepp, Silva Filho, Song and Flach, "Beyond
       temperature scaling: obtaining well-calibrated multiclass probabilities
       with Dirichlet calibration", NeurIPS 2019.

    Examples
    --------
    Two samples at confidence 0.9 and 0.6, one right, one wrong, in the bins
    (0.8, 1] and (0.4, 0.6]: ECE = ``(|0 - 0.9| + |1 - 0.6|) / 2``.

    >>> from skprior.metrics import expected_calibration_error
    >>> y_proba = [[0.9, 0.1], [0.4, 0.6]]
    >>> round(expected_calibration_error([1, 1], y_proba, n_bins=5, labels=[0, 1]), 6)
    0.65
    """
    n_bins = _check_binning(n_bins, strategy)
    if kind not in ECE_KINDS:
        raise ValueError(f"kind must be one of {ECE_KINDS}, got {kind!r}.")
    y_index, proba, weights = _check_inputs(y_true, y_proba, labels, sample_weight)
    total = weights.sum()
    if kind == "top_label":
        confidence, hits = _top_label(y_index, proba)
        _, value_sum, hit_sum = _binned_sums(
            confidence, hits, weights, n_bins, strategy
        )
        return float(np.abs(hit_sum - value_sum).sum() / total)
    errors = []
    for k in range(proba.shape[1]):
        values = proba[:, k].astype(np.float64)
        hits = (y_index == k).astype(np.float64)
        _, value_sum, hit_sum = _binned_sums(values, hits, weights, n_bins, strategy)
        errors.append(np.abs(hit_sum - value_sum).sum() / total)
    return float(np.mean(errors))


def reliability_curve(
    y_true, y_proba, *, n_bins=15, strategy="uniform", sample_weight=None, labels=None
):
    r"""Top-label reliability curve: accuracy against confidence, per bin.

    The multiclass counterpart of :func:`sklearn.calibration.calibration_curve`.
    The confidence of a sample is its top probability :math:`c_i = \max_k
    p_{ik}`; the samples are binned by confidence (right-closed bins, see
    :func:`expected_calibration_error`) and each non-empty bin :math:`B_m`
    gives

    .. math::

        \mathrm{acc}_m = \frac{\sum_{i \in B_m} w_i [\arg\max_k p_{ik} = y_i]}
        {W_m}, \qquad
        \mathrm{conf}_m = \frac{\sum_{i \in B_m} w_i c_i}{W_m} .

    A calibrated model has :math:`\mathrm{acc}_m = \mathrm{conf}_m`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities, columns in the order of ``labels``; a 1-D
        array is P(positive class).
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width or equal-weight bins.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights; ``None`` means 1.
    labels : array-like of shape (n_classes,), default=None
        The class of each column (sorted labels of ``y_true`` by default).

    Returns
    -------
    accuracy : ndarray of shape (n_nonempty_bins,)
        Weighted accuracy in each non-empty bin.
    confidence : ndarray of shape (n_nonempty_bins,)
        Weighted mean confidence in each non-empty bin, increasing.
    bin_weight : ndarray of shape (n_nonempty_bins,)
        Fraction of the total weight in each non-empty bin.

    See Also
    --------
    expected_calibration_error : The weighted mean of ``|accuracy - confidence|``.
    ReliabilityDisplay : Plot the curve.

    References
    ----------
    .. [1] Guo, Pleiss, Sun and Weinberger, "On Calibration of Modern Neural
       Networks", ICML 2017.

    Examples
    --------
    >>> from skprior.metrics import reliability_curve
    >>> y_proba = [[0.9, 0.1], [0.86, 0.14], [0.4, 0.6]]
    >>> accuracy, confidence, weight = reliability_curve([0, 1, 1], y_proba, n_bins=5)
    >>> accuracy, confidence.round(2), weight.round(2)
    (array([1. , 0.5]), array([0.6 , 0.88]), array([0.33, 0.67]))
    """
    n_bins = _check_binning(n_bins, strategy)
    y_index, proba, weights = _check_inputs(y_true, y_proba, labels, sample_weight)
    confidence, hits = _top_label(y_index, proba)
    weight, value_sum, hit_sum = _binned_sums(
        confidence, hits, weights, n_bins, strategy
    )
    full = weight > 0
    return (
        hit_sum[full] / weight[full],
        value_sum[full] / weight[full],
        weight[full] / weights.sum(),
    )
