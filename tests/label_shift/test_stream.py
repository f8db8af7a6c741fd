"""On-line prior tracking: CumulativePrior, FollowTheHistory, FLHFTL and the
stream API of PriorAdaptedClassifier (bounded state, accuracy, references)."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import make_blobs
from sklearn.linear_model import LogisticRegression

from skprior import (
    FLHFTL,
    AggregatingPrior,
    CumulativePrior,
    FollowTheHistory,
    PriorAdaptedClassifier,
    adjust_to_prior,
    estimate_source_prior,
    estimate_test_prior,
)


def naive_projection(v):
    """Nearest point of the simplex, by bisection on the threshold theta."""
    low, high = v.min() - 1.0, v.max()
    for _ in range(200):
        theta = 0.5 * (low + high)
        if np.maximum(v - theta, 0).sum() > 1:
            low = theta
        else:
            high = theta
    return np.maximum(v - 0.5 * (low + high), 0)


def naive_lifetime(j):
    k = 0
    while j % 2 == 0:
        j //= 2
        k += 1
    return 2 ** (k + 2) + 1


def naive_flh_ftl(estimates, start, eta, prune):
    """FLH-FTL written from the formulas, one Python loop per expert."""
    experts, weights = [], []  # experts: (start step, list of estimates seen)
    prediction = start
    for t, s in enumerate(estimates, start=1):
        if experts:
            for i, (_, seen) in enumerate(experts):
                mean = sum(seen) / len(seen)
                weights[i] *= np.exp(-eta * np.sum((mean - s) ** 2))
            total = sum(weights)
            weights = [w / total * (1 - 1 / t) for w in weights]
            for _, seen in experts:
                seen.append(s)
        experts.append((t, [s]))
        weights.append(1 / t)
        if prune:
            keep = [
                i
                for i, (j, _) in enumerate(experts)
                if t < j + naive_lifetime(j) or j == t
            ]
            experts = [experts[i] for i in keep]
            weights = [weights[i] for i in keep]
        total = sum(weights)
        mix = sum(
            w / total * (sum(seen) / len(seen))
            for w, (_, seen) in zip(weights, experts, strict=True)
        )
        prediction = naive_projection(mix)
    return prediction, len(experts)


def stationary_stream(proba, labels, prior, n_rows, seed):
    """Rows of the stored outputs drawn with replacement at class ``prior``."""
    rng = np.random.default_rng(seed)
    n_classes = proba.shape[1]
    by_class = [np.flatnonzero(labels == c) for c in range(n_classes)]
    classes = rng.choice(n_classes, size=n_rows, p=prior)
    rows = np.array([rng.choice(by_class[c]) for c in classes])
    return proba[rows].astype(np.float64)


def test_cumulative_is_the_batch_mle_within_the_budget(cifar100):
    """While the stream fits in the budget the estimate is the exact MLE."""
    proba, _ = cifar100
    stream = proba[:800].astype(np.float64)
    q = np.full(100, 0.01)
    tracker = CumulativePrior(q, budget=1000, tol=1e-10)
    for batch in np.array_split(stream, 8):
        tracker.update(batch)
    expected = estimate_test_prior(stream, q, solver="squarem", tol=1e-10).prior
    assert tracker.n_folded_ == 0
    np.testing.assert_allclose(tracker.prior_, expected, atol=1e-6)


def test_cumulative_without_budget_is_on_line_em():
    """budget=0: the exact MLE of the first batch, then on-line EM with step
    b_t / N_t on the mean responsibility, its E-step taken 1% of the way to the
    training prior (naive loop)."""
    rng = np.random.default_rng(0)
    q = np.array([0.2, 0.3, 0.5])
    batches = [rng.dirichlet(np.ones(3), size=7) for _ in range(20)]
    tracker = CumulativePrior(q, budget=0, tol=1e-12)
    for batch in batches:
        tracker.update(batch)

    def responsibilities(rows, prior):
        r = rows * prior / q
        return (r / r.sum(axis=1, keepdims=True)).sum(axis=0)

    prior = estimate_test_prior(batches[0], q, solver="squarem", tol=1e-12).prior
    folded, n = responsibilities(batches[0], prior), len(batches[0])
    for batch in batches[1:]:
        n += len(batch)
        prior = (folded + responsibilities(batch, 0.99 * prior + 0.01 * q)) / n
        folded = folded + responsibilities(batch, prior)
    np.testing.assert_allclose(tracker.prior_, prior, atol=1e-9)


# (The first batches hold fewer rows than classes: their estimate is noise,
# and warns so; these tests follow the estimate to the end of the stream.)
@pytest.mark.filterwarnings("ignore:The stream's prior:UserWarning")
@pytest.mark.parametrize("seed", [0, 1])
def test_cumulative_is_as_good_as_the_batch_mle_on_a_stationary_stream(cifar100, seed):
    """CIFAR-100 outputs, 1,000 batches of 10 rows at a random prior: the L1
    error to the true prior is within 10% (+0.01) of the batch MLE's."""
    proba, labels = cifar100
    prior = np.random.default_rng(100 + seed).dirichlet(np.ones(100))
    stream = stationary_stream(proba, labels, prior, 10_000, seed)
    q = np.full(100, 0.01)
    tracker = CumulativePrior(q)
    for batch in np.split(stream, 1000):
        tracker.update(batch)
    batch_mle = estimate_test_prior(stream, q, solver="squarem", tol=1e-9).prior
    batch_error = np.abs(batch_mle - prior).sum()
    assert tracker.n_folded_ == 9_000
    assert np.abs(tracker.prior_ - prior).sum() <= 1.1 * batch_error + 0.01


