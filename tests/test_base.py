"""What every wrapper shares: the inner model, the training prior, the protocol."""

import functools
import warnings

import numpy as np
import pytest
import sklearn
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import make_classification
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import (
    GridSearchCV,
    cross_val_score,
    cross_validate,
    train_test_split,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from skprior import (
    CANClassifier,
    PriorAdaptedClassifier,
    TemperatureCalibratedClassifier,
)
from tests._wrappers import CONFIGURATIONS, make


class CountingLogisticRegression(LogisticRegression):
    """LogisticRegression that counts calls to ``fit`` across all its clones."""

    n_fit_calls = 0

    def fit(self, X, y, sample_weight=None):
        type(self).n_fit_calls += 1
        return super().fit(X, y, sample_weight=sample_weight)


# Every test below runs for each wrapper configuration of tests/_wrappers.py
# (the same list scikit-learn's checks run over in tests/test_common.py).
@pytest.fixture(params=sorted(CONFIGURATIONS))
def make_wrapper(request):
    return functools.partial(make, request.param)


@pytest.fixture
def data():
    X, y = make_classification(
        n_samples=300,
        n_features=6,
        n_informative=4,
        n_classes=3,
        n_clusters_per_class=1,
        random_state=0,
    )
    return train_test_split(X, y, test_size=0.5, random_state=0, stratify=y)


@pytest.fixture
def fitted_model(data):
    X_train, _, y_train, _ = data
    CountingLogisticRegression.n_fit_calls = 0
    model = CountingLogisticRegression().fit(X_train, y_train)
    CountingLogisticRegression.n_fit_calls = 0
    return model


def test_fitted_model_is_used_as_is(make_wrapper, data, fitted_model):
    """fit on held-out data never refits a fitted model, and uses that object."""
    _, X_val, _, y_val = data
    coef = fitted_model.coef_.copy()
    wrapper = make_wrapper(fitted_model).fit(X_val, y_val)
    assert wrapper.estimator_ is fitted_model
    assert CountingLogisticRegression.n_fit_calls == 0
    np.testing.assert_array_equal(fitted_model.coef_, coef)


def test_unknown_fit_parameters_are_refused_around_a_fitted_model(
    make_wrapper, data, fitted_model
):
    """A typo (sample_weights=) is refused as with an unfitted model, not
    dropped because the fitted model is not fitted again."""
    _, X_val, _, y_val = data
    for model in (fitted_model, LogisticRegression()):
        with pytest.raises(ValueError, match="sample_weights"):
            make_wrapper(model).fit(X_val, y_val, sample_weights=np.ones(len(y_val)))


def test_a_frozen_unfitted_model_is_refused_clearly(make_wrapper, data):
    _, X_val, _, y_val = data
    frozen = FrozenEstimator(LogisticRegression())
    with pytest.raises(NotFittedError, match="FrozenEstimator wraps an unfitted"):
        make_wrapper(frozen).fit(X_val, y_val)


def test_inner_parameters_of_the_default_model_name_the_fix():
    """estimator=None stands for LogisticRegression() made at fit: its
    parameters are set by passing the model (not an AttributeError of None)."""
    with pytest.raises(ValueError, match="estimator is None"):
        CANClassifier().set_params(estimator__C=2.0)
    wrapper = CANClassifier().set_params(
        estimator=LogisticRegression(), estimator__C=2.0
    )
    assert wrapper.estimator.C == 2.0


def test_unfitted_model_is_cloned_and_fitted(make_wrapper, data):
    """An unfitted model is cloned, fitted once, and the user's object untouched."""
    X_train, _, y_train, _ = data
    model = CountingLogisticRegression()
    CountingLogisticRegression.n_fit_calls = 0
    wrapper = make_wrapper(model).fit(X_train, y_train)
    assert CountingLogisticRegression.n_fit_calls == 1
    assert wrapper.estimator_ is not model
    assert not hasattr(model, "coef_")


def test_default_estimator_is_logistic_regression(data):
    """estimator=None fits a LogisticRegression."""
    X_train, _, y_train, _ = data
    wrapper = CANClassifier().fit(X_train, y_train)
    assert isinstance(wrapper.estimator_, LogisticRegression)


def test_clone_keeps_a_fitted_model_frozen(make_wrapper, data, fitted_model):
    """clone hands the fitted model on inside FrozenEstimator, so fit does not refit."""
    _, X_val, _, y_val = data
    cloned = clone(make_wrapper(fitted_model))
    assert isinstance(cloned.estimator, FrozenEstimator)
    assert cloned.estimator.estimator is fitted_model
    cloned.fit(X_val, y_val)
    assert CountingLogisticRegression.n_fit_calls == 0
    np.testing.assert_allclose(
        cloned.predict_proba(X_val),
        make_wrapper(fitted_model).fit(X_val, y_val).predict_proba(X_val),
    )


def test_grid_search_never_refits_a_fitted_model(data, fitted_model):
    """GridSearchCV over CAN's parameters makes 0 calls to the inner fit."""
    _, X_val, _, y_val = data
    grid = GridSearchCV(
        CANClassifier(fitted_model, k=2),
        {"tau": [0.3, 0.6, 0.9], "alpha": [0.5, 1.0, 2.0], "n_iter": [1, 3]},
        cv=3,
    ).fit(X_val, y_val)
    assert CountingLogisticRegression.n_fit_calls == 0
    assert grid.best_estimator_.estimator.estimator is fitted_model


@pytest.mark.parametrize("runner", [cross_val_score, cross_validate])
def test_cross_validation_never_refits_a_fitted_model(runner, data, fitted_model):
    """cross_val_score and cross_validate clone the wrapper: still no refit."""
    _, X_val, _, y_val = data
    runner(CANClassifier(fitted_model, k=2), X_val, y_val, cv=3)
    assert CountingLogisticRegression.n_fit_calls == 0


def test_pipeline_around_a_fitted_pipeline(data):
    """A fitted Pipeline is a model like any other: wrapped, never refitted."""
    X_train, X_val, y_train, y_val = data
    CountingLogisticRegression.n_fit_calls = 0
    model = make_pipeline(StandardScaler(), CountingLogisticRegression())
    model.fit(X_train, y_train)
    grid = GridSearchCV(CANClassifier(model, k=2), {"tau": [0.5, 0.9]}, cv=2)
    grid.fit(X_val, y_val)
    assert CountingLogisticRegression.n_fit_calls == 1


def test_grid_over_inner_parameters_of_a_fitted_model_errors(data, fitted_model):
    """estimator__C on a fitted model must not silently keep the old fit."""
    _, X_val, _, y_val = data
    grid = GridSearchCV(
        CANClassifier(fitted_model, k=2), {"estimator__C": [0.1, 1.0]}, cv=2
    )
    # skprior's message, not FrozenEstimator's (whose advice, to set the
    # parameter on the frozen model itself, would be the silent ignore)
    with pytest.raises(ValueError, match="held frozen .in a FrozenEstimator"):
        grid.fit(X_val, y_val)
    with pytest.raises(ValueError, match="held frozen .in a FrozenEstimator"):
        clone(PriorAdaptedClassifier(fitted_model)).set_params(estimator__C=0.1)
    with pytest.raises(ValueError, match="is already fitted, and"):
        CANClassifier(fitted_model).set_params(estimator__C=0.1)
    assert fitted_model.C == 1.0
    # what a FrozenEstimator does take: another model
    swapped = clone(CANClassifier(fitted_model)).set_params(
        estimator__estimator=fitted_model
    )
    assert swapped.estimator.estimator is fitted_model


def test_set_params_checks_the_model_the_nested_keys_land_on(data, fitted_model):
    """estimator=fitted, estimator__C=... together would change the fitted model."""
    with pytest.raises(ValueError, match="already fitted"):
        CANClassifier().set_params(estimator=fitted_model, estimator__C=0.001)
    assert fitted_model.C == 1.0
    wrapper = CANClassifier(fitted_model).set_params(
        estimator=LogisticRegression(), estimator__C=0.5
    )
    assert wrapper.estimator.C == 0.5


def test_grid_over_frozen_fitted_models_never_refits(data):
    """A grid over fitted models, each in FrozenEstimator, picks one, refits none.

    Unwrapped, GridSearchCV would clone each candidate into an unfitted model
    (it clones the values it tries), which the wrapper would then fit.
    """
    X_train, X_val, y_train, y_val = data
    models = [
        CountingLogisticRegression(C=c).fit(X_train, y_train) for c in (1.0, 0.01)
    ]
    CountingLogisticRegression.n_fit_calls = 0
    grid = GridSearchCV(
        CANClassifier(k=2),
        {"estimator": [FrozenEstimator(m) for m in models], "tau": [0.5, 0.9]},
        cv=3,
    ).fit(X_val, y_val)
    assert CountingLogisticRegression.n_fit_calls == 0
    assert any(grid.best_estimator_.estimator_.estimator is m for m in models)


def test_grid_over_inner_parameters_of_an_unfitted_model_refits(data):
    """With an unfitted model, estimator__C is tuned by refitting clones."""
    X_train, _, y_train, _ = data
    CountingLogisticRegression.n_fit_calls = 0
    grid = GridSearchCV(
        CANClassifier(CountingLogisticRegression(), k=2),
        {"estimator__C": [0.1, 1.0]},
        cv=2,
    ).fit(X_train, y_train)
    assert CountingLogisticRegression.n_fit_calls == 2 * 2 + 1
    assert grid.best_estimator_.estimator_.C == grid.best_params_["estimator__C"]


def test_frozen_estimator_behaves_like_a_fitted_model(make_wrapper, data, fitted_model):
    """FrozenEstimator(model) gives the same predictions and no refit."""
    _, X_val, _, y_val = data
    frozen = make_wrapper(FrozenEstimator(fitted_model)).fit(X_val, y_val)
    plain = make_wrapper(fitted_model).fit(X_val, y_val)
    np.testing.assert_array_equal(
        frozen.predict_proba(X_val), plain.predict_proba(X_val)
    )
    assert CountingLogisticRegression.n_fit_calls == 0


def test_train_prior_is_weighted_label_frequency(make_wrapper, data, fitted_model):
    """train_prior_ counts y over the model's classes_, with sample_weight (or,
    with source_prior="mean_posterior", averages the posteriors with it)."""
    _, X_val, _, y_val = data
    weights = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y_val))
    wrapper = make_wrapper(fitted_model).fit(X_val, y_val, sample_weight=weights)
    if getattr(wrapper, "source_prior", "labels") == "mean_posterior":
        proba = fitted_model.predict_proba(X_val)
        expected = (weights[:, None] * proba).sum(axis=0)
    else:
        expected = np.array([weights[y_val == c].sum() for c in wrapper.classes_])
    np.testing.assert_allclose(wrapper.train_prior_, expected / weights.sum())


