"""Tests for skprior.metrics._display.ReliabilityDisplay (headless, Agg backend)."""

import matplotlib
import numpy as np
import pytest
from conftest import load_model_outputs
from sklearn.datasets import load_iris
from sklearn.naive_bayes import GaussianNB

from skprior import ReliabilityDisplay
from skprior.metrics import expected_calibration_error, reliability_curve

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_from_predictions_draws_the_curve():
    """The line holds the reliability curve; the legend carries the ECE."""
    proba, y = load_model_outputs("densenet-bc-100-cifar-100")
    display = ReliabilityDisplay.from_predictions(y, proba, name="DenseNet")
    accuracy, confidence, _ = reliability_curve(y, proba)
    np.testing.assert_array_equal(display.line_.get_xdata(), confidence)
    np.testing.assert_array_equal(display.line_.get_ydata(), accuracy)
    ece = expected_calibration_error(y, proba)
    assert display.ece == ece
    assert display.line_.get_label() == f"DenseNet (ECE = {ece:.3f})"
    assert display.figure_ is display.ax_.figure
    assert display.hist_ax_ is not None and display.hist_ax_ is not display.ax_
    counts = sum(patch.get_height() for patch in display.hist_ax_.patches)
    assert counts == len(y)


def test_from_estimator_uses_classes_and_name():
    """from_estimator reads predict_proba and classes_; string labels work."""
    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    model = GaussianNB().fit(X[::2], names[::2])
    display = ReliabilityDisplay.from_estimator(model, X[1::2], names[1::2], n_bins=5)
    assert display.estimator_name == "GaussianNB"
    expected = expected_calibration_error(
        names[1::2], model.predict_proba(X[1::2]), n_bins=5, labels=model.classes_
    )
    assert display.ece == expected


def test_plot_on_given_axes():
    """With an ax of one's own, the curve is drawn there and no histogram is
    added unless asked; histogram=True puts it on a twin axis."""
    proba, y = load_model_outputs("lenet-5-cifar-10")
    fig, ax = plt.subplots()
    display = ReliabilityDisplay.from_predictions(y, proba, ax=ax, color="C3")
    assert display.ax_ is ax and display.figure_ is fig
    assert display.line_.get_color() == "C3"
    assert display.hist_ax_ is None and fig.axes == [ax]
    twin = ReliabilityDisplay.from_predictions(y, proba, ax=ax, histogram=True)
    assert twin.hist_ax_ is not None and twin.hist_ax_.figure is fig
    assert sum(patch.get_height() for patch in twin.hist_ax_.patches) == len(y)
    no_hist = ReliabilityDisplay.from_predictions(y, proba, histogram=False)
    assert no_hist.hist_ax_ is None
    # without a histogram the curve has the figure to itself, x labels shown
    assert no_hist.figure_.axes == [no_hist.ax_]
    assert no_hist.ax_.xaxis.get_tick_params(which="major").get("labelbottom", True)
    no_hist.figure_.canvas.draw()
    assert no_hist.ax_.get_position().height > 0.75


def _legend_labels(ax):
    return [text.get_text() for text in ax.get_legend().get_texts()]


def test_displays_sharing_axes_draw_the_diagonal_once():
    """Two displays on one axes: one diagonal, one legend entry for it, and a
    legend entry for each curve."""
    proba, y = load_model_outputs("lenet-5-cifar-10")
    first = ReliabilityDisplay.from_predictions(y, proba, name="a")
    second = ReliabilityDisplay.from_predictions(y, proba, name="b", ax=first.ax_)
    labels = _legend_labels(second.ax_)
    assert labels.count("Perfectly calibrated") == 1
    assert len(labels) == 3
    diagonals = [line for line in first.ax_.lines if list(line.get_xdata()) == [0, 1]]
    assert len(diagonals) == 1


def test_second_display_shares_the_histogram_panel():
    """On the curve of a display with a histogram panel, a later display adds
    its histogram to that panel (no twin axis on the curve)."""
    proba, y = load_model_outputs("lenet-5-cifar-10")
    first = ReliabilityDisplay.from_predictions(y, proba, name="a")
    n_patches = len(first.hist_ax_.patches)
    second = ReliabilityDisplay.from_predictions(y, proba, name="b", ax=first.ax_)
    assert second.hist_ax_ is first.hist_ax_
    assert first.figure_.axes == [first.ax_, first.hist_ax_]
    assert len(first.hist_ax_.patches) == 2 * n_patches
    # a twin axis, once asked for, is shared too
    fig, ax = plt.subplots()
    one = ReliabilityDisplay.from_predictions(y, proba, ax=ax, histogram=True)
    two = ReliabilityDisplay.from_predictions(y, proba, ax=ax)
    assert two.hist_ax_ is one.hist_ax_ and len(fig.axes) == 2


