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

import skprior._utils._kernels
from skprior import (
    adjust_to_prior,
    alternating_normalization,
    estimate_source_prior,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    fit_dirichlet_calibration,
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
    monkeypatch.setattr(skprior._utils._kernels, "BLOCK_ELEMENTS", 2**16)
    logits, proba, y = data
    # (once on 2**20 entries first: a process's first such call may load
    # numba's compiled kernels or import modules, which is not the call's)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        CASES[name](logits[: 2**14], proba[: 2**14], y[: 2**14])
    ratio = peak_ratio(lambda: CASES[name](logits, proba, y), logits.nbytes)
    assert ratio <= 2.0, f"{name}: peak {ratio:.2f}x the input"


# The slow fits, on smaller batches: CAN with d = 3 costs O(low rows x
# confident rows x K x d), and a Dirichlet fit has K^2 parameters (on 2**15
# rows, so that L-BFGS's memory of 4,160 of them stays small against the
# input, as 10,100 are against 1e6 x 100). reg_lambda="auto" is measured by
# benchmarks/bench_memory.py at 1e6 x 100 only: its cross-validation splitter,
# scikit-learn's StratifiedKFold, makes a few int64 arrays of one entry per
# row, which weigh little against 100 float32 logits per row but as much as the
# rest of the fit against the few classes a test can afford.
SLOW_CASES = {
    "alternating_normalization, d=3, most rows uncertain": (
        2**13,
        2**13,
        lambda z, p, y: alternating_normalization(
            p, np.full(N_CLASSES, 1 / N_CLASSES), tau=0.5, n_iter=3
        ),
    ),
    "fit_dirichlet_calibration (reg_lambda=1)": (
        2**15,
        2**16,
        lambda z, p, y: fit_dirichlet_calibration(z, y, reg_lambda=1.0),
    ),
}


@pytest.mark.parametrize("name", list(SLOW_CASES))
def test_peak_memory_of_the_slow_fits(data, name, monkeypatch):
    """The same bound for CAN's iterations and a Dirichlet fit."""
    n_rows, block_elements, call = SLOW_CASES[name]
    monkeypatch.setattr(skprior._utils._kernels, "BLOCK_ELEMENTS", block_elements)
    logits, proba, y = (a[:n_rows].copy() for a in data)
    ratio = peak_ratio(lambda: call(logits, proba, y), logits.nbytes)
    assert ratio <= 2.0, f"{name}: peak {ratio:.2f}x the input"
