"""The test of no label shift, and the safety it gives prior adaptation."""

import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.base import BaseEstimator, ClassifierMixin

from skprior import (
    PriorAdaptedClassifier,
    adjust_to_prior,
    estimate_test_prior,
    label_shift_test,
)
from skprior.label_shift._shift_solvers import StreamShiftMonitor
from tests.conftest import load_model_outputs


def naive_shift_test(batch, reference_mean, rows, n_reference, pool_batch=True):
    """T and its scaled chi-squared tail from the formulas, one class at a time.

    T = n_eff sum_k (m_k - mu_k)^2 / v_k with v_k pooled from the reference's
    and the batch's variances (the reference's alone without ``pool_batch``)
    and the gap of the means (n_reference = inf: the variances of ``rows``);
    tr(R) the classes that vary, tr(R^2) the mean squared off-diagonal entry
    of the Gram matrix of at most 2,000 evenly spaced standardised ``rows``.
    """
    batch, rows = batch.astype(np.float64), rows.astype(np.float64)
    n, m = len(batch), n_reference
    gap = batch.mean(axis=0) - reference_mean
    ref_var = ((rows - rows.mean(axis=0)) ** 2).mean(axis=0)
    own = batch.var(axis=0) if pool_batch else ref_var
    n_eff = n if np.isinf(m) else 1 / (1 / n + 1 / m)
    statistic = 0.0
    for k in range(len(gap)):
        pooled = (
            ref_var[k]
            if np.isinf(m)
            else (m * ref_var[k] + n * own[k] + n_eff * gap[k] ** 2) / (m + n)
        )
        statistic += n_eff * gap[k] ** 2 / pooled
    spaced = np.unique(np.linspace(0, len(rows) - 1, min(len(rows), 2000)).astype(int))
    y = (rows[spaced] - rows.mean(axis=0)) / np.sqrt(ref_var)
    total = 0.0
    for i in range(len(y)):
        products = y @ y[i]
        total += products @ products - products[i] ** 2  # (j != i)
    trace, trace_squared = len(gap), total / (len(y) * (len(y) - 1))
    scale = trace_squared / trace
    return statistic, stats.chi2.sf(statistic / scale, trace / scale), trace


def test_statistic_against_the_formula_with_fit_posteriors(cifar10):
    """Two-dimensional reference of fewer than 50 rows per class: its mean and
    variances pooled with the batch's, both means' noise."""
    proba, _ = cifar10
    reference, batch = proba[:450], proba[3000:4000]
    statistic, pvalue, dof = naive_shift_test(
        batch, reference.astype(np.float64).mean(axis=0), reference, 450
    )
    result = label_shift_test(batch, reference)
    assert result.statistic == pytest.approx(statistic, rel=1e-6)
    assert result.pvalue == pytest.approx(pvalue, rel=1e-6)
    assert result.dof == dof == 10


def naive_hotelling(batch, reference):
    """Hotelling's two-sample T^2 with the reference's covariance: the
    pseudo-inverse of its unbiased covariance, the F tail of its rank."""
    batch, reference = batch.astype(np.float64), reference.astype(np.float64)
    n, m = len(batch), len(reference)
    covariance = np.cov(reference.T)  # (divides by m - 1)
    gap = batch.mean(axis=0) - reference.mean(axis=0)
    statistic = gap @ np.linalg.pinv(covariance, rcond=1e-9, hermitian=True) @ gap
    statistic /= 1 / n + 1 / m
    dof = np.linalg.matrix_rank(
        covariance, tol=1e-9 * np.linalg.eigvalsh(covariance).max()
    )
    f = statistic * (m - dof) / (dof * (m - 1))
    return statistic, stats.f.sf(f, dof, m - dof), dof


@pytest.mark.parametrize(("n_reference", "n_batch"), [(500, 40), (5000, 1000)])
def test_hotelling_with_50_reference_rows_per_class(cifar10, n_reference, n_batch):
    """From 50 reference rows per class the test is Hotelling's T^2 with the
    reference's covariance (the sum-to-one direction left out: 9 dof)."""
    proba, _ = cifar10
    reference, batch = proba[:n_reference], proba[5000 : 5000 + n_batch]
    statistic, pvalue, dof = naive_hotelling(batch, reference)
    result = label_shift_test(batch, reference)
    assert result.statistic == pytest.approx(statistic, rel=1e-6)
    assert result.pvalue == pytest.approx(pvalue, rel=1e-6)
    assert result.dof == dof == 9


