"""CAN's compiled kernel (numba) against the NumPy path, on the same inputs.

Each test computes ``alternating_normalization`` twice, once forced through
the kernel (``COMPILED_MIN_ELEMENTS = 0``) and once with
``SKPRIOR_NO_NUMBA=1``, checks that the kernel really ran, and compares:
1e-12 relative for float64, 1e-6 for float32 (a float32 rounding). The
tests against the naive references (``test_can.py``) run on both paths too.
"""

import multiprocessing
import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
from scipy.special import softmax

from skprior import alternating_normalization
from skprior._utils._validation import _row_sum_tolerance
from skprior.can import _can, _output_memory

try:  # (ImportError too: numba installed but broken, e.g. for this NumPy)
    import numba  # noqa: F401
except ImportError:
    pytest.skip("numba is not installed", allow_module_level=True)
from skprior.can import _compiled  # noqa: E402

RTOL = {np.float32: 1e-6, np.float64: 1e-12}


@pytest.fixture(autouse=True)
def no_kept_outputs():
    """Each test ends with no kept output buffers (``_output_memory``)."""
    yield
    _output_memory.release()


def both_paths(monkeypatch, proba, prior, **kwargs):
    """(kernel result, NumPy result, their warnings) of one call."""
    calls = []

    def counted(*args, **kw):
        calls.append(1)
        return screen(*args, **kw)

    screen = _compiled.screen
    monkeypatch.setattr(_compiled, "screen", counted)
    monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", 0)
    results = []
    for disabled in ("", "1"):
        monkeypatch.setenv("SKPRIOR_NO_NUMBA", disabled)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = alternating_normalization(proba, prior, **kwargs)
        results.append((out, [str(w.message) for w in caught]))
    assert len(calls) == 1, "the kernel did not run"
    (compiled, compiled_warnings), (numpy, numpy_warnings) = results
    assert compiled_warnings == numpy_warnings
    return compiled, numpy


def assert_same(compiled, numpy):
    assert compiled.dtype == numpy.dtype and compiled.shape == numpy.shape
    rtol = RTOL[numpy.dtype.type]
    np.testing.assert_allclose(compiled, numpy, rtol=rtol, atol=0)


def cifar(cifar100, dtype):
    return cifar100[0][:3000].astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["renormalized", "unrenormalized"])
@pytest.mark.parametrize("k, tau", [("auto", 0.9), (2, 0.5), (5, 0.9), (3, 0.3)])
def test_cifar100_outputs(monkeypatch, cifar100, dtype, kind, k, tau):
    """Real CIFAR-100 outputs, float32 as stored and float64."""
    proba = cifar(cifar100, dtype)
    prior = np.full(100, 0.01)
    if kind == "unrenormalized":  # (divided by log 100: at most log 5 / log 100)
        tau /= 4
    compiled, numpy = both_paths(
        monkeypatch, proba, prior, k=k, tau=tau, uncertainty=kind
    )
    assert_same(compiled, numpy)
    assert not np.array_equal(numpy, proba)  # (some rows were corrected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("alpha", [0.5, 2.0, 30.0])
@pytest.mark.parametrize("n_iter", [1, 3])
def test_alpha_and_iterations(monkeypatch, cifar100, dtype, alpha, n_iter):
    """alpha != 1 (30: powers near underflow, computed in logs) and d > 1,
    where the kernel screens and the NumPy solvers correct."""
    proba = cifar(cifar100, dtype)[:1500]
    prior = np.linspace(1, 2, 100) / np.linspace(1, 2, 100).sum()
    compiled, numpy = both_paths(monkeypatch, proba, prior, alpha=alpha, n_iter=n_iter)
    assert_same(compiled, numpy)


