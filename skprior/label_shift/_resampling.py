"""Undoing resampling and class weights: the effective training prior.

A model trained on resampled data (under- or over-sampling) or with class
weights is calibrated, at best, to the class prior it saw, not to the prior of
the data it will meet. That prior is :func:`effective_train_prior`; Bayes' rule
from it back to the original prior (:func:`skprior.adjust_to_prior`, or
``PriorAdaptedClassifier(method="known")``) undoes the resampling. This is the
known-prior correction of ``_prior.py`` with a training prior that is derived
rather than counted, so it is its own small module of array functions.
"""

from collections.abc import Mapping

import numpy as np
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.validation import column_or_1d

from skprior._utils._array_api import get_namespace, working_dtype_results
from skprior._utils._sklearn_compat import StrOptions, validate_params
from skprior._utils._validation import warn_user
from skprior._utils._validation_arrays import on_host
from skprior._utils._validation_labels import check_sample_weight
from skprior.label_shift._solvers import like


def _per_class(values, classes, name, default):
    """A dict keyed by class label, or an array in the order of ``classes``.

    A class left out of a dict takes its entry of ``default`` (a scalar or one
    value per class): not resampled, or weight 1 as in scikit-learn.
    """
    if isinstance(values, Mapping):
        unknown = [key for key in values if key not in set(classes.tolist())]
        if unknown:
            raise ValueError(
                f"{name} has keys {unknown[:10]} that are not classes of y "
                f"({classes.tolist()[:20]}). Key it by the labels of y."
            )
        default = np.broadcast_to(default, classes.shape)
        out = np.array(
            [values.get(c, default[i]) for i, c in enumerate(classes.tolist())],
            dtype=np.float64,
        )
    else:
        out = np.array(values, dtype=np.float64)
        if out.shape != classes.shape:
            raise ValueError(
                f"{name} must have one entry per class of y ({classes.size}, in "
                f"the order of np.unique(y)), got shape {out.shape}; or pass a "
                f"dict keyed by class label."
            )
    if not np.all(np.isfinite(out)) or np.any(out <= 0):
        raise ValueError(
            f"{name} must be finite and positive for every class, got "
            f"{dict(zip(classes.tolist(), out.tolist(), strict=True))}. A class "
            f"with weight, rate or count 0 is absent from training: the model "
            f"cannot be corrected for it; drop it from y first."
        )
    return out


