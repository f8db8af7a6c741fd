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

The public :func:`per_label` runs any of skprior's array functions label by
label. The wrappers' reduction (``fit_labels`` and the functions after it,
called by ``BasePriorClassifier``) fits one two-class copy of the wrapper per
label over a :class:`LabelView` of the inner model: a fitted binary classifier
whose outputs are column ``l`` of the multi-label model's. The views of one
model share a :class:`LabelOutputs`, so that the model predicts each batch once,
not once per label.
"""

import contextlib
import inspect
import warnings

import numpy as np
from scipy.sparse import issparse
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._available_if import available_if
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_consistent_length

from skprior._sklearn_compat import validate_params
from skprior._validation import warn_user
from skprior._validation_labels import check_sample_weight

# Arguments of skprior's array functions that per_label splits by label.
DATA_ARGUMENTS = ("proba", "reference", "logits", "y_proba")
PRIOR_ARGUMENTS = ("prior", "train_prior", "test_prior", "init")
LABEL_ARGUMENTS = ("y", "y_true")
# One value per label, stacked on a first axis; the number is the dimension of
# the value a two-class call takes (a scalar temperature is shared).
STACKED_ARGUMENTS = {"temperature": 0, "bias": 1, "confusion": 2}


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
    if kind == "multiclass-multioutput":
        raise ValueError(
            "y has several columns with more than two classes in some of them "
            "(multiclass-multioutput). skprior reduces multi-label targets -- a "
            "0/1 indicator matrix, one column per label -- to one two-class "
            "problem per label; fit one wrapper per output instead."
        )
    return kind == "multilabel-indicator"


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
        self._batch = (X, {})
        try:
            yield self
        finally:
            self._batch = None

    def output(self, method, X):
        batch = self._batch  # (read once: another thread may end its batch)
        if batch is not None and batch[0] is X:
            if method not in batch[1]:
                batch[1][method] = self._call(method, X)
            return batch[1][method]
        return self._call(method, X)

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


def _label_classes(model, form, n_labels, y_dtype):
    """Each label's classes: the model's list of them, else 0 and 1."""
    classes = getattr(model, "classes_", None)
    if isinstance(classes, (list, tuple)) and len(classes) == n_labels:
        return [np.asarray(c) for c in classes]
    # An (n, L) matrix is "present" against "absent": classes 0 and 1, in the
    # dtype of the targets (so that predict returns what fit was given).
    return [np.array([0, 1]).astype(y_dtype)] * n_labels


def _label_values(value, n_labels, name):
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
        classes = _label_classes(model, outputs.form, n_labels, y.dtype)
        params = wrapper.get_params(deep=False)
        split = {
            key: _label_values(params[key], n_labels, key)
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
    wrapper.train_prior_ = np.array(
        [e.train_prior_[np.asarray(e.classes_) == 1].sum() for e in estimators]
    )
    for attribute in ("n_features_in_", "feature_names_in_"):
        if hasattr(model, attribute):
            setattr(wrapper, attribute, getattr(model, attribute))
    return wrapper


def _outputs(wrapper):
    return wrapper.label_estimators_[0].estimator_.outputs


def label_results(wrapper, method, X):
    """``method(X)`` of each label's estimator, the model predicting ``X`` once."""
    results = []
    with _outputs(wrapper).batch(X):
        for label, estimator in enumerate(wrapper.label_estimators_):
            with label_warnings(label):
                results.append(getattr(estimator, method)(X))
    return results


def predict_proba_labels(wrapper, X):
    """Per-label probabilities, in the form of the inner model's."""
    results = label_results(wrapper, "predict_proba", X)
    return _as_form(results, _outputs(wrapper).form)


def predict_labels(wrapper, X):
    """The (n_samples, n_labels) matrix of per-label predictions."""
    return np.column_stack(label_results(wrapper, "predict", X))


def positive_rates(wrapper, method, X):
    """Per-label priors from ``method(X)``, as the probability of "present"."""
    results = label_results(wrapper, method, X)
    return np.array(
        [
            prior[np.asarray(e.classes_) == 1].sum()
            for prior, e in zip(results, wrapper.label_estimators_, strict=True)
        ]
    )