def test_reference_and_weights(monkeypatch, cifar100):
    """A held-out reference with weights: the kernel screens the batch only."""
    proba = cifar(cifar100, np.float64)
    reference, batch = proba[:2000], proba[2000:]
    weight = np.random.default_rng(0).uniform(0, 3, 2000)
    prior = np.full(100, 0.01)
    for n_iter in (1, 2):
        compiled, numpy = both_paths(
            monkeypatch,
            batch,
            prior,
            reference=reference,
            reference_weight=weight,
            n_iter=n_iter,
        )
        assert_same(compiled, numpy)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_zeros_ones_ties_and_absent_classes(monkeypatch, dtype):
    """One-hot rows, rows with exact zeros, ties in the top k (several places
    at one level), and classes that no row predicts (0 / 0 = 0)."""
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.full(12, 0.5), size=400)
    proba[:, [3, 7]] = 0.0  # classes absent from the batch
    proba /= proba.sum(axis=1, keepdims=True)
    proba[:20] = np.eye(12)[rng.choice([0, 1, 2, 4, 5, 6, 8, 9, 10, 11], 20)]
    proba[20:40] = 0.0
    proba[20:40, [0, 1, 2, 4]] = 0.25  # a uniform top 4: ties at every level
    proba[40:60] = 0.0
    proba[40:60, [0, 1, 2]] = [0.4, 0.4, 0.2]
    proba = proba.astype(dtype)
    prior = np.full(12, 1 / 12)
    for k, tau in ((3, 0.9), (2, 0.99), (4, 1.0)):
        compiled, numpy = both_paths(monkeypatch, proba, prior, k=k, tau=tau)
        assert_same(compiled, numpy)
        assert np.all(compiled[:, [3, 7]] == 0)


def test_a_column_held_by_the_low_rows(monkeypatch):
    """The kernel sums every row's columns in its one sweep and takes the low
    rows' sums off. Where the low rows hold nearly all of a column (here
    20,000 low rows hold 99.9% of class 2's mass, the confident rows the
    rest, 1e-5 a row), the difference would lose about three digits to
    cancellation (the result 1e-11 off the NumPy path's): the confident rows
    are summed again there, and the result agrees with the NumPy path's
    direct sum to rounding."""
    rng = np.random.default_rng(5)
    low = np.tile([0.4995, 0.4995, 0.001], (20_000, 1))
    confident = np.zeros((2_000, 3))
    confident[:, 2] = rng.uniform(0, 2e-5, 2_000)
    confident[:, 1] = 0.01
    confident[:, 0] = 1 - confident[:, 1:].sum(axis=1)
    proba = rng.permutation(np.vstack([low, confident]))
    compiled, numpy = both_paths(monkeypatch, proba, np.full(3, 1 / 3), k=2, tau=0.9)
    assert_same(compiled, numpy)
    held = np.isclose(proba[:, 2], 0.001)
    assert not np.allclose(compiled[held], proba[held])  # (the low rows moved)


@pytest.mark.parametrize("n_classes, k", [(20, 20), (40, 16), (40, 17), (7, 7)])
def test_large_k_up_to_all_classes(monkeypatch, n_classes, k):
    """k = n_classes, and k on either side of the kernel's switch to a sort."""
    proba = np.random.default_rng(2).dirichlet(np.ones(n_classes), size=500)
    prior = np.full(n_classes, 1 / n_classes)
    for kind in ("renormalized", "unrenormalized"):
        compiled, numpy = both_paths(
            monkeypatch, proba, prior, k=k, tau=0.7, uncertainty=kind
        )
        assert_same(compiled, numpy)


def test_no_confident_row_warns_on_both_paths(monkeypatch):
    """Every row low-confidence: the prior on each row's support, one warning."""
    proba = np.random.default_rng(3).dirichlet(np.full(5, 50.0), size=50)
    proba[0, 4] = 0.0
    proba[0] /= proba[0].sum()
    compiled, numpy = both_paths(monkeypatch, proba, np.full(5, 0.2), tau=0.5)
    assert_same(compiled, numpy)
    np.testing.assert_allclose(compiled[1], 0.2)


def test_all_rows_confident(monkeypatch):
    proba = np.eye(6)[np.arange(60) % 6] * 0.9 + 0.1 / 6
    compiled, numpy = both_paths(monkeypatch, proba, np.full(6, 1 / 6))
    np.testing.assert_array_equal(compiled, proba)
    np.testing.assert_array_equal(numpy, proba)


