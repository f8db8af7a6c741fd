"""What every skprior wrapper shares.

A wrapper holds a probabilistic classifier, learns the training class prior in
``fit`` and post-processes ``predict_proba``. This module carries the parts that
do not depend on the post-processing: how the inner model is fitted (or, when it
is fitted already, never refitted), how the training prior is counted, the
scikit-learn protocol (``classes_``, ``predict``, tags, ``clone``).
"""

import copy
import dataclasses
from abc import ABCMeta, abstractmethod

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.utils import get_tags, indexable
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    _raise_for_params,
    _routing_enabled,
    process_routing,
)
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, has_fit_parameter

from skprior._multilabel import (
    copy_feature_attributes,
    fit_labels,
    is_multilabel,
    positive_rates,
    predict_labels,
    predict_proba_labels,
)
from skprior._utils._array_api import get_namespace, namespace_of, to_host
from skprior._utils._constraints import CONSTRAINTS
from skprior._utils._sklearn_compat import _fit_context, _num_samples
from skprior._utils._validation import (
    _precision_dtype,
    as_labels,
    check_prior,
    check_proba,
    warn_user,
)
from skprior._utils._validation_labels import (
    check_sample_weight,
    encode_labels,
    label_frequencies,
)


def _check_fit_X(X, n_labels):
    """Refuse an ``X`` that cannot be the rows of ``y`` (named, with the fix)."""
    if X is None or isinstance(X, (str, bytes)):
        raise TypeError(
            f"X must be array-like of shape (n_samples, n_features), got {X!r}. "
            f"If it names a file, load it first."
        )
    try:
        n_samples = _num_samples(X)
    except TypeError as exc:
        raise TypeError(
            f"X must be array-like of shape (n_samples, n_features): {exc}"
        ) from exc
    if n_samples != n_labels:
        raise ValueError(
            f"X has {n_samples} rows but y has {n_labels} labels; give one label "
            f"per row of X."
        )


def _used_as_is(estimator):
    """Whether the wrapper uses ``estimator`` as it is (frozen or fitted)."""
    return hasattr(estimator, "fit") and (
        isinstance(estimator, FrozenEstimator) or is_fitted(estimator)
    )


def _check_frozen_is_fitted(estimator):
    """Refuse a FrozenEstimator around an unfitted model, naming the fix."""
    if isinstance(estimator, FrozenEstimator) and not is_fitted(estimator.estimator):
        name = type(estimator.estimator).__name__
        raise NotFittedError(
            f"The FrozenEstimator wraps an unfitted {name}: a frozen model is used "
            f"as it is, never fitted. Fit the model first, or pass it unfrozen to "
            f"have the wrapper fit it."
        )


def is_fitted(estimator):
    """Return whether ``estimator`` is fitted, by scikit-learn's own test."""
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True


