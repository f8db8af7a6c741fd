"""Tests of effective_train_prior: undoing resampling and class weights.

The prior is checked against the class frequencies that resampling really
produces (imbalanced-learn's samplers) and against the formula
q_eff ~ n_c r_c v_c written here; the correction is checked on real data
(PMLB page_blocks, stored in benchmarks/data): after undersampling or
class_weight="balanced", Bayes' rule from the effective prior makes the test
log-loss and ECE better than uncorrected and close to a model trained without
resampling; bagged undersampling (PMLB ann_thyroid), corrected, closer still.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from imblearn.ensemble import BalancedBaggingClassifier
from imblearn.over_sampling import RandomOverSampler
from imblearn.pipeline import make_pipeline as make_imb_pipeline
from imblearn.under_sampling import RandomUnderSampler
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skprior import PriorAdaptedClassifier, adjust_to_prior, effective_train_prior
from skprior.metrics import expected_calibration_error

DATA = Path(__file__).resolve().parents[2] / "benchmarks"


def frequencies(labels, classes):
    return np.array([np.mean(labels == c) for c in classes])


@pytest.fixture(scope="module")
def imbalanced():
    rng = np.random.default_rng(0)
    y = np.repeat(np.array(["a", "b", "c"]), [600, 150, 50])
    X = rng.normal(size=(y.size, 2)) + (y[:, None] == np.array(["a", "b"])) * 2.0
    return X, y


def test_no_option_is_the_label_frequencies(imbalanced):
    """Without resampling or weights the prior is the label frequencies of y."""
    _, y = imbalanced
    np.testing.assert_allclose(effective_train_prior(y), [0.75, 0.1875, 0.0625])


def test_undersampler_strategy_gives_the_resampled_frequencies(imbalanced):
    """RandomUnderSampler's sampling_strategy_ gives the frequencies it made."""
    X, y = imbalanced
    sampler = RandomUnderSampler(sampling_strategy={"a": 200}, random_state=0)
    _, y_resampled = sampler.fit_resample(X, y)
    prior = effective_train_prior(y, resampled_counts=sampler.sampling_strategy_)
    np.testing.assert_allclose(prior, frequencies(y_resampled, ["a", "b", "c"]))


def test_oversampled_counts_give_the_resampled_frequencies(imbalanced):
    """Counts after over-sampling (n_c + added) give the resampled frequencies."""
    X, y = imbalanced
    sampler = RandomOverSampler(random_state=0)
    _, y_resampled = sampler.fit_resample(X, y)
    counts = pd.Series(y).value_counts().to_dict()
    after = {c: counts[c] + added for c, added in sampler.sampling_strategy_.items()}
    prior = effective_train_prior(y, resampled_counts=after)
    np.testing.assert_allclose(prior, frequencies(y_resampled, ["a", "b", "c"]))
    np.testing.assert_allclose(prior, np.full(3, 1 / 3))


def test_class_weight_and_sampling_ratio_follow_the_formula(imbalanced):
    """q_eff ~ n_c r_c v_c with r the sampling rates and v the class weights."""
    _, y = imbalanced
    weight = {"a": 1.0, "b": 3.0, "c": 7.0}
    rate = {"a": 0.2}  # classes left out are kept whole
    counts = np.array([600.0, 150.0, 50.0])
    expected = counts * np.array([0.2, 1, 1]) * np.array([1.0, 3.0, 7.0])
    prior = effective_train_prior(y, class_weight=weight, sampling_ratio=rate)
    np.testing.assert_allclose(prior, expected / expected.sum())
    np.testing.assert_allclose(
        effective_train_prior(y, class_weight="balanced"), np.full(3, 1 / 3)
    )


def test_sample_weight_counts_weighted_rows():
    """With sample_weight the class counts are weighted sums."""
    y = np.array([0, 0, 1, 1])
    prior = effective_train_prior(y, sample_weight=[1, 1, 1, 3], class_weight={1: 2})
    np.testing.assert_allclose(prior, np.array([2, 8]) / 10)


def test_prior_dtype_follows_the_float_weights_else_the_labels():
    """float32 weights (else float32 labels) give a float32 prior, the float64
    one rounded; integer labels alone, or float64 weights, give float64."""
    y = np.array([0, 0, 1, 2, 2, 2])
    w = np.array([1.0, 0.5, 2.0, 1.0, 1.0, 0.25])
    exact = np.bincount(y, weights=w) / w.sum()
    assert effective_train_prior(y).dtype == np.float64
    for weights, labels, dtype in [
        (w, y, np.float64),
        (w.astype(np.float32), y, np.float32),
        (w, y.astype(np.float32), np.float64),
        (None, y.astype(np.float32), np.float32),
    ]:
        prior = effective_train_prior(labels, sample_weight=weights)
        assert prior.dtype == dtype
        if weights is not None:
            np.testing.assert_array_equal(prior, exact.astype(dtype))


