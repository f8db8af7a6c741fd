"""scikit-learn's own estimator checks, run over every wrapper configuration.

Each configuration of ``tests/_wrappers.py`` (the list ``tests/test_base.py``
uses too) wraps an *unfitted* model, as the checks expect: first every wrapper
with its **default** parameters around a default ``LogisticRegression()``, then
each other configuration around one with ``max_iter=1000``.

- CAN's default ``k="auto"`` is ``min(3, n_classes)``, so the defaults work on the
  binary problems of the checks.
- A few configurations also wrap a model that takes multi-label targets (a
  decision tree): they declare ``multi_label`` in their tags, so scikit-learn
  runs its multi-label checks on them too (more inner models in
  test_multilabel.py).
- Transductive configurations (CAN with reference="batch"; prior estimation by
  MLE, MAP or BBSE) declare it through the ``non_deterministic`` tag, so
  scikit-learn itself skips its subset-invariance check; the inductive CAN
  (reference="fit") and the known prior run every check.
"""

import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from skprior import (
    CANClassifier,
    PriorAdaptedClassifier,
    TemperatureCalibratedClassifier,
)
from tests._wrappers import CONFIGURATIONS, make


def _model():
    # max_iter=1000: the checks fit iris unscaled, where lbfgs's default 100
    # iterations warn (the inner model's warning, not the wrapper's).
    return LogisticRegression(max_iter=1000)


ESTIMATORS = [
    CANClassifier(LogisticRegression()),
    PriorAdaptedClassifier(LogisticRegression()),
    TemperatureCalibratedClassifier(LogisticRegression()),
    # (the defaults are the three above: each is checked once)
    *(make(name, _model()) for name in CONFIGURATIONS if not name.endswith("default")),
    # around a model that takes multi-label targets: the multi-label checks run.
    # (k=2: a tree fits one class, where k="auto" is 1 and CAN then fails in
    # predict, not fit -- as around any model that fits one class.)
    make("can-default", DecisionTreeClassifier(random_state=0), k=2),
    *(
        make(name, DecisionTreeClassifier(random_state=0))
        for name in ("prior-default", "prior-known-uniform")
    ),
]


def _expected_failures(estimator):
    """The checks a configuration is known to fail, each with its reason."""
    failures = {}
    # A tree fits one class without complaint (LogisticRegression refuses), and
    # CAN's own error then names what it lacks (k classes), not the "1 class"
    # that this check looks for. The prior wrappers take one class (a prior of
    # [1]: fit no longer runs the EM that refused one column).
    if isinstance(estimator.estimator, DecisionTreeClassifier) and isinstance(
        estimator, CANClassifier
    ):
        failures["check_fit2d_1sample"] = "a tree fits 1 class; the error names k"
    # Dirichlet calibration's default penalty is chosen by cross-validation,
    # whose folds split repeated rows differently from one weighted row (as
    # for scikit-learn's own LogisticRegressionCV).
    if (
        isinstance(estimator, TemperatureCalibratedClassifier)
        and estimator.method == "dirichlet"
        and estimator.reg_lambda == "auto"
    ):
        reason = (
            "reg_lambda='auto': cross-validation folds differ between weighted "
            "and repeated rows"
        )
        for kind in ("dense", "sparse"):
            failures[f"check_sample_weight_equivalence_on_{kind}_data"] = reason
    return failures


# scikit-learn < 1.8 gives parametrize a generator, which pytest >= 9 refuses:
# the same mark with the checks listed works with every version.
_CHECKS = parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failures)
_CHECKS = pytest.mark.parametrize(
    _CHECKS.args[0], list(_CHECKS.args[1]), **_CHECKS.kwargs
)


# The checks fit on tiny data, sometimes pure noise, sometimes perfectly
# separable. These are the documented warnings for such data, each tested where
# its method is tested: CAN with no confident row falls back to the prior; EC and
# NLL with no error on the fit data clip the temperature to their bound; BCTS on
# noise finds the logits no better than the label frequencies; the calibrators
# with one parameter or more per class warn on separable or tiny fit sets.
@pytest.mark.filterwarnings("ignore:CAN found .* no confident reference row")
# LogisticRegression() with its default max_iter on unscaled iris: the inner
# model's own warning.
@pytest.mark.filterwarnings("ignore:lbfgs failed to converge")
@pytest.mark.filterwarnings("ignore:EC found no temperature:UserWarning")
@pytest.mark.filterwarnings("ignore:NLL temperature scaling found no minimum")
@pytest.mark.filterwarnings("ignore:Bias-corrected temperature scaling found the")
# BCTS, vector scaling and Dirichlet calibration on separable or tiny fit data.
@pytest.mark.filterwarnings("ignore:.* was fitted on data it separates")
@pytest.mark.filterwarnings("ignore:.* fits [0-9]+ free parameters? on")
@_CHECKS
def test_sklearn_compatible(estimator, check):
    """Every scikit-learn API and behaviour check passes."""
    check(estimator)
