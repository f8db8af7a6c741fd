"""The stream of :class:`~skprior.PriorAdaptedClassifier`: its state and methods.

What ``update_prior`` keeps between batches: the tracker of the prior (or, for
BBSE and RLLS with ``online="cumulative"``, the counts of the predictions),
the monitor that says when the stream has left the ``fit`` data, and the
counters. The wrapper holds one :class:`StreamState` and builds a new one on
``reset_prior``; the state lives on the host (``K``-vectors), the batches in
their own namespace. :class:`OnlineMixin` gives the wrapper the methods
``update_prior``, ``predict_proba_online`` and ``reset_prior`` over it.
"""

import numpy as np
from scipy.special import expit
from sklearn.utils.validation import check_is_fitted

from skprior._utils._array_api import working_dtype_results
from skprior._utils._constraints import check_level
from skprior._utils._options import DEFAULT_BBSE_PROJECTION
from skprior._utils._validation import warn_user
from skprior._utils._validation_arrays import on_host
from skprior.label_shift._aggregate import AggregatingPrior
from skprior.label_shift._confusion import (
    bbse_from_frequencies,
    check_rlls_reg,
    rlls_from_frequencies,
)
from skprior.label_shift._shift_solvers import StreamShiftMonitor
from skprior.label_shift._solvers import like, predicted_counts, reweight, sums_and_bet
from skprior.label_shift._stream import FLHFTL, CumulativePrior, FollowTheHistory

# The share of shift_level the stream monitor's bets get, the rest going to
# its two sequences of tests (StreamShiftMonitor). Small, as the bets need
# log(1 / (share * level)) nats (6.9 at 0.1 and level 0.01, 5.7 at 1/3),
# while the tests' thresholds scale with 1 - share: at 1/3 two late shifts
# of benchmarks/bench_no_shift.py were found a batch later, at 0.1 none.
BET_SHARE = 0.1

# The prior odds of a shift behind the weight the stream's prediction gives
# the on-line estimate while the bets run (StreamState.weight): without
# shift that weight averages at most SHIFT_ODDS. Chosen on the stream
# benchmark (docs/results_stream.md, section 0.000): the largest of 0.1,
# 0.3 and 1 whose cost on short streams without shift stays within half
# the limits on every CIFAR output (LeNet-5 / CIFAR-10, 500 rows: -0.09
# accuracy points at 0.1, -0.11 at 0.3).
SHIFT_ODDS = 0.1


# The wrapper's settings that a stream reads (at its start or at each batch).
STREAM_SETTINGS = (
    "online",
    "online_budget",
    "online_learning_rate",
    "shift_level",
    "solver",
    "dirichlet_alpha",
    "max_iter",
    "tol",
)


def online_params(est):
    """The settings of the wrapper ``est`` that its stream's state keeps.

    ``online`` and the settings its tracker was built with: the budget and
    the estimator's settings of ``"cumulative"`` (not for BBSE and RLLS, whose
    stream counts predictions), the learning rate of ``"flh-ftl"``. Any other
    setting acts at the next batch, or not at all on the stream, and may
    change mid-stream (``online_budget`` under ``"aggregate"`` was refused).
    """
    if est.method == "known":  # (no tracker: the known prior)
        return {}
    params = {"online": est.online}
    if est.online == "cumulative" and est.method not in ("bbse", "rlls"):
        params.update(
            online_budget=est.online_budget,
            dirichlet_alpha=est.dirichlet_alpha if est.method == "map" else None,
            solver=est.solver,
            max_iter=est.max_iter,
            tol=est.tol,
        )
    elif est.online == "flh-ftl":
        params["online_learning_rate"] = est.online_learning_rate
    return params


