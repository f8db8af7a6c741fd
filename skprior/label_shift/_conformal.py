"""Prediction sets that keep their coverage under label shift (split conformal).

:func:`conformal_prediction_set` builds split-conformal sets from a labelled
calibration set and weights the calibration scores by the ratio of the test
prior to the calibration prior, as Podkopaev and Ramdas (2021) do; or takes a
quantile per class (the class-conditional, "Mondrian" sets), or none of that
(plain split conformal). The scores are computed where the arrays live; the
``K`` thresholds, from the ``n`` calibration scores, on the host (a sort).
:class:`PriorAdaptedClassifier` calls the same pieces in ``predict_set``.
"""

from numbers import Real

import numpy as np
from scipy.special import ndtri
from sklearn.utils import check_random_state

from skprior._utils._array_api import (
    device_of,
    get_namespace,
    is_dask,
    per_row,
    to_host,
)
from skprior._utils._constraints import constraints
from skprior._utils._sklearn_compat import Interval, StrOptions, validate_params
from skprior._utils._validation import (
    check_prior,
    check_proba,
    check_train_prior,
    warn_user,
)
from skprior._utils._validation_labels import (
    check_class_indices,
    check_sample_weight,
    label_frequencies,
)

SET_SCORES = ("lac", "aps", "aps_randomized")
SET_MODES = ("weighted", "class", "split")
SET_CONSTRAINTS = {
    "alpha": [Interval(Real, 0, 1, closed="neither")],
    "score": [StrOptions(set(SET_SCORES))],
    "mode": [StrOptions(set(SET_MODES))],
    "delta": [Interval(Real, 0, 1, closed="neither"), None],
}
DEFAULT_SET_DELTA = 0.15
# The quantile's level is met "up to rounding": a cumulative weight that equals
# (1 - alpha) times the total in exact arithmetic must not miss it by an ulp.
_LEVEL_SLACK = 1e-12


