"""The estimator :class:`CANClassifier`: CAN around any classifier.

A thin wrapper over :func:`alternating_normalization` (``_can.py``): ``fit``
learns the training prior (and, with ``reference="fit"``, the confident rows),
``predict_proba`` corrects the inner model's low-confidence rows.
"""

from skprior._base import BasePriorClassifier
from skprior._utils._array_api import get_namespace
from skprior._utils._constraints import constraints
from skprior._utils._options import (
    DEFAULT_ALPHA,
    DEFAULT_K,
    DEFAULT_N_ITER,
    DEFAULT_TAU,
    DEFAULT_UNCERTAINTY,
)
from skprior._utils._validation import check_train_prior, resolve_k
from skprior.can._can import alternating_normalization

_CAN_PARAMETERS = ("k", "tau", "alpha", "n_iter", "uncertainty")


class CANClassifier(BasePriorClassifier):
    """Classification with Alternating Normalization around any classifier.

    Learns the training class prior in ``fit`` and corrects the low-confidence
    rows of ``predict_proba`` with :func:`alternating_normalization`. The inner
    model is fitted in ``fit`` if it is not fitted yet; a fitted model is used as
    it is and never refitted (also under ``clone``, ``Pipeline`` and
    ``GridSearchCV``), so that ``k``, ``tau``, ``alpha`` and ``n_iter`` can be
    tuned on held-out data at the cost of predictions only.

    Parameters
    ----------
    estimator : classifier, default=None
        Any classifier with ``predict_proba``, fitted or not.
        ``None`` means ``LogisticRegression()``. To search over fitted models
        (``GridSearchCV(..., {"estimator": [a, b]})``), wrap each in
        ``sklearn.frozen.FrozenEstimator``: the search clones the values it
        tries, and a clone is unfitted (``fit`` warns where it sees this).
    k : int or "auto", default="auto"
        Number of top classes in the uncertainty, ``2 <= k <= n_classes``;
        ``"auto"`` is ``min(3, n_classes)``: Su's 3, and 2 on binary problems
        (where the top-2 entropy is the entropy of the row).
    tau : float, default=0.9
        Rows with uncertainty ``>= tau`` (in [0, 1], within rounding: 1e-12
        for float64 posteriors, 1.2e-7 for float32) are corrected.
    alpha : float, default=1.0
        Power before each column normalisation, ``alpha > 0``.
    n_iter : int, default=1
        Number of alternating normalisation steps ``d >= 1``.
    reference : {"batch", "fit"}, default="batch"
        Where the confident rows come from. ``"batch"``: the batch given to
        ``predict_proba`` (transductive, as in the paper's ImageNet runs: a
        row's output depends on the other rows of the batch). ``"fit"``: the
        confident predictions on the data seen in ``fit`` (inductive, as in the
        paper's DialogRE runs; a single sample can be predicted). With ``"fit"``
        the data given to ``fit`` should be held out from the model's training.
    uncertainty : {"renormalized", "unrenormalized", "max_over_k"}, \
            default="renormalized"
        Definition of the uncertainty, see :func:`topk_entropy`.
    train_prior : array-like of shape (n_classes,), dict or Series, default=None
        The training prior, in the order of ``classes_`` (or keyed by class
        label). ``None`` counts the (weighted) label frequencies of
        ``y`` in ``fit``; give it when ``fit`` sees held-out data whose label
        frequencies differ from the training data's.

    Attributes
    ----------
    estimator_ : classifier
        The fitted inner model (the given one itself when it was fitted).
    train_prior_ : ndarray of shape (n_classes,)
        The training prior used as ``q``.
    reference_proba_ : ndarray of shape (n_fit_samples, n_classes) or None
        The inner model's probabilities on the ``fit`` data with
        ``reference="fit"`` (``None`` otherwise).
    reference_weight_ : ndarray of shape (n_fit_samples,) or None
        The ``sample_weight`` given to ``fit``, weighing the reference rows.
    classes_ : ndarray of shape (n_classes,)
        Class labels, from the inner model.
    n_features_in_ : int
        Number of features, when the inner model has it.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Feature names, when the inner model has them.

    See Also
    --------
    alternating_normalization : The array function behind ``predict_proba``.

    Notes
    -----
    With ``reference="batch"`` the method is transductive. scikit-learn has no
    tag for that; the estimator declares ``non_deterministic=True`` in its tags,
    which is what makes scikit-learn's common checks skip the subset-invariance
    test that such a method fails by design.

    References
    ----------
    .. [1] Jia, Reiter, Lim, Artzi and Cardie, "When in Doubt: Improving
       Classification Performance with Alternating Normalization", Findings of
       EMNLP 2021. arXiv:2109.13449.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import train_test_split
    >>> from skprior import CANClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    >>> model = LogisticRegression(max_iter=2000).fit(X_train, y_train)
    >>> can = CANClassifier(model).fit(X_train, y_train)  # model is not refitted
    >>> can.predict_proba(X_test).shape
    (450, 10)
    """

    _parameter_constraints: dict = {
        **BasePriorClassifier._parameter_constraints,
        **constraints(k="k", tau="tau", alpha="alpha", n_iter="n_iter"),
        **constraints(reference="can_reference", uncertainty="uncertainty"),
    }

    def __init__(
        self,
        estimator=None,
        *,
        k=DEFAULT_K,
        tau=DEFAULT_TAU,
        alpha=DEFAULT_ALPHA,
        n_iter=DEFAULT_N_ITER,
        reference="batch",
        uncertainty=DEFAULT_UNCERTAINTY,
        train_prior=None,
    ):
        self.estimator = estimator
        self.k = k
        self.tau = tau
        self.alpha = alpha
        self.n_iter = n_iter
        self.reference = reference
        self.uncertainty = uncertainty
        self.train_prior = train_prior

    def _is_transductive(self):
        return self.reference == "batch"

    def _check_n_classes(self, n_classes):
        resolve_k(self.k, n_classes, self.uncertainty)

    def _fit_post_hoc(self, X, y_index, sample_weight):
        self._check_n_classes(self._n_classes())
        check_train_prior(
            self.train_prior_,
            self._n_classes(),
            classes=self.classes_,
            from_labels=self.train_prior is None,
        )
        if self.reference == "fit":
            self.reference_proba_ = self._inner_proba(X)
            self.reference_weight_ = sample_weight
        else:
            if self.estimator_ is self._get_estimator():
                self._inner_proba(X)  # X is unused, but checked against the model
            self.reference_proba_ = self.reference_weight_ = None

    def _adjust_proba(self, proba):
        if self.reference == "fit" and self.reference_proba_ is None:
            raise ValueError(
                "reference='fit' was set after fit; call fit again so that the "
                "reference predictions are computed."
            )
        if proba.shape[1] == 1:
            # A model that saw one class (as a rare label's in a multi-label
            # fit): its probability is 1 and CAN has nothing to re-normalise.
            xp, _ = get_namespace(proba)
            return xp.asarray(proba, copy=True)
        reference = self.reference_proba_ if self.reference == "fit" else None
        return alternating_normalization(
            proba,
            self.train_prior_,
            reference=reference,
            reference_weight=self.reference_weight_ if reference is not None else None,
            **{name: getattr(self, name) for name in _CAN_PARAMETERS},
        )
