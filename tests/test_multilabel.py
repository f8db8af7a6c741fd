"""Multi-label: each label is a two-class problem, handled by the binary method.

The data are real: UCI Letter Recognition (shipped as PMLB "letter"), with four
labels read off each capital letter -- a vowel; in the first half of the
alphabet; has an enclosed area (A B D O P Q R); is symmetric about a vertical
axis (A H I M O T U V W X Y). The labels overlap and have different priors.

The reference for every multi-label result is the binary method run on one
label at a time: the wrapper around ``OneLabel`` (written here: the two-class
model that label l of a multi-label model is, ``(1 - p, p)`` from a matrix of
probabilities) fitted on column l of y, or the array function called on the
label's columns.
"""

import pickle
import sys
import warnings
from functools import partial

import numpy as np
import pytest
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.multioutput import ClassifierChain, MultiOutputClassifier
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import (
    check_classifiers_multilabel_output_format_predict,
    check_classifiers_multilabel_output_format_predict_proba,
    check_classifiers_multilabel_representation_invariance,
)

from skprior import (
    CANClassifier,
    PriorAdaptedClassifier,
    TemperatureCalibratedClassifier,
    adjust_to_prior,
    alternating_normalization,
    bbse_test_prior,
    estimate_source_prior,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    fit_dirichlet_calibration,
    fit_temperature,
    fit_vector_scaling,
    joint_confusion_matrix,
    per_label,
    softmax_dirichlet_calibration,
    softmax_temperature,
    softmax_vector_scaling,
    topk_entropy,
)
from skprior.datasets import load_pmlb
from skprior.metrics import expected_calibration_error
from tests._wrappers import CONFIGURATIONS, make

ALPHABET = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
LABELS = {
    "vowel": "AEIOU",
    "first half": "ABCDEFGHIJKLM",
    "enclosed area": "ABDOPQR",
    "vertical symmetry": "AHIMOTUVWXY",
}
TEST_PRIOR = np.array([0.05, 0.7, 0.4, 0.2])  # of each label being present


def letter_labels(n_samples, seed=0):
    """``n_samples`` rows of Letter, standardised, and their 4 labels (n, 4)."""
    X, y = load_pmlb("letter")
    rows = np.random.default_rng(seed).choice(len(y), size=n_samples, replace=False)
    letters = ALPHABET[y[rows] - 1]  # PMLB codes A..Z as 1..26
    Y = np.column_stack([np.isin(letters, list(s)) for s in LABELS.values()])
    return StandardScaler().fit_transform(X[rows]), Y.astype(np.int64)


@pytest.fixture(scope="module")
def letters():
    """(X_train, X_cal, X_test, Y_train, Y_cal, Y_test): 1200 / 600 / 600 rows."""
    X, Y = letter_labels(2400)
    X_train, X_rest, Y_train, Y_rest = train_test_split(
        X, Y, train_size=1200, random_state=0
    )
    X_cal, X_test, Y_cal, Y_test = train_test_split(
        X_rest, Y_rest, test_size=0.5, random_state=0
    )
    return X_train, X_cal, X_test, Y_train, Y_cal, Y_test


INNER = {
    # scikit-learn's list of (n, 2) arrays
    "multioutput-lr": lambda: MultiOutputClassifier(LogisticRegression(max_iter=1000)),
    "knn": lambda: KNeighborsClassifier(n_neighbors=15),
    "forest": lambda: RandomForestClassifier(
        n_estimators=30, min_samples_leaf=3, random_state=0
    ),
    # an (n, L) matrix (the chain also has a decision_function)
    "mlp": lambda: MLPClassifier(
        hidden_layer_sizes=(16,), alpha=1e-2, tol=1e-3, max_iter=1000, random_state=0
    ),
    "chain": lambda: ClassifierChain(LogisticRegression(max_iter=1000), random_state=0),
}


@pytest.fixture(scope="module", params=["chain", "forest", "mlp", "multioutput-lr"])
def fitted(request, letters):
    """(name, model fitted on the training rows)."""
    X_train, _, _, Y_train, _, _ = letters
    return request.param, INNER[request.param]().fit(X_train, Y_train)


def make_wrapper(name, model, label=None):
    """A configuration of tests/_wrappers.py around ``model``, or a known prior.

    ``"prior-known"`` is given ``TEST_PRIOR``: shape (L,) for the multi-label
    wrapper, ``(1 - q_l, q_l)`` for the binary one of label ``label``.
    """
    if name != "prior-known":
        return make(name, model)
    prior = TEST_PRIOR if label is None else [1 - TEST_PRIOR[label], TEST_PRIOR[label]]
    return PriorAdaptedClassifier(model, method="known", test_prior=prior)


class OneLabel(ClassifierMixin, BaseEstimator):
    """Label ``label`` of a fitted multi-label model as a fitted binary model."""

    def __init__(self, model=None, label=0):
        self.model = model
        self.label = label

    def __sklearn_is_fitted__(self):
        return True

    @property
    def classes_(self):
        classes = self.model.classes_
        return classes[self.label] if isinstance(classes, list) else np.array([0, 1])

    def fit(self, X, y):
        raise AssertionError("the reference model is never fitted")

    def predict_proba(self, X):
        proba = self.model.predict_proba(X)
        if isinstance(proba, list):
            return proba[self.label]
        present = proba[:, self.label]
        return np.column_stack((1 - present, present))


