"""Prediction sets under label shift: conformal_prediction_set and predict_set.

The sets are checked against a naive reference written from the formulas (a
loop over test rows and candidate labels, the weighted quantile by sorting),
on synthetic and real (CIFAR) posteriors; against MAPIE's split conformal;
for their coverage under shift; and for bad input.
"""

import math
import pickle
import warnings

import numpy as np
import pytest
from scipy.special import ndtri, softmax
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

import skprior.label_shift._classifier as classifier_module
from skprior import (
    PriorAdaptedClassifier,
    conformal_prediction_set,
    estimate_test_prior,
)

# -- the naive reference ------------------------------------------------------------


def naive_scores(p, score, u=None):
    """s(x, k) for every class of one row, by a loop over the ranking."""
    n_classes = len(p)
    if score == "lac":
        return 1.0 - p
    # Rank by decreasing probability, ties by column (stable); the mass over
    # the row's total (1 up to a rounding), so that the last rank scores 1.
    ranking = sorted(range(n_classes), key=lambda k: (-p[k], k))
    total = sum(p[j] for j in ranking)
    out = np.empty(n_classes)
    for position, k in enumerate(ranking):
        before = sum(p[j] for j in ranking[:position])
        out[k] = before / total + (p[k] if u is None else u * p[k]) / total
    return out


def naive_quantile(values, weights, own_weight, level):
    """The level-quantile of sum_i weights_i delta_{values_i} + own delta_inf.

    The smallest value whose normalised cumulative weight reaches ``level``
    (sorting, then walking), ``inf`` when only the point at infinity does.
    """
    total = sum(weights) + own_weight
    cumulative = 0.0
    for value, weight in sorted(zip(values, weights, strict=True)):
        cumulative += weight
        if cumulative >= level * total * (1 - 1e-12):
            return value
    return np.inf


def naive_level(values, labels, weights, level, z, n_classes, counts):
    """``level`` raised by z standard errors of the weighted share below the
    plain quantile (the training-conditional level), by loops. A row of
    weight w and frequency count c is c draws of weight w / c."""
    if z is None:
        return level
    plain = naive_quantile(values, weights, 0.0, level)
    total = sum(weights)
    variance = 0.0
    for k in range(n_classes):
        rows = [i for i in range(len(values)) if labels[i] == k]
        mass = sum(weights[i] for i in rows)
        if mass == 0:
            continue
        # (Jeffreys: half a draw of the class's mean weight below, half above)
        half = mass / sum(counts[i] for i in rows if weights[i] > 0) / 2
        below = sum(weights[i] for i in rows if values[i] <= plain)
        share = (below + half) / (mass + 2 * half)
        squares = sum(weights[i] ** 2 / counts[i] for i in rows if counts[i] > 0)
        variance += squares * share * (1 - share)
    return level + z * np.sqrt(variance) / total


def naive_exact_class_threshold(values, counts, alpha, delta):
    """Vovk's (2012) training-conditional threshold of one class, by loops.

    The values repeated by their integer counts and sorted; the smallest rank
    j whose binomial sum P(Bin(n, 1 - alpha) <= j - 1) reaches 1 - delta, at
    least the marginal rank ceil((1 - alpha)(n + 1)); its value, or inf.
    """
    expanded = sorted(
        v for v, c in zip(values, counts, strict=True) for _ in range(int(c))
    )
    n = len(expanded)
    rank, mass = n + 1, 0.0
    for j in range(1, n + 1):
        mass += math.comb(n, j - 1) * (1 - alpha) ** (j - 1) * alpha ** (n - j + 1)
        if mass >= 1 - delta:
            rank = j
            break
    rank = max(rank, math.ceil((1 - alpha) * (n + 1) - 1e-9))
    return expanded[rank - 1] if rank <= n else np.inf


