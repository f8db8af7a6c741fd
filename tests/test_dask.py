"""The array functions on Dask arrays (out-of-core and distributed data).

Each gives the NumPy answer to 1e-10 (float64), returns a Dask array where
it returns an array (lazily for the maps), and each pass of a reduction is
one ``dask.compute``: counted with a scheduler callback.
"""

import numpy as np
import pytest

from skprior import (
    adjust_to_prior,
    alternating_normalization,
    bbse_test_prior,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    fit_dirichlet_calibration,
    fit_temperature,
    fit_vector_scaling,
    softmax_dirichlet_calibration,
    softmax_temperature,
    softmax_vector_scaling,
    topk_entropy,
)
from skprior.metrics import expected_calibration_error, reliability_curve

da = pytest.importorskip("dask.array")
pytest.importorskip("array_api_compat")
from dask.callbacks import Callback  # noqa: E402

TOL = 1e-10


class ComputeCounter(Callback):
    """Counts the graphs Dask executes (one per ``dask.compute``)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def _start(self, dsk):
        self.count += 1


@pytest.fixture(scope="module")
def outputs(cifar10):
    """2,000 CIFAR-10 posteriors (float64) and labels."""
    proba, labels = cifar10
    return proba[:2000].astype(np.float64), labels[:2000].astype(np.int64)


def _lazy(array, chunks=450):
    return da.from_array(array, chunks=(chunks, -1))


@pytest.fixture(scope="module")
def logits_data():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, size=1200)
    logits = 3.0 * (rng.normal(size=(1200, 4)) + 1.5 * np.eye(4)[y])
    logits[5, y[5]] = -np.inf
    weights = rng.random(1200)
    return logits, y, weights


@pytest.mark.parametrize("solver", ["em", "squarem", "pga"])
@pytest.mark.parametrize("method", ["mle", "map"])
def test_estimate_test_prior_one_compute_per_pass(outputs, solver, method):
    """The estimate equals NumPy's; the validation is one compute, each pass
    one more, and the check for a degenerate estimate (the batch's mean
    posterior, computed only when a class is driven to ~0) one more."""
    proba = outputs[0][:1000]
    train = np.full(10, 0.1)
    kwargs = dict(method=method, solver=solver, tol=1e-12, max_iter=100_000)
    expected = estimate_test_prior(proba, train, **kwargs)
    with ComputeCounter() as counter:
        result = estimate_test_prior(_lazy(proba), train, **kwargs)
    assert isinstance(result.prior, da.Array)
    np.testing.assert_allclose(result.prior.compute(), expected.prior, atol=TOL)
    gone = np.any(expected.prior < 1e-2 * train)
    assert counter.count == result.n_passes + 1 + gone


class GraphSizes(Callback):
    """The number of tasks of each graph Dask executes."""

    def __init__(self):
        super().__init__()
        self.sizes = []

    def _start(self, dsk):
        self.sizes.append(len(dsk))


@pytest.mark.parametrize("method", ["mle", "map"])
def test_estimate_test_prior_float32_reads_each_chunk_once(cifar100, method):
    """A float32 Dask array of CIFAR-100 outputs gets NumPy's float32 estimate
    (one EM pass: one task per chunk and their sum)."""
    proba, _ = cifar100  # (10,000 x 100 float32: NumPy's float32 passes)
    train = np.full(100, 0.01)
    expected = estimate_test_prior(proba, train, method=method)
    lazy = da.from_array(proba, chunks=((3000, 3000, 4000), (100,)))
    with GraphSizes() as graphs:
        result = estimate_test_prior(lazy, train, method=method)
    assert result.prior.dtype == np.float32
    np.testing.assert_allclose(result.prior.compute(), expected.prior, rtol=1e-5)
    assert abs(result.n_iter - expected.n_iter) <= 1
    # the validation, the passes, maybe the degenerate-estimate check
    assert result.n_passes + 1 <= len(graphs.sizes) <= result.n_passes + 2
    # a pass: 3 chunks read, 3 per-chunk sums, their total (33 tasks before)
    assert max(graphs.sizes[1 : result.n_passes + 1]) <= 10


@pytest.mark.parametrize("solver", ["em", "squarem", "pga"])
def test_one_row_chunks_are_merged_for_the_passes(outputs, solver):
    """1,000 one-row chunks (4 s a pass before) are merged into one block per
    pass: NumPy's estimate, each pass one read of the chunks and a few tasks."""
    proba = outputs[0][:1000]
    train = np.full(10, 0.1)
    expected = estimate_test_prior(proba, train, solver=solver, tol=1e-10)
    with GraphSizes() as graphs:
        result = estimate_test_prior(
            _lazy(proba, chunks=1), train, solver=solver, tol=1e-10
        )
    np.testing.assert_allclose(result.prior.compute(), expected.prior, atol=TOL)
    assert result.n_passes + 1 <= len(graphs.sizes) <= result.n_passes + 2
    assert max(graphs.sizes[1:]) <= 1000 + 10  # (8,672 tasks a pass before)


