"""An interval re-reads the caller's batch: one modified since the estimate is refused.

``estimate_test_prior`` keeps a reference to the batch, not a copy, for
``confidence_interval``; the column sums of about 1,024 evenly spaced rows,
taken with the estimate, tell whether the batch changed in between.
"""

import numpy as np
import pytest
from array_api_compat import array_namespace

from skprior import estimate_test_prior
from skprior.label_shift import _prior
from tests._namespaces import Namespace

UNIFORM = np.full(4, 0.25)


def _batch(n_rows=3000, seed=0):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(4, 0.7), size=n_rows)


def _reuse_buffer(xp, proba):
    """The next batch written into the same buffer (a common loop)."""
    proba[...] = xp.flip(proba, axis=0)


def _rescale_in_place(xp, proba):
    """Sharpened and renormalised in place."""
    proba[...] = proba**2
    proba[...] = proba / xp.sum(proba, axis=1)[:, None]


@pytest.mark.parametrize(
    "combination",
    [
        ("numpy", None, "float64"),
        ("array_api_strict", "CPU_DEVICE", "float64"),
        ("torch", "cpu", "float32"),
        ("torch", "cuda", "float32"),
    ],
    ids=lambda c: "-".join(part for part in c if part),
)
@pytest.mark.parametrize("change", [_reuse_buffer, _rescale_in_place])
def test_a_batch_modified_after_the_estimate_is_refused(combination, change):
    ns = Namespace(*combination)
    proba = ns.f(_batch())
    estimate = estimate_test_prior(proba, ns.f(UNIFORM))
    low, high = estimate.confidence_interval()  # (unchanged: computed)
    assert np.all(ns.host(low) <= ns.host(high))
    change(array_namespace(proba), proba)
    with pytest.raises(ValueError, match="modified after the estimate"):
        estimate.confidence_interval()


def test_an_unchanged_batch_gives_the_same_interval_as_a_copy():
    proba = _batch()
    kept = estimate_test_prior(proba, UNIFORM).confidence_interval()
    copied = estimate_test_prior(proba.copy(), UNIFORM).confidence_interval()
    for mine, theirs in zip(kept, copied, strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_the_sample_spans_the_batch(monkeypatch):
    """A change in the last sampled row is seen; one between sampled rows is
    not (the documented limit of the check)."""
    monkeypatch.setattr(_prior, "SAMPLED_ROWS", 10)
    proba = _batch(1000)
    estimate = estimate_test_prior(proba, UNIFORM)
    proba[999] = proba[999][::-1]  # (row 999 is not one of 0, 100, ..., 900)
    estimate.confidence_interval()
    proba[900] = proba[900][::-1]
    with pytest.raises(ValueError, match="modified after the estimate"):
        estimate.confidence_interval()


def test_dask_batches_are_not_sampled():
    """A Dask array cannot change in place, and a strided read would touch
    every chunk: no sample is taken."""
    da = pytest.importorskip("dask.array")
    estimate = estimate_test_prior(da.from_array(_batch(), chunks=500), UNIFORM)
    assert estimate._sampled_sums is None
    low, high = estimate.confidence_interval()
    assert np.all(np.asarray(low) <= np.asarray(high))