def test_bad_input_names_the_argument(imbalanced):
    """Unknown labels, wrong lengths and zero rates are refused with the fix."""
    _, y = imbalanced
    with pytest.raises(ValueError, match="class_weight has keys \\['z'\\]"):
        effective_train_prior(y, class_weight={"z": 2.0})
    with pytest.raises(ValueError, match="sampling_ratio must have one entry"):
        effective_train_prior(y, sampling_ratio=[0.5, 1.0])
    with pytest.raises(
        ValueError, match="resampled_counts must be finite and positive"
    ):
        effective_train_prior(y, resampled_counts={"c": 0})
    with pytest.raises(ValueError, match="class_weight"):
        effective_train_prior(y, class_weight="auto")


# -- the correction, on real data ---------------------------------------------------


def load_pmlb(name):
    table = pd.read_csv(DATA / "data" / "pmlb" / f"{name}.tsv.gz", sep="\t")
    y = np.unique(table.pop("target").to_numpy(), return_inverse=True)[1]
    return table.to_numpy(dtype=np.float64), y


@pytest.fixture(scope="module")
def page_blocks():
    return load_pmlb("page_blocks")


def _halves(X, y):
    return train_test_split(X, y, train_size=0.5, stratify=y, random_state=0)


def _full_model_scores(X_train, y_train, X_test, y_test):
    """(log-loss, ECE) on the test half of the model trained without resampling."""
    plain = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000))
    return _scores(y_test, plain.fit(X_train, y_train).predict_proba(X_test))


def _undersampled_and_corrected(X_train, y_train, X_test):
    """Test probabilities of one model trained under-sampled to balance, and
    those corrected from the sampler's counts back to the training prior."""
    under = make_imb_pipeline(
        StandardScaler(),
        RandomUnderSampler(random_state=0),
        LogisticRegression(max_iter=5000),
    ).fit(X_train, y_train)
    proba = under.predict_proba(X_test)
    q_eff = effective_train_prior(y_train, resampled_counts=under[1].sampling_strategy_)
    return proba, adjust_to_prior(proba, q_eff, effective_train_prior(y_train))


def _scores(y, proba):
    return log_loss(y, proba, labels=np.arange(proba.shape[1])), (
        expected_calibration_error(y, proba)
    )


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "5 classes"])
def test_undersampling_corrected_is_calibrated_on_the_original(page_blocks, binary):
    """Undersampled to balance, the corrected model beats the uncorrected one.

    On the untouched test half of page_blocks (90% of one class), log-loss and
    ECE after the correction are lower than before it, and close to those of
    the model trained without resampling (binary: within 0.03 log-loss, 0.01
    ECE; 5 classes, where undersampling keeps 28 rows per class of 2,736, the
    log-loss is higher by the information lost, the ECE within 0.02).
    """
    X, y = page_blocks
    if binary:
        y = (y != 0).astype(int)
    X_train, X_test, y_train, y_test = _halves(X, y)
    reference = _full_model_scores(X_train, y_train, X_test, y_test)
    proba, corrected = _undersampled_and_corrected(X_train, y_train, X_test)
    before, after = _scores(y_test, proba), _scores(y_test, corrected)
    assert after[0] < before[0] and after[1] < before[1]
    if binary:
        assert abs(after[0] - reference[0]) < 0.03
        assert abs(after[1] - reference[1]) < 0.01
    else:
        assert abs(after[1] - reference[1]) < 0.02


def test_bagged_undersampling_corrected_matches_the_full_model():
    """Bagged undersampling, undone by the wrapper, loses nothing measurable.

    imbalanced-learn's BalancedBaggingClassifier (10 members, each fitted on a
    bootstrap sample under-sampled to balance) saw every class equally often:
    its effective prior is uniform. Wrapped in PriorAdaptedClassifier with
    that prior, on PMLB ann_thyroid (3 classes, 2% / 5% / 93%; undersampling
    keeps 249 of 3,600 training rows), the corrected test log-loss and ECE
    beat the uncorrected ones and are within 0.01 of the model trained without
    resampling (whose log-loss varies by 0.008 over splits), nearer in
    log-loss than one undersampled model corrected alike.
    """
    X, y = load_pmlb("ann_thyroid")
    X_train, X_test, y_train, y_test = _halves(X, y)
    reference = _full_model_scores(X_train, y_train, X_test, y_test)
    bagged = make_pipeline(
        StandardScaler(),
        BalancedBaggingClassifier(LogisticRegression(max_iter=10000), random_state=0),
    )
    corrected = PriorAdaptedClassifier(
        bagged,
        method="known",
        train_prior=np.full(3, 1 / 3),
        test_prior=effective_train_prior(y_train),
    ).fit(X_train, y_train)
    before = _scores(y_test, corrected.estimator_.predict_proba(X_test))
    after = _scores(y_test, corrected.predict_proba(X_test))
    assert after[0] < before[0] and after[1] < before[1]
    assert abs(after[0] - reference[0]) < 0.01
    assert abs(after[1] - reference[1]) < 0.01

    single_after = _scores(
        y_test, _undersampled_and_corrected(X_train, y_train, X_test)[1]
    )
    assert abs(after[0] - reference[0]) < abs(single_after[0] - reference[0])


