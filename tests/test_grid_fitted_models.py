"""A grid over fitted inner models without FrozenEstimator (issue 29).

``GridSearchCV(CANClassifier(a), {"estimator": [a, b]})`` clones the values it
tries, so the wrapper gets unfitted copies of ``a`` and ``b`` and fits them on
the data it then post-processes on: broken silently before, now warned.
"""

import warnings

import numpy as np
import pytest
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.tree import DecisionTreeClassifier

from skprior import (
    CANClassifier,
    PriorAdaptedClassifier,
    TemperatureCalibratedClassifier,
)

WRAPPERS = [CANClassifier, PriorAdaptedClassifier, TemperatureCalibratedClassifier]


@pytest.fixture(scope="module")
def fitted_models():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = (X[:, 0] + X[:, 1] + 0.5 * rng.normal(size=400) > 0).astype(int)
    a = LogisticRegression().fit(X[:200], y[:200])
    b = DecisionTreeClassifier(max_depth=2, random_state=0).fit(X[:200], y[:200])
    return X[200:], y[200:], a, b


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_grid_of_fitted_models_warns(fitted_models, wrapper):
    """Each fit of the grid refits a clone: the warning names the fix."""
    X, y, a, b = fitted_models
    search = GridSearchCV(wrapper(a), {"estimator": [a, b]}, cv=2)
    with pytest.warns(UserWarning, match="wrap each in sklearn.frozen.FrozenEstimator"):
        search.fit(X, y)


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_grid_of_frozen_models_is_quiet(fitted_models, wrapper):
    """With FrozenEstimator the models are used as they are: no warning, and
    the best wrapper holds one of the given models."""
    X, y, a, b = fitted_models
    grid = {"estimator": [FrozenEstimator(a), FrozenEstimator(b)]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        search = GridSearchCV(wrapper(a), grid, cv=2).fit(X, y)
    assert search.best_estimator_.estimator_.estimator in (a, b)


def test_unfitted_model_in_place_of_unfitted_is_quiet(fitted_models):
    """Tuning an unfitted model (fitted on the fit data, as documented) and a
    fitted model set in place of another give no warning."""
    X, y, a, b = fitted_models
    # (user warnings only: scikit-learn < 1.7's LogisticRegression passes
    # SciPy >= 1.17 a deprecated option, a DeprecationWarning of theirs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        CANClassifier(LogisticRegression()).set_params(
            estimator=LogisticRegression(C=0.1)
        ).fit(X, y)
        CANClassifier(a).set_params(estimator=b).fit(X, y)
