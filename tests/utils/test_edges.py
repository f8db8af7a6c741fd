"""Edges of the shared validation (issue 29): keys, labels, float range and
tensors that gave silent wrong answers or tracebacks."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin

from skprior import CANClassifier
from skprior._utils._validation import check_prior


class ReversedClasses(ClassifierMixin, BaseEstimator):
    """A fitted model whose classes_ are not sorted: [2, 1, 0]."""

    def fit(self, X, y):
        self.classes_ = np.array([2, 1, 0])
        return self

    def predict_proba(self, X):
        return np.tile([0.6, 0.3, 0.1], (len(X), 1))


def test_prior_keyed_by_label_is_read_by_label_in_every_form():
    """A dict and a Series of the same content give one prior, in the order
    of classes_, whether the Series' index is sorted or not."""
    pd = pytest.importorskip("pandas")
    content = {0: 0.2, 1: 0.3, 2: 0.5}
    expected = [0.5, 0.3, 0.2]
    for prior in (content, pd.Series(content), pd.Series(content).iloc[::-1]):
        got = check_prior(prior, 3, classes=[2, 1, 0])
        np.testing.assert_allclose(got, expected)
    X, y = np.zeros((4, 1)), np.array([0, 1, 2, 0])
    model = ReversedClasses().fit(X, y)
    by_dict = CANClassifier(model, train_prior=content).fit(X, y)
    by_series = CANClassifier(model, train_prior=pd.Series(content)).fit(X, y)
    np.testing.assert_allclose(by_series.train_prior_, expected)
    np.testing.assert_allclose(by_dict.predict_proba(X), by_series.predict_proba(X))


def test_series_from_a_list_is_read_in_order_where_it_cannot_be_keyed():
    pd = pytest.importorskip("pandas")
    got = check_prior(pd.Series([0.2, 0.8]), 2, classes=["a", "b"])
    np.testing.assert_allclose(got, [0.2, 0.8])