def test_adjust_to_prior_is_lazy(outputs):
    """Bayes' rule returns a Dask array without computing, equal to NumPy's."""
    proba = outputs[0]
    train, test = np.full(10, 0.1), np.r_[np.full(5, 0.2), np.zeros(5)]
    with ComputeCounter() as counter:
        result = adjust_to_prior(_lazy(proba), train, test)
    assert counter.count == 0
    assert isinstance(result, da.Array)
    np.testing.assert_allclose(
        result.compute(), adjust_to_prior(proba, train, test), atol=TOL
    )


def test_lazy_validation_raises_at_compute(outputs):
    """A lazy map checks each block when it is computed, and names the row of
    the array (the block's check counts from the chunk's start, 450)."""
    proba = outputs[0].copy()
    proba[700] *= 2
    result = adjust_to_prior(_lazy(proba), np.full(10, 0.1), np.full(10, 0.1))
    with pytest.raises(ValueError, match="must sum to 1.*row 700 sums"):
        result.compute()


def test_softmax_temperature_is_lazy(logits_data):
    """softmax(z / T + b) returns a lazy Dask array equal to NumPy's."""
    logits = logits_data[0]
    bias = np.array([0.1, 0.0, -0.1, 0.2])
    with ComputeCounter() as counter:
        result = softmax_temperature(_lazy(logits), 1.5, bias)
    assert counter.count == 0
    assert isinstance(result, da.Array)
    np.testing.assert_allclose(
        result.compute(), softmax_temperature(logits, 1.5, bias), atol=TOL
    )


@pytest.mark.parametrize("method", ["ec", "nll"])
def test_fit_temperature(logits_data, method):
    """EC and NLL temperatures equal NumPy's, on Dask logits and labels."""
    logits, y, weights = logits_data
    expected = fit_temperature(logits, y, method=method, sample_weight=weights)
    result = fit_temperature(
        _lazy(logits),
        da.from_array(y, chunks=300),
        method=method,
        sample_weight=weights,
    )
    assert abs(result - expected) <= TOL * expected


def test_fit_bias_corrected_temperature(logits_data):
    """BCTS on Dask equals NumPy's; each L-BFGS evaluation is one compute."""
    logits, y, weights = logits_data
    expected_t, expected_b = fit_bias_corrected_temperature(
        logits, y, sample_weight=weights
    )
    temperature, bias = fit_bias_corrected_temperature(
        _lazy(logits), y, sample_weight=weights
    )
    assert abs(temperature - expected_t) <= 1e-8 * expected_t
    assert isinstance(bias, da.Array)
    np.testing.assert_allclose(bias.compute(), expected_b, atol=1e-8)


