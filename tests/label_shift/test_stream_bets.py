"""The stream monitor's test by betting (issue 26): the bets' factors against
their formula, their mean of one without shift, the share of the level they
take, the pass that gives them on every namespace, and the weight their
wealth gives the on-line estimate before the stream is found shifted."""

import numpy as np
import pytest

from skprior import PriorAdaptedClassifier
from skprior.label_shift._online import SHIFT_ODDS
from skprior.label_shift._shift_solvers import NoShiftReference, StreamShiftMonitor
from skprior.label_shift._solvers import sums_and_bet
from tests.label_shift.test_shift import _stream_of
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


# -- the weight of the on-line estimate while the bets run -----------------------------


def _naive_mixed_posteriors(proba, train_prior, tracker_prior, weight):
    """Bayes' rule to w * tracker + (1 - w) * train, one row and class at a time."""
    mixed = [
        weight * tracker_prior[k] + (1 - weight) * train_prior[k]
        for k in range(len(train_prior))
    ]
    out = np.empty_like(proba)
    for i, p in enumerate(proba):
        scores = [p[k] * mixed[k] / train_prior[k] for k in range(len(p))]
        out[i] = [s / sum(scores) for s in scores]
    return out


@pytest.mark.parametrize("classes", [2, 10])
def test_online_weight_is_the_posterior_probability_of_a_shift(classes):
    """Before the stream is found shifted, predict_proba_online adjusts to
    w * online_prior_ + (1 - w) * train_prior_ with w = rho W / (1 + rho W),
    rho = SHIFT_ODDS and W the product over the rows bet on of sum_k p_k
    pi_k / mu_k (pi the on-line prior before the row's batch, mu the fit
    rows' mean posterior): against a loop on WideResNet / CIFAR-10 streams of
    classes 0-1 (found shifted by the bets) and of every class (no shift, w
    back to exactly 0 after the first 100 rows); 1 once found shifted."""
    proba, y, rows, model = _stream_of("wideresnet-16-4-cifar-10")
    stream = np.flatnonzero(y[5000:] < classes)[:200] + 5000
    batches = np.array_split(stream, 40)
    wrapper = PriorAdaptedClassifier(model).fit(rows[:5000], y[:5000])
    mu = proba[:5000].mean(axis=0)
    wealth, seen, weights = 1.0, 0, []
    for batch, following in zip(batches, batches[1:], strict=False):
        before = np.array(wrapper.online_prior_)
        wrapper.update_prior(rows[batch])
        if seen < 100:  # (the bets' rows: the first segment of 100)
            for p in proba[batch]:
                wealth *= sum(p[k] * before[k] / mu[k] for k in range(10))
        seen += len(batch)
        if wrapper.online_shifted_:
            expected = 1.0
        else:
            expected = SHIFT_ODDS * wealth / (1 + SHIFT_ODDS * wealth)
            expected = expected if seen < 100 else 0.0
        assert wrapper.online_weight_ == pytest.approx(expected, rel=1e-9, abs=1e-15)
        naive = _naive_mixed_posteriors(
            proba[following], wrapper.train_prior_, wrapper.online_prior_, expected
        )
        out = wrapper.predict_proba_online(rows[following])
        np.testing.assert_allclose(out, naive, rtol=1e-9, atol=1e-15)
        weights.append(wrapper.online_weight_)
    if classes == 2:
        assert wrapper.online_shifted_ and any(0.5 < w < 1 for w in weights)
    else:
        assert not wrapper.online_shifted_ and 0 < max(weights) < 0.5
        np.testing.assert_array_equal(out, proba[following])


def test_online_weight_averages_at_most_the_odds_without_shift():
    """Without shift the bets' wealth is a martingale of mean 1, so the weight
    rho W / (1 + rho W) <= rho W averages at most rho (SHIFT_ODDS) at every
    batch: 400 streams of LeNet-5 / CIFAR-10 (a weak model) drawn from the
    fit rows themselves (their mean posterior is mu exactly)."""
    proba, y, rows, model = _stream_of("lenet-5-cifar-10")
    wrapper = PriorAdaptedClassifier(model).fit(rows[:5000], y[:5000])
    rng = np.random.default_rng(0)
    weights = np.empty((400, 10))
    for stream in range(400):
        wrapper.reset_prior()
        for t, batch in enumerate(rng.integers(0, 5000, size=(10, 10))):
            wrapper.update_prior(rows[batch])
            weights[stream, t] = wrapper.online_weight_
    mean = weights.mean(axis=0)
    assert np.all(mean <= SHIFT_ODDS + 3 * weights.std(axis=0) / np.sqrt(400))
    assert 0 < mean.min() and mean[0] > 0.01  # (not 0: the estimate has weight)