class OneLabelScores(OneLabel):
    """``OneLabel`` with the label's column of ``decision_function``."""

    def decision_function(self, X):
        return self.model.decision_function(X)[:, self.label]


def one_label(model, label):
    cls = OneLabelScores if hasattr(model, "decision_function") else OneLabel
    return cls(model, label)


def recorded(function):
    """``function()``'s result and the messages of the warnings it issued."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = function()
    return result, sorted(str(w.message) for w in caught)


# -- the wrappers: per label, the binary method ----------------------------------------


@pytest.mark.parametrize("wrapper", [*CONFIGURATIONS, "prior-known"])
def test_wrapper_equals_binary_method_per_label(wrapper, fitted, letters):
    """Each label's probabilities, prediction and warnings are the binary wrapper's."""
    _, X_cal, X_test, _, Y_cal, _ = letters
    _, model = fitted
    estimator = make_wrapper(wrapper, model)
    multi, multi_warnings = recorded(
        lambda: estimator.fit(X_cal, Y_cal).predict_proba(X_test)
    )
    multi_pred, _ = recorded(lambda: estimator.predict(X_test))

    binary_warnings = []
    for label in range(Y_cal.shape[1]):
        binary = make_wrapper(wrapper, one_label(model, label), label)
        expected, caught = recorded(
            lambda b=binary, lab=label: b.fit(X_cal, Y_cal[:, lab]).predict_proba(
                X_test
            )
        )
        binary_warnings += [f"{m} (label {label})" for m in caught]
        got = multi[label] if isinstance(multi, list) else multi[:, label]
        want = expected if isinstance(multi, list) else expected[:, 1]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        binary_pred, _ = recorded(lambda b=binary: b.predict(X_test))
        np.testing.assert_array_equal(multi_pred[:, label], binary_pred)
    assert multi_warnings == sorted(binary_warnings)


@pytest.mark.parametrize("wrapper", ["prior-default", "prior-bbse", "prior-known"])
def test_estimate_prior_is_per_label(wrapper, fitted, letters):
    """estimate_prior gives each label's estimated prior of "present", shape (L,)."""
    _, X_cal, X_test, _, Y_cal, _ = letters
    _, model = fitted
    estimate = make_wrapper(wrapper, model).fit(X_cal, Y_cal).estimate_prior(X_test)
    assert estimate.shape == (Y_cal.shape[1],)
    for label in range(Y_cal.shape[1]):
        binary = make_wrapper(wrapper, one_label(model, label), label).fit(
            X_cal, Y_cal[:, label]
        )
        assert estimate[label] == pytest.approx(
            binary.estimate_prior(X_test)[1], abs=1e-12
        )


def test_output_follows_the_inner_model_form(fitted, letters):
    """predict_proba is a list of (n, 2) or an (n, L) matrix, as the inner model's."""
    _, X_cal, X_test, _, Y_cal, _ = letters
    _, model = fitted
    can = CANClassifier(model).fit(X_cal, Y_cal)
    proba, inner = can.predict_proba(X_test), model.predict_proba(X_test)
    assert type(proba) is type(inner)
    if isinstance(inner, list):
        assert [p.shape for p in proba] == [p.shape for p in inner]
        np.testing.assert_allclose([p.sum(axis=1) for p in proba], 1.0)
    else:
        assert proba.shape == inner.shape
    pred = can.predict(X_test)
    assert pred.shape == Y_cal[: len(X_test)].shape
    assert pred.dtype == Y_cal.dtype
    log_proba = can.predict_log_proba(X_test)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(np.asarray(log_proba), np.log(np.asarray(proba)))


def test_classes_and_train_prior(fitted, letters):
    """classes_ is the inner model's; train_prior_ is each label's frequency."""
    _, X_cal, _, _, Y_cal, _ = letters
    _, model = fitted
    can = CANClassifier(model).fit(X_cal, Y_cal)
    assert can.classes_ is model.classes_
    np.testing.assert_allclose(can.train_prior_, Y_cal.mean(axis=0), rtol=1e-12)
    assert len(can.label_estimators_) == Y_cal.shape[1]
    assert can.n_features_in_ == X_cal.shape[1]


# -- the inner model -------------------------------------------------------------------


class CountingMultiOutput(MultiOutputClassifier):
    """MultiOutputClassifier that counts fit and predict_proba over its clones."""

    n_fit = 0
    n_predict_proba = 0

    def fit(self, X, y, sample_weight=None, **fit_params):
        type(self).n_fit += 1
        return super().fit(X, y, sample_weight=sample_weight, **fit_params)

    def predict_proba(self, X):
        type(self).n_predict_proba += 1
        return super().predict_proba(X)