def test_bcts_on_separable_dask_logits_warns():
    """The separability warning of BCTS holds on Dask (one more compute)."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=300)
    separable = 3 * np.eye(3)[y] + 0.3 * rng.normal(size=(300, 3))
    with pytest.warns(UserWarning, match="was fitted on data it separates"):
        fit_bias_corrected_temperature(_lazy(separable), y)


@pytest.mark.parametrize(
    "fit",
    [
        lambda z, y, w: fit_vector_scaling(z, y, sample_weight=w),
        lambda z, y, w: fit_dirichlet_calibration(
            z, y, reg_lambda=1.0, sample_weight=w
        ),
    ],
    ids=["vector", "dirichlet"],
)
def test_classwise_fits_and_maps(logits_data, fit):
    """Vector scaling and Dirichlet fits on Dask equal NumPy's (to L-BFGS's
    tolerance) and are Dask arrays; their maps are lazy and equal NumPy's."""
    logits, y, weights = logits_data
    expected = fit(logits, y, weights)
    result = fit(_lazy(logits), da.from_array(y, chunks=300), weights)
    for fitted, reference in zip(result, expected, strict=True):
        assert isinstance(fitted, da.Array)
        np.testing.assert_allclose(fitted.compute(), reference, atol=1e-8)
    apply = (
        softmax_dirichlet_calibration
        if expected[0].ndim == 2
        else softmax_vector_scaling
    )
    with ComputeCounter() as counter:
        proba = apply(_lazy(logits), *expected)
    assert counter.count == 0
    np.testing.assert_allclose(proba.compute(), apply(logits, *expected), atol=TOL)


def test_bbse_and_topk_entropy(outputs):
    """BBSE and the top-k uncertainty equal NumPy's and return Dask arrays."""
    proba = outputs[0]
    confusion = np.eye(10) * 0.09 + 0.001
    confusion /= confusion.sum()
    prior = bbse_test_prior(_lazy(proba), confusion)
    assert isinstance(prior, da.Array)
    np.testing.assert_allclose(
        prior.compute(), bbse_test_prior(proba, confusion), atol=TOL
    )
    for kind in ("renormalized", "max_over_k"):
        result = topk_entropy(_lazy(proba), 3, kind=kind)
        assert isinstance(result, da.Array)
        np.testing.assert_allclose(
            result.compute(), topk_entropy(proba, 3, kind=kind), atol=TOL
        )


@pytest.mark.parametrize("alpha", [1.0, 3.0, 40.0])
def test_can_one_step_is_one_pass(outputs, alpha):
    """CAN d = 1 on the batch itself: one compute for the column sums of the
    confident rows, then a lazy map; equal to NumPy's."""
    proba = outputs[0]
    prior = np.full(10, 0.1)
    expected = alternating_normalization(proba, prior, tau=0.3, alpha=alpha)
    with ComputeCounter() as counter:
        result = alternating_normalization(_lazy(proba), prior, tau=0.3, alpha=alpha)
    assert counter.count == 1
    assert isinstance(result, da.Array)
    np.testing.assert_allclose(result.compute(), expected, atol=TOL)


def test_can_with_reference_any_d_is_lazy(outputs):
    """With a reference held in memory CAN is a lazy map for any d."""
    proba, reference = outputs[0][:1200], outputs[0][1200:]
    prior = np.full(10, 0.1)
    kwargs = dict(tau=0.3, alpha=2.0, n_iter=3, reference=reference)
    expected = alternating_normalization(proba, prior, **kwargs)
    with ComputeCounter() as counter:
        result = alternating_normalization(_lazy(proba), prior, **kwargs)
    assert counter.count == 0
    np.testing.assert_allclose(result.compute(), expected, atol=TOL)


def test_can_one_step_warns_without_confident_rows(outputs):
    """The counts of the one pass give NumPy's warning when no row is
    confident, and every row becomes the prior on its support."""
    proba, prior = outputs[0][:900], np.full(10, 0.1)
    with pytest.warns(UserWarning, match="no confident reference row"):
        expected = alternating_normalization(proba, prior, tau=0.0)
    with pytest.warns(UserWarning, match="no confident reference row"):
        result = alternating_normalization(_lazy(proba), prior, tau=0.0)
    np.testing.assert_allclose(result.compute(), expected, atol=TOL)


def test_can_iterated_without_reference_refused(outputs):
    """d > 1 with the batch as its own reference is refused with the fix."""
    with pytest.raises(ValueError, match="needs a reference held in memory"):
        alternating_normalization(_lazy(outputs[0]), np.full(10, 0.1), n_iter=2)