def test_ten_thousand_classes(monkeypatch):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(60, 10_000))
    logits[np.arange(60), rng.integers(0, 10_000, 60)] += np.linspace(0, 20, 60)
    proba = softmax(logits, axis=1)
    prior = np.full(10_000, 1e-4)
    compiled, numpy = both_paths(monkeypatch, proba, prior, k=3, tau=0.5)
    assert_same(compiled, numpy)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_of_huge_logits(monkeypatch, dtype):
    """Logits of +-1e4: rows of exact 0 and 1 next to ordinary ones."""
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(300, 10))
    logits[:100] *= 1e4
    proba = softmax(logits, axis=1).astype(dtype)
    proba /= proba.sum(axis=1, keepdims=True)
    for alpha in (1.0, 3.0):
        compiled, numpy = both_paths(monkeypatch, proba, np.full(10, 0.1), alpha=alpha)
        assert_same(compiled, numpy)


def test_an_empty_batch_gets_the_numpy_paths_error(monkeypatch):
    """With the kernel allowed on any size, an empty batch still goes to the
    NumPy path and its error (the kernel would return an empty result)."""
    monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", 0)
    for disabled in ("", "1"):
        monkeypatch.setenv("SKPRIOR_NO_NUMBA", disabled)
        with pytest.raises(ValueError, match="proba is empty"):
            alternating_normalization(np.empty((0, 4)), np.full(4, 0.25))


@pytest.mark.parametrize(
    "bad, match",
    [(np.nan, "NaN or infinite"), (-0.1, "negative"), (0.5, "sum to 1")],
)
def test_bad_rows_give_the_numpy_errors(monkeypatch, bad, match):
    proba = np.full((50, 4), 0.25)
    proba[7, 1] = bad
    monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", 0)
    monkeypatch.delenv("SKPRIOR_NO_NUMBA", raising=False)
    with pytest.raises(ValueError, match=match):
        alternating_normalization(proba, np.full(4, 0.25))
    monkeypatch.setenv("SKPRIOR_NO_NUMBA", "1")
    with pytest.raises(ValueError, match=match):
        alternating_normalization(proba, np.full(4, 0.25))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_sums_are_checked_as_the_kernel_reads(monkeypatch, cifar100, dtype):
    """The kernel checks each row's sum against the validation's tolerance as
    it reads the row (in a late task, two threads): a row just inside the
    tolerance is taken, as on the NumPy path; one just outside raises the
    NumPy path's error, which names that row."""
    proba = cifar(cifar100, dtype)
    prior = np.full(100, 0.01)
    tolerance = _row_sum_tolerance(dtype, 100)
    monkeypatch.setattr(_compiled, "TASK_BYTES", 50 * proba[:1].nbytes)
    monkeypatch.setattr(_compiled, "THREADS", 2)
    inside = proba.copy()
    inside[2900] *= dtype(1 + tolerance / 2)
    assert abs(inside[2900].sum(dtype=np.float64) - 1) > tolerance / 4
    assert_same(*both_paths(monkeypatch, inside, prior))
    outside = proba.copy()
    outside[2900] *= dtype(1 + 2 * tolerance)
    for disabled in ("", "1"):
        monkeypatch.setenv("SKPRIOR_NO_NUMBA", disabled)
        with pytest.raises(ValueError, match="row 2900 sums to"):
            alternating_normalization(outside, prior)


def test_negative_zeros_and_the_callers_array(monkeypatch, cifar100):
    """-0.0 is a valid zero (the NumPy path takes it); the input is not written."""
    proba = cifar(cifar100, np.float64)
    proba[:5, 0] = 0.0
    proba[:5] /= proba[:5].sum(axis=1, keepdims=True)
    proba[:5, 0] = -0.0
    kept = proba.copy()
    monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", 0)
    out = alternating_normalization(proba, np.full(100, 0.01))
    np.testing.assert_array_equal(proba, kept)
    assert not np.signbit(out[:5, 0]).any()
    monkeypatch.setenv("SKPRIOR_NO_NUMBA", "1")
    np.testing.assert_array_equal(
        alternating_normalization(proba, 0.01 + out[0] * 0), out
    )


