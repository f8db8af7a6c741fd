"""Multiclass reliability diagram, following scikit-learn's Display API.

``from_estimator`` calls ``from_predictions``, which calls the pure function
:func:`skprior.metrics.reliability_curve` and then ``plot``. matplotlib is
imported only when plotting (it is the optional extra ``skprior[plot]``).
"""

import weakref

import numpy as np

from skprior._utils._array_api import get_namespace, to_host
from skprior._utils._validation_labels import check_scored_proba
from skprior.metrics._ece import expected_calibration_error, reliability_curve


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "ReliabilityDisplay needs matplotlib. Install it with "
            "`pip install skprior[plot]` or `pip install matplotlib`."
        ) from error
    return plt


# Artists that later displays on the same axes find and share.
_DIAGONAL_GID = "skprior-reliability-diagonal"
_HIST_GID = "skprior-reliability-histogram"
_TWIN_GID = "skprior-reliability-histogram-twin"


# The histogram axes drawn for each curve axes. Matched by identity, not by a
# shared x axis: the panels of ``plt.subplots(..., sharex=True)`` all share
# theirs, and one panel's histogram must not be found from another's curve.
# Weak both ways, so that the table never keeps a closed figure alive.
_HISTOGRAM_OF = weakref.WeakKeyDictionary()


def _histogram_axes_of(ax):
    """The histogram axes an earlier display drew for the curve axes ``ax``."""
    hist_ax = _HISTOGRAM_OF.get(ax, lambda: None)()
    # (a histogram axes removed from its figure since is not drawn on again)
    return hist_ax if hist_ax is not None and hist_ax in ax.figure.axes else None