def test_a_class_the_reference_never_gives_mass_is_seen(cifar10):
    """Hotelling's T^2 sees the gap only in the directions the reference
    varies in: a class no reference row gives mass to (exact zeros) is left
    out, and a batch moving onto it was declared unshifted (p = 0.7). Such a
    batch is tested class by class, as with fewer reference rows."""
    proba, _ = cifar10
    reference = proba[:2000].astype(np.float64)
    reference[:, 9] = 0.0
    reference /= reference.sum(axis=1, keepdims=True)
    batch = proba[5000:5300].astype(np.float64)  # (class 9 where it is)
    result = label_shift_test(batch, reference)
    with np.errstate(divide="ignore", invalid="ignore"):  # (its tail: not here)
        statistic, _, _ = naive_shift_test(
            batch, reference.mean(axis=0), reference, 2000
        )
    assert result.statistic == pytest.approx(statistic, rel=1e-6)
    assert result.shifted and result.pvalue < 1e-10
    assert result.dof == 9  # (the classes that vary in the reference)
    # (a batch within the reference's span is still Hotelling's, 8 dof left)
    plain = label_shift_test(reference[:300], reference[300:])
    assert plain.dof == 8 and not plain.shifted


def test_statistic_against_the_formula_with_a_prior(cifar10):
    """One-dimensional reference: the batch's own variances and correlations."""
    proba, labels = cifar10
    batch = proba[:1500]
    prior = np.bincount(labels[:1500], minlength=10) / 1500
    statistic, pvalue, _ = naive_shift_test(batch, prior, batch, np.inf)
    result = label_shift_test(batch, prior)
    assert result.statistic == pytest.approx(statistic, rel=1e-6)
    assert result.pvalue == pytest.approx(pvalue, rel=1e-6)


def test_hotelling_with_weighted_reference_rows(cifar10):
    """Weighted reference rows: their weighted mean and covariance (unbiased
    with Kish's effective size m, which also sets n_eff and the F tail)."""
    proba, _ = cifar10
    reference, batch = proba[:2000].astype(np.float64), proba[5000:5300]
    w = np.random.default_rng(0).random(2000)
    m = w.sum() ** 2 / (w @ w)
    mean = w @ reference / w.sum()
    centred = reference - mean
    covariance = centred.T @ (centred * w[:, None]) / w.sum() * m / (m - 1)
    gap = batch.astype(np.float64).mean(axis=0) - mean
    inverse = np.linalg.pinv(covariance, rcond=1e-9, hermitian=True)
    statistic = gap @ inverse @ gap / (1 / 300 + 1 / m)
    pvalue = stats.f.sf(statistic * (m - 9) / (9 * (m - 1)), 9, m - 9)
    result = label_shift_test(batch, reference, sample_weight=w)
    assert result.statistic == pytest.approx(statistic, rel=1e-6)
    assert result.pvalue == pytest.approx(pvalue, rel=1e-6)


@pytest.mark.parametrize(
    ("name", "n_reference", "n_batch"),
    [
        ("densenet-bc-100-cifar-100", 300, 300),
        ("lenet-5-cifar-100", 1000, 500),
        ("wideresnet-16-4-cifar-10", 300, 300),
        ("lenet-5-cifar-100", 5000, 1000),  # (Hotelling's T^2 from here)
        ("wideresnet-16-4-cifar-10", 500, 50),
    ],
)
def test_level_holds_with_many_classes_against_the_rows(name, n_reference, n_batch):
    """Random halves of real outputs, nothing shifted: at level 0.05, 40 draws
    are declared shifted at most 7 times (P(Binomial(40, 0.05) > 7) < 0.002).
    Hotelling's T^2 declared 57 of 60 DenseNet draws shifted at 300 / 300 at
    level 0.01, and 18 of 60 LeNet-5 draws (benchmarks/bench_label_shift.py):
    it is used from 50 reference rows per class only."""
    proba = load_model_outputs(name)[0]
    rng = np.random.default_rng(3)
    rejected = 0
    for _ in range(40):
        rows = rng.permutation(len(proba))
        reference = proba[rows[:n_reference]]
        batch = proba[rows[n_reference : n_reference + n_batch]]
        rejected += label_shift_test(batch, reference, level=0.05).shifted
    assert rejected <= 7
    assert stats.binom.sf(7, 40, 0.05) < 0.002


def test_no_shift_rejected_at_about_the_level():
    """Batches drawn like the reference are declared shifted about level of the time."""
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((20_000, 5)) * 2
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    reference = proba[:4000]
    rejected = [
        label_shift_test(proba[rng.choice(np.arange(4000, 20_000), 500)], reference,
                         level=0.1).shifted
        for _ in range(300)
    ]  # fmt: skip
    # 300 draws at level 0.1: the count is Binomial(300, 0.1), 30 +- 5.2.
    assert 0.05 < np.mean(rejected) < 0.15


