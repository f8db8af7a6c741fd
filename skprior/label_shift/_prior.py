"""Prior adaptation: posteriors that follow the test class prior (label shift).

The array functions: Bayes' rule to a new prior (:func:`adjust_to_prior`), the
maximum-likelihood or MAP test prior of an unlabelled batch
(:func:`estimate_test_prior`) and the source prior (:func:`estimate_source_prior`).
Each takes arrays of any array API namespace and returns its results in it,
in the input's float dtype (float32 in, float32 out; computed in float64).
The confusion-based estimates (BBSE, RLLS) are in ``_confusion.py``, the
solvers in ``_solvers.py``, the policy "test for shift, then estimate" in
``_policy.py``, and the estimator that calls them,
:class:`PriorAdaptedClassifier`, in ``_classifier.py``.
"""

import dataclasses

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skprior._utils._array_api import get_namespace, is_dask, to_host, weighted_counts
from skprior._utils._constraints import constraints
from skprior._utils._options import (
    DEFAULT_DIRICHLET_ALPHA,
    DEFAULT_MAX_ITER,
    DEFAULT_PRIOR_METHOD,
    DEFAULT_SOLVER,
    DEFAULT_TOL,
)
from skprior._utils._sklearn_compat import validate_params
from skprior._utils._validation import (
    check_prior,
    check_proba,
    check_train_prior,
    warn_user,
)
from skprior._utils._validation_labels import check_class_indices, check_sample_weight
from skprior.label_shift._estimate_warnings import (
    warn_if_degenerate,
    warn_if_pinned,
)
from skprior.label_shift._intervals import Fit, confidence_interval
from skprior.label_shift._solvers import (
    like,
    reweight,
    solve_prior,
    stranded_rows,
)