@pytest.mark.parametrize("kind", ["top_label", "classwise"])
def test_expected_calibration_error(outputs, kind):
    """ECE on Dask equals NumPy's; the bins are one compute over the data."""
    proba, labels = outputs
    expected = expected_calibration_error(labels, proba, kind=kind)
    result = expected_calibration_error(
        da.from_array(labels, chunks=450), _lazy(proba), kind=kind, labels=range(10)
    )
    assert abs(result - expected) <= TOL


def test_reliability_curve(outputs):
    """The reliability curve on Dask equals NumPy's, as Dask arrays."""
    proba, labels = outputs
    expected = reliability_curve(labels, proba)
    result = reliability_curve(labels, _lazy(proba))
    for actual, wanted in zip(result, expected, strict=True):
        assert isinstance(actual, da.Array)
        np.testing.assert_allclose(actual.compute(), wanted, atol=TOL)


def test_quantile_bins_refused(outputs):
    """Quantile bins need a global sort: refused on Dask with the fix."""
    proba, labels = outputs
    with pytest.raises(ValueError, match="strategy='uniform'"):
        expected_calibration_error(labels, _lazy(proba), strategy="quantile")


# -- the command line on files processed block by block --------------------------------


def test_cli_adapt_out_of_core_equals_in_memory(tmp_path, outputs, capsys):
    """`skprior adapt --out-of-core` writes, block by block, the file that the
    in-memory run writes (to rounding) and prints the same prior: adapting every
    batch (--shift-level 1), and with the default test of no shift, which runs
    on the blocks as it does in memory."""
    from skprior._cli import main

    proba = outputs[0].astype(np.float32)
    np.save(tmp_path / "p.npy", proba)
    np.save(tmp_path / "y.npy", outputs[1])
    np.save(tmp_path / "v.npy", proba[::2])
    common = ["adapt", str(tmp_path / "p.npy"), "--prior", ",".join(["0.1"] * 10)]
    common += ["--solver", "squarem", "-q"]
    for options in (
        ["--shift-level", "1"],
        [],
        ["--val-outputs", str(tmp_path / "v.npy")],
    ):
        capsys.readouterr()
        assert main([*common, *options, "-o", str(tmp_path / "a.npy")]) == 0
        in_memory = capsys.readouterr()
        out_of_core = [
            *common,
            *options,
            "--out-of-core",
            "-o",
            str(tmp_path / "b.npy"),
        ]
        assert main([*out_of_core, "--labels", str(tmp_path / "y.npy")]) == 0
        blocks = capsys.readouterr()
        assert blocks.out.splitlines()[:2] == in_memory.out.splitlines()[:2]
        assert ("posteriors left unchanged" in blocks.err) == (
            "posteriors left unchanged" in in_memory.err
        )
        expected, result = np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy")
        assert result.dtype == np.float32
        np.testing.assert_allclose(result, expected, atol=1e-6)