@pytest.fixture
def counting(letters):
    X_train, _, _, Y_train, _, _ = letters
    model = CountingMultiOutput(LogisticRegression(max_iter=1000)).fit(X_train, Y_train)
    CountingMultiOutput.n_fit = CountingMultiOutput.n_predict_proba = 0
    return model


@pytest.mark.parametrize(
    "wrapper", ["can-default", "prior-default", "temperature-default"]
)
def test_fitted_model_is_never_refitted_and_predicts_once(wrapper, counting, letters):
    """A fitted model is not refitted (nor after clone), and predicts once a batch."""
    _, X_cal, X_test, _, Y_cal, _ = letters
    estimator = make(wrapper, counting).fit(X_cal, Y_cal)
    assert estimator.estimator_ is counting
    assert CountingMultiOutput.n_fit == 0
    assert CountingMultiOutput.n_predict_proba == 1  # for the four labels' fits
    estimator.predict_proba(X_test)
    assert CountingMultiOutput.n_predict_proba == 2
    estimator.predict(X_test)
    assert CountingMultiOutput.n_predict_proba == 3
    clone(estimator).fit(X_cal, Y_cal)
    assert CountingMultiOutput.n_fit == 0


def test_unfitted_model_is_fitted_once_for_all_labels(letters):
    """An unfitted model is cloned and fitted once on the indicator matrix."""
    X_train, _, X_test, Y_train, _, _ = letters
    CountingMultiOutput.n_fit = 0
    model = CountingMultiOutput(LogisticRegression(max_iter=1000))
    prior = PriorAdaptedClassifier(model).fit(X_train, Y_train)
    assert CountingMultiOutput.n_fit == 1
    assert prior.estimator_ is not model
    assert not hasattr(model, "estimators_")
    assert len(prior.predict_proba(X_test)) == Y_train.shape[1]


def test_sample_weight_reaches_each_label(letters):
    """sample_weight weighs every label's training prior."""
    _, X_cal, _, _, Y_cal, _ = letters
    model = KNeighborsClassifier().fit(X_cal, Y_cal)
    weight = np.random.default_rng(0).uniform(0, 2, size=len(Y_cal))
    can = CANClassifier(model).fit(X_cal, Y_cal, sample_weight=weight)
    np.testing.assert_allclose(
        can.train_prior_, weight @ Y_cal / weight.sum(), rtol=1e-12
    )


def test_pickle_round_trip(fitted, letters):
    """A multi-label fit pickles: the same probabilities after loading."""
    _, X_cal, X_test, _, Y_cal, _ = letters
    _, model = fitted
    can = CANClassifier(model, reference="fit").fit(X_cal, Y_cal)
    loaded = pickle.loads(pickle.dumps(can))
    np.testing.assert_array_equal(
        np.asarray(loaded.predict_proba(X_test)), np.asarray(can.predict_proba(X_test))
    )


def test_refit_switches_between_single_and_multi_label(letters):
    """A single-label fit drops label_estimators_; a multi-label one, stale state."""
    X_train, X_cal, X_test, Y_train, Y_cal, _ = letters
    multi = KNeighborsClassifier().fit(X_train, Y_train)
    single = KNeighborsClassifier().fit(X_train, Y_train[:, 0])
    calibrated = TemperatureCalibratedClassifier(single, method="bcts")
    calibrated.fit(X_cal, Y_cal[:, 0])
    assert hasattr(calibrated, "bias_")
    calibrated.set_params(estimator=multi).fit(X_cal, Y_cal)
    assert not hasattr(calibrated, "bias_") and not hasattr(calibrated, "temperature_")
    calibrated.set_params(estimator=single).fit(X_cal, Y_cal[:, 0])
    assert not hasattr(calibrated, "label_estimators_")
    assert calibrated.predict_proba(X_test).shape == (len(X_test), 2)


# -- parameters per label --------------------------------------------------------------


@pytest.mark.parametrize("form", ["rates", "rows"])
def test_given_train_prior_is_per_label(form, letters):
    """train_prior of shape (L,) (prior of "present") or (L, 2) reaches each label."""
    _, X_cal, _, _, Y_cal, _ = letters
    model = KNeighborsClassifier().fit(X_cal, Y_cal)
    q = np.array([0.2, 0.5, 0.3, 0.4])
    given = q if form == "rates" else np.column_stack((1 - q, q))
    can = CANClassifier(model, train_prior=given).fit(X_cal, Y_cal)
    np.testing.assert_allclose(can.train_prior_, q)
    for label, estimator in enumerate(can.label_estimators_):
        np.testing.assert_allclose(estimator.train_prior_, [1 - q[label], q[label]])


@pytest.mark.parametrize(
    ("prior", "error", "match"),
    [
        (
            np.full(3, 0.5),
            ValueError,
            r"train_prior for 4 labels must have shape \(4,\)",
        ),
        ({0: 0.5}, TypeError, "train_prior for a multi-label target must be an array"),
        (np.array([0.2, 0.5, 0.3, 0.0]), ValueError, r"Label 3 \(column 3 of y\)"),
    ],
)
def test_bad_per_label_prior_is_refused(prior, error, match, letters):
    """A per-label prior of the wrong shape or kind is refused, naming the fix."""
    _, X_cal, _, _, Y_cal, _ = letters
    model = KNeighborsClassifier().fit(X_cal, Y_cal)
    with pytest.raises(error, match=match):
        CANClassifier(model, train_prior=prior).fit(X_cal, Y_cal)


