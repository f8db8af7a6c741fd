"""Peak memory of the array functions, as a multiple of their input's size.

Issue "never thrashing": every array function stays within 2x its input
(output included) on 1e6 x 100 float32 (``benchmarks/bench_memory.py``). The
same bound is checked here at a size the suite can afford: 2**17 x 64 float32
(32 MB), with row blocks of 2**16 entries (``BLOCK_ELEMENTS``, 2**22 in use),
so that one block's temporaries weigh as little against the input as they do
at 1e6 x 100. tracemalloc counts numpy's allocations, which is deterministic,
unlike time.
"""

import tracemalloc
import warnings

import numpy as np
import pytest

import skprior._kernels
from skprior import (
    adjust_to_prior,
    alternating_normalization,
    estimate_source_prior,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    fit_temperature,
    fit_vector_scaling,
    per_label,
    softmax_temperature,
)

N_ROWS, N_CLASSES = 2**17, 64


def peak_ratio(func, input_bytes):
    """Peak allocation of ``func()`` above what was allocated before / input."""
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = func()
        peak = tracemalloc.get_traced_memory()[1]
        del result
    finally:
        tracemalloc.stop()
    return (peak - base) / input_bytes


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    logits = (3 * rng.standard_normal((N_ROWS, N_CLASSES))).astype(np.float32)
    proba = softmax_temperature(logits, 1.0)
    y = np.argmax(logits + 3 * rng.standard_normal(logits.shape), axis=1)
    y[:N_CLASSES] = np.arange(N_CLASSES)
    return logits, proba, y


CASES = {
    "alternating_normalization, most rows uncertain": lambda z, p, y: (
        alternating_normalization(p, np.full(N_CLASSES, 1 / N_CLASSES), tau=0.5)
    ),
    "fit_temperature (EC)": lambda z, p, y: fit_temperature(z, y),
    "fit_temperature (NLL)": lambda z, p, y: fit_temperature(z, y, method="nll"),
    "fit_bias_corrected_temperature": lambda z, p, y: fit_bias_corrected_temperature(
        z, y
    ),
    "fit_vector_scaling": lambda z, p, y: fit_vector_scaling(z, y),
    "estimate_test_prior": lambda z, p, y: estimate_test_prior(
        p, np.full(N_CLASSES, 1 / N_CLASSES)
    ),
    "adjust_to_prior": lambda z, p, y: adjust_to_prior(
        p,
        np.full(N_CLASSES, 1 / N_CLASSES),
        np.r_[0.5, np.full(N_CLASSES - 1, 0.5 / 63)],
    ),
    "estimate_source_prior (mean posterior)": lambda z, p, y: estimate_source_prior(
        p, source="mean_posterior"
    ),
    "per_label(adjust_to_prior)": lambda z, p, y: per_label(
        adjust_to_prior, p, np.full(N_CLASSES, 0.5), np.full(N_CLASSES, 0.3)
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_peak_memory_is_at_most_twice_the_input(data, name, monkeypatch):
    """The call's peak allocation, its output included, is <= 2x its input."""
    monkeypatch.setattr(skprior._kernels, "BLOCK_ELEMENTS", 2**16)
    logits, proba, y = data
    ratio = peak_ratio(lambda: CASES[name](logits, proba, y), logits.nbytes)
    assert ratio <= 2.0, f"{name}: peak {ratio:.2f}x the input"
