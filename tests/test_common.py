"""scikit-learn's own estimator checks, run over every public wrapper.

Each wrapper wraps an *unfitted* LogisticRegression, as the checks expect.
CAN uses k=2 because the checks include binary problems, and k may not exceed
the number of classes (a clear error otherwise, tested in test_can.py).
"""

import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

from skprior import CANClassifier


def _estimators():
    return [
        # Transductive (the default): declared through the tags, so the
        # subset-invariance check is skipped by scikit-learn itself.
        CANClassifier(LogisticRegression(), k=2),
        # Inductive: every check runs, subset invariance included.
        CANClassifier(LogisticRegression(), k=2, reference="fit"),
        CANClassifier(LogisticRegression(), k=2, alpha=2.0, n_iter=3, tau=0.5),
    ]


# Some checks fit on pure noise, where no prediction is confident: CAN then
# warns that it falls back to the prior (documented, and tested in test_can.py).
@pytest.mark.filterwarnings("ignore:CAN found .* no confident reference row")
@parametrize_with_checks(_estimators())
def test_sklearn_compatible(estimator, check):
    """Every scikit-learn API and behaviour check passes."""
    check(estimator)