def test_stream_methods_point_to_the_label_wrappers(letters):
    """update_prior works on one label at a time: the error says where."""
    _, X_cal, X_test, _, Y_cal, _ = letters
    model = KNeighborsClassifier().fit(X_cal, Y_cal)
    prior = PriorAdaptedClassifier(model).fit(X_cal, Y_cal)
    with pytest.raises(ValueError, match=r"label_estimators_\[l\]"):
        prior.update_prior(X_test)
    prior.label_estimators_[0].update_prior(X_test)  # which works


def test_multiclass_multioutput_target_is_refused(letters):
    """Several columns of more than two classes have no two-class reduction."""
    X_train, _, _, Y_train, _, _ = letters
    y = Y_train + Y_train[:, ::-1]  # values 0, 1, 2
    with pytest.raises(ValueError, match="multiclass-multioutput"):
        CANClassifier(KNeighborsClassifier()).fit(X_train, y)


@pytest.mark.parametrize(
    "encode, match",
    [
        (lambda Y: 2 * Y, r"values \[0, 2\].*\(y == 2\)"),
        (lambda Y: Y + 1, r"values \[1, 2\]"),
        (lambda Y: np.where(Y == 1, "yes", "no"), r"\(y == 'yes'\)\.astype"),
    ],
)
def test_indicators_other_than_0_1_are_refused(encode, match, letters):
    """Two values per column other than 0/1 leave "present" to a guess (train_prior_
    reported the rate of 1, which a 0/2 target never holds): refused, with the
    encoding to use."""
    X_train, _, _, Y_train, _, _ = letters
    with pytest.raises(ValueError, match=match):
        PriorAdaptedClassifier(KNeighborsClassifier()).fit(X_train, encode(Y_train))


def test_single_label_methods_after_a_multi_label_fit(letters):
    """test_shift and prior_interval point to the label wrappers (they raised
    AttributeError); reset_prior resets every label's stream; n_iter_ is each
    label's, also after a single-label fit of the same wrapper."""
    _, X_cal, X_test, Y_train, Y_cal, _ = letters
    single = KNeighborsClassifier().fit(X_cal, Y_cal[:, 0])
    prior = PriorAdaptedClassifier(single).fit(X_cal, Y_cal[:, 0])
    assert np.ndim(prior.n_iter_) == 0
    model = KNeighborsClassifier().fit(X_cal, Y_cal)
    prior.set_params(estimator=model).fit(X_cal, Y_cal)
    for method in (prior.test_shift, prior.prior_interval):
        with pytest.raises(ValueError, match=r"label_estimators_\[l\]"):
            method(X_test)
    expected = [label.n_iter_ for label in prior.label_estimators_]
    np.testing.assert_array_equal(prior.n_iter_, expected)
    first = prior.label_estimators_[0]
    first.update_prior(X_test)
    assert first.n_seen_ == len(X_test)
    assert prior.reset_prior() is prior and first.n_seen_ == 0


def test_label_the_model_never_saw_present(letters):
    """A label that the model saw with one value only (a rare label: classes_
    [0] for it): CAN and prior adaptation give its probability 1 as the model
    does; temperature scaling says there is nothing to fit, naming the label."""
    X_train, X_cal, X_test, Y_train, Y_cal, _ = letters
    Y_train, Y_cal = Y_train.copy(), Y_cal.copy()
    Y_train[:, 1] = Y_cal[:, 1] = 0
    model = RandomForestClassifier(10, random_state=0).fit(X_train, Y_train)
    for wrapper in (CANClassifier, PriorAdaptedClassifier):
        proba = wrapper(model).fit(X_cal, Y_cal).predict_proba(X_test)
        np.testing.assert_array_equal(proba[1], np.ones((len(X_test), 1)))
        assert proba[0].shape == (len(X_test), 2)
    with pytest.raises(ValueError, match="Label 1.*one class only"):
        TemperatureCalibratedClassifier(model).fit(X_cal, Y_cal)


def test_errors_at_predict_time_name_the_label(letters):
    """A label's refusal in predict_proba says which label, as fit's does."""
    _, X_cal, X_test, _, Y_cal, _ = letters
    model = KNeighborsClassifier().fit(X_cal, Y_cal)
    can = CANClassifier(model, reference="fit").fit(X_cal, Y_cal)
    can.label_estimators_[2].set_params(reference="fit").reference_proba_ = None
    with pytest.raises(ValueError, match="^Label 2: reference='fit' was set"):
        can.predict_proba(X_test)