def test_given_train_prior_overrides_frequencies(make_wrapper, data, fitted_model):
    """An explicit train_prior is used (renormalised), not the labels of fit."""
    _, X_val, _, y_val = data
    _skip_without_train_prior(make_wrapper(fitted_model))
    wrapper = make_wrapper(fitted_model, train_prior=[0.2, 0.3, 0.5])
    wrapper.fit(X_val, y_val)
    np.testing.assert_allclose(wrapper.train_prior_, [0.2, 0.3, 0.5])


def _skip_without_train_prior(wrapper):
    """The temperature wrapper has no train_prior (its calibration uses none)."""
    if "train_prior" not in wrapper.get_params():
        pytest.skip(f"{type(wrapper).__name__} has no train_prior parameter")


@pytest.mark.parametrize(
    "prior, match",
    [([0.5, 0.5], "one entry per class"), ([0.2, 0.2, 0.2], "sum to 1")],
)
def test_bad_train_prior_is_refused(data, fitted_model, prior, match):
    """A prior of the wrong length or sum gets an error that says so."""
    _, X_val, _, y_val = data
    with pytest.raises(ValueError, match=match):
        CANClassifier(fitted_model, train_prior=prior).fit(X_val, y_val)


def test_unknown_labels_are_refused(data, fitted_model):
    """Labels the fitted model does not know get a clear error."""
    _, X_val, _, y_val = data
    y_bad = y_val.copy()
    y_bad[0] = 7
    with pytest.raises(ValueError, match=r"labels \[.*7.*\] that the classifier"):
        CANClassifier(fitted_model).fit(X_val, y_bad)


