"""The estimator of prior adaptation: :class:`PriorAdaptedClassifier`.

It calls the array functions of ``_prior.py`` (the MLE/MAP estimate, the
source prior) and ``_confusion.py`` (the confusion matrix), the one policy of
``_policy.py`` (test for shift, then estimate), the stream state and on-line
methods of ``_online.py`` and the prediction sets and prior intervals of
``_uncertainty.py``.
"""

import warnings

import numpy as np
from sklearn.utils.validation import check_is_fitted

from skprior._base import BasePriorClassifier
from skprior._utils._array_api import working_dtype_results
from skprior._utils._constraints import constraints
from skprior._utils._options import (
    DEFAULT_DIRICHLET_ALPHA,
    DEFAULT_FLH_LEARNING_RATE,
    DEFAULT_MAX_ITER,
    DEFAULT_ONLINE,
    DEFAULT_PRIOR_METHOD,
    DEFAULT_RLLS_REG,
    DEFAULT_SHIFT_LEVEL,
    DEFAULT_SOLVER,
    DEFAULT_STREAM_BUDGET,
    DEFAULT_TOL,
    SOURCE_PRIORS,
)
from skprior._utils._sklearn_compat import StrOptions
from skprior._utils._validation import check_prior, check_train_prior, warn_user
from skprior._utils._validation_arrays import on_host, same_value
from skprior._utils._validation_labels import check_sample_weight
from skprior.label_shift._conformal import (
    DEFAULT_SET_DELTA,
    SET_CONSTRAINTS,
    SetCalibration,
)
from skprior.label_shift._confusion import joint_confusion_matrix
from skprior.label_shift._estimate_warnings import warn_if_few_predictions
from skprior.label_shift._online import OnlineMixin, confusion_prior
from skprior.label_shift._policy import ShiftGate, shift_gated_prior
from skprior.label_shift._prior import estimate_source_prior, estimate_test_prior
from skprior.label_shift._solvers import predicted_counts, reweight
from skprior.label_shift._uncertainty import UncertaintyMixin