def test_label_shift_is_detected(cifar100):
    """A Dirichlet(1) shift of 1,000 CIFAR-100 rows is found against the fit half."""
    proba, labels = cifar100
    rng = np.random.default_rng(1)
    prior = rng.dirichlet(np.ones(100))
    pool = np.arange(5000, 10_000)
    idx = np.concatenate([
        rng.choice(pool[labels[pool] == c], int(1000 * prior[c])) for c in range(100)
    ])  # fmt: skip
    result = label_shift_test(proba[idx], proba[:5000])
    assert result.shifted and result.pvalue < 1e-6


def test_too_few_rows_for_a_prior_reference_warns():
    """With a prior as reference the batch's covariance needs more rows than classes."""
    with pytest.warns(UserWarning, match="needs more rows than classes"):
        result = label_shift_test(np.full((3, 4), 0.25), np.full(4, 0.25))
    assert not result.shifted and np.isnan(result.pvalue)


@pytest.mark.parametrize("case", ["one row", "one weighted row"])
def test_a_reference_without_spread_warns(case):
    """Nothing varies in the reference: the test is not run (p = nan), and a
    warning says so rather than a silent 'not shifted'."""
    reference = np.random.default_rng(0).dirichlet([1, 1, 1], size=50)
    weights = None
    if case == "one row":
        reference = reference[:1]
    else:
        weights = np.r_[np.zeros(49), 1.0]
    batch = np.tile([[0.98, 0.01, 0.01]], (200, 1))
    with pytest.warns(UserWarning, match="could not be run: no class's posterior"):
        result = label_shift_test(batch, reference, sample_weight=weights)
    assert np.isnan(result.pvalue) and not result.shifted


@pytest.mark.parametrize("row", [[0.25, 0.25, 0.5], [0.2, 0.3, 0.5], [0.1, 0.2, 0.7]])
def test_a_reference_of_identical_rows_has_no_spread(row):
    """1,000 copies of one row: the variances are exactly 0 for some rows and
    rounding noise (1e-30) for others, which the relative rank test took for
    spread (dof 2 or 3, p = 1e-12: 'shifted' for a batch centred on that row).
    Every row now gives the warning and p = nan."""
    batch = np.random.default_rng(0).dirichlet([2, 3, 5], size=40)
    with pytest.warns(UserWarning, match="could not be run: no class's posterior"):
        result = label_shift_test(batch, np.tile(row, (1000, 1)))
    assert np.isnan(result.pvalue) and result.dof == 0 and not result.shifted


def test_reference_with_other_classes_is_refused():
    with pytest.raises(ValueError, match="reference has 3 classes"):
        label_shift_test(np.full((5, 2), 0.5), np.full((5, 3), 1 / 3))


class StoredOutputs(ClassifierMixin, BaseEstimator):
    """A 'model' whose features are row indices into stored posteriors."""

    def __init__(self, proba=None):
        self.proba = proba

    def fit(self, X, y):
        self.classes_ = np.arange(self.proba.shape[1])
        return self

    def predict_proba(self, X):
        return self.proba[np.asarray(X)[:, 0].astype(int)]


def nll(proba, y):
    return -np.mean(np.log(proba[np.arange(len(y)), y]))


@pytest.mark.parametrize(
    "name", ["lenet-5-cifar-100", "wideresnet-16-4-cifar-100", "lenet-5-cifar-10"]
)
def test_no_shift_split_is_left_alone_by_default(name):
    """Rows 0-4,999 to fit, 5,000-9,999 to predict, no shift: the default
    PriorAdaptedClassifier costs no accuracy nor log loss, and warns of nothing;
    adapting every batch (shift_level=None) costs both on the weak LeNet-5."""
    proba, y = load_model_outputs(name)
    proba = proba.astype(np.float64)
    proba /= proba.sum(axis=1, keepdims=True)
    rows = np.arange(10_000)[:, None]
    model = StoredOutputs(proba).fit(rows[:5000], y[:5000])
    adapted = PriorAdaptedClassifier(model).fit(rows[:5000], y[:5000])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = adapted.predict_proba(rows[5000:])
    before = proba[5000:]
    accuracy = np.mean(out.argmax(axis=1) == y[5000:])
    assert accuracy >= np.mean(before.argmax(axis=1) == y[5000:]) - 0.005
    assert nll(out, y[5000:]) <= nll(before, y[5000:]) + 0.01
    assert not adapted.test_shift(rows[5000:]).shifted
    if name == "lenet-5-cifar-100":
        always = adapted.set_params(shift_level=None)
        with pytest.warns(UserWarning, match="classes to ~0"):
            wrecked = always.predict_proba(rows[5000:])
        assert nll(wrecked, y[5000:]) > nll(before, y[5000:]) + 1