def test_model_without_predict_proba_is_refused(data):
    """SVC without probability=True has no predict_proba: a clear error."""
    X_train, _, y_train, _ = data
    with pytest.raises(ValueError, match="predict_proba"):
        CANClassifier(SVC()).fit(X_train, y_train)


def test_predict_before_fit_raises_not_fitted(make_wrapper, data):
    """predict, predict_proba and classes_ need fit first."""
    X_train, *_ = data
    wrapper = make_wrapper(LogisticRegression())
    for method in (wrapper.predict, wrapper.predict_proba, wrapper.predict_log_proba):
        with pytest.raises(NotFittedError):
            method(X_train)


def test_protocol_attributes(make_wrapper, data, fitted_model):
    """classes_, n_features_in_, predict = argmax, predict_log_proba, score."""
    _, X_val, _, y_val = data
    wrapper = make_wrapper(fitted_model).fit(X_val, y_val)
    np.testing.assert_array_equal(wrapper.classes_, fitted_model.classes_)
    assert wrapper.n_features_in_ == X_val.shape[1]
    proba = wrapper.predict_proba(X_val)
    np.testing.assert_allclose(proba.sum(axis=1), 1)
    np.testing.assert_array_equal(
        wrapper.predict(X_val), wrapper.classes_[proba.argmax(axis=1)]
    )
    np.testing.assert_allclose(np.exp(wrapper.predict_log_proba(X_val)), proba)
    assert wrapper.score(X_val, y_val) == np.mean(wrapper.predict(X_val) == y_val)