def naive_sets(
    proba_cal,
    y_cal,
    proba_test,
    alpha,
    score,
    mode,
    test_prior=None,
    train_prior=None,
    sample_weight=None,
    delta=None,
    u_cal=None,
    u_test=None,
):
    """Podkopaev and Ramdas's sets, one test row and candidate label at a time."""
    n_cal, n_classes = proba_cal.shape
    sw = np.ones(n_cal) if sample_weight is None else np.asarray(sample_weight)
    values = [
        naive_scores(proba_cal[i], score, None if u_cal is None else u_cal[i])[y_cal[i]]
        for i in range(n_cal)
    ]
    if mode == "weighted":
        if train_prior is None:
            train_prior = [sum(sw[y_cal == k]) / sum(sw) for k in range(n_classes)]
        # (a class of the test prior without calibration weight: w = inf)
        measured = [sum(sw[y_cal == k]) > 0 for k in range(n_classes)]
        ratio = [
            0.0
            if test_prior[k] == 0
            else test_prior[k] / train_prior[k]
            if measured[k]
            else np.inf
            for k in range(n_classes)
        ]
    z = None if delta is None else ndtri(1 - delta)
    thresholds = []
    for y in range(n_classes):  # the candidate label of the test row
        if mode == "weighted":
            weights = [sw[i] * ratio[y_cal[i]] for i in range(n_cal)]
            own = ratio[y]
            rows = list(range(n_cal))
        elif mode == "split":
            weights, own, rows = list(sw), 1.0, list(range(n_cal))
        else:
            rows = [i for i in range(n_cal) if y_cal[i] == y]
            weights, own = [sw[i] for i in rows], 1.0
        vals = [values[i] for i in rows]
        labels = [y_cal[i] for i in rows]
        if mode == "class" and z is not None and all(w == int(w) for w in weights):
            thresholds.append(naive_exact_class_threshold(vals, weights, alpha, delta))
            continue
        counts = [sw[i] for i in rows]
        level = naive_level(vals, labels, weights, 1 - alpha, z, n_classes, counts)
        thresholds.append(
            naive_quantile(vals, weights, own, level) if level < 1 else np.inf
        )
    sets = np.zeros(proba_test.shape, dtype=bool)
    for i, p in enumerate(proba_test):
        s = naive_scores(p, score, None if u_test is None else u_test[i])
        for y in range(n_classes):
            sets[i, y] = s[y] <= thresholds[y]
    return sets


# -- data ---------------------------------------------------------------------------


def _posteriors(n, n_classes, rng, prior=None, strength=1.5):
    y = rng.choice(n_classes, size=n, p=prior)
    logits = rng.normal(size=(n, n_classes)) + strength * np.eye(n_classes)[y]
    return softmax(logits, axis=1), y


@pytest.fixture(scope="module")
def synthetic():
    rng = np.random.default_rng(27)
    proba_cal, y_cal = _posteriors(150, 4, rng)
    proba_test, y_test = _posteriors(40, 4, rng, prior=[0.6, 0.25, 0.1, 0.05])
    return proba_cal, y_cal, proba_test, y_test


MODES = [
    ("weighted", {"test_prior": [0.6, 0.25, 0.1, 0.05]}),
    ("weighted", {"test_prior": [0.7, 0.3, 0.0, 0.0]}),
    ("weighted", {"test_prior": [0.6, 0.25, 0.1, 0.05], "train_prior": [0.25] * 4}),
    ("class", {}),
    ("split", {}),
]


@pytest.mark.parametrize("delta", [None, 0.15])
@pytest.mark.parametrize("score", ["lac", "aps"])
@pytest.mark.parametrize("mode, priors", MODES)
def test_sets_equal_the_naive_reference(synthetic, mode, priors, score, delta):
    """Every mode and score, marginal and training-conditional: the formulas."""
    proba_cal, y_cal, proba_test, _ = synthetic
    weights = np.random.default_rng(1).integers(0, 3, size=len(y_cal)).astype(float)
    for sample_weight in (None, weights):
        got = conformal_prediction_set(
            proba_cal,
            y_cal,
            proba_test,
            alpha=0.1,
            score=score,
            mode=mode,
            delta=delta,
            sample_weight=sample_weight,
            **priors,
        )
        want = naive_sets(
            proba_cal,
            y_cal,
            proba_test,
            0.1,
            score,
            mode,
            sample_weight=sample_weight,
            delta=delta,
            **priors,
        )
        assert got.dtype == bool and got.shape == proba_test.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("generator", [False, True])