def test_multi_output_model_with_one_column_of_labels(letters):
    """A fitted multi-output model (classes_ a list) with a 1-D y: the error
    says so (it was "unhashable type: 'list'")."""
    X_train, X_cal, _, Y_train, Y_cal, _ = letters
    model = MultiOutputClassifier(LogisticRegression()).fit(X_train, Y_train[:, :1])
    with pytest.raises(ValueError, match="multi-output model.*y.ravel"):
        CANClassifier(model).fit(X_cal, Y_cal[:, 0])


def test_warnings_name_the_label(letters):
    """A warning of one label's method ends with the label it comes from."""
    _, X_cal, X_test, _, Y_cal, _ = letters
    model = KNeighborsClassifier().fit(X_cal, Y_cal)
    can = CANClassifier(model, tau=0.0).fit(X_cal, Y_cal)  # every row uncertain
    _, messages = recorded(lambda: can.predict_proba(X_test))
    assert len(messages) == Y_cal.shape[1]
    for label, message in enumerate(messages):
        assert message.startswith("CAN found 600 low-confidence rows but no confident")
        assert message.endswith(f"(label {label})")


def test_the_models_own_warnings_come_as_the_model_gives_them(letters):
    """The model's warnings at predict time (feature names missing from X) are
    the whole model's: its own text and place, once, as scikit-learn gives
    them, not re-issued as label 0's from inside the wrapper."""
    import pandas as pd

    X_train, X_cal, X_test, Y_train, Y_cal, _ = letters
    columns = [f"f{j}" for j in range(X_train.shape[1])]
    model = MultiOutputClassifier(LogisticRegression(max_iter=1000))
    model.fit(pd.DataFrame(X_train, columns=columns), Y_train)
    can = CANClassifier(model).fit(pd.DataFrame(X_cal, columns=columns), Y_cal)

    def caught(call):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            call()
        return [(str(w.message), w.category, w.filename) for w in seen]

    own = caught(lambda: model.predict_proba(X_test))
    assert own and all("feature names" in message for message, _, _ in own)
    assert caught(lambda: can.predict_proba(X_test)) == own
    assert caught(lambda: can.predict(X_test)) == own


# -- scikit-learn's multi-label checks -------------------------------------------------


def test_tags_follow_the_inner_model():
    """multi_label is declared when the inner model takes multi-label targets."""
    assert not get_tags(CANClassifier()).classifier_tags.multi_label
    for model in [model() for model in INNER.values()]:
        assert get_tags(CANClassifier(model)).classifier_tags.multi_label
    tags = get_tags(CANClassifier(MultiOutputClassifier(LogisticRegression())))
    assert not tags.target_tags.single_output  # (it refuses a 1-D y)


CHECK_INNER = {
    "multioutput-lr": INNER["multioutput-lr"],
    "knn": lambda: KNeighborsClassifier(n_neighbors=5),
    "mlp": lambda: MLPClassifier(
        hidden_layer_sizes=(8,), tol=1e-3, max_iter=3000, random_state=0
    ),
    "chain": INNER["chain"],
}


@pytest.mark.parametrize("inner", sorted(CHECK_INNER))
@pytest.mark.parametrize("wrapper", ["can-default", "prior-default", "temperature-nll"])
@pytest.mark.parametrize(
    "check",
    [
        check_classifiers_multilabel_representation_invariance,
        check_classifiers_multilabel_output_format_predict,
        check_classifiers_multilabel_output_format_predict_proba,
    ],
    ids=lambda check: check.__name__.removeprefix("check_classifiers_multilabel_"),
)
# The checks fit on 75 rows of two noisy features, where these documented
# warnings are expected (as in test_common.py): k-NN can be right on every
# calibration row, where the NLL temperature is clipped; a label can have no
# confident row for CAN.
@pytest.mark.filterwarnings("ignore:NLL temperature scaling found no minimum")
@pytest.mark.filterwarnings("ignore:CAN found .* no confident reference row")
def test_sklearn_multilabel_checks(check, wrapper, inner):
    """scikit-learn's multi-label checks pass around every multi-label model."""
    estimator = make(wrapper, CHECK_INNER[inner]())
    check(type(estimator).__name__, estimator)


# -- array functions -------------------------------------------------------------------


def columns(proba, label):
    """Label ``label`` of multi-label probabilities as a two-class (n, 2) array."""
    if isinstance(proba, list):
        return proba[label]
    return np.column_stack((1 - proba[:, label], proba[:, label]))


@pytest.fixture(scope="module")
def outputs(letters):
    """Held-out outputs of two real models: list form, matrix form, and scores."""
    X_train, X_cal, X_test, Y_train, Y_cal, Y_test = letters
    listed = MultiOutputClassifier(LogisticRegression(max_iter=1000)).fit(
        X_train, Y_train
    )
    chain = INNER["chain"]().fit(X_train, Y_train)
    return {
        "list": (listed.predict_proba(X_cal), listed.predict_proba(X_test)),
        "matrix": (chain.predict_proba(X_cal), chain.predict_proba(X_test)),
        "scores": (chain.decision_function(X_cal), chain.decision_function(X_test)),
        "Y": (Y_cal, Y_test),
        "train_prior": Y_train.mean(axis=0),
    }