def test_string_labels_and_pandas_input(make_wrapper, data):
    """String labels come back as strings; DataFrame feature names are kept."""
    pd = pytest.importorskip("pandas")
    X_train, X_val, y_train, y_val = data
    names = np.array(["cat", "dog", "emu"])
    columns = [f"f{i}" for i in range(X_train.shape[1])]
    X_train_df = pd.DataFrame(X_train, columns=columns)
    X_val_df = pd.DataFrame(X_val, columns=columns)
    model = LogisticRegression().fit(X_train_df, pd.Series(names[y_train]))
    wrapper = make_wrapper(model).fit(X_val_df, pd.Series(names[y_val]))
    np.testing.assert_array_equal(wrapper.feature_names_in_, columns)
    assert set(wrapper.predict(X_val_df)) <= set(names)
    np.testing.assert_array_equal(wrapper.classes_, names)


@pytest.mark.parametrize("weights", [[-0.5, 1.0], [-1.0, -1.0]])
def test_negative_sample_weight_is_refused(make_wrapper, data, fitted_model, weights):
    """A negative weight is refused in fit, not found later as a negative prior."""
    _, X_val, _, y_val = data
    sample_weight = np.resize(np.asarray(weights), len(y_val))
    with pytest.raises(ValueError, match="[Nn]egative"):
        make_wrapper(fitted_model).fit(X_val, y_val, sample_weight=sample_weight)


def test_refit_drops_feature_names_the_new_model_lacks(data):
    """feature_names_in_ from a fit on a DataFrame does not survive a fit on arrays."""
    pd = pytest.importorskip("pandas")
    X_train, _, y_train, _ = data
    frame = pd.DataFrame(X_train, columns=[f"f{i}" for i in range(X_train.shape[1])])
    wrapper = CANClassifier(LogisticRegression(), k=2).fit(frame, y_train)
    assert list(wrapper.feature_names_in_) == list(frame.columns)
    wrapper.fit(X_train, y_train)
    assert not hasattr(wrapper, "feature_names_in_")
    assert wrapper.n_features_in_ == X_train.shape[1]


def test_sample_weight_reaches_the_inner_fit(data):
    """With an unfitted model, sample_weight is passed to its fit."""
    X_train, _, y_train, _ = data
    weights = np.where(y_train == 0, 5.0, 1.0)
    wrapper = CANClassifier(LogisticRegression(), k=2).fit(
        X_train, y_train, sample_weight=weights
    )
    direct = LogisticRegression().fit(X_train, y_train, sample_weight=weights)
    np.testing.assert_allclose(wrapper.estimator_.coef_, direct.coef_)