def test_randomized_aps_equals_the_naive_reference(synthetic, generator):
    """The U of each row is drawn on the host from random_state: cal rows
    first. A numpy Generator is taken too, as the intervals take it."""
    proba_cal, y_cal, proba_test, _ = synthetic
    got = conformal_prediction_set(
        proba_cal,
        y_cal,
        proba_test,
        score="aps_randomized",
        test_prior=[0.6, 0.25, 0.1, 0.05],
        delta=None,
        random_state=np.random.default_rng(3) if generator else 3,
    )
    rng = np.random.default_rng(3) if generator else np.random.RandomState(3)
    u_cal, u_test = rng.random(len(y_cal)), rng.random(len(proba_test))
    want = naive_sets(
        proba_cal,
        y_cal,
        proba_test,
        0.1,
        "aps",
        "weighted",
        test_prior=[0.6, 0.25, 0.1, 0.05],
        u_cal=u_cal,
        u_test=u_test,
    )
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["weighted", "class"])
def test_real_cifar_outputs_equal_the_naive_reference(cifar10, mode):
    """WideResNet's CIFAR-10 posteriors (float32): 600 calibration rows."""
    proba, labels = cifar10
    proba_cal, y_cal = proba[:600], labels[:600]
    batch = np.flatnonzero(labels[600:] < 3)[:60] + 600  # three classes only
    prior = estimate_test_prior(proba[batch], np.full(10, 0.1)).prior
    options = {"test_prior": prior} if mode == "weighted" else {}
    got = conformal_prediction_set(
        proba_cal, y_cal, proba[batch], mode=mode, score="aps", **options
    )
    want = naive_sets(
        proba_cal, y_cal, proba[batch], 0.1, "aps", mode, delta=0.15, **options
    )
    np.testing.assert_array_equal(got, want)


def test_split_equals_mapie(synthetic):
    """Plain split conformal (LAC) is MAPIE's SplitConformalClassifier's."""
    mapie = pytest.importorskip("mapie.classification")
    from sklearn.base import BaseEstimator, ClassifierMixin

    proba_cal, y_cal, proba_test, _ = synthetic

    class Stored(ClassifierMixin, BaseEstimator):  # X is the posteriors
        def fit(self, X, y):
            self.classes_ = np.arange(4)
            return self

        def predict_proba(self, X):
            return np.asarray(X)

    for alpha in (0.05, 0.1, 0.2):
        model = Stored().fit(proba_cal, y_cal)
        sets = mapie.SplitConformalClassifier(
            model, confidence_level=1 - alpha, conformity_score="lac", prefit=True
        )
        sets.conformalize(proba_cal, y_cal)
        want = sets.predict_set(proba_test)[1][:, :, 0]
        got = conformal_prediction_set(
            proba_cal, y_cal, proba_test, alpha=alpha, mode="split", delta=None
        )
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("delta", [None, 0.15])
@pytest.mark.parametrize("mode, priors", [MODES[0], MODES[3], MODES[4]])
def test_integer_weights_are_repeated_rows(synthetic, mode, priors, delta):
    """sample_weight are frequencies: a row of weight 3 is three rows, also for
    the training-conditional level (its variance counted w**2 for one draw
    where three draws give 3: larger sets in weighted and split modes)."""
    proba_cal, y_cal, proba_test, _ = synthetic
    counts = np.random.default_rng(2).integers(1, 4, size=len(y_cal))
    weighted = conformal_prediction_set(
        proba_cal, y_cal, proba_test, mode=mode, delta=delta,
        sample_weight=counts.astype(float), **priors,
    )  # fmt: skip
    repeated = conformal_prediction_set(
        np.repeat(proba_cal, counts, axis=0), np.repeat(y_cal, counts), proba_test,
        mode=mode, delta=delta, **priors,
    )  # fmt: skip
    np.testing.assert_array_equal(weighted, repeated)