def test_class_weight_corrected_by_the_wrapper(page_blocks):
    """class_weight="balanced" undone by PriorAdaptedClassifier(method="known")."""
    X, y = page_blocks
    X_train, X_test, y_train, y_test = _halves(X, y)
    weighted = make_pipeline(
        StandardScaler(), LogisticRegression(max_iter=5000, class_weight="balanced")
    ).fit(X_train, y_train)
    corrected = PriorAdaptedClassifier(
        weighted,
        method="known",
        train_prior=effective_train_prior(y_train, class_weight="balanced"),
        test_prior=effective_train_prior(y_train),
    ).fit(X_train, y_train)
    before = _scores(y_test, weighted.predict_proba(X_test))
    after = _scores(y_test, corrected.predict_proba(X_test))
    assert after[0] < before[0] and after[1] < before[1]


@pytest.mark.parametrize("n_classes", [2, 3])
def test_corrected_probabilities_are_the_original_posterior(n_classes):
    """Undersampled then corrected: calibrated on the original distribution.

    Gaussian classes with a shared covariance have a logistic posterior, so an
    (almost) unpenalised logistic regression is well specified. Fitted after
    undersampling to balance and corrected from the sampler's counts, its
    probabilities on fresh data from the original distribution equal the true
    posterior p(c|x) (written out here by Bayes' rule) within 0.01 on average
    (the error of a fit on the rows undersampling keeps), and in each
    decile of the predicted probability the mean prediction is within 0.03 of
    the observed frequency; uncorrected, they are not.
    """
    rng = np.random.default_rng(0)
    prior = np.array([0.85, 0.1, 0.05])[:n_classes]
    prior /= prior.sum()
    means = np.array([[0.0, 0.0], [1.5, 0.5], [0.0, 1.5]])[:n_classes]

    def draw(n):
        y = rng.choice(n_classes, size=n, p=prior)
        return means[y] + rng.normal(size=(n, 2)), y

    X, y = draw(40000)
    X_new, y_new = draw(40000)
    model = make_imb_pipeline(
        RandomUnderSampler(random_state=0), LogisticRegression(C=1e6)
    ).fit(X, y)
    q_eff = effective_train_prior(y, resampled_counts=model[0].sampling_strategy_)
    proba = model.predict_proba(X_new)
    corrected = adjust_to_prior(proba, q_eff, effective_train_prior(y))
    log_joint = np.log(prior) - 0.5 * ((X_new[:, None, :] - means) ** 2).sum(axis=2)
    truth = np.exp(log_joint - log_joint.max(axis=1, keepdims=True))
    truth /= truth.sum(axis=1, keepdims=True)
    assert np.abs(corrected - truth).mean() < 0.01
    assert np.abs(proba - truth).mean() > 0.05

    def worst_decile_gap(p):
        gaps = []
        for c in range(n_classes):
            edges = np.quantile(p[:, c], np.linspace(0, 1, 11))
            bins = np.clip(np.searchsorted(edges, p[:, c], side="right") - 1, 0, 9)
            for b in range(10):
                rows = bins == b
                gaps.append(abs(p[rows, c].mean() - np.mean(y_new[rows] == c)))
        return max(gaps)

    assert worst_decile_gap(corrected) < 0.03
    assert worst_decile_gap(proba) > 0.1


def test_balanced_with_sample_weight_warns_which_counts_it_balances():
    """LogisticRegression balances the weighted counts, SVC the unweighted: the
    'balanced' shorthand (unweighted) warns, and the weights the warning says
    to pass give the weighted model's prior."""
    import inspect

    from sklearn.linear_model import LogisticRegression
    from sklearn.utils.class_weight import compute_class_weight

    y = np.array([0] * 30 + [1] * 10)
    weights = np.r_[np.ones(30), 3 * np.ones(10)]
    with pytest.warns(UserWarning, match="balance the weighted counts"):
        unweighted = effective_train_prior(
            y, class_weight="balanced", sample_weight=weights
        )
    np.testing.assert_allclose(unweighted, [0.25, 0.75])
    if "sample_weight" not in inspect.signature(compute_class_weight).parameters:
        pytest.skip("this scikit-learn balances unweighted counts only")
    balanced = compute_class_weight(
        "balanced", classes=np.unique(y), y=y, sample_weight=weights
    )
    # what LogisticRegression uses, read off a fit on a constant feature
    X = np.zeros((40, 1))
    model = LogisticRegression(class_weight="balanced").fit(X, y, sample_weight=weights)
    weighted = effective_train_prior(y, class_weight=balanced, sample_weight=weights)
    np.testing.assert_allclose(model.predict_proba(X[:1])[0], weighted, atol=1e-4)


def test_sampling_ratio_and_resampled_counts_are_not_both_taken():
    """Both describe one resampling: multiplied, they counted it twice."""
    y = np.array([0] * 30 + [1] * 10)
    with pytest.raises(ValueError, match="not both"):
        effective_train_prior(y, sampling_ratio={0: 1 / 3}, resampled_counts={0: 10})