def test_cli_can_zarr_round_trip(tmp_path, outputs):
    """`skprior can` reads and writes .zarr block by block (d = 1)."""
    pytest.importorskip("zarr")
    from skprior._cli import main

    proba = outputs[0]
    np.save(tmp_path / "p.npy", proba)
    args = ["can", "--prior", ",".join(["0.1"] * 10), "--tau", "0.3", "-q"]
    assert (
        main(
            [
                *args[:1],
                str(tmp_path / "p.npy"),
                *args[1:],
                "--out-of-core",
                "-o",
                str(tmp_path / "c.zarr"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                *args[:1],
                str(tmp_path / "c.zarr"),
                *args[1:],
                "-o",
                str(tmp_path / "d.npy"),
            ]
        )
        == 0
    )
    expected = alternating_normalization(proba, np.full(10, 0.1), tau=0.3)
    expected = alternating_normalization(expected, np.full(10, 0.1), tau=0.3)
    np.testing.assert_allclose(np.load(tmp_path / "d.npy"), expected, atol=1e-10)


def test_cli_can_out_of_core_honours_every_option(tmp_path, outputs):
    """Out of core, `skprior can` gives the in-memory command's file for
    non-default --k, --uncertainty, --tau and --alpha (an option dropped on
    one path would be a silent wrong answer)."""
    from skprior._cli import main

    np.save(tmp_path / "p.npy", outputs[0])
    args = ["can", str(tmp_path / "p.npy"), "--prior", ",".join(["0.1"] * 10)]
    args += ["--k", "4", "--uncertainty", "max_over_k", "--tau", "0.2"]
    args += ["--alpha", "2", "-q"]
    assert main([*args, "-o", str(tmp_path / "memory.npy")]) == 0
    assert main([*args, "--out-of-core", "-o", str(tmp_path / "blocks.npy")]) == 0
    in_memory = np.load(tmp_path / "memory.npy")
    assert np.any(in_memory != outputs[0])
    np.testing.assert_allclose(np.load(tmp_path / "blocks.npy"), in_memory, atol=1e-10)


def test_cli_out_of_core_refuses_diagram(tmp_path, outputs, capsys):
    """--diagram needs the outputs in memory: refused out of core (exit 2)."""
    from skprior._cli import main

    np.save(tmp_path / "p.npy", outputs[0])
    np.save(tmp_path / "y.npy", outputs[1])
    code = main(
        [
            "can",
            str(tmp_path / "p.npy"),
            "--prior",
            ",".join(["0.1"] * 10),
            "--out-of-core",
            "--labels",
            str(tmp_path / "y.npy"),
            "--diagram",
            str(tmp_path / "d.png"),
        ]
    )
    assert code == 2
    assert "--diagram needs the outputs in memory" in capsys.readouterr().err


def test_npy_rows_reads_like_numpy(tmp_path):
    """The positioned-read .npy reader returns the rows and columns asked."""
    from skprior._utils._npy_blocks import NpyRows

    array = np.arange(60, dtype=np.float32).reshape(12, 5)
    np.save(tmp_path / "a.npy", array)
    rows = NpyRows(tmp_path / "a.npy")
    assert rows.shape == (12, 5) and rows.dtype == np.float32
    np.testing.assert_array_equal(rows[3:9, 1:4], array[3:9, 1:4])
    np.testing.assert_array_equal(rows[slice(10, None)], array[10:])


def test_float64_rows_get_the_float64_tolerance():
    """Dask float64 rows are held to float64's 1e-6, as NumPy's, not float16's."""
    proba = np.full((4, 3), 1 / 3)
    proba[2] *= 1.001
    for rows in (proba, _lazy(proba, chunks=2)):
        with pytest.raises(ValueError, match=r"within 1\.0e-06\); row 2 sums"):
            estimate_test_prior(rows, np.full(3, 1 / 3))


def test_labels_and_weights_of_the_wrong_length_get_numpy_messages(logits_data):
    """A Dask y or sample_weight of the wrong length is refused with NumPy's
    message, not a rechunk error."""
    logits, y, weights = logits_data
    with pytest.raises(ValueError, match="y has 1199 labels but logits has 1200"):
        fit_temperature(_lazy(logits), da.from_array(y[:-1], chunks=300))
    with pytest.raises(ValueError, match="sample_weight has 1199 entries but"):
        fit_temperature(
            _lazy(logits),
            da.from_array(y, chunks=300),
            sample_weight=da.from_array(weights[:-1], chunks=300),
        )


def test_prior_interval_one_pass(outputs):
    """The prior's confidence interval equals NumPy's; its pass over the batch
    and the calibration set is one compute, after the calibration set's
    validation (its rows, its labels) and class counts: four in all, one
    without a calibration set."""
    proba, labels = outputs
    train = np.full(10, 0.1)
    expected = estimate_test_prior(proba[:1000], train)
    result = estimate_test_prior(_lazy(proba[:1000]), train)
    calibration = (_lazy(proba[1000:]), da.from_array(labels[1000:], chunks=450))
    for given, computes in ((None, 1), (calibration, 4)):
        numpy_given = None if given is None else (proba[1000:], labels[1000:])
        with ComputeCounter() as counter:
            low, high = result.confidence_interval(calibration=given)
        assert counter.count == computes
        want = expected.confidence_interval(calibration=numpy_given)
        np.testing.assert_allclose(low.compute(), want[0], atol=1e-9)
        np.testing.assert_allclose(high.compute(), want[1], atol=1e-9)


def test_prior_interval_with_repeated_rows_one_more_compute(outputs):
    """A batch that repeats rows: one more compute, for those rows only."""
    proba = outputs[0][np.random.default_rng(0).integers(500, size=1000)]
    train = np.full(10, 0.1)
    expected = estimate_test_prior(proba, train).confidence_interval()
    result = estimate_test_prior(_lazy(proba), train)
    with ComputeCounter() as counter:
        low, high = result.confidence_interval()
    assert counter.count == 2
    np.testing.assert_allclose(low.compute(), expected[0], atol=1e-9)
    np.testing.assert_allclose(high.compute(), expected[1], atol=1e-9)


# -- filtered Dask arrays: unknown chunk sizes, chunks of no rows ---------------------


def _filtered(array, keep, known):
    """``array[keep]`` as Dask filters it: by a Dask mask (unknown chunk sizes),
    or with the sizes computed (known; the filter leaves chunks of no rows)."""
    rows = _lazy(array, chunks=150)
    rows = rows[da.from_array(keep, chunks=150)]
    return rows.compute_chunk_sizes() if known else rows


# (each function of a pass, a fit or a map; labels and a reference on the host)
FILTERED_CALLS = {
    "em": lambda p, z, y: estimate_test_prior(p, np.full(10, 0.1), solver="em").prior,
    "squarem": lambda p, z, y: estimate_test_prior(p, np.full(10, 0.1)).prior,
    "pga": lambda p, z, y: estimate_test_prior(p, np.full(10, 0.1), solver="pga").prior,
    "map": lambda p, z, y: estimate_test_prior(p, np.full(10, 0.1), method="map").prior,
    "nll": lambda p, z, y: fit_temperature(z, y),
    "ec": lambda p, z, y: fit_temperature(z, y, method="ec"),
    "bcts": lambda p, z, y: fit_bias_corrected_temperature(z, y)[1],
    "can": lambda p, z, y: alternating_normalization(p, np.full(10, 0.1), tau=0.3),
    "bbse": lambda p, z, y: bbse_test_prior(p, np.eye(10) * 0.099 + 1e-4),
    "adjust": lambda p, z, y: adjust_to_prior(p, np.full(10, 0.1), np.full(10, 0.1)),
    "softmax": lambda p, z, y: softmax_temperature(z, 1.5),
    "topk": lambda p, z, y: topk_entropy(p, 3),
}


@pytest.mark.parametrize("known", [False, True], ids=["unknown-sizes", "empty-chunks"])
@pytest.mark.parametrize("call", FILTERED_CALLS.values(), ids=FILTERED_CALLS.keys())
def test_filtered_arrays_give_numpys_answer(outputs, call, known):
    """Rows kept by a Dask boolean filter give NumPy's answer on the same rows:
    unknown chunk sizes (NaN rows before: EM never stopped, the fits refused
    the labels, BBSE failed) are computed on a copy (the caller's array keeps
    its NaN sizes), and chunks of no rows (refused, or Dask's own reductions
    failing, before) are dropped."""
    proba, labels = outputs
    proba = proba[:900]
    logits = np.log(proba)
    keep = np.ones(900, dtype=bool)
    keep[150:450] = False  # (two whole chunks of no rows)
    keep[600:] = proba[600:, 3] < 0.5  # (and a filter within chunks)
    p, z = _filtered(proba, keep, known), _filtered(logits, keep, known)
    expected = call(proba[keep], logits[keep], labels[:900][keep])
    result = call(p, z, labels[:900][keep])
    result = result.compute() if isinstance(result, da.Array) else result
    np.testing.assert_allclose(result, expected, atol=1e-7)
    assert known or np.isnan(p.shape[0])  # (the caller's array unchanged)


def test_unknown_chunk_sizes_cost_one_pass(outputs):
    """Learning unknown chunk sizes is one compute, once, before the
    validation; a map stays lazy otherwise."""
    proba = outputs[0][:900]
    keep = proba[:, 0] < 0.5
    train = np.full(10, 0.1)
    expected = estimate_test_prior(proba[keep], train)
    with ComputeCounter() as counter:
        result = estimate_test_prior(_filtered(proba, keep, known=False), train)
    gone = np.any(expected.prior < 1e-2 * train)
    assert counter.count == result.n_passes + 2 + gone
    with ComputeCounter() as counter:
        adjust_to_prior(_filtered(proba, keep, known=False), train, train)
    assert counter.count == 1


def test_filter_leaving_no_rows_is_refused(outputs):
    """A filter that keeps no row is refused as an empty input."""
    proba = outputs[0][:300]
    empty = _filtered(proba, np.zeros(300, dtype=bool), known=False)
    with pytest.raises(ValueError, match="proba is empty"):
        estimate_test_prior(empty, np.full(10, 0.1))
    with pytest.raises(ValueError, match="logits is empty"):
        fit_temperature(_filtered(np.log(proba), np.zeros(300, bool), False), [])


# -- float16 rows, per_label of filtered arrays, the confusion matrix's memory --------


def _float16_outputs():
    """A float16 model's posteriors: rows sum to one within float16's rounding
    (off by a few 1e-4, beyond float64's 1e-6)."""
    rng = np.random.default_rng(0)
    logits = 2 * rng.normal(size=(400, 7))
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    proba = proba.astype(np.float16)
    assert np.abs(proba.sum(axis=1, dtype=np.float64) - 1).max() > 1e-4
    return proba, rng.integers(0, 7, size=400)


def test_float16_rows_get_the_float16_tolerance():
    """Dask float16 rows are held to float16's tolerance, as NumPy's (the
    lazy check of each float64 block and the metrics held them to 1e-6), and
    give NumPy's results."""
    proba, y = _float16_outputs()
    train, test = np.full(7, 1 / 7), np.arange(1, 8) / 28
    lazy = _lazy(proba, chunks=100)
    for call in (
        lambda p: adjust_to_prior(p, train, test),
        lambda p: alternating_normalization(p, train, reference=proba),
    ):
        np.testing.assert_allclose(call(lazy).compute(), call(proba), atol=TOL)
    for kind in ("top_label", "classwise"):
        ece = expected_calibration_error(y, lazy, kind=kind)
        assert ece == pytest.approx(expected_calibration_error(y, proba, kind=kind))
    # (and a row off by 5%, beyond float16's rounding, is still refused)
    proba[3] *= np.float16(1.05)
    for rows in (proba, _lazy(proba, chunks=100)):
        with pytest.raises(ValueError, match=r"within 1\.0e-02\); row 3 sums"):
            adjust_to_prior(rows, train, test).compute()


def test_per_label_of_filtered_arrays_gives_numpys_answer():
    """per_label of a Dask matrix (and labels) with unknown chunk sizes
    (boolean filtering: its columns were NaN long, and could not be stacked)
    gives NumPy's answer on the same rows, as the functions themselves do."""
    from skprior import per_label

    rng = np.random.default_rng(0)
    proba = rng.uniform(0.01, 0.99, size=(300, 4))
    y = (rng.random((300, 4)) < proba).astype(np.int64)
    keep = proba[:, 0] > 0.1
    lazy = _lazy(proba, chunks=100)[da.from_array(keep, chunks=100)]
    lazy_y = da.from_array(y, chunks=(100, -1))[da.from_array(keep, chunks=100)]
    assert np.isnan(lazy.shape[0])
    train, test = np.full(4, 0.4), np.full(4, 0.3)
    result = per_label(adjust_to_prior, lazy, train_prior=train, test_prior=test)
    expected = per_label(
        adjust_to_prior, proba[keep], train_prior=train, test_prior=test
    )
    np.testing.assert_allclose(result.compute(), expected, atol=TOL)
    result = per_label(fit_temperature, np.log(lazy), lazy_y, method="nll")
    expected = per_label(fit_temperature, np.log(proba[keep]), y[keep], method="nll")
    np.testing.assert_allclose(np.asarray(result), expected, rtol=1e-6)


def test_joint_confusion_matrix_counts_each_chunk_compactly():
    """The Dask confusion matrix equals NumPy's exactly (counts, and sums of
    integer weights), its counting one compute, with no chunk rows x K**2
    one-hot in memory (tracemalloc sees NumPy's allocations): 20 MB at this
    size before, 3.6 GB for one 40,000-row chunk at K = 100."""
    import tracemalloc

    from skprior import joint_confusion_matrix

    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.full(50, 0.3), size=2000)
    y = rng.integers(0, 50, size=2000)
    weights = rng.integers(0, 4, size=2000).astype(np.float64)
    lazy, lazy_y = _lazy(proba, chunks=1000), da.from_array(y, chunks=1000)
    # (the weights in other chunks than the rows)
    given = ((None, None), (weights, da.from_array(weights, chunks=500)))
    for w, lazy_w in given:
        expected = joint_confusion_matrix(proba, y, sample_weight=w)
        tracemalloc.start()
        try:
            with ComputeCounter() as counter:
                result = joint_confusion_matrix(lazy, lazy_y, sample_weight=lazy_w)
            result = result.compute()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        np.testing.assert_array_equal(result, expected)
        assert peak < 4e6, peak  # (a 1000 x 2,500 float64 one-hot: 20 MB)
        # the validation of the rows, the labels (the weights), the counting
        assert counter.count == (3 if w is None else 4)


