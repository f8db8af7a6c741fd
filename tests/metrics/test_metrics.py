"""Tests for skprior.metrics: expected calibration error and reliability curve."""

import numpy as np
import pytest
from conftest import load_model_outputs

from skprior import fit_temperature, softmax_temperature
from skprior.metrics import expected_calibration_error, reliability_curve

# -- naive references, written from the formulas -------------------------------------


def naive_edges(values, weights, n_bins, strategy):
    """0, the inner edges, 1: equal width or inverted-CDF weighted quantiles."""
    if strategy == "uniform":
        return [b / n_bins for b in range(n_bins + 1)]
    pairs = sorted(zip(values, weights, strict=True), key=lambda pair: pair[0])
    total = sum(weights)
    edges = [0.0]
    for m in range(1, n_bins):
        level = m / n_bins * total
        running = 0.0
        for value, weight in pairs:
            running += weight
            if running >= level:
                edges.append(value)
                break
    return edges + [1.0]


def naive_binned_error(values, hits, weights, n_bins, strategy):
    """sum_m |sum_{i in B_m} w_i (h_i - c_i)| / W, bins (e_{m-1}, e_m], 0 in B_1."""
    edges = naive_edges(values, weights, n_bins, strategy)
    total = 0.0
    for m in range(n_bins):
        low, high = edges[m], edges[m + 1]
        gap = 0.0
        for value, hit, weight in zip(values, hits, weights, strict=True):
            inside = low < value <= high or (m == 0 and value == 0)
            if inside:
                gap += weight * (hit - value)
        total += abs(gap)
    return total / sum(weights)


def naive_ece(y, proba, n_bins=15, strategy="uniform", kind="top_label", weights=None):
    weights = np.ones(len(y)) if weights is None else weights
    proba = np.asarray(proba, dtype=np.float64)
    if kind == "top_label":
        values = [row.max() for row in proba]
        hits = [
            float(np.argmax(row) == label) for row, label in zip(proba, y, strict=True)
        ]
        return naive_binned_error(values, hits, list(weights), n_bins, strategy)
    errors = []
    for k in range(proba.shape[1]):
        hits = [float(label == k) for label in y]
        errors.append(
            naive_binned_error(list(proba[:, k]), hits, list(weights), n_bins, strategy)
        )
    return sum(errors) / len(errors)


def random_proba(n_samples=300, n_classes=4, seed=0):
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.full(n_classes, 0.5), size=n_samples)
    y = np.array([rng.choice(n_classes, p=row) for row in proba])
    return y, proba


# -- expected_calibration_error --------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["lenet-5-cifar-10", "cleanlab-cifar-10", "densenet-bc-100-cifar-100"]
)
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_top_label_ece_equals_naive_loop_on_cifar(name, strategy):
    """Top-label ECE on real CIFAR outputs equals the naive loop to 1e-12."""
    proba, y = load_model_outputs(name)
    proba, y = proba[:3000], y[:3000]
    expected = naive_ece(y, proba, strategy=strategy)
    labels = np.arange(proba.shape[1])
    got = expected_calibration_error(y, proba, strategy=strategy, labels=labels)
    assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_classwise_ece_equals_naive_loop(strategy):
    """Class-wise ECE on CIFAR-10 outputs equals the naive loop to 1e-12."""
    proba, y = load_model_outputs("wideresnet-16-4-cifar-10")
    proba, y = proba[:1000], y[:1000]
    expected = naive_ece(y, proba, n_bins=10, strategy=strategy, kind="classwise")
    got = expected_calibration_error(
        y, proba, n_bins=10, strategy=strategy, kind="classwise"
    )
    assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("kind", ["top_label", "classwise"])
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_weighted_ece_equals_naive_loop_and_repeats(kind, strategy):
    """Weights enter the formula, and integer weights equal repeated rows."""
    y, proba = random_proba(seed=1)
    counts = np.random.default_rng(11).integers(0, 4, size=len(y))
    got = expected_calibration_error(
        y, proba, kind=kind, strategy=strategy, sample_weight=counts
    )
    expected = naive_ece(y, proba, strategy=strategy, kind=kind, weights=counts)
    assert got == pytest.approx(expected, abs=1e-12)
    repeated = expected_calibration_error(
        np.repeat(y, counts),
        np.repeat(proba, counts, axis=0),
        kind=kind,
        strategy=strategy,
    )
    assert got == pytest.approx(repeated, abs=1e-12)