@pytest.mark.parametrize("form", ["list", "matrix"])
@pytest.mark.parametrize(
    "case",
    ["can-batch", "can-reference", "adjust", "entropy"],
)
def test_per_label_probabilities_equal_the_binary_loop(case, form, outputs):
    """per_label of a per-row function is its loop over labels, in the input form."""
    cal, test = outputs[form]
    q = outputs["train_prior"]
    n_labels = len(q)
    calls = {
        "can-batch": lambda p, lab: alternating_normalization(
            p, [1 - q[lab], q[lab]], tau=0.5, alpha=2.0, n_iter=3
        ),
        "can-reference": lambda p, lab: alternating_normalization(
            p, [1 - q[lab], q[lab]], reference=columns(cal, lab), tau=0.5
        ),
        "adjust": lambda p, lab: adjust_to_prior(
            p, [1 - q[lab], q[lab]], [1 - TEST_PRIOR[lab], TEST_PRIOR[lab]]
        ),
        "entropy": lambda p, lab: topk_entropy(p, 2, kind="unrenormalized"),
    }
    got = {
        "can-batch": lambda: per_label(
            alternating_normalization, test, q, tau=0.5, alpha=2.0, n_iter=3
        ),
        "can-reference": lambda: per_label(
            alternating_normalization, test, q, reference=cal, tau=0.5
        ),
        "adjust": lambda: per_label(adjust_to_prior, test, q, TEST_PRIOR),
        "entropy": lambda: per_label(topk_entropy, test, 2, kind="unrenormalized"),
    }[case]()
    for label in range(n_labels):
        expected = calls[case](columns(test, label), label)
        if case == "entropy":
            assert got.shape == (len(columns(test, 0)), n_labels)
            np.testing.assert_allclose(got[:, label], expected, rtol=0, atol=1e-12)
        else:
            assert type(got) is type(test)
            np.testing.assert_allclose(
                columns(got, label), expected, rtol=0, atol=1e-12
            )


@pytest.mark.parametrize("form", ["list", "matrix"])
def test_per_label_priors_equal_the_binary_loop(form, outputs):
    """Estimates of each label's prior: per_label stacks the binary results."""
    cal, test = outputs[form]
    Y_cal, _ = outputs["Y"]
    q = outputs["train_prior"]
    estimates = per_label(estimate_test_prior, test, q, method="map", tol=1e-10)
    confusion = per_label(joint_confusion_matrix, cal, Y_cal)
    bbse = per_label(bbse_test_prior, test, confusion)
    source = per_label(estimate_source_prior, cal, Y_cal)
    assert confusion.shape == (len(q), 2, 2) and bbse.shape == source.shape == (
        len(q),
        2,
    )
    for label in range(len(q)):
        binary = [1 - q[label], q[label]]
        test_l, cal_l = columns(test, label), columns(cal, label)
        want = estimate_test_prior(test_l, binary, method="map", tol=1e-10).prior
        np.testing.assert_allclose(estimates[label].prior, want, rtol=0, atol=1e-12)
        want = joint_confusion_matrix(cal_l, Y_cal[:, label])
        np.testing.assert_allclose(confusion[label], want, rtol=0, atol=1e-12)
        want = bbse_test_prior(test_l, want)
        np.testing.assert_allclose(bbse[label], want, rtol=0, atol=1e-12)
        want = estimate_source_prior(cal_l, Y_cal[:, label])
        np.testing.assert_allclose(source[label], want, rtol=0, atol=1e-12)


def test_per_label_temperature_equals_the_binary_loop(outputs):
    """Per-label scores: one temperature (and bias) per label, as the binary fits."""
    cal, test = outputs["scores"]
    Y_cal, Y_test = outputs["Y"]
    temperatures = per_label(fit_temperature, cal, Y_cal, method="nll")
    bcts_t, bcts_b = per_label(fit_bias_corrected_temperature, cal, Y_cal)
    proba = per_label(softmax_temperature, test, bcts_t, bcts_b)
    shared = per_label(softmax_temperature, test, 2.0)
    ece = per_label(expected_calibration_error, Y_test, proba)
    assert temperatures.shape == bcts_t.shape == ece.shape == (Y_cal.shape[1],)
    assert bcts_b.shape == (Y_cal.shape[1], 2) and proba.shape == test.shape
    for label in range(Y_cal.shape[1]):
        s_cal, s_test = cal[:, label], test[:, label]
        want = fit_temperature(s_cal, Y_cal[:, label], method="nll")
        assert temperatures[label] == pytest.approx(want, abs=1e-12)
        want_t, want_b = fit_bias_corrected_temperature(s_cal, Y_cal[:, label])
        assert bcts_t[label] == pytest.approx(want_t, abs=1e-12)
        np.testing.assert_allclose(bcts_b[label], want_b, rtol=0, atol=1e-12)
        want = softmax_temperature(s_test, want_t, want_b)
        np.testing.assert_allclose(proba[:, label], want[:, 1], rtol=0, atol=1e-12)
        want = softmax_temperature(s_test, 2.0)[:, 1]
        np.testing.assert_allclose(shared[:, label], want, rtol=0, atol=1e-12)
        want = expected_calibration_error(Y_test[:, label], columns(proba, label))
        assert ece[label] == pytest.approx(want, abs=1e-12)