class PriorAdaptedClassifier(UncertaintyMixin, OnlineMixin, BasePriorClassifier):
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
        on calibrated posteriors. To search over fitted models
        (``GridSearchCV(..., {"estimator": [a, b]})``), wrap each in
        ``sklearn.frozen.FrozenEstimator``: the search clones the values it
        tries, and a clone is unfitted (``fit`` warns where it sees this).
    method : {"mle", "map", "bbse", "rlls", "known"}, default="mle"
        How the test prior is obtained. ``"mle"``: maximum likelihood on the
        batch by EM (Saerens et al., 2002). ``"map"``: maximum a posteriori
        with a symmetric Dirichlet(``dirichlet_alpha``) hyper-prior (Sulc and
        Matas, 2019); stays positive for classes absent from the batch.
        ``"bbse"``: black-box shift estimation from the confusion matrix of the
        ``fit`` data (Lipton et al., 2018), projected onto the simplex
        (:func:`bbse_test_prior`; its ``projection="clip"`` gives the
        clip-and-renormalise of earlier versions). ``"rlls"``: BBSE
        regularised towards "no shift" (Azizzadenesheli et al., 2019; see
        :func:`rlls_test_prior`). ``"known"``: ``test_prior``.
    solver : {"em", "squarem", "pga"}, default="squarem"
        Solver of ``"mle"`` and ``"map"``, see :func:`estimate_test_prior`.
    dirichlet_alpha : float, default=2.0
        Concentration ``a >= 1`` of the Dirichlet hyper-prior (``"map"``).
    rlls_reg : float >= 0 or "auto", default="auto"
        The regularisation ``Delta`` of ``"rlls"`` (``reg`` of
        :func:`rlls_test_prior`): ``"auto"`` scales with the batch as
        ``1 / sqrt(n)``; ``0`` is BBSE constrained to non-negative weights.
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
    online : {"aggregate", "cumulative", "fth", "flh-ftl"}, default="aggregate"
        How :meth:`update_prior` tracks the prior of a stream (see Notes).
        ``"aggregate"``: follows a drifting prior and is never much worse than
        not adapting (:class:`AggregatingPrior`: exponential weights over
        forgetting MAP estimates at 50 to 3,200 rows, their trend forecasts
        at 800 to 3,200 rows and the training prior, on the posteriors; for
        ``"bbse"`` and ``"rlls"``, which do not rely on the posteriors'
        calibration, the counts of predictions as with ``"cumulative"``).
        ``"cumulative"``: the estimate from every sample seen, for a stationary
        stream (:class:`CumulativePrior`; for ``"bbse"`` and ``"rlls"`` the
        counts of predictions). ``"fth"``: the mean of the per-batch estimates
        (:class:`FollowTheHistory`). ``"flh-ftl"``: follows a drifting prior
        (:class:`FLHFTL`).
    online_budget : int, default=1000
        Rows kept exactly by ``online="cumulative"`` with ``"mle"``/``"map"``;
        past it, on-line EM (see :class:`CumulativePrior`).
    online_learning_rate : float, default=16.0
        Learning rate of the meta-learner of ``online="flh-ftl"``.
    shift_level : float in (0, 1] or None, default=0.01
        Level of the test of no shift (:func:`label_shift_test`) run on each
        batch before it is adapted (``"mle"``, ``"map"``, ``"bbse"``): the
        batch's mean posterior is compared with the mean posterior on the
        ``fit`` data, and a batch where the test does not reject at this level
        keeps the prior of the ``fit`` data: the training prior (its
        posteriors are returned as they are), or, with a given
        ``train_prior``, the (weighted) label frequencies of ``y`` with one
        pseudo-row per class of ``train_prior`` (the batch is like the
        ``fit`` rows).
        ``None`` adapts every batch, as without the test.
    set_score, set_mode, set_delta : default="lac", "weighted", 0.15
        The ``score`` ({"lac", "aps"}: scored on the ``fit`` data by ``fit``),
        ``mode`` and ``delta`` of :meth:`predict_set`, as in
        :func:`conformal_prediction_set`; ``"weighted"`` weighs by the prior
        of the batch (:meth:`estimate_prior`) over that of the ``fit`` labels.
    verbose : int, default=0
        Print the prior estimates as they run (to stdout, as scikit-learn
        does): a line when each stops (1), one per pass (2); see
        :func:`estimate_test_prior`.

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
        data (``method="bbse"`` and ``"rlls"`` only).
    n_iter_ : int or ndarray of shape (n_labels,)
        Passes over the ``fit`` data (E-step evaluations) of the estimate of
        the prior on the ``fit`` data itself (``"mle"``, ``"map"``), a
        diagnostic: with calibrated posteriors it lands near ``train_prior_``.
        1 for ``"bbse"``, ``"rlls"`` and ``"known"``. Computed when first
        read, not by ``fit`` (which does not need that EM). Each label's after
        a multi-label ``fit``.
    online_prior_ : ndarray of shape (n_classes,)
        The on-line estimate from the batches given to :meth:`update_prior`
        since ``fit`` or :meth:`reset_prior`, up to and including the last
        one (the starting prior before any, float64), in the array namespace,
        on the device and in the float dtype of the inner model's posteriors
        for the last batch.
    n_seen_ : int
        Number of samples behind ``online_prior_``.
    online_shifted_ : bool
        Whether the stream since ``fit`` or :meth:`reset_prior` has been found
        shifted from the ``fit`` data, by three tests whose levels sum to
        ``shift_level`` (once found, kept until :meth:`reset_prior`). Bets
        on the on-line estimate over the first ``max(100, 10 * n_classes)``
        rows (a test by betting, from the first row); the test of the mean
        posterior of every row seen, once there are ``max(50, n_classes)``;
        that of the latest segment of ``max(100, 10 * n_classes)`` rows or
        more, as one fills. If the rows before the latest segment are not
        found shifted, the change began in it, and the on-line estimate
        starts again from the batch where the shift was found.
    online_weight_ : float
        The weight :meth:`predict_proba_online` gives ``online_prior_``
        against the prior of the ``fit`` data (see ``shift_level``): 1 once
        ``online_shifted_``; while the bets run, the posterior probability of
        a shift at prior odds 0.1 given their wealth (at most 0.1 on average
        without shift); else 0.
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
    rlls_test_prior : RLLS, on arrays.
    label_shift_test : The test of no shift run before adapting.
    conformal_prediction_set : The sets of :meth:`predict_set`, on arrays.

    Notes
    -----
    With ``"mle"``, ``"map"``, ``"bbse"`` and ``"rlls"`` the estimator is
    transductive: the output for a row depends on the whole batch given to
    ``predict_proba`` (the batch is the sample the prior is estimated from).
    scikit-learn has no tag for that; the estimator declares
    ``non_deterministic=True``, which makes its common checks skip the
    subset-invariance test. Batches should be large
    enough to estimate a prior: the MLE from one sample puts all its mass on
    the class maximising ``p_k / q_k`` (:func:`estimate_test_prior` warns when
    a batch has fewer rows than classes).

    Adapting a batch without shift costs accuracy and log loss: the estimate
    carries the batch's sampling noise, and with a weak or class-wise
    miscalibrated model the MLE can drive most classes to ~0 with no shift at
    all (LeNet-5 on CIFAR-100, 5,000 rows: accuracy 0.124 to 0.049). Hence the
    test of ``shift_level``: it compares the batch with the model's own
    posteriors on the ``fit`` data, so its null distribution does not rely on
    calibration. A batch of another origin than the ``fit`` data can differ in
    more than its prior and be declared shifted too.

    The stream API (:meth:`update_prior`, :meth:`predict_proba_online`,
    :meth:`reset_prior`) never changes :meth:`predict_proba`, which estimates
    from its own batch only, and its state and cost per update do not grow
    with the stream. The default ``online="aggregate"`` was chosen on the
    stream benchmark (``docs/user_guide/streams.rst``): at 10-row batches it
    gains at least the best fixed-window MAP's accuracy on most shifted CIFAR
    streams (on a slow monotone drift, 100 seeds, at or above the 400-row
    window on the four outputs measured, LeNet-5 / CIFAR-10 included), and its
    log-loss stays below the unadapted model's where the MLE of
    ``"cumulative"`` drives classes to ~0.
    ``online="cumulative"`` follows Sulc and Matas (2019,
    Sec. 3.4), the estimate from every sample seen: for ``"mle"``/``"map"``
    the last ``online_budget`` posteriors and the summed responsibilities of
    older ones (:class:`CumulativePrior`: exact while the stream fits in the
    budget, on-line EM past it); for ``"bbse"`` and ``"rlls"`` the counts of
    predictions (K numbers, exact). ``online="fth"`` and ``"flh-ftl"`` do
    on-line regression on a per-batch estimate ``s_t`` (Baby et al., 2023), chosen by
    ``method``: the batch's own MLE/MAP for ``"mle"``/``"map"``, and for
    ``"bbse"`` the unclipped, unbiased ``C_cond^{-1} mu_t``, for ``"rlls"``
    the batch's RLLS estimate. ``"known"`` keeps
    ``test_prior_``.

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
    .. [5] Baby, Garg, Yen, Balakrishnan, Lipton and Wang, "Online label
       shift: optimal dynamic regret meets practical algorithms", NeurIPS
       2023.

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
        **constraints(method="prior_method", solver="solver"),
        **constraints(dirichlet_alpha="dirichlet_alpha", test_prior="optional_prior"),
        **constraints(rlls_reg="rlls_reg"),
        **constraints(source_prior="source_prior", max_iter="max_iter", tol="tol"),
        **constraints(online="online", online_budget="stream_budget"),
        **constraints(online_learning_rate="learning_rate"),
        **constraints(shift_level="optional_shift_level"),
        # (the deterministic scores: a wrapper's sets are a function of X)
        "set_score": [StrOptions({"lac", "aps"})],
        "set_mode": SET_CONSTRAINTS["mode"],
        "set_delta": SET_CONSTRAINTS["delta"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        estimator=None,
        *,
        method=DEFAULT_PRIOR_METHOD,
        solver=DEFAULT_SOLVER,
        dirichlet_alpha=DEFAULT_DIRICHLET_ALPHA,
        rlls_reg=DEFAULT_RLLS_REG,
        test_prior=None,
        train_prior=None,
        source_prior=SOURCE_PRIORS[0],
        max_iter=DEFAULT_MAX_ITER,
        tol=DEFAULT_TOL,
        online=DEFAULT_ONLINE,
        online_budget=DEFAULT_STREAM_BUDGET,
        online_learning_rate=DEFAULT_FLH_LEARNING_RATE,
        shift_level=DEFAULT_SHIFT_LEVEL,
        set_score="lac",
        set_mode="weighted",
        set_delta=DEFAULT_SET_DELTA,
        verbose=0,
    ):
        self.estimator = estimator
        self.method = method
        self.solver = solver
        self.dirichlet_alpha = dirichlet_alpha
        self.rlls_reg = rlls_reg
        self.test_prior = test_prior
        self.train_prior = train_prior
        self.source_prior = source_prior
        self.max_iter = max_iter
        self.tol = tol
        self.online = online
        self.online_budget = online_budget
        self.online_learning_rate = online_learning_rate
        self.shift_level = shift_level
        self.set_score = set_score
        self.set_mode = set_mode
        self.set_delta = set_delta
        self.verbose = verbose

    def _is_transductive(self):
        return self.method != "known"

    # -- fit -----------------------------------------------------------------------

    # (fitted state in float64 whatever the dtype of the inner model's output)
    @working_dtype_results()
    def _fit_post_hoc(self, X, y_index, sample_weight):
        n_classes = self._n_classes()
        self._fitted_method = self.method
        for name in ("test_prior_", "confusion_"):
            if hasattr(self, name):
                delattr(self, name)
        # (every method needs the posteriors of X: the calibration scores of
        # predict_set)
        proba = self._inner_proba(X)
        if self.train_prior is None and self.source_prior == "mean_posterior":
            self.train_prior_ = on_host(
                estimate_source_prior(
                    proba, source="mean_posterior", sample_weight=sample_weight
                )
            )
        check_train_prior(
            self.train_prior_,
            n_classes,
            classes=self.classes_,
            from_labels=self.train_prior is None and self.source_prior == "labels",
        )

        if self.test_prior is not None and self.method != "known":
            warn_user(
                f"test_prior is used only by method='known'; method="
                f"{self.method!r} estimates the test prior from each batch and "
                f"ignores it. Pass method='known' to use the given prior."
            )
        self._n_iter, self._fit_proba = 1, None
        # (read by fit only: a later set_params of them is refused, not ignored)
        names = ("train_prior", "source_prior", "test_prior")
        self._fitted_priors = {name: getattr(self, name) for name in names}
        if self.method == "known":
            if self.test_prior is None:
                raise ValueError(
                    "method='known' needs test_prior=: the class prior of the "
                    "test data, one entry per class in the order of classes_."
                )
            self.test_prior_ = check_prior(
                self.test_prior, n_classes, name="test_prior", classes=self.classes_
            )
        elif self.method in ("bbse", "rlls"):
            self.confusion_ = on_host(
                joint_confusion_matrix(proba, y_index, sample_weight=sample_weight)
            )
        else:
            # n_iter_ runs its EM when read, with the settings of this fit.
            # (The same array as the gate's below: no memory of its own, and
            # stored once in a pickle.)
            self._n_iter, self._fit_proba = None, proba
            self._n_iter_settings = self._estimate_settings()
        self._set_calibration = SetCalibration(
            proba, y_index, self.set_score, sample_weight
        )
        # (given a train_prior, the fit rows' own prior is another: that of a
        # batch the test finds unshifted, _unshifted_prior)
        self._fit_prior = None
        if self.train_prior is not None:
            counts = np.bincount(
                y_index, weights=self._set_calibration.weights, minlength=n_classes
            )
            # (one pseudo-row per class of train_prior_, as the stream's
            # experts have: a few fit rows give a noisy prior, and a class
            # without rows there is not ruled out of every unshifted batch)
            pseudo = n_classes * self.train_prior_
            self._fit_prior = (counts + pseudo) / (counts.sum() + n_classes)
        self._no_shift = None
        if self.method != "known":
            # The batches are compared with these posteriors: the model's own,
            # on data without shift.
            weights = check_sample_weight(sample_weight, proba.shape[0])
            self._no_shift = ShiftGate(proba, weights)
        self._start_stream()  # (fit validated the parameters)

    @property
    def n_iter_(self):
        """Passes of the estimate of the prior on the ``fit`` data (see class)."""
        if self._is_multilabel():  # (each label's, shape (n_labels,))
            return np.array([label.n_iter_ for label in self.label_estimators_])
        if getattr(self, "_n_iter", None) is None:
            if getattr(self, "_fit_proba", None) is None:
                raise AttributeError("n_iter_ is set by fit")
            if self._fit_proba.shape[1] < 2:  # (one class: its prior is 1)
                return 1
            with warnings.catch_warnings():
                # (a diagnostic on the fit data, not an adaptation: the warning
                # of a degenerate estimate is for the batches)
                warnings.filterwarnings(
                    "ignore", "The (MLE|MAP) test prior", category=UserWarning
                )
                settings = getattr(self, "_n_iter_settings", None)
                settings = settings or self._estimate_settings()
                self._n_iter = estimate_test_prior(
                    self._fit_proba, self.train_prior_, **settings
                ).n_passes
        return self._n_iter

    def _check_unchanged(self, stream=False):
        """Refuse parameters changed by ``set_params`` since the state was built.

        ``method`` since ``fit``, and for the stream the settings its tracker
        was built with (``_online.online_params``) since ``reset_prior``: what
        the state holds was computed for the old ones.
        """
        check_is_fitted(self)
        if self._is_multilabel():
            return  # (each label's own wrapper holds the state, and checks it)
        if self.method != self._fitted_method:
            raise ValueError(
                f"method was changed from {self._fitted_method!r} to "
                f"{self.method!r} after fit; call fit again (fit computes what "
                f"each method needs, e.g. the confusion matrix of 'bbse')."
            )
        for name, given in getattr(self, "_fitted_priors", {}).items():
            if not same_value(getattr(self, name), given):
                raise ValueError(
                    f"{name} was changed after fit, which read it into the "
                    f"fitted state (train_prior_, test_prior_); call fit again "
                    f"to use the new value."
                )
        if stream:
            self._stream.check_params(self)

    # -- the prior of a batch ------------------------------------------------------

    def _estimate_settings(self):
        names = ("method", "solver", "dirichlet_alpha", "max_iter", "tol")
        return {name: getattr(self, name) for name in names}

    @working_dtype_results()
    def _estimate(self, proba):
        return estimate_test_prior(
            proba, self.train_prior_, **self._estimate_settings(), verbose=self.verbose
        )

    def test_shift(self, X):
        """Test whether the batch ``X`` is label-shifted from the ``fit`` data.

        The test that ``predict_proba`` runs before adapting (see
        ``shift_level`` and :func:`label_shift_test`).

        Parameters
        ----------
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            An unlabelled batch.

        Returns
        -------
        result : ShiftTest
            ``statistic``, ``pvalue``, ``dof`` and ``shifted`` (at
            ``shift_level``; every batch is "shifted" when it is None).
        """
        check_is_fitted(self)
        if self.method == "known":
            raise ValueError(
                "method='known' adapts to the given test_prior and runs no test "
                "of shift; use an estimating method ('mle', 'map', 'bbse', 'rlls')."
            )
        self._check_single_label()
        level = 1.0 if self.shift_level is None else self.shift_level
        return self._no_shift.test(self._inner_proba(X), level)

    def _unshifted_prior(self):
        """The prior of a batch that the test finds unshifted (host).

        The test compares the batch with the ``fit`` rows, so such a batch is
        drawn as they are: their weighted label frequencies, which are
        ``train_prior_`` unless ``train_prior`` was given (a model trained on
        other data, or balanced: the ``fit`` rows' prior is not the model's),
        then with one pseudo-row per class of ``train_prior_`` (the MAP
        estimate under a Dirichlet of ``K`` rows centred on it).
        """
        fit_prior = getattr(self, "_fit_prior", None)
        return self.train_prior_ if fit_prior is None else fit_prior

    def _prior_of(self, proba, unshifted=None):
        """The test prior (host) of the inner posteriors ``proba``.

        ``unshifted``: where the test finds no shift (None:
        :meth:`_unshifted_prior`).
        """
        self._check_unchanged()
        if self.method == "known":
            return self.test_prior_
        prior, _ = shift_gated_prior(
            proba,
            self._unshifted_prior() if unshifted is None else unshifted,
            self._batch_prior,
            self._no_shift,
            self.shift_level,
        )
        return prior

    def _batch_prior(self, proba):
        """The method's estimate of the batch's prior, on the host."""
        if len(self.train_prior_) == 1:  # (one class: its prior is 1)
            return self.train_prior_
        if self.method in ("bbse", "rlls"):
            if self.method == "bbse":  # (RLLS keeps such a batch near q)
                warn_if_few_predictions(*proba.shape, "BBSE")
            return confusion_prior(self, predicted_counts(proba))
        return on_host(self._estimate(proba).prior)

    def estimate_prior(self, X):
        """Estimate the class prior of the batch ``X`` (the test prior used).

        Parameters
        ----------
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            An unlabelled batch.

        Returns
        -------
        prior : ndarray of shape (n_classes,) or (n_labels,)
            The estimated prior in the order of ``classes_`` (``test_prior_``
            for ``method="known"``; when the test of ``shift_level`` finds no
            shift, the prior of the ``fit`` data: ``train_prior_``, or the
            label frequencies of ``y`` with a given ``train_prior``, as
            ``shift_level`` says). After a
            multi-label ``fit``, each label's estimated prior of being present.
        """
        check_is_fitted(self)
        if self._is_multilabel():
            return self._label_priors("estimate_prior", X)
        return self._prior_of(self._inner_proba(X)).copy()

    def _adjust_proba(self, proba):
        prior = self._prior_of(proba)
        # (float32 in, float32 out, as adjust_to_prior and every namespace)
        return reweight(proba, self.train_prior_, prior, dtype=proba.dtype)