@dataclasses.dataclass(frozen=True, eq=False)
class PriorEstimate:
    """The result of :func:`estimate_test_prior`.

    Attributes
    ----------
    prior : ndarray of shape (n_classes,)
        The estimated test prior (sums to one), in the namespace, on the
        device and in the float dtype of ``proba`` (computed in float64).
    n_iter : int
        Iterations of the solver (EM steps, SQUAREM cycles or gradient steps).
    n_passes : int
        Passes over the data: evaluations of the E-step (equivalently of the
        log-likelihood and its gradient), the unit of cost shared by the solvers.
    converged : bool
        Whether the stopping criterion was met within ``max_iter``.
    objective : float
        Mean log-likelihood per sample at ``prior``,
        ``mean_i log sum_k prior_k p_ik / q_k``, plus the log Dirichlet density
        term ``(a - 1) sum_k log prior_k / N`` for ``method="map"``.

    See Also
    --------
    estimate_test_prior : The function that returns it.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import estimate_test_prior
    >>> proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]])
    >>> estimate = estimate_test_prior(proba, [0.5, 0.5])
    >>> estimate.converged, round(float(estimate.prior.sum()), 6)
    (True, 1.0)
    """

    prior: np.ndarray
    n_iter: int
    n_passes: int
    converged: bool
    objective: float
    # (the batch and the settings, for the interval; not a field: results
    # compare, print and convert as before)
    fit: dataclasses.InitVar[Fit | None] = None

    def __eq__(self, other):
        """Equal fields, the priors compared as arrays (on the host).

        (The dataclass's own ``==`` compared the priors inside a tuple, which
        raised "truth value of an array is ambiguous".)
        """
        if not isinstance(other, PriorEstimate):
            return NotImplemented
        numbers = ("n_iter", "n_passes", "converged", "objective")
        if any(getattr(self, name) != getattr(other, name) for name in numbers):
            return False
        (mine,) = to_host(get_namespace(self.prior)[0], self.prior)
        (theirs,) = to_host(get_namespace(other.prior)[0], other.prior)
        return bool(np.array_equal(mine, theirs))

    __hash__ = None  # (mutable arrays inside: unhashable, as before)

    def __post_init__(self, fit):
        object.__setattr__(self, "_fit", fit)
        # (the interval re-reads the caller's batch, not a copy)
        batch = None if fit is None else _sampled_sums(fit.proba)
        object.__setattr__(self, "_sampled_sums", batch)

    def confidence_interval(
        self,
        level=0.95,
        *,
        method="delta",
        target="batch",
        calibration=None,
        n_resamples=200,
        random_state=None,
    ):
        r"""Per-class confidence intervals for the batch's class proportions.

        The delta method from the observed information of the mixture
        likelihood at the estimate (one more pass over the batch, and one over
        ``calibration`` when given: one ``dask.compute``; where the batch
        repeats rows, more to fetch them and the calibration set's own ties;
        identical rows count as one draw), or the bootstrap; the maths is in
        ``skprior/label_shift/_intervals.py``.

        ``target="batch"`` (the default) covers the batch's own proportions
        :math:`\hat y_k = \frac1n\sum_i [y_i = k]`, what a monitor asks. With
        ``calibration=(proba_cal, y_cal)``, labelled held-out posteriors of
        the same model, the interval is honest for a miscalibrated model too:
        it is centred on the estimate minus the bias that the calibration set
        shows the model's misfit causes at this prior, and its width carries
        both the batch's noise and the calibration set's. Without it the
        interval assumes calibrated posteriors (the sandwich conditional on
        the labels, from the batch alone), and under-covers as ``n`` grows
        when they are not. ``target="prior"`` covers the prior the batch was
        drawn from (the Fisher interval; wider: it adds the labels'
        multinomial noise).

        A class the MLE puts at the boundary (below half a row, ``prior_k <
        1/(2n)``) gets a one-sided bound ``[0, high]``: the profile
        likelihood's bound at ``level`` (to second order; all of
        ``1 - level`` above). With ``calibration``, the upper bound is the
        larger of that and the moment equation's over the active classes and
        that class. The delta method's centre and width are first
        order: for MAP, whose Dirichlet term pulls the estimate towards
        uniform, the centre is corrected for that pull, well while it is
        small against the interval (the default ``dirichlet_alpha=2``).

        Parameters
        ----------
        level : float, default=0.95
            Nominal coverage of each class's interval, in (0, 1).
        method : {"delta", "bootstrap"}, default="delta"
            ``"bootstrap"`` re-estimates ``n_resamples`` synthetic batches
            (for ``target="prior"``, rows of the batch redrawn; for
            ``"batch"``, batches with the estimate's class counts drawn from
            the calibration set's classes, or from the batch's rows weighted
            by their responsibilities) and takes percentiles: ``n_resamples``
            times the estimate's cost, for comparison.
        target : {"batch", "prior"}, default="batch"
            The batch's own class proportions, or the generating prior.
        calibration : tuple (proba_cal, y_cal[, sample_weight]), default=None
            Held-out posteriors of the same model (calibrated as the batch's
            are, under the training prior ``train_prior``) and their true
            classes; every class must occur. Used by ``target="batch"``.
            ``sample_weight``: frequency weights (a row of weight 2 counts twice).
        n_resamples : int, default=200
            Resamples of ``method="bootstrap"`` (at least 10).
        random_state : int, numpy.random.Generator or None, default=None
            Seed of ``method="bootstrap"``.

        Returns
        -------
        low, high : ndarray of shape (n_classes,)
            The bounds, in ``[0, 1]``; in the namespace, on the device and
            in the float dtype of ``prior``.

        Raises
        ------
        ValueError
            When the batch given to :func:`estimate_test_prior` was modified
            since (the interval reads it again, and keeps no copy of it): the
            column sums of about 1,024 of its rows, taken with the estimate,
            no longer match.

        Examples
        --------
        >>> import numpy as np
        >>> from skprior import estimate_test_prior
        >>> rng = np.random.default_rng(0)
        >>> y = rng.choice(3, size=2000, p=[0.6, 0.3, 0.1])
        >>> logits = 2.5 * np.eye(3)[y] + rng.normal(size=(2000, 3))
        >>> proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        >>> estimate = estimate_test_prior(proba, [1 / 3, 1 / 3, 1 / 3])
        >>> low, high = estimate.confidence_interval(0.95)
        >>> bool(np.all((low <= estimate.prior) & (estimate.prior <= high)))
        True
        """
        if self._fit is None:
            raise ValueError(
                "This PriorEstimate was not returned by estimate_test_prior, so it "
                "holds no batch to compute an interval from. Call "
                "estimate_test_prior(proba, train_prior).confidence_interval()."
            )
        if self._sampled_sums is not None:
            xp, _ = get_namespace(self._fit.proba)
            now = _sampled_sums(self._fit.proba)
            if not bool(xp.all(now == self._sampled_sums)):
                raise ValueError(
                    "The batch given to estimate_test_prior was modified after "
                    "the estimate (rows of it changed), so an interval computed "
                    "now would describe other data. Keep the batch unchanged "
                    "until the interval is computed, or estimate from a copy "
                    "(estimate_test_prior(proba.copy(), ...)) if its buffer is "
                    "reused."
                )
        rng = np.random.default_rng(random_state)
        return confidence_interval(
            self._fit, level, method, target, calibration, n_resamples, rng
        )