def test_per_label_class_wise_calibration_equals_the_binary_loop(outputs):
    """Vector scaling and Dirichlet calibration fitted per label are applied per
    label too: their weights and matrices stack on a first axis."""
    cal, test = outputs["scores"]
    Y_cal, _ = outputs["Y"]
    weights, bias = per_label(fit_vector_scaling, cal, Y_cal)
    vs = per_label(softmax_vector_scaling, test, weights, bias)
    proba_cal = [columns(expit(cal), label) for label in range(cal.shape[1])]
    proba_test = [columns(expit(test), label) for label in range(cal.shape[1])]
    log_cal, log_test = [np.log(p) for p in proba_cal], [np.log(p) for p in proba_test]
    matrix, dir_bias = per_label(fit_dirichlet_calibration, log_cal, Y_cal)
    dirichlet = per_label(softmax_dirichlet_calibration, log_test, matrix, dir_bias)
    assert weights.shape == (cal.shape[1], 2) and matrix.shape == (cal.shape[1], 2, 2)
    for label in range(cal.shape[1]):
        w, b = fit_vector_scaling(cal[:, label], Y_cal[:, label])
        want = softmax_vector_scaling(test[:, label], w, b)[:, 1]
        np.testing.assert_allclose(vs[:, label], want, rtol=0, atol=1e-12)
        m, b = fit_dirichlet_calibration(log_cal[label], Y_cal[:, label])
        want = softmax_dirichlet_calibration(log_test[label], m, b)
        np.testing.assert_allclose(dirichlet[label], want, rtol=0, atol=1e-12)


def test_per_label_list_and_matrix_forms_agree(outputs):
    """The same probabilities as a matrix or a list give the same results."""
    _, test = outputs["matrix"]
    listed = [columns(test, label) for label in range(test.shape[1])]
    q = outputs["train_prior"]
    from_matrix = per_label(alternating_normalization, test, q, tau=0.5)
    rows = np.column_stack((1 - q, q))  # the priors as (L, 2) rows
    from_list = per_label(alternating_normalization, listed, rows, tau=0.5)
    assert isinstance(from_list, list)
    np.testing.assert_allclose(
        np.column_stack([p[:, 1] for p in from_list]), from_matrix, rtol=0, atol=1e-12
    )


def test_per_label_does_not_modify_its_inputs(outputs):
    """The caller's arrays are unchanged."""
    _, test = outputs["matrix"]
    q = outputs["train_prior"]
    before, q_before = test.copy(), q.copy()
    per_label(alternating_normalization, test, q, tau=0.5)
    np.testing.assert_array_equal(test, before)
    np.testing.assert_array_equal(q, q_before)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda p: per_label(adjust_to_prior, p, [0.5] * 3, [0.5] * 4), "train_prior"),
        (
            lambda p: per_label(
                alternating_normalization, p, [0.5] * 4, reference=p[:, :3]
            ),
            "reference has 3 labels but proba has 4",
        ),
        (
            lambda p: per_label(joint_confusion_matrix, p, np.ones((600, 3))),
            "y must be",
        ),
        (
            lambda p: per_label(softmax_temperature, p, np.ones(3)),
            "temperature must be",
        ),
        (lambda p: per_label(np.sum, p), "no multi-label output"),
        (lambda p: per_label(adjust_to_prior, p[:, 0], [0.5], [0.5]), "proba must be"),
        # each label's result would overwrite the last one's in one out=
        (
            lambda p: per_label(alternating_normalization, p, [0.5] * 4, out=p),
            "takes no out=",
        ),
        # scores are not probabilities: a sigmoid per label, not a softmax
        (
            lambda p: per_label(alternating_normalization, 2 * p, [0.5] * 4),
            r"values from .* scipy\.special\.expit",
        ),
        (lambda p: per_label(topk_entropy, p[:0]), r"empty \(shape \(0, 4\)\)"),
        # a label's own refusal names the label (and not per_label's k)
        (
            lambda p: per_label(adjust_to_prior, p, [0.5, 1.5, 0.5, 0.5], [0.5] * 4),
            "^Label 1: train_prior",
        ),
        (
            lambda p: per_label(topk_entropy, p, k=1),
            "^Label 0: The 'k' parameter of topk",
        ),
    ],
)
def test_per_label_refuses_mismatched_arguments(call, match, outputs):
    """Per-label arguments of the wrong shape are refused with a message."""
    _, test = outputs["matrix"]
    with pytest.raises(ValueError, match=match):
        call(test)


def _in_namespace(name, array):
    """``array`` (NumPy) as an array of the library ``name``."""
    module = pytest.importorskip(name)
    if name == "dask.array":
        return module.from_array(array, chunks=(100,) + (-1,) * (array.ndim - 1))
    return module.asarray(array)