@pytest.mark.parametrize("delta", [None, 0.15])
def test_calibration_prior_gives_the_split_sets(synthetic, delta):
    """With the calibration labels' own prior every weight is 1: split's sets."""
    proba_cal, y_cal, proba_test, _ = synthetic
    frequencies = np.bincount(y_cal, minlength=4) / len(y_cal)
    weighted = conformal_prediction_set(
        proba_cal, y_cal, proba_test, test_prior=frequencies, delta=delta
    )
    split = conformal_prediction_set(
        proba_cal, y_cal, proba_test, mode="split", delta=delta
    )
    np.testing.assert_array_equal(weighted, split)


def test_weighting_restores_the_coverage_under_shift():
    """A batch of the hard class: split under-covers, the weighted sets do not.

    Class 0 is hard (weak signal), classes 1-2 easy; the calibration rows are
    balanced, the test rows 90% class 0. Coverage over 20 draws of both.
    """
    rng = np.random.default_rng(0)
    strengths = np.array([0.3, 4.0, 4.0])
    coverage = {"split": [], "weighted": [], "class": []}
    for _ in range(20):
        y_cal = rng.integers(0, 3, size=600)
        y_test = rng.choice(3, size=600, p=[0.9, 0.05, 0.05])
        proba_cal, proba_test = (
            softmax(
                rng.normal(size=(len(y), 3)) + strengths[y][:, None] * np.eye(3)[y],
                axis=1,
            )
            for y in (y_cal, y_test)
        )
        prior = np.bincount(y_test, minlength=3) / len(y_test)
        for mode in coverage:
            options = {"test_prior": prior} if mode == "weighted" else {}
            sets = conformal_prediction_set(
                proba_cal, y_cal, proba_test, mode=mode, delta=None, **options
            )
            coverage[mode].append(sets[np.arange(len(y_test)), y_test].mean())
    assert np.mean(coverage["split"]) < 0.85
    assert np.mean(coverage["weighted"]) >= 0.89
    assert np.mean(coverage["class"]) >= 0.89


def test_delta_raises_the_level():
    """The training-conditional sets hold each set of the marginal ones."""
    rng = np.random.default_rng(5)
    proba_cal, y_cal = _posteriors(300, 5, rng)
    proba_test, _ = _posteriors(100, 5, rng)
    prior = [0.5, 0.2, 0.1, 0.1, 0.1]
    marginal = conformal_prediction_set(
        proba_cal, y_cal, proba_test, test_prior=prior, delta=None
    )
    conditional = conformal_prediction_set(
        proba_cal, y_cal, proba_test, test_prior=prior, delta=0.05
    )
    assert np.all(conditional >= marginal) and conditional.sum() > marginal.sum()


@pytest.mark.parametrize("train_prior", [None, [0.25] * 4])
@pytest.mark.parametrize("absent", ["dropped", "weight 0"])
def test_a_class_without_calibration_rows_is_in_every_set(
    synthetic, train_prior, absent
):
    """Nothing measures its scores: t = inf, with a warning naming it, also
    with a given train_prior and for rows of weight 0 (which weigh nothing:
    the other classes' sets are those of the rows dropped)."""
    proba_cal, y_cal, proba_test, _ = synthetic
    keep = y_cal != 3
    dropped = (proba_cal[keep], y_cal[keep], proba_test)
    options = {"test_prior": [0.4, 0.3, 0.2, 0.1], "train_prior": train_prior}
    weighted = (proba_cal, y_cal, proba_test)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # (no 0 * inf)
        with pytest.warns(UserWarning, match=r"Classes \[3\] are in every prediction"):
            if absent == "dropped":
                sets = conformal_prediction_set(*dropped, **options)
            else:
                sets = conformal_prediction_set(
                    *weighted, sample_weight=keep.astype(float), **options
                )
    assert sets[:, 3].all()
    reference = naive_sets(
        *dropped, 0.1, "lac", "weighted", options["test_prior"], train_prior, delta=0.15
    )
    np.testing.assert_array_equal(sets[:, :3], reference[:, :3])


