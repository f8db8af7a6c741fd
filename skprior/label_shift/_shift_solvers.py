"""The numerics of the test of no label shift, on validated arrays.

The statistic compares the mean posterior ``m`` of a batch of ``n`` rows with
the mean posterior ``mu`` expected without shift, class by class in units of
the posteriors' variance: ``T = n_eff sum_k (m_k - mu_k)**2 / v_k`` (the
standardised sum of squares of high-dimensional two-sample tests, Srivastava
and Du, 2008; Chen and Qin, 2010), with ``v`` pooled from the reference rows,
the batch rows and the gap between their means (the variance under "no
shift"). Without shift ``T`` has mean ``tr(R)`` and variance ``2 tr(R**2)``,
``R`` the posteriors' correlation matrix, and its tail is that of the scaled
chi-squared with those two moments (Satterthwaite, 1946). Both rest on the
central limit theorem for the mean of the rows, which holds whether or not the
model is calibrated.

Why not Hotelling's ``T**2``: its inverse covariance, estimated from rows
that are few against the classes (``K = 100`` and 1,000 rows), divides by
directions of near-zero estimated variance, and the F tail, which assumes
Gaussian rows, then declares a quarter to all of the batches without shift
shifted (CIFAR-100 random halves, synthetic ``K = 300``); the pooled variances
of one class at a time are estimated well from a few hundred rows, and on
CIFAR-10 the power is the same (``benchmarks/bench_label_shift.py --level``).
``label_shift_test`` (``_policy.py``) takes Hotelling's ``T**2`` where the
reference holds at least 50 rows per class (up to 1,000 classes): there its F
tail holds and it finds more shifts against a weak model's correlated
posteriors; this statistic serves below that and in the stream's monitor.
"""

import numpy as np

from skprior._utils import _kernels
from skprior._utils._array_api import (
    blocks,
    device_of,
    from_host,
    get_namespace,
    per_row,
    to_host,
    work_dtype,
)
from skprior._utils._constraints import check_level

# Classes whose variance is below this fraction of the largest are not tested:
# constant columns (a class the model never gives mass to) carry no noise to
# divide by.
_RANK_RTOL = 1e-9
# Nor those whose spread is below this fraction of their posteriors' size:
# rounding noise (a reference of identical rows has variances of 1e-30, not 0,
# which the relative test alone took for spread: dof 3, p = 1e-12).
_NOISE_RTOL = 1e-10


def varying(variance, size):
    """The classes whose ``variance`` is a spread, a boolean mask.

    Not ~0 against the largest variance, nor against the rounding of
    posteriors of ``size`` (their mean, or a bound on it).
    """
    largest = max(np.max(variance, initial=0.0), 0.0)
    return (variance > _RANK_RTOL * largest) & (
        variance > (_NOISE_RTOL * np.abs(size)) ** 2
    )


# At most this many reference rows, evenly spaced, estimate tr(R**2): the Gram
# matrix of r rows costs r**2 K (a few seconds at K = 10,000 for 463 rows).
_GRAM_ELEMENTS = 2**31
_GRAM_ROWS = 2000


def weighted_moments(proba, weights=None):
    """Mean, column variances and effective size of the rows of ``proba``.

    In float64, accumulated over row blocks on the device of ``proba`` (on
    NumPy blocks of about 2**17 entries: no float64 copy of a float32 input);
    only ``K``-vectors cross to the host. The variances are weighted means of
    ``(p_ik - m_k)**2`` (divided by the total weight, the maximum-likelihood
    form); the effective size is Kish's ``(sum w)**2 / sum w**2`` (``n``
    without weights).
    """
    xp, is_numpy = get_namespace(proba)
    n_rows, n_classes = proba.shape
    weights = np.ones(n_rows) if weights is None else weights
    total = float(weights.sum())
    on = device_of(proba)
    dtype = work_dtype(xp, on)
    w = (weights if is_numpy else per_row(xp, weights, proba, dtype))[:, None]
    parts = (
        _kernels.row_blocks(n_rows, n_classes, elements=2**17)
        if is_numpy
        else blocks(xp, n_rows, n_classes)
    )

    def summed(function):
        pieces = [
            function(w[part, :], xp.astype(proba[part, :], dtype)) for part in parts
        ]
        return np.asarray(to_host(xp, sum(pieces[1:], pieces[0]))[0], np.float64)

    mean = summed(lambda w, rows: xp.sum(w * rows, axis=0)) / total
    centre = from_host(xp, mean, on, dtype)
    variance = summed(lambda w, rows: xp.sum(w * (rows - centre) ** 2, axis=0))
    return mean, variance / total, total**2 / float(weights @ weights)