def _state_arrays(wrapper):
    tracker = wrapper._stream.tracker
    return {k: v.shape for k, v in vars(tracker).items() if isinstance(v, np.ndarray)}


@pytest.mark.parametrize("online", ["cumulative", "fth", "flh-ftl"])
def test_state_does_not_grow_with_the_stream(blob_wrapper, online):
    """After 2,000 updates of 10 rows the pickled estimator is within 1.5x of
    its size after 200; for cumulative and FTH no stored array grows at all."""
    model, X, y = blob_wrapper
    # BBSE batch estimates for the drift trackers: cheap, so the test is fast.
    method = "mle" if online == "cumulative" else "bbse"
    wrapper = PriorAdaptedClassifier(model, method=method, online=online)
    wrapper.fit(X[1500:2000], y[1500:2000])
    stream = X[np.random.default_rng(0).integers(2000, 3000, size=20_000)]
    sizes, shapes = {}, {}
    for step, batch in enumerate(np.split(stream, 2000), start=1):
        wrapper.update_prior(batch)
        if step in (200, 2000):
            sizes[step] = len(pickle.dumps(wrapper))
            shapes[step] = _state_arrays(wrapper)
    assert wrapper.n_seen_ == 20_000
    assert sizes[2000] <= 1.5 * sizes[200]
    if online != "flh-ftl":
        assert shapes[2000] == shapes[200]
    else:  # O(log t) experts
        assert wrapper._stream.tracker.n_experts_ <= 3 * np.log2(2000) + 3


def test_follow_the_history_is_the_projected_mean():
    """FTH after s_1..s_t: the projection of their mean on the simplex."""
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.3, size=(40, 4))
    # (unbiased, unclipped: entries may be negative; each sums to one)
    estimates = 0.25 + noise - noise.mean(axis=1, keepdims=True)
    tracker = FollowTheHistory(np.full(4, 0.25))
    np.testing.assert_array_equal(tracker.prior_, np.full(4, 0.25))
    for t, s in enumerate(estimates, start=1):
        tracker.update(s)
        expected = naive_projection(estimates[:t].mean(axis=0))
        np.testing.assert_allclose(tracker.prior_, expected, atol=1e-9)


