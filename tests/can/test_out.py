"""``alternating_normalization(..., out=)``: into a given array, or in place.

The result written to ``out`` (a new array, or ``proba`` itself) must equal
the default call's, on the NumPy path and on the compiled kernel (forced
with ``COMPILED_MIN_ELEMENTS = 0``), on the real CIFAR-100 outputs; the
caller's batch changes only when it is ``out``.
"""

import numpy as np
import pytest

from skprior import alternating_normalization
from skprior.can import _can

RTOL = {np.float32: 1e-6, np.float64: 1e-12}

CASES = [
    {},
    {"tau": 0.5},
    {"n_iter": 3},
    {"alpha": 2.0},
    {"alpha": 0.5, "uncertainty": "max_over_k"},
    {"reference": "held-out"},
]


def _kernel(monkeypatch, compiled):
    if compiled:
        pytest.importorskip("numba")
        monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", 0)
        monkeypatch.setenv("SKPRIOR_NO_NUMBA", "")
    else:
        monkeypatch.setenv("SKPRIOR_NO_NUMBA", "1")


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "kernel"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=lambda case: str(case) or "defaults")
def test_out_and_in_place_equal_the_new_array(
    monkeypatch, cifar100, compiled, dtype, case
):
    _kernel(monkeypatch, compiled)
    proba = cifar100[0][:2000].astype(dtype)
    kwargs = dict(case)
    if kwargs.get("reference") == "held-out":
        kwargs["reference"] = cifar100[0][2000:3000]
    prior = np.full(proba.shape[1], 1 / proba.shape[1])
    expected = alternating_normalization(proba, prior, **kwargs)
    assert np.any(expected != proba), "the case changes no row: it tests nothing"

    batch = proba.copy()
    out = np.full_like(proba, np.nan)
    result = alternating_normalization(batch, prior, out=out, **kwargs)
    assert result is out
    np.testing.assert_array_equal(batch, proba)  # (not modified)
    np.testing.assert_allclose(out, expected, rtol=RTOL[dtype], atol=1e-300)

    result = alternating_normalization(batch, prior, out=batch, **kwargs)
    assert result is batch
    np.testing.assert_allclose(batch, expected, rtol=RTOL[dtype], atol=1e-300)


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "kernel"])
def test_in_place_with_rows_redone_in_logs(monkeypatch, compiled):
    # Entries near 1e-12 with alpha = 30: the powers underflow, and the
    # low-confidence rows are computed in logs (the NumPy path's fallback).
    _kernel(monkeypatch, compiled)
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.full(5, 0.3), size=400)
    proba[proba < 1e-3] = 1e-12
    proba /= proba.sum(axis=1, keepdims=True)
    prior = np.full(5, 0.2)
    expected = alternating_normalization(proba, prior, alpha=30.0, tau=0.3)
    batch = proba.copy()
    alternating_normalization(batch, prior, alpha=30.0, tau=0.3, out=batch)
    np.testing.assert_allclose(batch, expected, rtol=1e-12, atol=1e-300)


def test_kernel_leaves_the_rows_that_lost_digits():
    pytest.importorskip("numba")
    from skprior.can import _compiled

    # (column sums near the largest float: every result underflows, and its
    # normalisation overflows, so both rows lose their digits)
    proba = np.array([[0.5, 0.5], [0.25, 0.75], [0.9, 0.1]])
    out = proba.copy()
    rows = np.array([0, 2])
    column_sums = np.array([1e308, 1e308])
    lost = _compiled.correct(proba, out, rows, column_sums, np.array([1e-10, 1.0]), 1.0)
    np.testing.assert_array_equal(lost, rows)
    np.testing.assert_array_equal(out, proba)  # (not written)
    lost = _compiled.correct(proba, out, rows, np.ones(2), np.array([0.5, 0.5]), 1.0)
    assert lost.size == 0
    # b / (1 + b) * 0.5, normalised: the naive formula
    expected = proba[rows] / (1 + proba[rows])
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out[rows], expected, rtol=1e-12)
    np.testing.assert_array_equal(out[1], proba[1])


