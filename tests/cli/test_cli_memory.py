"""The commands' memory: float32 kept float32, row blocks, the softmax once.

In memory, ``calibrate`` keeps float32 logits float32 and writes the
calibration in place of them by row blocks, ``adapt`` adjusts its input in
place by row blocks; out of core, ``adapt --logits`` computes the softmax once
into a temporary file that its passes read. The peaks are tracemalloc's
(numpy's allocations, deterministic), with generous bounds.
"""

import tracemalloc
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import skprior._utils._kernels
from skprior import adjust_to_prior, softmax_temperature, softmax_vector_scaling
from skprior._cli import _calibrate, _commands, _steps, main

N = 300
PRIOR = ",".join(["1"] * 10)
ONES = ",".join(["1"] * 100)


@pytest.fixture
def folder(tmp_path, cifar10, monkeypatch):
    """300 float32 rows of CIFAR-10 outputs (probabilities, logits, labels)."""
    proba, labels = cifar10
    proba = proba[:N].astype(np.float64)
    proba = (proba / proba.sum(axis=1, keepdims=True)).astype(np.float32)
    np.save(tmp_path / "p.npy", proba)
    np.save(tmp_path / "z.npy", np.log(proba) + 1.0)
    np.save(tmp_path / "y.npy", labels[:N])
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


@pytest.fixture
def blocks(monkeypatch):
    """The calls of the command's row-block step (30 blocks of 10 rows here)."""
    monkeypatch.setattr(_steps, "BLOCK_ENTRIES", 100)
    calls = []

    def counted(function, source, out):
        calls.append((source.dtype, out is source))
        return _steps.by_blocks(function, source, out)

    monkeypatch.setattr(_calibrate, "by_blocks", counted)
    monkeypatch.setattr(_commands, "by_blocks", counted)
    return calls


@pytest.mark.parametrize("method", ["ec", "vs"])
@pytest.mark.parametrize("logits", [False, True])
def test_calibrate_keeps_float32_and_writes_by_blocks(
    folder, capsys, blocks, method, logits
):
    """The result is float32 and what the library gives on the float32 logits
    (written by row blocks in place of them; the report's scores before, from
    one row block's softmax at a time, never hold the probabilities before)."""
    outputs = ["z.npy", "--logits"] if logits else ["p.npy"]
    argv = ["calibrate", *outputs, "--fit-labels", "y.npy", "--method", method]
    out, _ = run(capsys, *argv, "--labels", "y.npy", "-o", "c.npz")
    stored = np.load("c.npz")
    z = np.load("z.npy") if logits else np.log(np.load("p.npy"))
    if method == "ec":
        temperature = float(stored["temperature"])
        expected = softmax_temperature(z, temperature)
    else:
        expected = softmax_vector_scaling(z, stored["weights"], stored["bias"])
    assert stored["proba"].dtype == np.float32
    np.testing.assert_allclose(stored["proba"], expected, rtol=1e-6, atol=1e-12)
    # (only the result, in place: no array of the probabilities before)
    assert blocks == [(np.float32, True)]
    accuracy = float(out.splitlines()[2].split()[1])
    before = np.mean(z.argmax(axis=1) == np.load("y.npy"))
    assert accuracy == pytest.approx(before, abs=1e-4)


def test_adapt_adjusts_in_place_by_blocks(folder, capsys, blocks):
    """float32 in, float32 out, Bayes' rule by row blocks in place of the
    input; the scores before are the input's."""
    out, _ = run(
        capsys, "adapt", "p.npy", "--prior", PRIOR, "--shift-level", "1",
        "--labels", "y.npy", "-o", "a.npy",
    )  # fmt: skip
    test_prior = np.array([float(v) for v in out.splitlines()[1].split(",")])
    test_prior /= test_prior.sum()  # (printed with 6 decimals)
    proba = np.load("p.npy")
    expected = adjust_to_prior(proba, np.full(10, 0.1), test_prior)
    result = np.load("a.npy")
    assert result.dtype == np.float32 and blocks == [(np.float32, True)]
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)
    accuracy = next(line for line in out.splitlines() if line.startswith("accuracy"))
    before = np.mean(proba.argmax(axis=1) == np.load("y.npy"))
    assert float(accuracy.split()[1]) == pytest.approx(before, abs=1e-4)