class StreamState:
    """The on-line estimate of a wrapper's stream since ``fit`` or ``reset_prior``.

    ``prior`` is the estimate (host float64), ``n_seen`` the rows behind it
    and ``shifted`` whether the stream was found shifted from the ``fit``
    data. Built from the fitted wrapper ``est``, whose parameters it records
    (``params``) to refuse a later change.
    """

    shift_odds = 0.0  # (a state pickled before the weight: none, as then)

    def __init__(self, est):
        method, n_classes = est.method, est._n_classes()
        self.shift_odds = SHIFT_ODDS
        self.params = online_params(est)
        # (before a shift is found, the stream's prior is that of the fit
        # rows, as for a batch the test finds unshifted)
        self.start = est.test_prior_ if method == "known" else est._unshifted_prior()
        self.prior = self.start.copy()
        self.n_seen = 0
        self.shifted = method == "known" or est.shift_level is None
        self.counts = self.tracker = self.monitor = None
        if not self.shifted:
            self.monitor = StreamShiftMonitor(
                est._no_shift.reference, n_classes, bet_share=BET_SHARE
            )
        if method == "known" or n_classes < 2:  # (one class: its prior is 1)
            return
        confusion = method in ("bbse", "rlls")
        if est.online == "aggregate" and not confusion:
            self.tracker = AggregatingPrior(est.train_prior_)
        elif est.online in ("aggregate", "cumulative") and confusion:
            # (the aggregating tracker weighs the posteriors' likelihood, which
            # BBSE and RLLS are chosen not to trust: the counts of predictions)
            self.counts = np.zeros(n_classes)
        elif est.online == "cumulative":
            self.tracker = CumulativePrior(
                est.train_prior_,
                budget=est.online_budget,
                dirichlet_alpha=est.dirichlet_alpha if method == "map" else 1.0,
                solver=est.solver,
                max_iter=est.max_iter,
                tol=est.tol,
            )
        elif est.online == "fth":
            self.tracker = FollowTheHistory(self.start)
        else:
            self.tracker = FLHFTL(self.start, learning_rate=est.online_learning_rate)
        if method == "bbse" and est.online in ("fth", "flh-ftl"):
            # K x K, computed once per stream: each batch then costs a product.
            self.bbse_inverse = np.linalg.pinv(est.confusion_)

    def check_params(self, est):
        """Refuse the stream settings of ``est`` changed since the stream began."""
        now = online_params(est)
        # (a state pickled before the settings were named holds a tuple)
        before = self.params if isinstance(self.params, dict) else {}
        if before != now:
            changed = [
                key for key in {**before, **now} if before.get(key) != now.get(key)
            ]
            if before.get("online") != now.get("online"):  # (the rest follow it)
                changed = ["online"]
            raise ValueError(
                f"{', '.join(changed)} changed since the stream began (the "
                f"stream's tracker was built with them); call reset_prior() to "
                f"start a stream with the new settings."
            )

    @property
    def weight(self):
        r"""The weight :math:`\lambda` of ``prior`` in the stream's prediction.

        The prediction is :math:`\lambda \hat\pi + (1 - \lambda) q`
        (:meth:`predicted_prior`): 1 once the stream is found shifted; 0 when
        the bets of the test of no shift are over and it was not; while they
        run, the posterior probability of a shift,

        .. math:: \lambda = \frac{\rho W}{1 + \rho W},

        with :math:`\rho` the prior odds of a shift (``shift_odds``) and
        :math:`W` the bets' wealth: the product over the rows seen of
        :math:`\sum_k p_k \hat\pi_k / \mu_k`, the likelihood ratio of the
        rows under the priors the tracker predicted before each batch against
        the training prior (exactly so for posteriors calibrated to it, where
        :math:`\mu = q`; the mean posterior :math:`\mu` keeps the ratio's
        mean at 1 without shift for any model). So :math:`\lambda` is the
        posterior probability of "the stream follows the tracker" against
        "no shift", and the prediction their Bayesian model average: the two
        posteriors of a row averaged, each weighted by its hypothesis'
        likelihood of the row too, are Bayes' rule to the averaged prior.
        Without shift :math:`W` is a nonnegative martingale of mean 1, so
        :math:`E[\lambda] \le \rho E[W] = \rho` at every row: the
        tracker's noise gets at most that share on average. Under a shift
        :math:`W` grows exponentially and :math:`\lambda` nears 1 some rows
        before the test's threshold :math:`1 / (s\,\alpha)`, where the
        prediction would otherwise wait at :math:`q` (Ramdas et al., 2023,
        on wealth as evidence; ``docs/results_stream.md``, section 0.000).
        """
        if self.shifted:
            return 1.0
        if not self.shift_odds or self.monitor is None or not self.monitor.betting:
            return 0.0
        return float(expit(np.log(self.shift_odds) + self.monitor.log_wealth))

    def predicted_prior(self):
        """The prior the stream's prediction adjusts to (host float64)."""
        weight = self.weight
        if weight == 1.0:
            return self.prior
        if weight == 0.0:
            return self.start
        return weight * self.prior + (1.0 - weight) * self.start

    @working_dtype_results()  # (the stream's state stays float64)
    def update(self, est, proba):
        """Add the checked batch ``proba`` (any namespace) of the wrapper ``est``.

        Returns the cumulative tracker's warning (else None), for the caller
        to give once the wrapper's state is whole: raised as an error in the
        middle of the update, it left the batch counted in part.
        """
        n_rows = proba.shape[0]
        if proba.shape[1] == 1:  # (one class: its prior is 1, whatever the rows)
            self.n_seen += n_rows
            return None
        # What can raise on the wrapper's settings runs before the state
        # changes (a call that raised on set_params(shift_level=2.0) or
        # max_iter=-1 had counted the batch in n_seen and the shift test):
        # the level, and the drift trackers' estimate of the batch.
        check_level(est.shift_level, optional=True)
        if est.method == "rlls":
            check_rlls_reg(est.rlls_reg)
        drift = self.counts is None and isinstance(
            self.tracker, (FollowTheHistory, FLHFTL)
        )
        estimate = self._batch_estimate(est, proba) if drift else None
        self.n_seen += n_rows
        if not self.shifted and est.shift_level is None:
            self.shifted = True  # (set to None after the stream began)
        elif not self.shifted:
            # The test of predict_proba, on the stream so far and on its
            # latest segment: a stream without shift is not adapted (a
            # miscalibrated model's estimate drifts away from the prior with
            # no shift at all). Its bets at the stream's start are on the
            # tracker's prediction for this batch (made from the batches
            # before it), the prior it would adapt to.
            sums, log_bet = sums_and_bet(proba, self.monitor.bet(self.prior))
            found = self.monitor.update(sums, n_rows, est.shift_level, log_bet)
            if found == "recent":
                # The shift began after the rows before the latest segment,
                # which look calm: the estimate starts again from this batch,
                # as reset_prior() then update_prior(X) would, so that it does
                # not average the calm stretch in.
                self.__init__(est)
                self.n_seen = n_rows
            self.shifted = found is not None
        if self.counts is not None:
            self.counts = self.counts + predicted_counts(proba)
            self.prior = confusion_prior(est, self.counts)
        elif isinstance(self.tracker, AggregatingPrior):
            self.prior = on_host(self.tracker.update(proba).prior_)
        elif isinstance(self.tracker, CumulativePrior):
            message = self.tracker._update_quietly(proba)
            self.prior = on_host(self.tracker.prior_)
            # (predict_proba_online keeps its start, the fit rows' prior,
            # until the stream is found shifted, but for the weight of the
            # first rows: a noisy estimate is used at most at that weight,
            # rho W / (1 + rho W), 0.09 before any evidence. No
            # warnings.catch_warnings here: entered at each update, it
            # clears the registry that shows a warning once.)
            return message if self.shifted else None
        elif self.tracker is not None:
            self.prior = on_host(self.tracker.update(estimate).prior_)
        return None

    def _batch_estimate(self, est, proba):
        """``s_t`` of the drift trackers: the method's estimate of one batch.

        For ``"bbse"`` the unclipped, unbiased ``C_cond^{-1} mu_t``: with the
        joint confusion ``C = C_cond diag(q)``, ``C_cond^{-1} mu =
        q * (C^{-1} mu)``, which may be negative (averaging clipped estimates
        would be biased); for ``"rlls"`` the batch's RLLS estimate
        (regularised, so biased towards the held-out prior).
        """
        if est.method != "bbse":
            # (the estimate itself, never the test of no shift's q: the
            # trackers average the batches' estimates, and a batch too small
            # for the test to reject would pull them back to q)
            return est._batch_prior(proba)
        frequencies = predicted_counts(proba) / proba.shape[0]
        estimate = (self.bbse_inverse @ frequencies) * est.confusion_.sum(axis=0)
        # (it sums to one unless C is singular, where the minimum-norm solution
        # need not: then onto the plane of sum one, the nearest point there,
        # as the trackers take estimates of a prior only)
        total = estimate.sum()
        if abs(total - 1.0) > 1e-9:
            estimate = estimate + (1.0 - total) / estimate.size
        return estimate