@validate_params(
    {
        **constraints(proba_cal="array", y="array", proba_test="array"),
        **SET_CONSTRAINTS,
        **constraints(test_prior="optional_prior", train_prior="optional_prior"),
        **constraints(sample_weight="optional_array"),
        "random_state": ["random_state", np.random.Generator],
    },
    prefer_skip_nested_validation=True,
)
def conformal_prediction_set(
    proba_cal,
    y,
    proba_test,
    *,
    alpha=0.1,
    score="lac",
    mode="weighted",
    test_prior=None,
    train_prior=None,
    delta=DEFAULT_SET_DELTA,
    sample_weight=None,
    random_state=None,
):
    r"""Split-conformal prediction sets, valid under label shift.

    A score :math:`s(x, y)` (large: ``y`` is unlikely for ``x``) is computed
    on labelled calibration rows, :math:`V_i = s(x_i, y_i)`. A test row gets
    the set :math:`C(x) = \{y : s(x, y) \le t_y\}`, with :math:`t_y` the
    :math:`1-\alpha` quantile of the calibration scores weighted by
    :math:`w(y_i)`, and of :math:`+\infty` weighted by the test row's own
    weight :math:`w(y)` for its candidate label (Podkopaev and Ramdas, 2021):

    .. math::

        t_y = \min\Big\{V_{(k)} : \sum_{j \le k} w(Y_{(j)})
        \ge (1 - \alpha) \Big(\sum_{i=1}^n w(Y_i) + w(y)\Big)\Big\},

    :math:`+\infty` when no calibration score reaches it (the label is in
    every set). Under label shift :math:`w(y) = \pi_y / q_y`, the test prior
    over the calibration prior, and then
    :math:`P(Y \in C(X)) \ge 1 - \alpha` on the test distribution.

    Parameters
    ----------
    proba_cal : array-like of shape (n_calibration, n_classes)
        Posteriors of labelled calibration rows, drawn as the training data
        (before the shift); rows sum to one.
    y : array-like of shape (n_calibration,)
        The true classes of the calibration rows, as column indices
        ``0..n_classes-1`` of ``proba_cal``.
    proba_test : array-like of shape (n_samples, n_classes)
        Posteriors of the rows to predict, from the same model (not adapted
        to the test prior: the score must be the calibration rows' one).
    alpha : float in (0, 1), default=0.1
        The miscoverage: the sets hold the true class with probability at
        least ``1 - alpha``.
    score : {"lac", "aps", "aps_randomized"}, default="lac"
        ``"lac"``: :math:`1 - p_y` (Sadinle et al., 2019), the smallest sets
        on average. ``"aps"``: the mass of the classes ranked at or above
        ``y`` (by decreasing probability, ties by column), adaptive sets
        (Romano et al., 2020) that grow where the model is unsure.
        ``"aps_randomized"``: the mass ranked above ``y`` plus :math:`U p_y`,
        :math:`U` uniform per row, whose coverage is nearer ``1 - alpha``.
    mode : {"weighted", "class", "split"}, default="weighted"
        ``"weighted"``: the weights :math:`w(y) = \pi_y / q_y` of
        ``test_prior`` and ``train_prior``. ``"class"``: the quantile of each
        class's own calibration scores (:math:`w = [Y_i = y]`): coverage
        ``1 - alpha`` for every class, whatever the prior, at the price of
        larger sets. ``"split"``: every weight 1, plain split conformal,
        valid without shift only.
    test_prior : array-like of shape (n_classes,), default=None
        The test prior :math:`\pi` (``mode="weighted"``, where it is
        required), e.g. ``estimate_test_prior(proba_test, train_prior).prior``.
    train_prior : array-like of shape (n_classes,), default=None
        The calibration rows' class prior :math:`q`; None counts it from
        ``y`` (with ``sample_weight``), which makes the weights sum to
        ``n``.
    delta : float in (0, 1) or None, default=0.15
        The risk of a training-conditional level. The guarantee above is an
        average over draws of the calibration rows; for given rows, a
        batch's coverage misses ``1 - alpha`` by their sampling error, large
        where a batch is made of a few classes with few calibration rows
        each. With ``delta`` the level is raised by :math:`z_{1-\delta}`
        standard errors of the weighted share of calibration scores below
        the quantile (:math:`\sum_k \sum_{i \in k} w_i^2 F_k (1 - F_k) /
        (\sum_i w_i)^2` under the labels, :math:`F_k` the class's share), so
        that the sets cover ``1 - alpha`` with probability about
        ``1 - delta`` over the calibration rows (normal approximation), for
        every test prior. In ``"class"`` mode with integer weights (the
        default ones included) each class takes instead the exact rank of
        Vovk (2012): the smallest ``j`` with :math:`P(\mathrm{Bin}(n_k, 1 -
        \alpha) \le j - 1) \ge 1 - \delta`, for which the guarantee holds
        exactly. ``None``: the marginal sets of the papers. The
        default was chosen on ``benchmarks/bench_prediction_sets.py``
        (0.1 also held the coverage, with sets up to 1.26x plain split
        conformal's on CIFAR-100).
    sample_weight : array-like of shape (n_calibration,), default=None
        Frequency weights of the calibration rows (a row of weight 2 counts
        as two rows); they multiply :math:`w(Y_i)`.
    random_state : int, RandomState, numpy.random.Generator or None, default=None
        The :math:`U` of ``"aps_randomized"`` (one per calibration and test
        row, drawn on the host: the same sets in every namespace).

    Returns
    -------
    sets : array of bool of shape (n_samples, n_classes)
        ``sets[i, k]`` is True where class ``k`` is in the set of row ``i``;
        in the namespace and on the device of ``proba_test`` (a lazy array
        for Dask).

    See Also
    --------
    estimate_test_prior : The test prior of an unlabelled batch.
    PriorAdaptedClassifier.predict_set : The sets of a wrapped model.

    Notes
    -----
    The test row's weight depends on its candidate label only, so the
    quantile is computed once per class: one sort of the calibration scores
    and ``K`` searches. With the prior of the calibration labels the weights
    of the calibration rows sum to ``n``, and the weighted distribution of
    the scores is the mixture :math:`\sum_k \pi_k F_k` of the classes'
    empirical distributions: the sets hold :math:`1 - \alpha` for the test
    prior, where plain split conformal holds it for the calibration prior
    only (a batch rich in hard classes is under-covered). With an estimated
    :math:`\pi`, the coverage is that of the estimate: a batch's prior error
    moves the coverage by about :math:`\sum_k (\pi_k - \hat\pi_k)
    F_k(t)`. A class with too few calibration rows for ``alpha`` (fewer than
    about :math:`(1 - \alpha)/\alpha` in ``"class"`` mode with
    ``delta=None``; 19 at ``alpha=0.1`` with the default ``delta``) gets
    :math:`t = +\infty` and is in every set; a warning names it.

    References
    ----------
    .. [1] Podkopaev and Ramdas, "Distribution-free uncertainty quantification
       for classification under label shift", UAI 2021.
    .. [2] Tibshirani, Barber, Candes and Ramdas, "Conformal prediction under
       covariate shift", NeurIPS 2019.
    .. [3] Sadinle, Lei and Wasserman, "Least ambiguous set-valued classifiers
       with bounded error levels", JASA 114(525), 2019.
    .. [4] Romano, Sesia and Candes, "Classification with valid and adaptive
       coverage", NeurIPS 2020.
    .. [5] Vovk, "Conditional validity of inductive conformal predictors",
       ACML 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import conformal_prediction_set
    >>> p1 = np.repeat([0.1, 0.3, 0.5, 0.7, 0.9], 10)
    >>> proba_cal = np.column_stack([1 - p1, p1])
    >>> y = (np.tile(np.arange(10), 5) < 10 * p1).astype(int)  # calibrated
    >>> proba_test = np.array([[0.9, 0.1], [0.6, 0.4], [0.4, 0.6]])
    >>> conformal_prediction_set(proba_cal, y, proba_test, test_prior=[0.8, 0.2])
    array([[ True, False],
           [ True,  True],
           [ True,  True]])
    """
    proba_cal = check_proba(proba_cal, name="proba_cal")
    n_cal, n_classes = proba_cal.shape
    # (lazy: for Dask the test side is one map, checked as it is computed)
    proba_test = check_proba(proba_test, name="proba_test", lazy=True)
    get_namespace(proba_cal, proba_test)  # (refuses a mix of libraries)
    if proba_test.shape[1] != n_classes:
        raise ValueError(
            f"proba_test has {proba_test.shape[1]} columns but proba_cal has "
            f"{n_classes}; both must be posteriors of the same classes."
        )
    y = check_class_indices(y, n_cal, n_classes, name="proba_cal")
    weights = check_sample_weight(sample_weight, n_cal)
    ratio = prior_ratio(mode, test_prior, train_prior, y, weights, n_classes)
    rng = None
    if score == "aps_randomized":  # (a Generator too, as the intervals take)
        generator = isinstance(random_state, np.random.Generator)
        rng = random_state if generator else check_random_state(random_state)
    u_cal = None if rng is None else rng.random(n_cal)
    u_test = None if rng is None else rng.random(proba_test.shape[0])
    cal_scores = true_class_scores(proba_cal, y, score, u_cal)
    thresholds = set_thresholds(
        cal_scores, y, n_classes, alpha, mode, weights, ratio, delta
    )
    return sets_below(proba_test, thresholds, score, u_test)