@pytest.mark.parametrize("n_fit", [1000, 5000])
def test_unshifted_batches_are_adapted_at_most_at_the_level(n_fit):
    """LeNet-5 / CIFAR-100 (100 classes, a weak model), 20 batches of 500 rows
    drawn without shift: the default gate (level 0.01) lets at most 2 of them
    be adapted (P(Binomial(20, 0.01) > 2) = 0.001). Hotelling's T^2 against
    1,000 fit rows adapted 5 of 20; 5,000 fit rows take Hotelling's test."""
    proba, y = load_model_outputs("lenet-5-cifar-100")
    proba = proba.astype(np.float64)
    proba /= proba.sum(axis=1, keepdims=True)
    rows = np.arange(10_000)[:, None]
    model = StoredOutputs(proba).fit(rows[:n_fit], y[:n_fit])
    adapted = PriorAdaptedClassifier(model).fit(rows[:n_fit], y[:n_fit])
    rng = np.random.default_rng(5)
    batches = [
        rng.choice(np.arange(n_fit, 10_000), 500, replace=False) for _ in range(20)
    ]
    changed = sum(
        not np.allclose(adapted.predict_proba(rows[batch]), proba[batch], 1e-9, 0)
        for batch in batches
    )
    assert changed <= 2
    assert stats.binom.sf(2, 20, 0.01) < 0.002


def test_shifted_batch_is_adapted(cifar100):
    """A shifted batch gets the MLE prior, as with shift_level=None."""
    proba, labels = cifar100
    proba = proba.astype(np.float64)
    proba /= proba.sum(axis=1, keepdims=True)
    rows = np.arange(10_000)[:, None]
    rng = np.random.default_rng(3)
    idx = np.concatenate([
        rng.choice(np.flatnonzero(labels[5000:] == c) + 5000, 30) for c in range(20)
    ])  # fmt: skip
    model = StoredOutputs(proba).fit(rows[:5000], labels[:5000])
    adapted = PriorAdaptedClassifier(model).fit(rows[:5000], labels[:5000])
    q = adapted.train_prior_
    expected = adjust_to_prior(proba[idx], q, estimate_test_prior(proba[idx], q).prior)
    np.testing.assert_allclose(adapted.predict_proba(rows[idx]), expected)


def test_single_row_estimate_warns():
    """The MLE of one row is a vertex: estimate_test_prior says so."""
    with pytest.warns(UserWarning, match="a single row"):
        result = estimate_test_prior([[0.01, 0.61, 0.03, 0.18, 0.17]], np.full(5, 0.2))
    assert result.prior.max() > 0.99


def test_estimate_from_a_weak_model_without_shift_warns():
    """LeNet-5 on CIFAR-100, no shift: most classes driven to ~0 -> a warning."""
    proba, y = load_model_outputs("lenet-5-cifar-100")
    q = np.bincount(y[:5000], minlength=100) / 5000
    with pytest.warns(UserWarning, match="of the batch's posterior mass"):
        estimate_test_prior(proba[5000:], q, solver="squarem")


def test_estimate_with_absent_classes_does_not_warn(cifar100):
    """Classes really absent from a batch hold little posterior mass: no warning."""
    proba, labels = cifar100
    keep = np.isin(labels, np.arange(30))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = estimate_test_prior(proba[keep], np.full(100, 0.01), solver="squarem")
    assert (result.prior[30:] < 1e-4).sum() > 35


# -- the same test before adapting a stream --------------------------------------------


def _stream_of(name):
    proba, y = load_model_outputs(name)
    proba = proba.astype(np.float64)
    proba /= proba.sum(axis=1, keepdims=True)
    rows = np.arange(10_000)[:, None]
    model = StoredOutputs(proba).fit(rows[:5000], y[:5000])
    return proba, y, rows, model


