"""CAN: Classification with Alternating Normalization (Jia et al., 2021).

:func:`topk_entropy` and :func:`alternating_normalization` on arrays, and the
estimator :class:`CANClassifier` that calls them.
"""

from skprior.can._can import alternating_normalization, topk_entropy
from skprior.can._classifier import CANClassifier

__all__ = ["CANClassifier", "alternating_normalization", "topk_entropy"]