def _to_numpy(array):
    if hasattr(array, "compute"):
        array = array.compute()
    if hasattr(array, "__dlpack__") and not isinstance(array, np.ndarray):
        return np.from_dlpack(array)
    return np.asarray(array)


@pytest.mark.parametrize("library", ["array_api_strict", "torch", "dask.array"])
def test_per_label_keeps_the_namespace(library, outputs):
    """Arrays of another library in, arrays of that library out: the matrix
    and list forms, per-row values, stacked arrays and numbers, equal to the
    NumPy results."""
    xp = pytest.importorskip("array_api_compat").array_namespace
    _, test = outputs["matrix"]
    scores, _ = outputs["scores"]
    Y_cal, _ = outputs["Y"]
    q = outputs["train_prior"]
    ns = partial(_in_namespace, library)
    listed = [columns(test, label) for label in range(test.shape[1])]
    temperatures, biases = per_label(fit_bias_corrected_temperature, scores, Y_cal)
    calls = [
        lambda a: per_label(alternating_normalization, a(test), a(q), tau=0.5),
        lambda a: per_label(adjust_to_prior, [a(p) for p in listed], a(q), a(q)),
        lambda a: per_label(topk_entropy, a(test), 2, kind="unrenormalized"),
        lambda a: per_label(fit_temperature, a(scores), a(Y_cal)),
        lambda a: per_label(joint_confusion_matrix, a(test), a(Y_cal)),
        lambda a: per_label(softmax_temperature, a(scores), temperatures, a(biases)),
    ]
    for call in calls:
        expected, got = call(np.asarray), call(ns)
        if isinstance(expected, list):
            got_arrays = got
            got, expected = np.stack([_to_numpy(g) for g in got]), np.stack(expected)
        else:
            got_arrays = [got]
            got = _to_numpy(got)
        for array in got_arrays:
            assert xp(array) is xp(ns(test)), type(array)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_set_params_after_a_multilabel_fit_reaches_every_label(letters):
    """A parameter set after a multi-label fit takes effect at the next
    predict_proba, as on one label's wrapper: each label's copy kept fit's
    (CAN's tau, the shift level ignored; reset_prior() then applied the
    latter, changing batch predictions). A changed per-label prior is
    refused; a changed method is refused by the labels, as on one."""
    X_train, X_cal, X_test, Y_train, Y_cal, _ = letters
    model = MultiOutputClassifier(LogisticRegression(max_iter=1000))
    model.fit(X_train, Y_train)
    for wrapper, name, value in [
        (CANClassifier(model), "tau", 0.5),
        (PriorAdaptedClassifier(model), "shift_level", None),
    ]:
        wrapper.fit(X_cal, Y_cal)
        before = wrapper.predict_proba(X_test)
        wrapper.set_params(**{name: value})
        refit = clone(wrapper).set_params(estimator=model).fit(X_cal, Y_cal)
        for got, expected in zip(
            wrapper.predict_proba(X_test), refit.predict_proba(X_test), strict=True
        ):
            np.testing.assert_allclose(got, expected, rtol=1e-12)
        assert any(
            not np.allclose(a, b)
            for a, b in zip(before, wrapper.predict_proba(X_test), strict=True)
        )
    wrapper = PriorAdaptedClassifier(model).fit(X_cal, Y_cal)
    wrapper.set_params(train_prior=np.full(Y_cal.shape[1], 0.5))
    with pytest.raises(ValueError, match="train_prior was changed after fit"):
        wrapper.predict_proba(X_test)
    wrapper = PriorAdaptedClassifier(model).fit(X_cal, Y_cal)
    wrapper.set_params(method="map")
    with pytest.raises(ValueError, match="method was changed"):
        wrapper.predict_proba(X_test)


def test_per_label_refuses_a_matrix_without_labels_clearly():
    """A matrix of no column (no label) gets the reason and the fix, as one of
    no row does; it failed inside NumPy ("zero-size array to reduction
    operation minimum")."""
    with pytest.raises(ValueError, match=r"proba has no label \(shape \(4, 0\)\)"):
        per_label(alternating_normalization, np.zeros((4, 0)), np.zeros(0))
    with pytest.raises(ValueError, match=r"proba is empty \(shape \(0, 3\)\)"):
        per_label(alternating_normalization, np.zeros((0, 3)), np.full(3, 0.5))


def test_a_labels_warning_points_at_the_callers_line():
    """Each label's warnings are given again, naming the label, from a context
    manager: they pointed at contextlib.py (its __exit__ runs the manager),
    not at the caller's line as every other warning does, so filters by
    module or line missed them."""
    from sklearn.datasets import make_multilabel_classification

    X, Y = make_multilabel_classification(900, 6, n_classes=3, random_state=0)
    forest = RandomForestClassifier(30, random_state=0).fit(X[:300], Y[:300])
    wrapper = PriorAdaptedClassifier(forest, max_iter=2).fit(X[300:600], Y[300:600])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        wrapper.predict_proba(X[600:])
    labelled = [w for w in caught if "(label " in str(w.message)]
    assert labelled
    assert {(w.filename, w.lineno) for w in labelled} == {(__file__, line)}
