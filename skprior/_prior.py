"""Prior adaptation: a classifier whose posteriors follow the test class prior.

The array functions (Bayes' rule to a new prior, EM/SQUAREM/PGA estimates of
the prior, BBSE) live in :mod:`skprior._prior_estimation`; this module holds
the estimator :class:`PriorAdaptedClassifier` that calls them.
"""

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.utils.validation import check_is_fitted

from skprior._base import BasePriorClassifier
from skprior._prior_estimation import (
    SOLVERS,
    _bbse_from_frequencies,
    _reweight,
    estimate_test_prior,
)
from skprior._sklearn_compat import Interval, StrOptions
from skprior._validation import check_prior

PRIOR_METHODS = ("mle", "map", "bbse", "known")
SOURCE_PRIORS = ("labels", "mean_posterior")


class PriorAdaptedClassifier(BasePriorClassifier):
    """Adapt a classifier's posteriors to the class prior of the test data.

    Under label shift the class prior changes between training and test while
    ``p(x|class)`` stays. The wrapper learns the training (source) prior ``q``
    in ``fit``; ``predict_proba(X)`` takes the test prior ``pi`` -- known, or
    estimated from the batch ``X`` itself -- and moves the inner model's
    posteriors to it by Bayes' rule, ``p(c|x) pi_c / q_c`` renormalised (see
    :func:`adjust_to_prior`).

    Parameters
    ----------
    estimator : classifier, default=None
        Any classifier with ``predict_proba``, fitted or not; ``None`` means
        ``LogisticRegression()``. A fitted model is used as it is and never
        refitted. Its posteriors should be calibrated: wrap it in a calibrator
        first (for example ``TemperatureCalibratedClassifier``), as EM relies
        on calibrated posteriors.
    method : {"mle", "map", "bbse", "known"}, default="mle"
        How the test prior is obtained. ``"mle"``: maximum likelihood on the
        batch by EM (Saerens et al., 2002). ``"map"``: maximum a posteriori
        with a symmetric Dirichlet(``dirichlet_alpha``) hyper-prior (Sulc and
        Matas, 2019); stays positive for classes absent from the batch.
        ``"bbse"``: black-box shift estimation from the confusion matrix of the
        ``fit`` data (Lipton et al., 2018). ``"known"``: ``test_prior``.
    solver : {"em", "squarem", "pga"}, default="em"
        Solver of ``"mle"`` and ``"map"``, see :func:`estimate_test_prior`.
    dirichlet_alpha : float, default=2.0
        Concentration ``a >= 1`` of the Dirichlet hyper-prior (``"map"``).
    test_prior : array-like of shape (n_classes,), dict or Series, default=None
        The test prior, in the order of ``classes_`` (or keyed by class label);
        required by ``"known"`` and used by it only (other methods warn).
    train_prior : array-like of shape (n_classes,), dict or Series, default=None
        The prior the posteriors are calibrated to, in the order of
        ``classes_`` (or keyed by class label). ``None`` takes it from the
        ``fit`` data as ``source_prior`` says.
    source_prior : {"labels", "mean_posterior"}, default="labels"
        Where the training prior comes from when ``train_prior`` is None: the
        (weighted) label frequencies of ``y``, or the mean predicted posterior
        on the ``fit`` data -- the prior a calibrated model's posteriors are
        consistent with (recommended by Alexandari et al., 2020, after
        calibration).
    max_iter : int, default=10_000
        Largest number of iterations of the ``"mle"``/``"map"`` estimate.
    tol : float, default=1e-6
        Stop when one EM step moves the estimate by at most ``tol`` (L1).

    Attributes
    ----------
    estimator_ : classifier
        The fitted inner model (the given one itself when it was fitted).
    train_prior_ : ndarray of shape (n_classes,)
        The training prior ``q``.
    test_prior_ : ndarray of shape (n_classes,)
        The known test prior (``method="known"`` only).
    confusion_ : ndarray of shape (n_classes, n_classes)
        Joint confusion matrix ``P(predicted = i, true = j)`` on the ``fit``
        data (``method="bbse"`` only).
    n_iter_ : int
        Passes over the ``fit`` data (E-step evaluations) of the estimate of
        the prior on the ``fit`` data itself (``"mle"``, ``"map"``), a
        diagnostic: with calibrated posteriors it lands near ``train_prior_``.
        1 for the closed-form ``"bbse"`` and ``"known"``.
    online_prior_ : ndarray of shape (n_classes,)
        The on-line estimate from every sample given to :meth:`update_prior`
        since ``fit`` or :meth:`reset_prior` (the starting prior before any).
    n_seen_ : int
        Number of samples behind ``online_prior_``.
    classes_ : ndarray of shape (n_classes,)
        Class labels, from the inner model.
    n_features_in_ : int
        Number of features, when the inner model has it.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Feature names, when the inner model has them.

    See Also
    --------
    adjust_to_prior : Bayes' rule to a new prior, on arrays.
    estimate_test_prior : The MLE/MAP estimate, on arrays.
    bbse_test_prior : BBSE, on arrays.

    Notes
    -----
    With ``"mle"``, ``"map"`` and ``"bbse"`` the estimator is transductive: the
    output for a row depends on the whole batch given to ``predict_proba``
    (the batch is the sample the prior is estimated from). scikit-learn has no
    tag for that; the estimator declares ``non_deterministic=True``, which makes
    its common checks skip the subset-invariance test. Batches should be large
    enough to estimate a prior: the MLE from one sample puts all its mass on
    the class maximising ``p_k / q_k``.

    The stream API (:meth:`update_prior`, :meth:`predict_proba_online`,
    :meth:`reset_prior`) follows the on-line setting of Sulc and Matas (2019,
    Sec. 3.4): the estimate uses every sample seen so far. It never changes
    :meth:`predict_proba`, which estimates from its own batch only. For
    ``"mle"``/``"map"`` the posteriors seen are kept (memory grows with the
    stream: the likelihood has no finite sufficient statistic); for ``"bbse"``
    the counts of predictions suffice.

    BBSE solves ``C w = mu`` by least squares: a class never predicted on the
    ``fit`` data makes ``C`` singular, and the minimum-norm solution is used.

    References
    ----------
    .. [1] Saerens, Latinne and Decaestecker, "Adjusting the outputs of a
       classifier to new a priori probabilities: a simple procedure", Neural
       Computation 14(1), 2002.
    .. [2] Sulc and Matas, "Improving CNN classifiers by estimating test-time
       priors", ICCV Workshops 2019. arXiv:1805.08235.
    .. [3] Lipton, Wang and Smola, "Detecting and correcting for label shift
       with black box predictors", ICML 2018.
    .. [4] Alexandari, Kundaje and Shrikumar, "Maximum likelihood with
       bias-corrected calibration is hard-to-beat at label shift adaptation",
       ICML 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skprior import PriorAdaptedClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> model = LogisticRegression(max_iter=1000).fit(X, y)
    >>> adapted = PriorAdaptedClassifier(model).fit(X, y)  # model is not refitted
    >>> shifted = np.r_[0:50, 50:60, 100:110]  # mostly class 0
    >>> np.round(adapted.estimate_prior(X[shifted]), 2)
    array([0.73, 0.12, 0.15])
    """

    _parameter_constraints: dict = {
        **BasePriorClassifier._parameter_constraints,
        "method": [StrOptions(set(PRIOR_METHODS))],
        "solver": [StrOptions(set(SOLVERS))],
        "dirichlet_alpha": [Interval(Real, 1, None, closed="left")],
        "test_prior": ["array-like", None],
        "source_prior": [StrOptions(set(SOURCE_PRIORS))],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        estimator=None,
        *,
        method="mle",
        solver="em",
        dirichlet_alpha=2.0,
        test_prior=None,
        train_prior=None,
        source_prior="labels",
        max_iter=10_000,
        tol=1e-6,
    ):
        self.estimator = estimator
        self.method = method
        self.solver = solver
        self.dirichlet_alpha = dirichlet_alpha
        self.test_prior = test_prior
        self.train_prior = train_prior
        self.source_prior = source_prior
        self.max_iter = max_iter
        self.tol = tol

    def _is_transductive(self):
        return self.method != "known"

    # -- fit -----------------------------------------------------------------------

    def _fit_post_hoc(self, X, y_index, sample_weight):
        n_classes = len(self.classes_)
        for name in ("test_prior_", "confusion_"):
            if hasattr(self, name):
                delattr(self, name)
        needs_proba = self.method != "known" or (
            self.train_prior is None and self.source_prior == "mean_posterior"
        )
        proba = self._inner_proba(X) if needs_proba else None
        if self.train_prior is None and self.source_prior == "mean_posterior":
            self.train_prior_ = np.average(proba, axis=0, weights=sample_weight)
            self.train_prior_ = self.train_prior_ / self.train_prior_.sum()
        if np.any(self.train_prior_ == 0):
            missing = self.classes_[self.train_prior_ == 0].tolist()
            raise ValueError(
                f"The classes {missing} have training prior 0 (no samples in y, or "
                f"weight 0), so p(c|x) / q_c is undefined for them. Pass "
                f"train_prior= (the model's training class frequencies), or "
                f"source_prior='mean_posterior'."
            )

        if self.test_prior is not None and self.method != "known":
            warnings.warn(
                f"test_prior is used only by method='known'; method="
                f"{self.method!r} estimates the test prior from each batch and "
                f"ignores it. Pass method='known' to use the given prior.",
                UserWarning,
                stacklevel=4,  # the caller of fit (through sklearn's _fit_context)
            )
        self.n_iter_ = 1
        if self.method == "known":
            if self.test_prior is None:
                raise ValueError(
                    "method='known' needs test_prior=: the class prior of the "
                    "test data, one entry per class in the order of classes_."
                )
            self.test_prior_ = check_prior(
                self.test_prior, n_classes, name="test_prior", classes=self.classes_
            )
        elif self.method == "bbse":
            predicted = np.argmax(proba, axis=1)
            weights = np.ones(len(y_index)) if sample_weight is None else sample_weight
            confusion = np.zeros((n_classes, n_classes))
            np.add.at(confusion, (predicted, y_index), weights)
            self.confusion_ = confusion / confusion.sum()
        else:
            self.n_iter_ = self._estimate(proba).n_passes
        self.reset_prior()

    # -- the prior of a batch ------------------------------------------------------

    def _estimate(self, proba, init=None):
        return estimate_test_prior(
            proba,
            self.train_prior_,
            method=self.method,
            solver=self.solver,
            dirichlet_alpha=self.dirichlet_alpha,
            init=init,
            max_iter=self.max_iter,
            tol=self.tol,
        )

    def _prior_of(self, proba):
        """The test prior for a batch with inner posteriors ``proba``."""
        if self.method == "known":
            return self.test_prior_
        if self.method == "bbse":
            return self._bbse(np.bincount(proba.argmax(axis=1), minlength=len(proba.T)))
        return self._estimate(proba).prior

    def _bbse(self, counts):
        return _bbse_from_frequencies(counts / counts.sum(), self.confusion_)

    def estimate_prior(self, X):
        """Estimate the class prior of the batch ``X`` (the test prior used).

        Parameters
        ----------
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            An unlabelled batch.

        Returns
        -------
        prior : ndarray of shape (n_classes,)
            The estimated prior in the order of ``classes_`` (``test_prior_``
            for ``method="known"``).
        """
        check_is_fitted(self)
        return self._prior_of(self._inner_proba(X)).copy()

    def _adjust_proba(self, proba):
        prior = self._prior_of(proba)
        return _reweight(proba, self.train_prior_, prior)

    # -- on-line ---------------------------------------------------------------------

    def reset_prior(self):
        """Forget the stream: the on-line estimate goes back to its start.

        The start is ``test_prior_`` for ``method="known"`` and ``train_prior_``
        otherwise.

        Returns
        -------
        self : object
            The estimator.
        """
        check_is_fitted(self, "train_prior_")
        start = self.test_prior_ if self.method == "known" else self.train_prior_
        self.online_prior_ = start.copy()
        self.n_seen_ = 0
        self._stream_proba = []
        self._stream_counts = np.zeros(len(self.classes_))
        return self

    def update_prior(self, X):
        """Add a batch of a stream to the on-line estimate of the test prior.

        The new ``online_prior_`` is the estimate from every sample given since
        ``fit`` or :meth:`reset_prior`, not from ``X`` alone (for
        ``"mle"``/``"map"``, EM started halfway between the previous estimate
        and the training prior).
        :meth:`predict_proba` is not affected.

        Parameters
        ----------
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            The next unlabelled batch.

        Returns
        -------
        self : object
            The estimator, with ``online_prior_`` and ``n_seen_`` updated.
        """
        check_is_fitted(self)
        proba = self._inner_proba(X)
        self.n_seen_ += proba.shape[0]
        if self.method == "bbse":
            self._stream_counts = self._stream_counts + np.bincount(
                proba.argmax(axis=1), minlength=len(self.classes_)
            )
            self.online_prior_ = self._bbse(self._stream_counts)
        elif self.method in ("mle", "map"):
            self._stream_proba.append(proba)
            seen = np.concatenate(self._stream_proba)
            # Start halfway to the training prior: close to the last estimate,
            # and with no class at or near 0, where EM moves a class slowly
            # (at exactly 0, never) after a small batch put it there.
            init = 0.5 * (self.online_prior_ + self.train_prior_)
            self.online_prior_ = self._estimate(seen, init=init).prior
        return self

    def predict_proba_online(self, X):
        """Posteriors of ``X`` adjusted to the on-line prior ``online_prior_``.

        Unlike :meth:`predict_proba` the output of a row does not depend on the
        rest of ``X``; call :meth:`update_prior` first to include ``X`` in the
        estimate.

        Parameters
        ----------
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            Data to predict.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Adjusted probabilities in the order of ``classes_``.
        """
        check_is_fitted(self)
        proba = self._inner_proba(X)
        return _reweight(proba, self.train_prior_, self.online_prior_)
