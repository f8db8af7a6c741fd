"""Multi-label: one two-class problem per label.

A multi-label task asks L yes/no questions of each sample. Each label is a
two-class problem with its own prior :math:`(1 - q_l, q_l)`, and CAN, prior
adaptation and calibration apply to each label on its own: the reduction the
CAN paper uses for its multi-label task (Jia et al., 2021). Multi-label
probabilities come in two forms, and both are read:

``"list"``
    scikit-learn's list of L arrays of shape (n, 2), the probabilities of
    "absent" and "present" (``MultiOutputClassifier``, forests, k-NN);
``"matrix"``
    an (n, L) matrix of independent probabilities that each label is present
    (``MLPClassifier``, ``ClassifierChain``): label l is the two-class
    problem with probabilities :math:`(1 - p_{il}, p_{il})`.

The public :func:`skprior.per_label` (in ``_per_label.py``) runs any of
skprior's array functions label by label. The wrappers' reduction here
(``fit_labels`` and the functions after it, called by ``BasePriorClassifier``)
fits one two-class copy of the wrapper per
label over a :class:`LabelView` of the inner model: a fitted binary classifier
whose outputs are column ``l`` of the multi-label model's. The views of one
model share a :class:`LabelOutputs`, so that the model predicts each batch once,
not once per label.
"""

import contextlib
import warnings

import numpy as np
from scipy.sparse import issparse
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._available_if import available_if
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_consistent_length

from skprior._utils._validation import warn_user
from skprior._utils._validation_arrays import same_value
from skprior._utils._validation_labels import check_sample_weight

# Arguments of skprior's array functions that hold a prior (split by label by
# per_label, and read per label by the wrappers).
PRIOR_ARGUMENTS = ("prior", "train_prior", "test_prior", "init")


def is_multilabel(y):
    """Whether ``y`` is a multi-label target (an indicator matrix of 0 and 1).

    Raises for a multi-output target with more than two classes per output,
    which has no two-class reduction.
    """
    shape = getattr(y, "shape", None)
    if shape is None:
        # (a list of labels is not converted just to be told it is 1-D; what
        # is not a sequence at all is left to the 1-D checks to refuse)
        try:
            if len(y) == 0 or np.ndim(y[0]) != 1:
                return False
            shape = np.shape(y)
        except (TypeError, ValueError, KeyError, IndexError):
            return False
    if len(shape) != 2 or shape[1] < 2:
        return False
    kind = type_of_target(y)
    if kind not in ("multiclass-multioutput", "multilabel-indicator"):
        return False
    values = np.unique(y.data if issparse(y) else np.asarray(y))
    if kind == "multiclass-multioutput" and len(values) > 2:
        raise ValueError(
            "y has several columns with more than two classes in some of them "
            "(multiclass-multioutput). skprior reduces multi-label targets -- a "
            "0/1 indicator matrix, one column per label -- to one two-class "
            "problem per label; fit one wrapper per output instead."
        )
    if not np.isin(values, [0, 1]).all():
        # ("present" is 1: other pairs of values, such as 1/2 or "no"/"yes",
        # would leave it to guess which value means present)
        raise ValueError(
            f"y has several columns of values {values.tolist()}; a multi-label "
            f"target is a 0/1 indicator matrix, 1 where the label is present. "
            f"Encode it so, e.g. (y == {values.tolist()[-1]!r}).astype(int)."
        )
    return True


# -- the inner model, label by label --------------------------------------------------


def read_form(proba, name):
    """The form (``"list"`` or ``"matrix"``) and number of labels of ``proba``."""
    if isinstance(proba, (list, tuple)):
        shapes = [np.shape(p) for p in proba]
        if not shapes or any(len(s) != 2 or s[1] > 2 for s in shapes):
            raise ValueError(
                f"{name} is a list, read as scikit-learn's multi-label form: one "
                f"array of shape (n_samples, 2) per label. Got shapes {shapes}."
            )
        return "list", len(proba)
    shape = np.shape(proba)
    if len(shape) != 2:
        raise ValueError(
            f"{name} must be a list of (n_samples, 2) arrays, one per label, or an "
            f"(n_samples, n_labels) matrix of label probabilities; got shape {shape}."
        )
    return "matrix", shape[1]


