"""Calibration metrics for multiclass probabilities."""

from skprior._metrics import expected_calibration_error, reliability_curve

__all__ = ["expected_calibration_error", "reliability_curve"]