def _as_form(probas, form):
    if form == "list":
        return probas
    return np.column_stack([p[:, -1] for p in probas])


# -- array functions, label by label --------------------------------------------------


def _row_results():
    # (imported here: these modules import the wrappers' base, which imports this)
    from skprior._can import alternating_normalization, topk_entropy
    from skprior._prior import adjust_to_prior
    from skprior._temperature import softmax_temperature

    return {
        alternating_normalization: "proba",
        adjust_to_prior: "proba",
        softmax_temperature: "proba",
        topk_entropy: "rows",
    }


def _split_data(value, name):
    if issparse(value):
        raise TypeError(
            f"{name} is a sparse matrix; pass {name}.toarray(), an (n_samples, "
            f"n_labels) matrix."
        )
    form, n_labels = read_form(value, name)
    if form == "list":
        return form, list(value)
    value = np.asarray(value)
    if value.dtype.kind not in "fiu":
        raise TypeError(
            f"{name} must hold real numbers, one column per label; got dtype "
            f"{value.dtype}."
        )
    if name == "logits":
        # one score per label: the two-class function reads it as logits (0, s)
        return form, [value[:, label] for label in range(n_labels)]
    return form, _LabelColumns(value)


class _LabelColumns:
    """The two-class ``(1 - p_l, p_l)`` of each label, made when asked.

    Made one label at a time, so that ``per_label`` holds one label's (n, 2)
    array at a time rather than twice its whole input.
    """

    def __init__(self, value):
        self.value = value

    def __len__(self):
        return self.value.shape[1]

    def __getitem__(self, label):
        column = self.value[:, label]
        return np.column_stack((1 - column, column))


def _split_stacked(value, name, n_labels, binary_ndim):
    value = np.asarray(value)
    if value.ndim == binary_ndim:
        return None  # shared by every label
    if value.ndim != binary_ndim + 1 or len(value) != n_labels:
        raise ValueError(
            f"{name} must be shared by all labels (dimension {binary_ndim}) or "
            f"have one entry per label on its first axis, length {n_labels}; got "
            f"shape {value.shape}."
        )
    return list(value)


def _split_labels(value, name, n_labels):
    value = value.toarray() if issparse(value) else np.asarray(value)
    if value.ndim != 2 or value.shape[1] != n_labels:
        raise ValueError(
            f"{name} must be an indicator matrix of shape (n_samples, {n_labels}), "
            f"one 0/1 column per label; got shape {value.shape}."
        )
    return [value[:, label] for label in range(n_labels)]


def _assemble(results, kind, form):
    first = results[0]
    if isinstance(first, tuple):
        return tuple(
            _assemble(list(part), None, form) for part in zip(*results, strict=True)
        )
    if kind == "proba":
        return _as_form(results, form)
    if kind == "rows":
        return np.column_stack(results)
    if all(np.ndim(r) == 0 and isinstance(r, (int, float, np.number)) for r in results):
        return np.array(results)
    if all(isinstance(r, np.ndarray) for r in results) and (
        len({r.shape for r in results}) == 1
    ):
        return np.stack(results)
    return list(results)