class ReliabilityDisplay:
    """Top-label reliability diagram: accuracy against confidence, per bin.

    The multiclass counterpart of scikit-learn's ``CalibrationDisplay`` (which
    is binary). The upper axes show, for each non-empty bin of confidences
    (the top probability of each sample), the accuracy against the mean
    confidence, and the diagonal of perfect calibration; the lower axes show a
    histogram of the confidences. Several displays drawn on one axes
    (``ax=first.ax_``) share the diagonal, the legend and the histogram
    panel. Create it with :meth:`from_estimator` or :meth:`from_predictions`.

    Parameters
    ----------
    accuracy : ndarray of shape (n_bins,)
        Accuracy in each non-empty bin.
    confidence : ndarray of shape (n_bins,)
        Mean confidence in each non-empty bin.
    y_confidence : ndarray of shape (n_samples,)
        Confidence of each sample (for the histogram).
    ece : float, default=None
        Expected calibration error, shown in the legend when given.
    estimator_name : str, default=None
        Name shown in the legend.
    sample_weight : ndarray of shape (n_samples,), default=None
        Weights of the samples in the histogram.

    Attributes
    ----------
    line_ : matplotlib Line2D
        The reliability curve.
    ax_ : matplotlib Axes
        Axes of the reliability curve.
    hist_ax_ : matplotlib Axes or None
        Axes of the histogram of confidences.
    figure_ : matplotlib Figure
        The figure.

    See Also
    --------
    skprior.metrics.reliability_curve : The points of the curve.
    skprior.metrics.expected_calibration_error : The ECE in the legend.

    References
    ----------
    .. [1] Guo, Pleiss, Sun and Weinberger, "On Calibration of Modern Neural
       Networks", ICML 2017.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.naive_bayes import GaussianNB
    >>> from skprior import ReliabilityDisplay
    >>> X, y = load_iris(return_X_y=True)
    >>> model = GaussianNB().fit(X[::2], y[::2])
    >>> display = ReliabilityDisplay.from_estimator(model, X[1::2], y[1::2], n_bins=5)
    >>> display.ax_.get_xlabel()
    'Mean confidence in bin'
    """

    def __init__(
        self,
        accuracy,
        confidence,
        y_confidence,
        *,
        ece=None,
        estimator_name=None,
        sample_weight=None,
    ):
        self.accuracy = accuracy
        self.confidence = confidence
        self.y_confidence = y_confidence
        self.ece = ece
        self.estimator_name = estimator_name
        self.sample_weight = sample_weight

    def plot(self, *, ax=None, name=None, ref_line=True, histogram="auto", **kwargs):
        """Plot the reliability curve, the diagonal and the histogram.

        Several displays can share one axes (``ax=first.ax_``): the diagonal
        and its legend entry are drawn once, and the histograms go into one
        panel.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes of the curve. ``None`` creates a figure with the curve above
            and the histogram panel below.
        name : str, default=None
            Legend name; ``None`` uses ``estimator_name``.
        ref_line : bool, default=True
            Whether to draw the diagonal of perfect calibration (once per
            axes).
        histogram : bool or "auto", default="auto"
            Whether to draw the histogram of confidences. ``"auto"``: in the
            panel below the curve when ``ax`` is None, or when ``ax`` is the
            curve of an earlier display that has such a panel; otherwise none
            (an ``ax`` of your own layout is left as it is). ``True`` with an
            ``ax`` that has no panel: light bars on a twin y axis of ``ax``
            (shared by later displays on it). ``False``: none.
        **kwargs : dict
            Passed to ``matplotlib.pyplot.plot`` for the curve.

        Returns
        -------
        display : ReliabilityDisplay
            The display, with ``line_``, ``ax_``, ``hist_ax_``, ``figure_``.
        """
        if isinstance(histogram, str) and histogram == "auto":
            pass
        elif isinstance(histogram, (bool, np.bool_)):
            # (as a Python bool: np.False_ is not False, and passed the check
            # by equality to be read as True below, by identity)
            histogram = bool(histogram)
        else:
            raise ValueError(
                f"histogram must be True, False or 'auto', got {histogram!r}."
            )
        plt = _pyplot()
        name = self.estimator_name if name is None else name
        hist_ax, twin = None, False
        if ax is None and histogram is not False:
            figure = plt.figure(figsize=(5, 6), layout="constrained")
            ax, hist_ax = figure.subplots(2, sharex=True, height_ratios=[3, 1])
            hist_ax.set_gid(_HIST_GID)
            _HISTOGRAM_OF[ax] = weakref.ref(hist_ax)
            hist_ax.set_xlabel("Confidence (top probability)")
            ax.tick_params(labelbottom=True)
        elif ax is None:  # the curve alone, on the whole figure
            _, ax = plt.subplots(figsize=(5, 5), layout="constrained")
        elif histogram is not False:
            hist_ax = _histogram_axes_of(ax)
            if hist_ax is None and histogram is True:
                hist_ax, twin = ax.twinx(), True
                hist_ax.set_gid(_TWIN_GID)
                _HISTOGRAM_OF[ax] = weakref.ref(hist_ax)
            elif hist_ax is not None:
                twin = hist_ax.get_gid() == _TWIN_GID
        label = name
        if self.ece is not None:
            ece = f"ECE = {self.ece:.3f}"
            label = ece if name is None else f"{name} ({ece})"
        line_kwargs = {"marker": "s", "label": label, **kwargs}
        if ref_line and not any(line.get_gid() == _DIAGONAL_GID for line in ax.lines):
            ax.plot(
                [0, 1], [0, 1], "k:", label="Perfectly calibrated", gid=_DIAGONAL_GID
            )
        (self.line_,) = ax.plot(self.confidence, self.accuracy, **line_kwargs)
        ax.set(
            xlim=(0, 1),
            ylim=(0, 1.01),
            xlabel="Mean confidence in bin",
            ylabel="Accuracy in bin",
        )
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left")
        if hist_ax is not None:
            # In its own panel below the curve; on a twin axis, light enough
            # not to hide the curve.
            hist_ax.hist(
                self.y_confidence,
                bins=20,
                range=(0, 1),
                weights=self.sample_weight,
                color=self.line_.get_color(),
                alpha=0.15 if twin else 0.5,
            )
            hist_ax.set_ylabel("Count")
        self.ax_ = ax
        self.hist_ax_ = hist_ax
        self.figure_ = ax.figure
        return self

    @classmethod
    def from_predictions(
        cls,
        y_true,
        y_proba,
        *,
        n_bins=15,
        strategy="uniform",
        sample_weight=None,
        labels=None,
        name=None,
        ref_line=True,
        histogram="auto",
        ax=None,
        **kwargs,
    ):
        """Plot the reliability diagram of given probabilities.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            True labels.
        y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
            Predicted probabilities, columns in the order of ``labels``; a 1-D
            array is P(positive class).
        n_bins : int, default=15
            Number of bins.
        strategy : {"uniform", "quantile"}, default="uniform"
            Equal-width or equal-weight bins.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights.
        labels : array-like of shape (n_classes,), default=None
            The class of each column (sorted labels of ``y_true`` by default).
        name : str, default=None
            Legend name.
        ref_line : bool, default=True
            Whether to draw the diagonal.
        histogram : bool or "auto", default="auto"
            Whether to draw the histogram of confidences (see :meth:`plot`:
            by default below the curve in a new figure, and not on an ``ax``
            of your own).
        ax : matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure. The curve of an
            earlier display (``ax=display.ax_``) adds this curve to it.
        **kwargs : dict
            Passed to ``matplotlib.pyplot.plot`` for the curve.

        Returns
        -------
        display : ReliabilityDisplay
        """
        # (the curve and its ECE from the same bins)
        binning = dict(
            n_bins=n_bins, strategy=strategy, sample_weight=sample_weight, labels=labels
        )
        accuracy, confidence, _ = reliability_curve(y_true, y_proba, **binning)
        ece = expected_calibration_error(y_true, y_proba, **binning)
        _, proba, weights = check_scored_proba(y_true, y_proba, labels, sample_weight)
        # (matplotlib draws host arrays: one transfer from another library)
        xp, _ = get_namespace(proba)
        accuracy, confidence, y_confidence, weights = to_host(
            xp, accuracy, confidence, xp.max(proba, axis=1), weights
        )
        y_confidence = y_confidence.astype(np.float64)
        display = cls(
            accuracy,
            confidence,
            y_confidence,
            ece=ece,
            estimator_name=name,
            sample_weight=None if sample_weight is None else weights,
        )
        return display.plot(
            ax=ax, name=name, ref_line=ref_line, histogram=histogram, **kwargs
        )

    @classmethod
    def from_estimator(
        cls,
        estimator,
        X,
        y,
        *,
        n_bins=15,
        strategy="uniform",
        sample_weight=None,
        name=None,
        ref_line=True,
        histogram="auto",
        ax=None,
        **kwargs,
    ):
        """Plot the reliability diagram of a fitted classifier on ``(X, y)``.

        Parameters
        ----------
        estimator : classifier
            Fitted classifier with ``predict_proba`` and ``classes_``.
        X : {array-like, sparse matrix, dataframe} of shape (n_samples, n_features)
            Data.
        y : array-like of shape (n_samples,)
            True labels.
        n_bins : int, default=15
            Number of bins.
        strategy : {"uniform", "quantile"}, default="uniform"
            Equal-width or equal-weight bins.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights.
        name : str, default=None
            Legend name; ``None`` uses the estimator's class name.
        ref_line : bool, default=True
            Whether to draw the diagonal.
        histogram : bool or "auto", default="auto"
            Whether to draw the histogram of confidences (see :meth:`plot`:
            by default below the curve in a new figure, and not on an ``ax``
            of your own).
        ax : matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure. The curve of an
            earlier display (``ax=display.ax_``) adds this curve to it.
        **kwargs : dict
            Passed to ``matplotlib.pyplot.plot`` for the curve.

        Returns
        -------
        display : ReliabilityDisplay
        """
        if not hasattr(estimator, "predict_proba"):
            raise TypeError(
                f"{type(estimator).__name__} has no predict_proba; the reliability "
                f"diagram needs class probabilities."
            )
        y_proba = estimator.predict_proba(X)
        name = type(estimator).__name__ if name is None else name
        return cls.from_predictions(
            y,
            y_proba,
            n_bins=n_bins,
            strategy=strategy,
            sample_weight=sample_weight,
            labels=np.asarray(estimator.classes_),
            name=name,
            ref_line=ref_line,
            histogram=histogram,
            ax=ax,
            **kwargs,
        )