class BasePriorClassifier(
    ClassifierMixin, MetaEstimatorMixin, BaseEstimator, metaclass=ABCMeta
):
    """Base class for the wrappers that post-process ``predict_proba``.

    Subclasses implement ``_adjust_proba(output)``, which turns the inner
    model's output for a batch (``_inner_output(X)``: probabilities by default)
    into probabilities, and may extend ``_fit_post_hoc(X, y_index,
    sample_weight)``; everything else is here.

    The inner model, ``estimator``, is handled as scikit-learn's
    ``FrozenEstimator`` would handle it when it is already fitted: used as it
    is, never refitted -- not by ``fit``, not after ``clone`` (which wraps it in
    ``FrozenEstimator``), not in ``Pipeline`` or ``GridSearchCV``. An unfitted
    model is cloned and fitted in ``fit``; ``None`` means
    ``LogisticRegression()``. A grid over several fitted models
    (``{"estimator": [a, b]}``) needs each wrapped in ``FrozenEstimator``:
    ``GridSearchCV`` clones the values it tries, and the clone of a fitted
    model is unfitted, which the wrapper would then fit on the data it
    calibrates or adapts on. ``fit`` warns where it sees this: an unfitted
    model set by ``set_params`` in place of a fitted one (the grid over a
    wrapper of a fitted model, ``GridSearchCV(CANClassifier(a), {"estimator":
    [a, b]})``); over a wrapper of an unfitted model it cannot tell.
    """

    _parameter_constraints: dict = {
        "estimator": CONSTRAINTS["estimator"],
        "train_prior": CONSTRAINTS["optional_prior"],
    }

    def __init__(self, estimator=None, *, train_prior=None):
        self.estimator = estimator
        self.train_prior = train_prior

    # -- the inner model ---------------------------------------------------------

    def _get_estimator(self):
        if self.estimator is not None:
            return self.estimator
        if _routing_enabled():  # (its weights, as without routing)
            return LogisticRegression().set_fit_request(sample_weight=True)
        return LogisticRegression()

    def _fit_estimator(self, X, y, sample_weight, fit_params):
        """Return the fitted inner model: the given one if fitted, else a clone.

        ``fit_params`` are the metadata routed to the inner model's ``fit``
        (with routing enabled) or ``sample_weight`` alone (without). A fitted
        model is not fitted again, so they are not used.
        """
        estimator = self._get_estimator()
        # A typo (sample_weights=) is refused even where the model is not
        # fitted again: with routing, by the keys that the routing knows.
        if not _routing_enabled():
            _raise_for_params(fit_params, self, "fit")
        elif _used_as_is(estimator):
            given = {**fit_params, "sample_weight": sample_weight}
            self.get_metadata_routing().validate_metadata(
                method="fit", params={k: v for k, v in given.items() if v is not None}
            )
        if _used_as_is(estimator):
            _check_frozen_is_fitted(estimator)
            return estimator
        if getattr(self, "_unfitted_in_place_of_fitted", False):
            warn_user(
                f"{type(self).__name__} fits its inner model "
                f"({type(estimator).__name__}) on the data given to fit, and "
                f"post-processes its outputs on that same data, where a model is "
                f"more confident than on new data: set_params put an unfitted "
                f"model in place of a fitted one, as GridSearchCV does over a grid "
                f"of fitted models ({{'estimator': [a, b]}}), whose values it "
                f"clones (a clone is unfitted). To use fitted models as they are, "
                f"wrap each in sklearn.frozen.FrozenEstimator."
            )
        # The model will learn the classes of y: refuse parameters that do not
        # fit them before the (possibly long) fit, not after it. (Fewer than
        # two classes is the model's own error to give.)
        n_classes = len(np.unique(y))
        if n_classes >= 2:
            self._check_n_classes(n_classes)
        if _routing_enabled():
            routed = process_routing(
                self, "fit", sample_weight=sample_weight, **fit_params
            )
            fit_params = routed.estimator.fit
        else:
            fit_params = {}
            if sample_weight is not None:
                if not has_fit_parameter(estimator, "sample_weight"):
                    raise ValueError(
                        f"sample_weight was given but {type(estimator).__name__}.fit "
                        f"does not accept it. Fit the model yourself and pass the "
                        f"fitted model, or drop sample_weight."
                    )
                fit_params["sample_weight"] = sample_weight
        return clone(estimator).fit(X, y, **fit_params)

    def get_metadata_routing(self):
        """Get the metadata routing of this object.

        ``fit`` routes the metadata that the inner model requests to its
        ``fit`` (when the inner model is fitted here), and consumes
        ``sample_weight`` itself (the training prior and the post-hoc fit).
        Enable routing with ``sklearn.set_config(enable_metadata_routing=True)``.

        Returns
        -------
        routing : MetadataRouter
            A :class:`~sklearn.utils.metadata_routing.MetadataRouter`.
        """
        return (
            MetadataRouter(owner=type(self).__name__)
            .add_self_request(self)
            .add(
                estimator=self._get_estimator(),
                method_mapping=MethodMapping().add(caller="fit", callee="fit"),
            )
        )

    def _is_transductive(self):
        """Whether a row's output depends on the other rows of the batch."""
        return False

    def _check_n_classes(self, n_classes):
        """Raise if a parameter does not suit ``n_classes`` classes (a hook)."""

    # -- fit -----------------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None, **fit_params):
        """Fit the inner model if needed, and learn the training class prior.

        Parameters
        ----------
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            Data. When the inner model is already fitted this should be held-out
            data; it is only passed to the inner model's prediction methods.
        y : array-like of shape (n_samples,) or (n_samples, n_labels)
            Labels, all of them among the inner model's ``classes_``; or a
            multi-label indicator matrix (0 and 1, one column per label), for an
            inner model that takes one: each label is then a two-class problem
            of its own, handled by a two-class copy of the wrapper
            (``label_estimators_``).
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples, for the inner model's ``fit`` (when it is
            fitted here), the training prior and the post-hoc fit.
        **fit_params : dict
            Metadata for the inner model's ``fit``, only with metadata routing
            enabled (``sklearn.set_config(enable_metadata_routing=True)``) and
            requested by the model (``model.set_fit_request(...)``); without
            routing they are refused. Not used when the inner model is fitted
            already.

        Returns
        -------
        self : object
            The fitted wrapper.
        """
        if y is None:  # (scikit-learn's wording, which its checks look for)
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y "
                f"is None: pass the class label of each row of X."
            )
        if is_multilabel(y):
            _check_fit_X(X, _num_samples(y))
            return fit_labels(self, *indexable(X, y), sample_weight, fit_params)
        if hasattr(self, "label_estimators_"):  # left by an earlier fit
            del self.label_estimators_

        y_model = y  # (the inner model gets the labels in their namespace)
        # (labels, one per row: encoded on the host, where classes_ is)
        y = as_labels(y, "y")
        _check_fit_X(X, len(y))
        try:
            check_classification_targets(y)
        except (ValueError, TypeError) as exc:
            # (TypeError: labels that do not sort, as a None among strings)
            raise ValueError(
                f"y must hold class labels (a classification target) of one "
                f"type, without missing values. {exc}"
            ) from exc
        X, y = indexable(X, y)
        if sample_weight is not None:
            # (a copy: fitted attributes never alias the caller's array)
            sample_weight = check_sample_weight(sample_weight, len(y))

        if namespace_of(y_model) is None:
            y_model = y
        self.estimator_ = self._fit_estimator(X, y_model, sample_weight, fit_params)
        if not hasattr(self.estimator_, "classes_"):
            raise ValueError(
                f"{type(self.estimator_).__name__} has no classes_ after fit: it "
                f"is not a classifier (its predict_proba columns name no "
                f"labels). Wrap a classifier, whose classes_ orders the columns."
            )
        classes = self.estimator_.classes_
        if isinstance(classes, list):
            raise ValueError(
                f"{type(self.estimator_).__name__} is a multi-output model (its "
                f"classes_ is a list, one entry per output) but y is one column of "
                f"labels. Pass y as an (n_samples, n_labels) 0/1 indicator matrix "
                f"of two labels or more, or, for one label, wrap a single-output "
                f"model fitted on y.ravel()."
            )
        # (y read as column positions when scikit-learn's cross_val_predict
        # has label-encoded it around a fitted model: see encode_labels)
        y_index = encode_labels(y, classes, positions=True)
        train_prior = self._given_train_prior()
        if train_prior is None:
            self.train_prior_ = label_frequencies(
                y_index, classes.shape[0], sample_weight
            )
        else:
            self.train_prior_ = check_prior(
                train_prior, classes.shape[0], name="train_prior", classes=classes
            )
        copy_feature_attributes(self, self.estimator_)
        self._fit_post_hoc(X, y_index, sample_weight)
        return self

    def _given_train_prior(self):
        """The ``train_prior`` parameter as ``fit`` reads it (a hook)."""
        return self.train_prior

    def _fit_post_hoc(self, X, y_index, sample_weight):
        """Learn what the post-processing needs beyond the prior (a hook)."""

    # -- prediction ------------------------------------------------------------------

    @property
    def classes_(self):
        """The class labels of the inner model, ndarray of shape (n_classes,).

        After a multi-label ``fit``, the inner model's own: a list of each
        label's classes (``MultiOutputClassifier``, forests, k-NN) or the label
        indices (``MLPClassifier``).
        """
        return self.estimator_.classes_

    def _n_classes(self):
        """The number of classes of a single-label fit.

        (``classes_.shape``, not ``len``: with array API dispatch the model's
        classes may be an array of a library without ``len``.)
        """
        return int(self.classes_.shape[0])

    def _is_multilabel(self):
        """Whether ``fit`` saw a multi-label target (see ``_multilabel.py``)."""
        return hasattr(self, "label_estimators_")

    def _label_priors(self, method, X):
        """Per-label priors from each label's ``method(X)``: shape (n_labels,)."""
        return positive_rates(self, method, X)

    def _check_single_label(self):
        """Refuse a method of one two-class problem after a multi-label fit."""
        if self._is_multilabel():
            raise ValueError(
                "This wrapper was fitted on a multi-label target, and this method "
                "works on one two-class problem at a time: call it on "
                "label_estimators_[l], the wrapper of label l."
            )

    def _inner_proba(self, X):
        """The inner model's probabilities for ``X``, validated."""
        self._check_single_label()
        proba = self._call_inner("predict_proba", X)
        name = f"{type(self.estimator_).__name__}.predict_proba(X)"
        # (with array API dispatch, checked on its device and left there)
        checked = check_proba(proba, name=name, min_classes=1)
        if checked.shape[1] != self._n_classes():
            raise ValueError(
                f"{name} has {checked.shape[1]} columns but the model has "
                f"{self._n_classes()} classes."
            )
        if str(_precision_dtype(proba, checked)) in ("float16", "bfloat16"):
            # A model's float16 (or bfloat16) rows, checked at their own
            # precision and made float64 (float32), sum to one within a few
            # 1e-4 only: divided by their sums, so that the array functions
            # behind the wrapper, which check them at the new dtype's
            # tolerance, take them (they refused every such model's batch).
            xp, _ = get_namespace(checked)
            checked = checked / xp.sum(checked, axis=1, keepdims=True)
        return checked

    def _call_inner(self, method, X):
        """``self.estimator_.<method>(X)``, its refusal of ``X`` named as such.

        The inner model validates ``X``; its messages ("Expected 2D array",
        "X has 3 features") do not say that they are about the ``X`` given to
        the wrapper, so they are prefixed with it.
        """
        try:
            return getattr(self.estimator_, method)(X)
        except (ValueError, TypeError) as exc:
            if type(exc) not in (ValueError, TypeError):
                raise
            raise type(exc)(
                f"X was refused by {type(self.estimator_).__name__}.{method}: "
                f"{exc} Pass X in the form the model was fitted on."
            ) from exc

    def _inner_output(self, X):
        """What ``_adjust_proba`` post-processes: the inner probabilities."""
        return self._inner_proba(X)

    @abstractmethod
    def _adjust_proba(self, output):
        """Post-process the inner output (each subclass's own rule)."""

    def predict_proba(self, X):
        """Post-processed class probabilities for ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            Data to predict.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), or per label
            Probabilities in the order of ``classes_``; rows sum to one. After
            a multi-label ``fit``, in the inner model's form: a list of
            (n_samples, 2) arrays, one per label, or an (n_samples, n_labels)
            matrix of the probability of each label.
        """
        check_is_fitted(self)
        if self._is_multilabel():
            return predict_proba_labels(self, X)
        return self._adjust_proba(self._inner_output(X))

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba` (``-inf`` where it is exactly 0).

        Parameters
        ----------
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            Data to predict.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes), or per label
            Log-probabilities in the order of ``classes_`` (per label, in the
            form of :meth:`predict_proba`).
        """
        proba = self.predict_proba(X)
        with np.errstate(divide="ignore"):
            if isinstance(proba, list):
                return [np.log(p) for p in proba]
            xp, _ = get_namespace(proba)  # (a tensor stays on its device)
            return xp.log(proba)

    def predict(self, X):
        """The class with the highest post-processed probability.

        Parameters
        ----------
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            Data to predict.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_labels)
            Predicted labels, taken from ``classes_`` (after a multi-label
            ``fit``: the indicator matrix, one column per label).
        """
        check_is_fitted(self)
        if self._is_multilabel():
            return predict_labels(self, X)
        proba = self.predict_proba(X)
        xp, _ = get_namespace(proba)
        best = xp.argmax(proba, axis=1)
        if namespace_of(self.classes_) is None:  # (host classes: host indices)
            return self.classes_[to_host(xp, best)[0]]
        return xp.take(self.classes_, best)  # (array API dispatch: on the device)

    # -- scikit-learn protocol ---------------------------------------------------------

    def __sklearn_clone__(self):
        # A fitted inner model is handed on frozen, so that the clone uses it as
        # it is: the default clone would copy its parameters only, and the
        # clone's fit would then refit it on whatever data it is given.
        params = self.get_params(deep=False)
        estimator = params.get("estimator")
        if _used_as_is(estimator) and not isinstance(estimator, FrozenEstimator):
            params["estimator"] = FrozenEstimator(estimator)
        new = type(self)(**{k: clone(v, safe=False) for k, v in params.items()})
        # (as scikit-learn's clone: the metadata requests and set_output's
        # configuration are the object's, not parameters, and go with it)
        for attribute in ("_metadata_request", "_sklearn_output_config"):
            if hasattr(self, attribute):
                setattr(new, attribute, copy.deepcopy(getattr(self, attribute)))
        return new

    def set_params(self, **params):
        """Set the parameters of this wrapper (see ``BaseEstimator.set_params``).

        Setting a parameter of an inner model that is already fitted
        (``estimator__C=...``) is refused: it would change the model's
        parameters without refitting it. Pass an unfitted model to tune its
        parameters, or ``clone`` the wrapper (the clone holds the fitted model
        frozen, and ``FrozenEstimator`` refuses the same).
        """
        # ``BaseEstimator.set_params`` sets ``estimator`` first, then the nested
        # keys on it: check the model that they would land on.
        target = params.get("estimator", self.estimator)
        frozen = isinstance(target, FrozenEstimator)
        if _used_as_is(target):
            # (set_params(**get_params()) gives every nested value as it is:
            # those are no change, and are dropped)
            current = target.get_params(deep=True)
            params = {
                key: value
                for key, value in params.items()
                if not key.startswith("estimator__")
                or current.get(key[len("estimator__") :], object()) is not value
            }
        # (a FrozenEstimator takes a new ``estimator`` and nothing else)
        nested = [
            key
            for key in params
            if key.startswith("estimator__")
            and not (frozen and key == "estimator__estimator")
        ]
        if nested and target is None:
            raise ValueError(
                f"Cannot set {nested}: estimator is None (a LogisticRegression() "
                f"made at fit). Pass estimator=LogisticRegression() first, or "
                f"with those parameters."
            )
        if nested and (frozen or is_fitted(target)):
            state = (
                "held frozen (in a FrozenEstimator, as clone and GridSearchCV "
                "hand a fitted model on)"
                if frozen
                else "already fitted"
            )
            raise ValueError(
                f"Cannot set {nested}: the wrapped model is {state}, and would "
                f"keep its fitted state and ignore them. Wrap an unfitted model "
                f"to tune its parameters; over a fitted one, tune the wrapper's "
                f"own parameters."
            )
        if "estimator" in params:  # (fit warns: see the class docstring)
            given = params["estimator"]
            self._unfitted_in_place_of_fitted = (
                _used_as_is(self.estimator)
                and hasattr(given, "fit")  # (set_params does not validate)
                and not _used_as_is(given)
            )
        return super().set_params(**params)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner_tags = get_tags(self._get_estimator())
        # Ask scikit-learn's checks the questions the inner model can answer.
        tags.input_tags = dataclasses.replace(inner_tags.input_tags)
        if _used_as_is(self.estimator):
            # A fitted precomputed-kernel model takes K(X, X_train) as it is:
            # no square kernel for GridSearchCV to slice (the fit refits none).
            tags.input_tags.pairwise = False
        if inner_tags.classifier_tags is not None:
            tags.classifier_tags.poor_score = inner_tags.classifier_tags.poor_score
            # A multi-label target is fitted label by label whenever the inner
            # model takes it; a model that takes multi-output targets takes
            # multi-label ones (two classes per output).
            tags.classifier_tags.multi_label = (
                inner_tags.classifier_tags.multi_label
                or inner_tags.target_tags.multi_output
            )
        tags.target_tags.single_output = inner_tags.target_tags.single_output
        # scikit-learn has no "transductive" tag. ``non_deterministic`` is the
        # tag its checks read to skip the subset- and order-invariance tests,
        # which a batch-dependent method cannot pass by design.
        tags.non_deterministic = inner_tags.non_deterministic or self._is_transductive()
        return tags