@validate_params(
    {
        "y": ["array-like"],
        "class_weight": [Mapping, "array-like", StrOptions({"balanced"}), None],
        "sampling_ratio": [Mapping, "array-like", None],
        "resampled_counts": [Mapping, "array-like", None],
        "sample_weight": ["array-like", None],
    },
    prefer_skip_nested_validation=True,
)
def effective_train_prior(
    y,
    *,
    class_weight=None,
    sampling_ratio=None,
    resampled_counts=None,
    sample_weight=None,
):
    r"""The class prior a model trained with resampling or class weights saw.

    With :math:`n_c` the (weighted) count of class :math:`c` in the original
    training labels ``y``, the model saw

    .. math:: q^{\text{eff}}_c \propto n_c\, r_c\, v_c,

    with :math:`r_c` the sampling rate of class :math:`c` (``sampling_ratio``,
    or ``resampled_counts`` divided by :math:`n_c`) and :math:`v_c` its class
    weight: a loss :math:`\sum_i v_{y_i} \ell_i` weighs class :math:`c` as
    :math:`v_c` copies of its rows would. With none of them given, it is the
    label frequencies of ``y``, the original prior :math:`q`.

    The posteriors of such a model estimate :math:`p(c|x)` under
    :math:`q^{\text{eff}}`; ``adjust_to_prior(proba, q_eff, q)`` (Bayes' rule)
    moves them back to the original distribution, as
    ``PriorAdaptedClassifier(model, method="known", train_prior=q_eff,
    test_prior=q)`` does for a fitted ``model``.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        The training labels *before* resampling. The classes are
        ``np.unique(y)``, the order of a scikit-learn classifier's
        ``classes_``.
    class_weight : dict, array-like of shape (n_classes,) or "balanced", default=None
        The ``class_weight`` the model was trained with. ``"balanced"`` is
        scikit-learn's ``n_samples / (n_classes * np.bincount(y))``.
    sampling_ratio : dict or array-like of shape (n_classes,), default=None
        The fraction of each class kept (under-sampling, < 1) or the factor
        it was multiplied by (over-sampling, > 1); a dict may leave out
        classes that were not resampled (rate 1).
    resampled_counts : dict or array-like of shape (n_classes,), default=None
        The number of rows of each class after resampling. For
        imbalanced-learn's under-samplers this is the fitted
        ``sampler.sampling_strategy_`` (classes it leaves out keep their
        count); for its over-samplers ``sampling_strategy_`` counts the rows
        *added*, so pass ``{c: n_c + added}``, or simply the counts of the
        resampled labels.
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the rows of ``y`` in training, if any.

    Returns
    -------
    prior : ndarray of shape (n_classes,)
        :math:`q^{\text{eff}}`, summing to one, in the order of ``np.unique(y)``
        (an array of the namespace and device of ``y``). In the float dtype
        of ``sample_weight`` where it is a float array, else of ``y`` where
        it is, else float64 (integer labels).

    See Also
    --------
    adjust_to_prior : Bayes' rule from this prior to the original one.
    PriorAdaptedClassifier : ``method="known"`` with ``train_prior=`` this.

    Notes
    -----
    The correction is exact for a model that estimates the posterior of the
    data it was fitted to (a well-specified model fitted by a proper scoring
    loss, such as the log-loss): resampling and class weights change the class
    prior of that data and nothing else, so the fitted posterior is the
    original one moved by Bayes' rule to :math:`q^{\text{eff}}`. It does not
    undo what resampling does to a misspecified or regularised fit, and
    synthetic over-sampling (SMOTE) also changes :math:`p(x|c)`, which no
    prior correction undoes.

    Under-sampling also throws rows away, which no correction gives back. A
    bag of under-sampled models (imbalanced-learn's
    ``BalancedBaggingClassifier``, as Wallace and Dahabreh [3]_ propose) lets
    other members learn from them; every member saw the classes equally
    often, so its effective prior is uniform, ``np.full(n_classes, 1 /
    n_classes)``. Measured on nine PMLB tasks, that model corrected is not
    distinguishable from one trained on every row on two (log-loss and ECE
    within 2 standard errors over 10 splits) and better in log-loss on three
    more (``benchmarks/bench_resampling.py``).

    References
    ----------
    .. [1] Saerens, Latinne and Decaestecker, "Adjusting the outputs of a
       classifier to new a priori probabilities: a simple procedure", Neural
       Computation 14(1), 2002.
    .. [2] Elkan, "The foundations of cost-sensitive learning", IJCAI 2001.
    .. [3] Wallace and Dahabreh, "Class probability estimates are unreliable
       for imbalanced data (and how to fix them)", ICDM 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import adjust_to_prior, effective_train_prior
    >>> y = np.array([0] * 90 + [1] * 10)
    >>> effective_train_prior(y)  # the original prior
    array([0.9, 0.1])
    >>> effective_train_prior(y, class_weight="balanced")
    array([0.5, 0.5])
    >>> effective_train_prior(y, resampled_counts={0: 10})  # 10 of each class
    array([0.5, 0.5])
    >>> q_eff = effective_train_prior(y, sampling_ratio={0: 1 / 3})
    >>> q_eff.round(3)
    array([0.75, 0.25])
    >>> adjust_to_prior([[0.75, 0.25]], q_eff, effective_train_prior(y)).round(3)
    array([[0.9, 0.1]])
    """
    if sampling_ratio is not None and resampled_counts is not None:
        # (both describe one resampling: multiplied, they would count it twice)
        raise ValueError(
            "Pass sampling_ratio or resampled_counts, not both: each describes "
            "the whole resampling of a class."
        )
    if isinstance(class_weight, str) and sample_weight is not None:
        warn_user(
            "class_weight='balanced' with sample_weight: estimators differ, and "
            "this uses the unweighted class counts, as SVC, SGDClassifier and "
            "the trees do; LogisticRegression and LinearSVC balance the "
            "weighted counts in recent scikit-learn. For those, pass "
            "class_weight=compute_class_weight('balanced', classes=np.unique(y), "
            "y=y, sample_weight=sample_weight)."
        )
    given = y
    y = column_or_1d(on_host(y), warn=True)
    if y.size == 0:
        raise ValueError("y is empty: pass the training labels.")
    if y.dtype.kind in "fc" and not np.all(np.isfinite(y)):
        raise ValueError(
            "y contains NaN or infinite labels: drop those rows (or give them "
            "their class) before computing the prior."
        )
    classes, y_index = np.unique(y, return_inverse=True)
    given_weights = on_host(sample_weight)
    weights = check_sample_weight(given_weights, y.size)
    prior = np.bincount(y_index, weights=weights, minlength=classes.size)
    counts = np.bincount(y_index, minlength=classes.size)
    if resampled_counts is not None:
        # The counts after resampling replace those of y (rows are kept with
        # their sample weight on average: the weighted count scales likewise).
        after = _per_class(resampled_counts, classes, "resampled_counts", counts)
        prior = prior * after / counts
    if sampling_ratio is not None:
        prior = prior * _per_class(sampling_ratio, classes, "sampling_ratio", 1.0)
    if isinstance(class_weight, str):
        prior = prior * compute_class_weight("balanced", classes=classes, y=y)
    elif class_weight is not None:
        # scikit-learn's estimators give weight 1 to a class left out of the dict.
        prior = prior * _per_class(class_weight, classes, "class_weight", 1.0)
    if not prior.sum() > 0:
        raise ValueError(
            "sample_weight gives every class weight 0: pass the weights the "
            "model was trained with."
        )
    if not np.all(prior > 0):
        # (every function that takes a prior refuses a 0 entry: Bayes' rule
        # cannot move mass to or from a class the model gives none)
        absent = classes[prior <= 0].tolist()[:10]
        raise ValueError(
            f"The weights give classes {absent} weight 0, so the model was not "
            f"trained on them: drop their rows from y, or fix their "
            f"sample_weight / class_weight / sampling_ratio / resampled_counts."
        )
    # The dtype of float weights, else of float labels (float32 in, float32
    # out, as for data elsewhere); integer labels alone give float64.
    floats = [np.asarray(a).dtype for a in (given_weights, y)]
    floats = [dtype for dtype in floats if dtype.kind == "f"]
    with working_dtype_results():  # (float64 where the device has it)
        prior = like(prior / prior.sum(), given)
    if floats and floats[0] == np.float32:
        xp = get_namespace(given)[0]
        prior = xp.astype(prior, xp.float32)
    return prior