@pytest.mark.parametrize("eta", [0.25, 1.0, 8.0])
def test_flh_ftl_without_pruning_equals_the_naive_loop(eta):
    """Every expert kept: the implementation equals FLH-FTL from the formulas."""
    rng = np.random.default_rng(2)
    means = np.where(np.arange(60)[:, None] < 30, [0.6, 0.3, 0.1], [0.1, 0.3, 0.6])
    noise = rng.normal(0, 0.2, size=(60, 3))
    estimates = means + noise - noise.mean(axis=1, keepdims=True)  # (sum to one)
    start = np.full(3, 1 / 3)
    tracker = FLHFTL(start, learning_rate=eta, pruning=False)
    for s in estimates:
        tracker.update(s)
    expected, n_experts = naive_flh_ftl(list(estimates), start, eta, prune=False)
    assert tracker.n_experts_ == n_experts == 60
    np.testing.assert_allclose(tracker.prior_, expected, atol=1e-9)


def test_flh_ftl_pruning_keeps_the_lifetimes_and_log_many_experts():
    """With pruning: the naive loop with Hazan-Seshadhri lifetimes, and the
    number of experts alive grows like log t."""
    rng = np.random.default_rng(3)
    estimates = rng.dirichlet(np.ones(3), size=300)
    start = np.full(3, 1 / 3)
    tracker = FLHFTL(start, learning_rate=1.0)
    counts = []
    for s in estimates:
        counts.append(tracker.update(s).n_experts_)
    expected, n_experts = naive_flh_ftl(list(estimates), start, 1.0, prune=True)
    assert tracker.n_experts_ == n_experts
    np.testing.assert_allclose(tracker.prior_, expected, atol=1e-9)
    t = np.arange(1, 301)
    assert np.all(np.array(counts) <= 3 * np.log2(t) + 3)


def test_flh_ftl_follows_a_switch_that_fth_averages_away():
    """After a switch of the prior, FLH-FTL moves to the new prior."""
    start = np.full(2, 0.5)
    flh, fth = FLHFTL(start), FollowTheHistory(start)
    rng = np.random.default_rng(4)
    for t in range(200):
        prior = np.array([0.9, 0.1]) if t < 100 else np.array([0.2, 0.8])
        noise = rng.normal(0, 0.1)
        s = prior + [noise, -noise]  # (an estimate sums to one)
        flh.update(s)
        fth.update(s)
    assert abs(flh.prior_[0] - 0.2) < 0.1
    assert abs(fth.prior_[0] - 0.55) < 0.05


def test_wrapper_bbse_estimate_is_the_unclipped_inverse(blob_wrapper):
    """online="fth" with method="bbse": s_t = C_cond^{-1} mu_t (conditional
    confusion from the fit labels), and online_prior_ their projected mean."""
    model, X, y = blob_wrapper
    wrapper = PriorAdaptedClassifier(model, method="bbse", online="fth")
    wrapper.fit(X[1500:2000], y[1500:2000])
    predicted = model.predict(X[1500:2000])
    conditional = np.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            conditional[i, j] = np.mean(predicted[y[1500:2000] == j] == i)
    estimates = []
    for batch in np.array_split(X[2000:2100], 10):
        wrapper.update_prior(batch)
        mu = np.bincount(model.predict(batch), minlength=3) / len(batch)
        estimates.append(np.linalg.solve(conditional, mu))
    np.testing.assert_allclose(
        wrapper.online_prior_, naive_projection(np.mean(estimates, axis=0)), atol=1e-9
    )


def test_wrapper_rlls_estimates_are_not_gated(blob_wrapper):
    """online="fth" with method="rlls": s_t is each batch's RLLS estimate, as
    with shift_level=None, also where the batch's test of no shift would give
    q (10-row batches): online_prior_ is their projected mean."""
    model, X, y = blob_wrapper
    gated = PriorAdaptedClassifier(model, method="rlls", online="fth")
    plain = PriorAdaptedClassifier(model, method="rlls", shift_level=None)
    for wrapper in (gated, plain):
        wrapper.fit(X[1500:2000], y[1500:2000])
    estimates, kept_q = [], 0
    for batch in np.array_split(X[2000:2300], 30):
        gated.update_prior(batch)
        estimates.append(plain.estimate_prior(batch))
        kept_q += np.array_equal(gated.estimate_prior(batch), gated.train_prior_)
    assert kept_q > 0  # (the case at stake: batches the test leaves at q)
    np.testing.assert_allclose(
        gated.online_prior_, naive_projection(np.mean(estimates, axis=0)), atol=1e-9
    )