@pytest.mark.parametrize("online", ["cumulative", "flh-ftl"])
def test_stream_without_shift_is_left_alone_by_default(online):
    """LeNet-5 / CIFAR-100, rows 5,000-9,999 streamed in 50 batches after a fit
    on rows 0-4,999 (no shift): predict_proba_online returns the posteriors as
    they are; adapting to the on-line estimate regardless costs accuracy."""
    proba, y, rows, model = _stream_of("lenet-5-cifar-100")
    wrapper = PriorAdaptedClassifier(model, online=online, solver="squarem")
    wrapper.fit(rows[:5000], y[:5000])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (degenerate per-batch estimates)
        for batch in np.array_split(rows[5000:], 50):
            wrapper.update_prior(batch)
    assert not wrapper.online_shifted_
    out = wrapper.predict_proba_online(rows[5000:])
    np.testing.assert_allclose(out, proba[5000:], rtol=1e-10)
    forced = wrapper.set_params(shift_level=None).reset_prior()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for batch in np.array_split(rows[5000:], 50):
            forced.update_prior(batch)
    assert forced.online_shifted_
    wrecked = forced.predict_proba_online(rows[5000:])
    accuracy = np.mean(wrecked.argmax(axis=1) == y[5000:])
    assert accuracy < np.mean(proba[5000:].argmax(axis=1) == y[5000:]) - 0.005


def test_shifted_stream_is_adapted_and_reset_forgets():
    """A stream holding only half of the classes is found shifted within its
    first batches and adapted to the on-line estimate from then on (as with
    shift_level=None); reset_prior starts over."""
    proba, y, rows, model = _stream_of("wideresnet-16-4-cifar-10")
    stream = rows[5000:][y[5000:] < 5]
    wrapper = PriorAdaptedClassifier(model).fit(rows[:5000], y[:5000])
    always = PriorAdaptedClassifier(model, shift_level=None).fit(rows[:5000], y[:5000])
    batches = np.array_split(stream, 25)
    wrapper.update_prior(batches[0])
    always.update_prior(batches[0])
    assert wrapper.online_shifted_
    for batch in batches[1:]:
        wrapper.update_prior(batch)
        always.update_prior(batch)
    np.testing.assert_allclose(wrapper.online_prior_, always.online_prior_)
    np.testing.assert_allclose(
        wrapper.predict_proba_online(rows[:100]),
        always.predict_proba_online(rows[:100]),
    )
    assert not wrapper.reset_prior().online_shifted_


def _naive_stream_flags(
    proba,
    reference,
    batches,
    level=0.01,
    stream_rows=50,
    segment_rows=100,
    bets=None,
    bet_share=0.1,
):
    """Per update: is the stream found shifted, and since when (a loop).

    The j-th test of every row so far (once there are ``stream_rows``), and
    the s-th test of the latest segment (consecutive batches of at least
    ``segment_rows`` rows, tested when it fills), each at
    ``(1 - bet_share) * level * 3 / (pi^2 j^2)``; once one rejects, "recent"
    if the rows before the segment are not found shifted at ``level``, else
    "stream". Each test is label_shift_test's with the reference's variances
    alone (the stream keeps no squares of the batches). ``bets``: the prior
    the tracker predicted before each batch; each row of the first
    ``segment_rows`` multiplies the wealth by ``sum_k p_k bet_k / mu_k``
    (``mu`` the reference's mean), and a wealth of ``1 / (bet_share *
    level)`` finds the stream shifted ("stream") at once.
    """
    mean = reference.astype(np.float64).mean(axis=0)
    share = 0.0 if bets is None else bet_share

    def stream_pvalue(rows):
        # (the stream keeps column sums only: the reference's variances)
        return naive_shift_test(rows, mean, reference, len(reference), False)[1]

    flags, seen, segment, j, n_segments, wealth = [], [], [], 0, 0, 1.0
    for t, batch in enumerate(batches):
        betting = bets is not None and len(seen) < segment_rows
        for row in batch if betting else ():
            wealth *= sum(
                proba[row, k] * bets[t][k] / mean[k] for k in range(len(mean))
            )
        seen += list(batch)
        segment += list(batch)
        rejected = False
        if len(seen) >= stream_rows:
            j += 1
            pvalue = stream_pvalue(proba[seen])
            rejected = pvalue <= (1 - share) * level * 3 / (np.pi * j) ** 2
        full = len(segment) >= segment_rows
        if full:
            n_segments += 1
            pvalue = stream_pvalue(proba[segment])
            rejected |= pvalue <= (1 - share) * level * 3 / (np.pi * n_segments) ** 2
        found = None
        if betting and wealth >= 1 / (share * level):
            found = "stream"
        elif rejected:
            before = seen[: len(seen) - len(segment)]
            calm = bool(before) and (stream_pvalue(proba[before]) > level)
            found = "recent" if calm else "stream"
        if full:
            segment = []
        flags.append(found)
        if found:
            break
    return flags


def _predictions(always, rows, batches):
    """The on-line prior before each batch of ``always``, a wrapper fitted with
    ``shift_level=None`` (adapting from the start): what a gated stream with
    the same tracker bets on until it is found shifted."""
    out = []
    for batch in batches:
        out.append(np.array(always.online_prior_))
        always.update_prior(rows[batch])
    return out