def correlation_moments(proba, mean, variance, weights=None):
    """``(tr(R), tr(R**2))`` of the correlation matrix ``R`` of the rows' classes.

    ``tr(R)`` is the number of classes whose variance is not ~0;
    ``tr(R**2) = E[(y_i' y_j)**2]`` for two independent standardised rows, so
    it is estimated without the ``K x K`` matrix by the mean of the squared
    off-diagonal entries of the Gram matrix of at most ``_GRAM_ROWS`` evenly
    spaced rows (a U-statistic: the diagonal, ``|y_i|**4``, would add
    ``tr(R)**2 / r``, more than ``tr(R**2)`` itself when the classes are many
    against the rows).
    """
    xp, _ = get_namespace(proba)
    n_rows, n_classes = proba.shape
    keep = varying(variance, mean)
    cap = int(min(_GRAM_ROWS, max(100, (_GRAM_ELEMENTS / n_classes) ** 0.5)))
    take = np.unique(np.linspace(0, n_rows - 1, min(n_rows, cap)).astype(np.intp))
    rows = xp.take(proba, from_host(xp, take, device_of(proba)), axis=0)
    rows = np.asarray(to_host(xp, rows)[0], np.float64)
    scaled = (rows[:, keep] - mean[keep]) / np.sqrt(variance[keep])
    w = np.ones(len(take)) if weights is None else np.asarray(weights)[take]
    gram = (scaled @ scaled.T) ** 2 * w[:, None] * w[None, :]
    pairs = w.sum() ** 2 - w @ w
    n_kept = float(keep.sum())
    if pairs <= 0:  # (one row: no pair; the classes taken as independent)
        return n_kept, n_kept
    return n_kept, max((gram.sum() - np.trace(gram)) / pairs, 1.0)


def shift_pvalue(statistic, trace, trace_squared):
    """Upper tail of ``T`` by the scaled chi-squared of its null mean and variance.

    ``T ~ a chi2(b)`` with ``a b = tr(R)`` and ``2 a**2 b = 2 tr(R**2)``;
    ``nan`` when there is nothing to test (no class varies).
    """
    from scipy.stats import chi2

    if trace == 0:
        return float("nan")
    scale = trace_squared / trace
    return float(chi2.sf(statistic / scale, trace / scale))