@pytest.mark.parametrize("online", ["fth", "flh-ftl"])
def test_drift_trackers_leave_predict_proba_alone(blob_wrapper, online):
    """update_prior with a drift tracker changes online_prior_, not predict_proba."""
    model, X, y = blob_wrapper
    wrapper = PriorAdaptedClassifier(model, method="map", online=online)
    wrapper.fit(X[1500:2000], y[1500:2000])
    before = wrapper.predict_proba(X[2000:2100])
    for batch in np.array_split(X[2000:2300][y[2000:2300] == 0], 5):
        wrapper.update_prior(batch)
    np.testing.assert_array_equal(wrapper.predict_proba(X[2000:2100]), before)
    assert wrapper.online_prior_[0] > wrapper.train_prior_[0] + 0.05
    wrapper.reset_prior()
    np.testing.assert_array_equal(wrapper.online_prior_, wrapper.train_prior_)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: PriorAdaptedClassifier(online="sliding"), "online"),
        (lambda: PriorAdaptedClassifier(online_budget=-1), "online_budget"),
        (
            lambda: PriorAdaptedClassifier(online_learning_rate=0),
            "online_learning_rate",
        ),
    ],
)
def test_wrapper_refuses_bad_stream_parameters(blob_wrapper, make, match):
    """Bad on-line parameters are refused at fit, naming the parameter."""
    model, X, y = blob_wrapper
    wrapper = make().set_params(estimator=model)
    with pytest.raises(ValueError, match=match):
        wrapper.fit(X[1500:2000], y[1500:2000])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: CumulativePrior([0.5, 0.5], budget=-1), "budget"),
        (lambda: CumulativePrior([0.5, 0.5], budget=1.5), "budget"),
        (lambda: FLHFTL([0.5, 0.5], learning_rate=0), "learning_rate"),
        (lambda: FLHFTL([0.5, 0.5], pruning="yes"), "pruning"),
        (lambda: FollowTheHistory([0.5, 0.5]).update([0.2, 0.3, 0.5]), "estimate"),
        (lambda: FLHFTL([0.5, 0.5]).update([np.nan, 1.0]), "estimate"),
        (lambda: CumulativePrior([0.5, 0.5]).update(np.full((2, 3), 1 / 3)), "columns"),
        (lambda: CumulativePrior([1.0, 0.0]), "train_prior"),
    ],
)
def test_trackers_refuse_bad_input(call, match):
    """Bad arguments raise a ValueError that names them."""
    with pytest.raises(ValueError, match=match):
        call()


def test_trackers_never_alias_the_callers_arrays():
    """The state holds copies: changing the caller's arrays changes nothing."""
    proba = np.array([[0.9, 0.1], [0.3, 0.7]])
    estimate = np.array([0.6, 0.4])
    cumulative = CumulativePrior([0.5, 0.5]).update(proba)
    flh = FLHFTL([0.5, 0.5]).update(estimate)
    before = cumulative.prior_.copy(), flh.prior_.copy()
    proba[:] = 0.5
    estimate[:] = 0.5
    cumulative.update(np.array([[0.8, 0.2]]))
    flh.update(np.array([0.6, 0.4]))
    assert cumulative._window[0, 0] == 0.9
    assert np.allclose(flh._sums[0], [1.2, 0.8])
    assert before[0].shape == (2,)


# (The first batches hold fewer rows than classes: their estimate is noise,
# and warns so; these tests follow the estimate to the end of the stream.)
@pytest.mark.filterwarnings("ignore:The stream's prior:UserWarning")
@pytest.mark.parametrize("budget", [0, 1000])
def test_cumulative_recovers_a_class_it_drove_to_zero(budget):
    """Hard 0/1 posteriors (trees, kNN) one row at a time: the first rows drive
    the other classes to exactly 0, from where EM cannot move them; the on-line
    step starts 1% of the way to the training prior, so the estimate still
    reaches the batch MLE of the stream."""
    rng = np.random.default_rng(0)
    proba = np.eye(3)[rng.choice(3, 3000, p=[0.5, 0.3, 0.2])]
    q = np.full(3, 1 / 3)
    tracker = CumulativePrior(q, budget=budget)
    for i in range(len(proba)):
        tracker.update(proba[i : i + 1])
    expected = estimate_test_prior(proba, q).prior
    np.testing.assert_allclose(tracker.prior_, expected, atol=1e-3)