def test_inputs_are_not_modified(make_wrapper, data, fitted_model):
    """fit and predict leave X, y, sample_weight and train_prior untouched."""
    _, X_val, _, y_val = data
    prior = np.array([0.2, 0.3, 0.5])
    weights = np.ones(len(y_val))
    copies = [a.copy() for a in (X_val, y_val, prior, weights)]
    wrapper = make_wrapper(fitted_model)
    if "train_prior" in wrapper.get_params():
        wrapper.set_params(train_prior=prior)
    wrapper.fit(X_val, y_val, sample_weight=weights).predict_proba(X_val)
    for original, copy in zip((X_val, y_val, prior, weights), copies, strict=True):
        np.testing.assert_array_equal(original, copy)


class RecordingLogisticRegression(LogisticRegression):
    """LogisticRegression whose fit records the metadata it was given."""

    received = []

    def fit(self, X, y, sample_weight=None, groups_of_rows=None):
        type(self).received.append(groups_of_rows)
        return super().fit(X, y, sample_weight=sample_weight)


@pytest.fixture
def routing():
    sklearn.set_config(enable_metadata_routing=True)
    RecordingLogisticRegression.received = []
    yield
    sklearn.set_config(enable_metadata_routing=False)


def test_fit_metadata_reaches_an_unfitted_model(make_wrapper, data, routing):
    """With routing on, a fit parameter the inner model requests reaches its fit."""
    X_train, _, y_train, _ = data
    marker = np.arange(len(y_train))
    model = RecordingLogisticRegression().set_fit_request(groups_of_rows=True)
    make_wrapper(model).fit(X_train, y_train, groups_of_rows=marker)
    assert len(RecordingLogisticRegression.received) == 1
    np.testing.assert_array_equal(RecordingLogisticRegression.received[0], marker)


def test_fit_metadata_reaches_the_model_inside_grid_search(data, routing):
    """GridSearchCV routes the requested parameter to the inner fit on each split."""
    X_train, _, y_train, _ = data
    marker = np.arange(len(y_train))
    model = RecordingLogisticRegression().set_fit_request(groups_of_rows=True)
    grid = GridSearchCV(CANClassifier(model), {"tau": [0.5, 0.9]}, cv=3)
    grid.fit(X_train, y_train, groups_of_rows=marker)
    # 2 candidates x 3 splits, then the refit on everything
    assert len(RecordingLogisticRegression.received) == 7
    refit = RecordingLogisticRegression.received[-1]
    np.testing.assert_array_equal(refit, marker)
    for received in RecordingLogisticRegression.received[:-1]:
        assert len(received) < len(marker)  # the training rows of one split
        assert set(received) <= set(marker)


def test_routing_survives_clone_in_a_pipeline(make_wrapper, data, routing):
    """clone keeps the wrapper's metadata requests, as scikit-learn's clone
    does: routed weights reach a wrapper last in a cloned Pipeline, as in
    cross_validate and GridSearchCV (UnsetMetadataPassedError before)."""
    X_train, _, y_train, _ = data
    weights = np.r_[np.full(30, 5.0), np.ones(len(y_train) - 30)]
    model = LogisticRegression().fit(X_train, y_train)
    wrapper = make_wrapper(model).set_fit_request(sample_weight=True)
    pipe = clone(make_pipeline(wrapper)).fit(X_train, y_train, sample_weight=weights)
    fitted = pipe[-1]
    assert fitted.get_metadata_routing().consumes("fit", ["sample_weight"])
    own = wrapper.get_params(deep=False)
    if own.get("train_prior") is None and own.get("source_prior") != "mean_posterior":
        expected = np.bincount(y_train, weights=weights) / weights.sum()
        np.testing.assert_allclose(fitted.train_prior_, expected)


def test_routing_refuses_a_typo_around_a_fitted_model(make_wrapper, data, routing):
    """With routing on, a fitted model is not fitted again: a typo was dropped
    silently (train_prior_ unweighted). It is refused, as without routing."""
    _, X_val, _, y_val = data
    for model in (LogisticRegression().fit(X_val, y_val), LogisticRegression()):
        with pytest.raises(TypeError, match="sample_weights"):
            make_wrapper(model).fit(X_val, y_val, sample_weights=np.ones(len(y_val)))


