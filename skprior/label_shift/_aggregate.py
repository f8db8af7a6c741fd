r"""A tracker of a drifting prior that is never much worse than not adapting.

:class:`AggregatingPrior` mixes forgetting MAP estimates of the prior at
several horizons and the training prior itself ("do not adapt") by
exponential weights on each one's predictive likelihood of the next batch,
which needs no labels.
"""

from numbers import Integral, Real

import numpy as np

from skprior._utils._array_api import get_namespace, logsumexp, to_host
from skprior._utils._validation import (
    check_proba,
    check_train_prior,
    prior_length,
)
from skprior._utils._validation_arrays import on_host
from skprior.label_shift._solvers import like
from skprior.label_shift._stream import refuse_one_class

DEFAULT_HORIZONS = (50, 100, 200, 400, 800, 1600, 3200)


class AggregatingPrior:
    r"""Exponential weights over forgetting MAP priors and the training prior.

    The experts, for a model with training prior :math:`q` and posteriors
    :math:`p_{ik}` (calibrated to :math:`q`):

    - :math:`\pi^{(0)} = q`, "do not adapt";
    - for each horizon :math:`H_e` (rows), a MAP estimate with exponential
      forgetting: discounted responsibility sums :math:`S_e` and row count
      :math:`N_e`, and a Dirichlet hyper-prior of :math:`c` pseudo-rows
      centred on :math:`q` (:math:`c` = ``concentration`` x K),

      .. math::

          S_e \leftarrow d_e S_e + \sum_{i \in B_t} r_i(\pi^{(e)}), \quad
          N_e \leftarrow d_e N_e + b_t, \quad
          \pi^{(e)} = \frac{S_e + c\,q}{N_e + c},

      with :math:`d_e = e^{-b_t / H_e}` for a batch :math:`B_t` of
      :math:`b_t` rows and the E-step responsibilities
      :math:`r_{ik}(\pi) = p_{ik}\pi_k/q_k \,/\, \sum_l p_{il}\pi_l/q_l`:
      on-line EM (Cappé and Moulines, 2009) whose statistics forget at the
      rate of a window of :math:`H_e` rows; the responsibilities of the batch
      and of the ``recent_rows`` rows before it are recomputed ``em_steps``
      times at every update (EM on them, each row at its weight
      :math:`e^{-a/H_e}` for its age :math:`a`, the older rows' sums held),
      and a row's are frozen once it is older. On a weak model a row's
      responsibilities depend much on the prior they were computed under,
      so the first rows' (computed near :math:`q`) would hold the estimate
      back (``docs/results_stream.md``, section 0.0000). Where the posteriors
      carry less than ``min_information`` of the labels' information on the
      prior, the mean of :math:`(\sum_k p_{ik}^2 / q_k - 1) / (K - 1)` over
      the rows seen (``information_``; 0 for :math:`p_i = q`, 1 for
      one-hot posteriors of classes seen in the proportions :math:`q`,
      :math:`(\sum_k \pi_k / q_k - 1)/(K - 1)` for those of a prior
      :math:`\pi`), only the batch's are recomputed: there EM to
      convergence fits the unlabelled likelihood's noise, and the frozen
      responsibilities, computed nearer :math:`q`, shrink towards it.
      The pseudo-rows keep every class off the simplex's boundary (no class
      is driven to ~0, as the MLE of a few rows does) and pull a noisy
      estimate towards :math:`q`;
    - for each trend horizon (``trend_horizons``, among the horizons), the
      forecast of a prior that drifts linearly: per class, the discounted
      least-squares line through the rows' responsibilities against their
      age :math:`a` (rows since their batch; each row weighted
      :math:`e^{-a/H_e}`, as in :math:`S_e`; Brown's discounted regression,
      1963), taken one batch ahead, clipped at 0 and renormalised, then with
      the same pseudo-rows. A forgetting (or fixed-window) estimate lags a
      linear drift by about its horizon; the line removes that lag at the
      cost of a larger variance, so only the longer horizons get one. It
      shares :math:`S_e` and :math:`N_e` and adds the discounted moments
      :math:`\sum w a`, :math:`\sum w a^2` (2 floats) and :math:`\sum w a\,r`
      (K floats), each updated in :math:`O(K)` when every row gets
      :math:`b_t` rows older.

    Each expert's loss on a batch is the negative log-likelihood of its
    *unlabelled* rows under the prior it predicted before seeing them,
    relative to not adapting,

    .. math:: \ell_e(B_t) = -\sum_{i \in B_t} \log \sum_k \pi^{(e)}_k p_{ik}/q_k

    (0 for :math:`q`; the objective the MLE of the prior maximises), plus a
    margin of :math:`\lambda` nats per row for each expert that moves
    (:math:`\ell_e + \lambda b_t`, ``margin``): a moved prior must predict
    the unlabelled rows better than :math:`q` by more than that before it
    takes weight, as the unlabelled likelihood of a weak, class-wise
    miscalibrated model can favour a moved prior on a stream that is not
    shifted. The weights follow exponential weights with fixed share (Vovk,
    1990;
    Herbster and Warmuth, 1998; Cesa-Bianchi and Lugosi, 2006, Ch. 3 and 5):
    :math:`w_e \leftarrow w_e e^{-\eta \ell_e}`, normalised, then
    :math:`w \leftarrow (1 - \alpha) w + \alpha / M`. The experts are
    scored as they are; the mixture :math:`\bar\pi = \sum_e w_e \pi^{(e)}`
    of the bound below. The prediction ``prior_`` mixes them with
    :math:`c'` = ``predictive_concentration`` x K pseudo-rows each instead of
    :math:`c`, :math:`\hat\pi = \sum_e w_e \tilde\pi^{(e)}` with
    :math:`\tilde\pi^{(e)} = (S_e + c'q) / (N_e + c')` (and likewise for
    the trend experts): for :math:`c' > c`, each expert moved towards
    :math:`q` by a share :math:`(c' - c) / (N_e + c')` of the way, which
    fades as the expert's rows add up. The posterior of a class
    estimated near 0 from few rows is then not cut to ~0 when the class is
    rare rather than absent: a labelled log-loss (not the unlabelled one
    the weights see) that the short horizons can otherwise make worse than
    the unadapted model's (``docs/results_stream.md``, section 0.00000).
    The loss is
    :math:`1/b`-exp-concave in :math:`\pi` (the geometric mean of linear
    functions is concave), so with :math:`\eta \le 1/b` and :math:`\alpha = 0`
    the mixture's cumulative loss is at most that of the best expert plus
    :math:`b \log M` (plus :math:`\lambda` per row against an expert that
    moves): on the unlabelled likelihood, never more than
    :math:`b \log M` nats worse than not adapting, whatever the stream (with
    fixed share, the bound holds on every stretch, against the best expert
    there, at a cost of about :math:`\log(1/\alpha)` per switch). Larger
    :math:`\eta` switches faster (``learning_rate``); the defaults
    (:math:`\eta = 1` per row, :math:`\alpha = 0.01`) are chosen on the
    benchmark for that, and with batches of more than one row they carry
    no such bound (``docs/user_guide/streams.rst`` shows a stream 5 times
    over it).

    State: about :math:`(2H + 3T + 2) K` floats for :math:`H` forgetting
    and :math:`T` trend horizons (:math:`25K` with the defaults: each
    horizon's sums, held and frozen, the trends' moments and experts),
    whatever the stream's length; plus the ``recent_rows`` rows' ratios
    :math:`p/q` and ages ((K + 1) x ``recent_rows`` floats) while
    ``information_`` is at least ``min_information``; cost per update
    :math:`O((b + R)KM)` per EM step
    for :math:`R` = ``recent_rows``. The batch crosses to the host
    once (one transfer, one ``dask.compute`` for Dask): ``b x K`` numbers,
    where the state lives; ``prior_`` is handed back in the batch's
    namespace.

    Parameters
    ----------
    train_prior : array-like of shape (n_classes,)
        The prior ``q`` the posteriors are calibrated to; strictly positive.
    horizons : sequence of float, default=(50, 100, 200, 400, 800, 1600, 3200)
        Effective windows :math:`H_e` (rows) of the forgetting experts, each
        at least 1.
    concentration : float, default=0.3
        Pseudo-rows per class of the hyper-prior centred on ``q`` (in all
        :math:`c` = ``concentration`` x K); > 0.
    learning_rate : float, default=1.0
        :math:`\eta`, per row of log-likelihood.
    margin : float, default=0.01
        :math:`\lambda`, nats per row added to the loss of every expert but
        :math:`q`; >= 0. Chosen on ``benchmarks/bench_stream.py``: without
        shift on LeNet-5 / CIFAR-100 it takes the tracker's log-loss from
        +0.019 to +0.002 over the unadapted model's, at no cost on the
        shifted streams tried; 0.03 lost two thirds of the log-loss gain
        under sinusoidal drift there (``docs/results_stream.md``, 0.1).
    share : float, default=0.01
        The fixed share :math:`\alpha` in [0, 1): the weight an expert keeps
        however badly it did, so that it can take over when the stream
        changes.
    em_steps : int, default=3
        EM steps on each batch (each one more pass over the batch).
    trend_horizons : sequence of float, default=None
        The horizons (among ``horizons``) that also get a trend expert;
        ``None``: those of at least 800 rows; ``()``: none. Added for slow
        monotone drift, where a forgetting estimate lags (the CIFAR-10
        streams of ``docs/results_stream.md``, section 0.0).

    recent_rows : int, default=200
        :math:`R`, the rows before the batch whose E-step is redone at every
        update; 0: each row's in its own update only (plain on-line EM).
        Chosen on ``benchmarks/bench_stream_gate.py`` (``docs/results_stream.md``,
        section 0.0000).
    min_information : float, default=0.1
        In [0, 1): the share of information (``information_``) below which
        the recent rows' E-step is not redone.
    predictive_concentration : float or None, default=1.0
        :math:`c'` / K, pseudo-rows per class of ``q`` in each expert of the
        prediction ``prior_`` (the experts' EM and scores keep
        ``concentration``); > 0; ``None``: ``concentration``. Chosen on
        ``benchmarks/bench_stream.py`` (``docs/results_stream.md``, section
        0.00000): it kept every 10-row stream's log-loss below the unadapted
        model's at a cost of at most 0.14 points of accuracy.

    Attributes
    ----------
    prior_ : ndarray of shape (n_classes,)
        The prediction for the next batch (``train_prior`` before any), in
        the array namespace, on the device and in the float dtype of the last
        batch.
    weights_ : ndarray of shape (n_experts,)
        Weights of the experts: the training prior first, then one per
        horizon, then one per trend horizon.
    experts_ : ndarray of shape (n_experts, n_classes)
        The experts' priors, in the same order, as scored (with
        ``concentration``); ``prior_`` mixes them with
        ``predictive_concentration`` pseudo-rows instead.
    n_seen_ : int
        Number of rows given.
    information_ : float
        The posteriors' share of the labels' information on the prior, over
        the rows given (0 before any).

    See Also
    --------
    CumulativePrior : The MLE from every row, for a stationary stream.
    FLHFTL : Follow-the-leading-history on per-batch estimates.

    Notes
    -----
    Chosen as the stream default of :class:`~skprior.PriorAdaptedClassifier`
    on ``benchmarks/bench_stream.py`` (see ``docs/user_guide/streams.rst``):
    it is above the best fixed-window MAP on most CIFAR streams and keeps
    the unadapted model's log-loss where adapting does not pay (a weak model,
    no shift). The defaults were kept after a search on the streams where a
    window was ahead (``docs/results_stream.md``, section 0.1): learning
    rates 2 and 4, other horizons, concentrations 0.1-1 and 6 EM steps:
    none closed that gap without a larger loss elsewhere. The trend experts
    did, on the slow monotone drift of the strong CIFAR-10 models, where a
    400-row window led by 0.05 points (section 0.0): +0.06 points there
    (ten seeds), nothing beyond noise elsewhere at 10 rows; at 50 rows they
    cost up to 0.1 points on a weak model's monotone drift.

    References
    ----------
    .. [1] Vovk, "Aggregating strategies", COLT 1990.
    .. [2] Herbster and Warmuth, "Tracking the best expert", Machine
       Learning 32, 1998.
    .. [3] Cesa-Bianchi and Lugosi, "Prediction, Learning, and Games",
       Cambridge University Press, 2006.
    .. [4] Cappé and Moulines, "On-line expectation-maximization algorithm
       for latent data models", Journal of the Royal Statistical Society B
       71(3), 2009.
    .. [5] Wu, Guo, Liu, Zhou, Feng and Wen, "Online adaptation to label
       distribution shift", NeurIPS 2021.
    .. [6] Bai, Zhang, Zhao, Sugiyama and Zhou, "Adapting to online label
       shift with provable guarantees", NeurIPS 2022.
    .. [7] Baby, Garg, Yen, Balakrishnan, Lipton and Wang, "Online label
       shift: optimal dynamic regret meets practical algorithms", NeurIPS
       2023.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import AggregatingPrior
    >>> rng = np.random.default_rng(0)
    >>> def batch(share):  # 10 rows; exact posteriors under a 50/50 prior
    ...     labels = rng.random(10) < share  # class 0: x ~ N(1, 1), else N(-1, 1)
    ...     x = rng.normal(np.where(labels, 1.0, -1.0), 1.0)
    ...     p0 = 1 / (1 + np.exp(-2 * x))
    ...     return np.column_stack([p0, 1 - p0])
    >>> tracker = AggregatingPrior([0.5, 0.5])
    >>> for _ in range(60):
    ...     tracker = tracker.update(batch(0.9))
    >>> np.round(tracker.prior_, 1)
    array([0.9, 0.1])
    >>> for _ in range(60):  # the prior switches
    ...     tracker = tracker.update(batch(0.2))
    >>> np.round(tracker.prior_, 1)
    array([0.2, 0.8])
    """

    # (a tracker pickled before the recent rows: on-line EM, as then; before
    # the predictive pseudo-rows: the experts' own, as then)
    recent_rows, min_information, _recent, _chi_square = 0, 0.1, None, 0.0
    predictive_concentration = None

    def __init__(
        self,
        train_prior,
        *,
        horizons=DEFAULT_HORIZONS,
        concentration=0.3,
        learning_rate=1.0,
        margin=0.01,
        share=0.01,
        em_steps=3,
        trend_horizons=None,
        recent_rows=200,
        min_information=0.1,
        predictive_concentration=1.0,
    ):
        given = on_host(train_prior)
        self.train_prior = check_train_prior(given, prior_length(given, "train_prior"))
        refuse_one_class(self.train_prior, type(self).__name__)
        self.horizons = _check_horizons(horizons)
        self.trend_horizons, self._trend_of = _check_trend_horizons(
            trend_horizons, self.horizons
        )
        # (c K pseudo-rows: beyond about 1e300 they overflow the MAP's division)
        largest = 1e300 / len(self.train_prior)
        self.concentration = _check_number(
            concentration, "concentration", 0.0, upper=largest
        )
        # (beyond 1e100 times a batch's log-likelihood, the weights overflow)
        self.learning_rate = _check_number(
            learning_rate, "learning_rate", 0.0, upper=1e100
        )
        self.margin = _check_number(margin, "margin", 0.0, closed=True)
        self.share = _check_number(share, "share", 0.0, upper=1.0, closed=True)
        if isinstance(em_steps, bool) or not isinstance(em_steps, Integral):
            raise TypeError(f"em_steps must be an integer, got {em_steps!r}.")
        if em_steps < 1:
            raise ValueError(f"em_steps must be at least 1, got {em_steps}.")
        self.em_steps = int(em_steps)
        if isinstance(recent_rows, bool) or not isinstance(recent_rows, Integral):
            raise TypeError(f"recent_rows must be an integer, got {recent_rows!r}.")
        if recent_rows < 0:
            raise ValueError(f"recent_rows must be >= 0, got {recent_rows}.")
        self.recent_rows = int(recent_rows)
        self.min_information = _check_number(
            min_information, "min_information", 0.0, upper=1.0, closed=True
        )
        if predictive_concentration is not None:
            predictive_concentration = _check_number(
                predictive_concentration, "predictive_concentration", 0.0, largest
            )
        self.predictive_concentration = predictive_concentration
        n_classes, n_trends = len(self.train_prior), len(self._trend_of)
        n_experts = len(self.horizons) + 1 + n_trends
        self.n_seen_ = 0
        self._sums = np.zeros((len(self.horizons), n_classes))
        self._counts = np.zeros(len(self.horizons))
        # (the trend experts' discounted moments of the rows' ages: sum of
        # w age and w age^2 over rows, and of w age r over responsibilities;
        # the zeroth moments are the forgetting experts' counts and sums)
        self._age_moments = np.zeros((2, n_trends))
        self._age_sums = np.zeros((n_trends, n_classes))
        self._last_rows = 1
        self._chi_square = 0.0  # (sum over rows of sum_k p_k^2 / q_k)
        self._init_recent()
        self._trends = self._trend_experts()  # (kept: they change with update only)
        self._log_weights = np.full(n_experts, -np.log(n_experts))
        self.prior_ = like(self.train_prior, train_prior)

    @property
    def experts_(self):
        return np.vstack([self._forgetting_experts(), self._trends])

    def _forgetting_experts(self, concentration=None):
        """The training prior, then the forgetting MAP priors (1 + H) x K.

        With ``concentration`` pseudo-rows per class (``self.concentration``
        by default).
        """
        if concentration is None:
            concentration = self.concentration
        q = self.train_prior
        return np.vstack([q, _map(self._counts, self._sums, q, concentration)])

    def _trend_experts(self):
        """The trend experts at ``concentration``, T x K."""
        return _map(*self._trend_sums(), self.train_prior, self.concentration)

    def _trend_sums(self):
        """The discounted local-linear forecasts for the next batch, as sums.

        Per class, the weighted least-squares line ``a + beta * age``
        through the rows' responsibilities (weight ``d^age`` per row, age in
        rows, 0 for the last batch), taken at age ``-b`` (the next batch, as
        large as the last); clipped at 0 and renormalised (the line sums to
        one, its values need not be >= 0). Returned as the counts ``N`` and
        the sums ``N f`` (T and T x K), which take the same pseudo-rows as
        the forgetting experts: ``(N f + c q) / (N + c)``. Without two
        distinct ages (one batch seen) the line is flat: the forgetting
        estimate.
        """
        n, s0 = self._counts[self._trend_of], self._sums[self._trend_of]
        (m1, m2), s1, b = self._age_moments, self._age_sums, self._last_rows
        # (level - b slope = (s0 (m2 + b m1) - s1 (m1 + b n)) / det, by the
        # normal equations; flat, s0 / n, where det is ~0: one age)
        det = n * m2 - m1**2
        sloped = det > 1e-9 * n * m2
        det = np.where(sloped, det, 1.0)
        on_s0 = np.where(sloped, (m2 + b * m1) / det, 1.0 / np.maximum(n, 1.0))
        on_s1 = np.where(sloped, (m1 + b * n) / det, 0.0)
        forecast = np.maximum(s0 * on_s0[:, None] - s1 * on_s1[:, None], 0.0)
        # (the line sums to one, so the clipped one to >= 1; 0 before any row)
        total = np.maximum(forecast.sum(axis=1), np.finfo(np.float64).tiny)
        return n, n[:, None] * forecast / total[:, None]

    @property
    def weights_(self):
        return np.exp(self._log_weights)

    def update(self, proba):
        """Score the experts on a batch, then add it to their estimates.

        Parameters
        ----------
        proba : array-like of shape (n_samples, n_classes)
            Posteriors of the batch under ``train_prior``; rows sum to one.

        Returns
        -------
        self : AggregatingPrior
            The tracker, with ``prior_`` its prediction for the next batch.
        """
        xp, _ = get_namespace(proba)
        proba = check_proba(proba, lazy=True)
        n_rows, n_classes = proba.shape
        if n_classes != len(self.train_prior):
            raise ValueError(
                f"proba has {n_classes} columns but train_prior has "
                f"{len(self.train_prior)} classes; give one column per class."
            )
        # (the batch crosses to the host once, as one dask.compute: b x K
        # numbers, as many as one pass over it reads; the state is there)
        (ratios,) = to_host(xp, proba)
        ratios = ratios.astype(np.float64) / self.train_prior
        if self._recent is None:  # (a tracker pickled before the recent rows)
            self._init_recent()
        experts = self.experts_
        log_likelihoods = _log_likelihoods(ratios, experts)
        log_likelihoods[1:] -= self.margin * n_rows
        log_weights = self._log_weights + self.learning_rate * log_likelihoods
        log_weights = log_weights - logsumexp(np, log_weights, axis=0)
        if self.share:
            # (fixed share: log((1 - a) w + a / M), from log w)
            log_weights = np.logaddexp(
                np.log1p(-self.share) + log_weights,
                np.log(self.share / log_weights.size),
            )
        self._log_weights = log_weights - logsumexp(np, log_weights, axis=0)
        decay = np.exp(-n_rows / self.horizons)
        self._age_rows(decay[self._trend_of], n_rows)
        self._counts = decay * self._counts + n_rows
        self._chi_square += float(np.sum((ratios * ratios) @ self.train_prior))
        self.n_seen_ += n_rows
        # (the rows whose E-step is done: the recent ones and this batch; the
        # older rows' sums are frozen and decay, as the counts do)
        frozen, frozen_ages = self._frozen
        trend_decay = decay[self._trend_of]
        frozen_ages = trend_decay[:, None] * (
            frozen_ages + n_rows * frozen[self._trend_of]
        )
        frozen = decay[:, None] * frozen
        rows = np.vstack([self._recent, ratios])
        ages = np.concatenate([self._recent_ages + n_rows, np.zeros(n_rows)])
        recent = self.recent_rows if self.information_ >= self.min_information else 0
        leaving = max(len(rows) - recent, 0)
        experts = experts[: len(self.horizons) + 1]
        for step in range(self.em_steps):
            # (EM steps on these rows, the frozen sums held: the first at the
            # estimates scored above, each further one at the last)
            if step:
                experts = self._forgetting_experts()
            out = self._responsibility_sums(experts, rows[:leaving], ages[:leaving])
            kept = self._responsibility_sums(experts, rows[leaving:], ages[leaving:])
            self._sums = frozen + out[0] + kept[0]
            self._age_sums = frozen_ages + out[1] + kept[1]
        # (the rows beyond the last recent_rows are frozen at the last step)
        self._frozen = (frozen + out[0], frozen_ages + out[1])
        self._recent, self._recent_ages = rows[leaving:], ages[leaving:]
        self._last_rows = n_rows
        # (the line once, at both the experts' and the prediction's pseudo-rows)
        trend_counts, trend_sums = self._trend_sums()
        q, c = self.train_prior, self.predictive_concentration
        c = self.concentration if c is None else c
        self._trends = _map(trend_counts, trend_sums, q, self.concentration)
        predicted = np.vstack(
            [self._forgetting_experts(c), _map(trend_counts, trend_sums, q, c)]
        )
        prior = self.weights_ @ predicted
        self.prior_ = like(prior / prior.sum(), proba)
        return self

    def _age_rows(self, decay, n_rows):
        """Every row seen gets ``n_rows`` older, then the moments decay.

        With ages ``a -> a + b``: ``sum w a^2 -> sum w a^2 + 2 b sum w a + b^2
        sum w``, ``sum w a -> sum w a + b sum w`` (the responsibilities' ``sum
        w a r`` likewise, in ``update``); then every weight times ``d``. The
        new batch, at age 0, adds to the zeroth moments only (the counts).
        """
        (m1, m2), n = self._age_moments, self._counts[self._trend_of]
        self._age_moments = decay * np.stack(
            [m1 + n_rows * n, m2 + 2 * n_rows * m1 + n_rows**2 * n]
        )

    @property
    def information_(self):
        """The share of the labels' information on the prior in the rows seen.

        ``(mean_i sum_k p_ik^2 / q_k - 1) / (K - 1)``: 0 for posteriors
        equal to ``q`` and before any row; 1 for one-hot posteriors of
        classes seen in the proportions ``q`` (not a share beyond that: one-hot
        rows of a class rarer in ``q`` than in the stream give more than 1).
        """
        k = len(self.train_prior)
        mean = self._chi_square / self.n_seen_ if self.n_seen_ else 1.0
        return max(mean - 1.0, 0.0) / max(k - 1, 1)

    def _init_recent(self):
        """No recent row; every sum frozen (and, unpickled, as it was)."""
        self._recent = np.zeros((0, len(self.train_prior)))
        self._recent_ages = np.zeros(0)
        self._frozen = (self._sums.copy(), self._age_sums.copy())

    def _responsibility_sums(self, experts, rows, ages):
        """The forgetting experts' responsibility sums over ``rows``.

        Each row weighted ``exp(-age / H_e)``: for each forgetting expert the
        sum of ``w r_i`` (H x K), and for each trend expert that of
        ``w age r_i`` (T x K), with ``r_i`` the E-step at ``experts``
        (the training prior first).
        """
        moved = experts[1:]
        weights = np.exp(-ages[:, None] / self.horizons) / _likelihoods(rows, moved)
        sums = moved * (rows.T @ weights).T
        trend = self._trend_of
        by_age = moved[trend] * (rows.T @ (weights[:, trend] * ages[:, None])).T
        return sums, by_age


