"""The stream monitor's test by betting (issue 26): the bets' factors against
their formula, their mean of one without shift, the share of the level they
take, and the pass that gives them on every namespace."""

import numpy as np
import pytest

from skprior.label_shift._shift_solvers import NoShiftReference, StreamShiftMonitor
from skprior.label_shift._solvers import sums_and_bet
from tests.label_shift.test_stream_aggregate import _namespaces


def test_bets_have_mean_one_on_the_reference_rows(cifar100):
    """Whatever the prior bet on, the factor sum_k p_k pi_k / mu_k averages to
    one over the reference's own rows (mu their mean): the martingale's
    identity, on a model's real posteriors."""
    proba = cifar100[0][:3000].astype(np.float64)
    reference = NoShiftReference.from_proba(proba)
    monitor = StreamShiftMonitor(reference, 100, bet_share=1 / 3)
    rng = np.random.default_rng(0)
    for prior in rng.dirichlet(np.full(100, 0.3), size=5):
        factors = monitor.bet(prior)
        mu = proba.mean(axis=0)
        naive = [sum(p[k] * prior[k] / mu[k] for k in range(100)) for p in proba[:200]]
        np.testing.assert_allclose(proba[:200] @ factors, naive, rtol=1e-12)
        assert np.mean(proba @ factors) == pytest.approx(1.0, abs=1e-12)


def test_bets_clip_a_prediction_off_the_simplex():
    """A prediction with a negative entry is bet on as that entry at 0, the
    rest renormalised; a class the reference never gives mass to gets 0."""
    reference = NoShiftReference(np.array([0.5, 0.5, 0.0]), np.ones(3), 100, 2, 2)
    monitor = StreamShiftMonitor(reference, 3, bet_share=0.5)
    np.testing.assert_allclose(monitor.bet(np.array([1.2, -0.2, 0.0])), [2, 0, 0])
    np.testing.assert_allclose(monitor.bet(np.array([0.6, 0.3, 0.1])), [1.2, 0.6, 0])


def test_bets_are_taken_until_the_first_segment_fills():
    """The wealth sums the batches' log-factors over the first segment_rows
    rows only, and a wealth of 1 / (share * level) finds the stream shifted
    from its start; no bets (share 0): no wealth."""
    reference = NoShiftReference(np.array([0.5, 0.5]), np.full(2, 0.25), np.inf, 1, 1)
    monitor = StreamShiftMonitor(
        reference, 2, segment_rows=4, stream_rows=100, bet_share=0.5
    )
    # (level 0.5: the threshold is 1 / (0.5 * 0.5) = 4, log 1.386)
    for log_bet in (0.5, 0.5):
        assert monitor.bet(np.array([0.9, 0.1])) is not None
        assert monitor.update(np.array([1.0, 1.0]), 2, 0.5, log_bet) is None
    assert monitor.log_wealth == 1.0
    assert monitor.bet(np.array([0.9, 0.1])) is None  # (4 rows seen)
    assert monitor.update(np.array([1.0, 1.0]), 2, 0.5, None) is None
    fresh = StreamShiftMonitor(reference, 2, segment_rows=4, bet_share=0.5)
    assert fresh.update(np.array([1.0, 1.0]), 2, 0.5, 1.4) == "stream"
    assert StreamShiftMonitor(reference, 2).bet(np.array([0.9, 0.1])) is None


class _Pvalue:
    """A no-shift reference whose test always gives one p-value."""

    expected = np.array([0.5, 0.5])

    def __init__(self, pvalue):
        self.pvalue = pvalue

    def test(self, mean, n_rows):
        return 0.0, self.pvalue, 1


@pytest.mark.parametrize(
    ("share", "pvalue", "found"),
    # level 0.5: the first test of every row at (1 - share) * 0.5 * 3 / pi^2
    [(0.0, 0.15, "stream"), (0.5, 0.15, None), (0.5, 0.07, "stream")],
)
def test_bets_take_their_share_of_the_level(share, pvalue, found):
    """With bet_share s the two sequences of tests run at (1 - s) times
    their levels: with the bets' s * level, the union bound stays at level."""
    monitor = StreamShiftMonitor(
        _Pvalue(pvalue), 2, segment_rows=10, stream_rows=1, bet_share=share
    )
    assert monitor.update(np.array([0.5, 0.5]), 1, 0.5, None) == found


def test_sums_and_bet_on_every_namespace(cifar10):
    """The column sums and sum_i log(p_i . f) of one pass: NumPy's against a
    loop; torch, array-api-strict and Dask give NumPy's (1e-12)."""
    proba = cifar10[0][:40].astype(np.float64)
    factors = np.random.default_rng(1).dirichlet(np.ones(10)) * 10
    sums, log_bet = sums_and_bet(proba, factors)
    np.testing.assert_allclose(sums, proba.sum(axis=0), rtol=1e-12)
    naive = sum(np.log(sum(p[k] * factors[k] for k in range(10))) for p in proba)
    assert log_bet == pytest.approx(naive, rel=1e-12)
    assert sums_and_bet(proba, None)[1] is None
    for _, to, _ in _namespaces():
        other_sums, other_bet = sums_and_bet(to(proba), factors)
        np.testing.assert_allclose(other_sums, sums, rtol=1e-12)
        assert other_bet == pytest.approx(log_bet, rel=1e-12)
        assert sums_and_bet(to(proba), None)[1] is None