def prior_ratio(mode, test_prior, train_prior, y, weights, n_classes):
    """The weights ``w(k) = pi_k / q_k`` of ``mode="weighted"`` (None otherwise).

    ``q`` defaults to the weighted frequencies of ``y``; a class absent from
    the calibration rows (or of weight 0 there) but in the test prior gets
    ``w = inf`` whatever ``q`` (it is in every set: nothing measures its
    scores).
    """
    if mode != "weighted":
        if test_prior is not None:
            warn_user(
                f"test_prior is used only by mode='weighted'; mode={mode!r} "
                f"ignores it. Pass mode='weighted' to weight by the prior ratio."
            )
        return None
    if test_prior is None:
        raise ValueError(
            "mode='weighted' needs test_prior=: the class prior of the test "
            "rows, e.g. estimate_test_prior(proba_test, train_prior).prior. "
            "Or pass mode='class' (no prior needed) or mode='split' (no shift)."
        )
    test = check_prior(test_prior, n_classes, name="test_prior")
    calibration = label_frequencies(y, n_classes, weights)
    given = (
        calibration
        if train_prior is None
        else check_train_prior(train_prior, n_classes)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(test > 0, test / given, 0.0)
    return np.where((calibration == 0) & (test > 0), np.inf, ratio)


def score_matrix(proba, score, u=None):
    """``s(x_i, k)`` for every row and class, in the namespace of ``proba``.

    ``"lac"``: ``1 - p_ik``. ``"aps"``: the cumulative mass of the row sorted
    by decreasing probability (ties by column, a stable sort), at ``k``'s
    rank; ``u`` (device, one per row): ``"aps_randomized"``, the mass ranked
    before ``k`` plus ``u_i p_ik``.
    """
    xp, is_numpy = get_namespace(proba)
    if score == "lac":
        return 1.0 - proba
    if is_dask(xp):  # (row-wise: a map over the row chunks, rows whole)
        import dask.array as da

        proba = proba.rechunk({1: -1})
        if u is None:
            return proba.map_blocks(score_matrix, score, dtype=proba.dtype)
        return da.map_blocks(
            lambda block, u_block: score_matrix(block, score, u_block[:, 0]),
            proba,
            u.rechunk((proba.chunks[0],))[:, None],
            dtype=proba.dtype,
        )
    if is_numpy:
        order = np.argsort(-proba, axis=1, kind="stable")
        ranked = np.take_along_axis(proba, order, axis=1)
    else:
        order = xp.argsort(proba, axis=1, descending=True, stable=True)
        ranked = xp.take_along_axis(proba, order, axis=1)
    mass = xp.cumulative_sum(ranked, axis=1)
    # (over the row's own total: the last rank scores exactly 1 in every row,
    # where the sums of rows that sum to one within a rounding gave 1 - ulp
    # in some and 1 in others, and a class set by the largest score left
    # the sets of rows that rank it last)
    total = mass[:, -1:]
    mass = mass / total
    if u is not None:
        mass = mass - (1.0 - xp.astype(u, proba.dtype))[:, None] * (ranked / total)
    if is_numpy:
        out = np.empty_like(mass)
        np.put_along_axis(out, order, mass, axis=1)
        return out
    return xp.take_along_axis(mass, xp.argsort(order, axis=1), axis=1)


def true_class_scores(proba, y, score, u=None):
    """``s(x_i, y_i)`` of the calibration rows, a host float64 vector.

    Taken from :func:`score_matrix` (one definition of the score for the
    calibration and the test rows). ``y`` and ``u`` are host vectors.
    """
    xp, is_numpy = get_namespace(proba)
    if u is not None:
        u = per_row(xp, u, proba, dtype=proba.dtype)
    scores = score_matrix(proba, score, u)
    if is_numpy:
        return np.asarray(scores[np.arange(len(y)), y], dtype=np.float64)
    classes = xp.arange(proba.shape[1], device=device_of(proba))
    hit = per_row(xp, y, proba)[:, None] == classes[None, :]
    (values,) = to_host(xp, xp.sum(xp.where(hit, scores, 0.0), axis=1))
    return np.asarray(values, dtype=np.float64)


def _quantiles(sorted_scores, cumulative, totals, alpha):
    """The smallest score whose cumulative weight reaches ``(1 - alpha) totals``.

    ``alpha <= 0`` (a level no finite score reaches) gives ``inf``.
    """
    needed = (1.0 - alpha) * totals * (1.0 - _LEVEL_SLACK)
    index = np.searchsorted(cumulative, needed, side="left")
    found = (index < len(sorted_scores)) & (alpha > 0)
    if not len(sorted_scores):
        return np.full(np.shape(found), np.inf)
    values = sorted_scores[np.minimum(index, len(sorted_scores) - 1)]
    return np.where(found, values, np.inf)


def _spread(scores, y, row_weights, threshold, n_classes, counts):
    r"""The standard error of the weighted share of scores below ``threshold``.

    Given the labels, the indicators :math:`[V_i \le t]` of class :math:`k`
    are Bernoulli(:math:`F_k(t)`): the share :math:`\sum_i w_i [V_i \le t] /
    \sum_i w_i` has variance :math:`\sum_k \sum_{i \in k} w_i^2 F_k(1 - F_k)
    / (\sum_i w_i)^2`, with :math:`F_k` estimated by the class's weighted
    share plus half a row (Jeffreys' ``(b + 1/2) / (n + 1)``, each row at
    the class's mean weight): the plain share is 1 whenever the quantile is
    a class's largest score, and its variance 0 then gave no raise at all
    (9 rows of a class at alpha 0.1: coverage >= 0.9 over calibration sets
    with probability 0.61, not 1 - delta; 10 to 23 rows: in every set).
    ``counts`` are the rows' frequency weights (``sample_weight``): a row of
    weight ``w`` and count ``c`` is ``c`` draws of weight ``w / c``, as ``c``
    repeated rows are (its variance term ``w**2 / c``, not ``w**2``).
    """
    total = np.bincount(y, weights=row_weights, minlength=n_classes)
    below = np.bincount(
        y, weights=row_weights * (scores <= threshold), minlength=n_classes
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        per_draw = np.where(counts > 0, row_weights / counts, 0.0)
    squares = np.bincount(y, weights=row_weights * per_draw, minlength=n_classes)
    rows = np.bincount(y, weights=counts * (row_weights > 0), minlength=n_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = np.where(rows > 0, total / rows, 0.0) / 2  # (half a mean row)
        share = np.where(total > 0, (below + half) / (total + 2 * half), 0.0)
    variance = np.sum(squares * share * (1.0 - share))
    return np.sqrt(variance) / total.sum() if total.sum() > 0 else 0.0


def _one_quantile(scores, y, row_weights, own, alpha, z, n_classes, counts):
    """The thresholds of the candidates' own weights ``own`` (a K-vector or 1).

    With ``z``, the level is first raised by ``z`` standard errors of the
    weighted share at the plain quantile (the training-conditional level;
    ``counts``: the rows' frequency weights).
    """
    order = np.argsort(scores, kind="stable")
    ranked, cumulative = scores[order], np.cumsum(row_weights[order])
    total = cumulative[-1] if len(cumulative) else 0.0
    if z is not None and np.isfinite(total) and total > 0:
        plain = _quantiles(ranked, cumulative, total, alpha)
        spread = _spread(scores, y, row_weights, plain, n_classes, counts)
        alpha = alpha - z * spread
    with np.errstate(invalid="ignore"):  # (inf weights: inf totals)
        return _quantiles(ranked, cumulative, total + own, alpha)


def _exact_class_quantile(ranked, counts, alpha, delta):
    r"""A class's training-conditional threshold, exact (Vovk, 2012).

    ``ranked`` are the class's scores in increasing order (as
    :func:`set_thresholds` sorts them), ``counts`` their integer frequency
    weights (a row of weight 2 counts as two rows), ``n`` their sum. For
    ``n`` exchangeable scores and a new one, the coverage of the ``j``-th
    smallest score, :math:`F(V_{(j)})`, is Beta(``j, n + 1 - j``) for
    continuous scores (at least that with ties), so that

    .. math::

        P\big(F(V_{(j)}) \ge 1 - \alpha\big)
        \ge P\big(\mathrm{Bin}(n, 1 - \alpha) \le j - 1\big).

    The threshold is :math:`V_{(j)}` for the smallest ``j`` that makes this at
    least ``1 - delta`` (the binomial quantile), and at least the marginal
    rank :math:`\lceil (1 - \alpha)(n + 1) \rceil`, so that the sets hold
    the marginal ones; ``inf`` (the class in every set) when no ``j <= n``
    does: below 19 rows at ``alpha=0.1``, ``delta=0.15``.
    """
    from scipy.stats import binom  # (scipy.stats is slow to import: on use)

    cumulative = np.cumsum(counts)
    n = int(round(cumulative[-1])) if len(cumulative) else 0
    rank = int(binom.ppf(1.0 - delta, n, 1.0 - alpha)) + 1 if n else 1
    rank = max(rank, int(np.ceil((1.0 - alpha) * (n + 1) * (1.0 - _LEVEL_SLACK))))
    if rank > n:
        return np.inf
    # (the first row whose cumulative count reaches the rank)
    return ranked[np.searchsorted(cumulative, rank - 0.5)]


def set_thresholds(scores, y, n_classes, alpha, mode, weights, ratio=None, delta=None):
    """The ``K`` thresholds ``t_y`` (host float64; ``inf``: always in the set).

    ``scores`` are the calibration rows' (host), ``y`` their classes,
    ``weights`` their frequency weights, ``ratio`` the prior ratio of
    ``mode="weighted"`` and ``delta`` the training-conditional risk (None:
    the marginal sets).
    """
    z = None if delta is None else float(ndtri(1.0 - delta))
    if mode == "class":
        # Each class's own weighted quantile, the test row weighing 1 (its
        # candidate is the class): one sort by class, then a slice per class.
        order = np.lexsort((scores, y))
        bounds = np.searchsorted(y[order], np.arange(n_classes + 1))
        thresholds = np.empty(n_classes)
        for k in range(n_classes):
            rows = order[bounds[k] : bounds[k + 1]]
            # (integer frequency weights, the default ones included: the exact
            # binomial rank; other weights: the normal approximation)
            if z is not None and np.all(weights[rows] == np.round(weights[rows])):
                thresholds[k] = _exact_class_quantile(
                    scores[rows], weights[rows], alpha, delta
                )
                continue
            thresholds[k] = _one_quantile(
                scores[rows],
                y[rows],
                weights[rows],
                1.0,
                alpha,
                z,
                n_classes,
                weights[rows],
            )
    else:
        own = np.ones(n_classes) if ratio is None else ratio
        row_weights = weights
        if ratio is not None:  # (a row of weight 0 weighs 0, also at ratio inf)
            row_weights = weights * np.where(weights > 0, ratio[y], 0.0)
        thresholds = _one_quantile(
            scores, y, row_weights, own, alpha, z, n_classes, weights
        )
    always = np.flatnonzero(np.isinf(thresholds))
    if always.size and n_classes > 1:  # (one class is every set anyway)
        warn_user(
            f"Classes {always[:10].tolist()} are in every prediction set: the "
            f"calibration rows of "
            f"{'each class' if mode == 'class' else 'the class'} are too few "
            f"(or weigh too little against the test row's own weight) to "
            f"reach the {1 - alpha:g} quantile. Add labelled calibration rows "
            f"of these classes, or raise alpha."
        )
    return thresholds


def sets_below(proba, thresholds, score, u=None):
    """``s(x_i, k) <= t_k``: the indicator, in the namespace of ``proba``.

    The host thresholds are cast to the dtype of the scores: exact, as they
    are scores of that dtype themselves (or ``inf``).
    """
    xp, is_numpy = get_namespace(proba)
    if u is not None:
        u = per_row(xp, u, proba, dtype=proba.dtype)
    scores = score_matrix(proba, score, u)
    if is_numpy:
        return scores <= thresholds.astype(scores.dtype)[None, :]
    limits = thresholds.astype(np.float32 if scores.dtype == xp.float32 else float)
    if not is_dask(xp):
        limits = xp.asarray(limits, device=device_of(proba), dtype=scores.dtype)
    return scores <= limits[None, :]


class SetCalibration:
    """What ``PriorAdaptedClassifier.predict_set`` keeps of its ``fit`` rows.

    The score of each row's true class, the classes and the weights: host
    ``n``-vectors, not the ``n x K`` posteriors.
    """

    def __init__(self, proba, y, score, sample_weight=None):
        self.score = score
        self.scores = true_class_scores(proba, y, score)
        self.y = y
        self.weights = check_sample_weight(sample_weight, len(y))

    def prior(self, n_classes):
        """The weighted class frequencies of the calibration rows (host)."""
        return label_frequencies(self.y, n_classes, self.weights)

    def sets(self, proba, alpha, score, mode, delta, test_prior=None):
        """The sets of the checked posteriors ``proba`` (``test_prior``: host)."""
        if score != self.score:
            raise ValueError(
                f"set_score was changed from {self.score!r} to {score!r} after "
                f"fit; call fit again (fit scores the calibration rows)."
            )
        if isinstance(alpha, bool) or not isinstance(alpha, Real) or not 0 < alpha < 1:
            raise ValueError(
                f"alpha must be a float in (0, 1), the miscoverage of the sets "
                f"(0.1: 90% coverage), got {alpha!r}."
            )
        n_classes = proba.shape[1]
        ratio = prior_ratio(mode, test_prior, None, self.y, self.weights, n_classes)
        thresholds = set_thresholds(
            self.scores, self.y, n_classes, alpha, mode, self.weights, ratio, delta
        )
        return sets_below(proba, thresholds, self.score)
