"""The former array API checkers' names, for code not yet moved to the unified ones.

Removed at integration: :mod:`skprior._utils._validation` and
:mod:`skprior._utils._validation_labels` check arrays of every namespace.
"""

from skprior._utils._validation import (  # noqa: F401
    check_logits_lazy,
    check_logits_xp,
    check_proba_lazy,
    check_proba_xp,
)
from skprior._utils._validation_labels import (  # noqa: F401
    check_class_indices_xp,
    check_sample_weight_xp,
)