def test_prior_interval_with_repeated_rows_and_a_calibration_set(outputs):
    """A batch that repeats rows, with a Dask calibration set: its ties are
    looked for (continuous outputs: none), and the interval equals NumPy's."""
    proba, labels = outputs
    batch = proba[np.random.default_rng(0).integers(500, size=1000)]
    train = np.full(10, 0.1)
    numpy_given = (proba[1000:], labels[1000:])
    expected = estimate_test_prior(batch, train).confidence_interval(
        calibration=numpy_given
    )
    calibration = (_lazy(proba[1000:]), da.from_array(labels[1000:], chunks=450))
    low, high = estimate_test_prior(_lazy(batch), train).confidence_interval(
        calibration=calibration
    )
    np.testing.assert_allclose(low.compute(), expected[0], atol=1e-9)
    np.testing.assert_allclose(high.compute(), expected[1], atol=1e-9)


def test_filtered_sample_weight_of_unknown_chunk_sizes():
    """Weights filtered as the rows are (w[mask]: Dask does not know their
    chunk sizes, so their number of rows is NaN) give NumPy's results. Three
    functions raised AttributeError (the weights came back as a NumPy array,
    which has no rechunk)."""
    from skprior import estimate_source_prior, joint_confusion_matrix

    rng = np.random.default_rng(0)
    logits, y = rng.normal(size=(60, 3)), np.arange(60) % 3
    weights = rng.uniform(1, 2, 60)
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    keep = np.arange(60) % 5 != 0
    mask = da.from_array(keep, chunks=10)

    def filtered(array):
        return da.from_array(array, chunks=(10,) + array.shape[1:])[mask]

    cases = [
        (estimate_source_prior, proba, {}),
        (joint_confusion_matrix, proba, {}),
        (fit_dirichlet_calibration, logits, {"reg_lambda": 1.0}),
    ]
    for function, values, options in cases:
        got = function(
            filtered(values), filtered(y), sample_weight=filtered(weights), **options
        )
        expected = function(
            values[keep], y[keep], sample_weight=weights[keep], **options
        )
        got, expected = (
            list(r) if isinstance(r, tuple) else [r] for r in (got, expected)
        )
        for a, b in zip(da.compute(*got), expected, strict=True):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6)


def test_a_row_of_minus_inf_logits_is_named_by_its_row_in_the_array():
    """The lazy check of each block gives its error the array's row number,
    but matched "row" only: "Row 45 of logits is -inf in every column" came
    out as "Row 5" from the third 20-row chunk. Both cases now."""
    from skprior import softmax_temperature

    logits = np.random.default_rng(0).normal(size=(60, 4))
    logits[45] = -np.inf
    with pytest.raises(ValueError, match="Row 45 of logits is -inf"):
        softmax_temperature(logits, 1.0)
    lazy = softmax_temperature(da.from_array(logits, chunks=20), 1.0)
    with pytest.raises(ValueError, match="Row 45 of logits is -inf"):
        lazy.compute()