def test_bins_are_right_closed():
    """A confidence equal to an edge falls in the bin below it."""
    # Edges of 10 uniform bins; 0.3 is an edge (as linspace computes it).
    y_proba = np.array([[0.3, 0.7], [0.7, 0.3]])  # confidences 0.7 and 0.7
    # Both in (0.6, 0.7]: accuracy 0.5 there, mean confidence 0.7.
    accuracy, confidence, weight = reliability_curve(
        [1, 1], y_proba, n_bins=10, labels=[0, 1]
    )
    np.testing.assert_allclose(accuracy, [0.5])
    np.testing.assert_allclose(confidence, [0.7])
    np.testing.assert_allclose(weight, [1.0])
    edge = 7 / 10
    assert naive_ece([1], [[1 - edge, edge]], n_bins=10) == pytest.approx(
        expected_calibration_error([1], [[1 - edge, edge]], n_bins=10, labels=[0, 1])
    )


@pytest.mark.parametrize("n_bins", range(1, 101))
def test_a_confidence_of_exactly_k_over_n_bins_ends_its_bin(n_bins):
    """k / n_bins, as k-NN with n_bins neighbours gives, is in (k-1, k] / n_bins
    for every k (the edges of np.linspace are a rounding step below some)."""
    k = np.arange((n_bins + 1) // 2, n_bins + 1)
    confidence = k / n_bins  # (a two-class top probability is at least 1/2)
    proba = np.column_stack([confidence, 1 - confidence])
    y = np.zeros(len(k), dtype=int)
    accuracy, mean_confidence, weight = reliability_curve(
        y, proba, n_bins=n_bins, labels=[0, 1]
    )
    # one bin per confidence, whose mean is that confidence itself
    np.testing.assert_array_equal(mean_confidence, confidence)
    assert naive_ece(y, proba, n_bins=n_bins) == pytest.approx(
        expected_calibration_error(y, proba, n_bins=n_bins, labels=[0, 1])
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("n_bins", [5, 10, 15, 20])
def test_exact_k_over_n_bins_in_a_coarser_dtype_ends_its_bin(dtype, n_bins):
    """float32's k / n_bins is not float64's (0.8 is 0.800000011920929): it fell
    a bin up, and float32 rows got another curve and ECE than the same float64
    rows (0.15 against 0.35 on four k-NN rows). The edges take the
    probabilities' precision."""
    k = np.arange((n_bins + 1) // 2, n_bins + 1)
    exact = np.column_stack([k / n_bins, 1 - k / n_bins])
    proba = exact.astype(dtype)
    y = np.arange(len(k)) % 2
    _, mean_confidence, weight = reliability_curve(y, proba, n_bins=n_bins)
    np.testing.assert_array_equal(mean_confidence, proba[:, 0].astype(np.float64))
    coarse = expected_calibration_error(y, proba, n_bins=n_bins)
    fine = expected_calibration_error(y, exact, n_bins=n_bins)
    assert coarse == pytest.approx(fine, abs=2 * float(np.finfo(dtype).eps))


@pytest.mark.parametrize(("n", "n_bins"), [(77, 11), (60, 7), (1000, 13), (5, 5)])
def test_equal_mass_bins_are_equal_and_weights_are_relative(n, n_bins):
    """Equal-mass bins of n distinct confidences hold n / n_bins rows each
    where that is whole (9 / 11 * 77 rounded above 63 and moved an edge), and
    weights scaled by a constant (0.3 + 0.3 + 0.3 < 0.9) change nothing."""
    p1 = np.linspace(0.5, 0.99, n)
    proba = np.column_stack([1 - p1, p1])
    y = np.arange(n) % 2
    kw = dict(n_bins=n_bins, strategy="quantile")
    _, _, weight = reliability_curve(y, proba, **kw)
    if n % n_bins == 0:
        np.testing.assert_allclose(weight * n, n // n_bins)
    plain = expected_calibration_error(y, proba, **kw)
    for scale in (0.3, 1 / 3, 0.1, 7.0, 1e-3):
        weights = np.full(n, scale)
        assert expected_calibration_error(
            y, proba, sample_weight=weights, **kw
        ) == pytest.approx(plain, rel=1e-12)


def test_ece_of_calibrated_one_hot_is_zero():
    """Correct one-hot predictions are perfectly calibrated."""
    y = np.array([0, 1, 2, 1])
    assert expected_calibration_error(y, np.eye(3)[y]) == 0.0
    assert expected_calibration_error(y, np.eye(3)[y], kind="classwise") == 0.0


def test_binary_one_dimensional_proba():
    """A 1-D y_proba is P(positive class) = the second label."""
    rng = np.random.default_rng(2)
    p = rng.uniform(size=200)
    y = (rng.uniform(size=200) < p).astype(int)
    two_columns = np.column_stack([1 - p, p])
    assert expected_calibration_error(y, p) == expected_calibration_error(
        y, two_columns
    )
    names = np.array(["no", "yes"])[y]
    assert expected_calibration_error(names, p, labels=["no", "yes"]) == (
        expected_calibration_error(y, p)
    )
    # float32 in, float32 out, as for two columns
    p32 = p.astype(np.float32)
    two = reliability_curve(y, np.c_[1 - p32, p32])
    for got, wanted in zip(reliability_curve(y, p32), two, strict=True):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, wanted)


def test_string_labels_and_column_order():
    """labels gives the class of each column; y_true may miss a class."""
    y, proba = random_proba(seed=3, n_classes=3)
    names = np.array(["c", "a", "b"])  # column order of a model's classes_
    expected = expected_calibration_error(y, proba, labels=[0, 1, 2])
    assert expected_calibration_error(names[y], proba, labels=names) == expected
    subset = y != 2
    assert np.isfinite(
        expected_calibration_error(names[y][subset], proba[subset], labels=names)
    )


def test_ece_drops_after_temperature_calibration():
    """EC temperature fitted on one half lowers the ECE on the other half."""
    proba, y = load_model_outputs("densenet-bc-100-cifar-100")
    logits = np.log(proba.astype(np.float64))
    temperature = fit_temperature(logits[::2], y[::2])
    before = expected_calibration_error(y[1::2], proba[1::2], labels=np.arange(100))
    calibrated = softmax_temperature(logits[1::2], temperature)
    after = expected_calibration_error(y[1::2], calibrated, labels=np.arange(100))
    assert after < before / 2


def test_inputs_not_modified():
    """The caller's arrays are left as they were."""
    y, proba = random_proba(seed=4)
    weights = np.ones(len(y))
    copies = y.copy(), proba.copy(), weights.copy()
    expected_calibration_error(y, proba, sample_weight=weights, strategy="quantile")
    reliability_curve(y, proba, sample_weight=weights)
    for original, copy in zip((y, proba, weights), copies, strict=True):
        np.testing.assert_array_equal(original, copy)


@pytest.mark.parametrize(
    "y_true, y_proba, kwargs, match",
    [
        ([0, 1], [[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], {}, "Pass labels"),
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], {"labels": [0, 1, 2]}, "one label per"),
        ([0, 3], [[0.5, 0.5], [0.2, 0.8]], {"labels": [0, 1]}, "not in labels"),
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], {"labels": [0, 0]}, "repeat"),
        ([0, 1, 1], [[0.5, 0.5], [0.2, 0.8]], {}, "y_true has 3 labels but y_proba"),
        ([0, 1], [[0.5, 0.6], [0.2, 0.8]], {}, "sum to 1"),
        ([0, 1], [0.5, 1.5], {}, "P\\(positive class\\)"),
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], {"n_bins": 0}, "n_bins"),
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], {"strategy": "equal"}, "strategy"),
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], {"kind": "marginal"}, "kind"),
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], {"sample_weight": [1, -1]}, "(?i)negative"),
        ([0, 1], [[0.5, 0.5], [0.2, 0.8]], {"sample_weight": [0, 0]}, "zero"),
        # a multi-label indicator is pointed to per_label, not only argmax
        ([[1, 1], [0, 1]], [[0.5, 0.5], [0.2, 0.8]], {}, "argmax.*per_label"),
    ],
)
def test_bad_input_raises_clear_error(y_true, y_proba, kwargs, match):
    """Mismatched labels, shapes, probabilities or weights raise a ValueError."""
    with pytest.raises(ValueError, match=match):
        expected_calibration_error(y_true, y_proba, **kwargs)