def traced_peak(argv, size):
    """The peak of numpy's allocations during the command / ``size``."""
    tracemalloc.start()
    try:
        assert main(argv) == 0
        return tracemalloc.get_traced_memory()[1] / size
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("command", "bound"),
    [
        # (float64 logits, the probabilities before and after: 4.7x; the
        # probabilities before whole beside the logits for the scores: 2.1x)
        (["calibrate", "--fit-labels", "y.npy", "--labels", "y.npy"], 1.75),
        # (the result beside the input: 2.0x before)
        (["adapt", "--prior", ONES, "--method", "known", "--test-prior", ONES], 1.5),
        # (CAN's result beside the input: 2.1x before; now in place of it)
        (["can", "--prior", ONES, "--labels", "y.npy"], 1.5),
        # (--diagram kept the probabilities before whole: 2.1x to 3x before)
        (["calibrate", "--fit-labels", "y.npy", "--labels", "y.npy",
          "--diagram", "d.png"], 1.75),
        (["adapt", "--prior", ONES, "--method", "known", "--test-prior", ONES,
          "--labels", "y.npy", "--diagram", "d.png"], 1.5),
        (["can", "--prior", ONES, "--labels", "y.npy", "--diagram", "d.png"], 1.5),
    ],
    ids=["calibrate", "adapt", "can", "calibrate-diagram", "adapt-diagram",
         "can-diagram"],
)  # fmt: skip
def test_peak_memory_against_the_input(tmp_path, monkeypatch, capsys, command, bound):
    """On 10,000 x 100 float32 probabilities (4 MB), with the library's and
    the command's blocks at 2**14 entries so that one block's temporaries
    weigh little."""
    if "--diagram" in command:
        pytest.importorskip("matplotlib")
    monkeypatch.setattr(skprior._utils._kernels, "BLOCK_ELEMENTS", 2**14)
    monkeypatch.setattr(_steps, "BLOCK_ENTRIES", 2**14)
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((10_000, 100)).astype(np.float32)
    np.save("p.npy", softmax_temperature(logits, 1.0))
    np.save("y.npy", rng.integers(0, 100, 10_000))
    argv = [command[0], "p.npy", *command[1:], "-q", "-o", "out.npy"]
    assert main(argv) == 0  # (the imports, before the count)
    ratio = traced_peak(argv, (tmp_path / "p.npy").stat().st_size)
    capsys.readouterr()
    assert ratio <= bound, f"peak {ratio:.2f}x the input"


@pytest.fixture
def reads(folder, monkeypatch):
    """The .npy files read out of core, one entry per block read; blocks of
    100 rows (3 per file)."""
    from skprior._utils import _npy_blocks

    monkeypatch.setattr(_npy_blocks, "CHUNK_BYTES", 100 * 10 * 4)
    real, paths = _npy_blocks.NpyRows.__getitem__, []

    def counted(self, key):
        paths.append(Path(self.path).name)
        return real(self, key)

    monkeypatch.setattr(_npy_blocks.NpyRows, "__getitem__", counted)
    return paths


def test_adapt_logits_out_of_core_takes_the_softmax_once(folder, capsys, reads):
    """The estimate's passes read the probabilities from a temporary file,
    removed at the end: the logits are read once (and their first block for
    the check that they are not probabilities), and the result is the
    in-memory one."""
    argv = ["adapt", "z.npy", "--logits", "--prior", PRIOR, "--shift-level", "1"]
    out, err = run(capsys, *argv, "--out-of-core", "-o", "blocks.npy")
    assert "passes, converged" in out and "cannot be kept" not in err
    assert reads.count("z.npy") < 3 * 3  # (a pass, its first block, no more)
    assert len(reads) > 3 * 4  # (the passes read the temporary file)
    assert sorted(p.name for p in folder.iterdir()) == [
        "blocks.npy",
        "p.npy",
        "y.npy",
        "z.npy",
    ]
    run(capsys, *argv, "-o", "memory.npy")
    np.testing.assert_allclose(
        np.load("blocks.npy"), np.load("memory.npy"), rtol=1e-5, atol=1e-7
    )