def test_inputs_are_not_modified(synthetic):
    proba_cal, y_cal, proba_test, _ = synthetic
    copies = [a.copy() for a in (proba_cal, y_cal, proba_test)]
    prior = np.array([0.6, 0.25, 0.1, 0.05])
    conformal_prediction_set(proba_cal, y_cal, proba_test, test_prior=prior)
    for original, copy in zip((proba_cal, y_cal, proba_test), copies, strict=True):
        np.testing.assert_array_equal(original, copy)
    np.testing.assert_array_equal(prior, [0.6, 0.25, 0.1, 0.05])


@pytest.mark.parametrize(
    "options, pattern",
    [
        ({"alpha": 0.0}, r"'alpha' parameter .* range \(0.0, 1.0\)"),
        ({"alpha": 1.0}, r"'alpha' parameter .* range \(0.0, 1.0\)"),
        ({"score": "raps"}, r"'score' parameter"),
        ({"mode": "mondrian"}, r"'mode' parameter"),
        ({"delta": 1.5}, r"'delta' parameter"),
        ({"mode": "weighted", "test_prior": None}, r"needs test_prior="),
        ({"test_prior": [0.5, 0.5]}, r"test_prior must be .* per class \(4\)"),
        ({"y": np.r_[np.zeros(149, int), 4]}, r"outside 0..3"),
        ({"y": np.zeros(10, int)}, r"y has 10 labels but proba_cal has 150"),
        ({"proba_test": np.full((3, 5), 0.2)}, r"proba_test has 5 columns but"),
        ({"proba_cal": np.full((150, 4), 0.3)}, r"rows of proba_cal must sum to 1"),
    ],
)
def test_bad_input_is_refused(synthetic, options, pattern):
    proba_cal, y_cal, proba_test, _ = synthetic
    arguments = {
        "proba_cal": proba_cal,
        "y": y_cal,
        "proba_test": proba_test,
        "test_prior": [0.6, 0.25, 0.1, 0.05],
        **options,
    }
    with pytest.raises(ValueError, match=pattern):
        conformal_prediction_set(**arguments)


def test_a_prior_with_another_mode_warns(synthetic):
    proba_cal, y_cal, proba_test, _ = synthetic
    with pytest.warns(UserWarning, match="test_prior is used only by mode='weight"):
        conformal_prediction_set(
            proba_cal, y_cal, proba_test, mode="split", test_prior=[0.25] * 4
        )


# -- PriorAdaptedClassifier.predict_set ------------------------------------------------


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(11)
    centers = 2.0 * rng.normal(size=(4, 5))
    y = rng.integers(0, 4, size=3000)
    X = centers[y] + rng.normal(size=(3000, 5))
    model = LogisticRegression(max_iter=1000).fit(X[:1000], y[:1000])
    shifted = np.flatnonzero(y[2000:] == 0)[:250].tolist()
    shifted += np.flatnonzero(y[2000:] == 2)[:50].tolist()
    batch = np.array(shifted) + 2000
    return model, X, y, batch


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"set_mode": "class"},
        {"set_mode": "split", "set_delta": None},
        {"set_score": "aps", "method": "bbse"},
        {"method": "known", "test_prior": [0.7, 0.1, 0.1, 0.1]},
    ],
)
def test_predict_set_is_the_array_function_on_the_fit_rows(fitted, params):
    """The fit rows calibrate; the batch's own estimate weighs (estimate_prior)."""
    model, X, y, batch = fitted
    wrapper = PriorAdaptedClassifier(model, **params).fit(X[1000:2000], y[1000:2000])
    mode = params.get("set_mode", "weighted")
    prior = wrapper.estimate_prior(X[batch]) if mode == "weighted" else None
    want = conformal_prediction_set(
        model.predict_proba(X[1000:2000]),
        y[1000:2000],
        model.predict_proba(X[batch]),
        score=params.get("set_score", "lac"),
        mode=mode,
        delta=params.get("set_delta", 0.15),
        test_prior=prior,
    )
    np.testing.assert_array_equal(wrapper.predict_set(X[batch]), want)
    sets = wrapper.predict_set(X[batch], alpha=0.2)
    assert sets.dtype == bool and sets.shape == (len(batch), 4)