# -- reliability_curve -------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_reliability_curve_gives_the_ece(strategy):
    """sum_m weight_m |accuracy_m - confidence_m| is the top-label ECE; for
    float32 posteriors the curve is the float64 one (computed alike) rounded
    to float32."""
    proba32, y = load_model_outputs("lenet-5-cifar-10")
    proba = proba32.astype(np.float64)
    accuracy, confidence, weight = reliability_curve(y, proba, strategy=strategy)
    assert weight.sum() == pytest.approx(1)
    assert np.all(np.diff(confidence) > 0)
    assert np.dot(weight, np.abs(accuracy - confidence)) == pytest.approx(
        expected_calibration_error(y, proba32, strategy=strategy), abs=1e-12
    )
    curve32 = reliability_curve(y, proba32, strategy=strategy)
    for got, wanted in zip(curve32, (accuracy, confidence, weight), strict=True):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, wanted.astype(np.float32))


def test_reliability_curve_bins_by_hand():
    """Per-bin accuracy and mean confidence of a small example, by hand."""
    y_proba = [[0.9, 0.1], [0.86, 0.14], [0.4, 0.6], [0.55, 0.45]]
    accuracy, confidence, weight = reliability_curve([0, 1, 1, 0], y_proba, n_bins=5)
    # Bins (0.4, 0.6]: rows 2 and 3, both right; (0.8, 1]: rows 0 and 1.
    np.testing.assert_allclose(accuracy, [1.0, 0.5])
    np.testing.assert_allclose(confidence, [0.575, 0.88])
    np.testing.assert_allclose(weight, [0.5, 0.5])