class LabelOutputs:
    """A fitted multi-label model and its outputs for the batch being predicted.

    Inside ``with outputs.batch(X):`` the model's ``predict_proba(X)`` and
    ``decision_function(X)`` are computed once and shared by the label views;
    outside, every call goes to the model. The cache holds ``X`` by identity and
    lives only as long as the ``with`` block.
    """

    def __init__(self, model):
        self.model = model
        self.form = self.n_labels = None  # (read from the first output, in fit)
        self._batch = None

    @contextlib.contextmanager
    def batch(self, X):
        self._batch = (X, {}, [])
        try:
            yield self
        finally:
            self._batch = None

    def output(self, method, X):
        batch = self._batch  # (read once: another thread may end its batch)
        if batch is not None and batch[0] is X:
            if method not in batch[1]:
                # The model's warnings are of the whole model, not of the
                # label whose view asked first: kept apart from the label's,
                # and re-issued as they came (model_warnings).
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    batch[1][method] = self._call(method, X)
                batch[2].extend(caught)
            return batch[1][method]
        return self._call(method, X)

    def model_warnings(self):
        """Re-issue the warnings of the batch's model calls, where they arose."""
        for caught in self._batch[2] if self._batch is not None else ():
            warnings.warn_explicit(
                caught.message, caught.category, caught.filename, caught.lineno
            )

    def _call(self, method, X):
        output = getattr(self.model, method)(X)
        name = f"{type(self.model).__name__}.{method}(X)"
        form, n_labels = read_form(output, name)
        if method != "predict_proba":
            return output
        if self.form is None:
            self.form, self.n_labels = form, n_labels
        elif (form, n_labels) != (self.form, self.n_labels):
            raise ValueError(
                f"{name} gave {n_labels} labels in {form} form, but the model was "
                f"seen in fit with {self.n_labels} labels in {self.form} form."
            )
        return output


class LabelView(ClassifierMixin, BaseEstimator):
    """Label ``label`` of a fitted multi-label model, as a fitted binary classifier.

    ``predict_proba`` is the label's (n, 2) probabilities (``(1 - p, p)`` from a
    matrix of label probabilities); ``decision_function``, when the model has
    one, its score. Like ``FrozenEstimator`` the view is never refitted, and
    ``clone`` returns it as it is.

    Parameters
    ----------
    outputs : LabelOutputs
        The multi-label model, shared by the views of its labels.
    label : int
        The label's column.
    classes : ndarray of shape (n_classes,)
        The label's classes, in the order of its probability columns.
    """

    def __init__(self, outputs, label, classes):
        self.outputs = outputs
        self.label = label
        self.classes = classes

    @property
    def classes_(self):
        return self.classes

    @property
    def n_features_in_(self):
        return self.outputs.model.n_features_in_

    @property
    def feature_names_in_(self):
        return self.outputs.model.feature_names_in_

    def __sklearn_is_fitted__(self):
        return True

    def __sklearn_clone__(self):
        return self

    def fit(self, X=None, y=None, **kwargs):
        """Do nothing: the multi-label model is fitted already."""
        return self

    def predict_proba(self, X):
        """The label's probabilities, shape (n_samples, n_classes)."""
        proba = self.outputs.output("predict_proba", X)
        if self.outputs.form == "list":
            return proba[self.label]
        present = np.asarray(proba)[:, self.label]
        return np.column_stack((1 - present, present))

    @available_if(lambda self: hasattr(self.outputs.model, "decision_function"))
    def decision_function(self, X):
        """The label's score, shape (n_samples,) (or as the model gives it)."""
        scores = self.outputs.output("decision_function", X)
        if isinstance(scores, (list, tuple)):
            return scores[self.label]
        return np.asarray(scores)[:, self.label]