@validate_params({"func": [callable]}, prefer_skip_nested_validation=False)
def per_label(func, *args, **kwargs):
    r"""Run a two-class array function on each label of multi-label outputs.

    Each of the L labels is its own two-class problem with prior
    :math:`(1 - q_l, q_l)` (Jia et al., 2021): ``per_label(func, ...)`` calls
    ``func`` once per label, with that label's slice of each per-label argument
    and the other arguments as given, and puts the L results together. It is
    the same as the loop over labels, to the last bit; the multiclass functions
    themselves are unchanged.

    The arguments are recognised by name:

    - ``proba``, ``reference``, ``y_proba``, ``logits``: multi-label outputs,
      either scikit-learn's list of L arrays of shape (n_samples, 2), or an
      (n_samples, L) matrix of the probabilities that each label is present
      (label l is then ``(1 - p[:, l], p[:, l])``; for ``logits``, one score
      per label, which the function reads as the two-class logits ``(0, s)``).
    - ``prior``, ``train_prior``, ``test_prior``, ``init``: per-label priors, of
      shape (L,) -- the prior :math:`q_l` of each label being present -- or
      (L, 2).
    - ``y``, ``y_true``: an (n_samples, L) indicator matrix of 0 and 1.
    - ``temperature``, ``bias``, ``confusion``: shared by every label when given
      as a two-class call takes them (a float; shape (2,); (2, 2)), or one per
      label stacked on a first axis of length L.
    - Anything else (``k``, ``tau``, ``method``, ``sample_weight``, ...) is
      passed to every call as it is.

    Parameters
    ----------
    func : callable
        A two-class array function, such as :func:`alternating_normalization`,
        :func:`adjust_to_prior`, :func:`estimate_test_prior`,
        :func:`fit_temperature` or :func:`softmax_temperature`.
    *args, **kwargs
        The arguments of ``func``, per-label ones in multi-label form.

    Returns
    -------
    result
        Probabilities (from :func:`alternating_normalization`,
        :func:`adjust_to_prior`, :func:`softmax_temperature`) in the form of
        the first multi-label argument: a list of L arrays of shape
        (n_samples, 2), or an (n_samples, L) matrix of the probability of
        "present". One value per row (:func:`topk_entropy`): shape
        (n_samples, L). Numbers: shape (L,). Arrays of one shape: stacked,
        shape (L, ...) (a prior of each label: (L, 2)). A tuple: each of its
        parts by these rules. Anything else: a list of L results.

    See Also
    --------
    CANClassifier, PriorAdaptedClassifier, TemperatureCalibratedClassifier :
        Fitted on a multi-label target, they make the same reduction.

    References
    ----------
    .. [1] Jia, Reiter, Lim, Artzi and Cardie, "When in Doubt: Improving
       Classification Performance with Alternating Normalization", Findings of
       EMNLP 2021. arXiv:2109.13449.

    Examples
    --------
    Two labels, the second rare in training (``q = 0.1``): on the same
    probabilities, CAN pulls the undecided row towards "absent" for it.

    >>> import numpy as np
    >>> from skprior import alternating_normalization, per_label
    >>> proba = np.array([[0.9, 0.05], [0.1, 0.95], [0.5, 0.5]])
    >>> per_label(alternating_normalization, proba, [0.5, 0.1], tau=0.9)
    array([[0.9 , 0.05],
           [0.1 , 0.95],
           [0.5 , 0.1 ]])
    """
    if not callable(func):
        raise TypeError(
            f"func must be a callable, a two-class array function such as "
            f"skprior.alternating_normalization; got {func!r}."
        )
    bound = inspect.signature(func).bind(*args, **kwargs)
    arguments = bound.arguments
    data = [name for name in DATA_ARGUMENTS if arguments.get(name) is not None]
    if not data:
        raise ValueError(
            f"per_label found no multi-label output among the arguments of "
            f"{getattr(func, '__name__', func)}: it splits {DATA_ARGUMENTS} by "
            f"label."
        )
    split, form = {}, None
    for name in data:
        name_form, split[name] = _split_data(arguments[name], name)
        form = form or name_form
    n_labels = len(split[data[0]])
    for name in data[1:]:
        if len(split[name]) != n_labels:
            raise ValueError(
                f"{name} has {len(split[name])} labels but {data[0]} has {n_labels}."
            )
    for name in PRIOR_ARGUMENTS:
        if arguments.get(name) is not None:
            split[name] = _label_values(arguments[name], n_labels, name)
    for name in LABEL_ARGUMENTS:
        if arguments.get(name) is not None:
            split[name] = _split_labels(arguments[name], name, n_labels)
    for name, binary_ndim in STACKED_ARGUMENTS.items():
        if arguments.get(name) is not None:
            values = _split_stacked(arguments[name], name, n_labels, binary_ndim)
            if values is not None:
                split[name] = values

    kind = _row_results().get(func)
    results, out = [], None
    for label in range(n_labels):
        for name, values in split.items():
            arguments[name] = values[label]
        with label_warnings(label):
            result = func(*bound.args, **bound.kwargs)
        if kind == "proba" and form != "list":
            # (one column kept per label, written in place: the (n, 2) goes)
            if out is None:
                out = np.empty((result.shape[0], n_labels), dtype=result.dtype)
            out[:, label] = result[:, -1]
        else:
            results.append(result)
    return out if out is not None else _assemble(results, kind, form)