def test_dataframe_columns_in_another_order_are_refused():
    """Columns are read by position; naming the classes in another order is an
    error, not a silently wrong ECE (0.90 instead of 0.33 here)."""
    pd = pytest.importorskip("pandas")
    proba = np.array(
        [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6], [0.6, 0.3, 0.1]]
    )
    y = np.array(["a", "b", "c", "a"])
    frame = pd.DataFrame(proba, columns=["a", "b", "c"])
    expected = expected_calibration_error(y, proba)
    assert expected_calibration_error(y, frame) == expected
    with pytest.raises(ValueError, match="in another order than labels"):
        expected_calibration_error(y, frame[["c", "a", "b"]])
    with pytest.raises(ValueError, match="Reorder"):
        reliability_curve(y, frame[["b", "a", "c"]])
    # pandas' default names 0, 1, 2 (also as text) are positions, not classes:
    # read by position whatever the order of labels
    y_int = np.array([0, 1, 2, 0])
    for labels in ([0, 1, 2], [2, 0, 1]):
        expected = expected_calibration_error(y_int, proba, labels=labels)
        for columns in (None, ["0", "1", "2"]):
            frame = pd.DataFrame(proba, columns=columns)
            ece = expected_calibration_error(y_int, frame, labels=labels)
            assert ece == expected


def test_a_float32_dataframe_bins_as_the_float32_array():
    """float32 probabilities in a DataFrame or a list of rows have no dtype of
    their own to read: the edges are those of the float32 array they are
    read into, as for the array itself (ECE 0.25, one bin). They took float64
    edges, above which float32's 0.8 lies: a bin up, ECE 0.45."""
    pd = pytest.importorskip("pandas")
    proba = np.array([[0.8, 0.2], [0.7, 0.3]], dtype=np.float32)
    y = [0, 1]
    expected = expected_calibration_error(y, proba, n_bins=5)
    assert expected == pytest.approx(0.25)
    for given in (pd.DataFrame(proba), list(proba)):
        assert expected_calibration_error(y, given, n_bins=5) == expected
        for got, want in zip(
            reliability_curve(y, given, n_bins=5),
            reliability_curve(y, proba, n_bins=5),
            strict=True,
        ):
            np.testing.assert_array_equal(got, want)