class NoShiftReference:
    """What a batch is compared with: the mean posterior and variances without shift.

    ``expected`` and ``variance`` are the mean posterior and the class-wise
    variances of the posteriors without shift, ``n_reference`` the effective
    size of the sample behind ``expected`` (``inf`` for a given prior), and
    ``trace``, ``trace_squared`` the :func:`correlation_moments` that give the
    tail.
    """

    def __init__(self, expected, variance, n_reference, trace, trace_squared):
        self.expected = expected
        self.variance = variance
        self.n_reference = n_reference
        self.trace = trace
        self.trace_squared = trace_squared
        self.dof = int(trace)

    @classmethod
    def from_proba(cls, proba, weights=None, expected=None):
        """From posteriors without shift.

        ``expected``: a prior to use instead of their mean, which is then
        taken as known (``n_reference = inf``).
        """
        mean, variance, effective = weighted_moments(proba, weights)
        moments = correlation_moments(proba, mean, variance, weights)
        if expected is not None:
            mean, effective = expected, np.inf
        return cls(mean, variance, effective, *moments)

    def test(self, batch_mean, n_rows, batch_variance=None):
        """``(statistic, pvalue, dof)`` of a batch of mean posterior ``batch_mean``.

        ``n_rows`` is the batch's size and ``batch_variance`` its class-wise
        variances, pooled with the reference's (None: the reference's alone).
        """
        m, n = self.n_reference, n_rows
        gap = batch_mean - self.expected
        if np.isinf(m):
            n_eff, pooled = n, self.variance
        else:
            n_eff = 1.0 / (1.0 / n + 1.0 / m)
            own = self.variance if batch_variance is None else batch_variance
            # Under "no shift" both samples share one variance: their own
            # spreads, and the gap between their means (a batch holding rows
            # the reference lacks, a rare class, is measured by them too).
            pooled = (m * self.variance + n * own) / (m + n) + n_eff * gap**2 / (m + n)
        keep = varying(pooled, np.maximum(self.expected, batch_mean))
        statistic = float(n_eff * np.sum(gap[keep] ** 2 / pooled[keep]))
        pvalue = shift_pvalue(statistic, self.trace, self.trace_squared)
        return statistic, pvalue, self.dof