def test_adapt_logits_out_of_core_without_room_for_the_softmax(
    folder, capsys, reads, monkeypatch
):
    """Where the temporary file cannot be written, the softmax is computed in
    every pass, as stderr says, with the same result."""
    from skprior._cli import _blocks

    def full(**options):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_blocks, "tempfile", SimpleNamespace(mkstemp=full))
    argv = ["adapt", "z.npy", "--logits", "--prior", PRIOR, "--shift-level", "1"]
    out, err = run(capsys, *argv, "--out-of-core", "-o", "blocks.npy")
    assert "the softmax of the logits cannot be kept on disk" in err
    assert reads.count("z.npy") > 3 * 4 and set(reads) == {"z.npy"}
    run(capsys, *argv, "-o", "memory.npy")
    np.testing.assert_allclose(
        np.load("blocks.npy"), np.load("memory.npy"), rtol=1e-5, atol=1e-7
    )


def test_scores_by_blocks_equal_the_scores_of_the_whole(monkeypatch):
    """The report's scores from one row block's softmax at a time equal those
    of the whole softmax (the same ECE sums, exactly), on real outputs."""
    from conftest import load_model_outputs

    from skprior._cli._report import summary_scores
    from skprior.metrics import expected_calibration_error

    monkeypatch.setattr(_steps, "BLOCK_ENTRIES", 2**14)  # (several blocks)
    proba, labels = load_model_outputs("lenet-5-cifar-100")
    logits = np.log(proba[:3000]).astype(np.float32)
    labels = labels[:3000]
    args = SimpleNamespace(quiet=True, command="calibrate")
    softmax = partial(softmax_temperature, temperature=1.0)
    rows = _steps.summaries(args, softmax, logits, labels, "before")
    assert all(len(column) == 3000 for column in rows)
    by_blocks = summary_scores(*rows)
    whole = softmax(logits)
    picked = whole[np.arange(3000), labels].astype(np.float64)
    expected = {
        "accuracy": np.mean(np.argmax(whole, axis=1) == labels),
        "ECE": expected_calibration_error(labels, whole, labels=np.arange(100)),
        "NLL": -np.mean(np.log(picked)),
    }
    assert by_blocks.keys() == expected.keys()
    for name, value in expected.items():
        assert by_blocks[name] == pytest.approx(value, rel=1e-12, abs=1e-15), name


@pytest.mark.parametrize(
    "command",
    [
        ["calibrate", "z.npy", "--fit-labels", "y.npy", "--logits"],
        ["adapt", "p.npy", "--prior", PRIOR, "--shift-level", "1"],
        ["can", "p.npy", "--prior", PRIOR, "--tau", "0.5"],
    ],
    ids=["calibrate", "adapt", "can"],
)
def test_diagram_from_the_rows_summaries(folder, capsys, monkeypatch, command):
    """The diagram drawn from the rows' summaries (neither array kept whole)
    has the curves and ECEs of ReliabilityDisplay on the arrays before and
    after."""
    pytest.importorskip("matplotlib")
    from skprior import ReliabilityDisplay
    from skprior.metrics import expected_calibration_error, reliability_curve

    drawn = []
    plot = ReliabilityDisplay.plot

    def captured(self, **kwargs):
        drawn.append(self)
        return plot(self, **kwargs)

    monkeypatch.setattr(ReliabilityDisplay, "plot", captured)
    argv = [*command, "--labels", "y.npy", "-o", "out.npy", "--diagram", "d.png"]
    run(capsys, *argv)
    assert (folder / "d.png").stat().st_size > 0
    labels = np.load("y.npy")
    if command[0] == "calibrate":
        before = softmax_temperature(np.load("z.npy"), 1.0)
    else:
        before = np.load("p.npy")
    after = np.load("out.npy")
    assert np.any(after != before)
    assert [display.estimator_name for display in drawn] == ["before", "after"]
    classes = np.arange(10)
    for display, proba in zip(drawn, [before, after], strict=True):
        accuracy, confidence, _ = reliability_curve(labels, proba, labels=classes)
        # (the library returns float32 for float32 input; the diagram float64)
        np.testing.assert_allclose(display.accuracy, accuracy, rtol=1e-6)
        np.testing.assert_allclose(display.confidence, confidence, rtol=1e-6)
        ece = expected_calibration_error(labels, proba, labels=classes)
        assert display.ece == pytest.approx(ece, rel=1e-9)
        np.testing.assert_array_equal(display.y_confidence, proba.max(axis=1))