@pytest.mark.parametrize(
    ("n_calm", "calm_batches", "shifted_batches", "within"),
    [
        (2500, 50, 25, 150),  # 50-row batches, segments aligned with the shift
        (2450, 49, 25, 150),  # the shift in the middle of a segment
        (2500, 5, 3, 410),  # 500-row batches: each batch fills a segment
    ],
)
def test_shift_after_a_calm_stretch_is_found_and_restarts(
    n_calm, calm_batches, shifted_batches, within
):
    """Rows without shift, then the classes 0-4 only (WideResNet / CIFAR-10).
    The mean of every row dilutes the change (alone, that test found it after
    441 shifted rows of 49-row batches); the segment test finds it within a
    segment or a batch, the rows before look calm, and the on-line estimate
    restarts at the batch where it was found: it equals that of a stream
    adapted from the start (shift_level=None) given only the batches from
    there on, and is near the shifted rows' class frequencies."""
    proba, y, rows, model = _stream_of("wideresnet-16-4-cifar-10")
    rng = np.random.default_rng(0)
    calm = rng.permutation(np.arange(5000, 5000 + n_calm))
    shifted = rng.permutation(np.flatnonzero(y[7500:] < 5) + 7500)
    batches = np.array_split(calm, calm_batches) + np.array_split(
        shifted, shifted_batches
    )
    bets = _predictions(
        PriorAdaptedClassifier(model, online="cumulative", shift_level=None).fit(
            rows[:5000], y[:5000]
        ),
        rows,
        batches,
    )
    expected = _naive_stream_flags(proba, proba[:5000], batches, bets=bets)
    assert expected[-1] == "recent"
    found_at = len(expected) - 1
    assert found_at >= calm_batches  # (the calm stretch is left alone)
    assert sum(len(b) for b in batches[calm_batches : found_at + 1]) <= within

    # (the MLE of every row since the restart: the estimate of that test)
    wrapper = PriorAdaptedClassifier(model, online="cumulative")
    wrapper.fit(rows[:5000], y[:5000])
    always = PriorAdaptedClassifier(model, online="cumulative", shift_level=None)
    always.fit(rows[:5000], y[:5000])
    for j, batch in enumerate(batches):
        wrapper.update_prior(rows[batch])
        assert wrapper.online_shifted_ == (j >= found_at)
        if j >= found_at:
            always.update_prior(rows[batch])
    np.testing.assert_allclose(wrapper.online_prior_, always.online_prior_)
    assert wrapper.n_seen_ == always.n_seen_
    truth = np.bincount(y[shifted], minlength=10) / shifted.size
    assert np.abs(wrapper.online_prior_ - truth).sum() < 0.1


@pytest.mark.parametrize("online", ["cumulative", "fth", "flh-ftl"])
@pytest.mark.parametrize("method", ["mle", "bbse"])
def test_stream_shifted_from_the_start_is_not_restarted(online, method):
    """Shifted from the first row (classes 0-4 only, 10-row batches): the
    first segment is the whole stream, nothing before it looks calm, so the
    on-line estimate keeps every row, as with shift_level=None."""
    proba, y, rows, model = _stream_of("wideresnet-16-4-cifar-10")
    shifted = np.flatnonzero(y[5000:] < 5)[:600] + 5000
    batches = np.array_split(shifted, 60)
    wrapper = PriorAdaptedClassifier(model, method=method, online=online)
    always = PriorAdaptedClassifier(
        model, method=method, online=online, shift_level=None
    )
    wrapper.fit(rows[:5000], y[:5000])
    always.fit(rows[:5000], y[:5000])
    for batch in batches:
        wrapper.update_prior(rows[batch])
        always.update_prior(rows[batch])
    assert wrapper.online_shifted_
    assert wrapper.n_seen_ == always.n_seen_ == shifted.size
    np.testing.assert_allclose(wrapper.online_prior_, always.online_prior_)


def _mild_shift_batches(y):
    """40 batches of a mild shift (class 0 under-represented), which the test
    of every row so far finds midway."""
    rng = np.random.default_rng(0)
    pool = np.flatnonzero(y[5000:] != 0) + 5000
    extra = np.flatnonzero(y[5000:] == 0)[:100] + 5000
    stream = rng.permutation(np.concatenate([pool[:2500], extra]))
    return np.array_split(stream, 40)


