"""Label shift: estimate a batch's class prior and adapt the posteriors to it.

Array functions (Bayes' rule, EM / SQUAREM / PGA / MAP estimates, BBSE, RLLS,
the test of no shift, the prior a resampled model saw, prediction sets
that stay valid under label shift), the on-line trackers
of a drifting prior, and the estimator :class:`PriorAdaptedClassifier`.
"""

from skprior.label_shift._aggregate import AggregatingPrior
from skprior.label_shift._classifier import PriorAdaptedClassifier
from skprior.label_shift._conformal import conformal_prediction_set
from skprior.label_shift._confusion import (
    bbse_test_prior,
    joint_confusion_matrix,
    rlls_test_prior,
)
from skprior.label_shift._policy import ShiftTest, label_shift_test
from skprior.label_shift._prior import (
    PriorEstimate,
    adjust_to_prior,
    estimate_source_prior,
    estimate_test_prior,
)
from skprior.label_shift._resampling import effective_train_prior
from skprior.label_shift._stream import FLHFTL, CumulativePrior, FollowTheHistory

__all__ = [
    "AggregatingPrior",
    "FLHFTL",
    "CumulativePrior",
    "FollowTheHistory",
    "PriorAdaptedClassifier",
    "PriorEstimate",
    "ShiftTest",
    "adjust_to_prior",
    "bbse_test_prior",
    "conformal_prediction_set",
    "effective_train_prior",
    "estimate_source_prior",
    "estimate_test_prior",
    "joint_confusion_matrix",
    "label_shift_test",
    "rlls_test_prior",
]