# Rows summed to tell whether the caller's batch changed between the estimate
# and its interval (an interval keeps a reference to the batch, not a copy,
# which would double the memory of every estimate).
SAMPLED_ROWS = 1024


def _sampled_sums(proba):
    """Column sums of about ``SAMPLED_ROWS`` evenly spaced rows, on their device.

    ``None`` for a Dask array (immutable, and a strided read would touch
    every chunk). A batch overwritten (a reused buffer), or rescaled or
    renormalised in place, changes them; a change confined to rows that are
    not sampled does not.
    """
    xp, _ = get_namespace(proba)
    if is_dask(xp):
        return None
    step = max(1, proba.shape[0] // SAMPLED_ROWS)
    return xp.sum(proba[::step, :], axis=0)


@validate_params(
    constraints(proba="array", train_prior="prior", test_prior="prior"),
    prefer_skip_nested_validation=True,
)
def adjust_to_prior(proba, train_prior, test_prior):
    r"""Move posteriors from the training prior to a new class prior (Bayes' rule).

    Under label shift the class-conditional densities :math:`p(x|c)` stay and
    the prior changes from :math:`q` to :math:`\pi`; the posterior becomes

    .. math:: p_\pi(c|x) = \frac{p(c|x)\,\pi_c / q_c}{\sum_k p(k|x)\,\pi_k / q_k}.

    For a generative model (LDA, QDA, naive Bayes) this equals refitting it with
    ``priors=test_prior``.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Posteriors under the training prior; rows sum to one.
    train_prior : array-like of shape (n_classes,)
        The prior ``q`` the posteriors are calibrated to; strictly positive.
    test_prior : array-like of shape (n_classes,)
        The new prior ``pi``; zeros are allowed.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes)
        Adjusted posteriors, same dtype as the input (float32 or float64).

    Notes
    -----
    A row whose mass lies only on classes with ``pi_c = 0`` would be ``0/0``:
    the model is sure of classes the new prior rules out. Such a row is given
    ``test_prior`` itself (the evidence is discarded, not the prior).

    References
    ----------
    .. [1] Saerens, Latinne and Decaestecker, "Adjusting the outputs of a
       classifier to new a priori probabilities: a simple procedure", Neural
       Computation 14(1), 2002.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import adjust_to_prior
    >>> adjust_to_prior(np.array([[0.5, 0.5]]), [0.5, 0.5], [0.8, 0.2])
    array([[0.8, 0.2]])
    """
    proba = check_proba(proba, lazy=True)
    n_classes = proba.shape[1]
    test = check_prior(test_prior, n_classes, name="test_prior")
    train = check_train_prior(train_prior, n_classes)
    return reweight(proba, train, test, dtype=proba.dtype)


@validate_params(
    {
        **constraints(proba="array", train_prior="prior", method="estimate_method"),
        **constraints(solver="solver", dirichlet_alpha="dirichlet_alpha"),
        **constraints(init="optional_prior", max_iter="max_iter", tol="tol"),
        "verbose": ["verbose"],
    },
    prefer_skip_nested_validation=True,
)
def estimate_test_prior(
    proba,
    train_prior,
    *,
    method=DEFAULT_PRIOR_METHOD,
    solver=DEFAULT_SOLVER,
    dirichlet_alpha=DEFAULT_DIRICHLET_ALPHA,
    init=None,
    max_iter=DEFAULT_MAX_ITER,
    tol=DEFAULT_TOL,
    verbose=0,
):
    r"""Estimate the class prior of an unlabelled batch from its posteriors.

    Maximum likelihood (``method="mle"``) maximises over the simplex

    .. math:: \ell(\pi) = \sum_i \log \sum_k \pi_k\, p_{ik} / q_k,

    concave in :math:`\pi`, with :math:`p_{ik}` the posteriors under the
    training prior :math:`q` (Saerens et al., 2002). ``method="map"`` adds a
    symmetric Dirichlet(:math:`a`) hyper-prior, :math:`(a-1)\sum_k\log\pi_k`
    (Sulc and Matas, 2019). The EM algorithm alternates the E-step
    :math:`r_{ik} \propto p_{ik}\pi_k/q_k` and the M-step

    .. math:: \pi_k = \frac{\sum_i r_{ik} + a - 1}{N + K(a - 1)}

    (:math:`a = 1` for MLE), starting from :math:`q`.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Posteriors of the batch under the training prior; rows sum to one.
        Computation is in float64 whatever the input dtype; the estimate is
        returned in the input's float dtype (float32 in, float32 out).
    train_prior : array-like of shape (n_classes,)
        The prior ``q`` the posteriors are calibrated to; strictly positive.
    method : {"mle", "map"}, default="mle"
        Maximum likelihood, or maximum a posteriori with a Dirichlet prior.
    solver : {"em", "squarem", "pga"}, default="squarem"
        ``"squarem"``: EM accelerated by SQUAREM (Varadhan and Roland, 2008),
        the fastest to the same estimate: on CIFAR outputs 1.2-1.8x fewer
        passes than plain EM without shift or under MAP and up to 3.6x fewer
        when the optimum is on the boundary (classes absent from the batch),
        where EM crawls. ``"em"``: plain EM (``n_iter`` counts its steps,
        one pass each). ``"pga"``: projected gradient ascent on the simplex
        (Sulc and Matas, 2019) with Barzilai-Borwein steps and Euclidean
        projection. All reach the same optimum.
    dirichlet_alpha : float, default=2.0
        Concentration ``a >= 1`` of the symmetric Dirichlet hyper-prior, for
        ``method="map"`` only: ``a - 1`` pseudo-examples per class (the default
        is add-one smoothing); ``a = 1`` gives the MLE.
    init : array-like of shape (n_classes,), default=None
        Starting point; ``None`` starts from ``train_prior``. For ``"em"`` and
        ``"squarem"`` a class started at 0 stays at 0 (a warning says when the
        batch would raise it: the estimate is then not the MLE).
    max_iter : int, default=10_000
        Largest number of iterations.
    tol : float, default=1e-6
        Stop when one EM step would move the estimate by at most ``tol`` in L1
        norm (a scale-free criterion: the prior lies on the simplex) and, for
        the MLE, no class below ``tol`` has a likelihood gradient pulling it up
        (see the module's notes).
    verbose : int, default=0
        Print (to stdout, as scikit-learn's estimators do) a line when the
        solver stops (``verbose >= 1``) and one per pass over the batch, with
        the objective (``verbose >= 2``).

    Returns
    -------
    result : PriorEstimate
        ``result.prior`` the estimate, with ``n_iter``, ``n_passes``,
        ``converged`` and ``objective``.

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` iterations did not meet ``tol``.
    UserWarning
        When the estimate is degenerate: a batch with fewer rows than classes
        (a single row's MLE is a vertex), or classes driven to ~0 (below 1% of
        their training prior) that hold over half of the batch's posterior
        mass, the mark of a weak or miscalibrated model on a batch without
        shift (see :func:`label_shift_test`).

    Notes
    -----
    A class absent from the batch has MLE 0: the optimum lies on the boundary
    of the simplex and plain EM approaches it geometrically, slowly (hundreds
    to thousands of iterations); SQUAREM, the default, or ``method="map"``
    (whose estimate stays positive). A batch of one sample has as MLE the
    vertex of the class maximising ``p_k / q_k``. Classes with ``q_k = 0`` are
    refused: ``p_k / q_k`` is undefined.

    References
    ----------
    .. [1] Saerens, Latinne and Decaestecker, "Adjusting the outputs of a
       classifier to new a priori probabilities: a simple procedure", Neural
       Computation 14(1), 2002.
    .. [2] Sulc and Matas, "Improving CNN classifiers by estimating test-time
       priors", ICCV Workshops 2019. arXiv:1805.08235.
    .. [3] Varadhan and Roland, "Simple and globally convergent methods for
       accelerating the convergence of any EM algorithm", Scandinavian Journal
       of Statistics 35(2), 2008.
    .. [4] Duchi, Shalev-Shwartz, Singer and Chandra, "Efficient projections
       onto the l1-ball for learning in high dimensions", ICML 2008.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import estimate_test_prior
    >>> proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]])
    >>> result = estimate_test_prior(proba, [0.5, 0.5], solver="squarem", tol=1e-10)
    >>> np.round(result.prior, 2)
    array([0.77, 0.23])
    >>> result.converged
    True
    """
    proba = check_proba(proba)
    n_classes = proba.shape[1]
    train = check_train_prior(train_prior, n_classes)
    concentration = float(dirichlet_alpha) - 1.0 if method == "map" else 0.0
    start = train if init is None else check_prior(init, n_classes, name="init")
    if concentration > 0 and np.any(start == 0):
        start = (start + 1e-3 / n_classes) / (1 + 1e-3)  # MAP lives in the interior
    elif np.any(start == 0):
        # EM keeps a class at 0 where it starts; a row with all its mass there
        # has likelihood 0 at every such prior, and the estimate is undefined.
        stranded = stranded_rows(proba, start > 0)
        if len(stranded):
            raise ValueError(
                f"init is 0 on every class that row {stranded[0]} of proba "
                f"gives probability to ({len(stranded)} such rows), so the "
                f"likelihood is 0 there and no solver can start from it. Pass "
                f"an init that is positive on every class, or init=None (the "
                f"training prior)."
            )

    prior, n_iter, n_passes, converged, objective = solve_prior(
        proba, train, concentration, start, solver, max_iter, tol, verbose
    )
    pinned = solver != "pga" and concentration == 0 and np.any(start == 0)
    # (classes that init holds at 0 against the data: that warning says why,
    # not the one of a degenerate estimate)
    if not (pinned and warn_if_pinned(proba, train, tol, start, prior)):
        warn_if_degenerate(proba, train, prior, method)
    if not converged:
        advice = (
            "Increase max_iter or tol"
            if solver == "squarem"
            else "Increase max_iter, use solver='squarem' (fast when classes are "
            "absent from the batch)"
        )
        advice += ", or use method='map'" if method == "mle" else ""
        warn_user(
            f"The {method.upper()} prior estimate ({solver}) did not converge in "
            f"max_iter={max_iter} iterations to tol={tol:g}. {advice}.",
            ConvergenceWarning,
        )
    return PriorEstimate(
        prior=like(prior, proba),
        n_iter=int(n_iter),
        n_passes=int(n_passes),
        converged=bool(converged),
        objective=objective,
        fit=Fit(proba, train, prior, concentration, solver, max_iter, tol),
    )


@validate_params(
    {
        **constraints(proba="array", y="optional_array", source="source_prior"),
        **constraints(sample_weight="optional_array"),
    },
    prefer_skip_nested_validation=True,
)
def estimate_source_prior(proba, y=None, *, source="labels", sample_weight=None):
    r"""The prior that held-out posteriors are calibrated to (the source prior).

    ``source="labels"``: the weighted label frequencies
    :math:`q_k = \sum_n w_n [y_n = k] / \sum_n w_n`. ``source="mean_posterior"``:
    the weighted mean posterior :math:`q_k = \sum_n w_n p_{nk} / \sum_n w_n`,
    the prior that a calibrated model's posteriors are consistent with; with a
    calibrated model it is the better source prior for EM (Alexandari et al.,
    2020), since class-wise miscalibration moves it along with the posteriors.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Posteriors on the data the source prior is taken from.
    y : array-like of shape (n_samples,), default=None
        The true classes as column indices of ``proba``; needed by
        ``source="labels"``.
    source : {"labels", "mean_posterior"}, default="labels"
        Which estimate.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights; ``None`` means 1.

    Returns
    -------
    prior : ndarray of shape (n_classes,)
        Sums to one; in the namespace, on the device and in the float dtype
        of ``proba``.

    References
    ----------
    .. [1] Alexandari, Kundaje and Shrikumar, "Maximum likelihood with
       bias-corrected calibration is hard-to-beat at label shift adaptation",
       ICML 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import estimate_source_prior
    >>> proba = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8]])
    >>> estimate_source_prior(proba, source="mean_posterior").round(3)
    array([0.567, 0.433])
    >>> estimate_source_prior(proba, [0, 1, 1]).round(3)
    array([0.333, 0.667])
    """
    xp, is_numpy = get_namespace(proba)
    proba = check_proba(proba)
    n_samples, n_classes = proba.shape
    weights = check_sample_weight(sample_weight, n_samples, like=proba)
    if source == "labels":
        if y is None:
            raise ValueError(
                "source='labels' counts the labels y, but y is None. Pass y, or "
                "source='mean_posterior'."
            )
        y = check_class_indices(y, n_samples, n_classes, name="proba", like=proba)
        counts = weighted_counts(y, weights, n_classes)
    elif is_numpy:
        # (summed in float64 without a float64 copy of the input)
        counts = np.einsum("i,ik->k", weights, proba, dtype=np.float64)
    else:
        rows = xp.astype(proba, weights.dtype)
        (counts,) = to_host(xp, xp.sum(weights[:, None] * rows, axis=0))
    return like(counts / counts.sum(), proba)