def test_cumulative_mle_from_fewer_rows_than_classes_warns():
    """One row's MLE is a vertex: a warning, not a silent near one-hot prior.

    None once the stream holds more rows than classes, or with MAP
    (``dirichlet_alpha > 1``); the classifier passes it on only when it uses
    the estimate (a stream found shifted, or ``shift_level=None``).
    """
    q = np.full(5, 0.2)
    row = np.array([[0.01, 0.61, 0.03, 0.18, 0.17]])
    tracker = CumulativePrior(q)
    with pytest.warns(UserWarning, match="from fewer rows than its 5 classes"):
        tracker.update(row)
    assert tracker.prior_.max() > 0.99  # (the vertex the warning names)
    with pytest.warns(UserWarning, match="from fewer rows than its 5 classes"):
        tracker.update(row)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tracker.update(rng.dirichlet(np.ones(5), size=10))
        CumulativePrior(q, dirichlet_alpha=2.0).update(row)

    X, y = make_blobs(600, centers=5, random_state=0)
    model = LogisticRegression().fit(X[:300], y[:300])
    unused = PriorAdaptedClassifier(model, online="cumulative").fit(X[300:], y[300:])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        unused.update_prior(X[:1])
    assert not unused.online_shifted_
    used = PriorAdaptedClassifier(
        model, online="cumulative", method="mle", shift_level=None
    ).fit(X[300:], y[300:])
    with pytest.warns(UserWarning, match="The stream's prior"):
        used.update_prior(X[:1])


def test_cumulative_mle_warns_with_a_budget_below_the_classes():
    """With budget=0 the second row takes the on-line step: it warns too."""
    tracker = CumulativePrior(np.full(5, 0.2), budget=0)
    row = np.array([[0.01, 0.61, 0.03, 0.18, 0.17]])
    with pytest.warns(UserWarning, match="from fewer rows than its"):
        tracker.update(row)
    assert tracker.n_folded_ == 1
    with pytest.warns(UserWarning, match="from fewer rows than its 5 classes"):
        tracker.update(row)


class _Float32Model(ClassifierMixin, BaseEstimator):
    """A fitted "model" whose posteriors are its input rows, in float32."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def predict_proba(self, X):
        return np.asarray(X, dtype=np.float32)


@pytest.mark.parametrize("method", ["mle", "bbse"])
def test_wrapper_state_stays_float64_for_a_float32_model(method):
    """The array functions return float32 for float32 posteriors, but the
    wrapper's fitted state and stream stay float64 (rounded only where it is
    published: online_prior_ follows the batch's dtype)."""
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(3), size=900).astype(np.float32)
    y = np.array([rng.choice(3, p=p / p.sum()) for p in proba.astype(np.float64)])
    model = PriorAdaptedClassifier(
        _Float32Model().fit(proba, y),
        method=method,
        source_prior="mean_posterior",
        shift_level=None,
    ).fit(proba[:300], y[:300])
    assert model.train_prior_.dtype == np.float64
    np.testing.assert_array_equal(
        model.train_prior_.astype(np.float32),
        estimate_source_prior(proba[:300], source="mean_posterior"),
    )
    assert model.estimate_prior(proba[300:600]).dtype == np.float64
    model.update_prior(proba[600:])
    assert model.online_prior_.dtype == np.float32