def test_routing_weights_reach_the_default_model(make_wrapper, data, routing):
    """estimator=None with routing on: the LogisticRegression made at fit
    requests sample_weight (an error asked to set a request on a model the
    user never made), as without routing."""
    X_train, _, y_train, _ = data
    weights = np.r_[np.full(30, 5.0), np.ones(len(y_train) - 30)]
    with_routing = make_wrapper(None).fit(X_train, y_train, sample_weight=weights)
    sklearn.set_config(enable_metadata_routing=False)
    without = make_wrapper(None).fit(X_train, y_train, sample_weight=weights)
    np.testing.assert_allclose(
        with_routing.estimator_.coef_, without.estimator_.coef_, rtol=1e-10
    )


def test_fit_metadata_without_routing_is_refused(data):
    """Without routing, fit metadata other than sample_weight gets a clear error."""
    X_train, _, y_train, _ = data
    with pytest.raises(ValueError, match="enable_metadata_routing=True"):
        CANClassifier(LogisticRegression()).fit(
            X_train, y_train, groups_of_rows=np.arange(len(y_train))
        )


def _arrays_of(estimator):
    """Every ndarray among the fitted attributes (``name_``) of ``estimator``."""
    return {
        name: value
        for name, value in vars(estimator).items()
        if name.endswith("_") and isinstance(value, np.ndarray)
    }


def test_fitted_attributes_never_alias_the_callers_arrays(
    make_wrapper, data, fitted_model
):
    """No fitted attribute shares memory with X, y, sample_weight or the prior
    the caller passed; writing to them after fit changes no prediction."""
    _, X_val, _, y_val = data
    weights = np.linspace(0.5, 2.0, len(y_val))
    train_prior = np.array([0.3, 0.3, 0.4])
    wrapper = make_wrapper(fitted_model)
    if "train_prior" in wrapper.get_params():
        wrapper.set_params(train_prior=train_prior)
    wrapper.fit(X_val, y_val, sample_weight=weights)
    for name, value in _arrays_of(wrapper).items():
        for array in (X_val, y_val, weights, train_prior):
            assert not np.shares_memory(value, array), name
    before = wrapper.predict_proba(X_val)
    weights[:] = 1e6
    train_prior[:] = [1.0, 0.0, 0.0]
    np.testing.assert_array_equal(wrapper.predict_proba(X_val), before)