def test_bad_out_is_refused(cifar100):
    proba = cifar100[0][:50]
    prior = np.full(proba.shape[1], 1 / proba.shape[1])
    with pytest.raises(ValueError, match="has shape .* the result has shape"):
        alternating_normalization(proba, prior, out=np.empty((50, 3)))
    assert proba.dtype == np.float32
    with pytest.raises(ValueError, match="dtype float64; the result"):
        alternating_normalization(proba, prior, out=np.empty_like(proba, np.float64))
    read_only = np.empty_like(proba)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        alternating_normalization(proba, prior, out=read_only)
    batch = np.concatenate([proba, proba])
    with pytest.raises(ValueError, match="overlaps proba"):
        alternating_normalization(batch[:50], prior, out=batch[1:51])
    with pytest.raises(TypeError, match="out"):
        alternating_normalization(proba, prior, out=proba.tolist())


def test_the_fix_that_a_bad_out_names_works(cifar100):
    """float16 posteriors give a float64 result: the error names an out of
    that dtype (not np.empty_like(proba), float16), which is then taken."""
    proba = cifar100[0][:50].astype(np.float16)
    prior = np.full(proba.shape[1], 1 / proba.shape[1])
    with pytest.raises(ValueError, match=r"np.empty\(\(50, 100\), dtype=np.float64\)"):
        alternating_normalization(proba, prior, out=np.empty_like(proba))
    out = np.empty((50, 100), dtype=np.float64)
    assert alternating_normalization(proba, prior, out=out) is out


def test_out_is_for_numpy_batches():
    torch = pytest.importorskip("torch")
    proba = torch.tensor([[0.9, 0.1], [0.5, 0.5]], dtype=torch.float64)
    with pytest.raises(TypeError, match="out= takes a NumPy array"):
        alternating_normalization(proba, [0.5, 0.5], k=2, out=np.empty((2, 2)))


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "kernel"])
@pytest.mark.parametrize("layout", ["fortran", "strided"])
def test_out_of_any_layout(monkeypatch, cifar100, compiled, layout):
    """An ``out`` that is not C-contiguous (Fortran order, every other column
    of a wider array) is written as a C-contiguous one (the kernel copies
    into it row by row as it reads)."""
    _kernel(monkeypatch, compiled)
    proba = cifar100[0][:2000]
    prior = np.full(proba.shape[1], 1 / proba.shape[1])
    expected = alternating_normalization(proba, prior)
    if layout == "fortran":
        out = np.asfortranarray(np.full_like(proba, np.nan))
    else:
        out = np.full((proba.shape[0], 2 * proba.shape[1]), np.nan, proba.dtype)[:, ::2]
    assert alternating_normalization(proba, prior, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=RTOL[proba.dtype.type], atol=0)


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "kernel"])
@pytest.mark.parametrize("kind", ["full view", "memmap"])
def test_the_callers_out_is_returned(monkeypatch, tmp_path, cifar100, compiled, kind):
    """out= a full view of proba, or a memmap passed as both: in place, and
    the object returned is the caller's out (the batch, or a plain ndarray,
    was returned before)."""
    _kernel(monkeypatch, compiled)
    proba = cifar100[0][:500].astype(np.float64)
    prior = np.full(proba.shape[1], 1 / proba.shape[1])
    expected = alternating_normalization(proba, prior, tau=0.5)
    if kind == "memmap":
        batch = np.lib.format.open_memmap(
            tmp_path / "b.npy", mode="w+", dtype=proba.dtype, shape=proba.shape
        )
        batch[:] = proba
        out = batch
    else:
        batch = proba.copy()
        out = batch[:, :]
    result = alternating_normalization(batch, prior, tau=0.5, out=out)
    assert result is out
    np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-300)