@pytest.mark.parametrize("method", ["mle", "map"])  # (bbse / rlls fit K >= 2)
@pytest.mark.parametrize("online", ["aggregate", "cumulative", "fth", "flh-ftl"])
@pytest.mark.parametrize("shift_level", [0.01, None])
def test_a_one_class_stream_keeps_the_prior_of_one(method, online, shift_level):
    """One class (fit takes it): its prior is 1 whatever the stream, and
    update_prior counts the rows rather than refusing one column."""
    from sklearn.tree import DecisionTreeClassifier

    X = np.random.default_rng(0).random((30, 3))
    wrapper = PriorAdaptedClassifier(
        DecisionTreeClassifier(), method=method, online=online, shift_level=shift_level
    ).fit(X, np.zeros(30, int))
    for batch in np.array_split(X, 3):
        wrapper.update_prior(batch)
    np.testing.assert_array_equal(wrapper.online_prior_, [1.0])
    np.testing.assert_array_equal(wrapper.predict_proba(X[:4]), np.ones((4, 1)))
    np.testing.assert_array_equal(wrapper.predict_proba_online(X[:4]), np.ones((4, 1)))


@pytest.mark.parametrize("online", ["cumulative", "fth"])
def test_a_row_sure_of_a_class_the_stream_rules_out_keeps_its_posterior(online):
    """A tree's hard posteriors, a stream of class-0 rows: the tracker's
    prior is exactly [1, 0, 0]. A new row sure of class 1 had adjusted mass 0
    and got the prior's mode, [1, 0, 0]; it keeps its own posterior."""
    from sklearn.tree import DecisionTreeClassifier

    X, y = make_blobs(3000, centers=3, cluster_std=0.5, random_state=0)
    est = PriorAdaptedClassifier(
        DecisionTreeClassifier(random_state=0), online=online, shift_level=None
    ).fit(X[:1500], y[:1500])
    est.update_prior(X[1500:][y[1500:] == 0][:20])
    assert np.all(est.online_prior_[1:] == 0)
    rows = X[1500:][y[1500:] == 1][:3]
    np.testing.assert_array_equal(est.estimator_.predict_proba(rows)[:, 1], 1.0)
    np.testing.assert_allclose(est.predict_proba_online(rows), [[0, 1, 0]] * 3)
    # (rows the prior allows are as before: reweighted to the prior)
    zeros = X[1500:][y[1500:] == 0][20:23]
    np.testing.assert_allclose(est.predict_proba_online(zeros), [[1, 0, 0]] * 3)


@pytest.mark.filterwarnings("ignore:The MLE test prior:UserWarning")  # (10 rows)
def test_a_call_that_raises_leaves_the_stream_as_it_was():
    """update_prior after set_params(max_iter=-1) or shift_level=2.0 raised
    halfway, with the batch already counted in n_seen_ and the shift test:
    parameters are checked first, so a retry counts the batch once."""
    X, y = make_blobs(3000, centers=3, cluster_std=3.0, random_state=0)
    est = PriorAdaptedClassifier(LogisticRegression(), online="fth")
    est.fit(X[:1500], y[:1500])
    est.update_prior(X[1500:1510])
    state = pickle.dumps(est._stream)
    for bad in ({"max_iter": -1}, {"shift_level": 2.0}):
        est.set_params(**bad)
        with pytest.raises(ValueError):
            est.update_prior(X[1510:1520])
        assert pickle.dumps(est._stream) == state
        est.set_params(max_iter=10_000, shift_level=0.01)
    est.update_prior(X[1510:1520])
    assert est.n_seen_ == 20


@pytest.mark.parametrize("online", ["aggregate", "cumulative"])
def test_a_bad_rlls_penalty_leaves_the_stream_as_it_was(online):
    """An RLLS stream after set_params(rlls_reg=True, -1 or 'foo') raised
    only once the batch was counted (n_seen, the prediction counts, the
    shift test): a retry counted it twice. -1 and 'foo' were even taken
    (the latter as 'auto'). The penalty is now checked first."""
    X, y = make_blobs(3000, centers=3, cluster_std=3.0, random_state=0)
    est = PriorAdaptedClassifier(LogisticRegression(), method="rlls", online=online)
    est.fit(X[:1500], y[:1500])
    est.update_prior(X[1500:1530])
    state = pickle.dumps(est._stream)
    for bad in (True, -1.0, "foo"):
        est.set_params(rlls_reg=bad)
        with pytest.raises(ValueError, match="RLLS takes a penalty >= 0 or 'auto'"):
            est.update_prior(X[1530:1540])
        assert pickle.dumps(est._stream) == state
        with pytest.raises(ValueError, match="RLLS takes a penalty"):
            est.set_params(shift_level=None).predict_proba(X[1530:1540])
        est.set_params(shift_level=0.01)
    est.set_params(rlls_reg="auto").update_prior(X[1530:1540])
    assert est.n_seen_ == 40