def test_panels_sharing_x_keep_their_own_histograms():
    """Panels of ``plt.subplots(sharex=True)`` share an x axis: each panel's
    histogram stays on that panel, and "auto" on a panel without one draws
    none (it used to find the other panel's twin through the shared x)."""
    proba, y = load_model_outputs("lenet-5-cifar-10")
    fig, (left, right) = plt.subplots(1, 2, sharex=True)
    one = ReliabilityDisplay.from_predictions(y, proba, ax=left, histogram=True)
    two = ReliabilityDisplay.from_predictions(y, proba, ax=right, histogram=True)
    assert two.hist_ax_ is not one.hist_ax_ and len(fig.axes) == 4
    assert two.hist_ax_.get_position().bounds == right.get_position().bounds
    fig, (left, right) = plt.subplots(1, 2, sharex=True)
    ReliabilityDisplay.from_predictions(y, proba, ax=left, histogram=True)
    auto = ReliabilityDisplay.from_predictions(y, proba, ax=right)
    assert auto.hist_ax_ is None and len(fig.axes) == 3


def test_bad_histogram_value_is_refused():
    """histogram takes True, False or 'auto'."""
    proba, y = load_model_outputs("lenet-5-cifar-10")
    with pytest.raises(ValueError, match="histogram must be True, False or 'auto'"):
        ReliabilityDisplay.from_predictions(y, proba, histogram="yes")


def test_numpy_booleans_for_histogram_are_read_as_booleans():
    """histogram=np.False_ (from a config or a grid) draws no histogram and
    np.True_ draws one on the caller's axes, as False and True do; 0 and 1
    are refused. np.False_ passed the check by equality and was read as True
    by identity (and np.True_ as not True)."""
    y, proba = [0, 1, 1, 0], [0.2, 0.7, 0.9, 0.4]
    for value, drawn in [(np.False_, False), (np.True_, True)]:
        new = ReliabilityDisplay.from_predictions(y, proba, histogram=value)
        _, ax = plt.subplots()
        own = ReliabilityDisplay.from_predictions(y, proba, histogram=value, ax=ax)
        assert (new.hist_ax_ is not None) == drawn
        assert (own.hist_ax_ is not None) == drawn
    for value in (0, 1):
        with pytest.raises(ValueError, match="histogram must be True, False"):
            ReliabilityDisplay.from_predictions(y, proba, histogram=value)


def test_from_estimator_needs_predict_proba():
    """A model without predict_proba is refused with a reason."""
    with pytest.raises(TypeError, match="predict_proba"):
        ReliabilityDisplay.from_estimator(object(), np.zeros((2, 2)), [0, 1])


def test_render_example_png(tmp_path):
    """Before and after EC temperature scaling, written to a PNG file."""
    from skprior import fit_temperature, softmax_temperature

    proba, y = load_model_outputs("densenet-bc-100-cifar-100")
    logits = np.log(proba.astype(np.float64))
    temperature = fit_temperature(logits[::2], y[::2])
    fig, ax = plt.subplots()
    ReliabilityDisplay.from_predictions(y[1::2], proba[1::2], ax=ax, name="raw")
    ReliabilityDisplay.from_predictions(
        y[1::2],
        softmax_temperature(logits[1::2], temperature),
        labels=np.arange(100),
        ax=ax,
        name="EC",
        histogram=False,
        ref_line=False,
    )
    path = tmp_path / "reliability.png"
    fig.savefig(path)
    assert path.stat().st_size > 0


@pytest.mark.parametrize("backend", ["torch", "dask.array"])
def test_from_predictions_of_another_library_draws_numpys_curve(backend):
    """Tensors and Dask arrays are drawn as the same NumPy arrays would be."""
    pytest.importorskip("array_api_compat")
    module = pytest.importorskip(backend)
    proba, y = load_model_outputs("densenet-bc-100-cifar-100")
    proba, y = proba[:2000].astype(np.float64), y[:2000]
    weights = np.random.default_rng(0).random(len(y))
    to_backend = (
        (lambda a: module.from_array(a, chunks=700))
        if backend == "dask.array"
        else module.asarray
    )
    expected = ReliabilityDisplay.from_predictions(y, proba, sample_weight=weights)
    display = ReliabilityDisplay.from_predictions(
        to_backend(y), to_backend(proba), sample_weight=to_backend(weights)
    )
    for attribute in ("accuracy", "confidence", "y_confidence", "sample_weight"):
        got, wanted = getattr(display, attribute), getattr(expected, attribute)
        assert isinstance(got, np.ndarray)
        np.testing.assert_allclose(got, wanted, rtol=0, atol=1e-12)
    assert abs(display.ece - expected.ece) <= 1e-12
