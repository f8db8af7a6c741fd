"""Uncertainty of :class:`PriorAdaptedClassifier`'s batches: sets and intervals.

The wrapper's ``fit`` rows are a labelled calibration set: they give the
split-conformal sets of :meth:`~UncertaintyMixin.predict_set` (the array
function is in ``_conformal.py``) and recentre the confidence intervals of the
batch's class proportions of :meth:`~UncertaintyMixin.prior_interval` (the
maths is in ``_intervals.py``, the result in ``_prior.py``).
"""

import numpy as np
from sklearn.utils.validation import check_is_fitted


class UncertaintyMixin:
    """Prediction sets and prior intervals from the ``fit`` rows."""

    def predict_set(self, X, alpha=0.1):
        """Prediction sets for the batch ``X``, valid under label shift.

        Split-conformal sets (:func:`conformal_prediction_set`) with the
        ``fit`` data as the labelled calibration rows and the inner model's
        posteriors as the score (``set_score``), weighted as ``set_mode``
        says: by default by the ratio of the batch's prior, estimated from
        ``X`` as :meth:`estimate_prior` does, to the prior of the ``fit``
        labels (Podkopaev and Ramdas, 2021). Where the test of
        ``shift_level`` finds no shift, the batch is taken as drawn like the
        ``fit`` rows: a ratio of 1, the split-conformal sets.

        Parameters
        ----------
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            An unlabelled batch, large enough to estimate its prior.
        alpha : float in (0, 1), default=0.1
            The miscoverage: the sets hold the true class with probability at
            least ``1 - alpha`` under the batch's class prior.

        Returns
        -------
        sets : array of bool of shape (n_samples, n_classes)
            ``sets[i, k]``: whether ``classes_[k]`` is in the set of row
            ``i``; in the namespace and on the device of the inner model's
            posteriors.
        """
        check_is_fitted(self)
        proba = self._inner_proba(X)
        prior = None
        if self.set_mode == "weighted":
            # (a batch the test finds unshifted is drawn as the fit rows are:
            # their class frequencies, a ratio of 1, whatever train_prior_)
            unshifted = self._set_calibration.prior(proba.shape[1])
            prior = self._prior_of(proba, unshifted)
        return self._set_calibration.sets(
            proba, alpha, self.set_score, self.set_mode, self.set_delta, prior
        )

    def prior_interval(self, X, level=0.95, **options):
        """Per-class confidence intervals of the batch ``X``'s class proportions.

        The estimate of ``method`` (``"mle"`` or ``"map"``) on ``X``, whatever
        the test of ``shift_level`` finds, and its interval
        (:meth:`PriorEstimate.confidence_interval`) with the ``fit`` rows as
        the labelled calibration set (with their ``sample_weight``): centred
        on the estimate less the bias that the inner model's misfit causes at
        this prior, as wide as the batch's noise and the ``fit`` rows' own.

        Parameters
        ----------
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            An unlabelled batch.
        level : float, default=0.95
            Nominal coverage of each class's interval, in (0, 1).
        **options
            ``method``, ``target``, ``n_resamples``, ``random_state`` of
            :meth:`PriorEstimate.confidence_interval`.

        Returns
        -------
        low, high : arrays of shape (n_classes,)
            The bounds, in the order of ``classes_``.
        """
        check_is_fitted(self)
        self._check_single_label()
        self._check_unchanged()  # (a method set after fit: refused, as elsewhere)
        if self._fitted_method not in ("mle", "map"):
            raise ValueError(
                "prior_interval needs a fit with method='mle' or "
                f"'map' (the interval is the likelihood's), got method="
                f"{self._fitted_method!r}. Refit with method='mle' or 'map'."
            )
        if "calibration" in options:
            raise TypeError(
                "prior_interval takes its calibration set from the fit rows and "
                "has no calibration= option. For the interval that assumes "
                "calibrated posteriors, call estimate_test_prior(proba, "
                "train_prior).confidence_interval() on the model's posteriors."
            )
        calibration = None  # (the generating prior's interval does not use it)
        if options.get("target", "batch") == "batch":
            fitted = self._set_calibration
            counts = fitted.prior(self._fit_proba.shape[1])
            if np.any(counts == 0):
                missing = self.classes_[np.flatnonzero(counts == 0)]
                raise ValueError(
                    f"The fit rows hold no row of the classes {missing.tolist()} "
                    f"(or only rows of weight 0), so they cannot measure the "
                    f"model's misfit there. Refit on rows of every class, or pass "
                    f"target='prior' (the generating prior's interval, without "
                    f"the fit rows)."
                )
            calibration = (self._fit_proba, fitted.y, fitted.weights)
        estimate = self._estimate(self._inner_proba(X))
        return estimate.confidence_interval(level, calibration=calibration, **options)