def test_when_the_kernel_runs(monkeypatch, cifar100):
    """Not below COMPILED_MIN_ELEMENTS, for max_over_k, with SKPRIOR_NO_NUMBA
    or on other arrays than float32/float64 ndarrays."""
    calls = []
    screen = _compiled.screen
    monkeypatch.setattr(
        _compiled, "screen", lambda *a, **k: calls.append(1) or screen(*a, **k)
    )
    monkeypatch.delenv("SKPRIOR_NO_NUMBA", raising=False)
    proba, prior = cifar(cifar100, np.float32), np.full(100, 0.01)
    monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", proba.size + 1)
    alternating_normalization(proba, prior)
    monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", proba.size)
    alternating_normalization(proba, prior, uncertainty="max_over_k")
    alternating_normalization(proba.astype(np.float16), prior)
    alternating_normalization(proba.tolist(), prior)
    monkeypatch.setenv("SKPRIOR_NO_NUMBA", "1")
    alternating_normalization(proba, prior)
    assert calls == []
    monkeypatch.setenv("SKPRIOR_NO_NUMBA", "")
    alternating_normalization(proba, prior)
    alternating_normalization(np.asfortranarray(proba), prior)
    assert calls == [1, 1]


def test_importing_skprior_does_not_import_numba():
    """numba (hundreds of ms to import) is imported by the first CAN call
    that uses the kernel, not by ``import skprior`` or a small call."""
    code = (
        "import sys, numpy as np, skprior; "
        "skprior.alternating_normalization(np.full((10, 4), 0.25), [0.25] * 4); "
        "print('numba' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_read_only_input(monkeypatch, cifar100):
    """A read-only batch (writeable=False) is read as it is."""
    proba = cifar(cifar100, np.float32)
    proba.flags.writeable = False
    compiled, numpy = both_paths(monkeypatch, proba, np.full(100, 0.01))
    assert_same(compiled, numpy)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tasks_and_threads_give_one_result(monkeypatch, cifar100, dtype):
    """The batch in many small tasks over 1 to 3 threads (the correction in
    several parts too): the same result, bit for bit (the tasks' column sums
    are added in task order), equal to the NumPy path's; a bad row in a late
    task still raises."""
    proba = cifar(cifar100, dtype)
    prior = np.full(100, 0.01)
    monkeypatch.setattr(_compiled, "TASK_BYTES", 2 * 37 * proba[:1].nbytes)
    parts, correct = [], _compiled._correct
    monkeypatch.setattr(
        _compiled, "_correct", lambda *a: parts.append(len(a[2])) or correct(*a)
    )
    results = []
    for threads in (1, 2, 3):
        monkeypatch.setattr(_compiled, "THREADS", threads)
        compiled, numpy = both_paths(monkeypatch, proba, prior)
        assert_same(compiled, numpy)
        results.append(compiled)
    assert len(parts) >= 3 * 2 and min(parts) > 0  # (several parts per call)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])
    proba[-3, 5] = np.nan
    monkeypatch.setenv("SKPRIOR_NO_NUMBA", "")
    with pytest.raises(ValueError, match="NaN or infinite"):
        alternating_normalization(proba, prior)


def test_an_error_in_a_task_reaches_the_caller(monkeypatch, cifar100):
    """An exception in a task (either thread) is raised by the call, and no
    thread takes a new task after it."""
    proba = cifar(cifar100, np.float32)
    monkeypatch.setattr(_compiled, "TASK_BYTES", 100 * proba[:1].nbytes)
    monkeypatch.setattr(_compiled, "THREADS", 2)
    monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", 0)
    monkeypatch.delenv("SKPRIOR_NO_NUMBA", raising=False)
    calls, screen = [], _compiled._screen

    def failing(*args):
        calls.append(1)
        if len(calls) == 3:
            raise MemoryError("the third task")
        return screen(*args)

    monkeypatch.setattr(_compiled, "_screen", failing)
    with pytest.raises(MemoryError, match="the third task"):
        alternating_normalization(proba, np.full(100, 0.01))
    assert len(calls) < 10  # (of 30 tasks)


@pytest.mark.parametrize(
    "value, runs",
    [
        ("", True),
        ("0", True),
        ("false", True),
        (" Off ", True),
        ("1", False),
        ("yes", False),
        ("true", False),
    ],
)
def test_the_environment_flag_reads_as_numbas_own(monkeypatch, value, runs):
    """SKPRIOR_NO_NUMBA=0 or false keeps the kernel on (any value turned it
    off before, 0 included)."""
    calls = []
    screen = _compiled.screen
    monkeypatch.setattr(
        _compiled, "screen", lambda *a, **k: calls.append(1) or screen(*a, **k)
    )
    monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", 0)
    monkeypatch.setenv("SKPRIOR_NO_NUMBA", value)
    proba = np.tile([[0.97, 0.01, 0.01, 0.01], [0.25, 0.25, 0.25, 0.25]], (25, 1))
    alternating_normalization(proba, np.full(4, 0.25))
    assert bool(calls) == runs


def test_the_threads_are_kept_between_calls(monkeypatch, cifar100):
    """The helper threads of one call serve the next (none started anew),
    and a changed thread count gets a pool of its size."""
    proba = cifar(cifar100, np.float32)
    monkeypatch.setattr(_compiled, "TASK_BYTES", 100 * proba[:1].nbytes)
    monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", 0)
    monkeypatch.delenv("SKPRIOR_NO_NUMBA", raising=False)
    helpers, screen = [], _compiled._screen

    def noted(*args):
        helpers.append(threading.current_thread())
        return screen(*args)

    monkeypatch.setattr(_compiled, "_screen", noted)
    seen, kept = [], []
    for threads in (3, 3, 2):
        monkeypatch.setattr(_compiled, "THREADS", threads)
        helpers.clear()
        alternating_normalization(proba, np.full(100, 0.01))
        seen.append({t for t in helpers if t is not threading.main_thread()})
        kept.append(set(_compiled._kept[1]._threads))
    assert all(t.name.startswith("skprior-can") for t in set().union(*seen))
    assert len(kept[0]) == 2 and kept[1] == kept[0] and seen[1] <= kept[0]
    assert len(kept[2]) == 1 and not kept[2] & kept[0]  # (a pool of its size)


_SCREENED_ON = []  # (the threads that ran a task, for the forked child)


def _call_noting_threads(proba):
    _SCREENED_ON.clear()
    result = alternating_normalization(proba, np.full(100, 0.01))
    return result, {thread.name for thread in _SCREENED_ON}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
def test_a_forked_child_starts_its_own_threads(monkeypatch, cifar100):
    """A child forked after a call (multiprocessing's fork, joblib's older
    default) has none of the parent's threads: it starts its own, which
    share the work with its main thread, as in the parent."""
    proba = cifar(cifar100, np.float32)
    monkeypatch.setattr(_compiled, "TASK_BYTES", 100 * proba[:1].nbytes)
    monkeypatch.setattr(_compiled, "THREADS", 2)
    monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", 0)
    monkeypatch.delenv("SKPRIOR_NO_NUMBA", raising=False)
    screen = _compiled._screen
    monkeypatch.setattr(
        _compiled,
        "_screen",
        lambda *a: _SCREENED_ON.append(threading.current_thread()) or screen(*a),
    )
    expected, _ = _call_noting_threads(proba)
    assert _compiled._kept[1] is not None
    context = multiprocessing.get_context("fork")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (fork with threads)
        with context.Pool(1) as pool:
            result, names = pool.apply(_call_noting_threads, (proba,))
    np.testing.assert_array_equal(result, expected)
    assert any(name.startswith("skprior-can") for name in names), names


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_new_output_is_laid_out_for_the_copy(monkeypatch, cifar100, dtype):
    """A new output of 64 MB or more (here, of a lowered threshold) starts at
    the input's offset within a page, just past a 2 MB boundary (its pages
    huge, its copy between equal offsets), with the NumPy path's values; a
    smaller one is NumPy's own array."""
    monkeypatch.setattr(_output_memory, "_OWN_MAPPING", 5 * 2**20)
    calls, screen = [], _compiled.screen
    monkeypatch.setattr(
        _compiled, "screen", lambda *a, **k: calls.append(1) or screen(*a, **k)
    )
    rows = cifar100[0].astype(dtype)
    proba = np.tile(rows, (-(-(6 * 2**20) // rows.nbytes), 1))[1:]  # (offset 400)
    prior = np.full(100, 0.01)
    result, numpy = both_paths(monkeypatch, proba, prior)
    assert_same(result, numpy)
    offset = proba.ctypes.data % 4096
    assert offset == result.ctypes.data % 4096
    assert (result.ctypes.data - offset) % 2**21 == 0
    assert result.base.nbytes <= proba.nbytes + 2**21 + 4096
    assert result.flags.c_contiguous and result.flags.writeable
    monkeypatch.setenv("SKPRIOR_NO_NUMBA", "")
    small = alternating_normalization(proba[: proba.shape[0] // 2], prior)
    assert small.flags.owndata and len(calls) == 2  # (the kernel's own call)


def test_an_input_not_aligned_gets_an_aligned_output(monkeypatch):
    """An input whose address is not a multiple of its itemsize (a view of
    a buffer at an odd offset) gets an output that is aligned."""
    monkeypatch.setattr(_output_memory, "_OWN_MAPPING", 2**20)
    buffer = np.zeros(8 * 300_000 + 4, dtype=np.uint8)
    proba = np.frombuffer(buffer.data, dtype=np.float64, offset=4).reshape(-1, 100)
    assert not proba.flags.aligned
    out, _ = _output_memory.new_output(proba)
    assert out.flags.aligned and out.shape == proba.shape and out.dtype == proba.dtype


def test_a_call_at_the_interpreters_exit():
    """The kept threads are shut down at the interpreter's exit, before
    ``atexit`` functions run: a call from one of those runs in its own
    thread (it raised "cannot schedule new futures after shutdown")."""
    code = (
        "import atexit, numpy as np\n"
        "from skprior.can import _can, _compiled\n"
        "from skprior import alternating_normalization\n"
        "_can.COMPILED_MIN_ELEMENTS, _compiled.TASK_BYTES = 0, 4000\n"
        "_compiled.THREADS = 2\n"
        "p = np.random.default_rng(0).dirichlet(np.full(10, 0.3), 2000)\n"
        "first = alternating_normalization(p, np.full(10, 0.1))\n"
        "atexit.register(lambda: print(np.array_equal(\n"
        "    alternating_normalization(p, np.full(10, 0.1)), first)))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SKPRIOR_NO_NUMBA"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0 and result.stdout.strip() == "True", result.stderr


def test_the_thread_count_is_read_once_per_call(monkeypatch, cifar100):
    """``THREADS`` changed by another thread during a call (here: the count
    reads 3, then 1) does not reach the pool half-read (a pool of 0 threads
    raised ValueError and left the process with a shut-down pool)."""
    proba = cifar(cifar100, np.float32)
    monkeypatch.setattr(_compiled, "TASK_BYTES", 100 * proba[:1].nbytes)
    monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", 0)
    monkeypatch.delenv("SKPRIOR_NO_NUMBA", raising=False)
    counts = iter([3])
    monkeypatch.setattr(_compiled, "_threads", lambda: next(counts, 1))
    result = alternating_normalization(proba, np.full(100, 0.01))
    monkeypatch.setenv("SKPRIOR_NO_NUMBA", "1")
    expected = alternating_normalization(proba, np.full(100, 0.01))
    assert_same(result, expected)