def test_predict_set_clones_tunes_and_pickles(fitted):
    model, X, y, batch = fitted
    wrapper = PriorAdaptedClassifier(model).fit(X[1000:2000], y[1000:2000])
    again = pickle.loads(pickle.dumps(wrapper))
    np.testing.assert_array_equal(
        again.predict_set(X[batch]), wrapper.predict_set(X[batch])
    )
    tuned = clone(wrapper).set_params(set_mode="class", set_delta=None)
    tuned.fit(X[1000:2000], y[1000:2000])
    assert tuned.get_params()["set_mode"] == "class"
    # set_mode and set_delta act at predict_set; set_score was scored in fit.
    wrapper.set_params(set_mode="split")
    wrapper.predict_set(X[batch])
    wrapper.set_params(set_score="aps")
    with pytest.raises(ValueError, match="set_score was changed .* call fit again"):
        wrapper.predict_set(X[batch])
    with pytest.raises(ValueError, match="alpha must be a float in"):
        tuned.predict_set(X[batch], alpha=1.5)


@pytest.mark.parametrize("train_prior", [None, [0.4, 0.2, 0.2, 0.2]])
def test_predict_set_without_shift_gives_the_split_sets(fitted, train_prior):
    """A batch where the test finds no shift keeps the fit labels' prior (not
    train_prior_, which may differ from it: a ratio of 1)."""
    model, X, y, _ = fitted
    wrapper = PriorAdaptedClassifier(model, train_prior=train_prior)
    wrapper.fit(X[1000:2000], y[1000:2000])
    split = clone(wrapper).set_params(set_mode="split").fit(X[1000:2000], y[1000:2000])
    assert not wrapper.test_shift(X[2000:2400]).shifted
    np.testing.assert_array_equal(
        wrapper.predict_set(X[2000:2400]), split.predict_set(X[2000:2400])
    )


def test_fit_runs_no_em_and_n_iter_is_computed_when_read(fitted, monkeypatch):
    """Issue 29: fit does not estimate the prior of its own data; n_iter_ does,
    once, with the value fit used to compute."""
    model, X, y, _ = fitted
    calls = []
    real = classifier_module.estimate_test_prior

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(classifier_module, "estimate_test_prior", counting)
    wrapper = PriorAdaptedClassifier(model, solver="squarem")
    wrapper.fit(X[1000:2000], y[1000:2000])
    assert calls == []
    expected = real(
        model.predict_proba(X[1000:2000]), wrapper.train_prior_, solver="squarem"
    ).n_passes
    assert wrapper.n_iter_ == expected and len(calls) == 1
    assert wrapper.n_iter_ == expected and len(calls) == 1  # (kept)
    assert PriorAdaptedClassifier(model, method="bbse").fit(X, y).n_iter_ == 1
    assert not hasattr(PriorAdaptedClassifier(model), "n_iter_")


def test_predict_set_on_a_multilabel_fit_is_refused():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    Y = (X[:, :2] + 0.5 * rng.normal(size=(200, 2)) > 0).astype(int)
    from sklearn.tree import DecisionTreeClassifier

    wrapper = PriorAdaptedClassifier(DecisionTreeClassifier(max_depth=3)).fit(X, Y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="label_estimators_"):
            wrapper.predict_set(X)


def test_a_one_class_model_fits_and_reads_n_iter():
    """fit no longer runs EM, which refused one column: the prior of a single
    class is 1 (no pass), and each set is that class."""
    from sklearn.tree import DecisionTreeClassifier

    X = np.random.default_rng(0).random((10, 3))
    wrapper = PriorAdaptedClassifier(DecisionTreeClassifier()).fit(X, np.zeros(10, int))
    assert wrapper.n_iter_ == 1
    np.testing.assert_array_equal(wrapper.predict_set(X), np.ones((10, 1), bool))