class StreamShiftMonitor:
    """Whether a stream has left its no-shift reference, tested batch by batch.

    Two sequences of tests of :class:`NoShiftReference`: the mean posterior of
    every row so far, after each batch once the stream holds ``stream_rows``
    rows (a shift present from the start), and that of the latest *segment*,
    consecutive batches of at least ``segment_rows`` rows, each time a segment
    fills (a shift that begins after a calm stretch, which the mean of every
    row dilutes). The ``j``-th test of each sequence runs at
    ``level * 3 / (pi^2 j^2)``: the levels of both sum to ``level``, so that a
    stream without shift is ever declared shifted with probability at most
    ``level`` (a union bound) -- as far as the tail of each test holds. That
    tail rests on the central limit theorem, which a mean of a few rows of a
    weak many-class model does not reach, hence the floors: at least
    ``max(50, n_classes)`` rows for the first test of the stream and
    ``max(100, 10 * n_classes)`` per segment (LeNet-5 / CIFAR-100, level 0.01:
    a test after every row declared 17 of 40 streams without shift shifted,
    50-row segments 3 of 10).

    When a test finds the stream shifted, the rows before the latest segment
    say where the shift began: if they are not found shifted themselves (at
    ``level``, one test), it began in the segment (``"recent"``); else, or if
    there are none, it was there before (``"stream"``). State: a few vectors
    of ``n_classes``.

    With ``bet_share`` ``s > 0``, a third test covers the stream's start,
    where the first two cannot run (fewer rows than their floors) or are
    weak (a many-class model's mean posterior moves little): a test by
    betting (Shafer and Vovk; Ramdas et al., 2023). Each row ``x`` of the
    first ``segment_rows`` is bet on with a prior ``pi`` chosen before its
    batch (the tracker's prediction, :meth:`bet`): its factor ``sum_k
    p_k(x) pi_k / mu_k``, ``mu`` the reference's mean posterior, has mean 1
    without shift (whatever ``pi``, calibrated model or not: the mean of
    ``p`` is ``mu``), so the product of the factors is a nonnegative
    martingale and, by Ville's inequality, ever reaches ``1 / (s level)``
    with probability at most ``s level``; no central limit theorem is
    needed, so it runs from the first row. The two sequences then run at
    ``(1 - s)`` times their levels, which keeps the union bound at
    ``level``. Under a shift to ``pi`` the log-factor's mean is the
    Kullback-Leibler gain of ``pi`` over ``mu`` on the rows' likelihood,
    which the tracker's prediction approaches. ``mu`` is the reference's
    sample mean, taken as exact: bets that learn its sampling error can grow
    on a long stream without shift, hence they stop after the first segment
    (LeNet-5 / CIFAR-100, 10-row batches, a 5,000-row reference: bets at the
    whole level, 0.01, reached it on 2 of 10 streams without shift, after
    2,790 and 4,930 rows, none within the first segment's 1,000;
    ``docs/results_stream.md``, section 0.00).
    """

    bet_share = 0.0  # (and no bets for a monitor pickled before them)
    log_wealth = 0.0

    def __init__(
        self, reference, n_classes, segment_rows=None, stream_rows=None, bet_share=0.0
    ):
        self.reference = reference
        self.segment_rows = (
            max(100, 10 * n_classes) if segment_rows is None else segment_rows
        )
        self.stream_rows = max(50, n_classes) if stream_rows is None else stream_rows
        self.bet_share = bet_share
        self.log_wealth = 0.0  # (log of the bets' product so far)
        self._stream = _TestedRows(n_classes)
        self._segment = _TestedRows(n_classes)

    @property
    def betting(self):
        """Whether the bets go on: a share of the level and the first segment."""
        return self.bet_share > 0 and self._stream.n < self.segment_rows

    def bet(self, prior):
        """The factors ``prior / mu`` of the next batch's bets, None when done.

        Classes the reference never gives mass to are not bet on (factor 0:
        the bets' mean is then at most 1, which keeps the bound).
        """
        if not self.betting:
            return None
        # (a prediction off the simplex, as a tracker of unclipped
        # estimates may give, is bet on as its nearest prior there)
        prior = np.maximum(prior, 0.0)
        expected = self.reference.expected
        factors = np.divide(
            prior, expected, out=np.zeros_like(expected), where=expected > 0
        )
        return factors / prior.sum()

    def _pvalue(self, posterior_sum, n):
        return self.reference.test(posterior_sum / n, n)[1]

    def _rejects(self, rows, level):
        """The next test of the sequence ``rows`` belongs to, on its rows."""
        rows.tests += 1
        pvalue = self._pvalue(rows.posterior_sum, rows.n)
        return pvalue <= (1 - self.bet_share) * level * 3 / (np.pi * rows.tests) ** 2

    def update(self, batch_sum, n_rows, level, log_bet=None):
        """Add a batch (its posterior column sums and row count).

        ``log_bet``: the sum over the batch's rows of the log of their bets'
        factors (see class; None when :meth:`bet` gave none). Returns
        ``"recent"`` when the stream is found shifted since the latest
        segment began, ``"stream"`` when it is found shifted from earlier,
        else None.
        """
        check_level(level, optional=True)  # (set_params may change it mid-stream)
        if log_bet is not None:
            self.log_wealth += log_bet
        bets_won = log_bet is not None and self.log_wealth >= -np.log(
            self.bet_share * level
        )
        self._stream.add(batch_sum, n_rows)
        self._segment.add(batch_sum, n_rows)
        full = self._segment.n >= self.segment_rows
        stream = self._stream.n >= self.stream_rows and self._rejects(
            self._stream, level
        )
        segment = full and self._rejects(self._segment, level)
        found = "stream" if bets_won else None  # (the bets start with the stream)
        if (stream or segment) and not bets_won:
            before = self._stream.n - self._segment.n
            calm = before > 0 and (
                self._pvalue(
                    self._stream.posterior_sum - self._segment.posterior_sum, before
                )
                > level
            )
            found = "recent" if calm else "stream"
        if full:
            self._segment.empty()
        return found


class _TestedRows:
    """Posterior sum and count of some rows, and how often they were tested."""

    def __init__(self, n_classes):
        self.posterior_sum = np.zeros(n_classes)
        self.n = 0
        self.tests = 0

    def add(self, batch_sum, n_rows):
        self.posterior_sum += batch_sum
        self.n += n_rows

    def empty(self):
        """Forget the rows; the count of tests goes on."""
        self.posterior_sum[:] = 0
        self.n = 0