def test_stream_level_is_read_at_each_update():
    """set_params(shift_level=...) in the middle of a stream takes effect."""
    proba, y, rows, model = _stream_of("wideresnet-16-4-cifar-10")
    batches = _mild_shift_batches(y)
    strict = PriorAdaptedClassifier(model, shift_level=1e-300).fit(
        rows[:5000], y[:5000]
    )
    for batch in batches[:20]:
        strict.update_prior(rows[batch])
    assert not strict.online_shifted_
    strict.set_params(shift_level=1.0)
    strict.update_prior(rows[batches[20]])
    assert strict.online_shifted_


def test_stream_test_matches_a_naive_loop():
    """The stream is found shifted when label_shift_test of every row so far
    (once there are 50) against the fit posteriors has, at its j-th run, a
    p-value at most 0.9 shift_level * 3 / (pi^2 j^2), or that of the latest
    segment of >= 100 rows (10 classes) at most 0.9 shift_level * 3 /
    (pi^2 s^2) at the s-th, or when the bets on the first segment's rows
    reach 10 / shift_level: levels that sum to shift_level
    (_naive_stream_flags)."""
    proba, y, rows, model = _stream_of("wideresnet-16-4-cifar-10")
    batches = _mild_shift_batches(y)
    always = PriorAdaptedClassifier(model, shift_level=None).fit(rows[:5000], y[:5000])
    bets = _predictions(always, rows, batches)
    expected = _naive_stream_flags(proba, proba[:5000], batches, bets=bets)
    wrapper = PriorAdaptedClassifier(model).fit(rows[:5000], y[:5000])
    for found, batch in zip(expected, batches, strict=False):
        wrapper.update_prior(rows[batch])
        assert wrapper.online_shifted_ == (found is not None)
    assert expected[-1] == "stream"  # found shifted midway, by every row so far
    assert 1 < len(expected) < len(batches)


def test_bets_find_a_shift_at_the_streams_start():
    """Classes 0 and 1 only (WideResNet / CIFAR-10), 5-row batches: the bets on
    the tracker's predictions find the shift before the test of every row
    can run (50 rows), where the naive loop does, bets and all; without the
    bets the loop finds it at 50 rows."""
    proba, y, rows, model = _stream_of("wideresnet-16-4-cifar-10")
    stream = np.flatnonzero(y[5000:] < 2)[:200] + 5000
    batches = np.array_split(stream, 40)
    always = PriorAdaptedClassifier(model, shift_level=None).fit(rows[:5000], y[:5000])
    bets = _predictions(always, rows, batches)
    expected = _naive_stream_flags(proba, proba[:5000], batches, bets=bets)
    assert expected[-1] == "stream" and 1 < len(expected) < 10
    assert len(_naive_stream_flags(proba, proba[:5000], batches)) == 10
    wrapper = PriorAdaptedClassifier(model).fit(rows[:5000], y[:5000])
    for found, batch in zip(expected, batches, strict=False):
        wrapper.update_prior(rows[batch])
        assert wrapper.online_shifted_ == (found is not None)
    assert wrapper._stream.monitor.log_wealth >= np.log(10 / wrapper.shift_level)


class _QueuedPvalues:
    """A no-shift reference whose test returns the next of given p-values."""

    def __init__(self, pvalues):
        self.pvalues = list(pvalues)
        self.rows_tested = []

    def test(self, mean, n_rows):
        self.rows_tested.append(n_rows)
        return 0.0, self.pvalues.pop(0), 1


@pytest.mark.parametrize(
    ("pvalues", "expected", "rows_tested"),
    [
        # level 0.5: the j-th tests at 0.152, 0.038, 0.0169, 0.0095
        # the first segment is the whole stream: nothing before it to call calm
        ([0.2, 0.05, 0.1], [None, "stream"], [1, 2, 2]),
        ([0.2, 0.03, 0.5], [None, "stream"], [1, 2, 2]),
        ([0.2, 0.05, 0.5, 0.02], [None, None, None], [1, 2, 2, 3]),
        # the second segment rejects; the 2 rows before it calm / not calm
        (
            [0.2, 0.05, 0.5, 0.02, 0.01, 0.03, 0.9],
            [None, None, None, "recent"],
            [1, 2, 2, 3, 4, 2, 2],
        ),
        (
            [0.2, 0.05, 0.5, 0.02, 0.01, 0.03, 0.4],
            [None, None, None, "stream"],
            [1, 2, 2, 3, 4, 2, 2],
        ),
    ],
)
def test_stream_monitor_levels(pvalues, expected, rows_tested):
    """The j-th test of every row so far and the s-th test of a full segment
    (here 2 rows, one row per batch) run at level * 3 / (pi^2 j^2): the levels
    of both sequences sum to the level. A segment starts empty after its test;
    once one rejects, the rows before the segment, tested at the level, say
    whether the shift is recent."""
    reference = _QueuedPvalues(pvalues)
    monitor = StreamShiftMonitor(reference, 2, segment_rows=2, stream_rows=1)
    found = [monitor.update(np.array([0.5, 0.5]), 1, 0.5) for _ in expected]
    assert found == expected
    assert not reference.pvalues  # every given p-value was used
    assert reference.rows_tested == rows_tested