def test_the_training_conditional_level_grows_with_the_rows_of_a_class():
    """mode="class" at the default delta: a class is in every set until it has
    enough rows, then never again. At 9 rows (alpha 0.1) a normal approximation
    with the plain share at the quantile (1, variance 0) did not raise the level:
    coverage 0.9 over calibration sets with probability 0.61 (0.9**9 below).
    The exact rank is finite from the first n with 0.9**n <= 0.15: 19 rows
    (0.9**18 = 0.1501); the normal approximation waited for 25."""
    from skprior.label_shift._conformal import set_thresholds

    rng = np.random.default_rng(0)
    finite = []
    for n_rows in range(5, 41):
        scores = rng.random(n_rows + 50)
        y = np.r_[np.zeros(n_rows, int), np.ones(50, int)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            thresholds = set_thresholds(
                scores, y, 2, 0.1, "class", np.ones(len(y)), delta=0.15
            )
        finite.append(np.isfinite(thresholds[0]))
    first = finite.index(True)
    assert all(finite[first:]) and not any(finite[:first])
    assert 5 + first == 19


@pytest.mark.parametrize("n_rows", [19, 25, 33, 60, 200])
def test_class_sets_cover_with_probability_one_minus_delta(n_rows):
    """Training-conditional validity (Vovk, 2012), mode="class": over 2,000
    calibration sets of n_rows continuous scores (uniform, so that a
    threshold t covers t), the share whose threshold covers 1 - alpha is
    at least 1 - delta (up to 3 Monte Carlo standard errors) and no more
    than needed: at most the exact binomial probability of the next rank
    down, which the rule refused. The normal approximation it replaces
    covered with probability 0.93-0.985 at 25-50 rows (larger sets than the
    guarantee needs)."""
    from scipy.stats import binom

    from skprior.label_shift._conformal import set_thresholds

    alpha, delta, draws = 0.1, 0.15, 2000
    rng = np.random.default_rng(n_rows)
    covered = 0
    for _ in range(draws):
        scores = rng.random(n_rows)
        t = set_thresholds(
            scores,
            np.zeros(n_rows, int),
            1,
            alpha,
            "class",
            np.ones(n_rows),
            delta=delta,
        )[0]
        covered += t >= 1 - alpha
    share, se = covered / draws, np.sqrt(delta * (1 - delta) / draws)
    rank = int(binom.ppf(1 - delta, n_rows, 1 - alpha)) + 1
    below = binom.cdf(rank - 2, n_rows, 1 - alpha)  # (the next rank down)
    exact = binom.cdf(rank - 1, n_rows, 1 - alpha)
    assert below < 1 - delta <= exact
    assert share >= 1 - delta - 3 * se
    assert abs(share - exact) <= 3.5 * np.sqrt(exact * (1 - exact) / draws)


def test_aps_scores_the_last_rank_exactly_one_in_every_row():
    """APS's score of a row's last-ranked class is its whole mass: exactly 1
    in every row and dtype. The cumulative sums gave 1 - ulp in some float64
    rows and 1 in others, so a class whose threshold was the largest score
    left the sets of the rows that rank it last, in float64 and not in
    float32 (6 of 120 entries differed)."""
    from skprior.label_shift._conformal import score_matrix

    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.full(4, 0.5), 80)
    y = np.array([rng.choice(4, p=p) for p in proba])
    test = rng.dirichlet(np.full(4, 0.5), 30)
    for dtype in (np.float64, np.float32):
        assert np.all(score_matrix(test.astype(dtype), "aps").max(axis=1) == 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (small classes: in every set)
        sets = [
            conformal_prediction_set(
                proba.astype(dtype), y, test.astype(dtype), score="aps", mode="class"
            )
            for dtype in (np.float64, np.float32)
        ]
    np.testing.assert_array_equal(*sets)
