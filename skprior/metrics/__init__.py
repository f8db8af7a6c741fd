"""Calibration metrics for multiclass probabilities.

The reliability diagram, :class:`skprior.ReliabilityDisplay`, lives beside them
in ``_display.py`` (it needs matplotlib, the optional extra ``skprior[plot]``).
"""

from skprior.metrics._ece import expected_calibration_error, reliability_curve

__all__ = ["expected_calibration_error", "reliability_curve"]