def test_stream_monitor_waits_for_its_floor():
    """No test of the stream before it holds stream_rows rows."""
    reference = _QueuedPvalues([0.1])
    monitor = StreamShiftMonitor(reference, 2, segment_rows=10, stream_rows=3)
    found = [monitor.update(np.array([0.5, 0.5]), 1, 0.5) for _ in range(3)]
    assert found == [None, None, "stream"]
    assert reference.rows_tested == [3]


@pytest.mark.parametrize("level", [7.0, 2.0, 0, -1])
@pytest.mark.parametrize("method", ["predict_proba", "update_prior", "test_shift"])
def test_shift_level_set_after_fit_is_checked_where_it_is_used(level, method):
    """set_params does not check (scikit-learn checks in fit): a level outside
    (0, 1] set after fit, or mid-stream, is refused when the test runs."""
    proba = load_model_outputs("lenet-5-cifar-10")[0]
    rows = np.arange(2000)[:, None]
    wrapper = PriorAdaptedClassifier(StoredOutputs(proba)).fit(
        rows[:1000], np.arange(1000) % 10
    )
    wrapper.update_prior(rows[1000:1100])
    wrapper.set_params(shift_level=level)
    with pytest.raises(ValueError, match=r"'shift_level'.*range \(0.0, 1.0\]"):
        getattr(wrapper, method)(rows[1100:1200])


def test_an_unshifted_batch_takes_the_fit_rows_prior_with_a_given_train_prior():
    """A balanced model (class_weight='balanced': calibrated to a uniform
    prior, given as train_prior) fitted on held-out rows of classes at about
    80/15/5: a batch drawn as those rows is not shifted from them, and takes
    their label frequencies (Bayes' rule from the uniform prior), not the
    uniform prior. It kept the uniform one: the model's own posteriors, log
    loss 0.68 against 0.41. The stream, before any shift, starts there too.
    The frequencies take one pseudo-row per class of train_prior (a class
    without rows in y is not ruled out)."""
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression

    X, y = make_classification(
        n_samples=4000, n_classes=3, n_informative=3, n_redundant=0,
        weights=[0.8, 0.15, 0.05], class_sep=0.8, random_state=0,
    )  # fmt: skip
    model = LogisticRegression(class_weight="balanced").fit(X[:1000], y[:1000])
    uniform = np.full(3, 1 / 3)
    wrapper = PriorAdaptedClassifier(model, train_prior=uniform)
    wrapper.fit(X[1000:2500], y[1000:2500])
    # (the label counts with one pseudo-row per class of the uniform prior)
    fit_prior = (np.bincount(y[1000:2500], minlength=3) + 1.0) / 1503
    batch = X[2500:]
    assert not wrapper.test_shift(batch).shifted
    np.testing.assert_allclose(wrapper.estimate_prior(batch), fit_prior)
    expected = adjust_to_prior(model.predict_proba(batch), uniform, fit_prior)
    np.testing.assert_allclose(wrapper.predict_proba(batch), expected, rtol=1e-12)
    assert nll(expected, y[2500:]) < nll(model.predict_proba(batch), y[2500:]) - 0.1
    np.testing.assert_allclose(
        wrapper.predict_proba_online(batch), expected, rtol=1e-12
    )
    # (weighted label frequencies, as train_prior_ would be without train_prior)
    weights = np.where(y[1000:2500] == 0, 2.0, 1.0)
    wrapper.fit(X[1000:2500], y[1000:2500], sample_weight=weights)
    counts = np.bincount(y[1000:2500], weights=weights, minlength=3)
    np.testing.assert_allclose(
        wrapper.estimate_prior(batch), (counts + 1.0) / (counts.sum() + 3)
    )
    present = y[1000:2500] != 2
    wrapper.fit(X[1000:2500][present], y[1000:2500][present])
    calm = batch[y[2500:] != 2]
    assert not wrapper.test_shift(calm).shifted
    counts = np.bincount(y[1000:2500][present], minlength=3)
    assert counts[2] == 0
    np.testing.assert_allclose(
        wrapper.estimate_prior(calm), (counts + 1.0) / (counts.sum() + 3)
    )