def test_the_online_weight_is_the_one_the_prediction_uses():
    """set_params(shift_level=None) mid-stream takes effect at the next
    update_prior, as every stream setting: until then the prediction is the
    published w * online_prior_ + (1 - w) * train_prior_ (it jumped to w = 1
    while online_weight_ still read 0.09)."""
    X, y = make_blobs(3000, centers=3, cluster_std=3.0, random_state=0)
    est = PriorAdaptedClassifier(LogisticRegression(), online="cumulative")
    est.fit(X[:1500], y[:1500])
    est.update_prior(X[1500:1510])
    assert 0 < est.online_weight_ < 1

    def published():
        w = est.online_weight_
        prior = w * est.online_prior_ + (1 - w) * est.train_prior_
        return adjust_to_prior(inner, est.train_prior_, prior)

    inner = est.estimator_.predict_proba(X[:5])
    est.set_params(shift_level=None)
    np.testing.assert_allclose(est.predict_proba_online(X[:5]), published())
    est.update_prior(X[1510:1520])
    assert est.online_weight_ == 1.0
    np.testing.assert_allclose(est.predict_proba_online(X[:5]), published())


@pytest.mark.parametrize("tracker", [CumulativePrior, AggregatingPrior])
def test_a_tracker_of_one_class_is_refused_when_built(tracker):
    with pytest.raises(ValueError, match="at least 2 classes"):
        tracker([1.0])


def test_an_overflowing_learning_rate_is_refused():
    """1e308 times a log-likelihood overflows the weights: NaN before."""
    with pytest.raises(ValueError, match="learning_rate"):
        AggregatingPrior([0.5, 0.5], learning_rate=1e308)


def test_a_warning_raised_as_an_error_leaves_the_stream_whole(cifar100):
    """Under warnings as errors (pytest's -W error), the cumulative tracker's
    warning of fewer rows than classes was raised after it had counted the
    row and before it stored it, and before the wrapper's n_seen_: a retry
    counted it twice. The warnings of an update are now given once its state
    is whole: the stream after the raised warning is the stream that
    ignored it."""
    proba, labels = cifar100
    model = _Float32Model().fit(proba[:2000], labels[:2000])
    given = [proba[2000:2001], proba[2001:2300]]
    streams = []
    for action in ("error", "ignore"):
        est = PriorAdaptedClassifier(model, online="cumulative", shift_level=None)
        est.fit(proba[:2000], labels[:2000])
        with warnings.catch_warnings():
            warnings.simplefilter(action)
            if action == "error":
                with pytest.raises(UserWarning, match="fewer rows than its 100"):
                    est.update_prior(given[0])
            else:
                est.update_prior(given[0])
        assert est.n_seen_ == est._stream.tracker.n_seen_ == 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.update_prior(given[1])
        streams.append(est.online_prior_)
    np.testing.assert_array_equal(streams[0], streams[1])


def test_no_warning_storm_over_a_stream_of_single_rows(cifar100):
    """The cumulative tracker's warning named the rows so far, so each of a
    stream's first 99 single rows over 100 classes gave a warning of its own;
    its words are now the same at each row, and Python's filter shows it once."""
    proba, labels = cifar100
    model = _Float32Model().fit(proba[:2000], labels[:2000])
    est = PriorAdaptedClassifier(model, online="cumulative", shift_level=None)
    est.fit(proba[:2000], labels[:2000])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for row in range(2000, 2150):
            est.update_prior(proba[row : row + 1])
    assert len([w for w in caught if "The stream's prior" in str(w.message)]) == 1
