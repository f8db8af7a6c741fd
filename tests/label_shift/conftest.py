"""Fixtures shared by the label-shift tests."""

import pytest
from sklearn.datasets import make_blobs
from sklearn.linear_model import LogisticRegression


@pytest.fixture(scope="module")
def blob_wrapper():
    """A logistic regression fitted on the first half of three noisy blobs."""
    X, y = make_blobs(n_samples=3000, centers=3, cluster_std=3.0, random_state=0)
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    return model, X, y