def test_can_reference_weight_is_a_copy(data, fitted_model):
    """CAN's reference='fit' keeps a copy of sample_weight, not the caller's array."""
    _, X_val, _, y_val = data
    weights = np.ones(len(y_val))
    wrapper = CANClassifier(fitted_model, tau=0.5, reference="fit")
    wrapper.fit(X_val, y_val, sample_weight=weights)
    assert wrapper.reference_weight_ is not weights
    before = wrapper.predict_proba(X_val[:5])
    weights[: len(weights) // 2] = 0.0
    np.testing.assert_array_equal(wrapper.predict_proba(X_val[:5]), before)


@pytest.mark.parametrize("classes", [["ant", "bee", "cat"], [1, 2, 3], [0, 2, 5]])
def test_labels_encoded_by_cross_val_predict_are_read_as_positions(
    make_wrapper, data, classes
):
    """Around a model fitted on strings, or on integer classes that overlap the
    codes, y given as codes 0..K-1 (as cross_val_predict passes it for
    predict_proba, and VotingClassifier, BaggingClassifier and
    StackingClassifier to their estimators) fits as the labels do, and says
    that it read them as positions. Around [1, 2, 3] or [0, 2, 5] it was
    refused (FrozenEstimator works there); the meta-estimators work now."""
    from sklearn.ensemble import VotingClassifier

    X_train, X_val, y_train, y_val = data
    names = np.array(classes)
    model = LogisticRegression().fit(X_train, names[y_train])
    by_name = make_wrapper(model).fit(X_val, names[y_val])
    with pytest.warns(
        UserWarning, match=rf"read as column positions \(0 as {classes[0]!r}"
    ):
        by_code = make_wrapper(model).fit(X_val, y_val)
    np.testing.assert_allclose(
        by_code.predict_proba(X_val), by_name.predict_proba(X_val), rtol=1e-12
    )
    np.testing.assert_array_equal(by_code.classes_, names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        voting = VotingClassifier([("w", make_wrapper(model))], voting="soft")
        voting.fit(X_val, names[y_val])
    np.testing.assert_allclose(
        voting.predict_proba(X_val), by_name.predict_proba(X_val), rtol=1e-12
    )
    np.testing.assert_array_equal(voting.classes_, names)


def test_codes_for_other_integer_classes_are_read_with_a_warning(data):
    """Labels 0..2 for a model of classes 5, 6, 7 are column positions (as
    cross_val_predict passes them), never without a word."""
    X_train, X_val, y_train, y_val = data
    model = LogisticRegression().fit(X_train, y_train + 5)
    with pytest.warns(UserWarning, match=r"integers \[0, 1, 2\].*\[5, 6, 7\]"):
        by_code = CANClassifier(model).fit(X_val, y_val)
    by_label = CANClassifier(model).fit(X_val, y_val + 5)
    np.testing.assert_allclose(by_code.train_prior_, by_label.train_prior_)


def test_codes_that_could_be_classes_are_not_read_as_positions(data):
    """Codes partly classes are read as positions only when they are every
    position: labels [0, 1] for classes 1, 2, 3 (a label 0 by mistake, or
    codes without class 2) are refused as unknown, not reinterpreted."""
    X_train, X_val, y_train, y_val = data
    model = LogisticRegression().fit(X_train, y_train + 1)  # classes 1, 2, 3
    kept = y_val < 2
    with pytest.raises(ValueError, match=r"labels \[0\] that the classifier"):
        CANClassifier(model).fit(X_val[kept], y_val[kept])


def test_codes_missing_a_position_around_string_classes_are_refused(data):
    """Codes 0 and 1 around classes ['ant', 'bee', 'cat'] are what an encoder
    fitted on labels without 'bee' gives (VotingClassifier's): 1 is 'cat'
    there. They were read as 'ant' and 'bee' (a wrong training prior; the
    temperature of TemperatureCalibratedClassifier 14x off), with a warning
    that called it intended; they are now refused, and the error says why."""
    X_train, X_val, y_train, y_val = data
    names = np.array(["ant", "bee", "cat"])
    model = LogisticRegression().fit(X_train, names[y_train])
    kept = y_val != 1
    codes = np.unique(names[y_val[kept]], return_inverse=True)[1]  # ant 0, cat 1
    with pytest.raises(ValueError, match="without every code 0..2"):
        CANClassifier(model).fit(X_val[kept], codes)


def test_set_params_of_get_params_is_a_no_op_around_a_fitted_model(
    make_wrapper, data, fitted_model
):
    """set_params(**get_params()) (deep) gives the fitted model's own values
    back: no change, accepted; a changed value is still refused."""
    _, X_val, _, y_val = data
    for wrapper in (make_wrapper(fitted_model), clone(make_wrapper(fitted_model))):
        wrapper.set_params(**wrapper.get_params())
        wrapper.fit(X_val, y_val)
        with pytest.raises(ValueError, match="Cannot set"):
            wrapper.set_params(estimator__C=123.0)


def test_a_fitted_precomputed_kernel_model_in_grid_search(make_wrapper):
    """A fitted model on a precomputed metric (or kernel) takes D(X, X_train)
    as it is: the wrapper does not tell GridSearchCV that X is a square
    matrix to slice (SVC(kernel='precomputed') failed with 'X should be a
    square kernel matrix')."""
    from sklearn.metrics import pairwise_distances
    from sklearn.neighbors import KNeighborsClassifier

    X, y = make_classification(n_samples=160, n_features=5, random_state=0)
    X_train, X_val, y_train, y_val = X[:80], X[80:], y[:80], y[80:]
    knn = KNeighborsClassifier(10, metric="precomputed")
    knn.fit(pairwise_distances(X_train), y_train)
    wrapper = make_wrapper(knn)
    own = wrapper.get_params(deep=False)
    name = next(key for key in sorted(own) if key != "estimator")
    grid = GridSearchCV(wrapper, {name: [own[name]]}, cv=3, error_score="raise")
    grid.fit(pairwise_distances(X_val, X_train), y_val)
    assert grid.best_estimator_.estimator_.estimator is knn


def test_encoded_labels_around_integer_classes_get_a_hint(data, fitted_model):
    """y of positions without every one of them, around a model of classes
    1..K (a fold of label-encoded y without class 0's code): the error says
    so and names fixes."""
    _, X_val, _, y_val = data
    model = LogisticRegression().fit(X_val, y_val + 1)
    kept = y_val < 2
    with pytest.raises(ValueError, match="looks label-encoded.*0..2"):
        CANClassifier(model).fit(X_val[kept], y_val[kept])


def test_a_missing_label_among_strings_is_refused_clearly(make_wrapper, data):
    """A None among string labels made numpy's sort raise a bare TypeError
    ("'<' not supported between 'NoneType' and 'str'") unless it came first."""
    X_train, X_val, y_train, y_val = data
    names = np.array(["ant", "bee", "cat"], dtype=object)
    model = LogisticRegression().fit(X_train, names[y_train])
    y_bad = names[y_val]
    y_bad[3] = None
    with pytest.raises(ValueError, match="without missing values"):
        make_wrapper(model).fit(X_val, y_bad)


def test_a_model_without_classes_is_refused_clearly(data):
    from sklearn.mixture import GaussianMixture

    _, X_val, _, y_val = data
    with pytest.raises(ValueError, match="no classes_ after fit"):
        PriorAdaptedClassifier(GaussianMixture(3, random_state=0)).fit(X_val, y_val)


def test_n_iter_is_that_of_the_fit_settings(data, fitted_model):
    """n_iter_ is computed when read, with the settings of fit (not those of a
    later set_params)."""
    _, X_val, _, y_val = data
    first = PriorAdaptedClassifier(fitted_model, solver="em", tol=1e-10)
    first.fit(X_val, y_val)
    second = clone(first).fit(X_val, y_val)
    second.set_params(max_iter=3, tol=0.1, solver="squarem")
    assert second.n_iter_ == first.n_iter_ > 3


class RowsModel(ClassifierMixin, BaseEstimator):
    """A fitted model whose ``predict_proba`` returns its input rows, in ``dtype``."""

    def __init__(self, dtype=np.float64):
        self.dtype = dtype

    def fit(self, X, y):
        self.classes_ = np.arange(3)
        return self

    def predict_proba(self, X):
        return np.asarray(X, dtype=self.dtype)


@pytest.mark.parametrize(
    "wrapper, call",
    [
        (lambda m: CANClassifier(m), "predict_proba"),
        (lambda m: PriorAdaptedClassifier(m), "predict_proba"),
        (lambda m: PriorAdaptedClassifier(m), "estimate_prior"),
        (lambda m: PriorAdaptedClassifier(m, shift_level=None), "predict_proba"),
        (lambda m: PriorAdaptedClassifier(m), "update_prior"),
        (lambda m: PriorAdaptedClassifier(m, online="cumulative"), "update_prior"),
        (lambda m: PriorAdaptedClassifier(m, online="fth"), "update_prior"),
        (lambda m: TemperatureCalibratedClassifier(m), "predict_proba"),
    ],
)
def test_a_float16_model(wrapper, call):
    """A model's float16 rows sum to one within a few 1e-4: the wrapper checked
    them at float16's tolerance and handed them, made float64, to array
    functions that check at float64's, which refused every batch (and a
    stream had counted it first). They are divided by their sums: the
    wrapper gives what it gives a float64 model of those rows."""
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(3), 2000)
    y = np.array([rng.choice(3, p=row) for row in proba])
    rows = proba.astype(np.float16).astype(np.float64)
    rows /= rows.sum(axis=1, keepdims=True)
    assert np.abs(rows.sum(axis=1) - 1).max() < 1e-12
    batch = np.flatnonzero(y == 0)[:300]  # (shifted: the estimate runs)
    results = []
    for X, dtype in ((proba, np.float16), (rows, np.float64)):
        fitted = wrapper(RowsModel(dtype).fit(X, y)).fit(X, y)
        result = getattr(fitted, call)(X[batch])
        if call == "update_prior":
            assert fitted.n_seen_ == batch.size
            result = fitted.online_prior_
        results.append(np.asarray(result))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-10, atol=1e-13)