def confusion_prior(est, counts):
    """BBSE or RLLS of the wrapper ``est`` from the counts of hard predictions."""
    total = counts.sum()
    frequencies = counts / total
    if est.method == "rlls":
        return rlls_from_frequencies(frequencies, est.confusion_, est.rlls_reg, total)
    return bbse_from_frequencies(frequencies, est.confusion_, DEFAULT_BBSE_PROJECTION)


class OnlineMixin:
    """The on-line methods of :class:`~skprior.PriorAdaptedClassifier`.

    ``update_prior`` feeds a batch of a stream to the wrapper's
    :class:`StreamState`, ``predict_proba_online`` adapts to its estimate and
    ``reset_prior`` starts it again; the wrapper provides ``_inner_proba``
    and ``_check_unchanged``.
    """

    def reset_prior(self):
        """Forget the stream: the on-line estimate goes back to its start.

        The start is ``test_prior_`` for ``method="known"`` and otherwise the
        prior of the ``fit`` data (``train_prior_``, or the label frequencies
        of ``y`` with a given ``train_prior``: see ``shift_level``).

        Returns
        -------
        self : object
            The estimator.
        """
        check_is_fitted(self, "train_prior_")
        # (a setting changed since fit is checked here, where the stream
        # starts: a misspelt online= built FLH-FTL, the last branch)
        self._validate_params()
        return self._start_stream()

    def _start_stream(self):
        """A new stream with the settings as they are (checked by the caller)."""
        if self._is_multilabel():
            # Each label's stream, with the wrapper's stream settings as they
            # are now (each label's copy kept those of fit).
            settings = {name: getattr(self, name) for name in STREAM_SETTINGS}
            for label in self.label_estimators_:
                label.set_params(**settings)._start_stream()
            return self
        self._check_unchanged()
        self._stream = StreamState(self)
        self._publish_stream()
        return self

    def _publish_stream(self, like_array=None):
        """The stream's public attributes (the prior in the batch's namespace)."""
        stream = self._stream
        # (float32 posteriors: a float32 prior)
        self.online_prior_ = like(stream.prior, like_array)
        self.n_seen_ = stream.n_seen
        self.online_shifted_ = stream.shifted
        self.online_weight_ = stream.weight

    def update_prior(self, X):
        """Add a batch of a stream to the on-line estimate of the test prior.

        The new ``online_prior_`` is built from every batch given since
        ``fit`` or :meth:`reset_prior`, ``X`` included, as ``online`` says:
        with ``"aggregate"`` (default), the mixture of forgetting estimates,
        their trend forecasts and the training prior
        (:class:`AggregatingPrior`); with
        ``"cumulative"``, the estimate from all their samples; with
        ``"fth"``/``"flh-ftl"``, the prediction for the next batch from the
        per-batch estimates. State and time per call do not grow with the
        stream. Until the stream is found shifted from the ``fit`` data
        (``online_shifted_``, the tests of ``shift_level`` on the rows seen),
        :meth:`predict_proba_online` gives the estimate the weight
        ``online_weight_`` only; a shift that began in the latest segment
        restarts the on-line estimate from ``X`` (as :meth:`reset_prior`
        would). :meth:`predict_proba` is not affected.

        Parameters
        ----------
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            The next unlabelled batch.

        Returns
        -------
        self : object
            The estimator, with ``online_prior_`` and ``n_seen_`` updated.
        """
        self._check_unchanged(stream=True)
        proba = self._inner_proba(X)
        message = self._stream.update(self, proba)
        self._publish_stream(proba)
        if message is not None:  # (once the state is whole)
            warn_user(message)
        return self

    def predict_proba_online(self, X):
        """Posteriors of ``X`` adjusted to the on-line prior ``online_prior_``.

        Unlike :meth:`predict_proba` the output of a row does not depend on the
        rest of ``X``; call :meth:`update_prior` first to include ``X`` in the
        estimate. As :meth:`predict_proba` gives a batch without shift the
        prior of the ``fit`` data, the prior is ``w * online_prior_ + (1 - w)
        * start``, ``start`` that prior (``train_prior_``, or the label
        frequencies of ``y`` with a given ``train_prior``: see
        ``shift_level``), with
        ``w = online_weight_``: 1 once the stream is found shifted
        (``online_shifted_``), 0 before but for the stream's first rows. A
        row sure of a class that ``online_prior_`` puts at exactly 0 keeps its
        own posterior.

        Parameters
        ----------
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            Data to predict.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Adjusted probabilities in the order of ``classes_``.
        """
        self._check_unchanged(stream=True)
        proba = self._inner_proba(X)
        stream = self._stream
        # (the published weight: shift_level set to None takes effect, as any
        # setting of the stream, at the next update_prior)
        prior = stream.predicted_prior()
        if np.any(prior == 0):
            # A tracker's exact zeros (FTH's projection, the cumulative MLE)
            # rule classes out that a new row may be sure of: its adjusted
            # mass is 0, and it would get the prior's mode. A trace of the
            # start keeps that row's own posterior; the others are unchanged.
            prior = (1.0 - 1e-12) * prior + 1e-12 * stream.start
        return reweight(proba, self.train_prior_, prior, dtype=proba.dtype)