@contextlib.contextmanager
def label_warnings(label):
    """Re-issue the warnings of one label's computation, naming the label.

    The label goes at the end of the message, so that a filter on the
    message's start still matches.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        warn_user(f"{warning.message} (label {label})", warning.category)


def _label_classes(model, n_labels, y_dtype):
    """Each label's classes: the model's list of them, else 0 and 1."""
    classes = getattr(model, "classes_", None)
    if isinstance(classes, (list, tuple)) and len(classes) == n_labels:
        return [np.asarray(c) for c in classes]
    # An (n, L) matrix is "present" against "absent": classes 0 and 1, in the
    # dtype of the targets (so that predict returns what fit was given).
    return [np.array([0, 1]).astype(y_dtype)] * n_labels


def label_values(value, n_labels, name):
    """Split a per-label prior: (L,) rates of "present", or (L, 2) rows."""
    expected = (
        f"{name} for a multi-label target must be an array of numbers: shape "
        f"({n_labels},) with the prior of each label being present, or "
        f"({n_labels}, 2)"
    )
    if isinstance(value, (dict, str)) or issparse(value):
        raise TypeError(f"{expected}; got {type(value).__name__}.")
    try:
        array = np.asarray(value)
    except ValueError as error:  # (ragged)
        raise ValueError(f"{expected}; got {value!r}.") from error
    if array.dtype.kind not in "fiu":
        raise TypeError(f"{expected}; got dtype {array.dtype}.")
    value = array.astype(np.float64)
    if value.shape == (n_labels,):
        return [np.array([1 - q, q]) for q in value]
    if value.shape == (n_labels, 2):
        return [row.copy() for row in value]
    raise ValueError(
        f"{name} for {n_labels} labels must have shape ({n_labels},) -- the prior "
        f"of each label being present, q_l for the prior (1 - q_l, q_l) -- or "
        f"({n_labels}, 2); got shape {value.shape}."
    )


def fit_labels(wrapper, X, y, sample_weight, fit_params):
    """Fit ``wrapper`` on the multi-label target ``y``: one binary copy per label.

    The inner model is fitted once on ``y`` (unless it is fitted already); each
    label's copy of the wrapper wraps the view of that label and is fitted on
    its column of ``y``, so that its result is the binary method's on that label.
    """
    y = y.toarray() if issparse(y) else np.asarray(y)
    check_consistent_length(X, y)
    if sample_weight is not None:
        sample_weight = check_sample_weight(sample_weight, len(y))
    for name in [n for n in vars(wrapper) if n.endswith("_") and n[0] != "_"]:
        delattr(wrapper, name)  # fitted attributes of an earlier fit

    model = wrapper._fit_estimator(X, y, sample_weight, fit_params)
    outputs = LabelOutputs(model)
    estimators = []
    with outputs.batch(X):
        outputs.output("predict_proba", X)  # (shared by the labels' fits)
        n_labels = outputs.n_labels
        if n_labels != y.shape[1]:
            raise ValueError(
                f"{type(model).__name__}.predict_proba(X) gives {n_labels} labels "
                f"but y has {y.shape[1]} columns; the model must have been fitted "
                f"on the same labels."
            )
        classes = _label_classes(model, n_labels, y.dtype)
        params = wrapper.get_params(deep=False)
        split = {
            key: label_values(params[key], n_labels, key)
            for key in PRIOR_ARGUMENTS
            if params.get(key) is not None and not isinstance(params[key], str)
        }
        for label in range(n_labels):
            label_params = {**params, **{k: v[label] for k, v in split.items()}}
            label_params["estimator"] = LabelView(outputs, label, classes[label])
            estimator = type(wrapper)(**label_params)
            try:
                with label_warnings(label):
                    estimator.fit(X, y[:, label], sample_weight=sample_weight)
            except ValueError as error:
                raise ValueError(
                    f"Label {label} (column {label} of y): {error}"
                ) from error
            estimators.append(estimator)

    wrapper.estimator_ = model
    wrapper.label_estimators_ = estimators
    # (the parameters the labels were built with: see sync_label_params)
    wrapper._label_fit_params = params
    wrapper.train_prior_ = _present([e.train_prior_ for e in estimators], estimators)
    copy_feature_attributes(wrapper, model)
    return wrapper


def copy_feature_attributes(wrapper, model):
    """The model's ``n_features_in_`` and ``feature_names_in_`` on the wrapper.

    One the model lacks is removed from the wrapper (left by an earlier fit).
    """
    for attribute in ("n_features_in_", "feature_names_in_"):
        if hasattr(model, attribute):
            setattr(wrapper, attribute, getattr(model, attribute))
        elif hasattr(wrapper, attribute):
            delattr(wrapper, attribute)


def _outputs(wrapper):
    return wrapper.label_estimators_[0].estimator_.outputs


def sync_label_params(wrapper):
    """Hand the wrapper's parameters changed since ``fit`` on to its labels.

    Each label's wrapper was built with the parameters of ``fit``; one
    changed since by ``set_params`` (``tau``, ``shift_level``, ...) takes
    effect as it does on a single-label wrapper (whose own checks refuse
    what must be refitted, a changed ``method``). The per-label priors were
    split at ``fit``: a change of one of them is refused.
    """
    given = getattr(wrapper, "_label_fit_params", None)
    if given is None:  # (a wrapper pickled before)
        return
    for name, value in wrapper.get_params(deep=False).items():
        if name == "estimator" or same_value(value, given.get(name)):
            continue
        if name in PRIOR_ARGUMENTS:
            raise ValueError(
                f"{name} was changed after fit, which split it into the "
                f"labels' priors; call fit again to use the new value."
            )
        for estimator in wrapper.label_estimators_:
            estimator.set_params(**{name: value})
        given[name] = value


def label_results(wrapper, method, X):
    """``method(X)`` of each label's estimator, the model predicting ``X`` once."""
    sync_label_params(wrapper)
    results = []
    with _outputs(wrapper).batch(X) as outputs:
        for label, estimator in enumerate(wrapper.label_estimators_):
            try:
                with label_warnings(label):
                    results.append(getattr(estimator, method)(X))
            except ValueError as error:  # (named as fit names it)
                raise ValueError(f"Label {label}: {error}") from error
        outputs.model_warnings()
    return results


def predict_proba_labels(wrapper, X):
    """Per-label probabilities, in the form of the inner model's."""
    results = label_results(wrapper, "predict_proba", X)
    return as_form(results, _outputs(wrapper).form)


def predict_labels(wrapper, X):
    """The (n_samples, n_labels) matrix of per-label predictions."""
    return np.column_stack(label_results(wrapper, "predict", X))


def positive_rates(wrapper, method, X):
    """Per-label priors from ``method(X)``, as the probability of "present"."""
    return _present(label_results(wrapper, method, X), wrapper.label_estimators_)


def _present(priors, estimators):
    """The prior of "present" (class 1) in each label's two-class prior."""
    pairs = zip(priors, estimators, strict=True)
    return np.array([prior[np.asarray(e.classes_) == 1].sum() for prior, e in pairs])


def as_form(probas, form):
    if form == "list":
        return probas
    return np.column_stack([p[:, -1] for p in probas])
