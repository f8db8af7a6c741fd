"""Edges of the calibration wrappers and fits (issue 29): inputs that gave
silent wrong answers, hangs or tracebacks."""

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from skprior import TemperatureCalibratedClassifier


@pytest.mark.parametrize("in_pipeline", [False, True])
def test_pairwise_svc_scores_are_refused(in_pipeline):
    """SVC(decision_function_shape='ovo') on 3 classes gives 3 columns of
    pairwise scores, the width of class logits: read as logits they gave
    accuracy 0.38 against the model's 0.88."""
    X, y = load_iris(return_X_y=True)
    model = SVC(decision_function_shape="ovo")
    model = make_pipeline(StandardScaler(), model) if in_pipeline else model
    model.fit(X[::2], y[::2])
    wrapper = TemperatureCalibratedClassifier(FrozenEstimator(model))
    with pytest.raises(ValueError, match="decision_function_shape='ovr'"):
        wrapper.fit(X[1::2], y[1::2])


def test_one_vs_rest_svc_scores_are_logits():
    X, y = load_iris(return_X_y=True)
    model = SVC().fit(X[::2], y[::2])
    wrapper = TemperatureCalibratedClassifier(FrozenEstimator(model))
    wrapper.fit(X[1::2], y[1::2])
    assert np.mean(wrapper.predict(X[1::2]) == model.predict(X[1::2])) > 0.95


def test_dirichlet_calibration_of_many_classes_is_refused():
    """K = 2,000 took 319 s (K**2 parameters): refused, naming vector scaling."""
    from skprior import fit_dirichlet_calibration

    y = np.arange(2400) % 1200
    logits = np.random.default_rng(0).standard_normal((2400, 1200))
    with pytest.raises(ValueError, match="at most 1,000.*fit_vector_scaling"):
        fit_dirichlet_calibration(logits, y, reg_lambda=1e-3)