def _map(counts, sums, q, concentration):
    """MAP priors from responsibility sums: ``(S + c q) / (N + c)``.

    ``counts`` N (E,), ``sums`` S (E x K); a Dirichlet hyper-prior of
    ``c = concentration x K`` pseudo-rows centred on ``q``.
    """
    c = concentration * q.size
    return (sums + c * q) / (counts + c)[:, None]


def _log_likelihoods(ratios, experts):
    """Each expert's log-likelihood ``sum_i log sum_k ratios_ik experts_ek``.

    ``ratios`` is ``p_ik / q_k`` (b x K), ``experts`` the priors (M x K).
    """
    return np.log(_likelihoods(ratios, experts)).sum(axis=0)


def _likelihoods(ratios, experts):
    # (a row of zeros where an expert has mass cannot come from a valid
    # posterior; the floor keeps a 0 underflowed in float64 finite)
    return np.maximum(ratios @ experts.T, np.finfo(np.float64).tiny)


def _check_horizons(horizons):
    values = np.asarray(horizons, dtype=float)
    if values.ndim != 1 or values.size == 0 or not np.all(values >= 1):
        raise ValueError(
            f"horizons must be a non-empty sequence of effective windows (rows), "
            f"each at least 1 and finite, got {horizons!r}."
        )
    if not np.all(np.isfinite(values)):
        raise ValueError(f"horizons must be finite, got {horizons!r}.")
    return values


def _check_trend_horizons(trend_horizons, horizons):
    """The trend horizons and their positions among ``horizons``."""
    if trend_horizons is None:
        trend_horizons = horizons[horizons >= 800]
    values = np.asarray(trend_horizons, dtype=float).reshape(-1)
    missing = values[~np.isin(values, horizons)]
    if missing.size or np.unique(values).size != values.size:
        raise ValueError(
            f"trend_horizons must be distinct values among horizons "
            f"{horizons.tolist()} (a trend expert shares the forgetting "
            f"expert's sums), got {trend_horizons!r}."
        )
    positions = [int(np.flatnonzero(horizons == h)[0]) for h in values]
    return values, np.array(positions, dtype=np.intp)


def _check_number(value, name, lower, upper=np.inf, closed=False):
    """A real in (lower, upper) (or [lower, upper) with ``closed``).

    A bool or a string is refused, as scikit-learn's parameter checks do
    (``float(True)`` and ``float("0.5")`` would take them silently).
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    value = float(value)
    above = value >= lower if closed else value > lower
    if not (above and value < upper and np.isfinite(value)):
        interval = f"{'[' if closed else '('}{lower:g}, {upper:g})"
        raise ValueError(f"{name} must be a finite number in {interval}, got {value}.")
    return value
