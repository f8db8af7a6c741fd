"""Work done block by block over the rows: same answer, bounded memory.

``softmax_temperature``, ``topk_entropy(kind="max_over_k")`` and the d > 1 CAN
iteration run over row blocks of about ``BLOCK_ELEMENTS`` entries, so that their
float64 temporaries do not grow with the batch (a 50,000 x 10,000 float32
batch is 2 GB; ten to fifteen times that does not fit in memory).
"""

import tracemalloc
import warnings

import numpy as np
import pytest
from scipy.special import softmax

from skprior import (
    adjust_to_prior,
    alternating_normalization,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    fit_temperature,
    softmax_temperature,
    topk_entropy,
)
from skprior._utils import _kernels
from skprior._utils._kernels import row_blocks


def test_row_blocks_cover_every_row_once():
    for n_rows, n_columns, elements in [(5, 4, 8), (1, 10, 3), (7, 1, 7), (0, 3, 9)]:
        blocks = row_blocks(n_rows, n_columns, elements=elements)
        covered = np.concatenate(
            [np.arange(n_rows)[block] for block in blocks] or [np.array([], int)]
        )
        np.testing.assert_array_equal(covered, np.arange(n_rows))
        step = max(1, elements // n_columns)
        assert all(block.stop - block.start == step for block in blocks)


@pytest.fixture
def tiny_blocks(monkeypatch):
    """Blocks of 7 entries: every computation below runs over many blocks."""
    monkeypatch.setattr(_kernels, "BLOCK_ELEMENTS", 7)


def _outputs(cifar100):
    proba, _ = cifar100
    logits = np.log(proba[:300].astype(np.float64))
    logits[3, 5] = -np.inf  # an exact zero probability
    return proba[:300], logits


def test_blocks_give_the_same_answer(cifar100, monkeypatch):
    proba, logits = _outputs(cifar100)
    y = cifar100[1][:300]
    prior = np.full(proba.shape[1], 1 / proba.shape[1])
    bias = np.linspace(-1, 1, proba.shape[1])

    def everything():
        return [
            softmax_temperature(logits, 1.7, bias),
            softmax_temperature(logits.astype(np.float32), 0.3),
            topk_entropy(proba, 3, kind="max_over_k"),
            alternating_normalization(proba, prior, k=3, tau=0.5, alpha=1, n_iter=3),
            np.array(fit_temperature(logits, y, method="ec")),
            np.array(fit_temperature(logits, y, method="nll")),
        ]

    whole = everything()
    monkeypatch.setattr(_kernels, "BLOCK_ELEMENTS", 7)
    for blocked, one_block in zip(everything(), whole, strict=True):
        assert blocked.dtype == one_block.dtype
        np.testing.assert_array_equal(blocked, one_block)


def test_bcts_blocks_reach_the_same_optimum(cifar100, monkeypatch):
    """BCTS sums its loss over the blocks: the same optimum, other rounding."""
    proba, y = cifar100
    logits = np.log(proba[:3000].astype(np.float64))  # (every class in y)
    logits[3, 5] = -np.inf
    temperature, bias = fit_bias_corrected_temperature(logits, y[:3000])
    monkeypatch.setattr(_kernels, "BLOCK_ELEMENTS", 100 * 128)  # 24 blocks
    blocked_temperature, blocked_bias = fit_bias_corrected_temperature(logits, y[:3000])
    assert blocked_temperature == pytest.approx(temperature, rel=1e-6)
    np.testing.assert_allclose(blocked_bias, bias, atol=1e-5)


def test_softmax_temperature_blocks_against_scipy(cifar100, tiny_blocks):
    _, logits = _outputs(cifar100)
    expected = softmax(logits / 2.5, axis=1)
    np.testing.assert_allclose(softmax_temperature(logits, 2.5), expected, atol=1e-15)


def test_max_over_k_blocks_against_a_loop(cifar100, tiny_blocks):
    proba, _ = _outputs(cifar100)
    proba = proba[:40].astype(np.float64)
    expected = []
    for row in proba:
        ordered = np.sort(row)[::-1]
        best = 0.0
        for j in range(2, len(row) + 1):
            top = ordered[:j] / ordered[:j].sum()
            top = top[top > 0]
            best = max(best, -(top * np.log(top)).sum() / np.log(j))
        expected.append(min(best, 1.0))
    np.testing.assert_allclose(
        topk_entropy(proba, 3, kind="max_over_k"), expected, rtol=1e-12
    )


def _peak_bytes(function, *args, **kwargs):
    tracemalloc.start()
    try:
        function(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "function, bound",
    [
        ("softmax_temperature", 2),
        ("max_over_k", 2),
        ("ec", 3),
        ("nll", 3),
        ("bcts", 3),
        ("estimate_test_prior", 0.25),
        ("adjust_to_prior", 1.1),
    ],
)
def test_memory_stays_near_the_input(function, bound, monkeypatch):
    # 4,096 x 1,024 float32 (16 MB) in blocks of 2**16 entries (0.5 MB in
    # float64). Over the whole batch at once the peaks were 14x (softmax),
    # 10x (max_over_k), 8x (EC), 12x (NLL) and 16x (BCTS) the input; blocks
    # leave the output (or the fit's one float64 copy) and a few blocks.
    monkeypatch.setattr(_kernels, "BLOCK_ELEMENTS", 2**16)
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((4096, 1024)).astype(np.float32)
    prior = np.full(logits.shape[1], 1 / logits.shape[1])
    if function == "softmax_temperature":
        peak = _peak_bytes(softmax_temperature, logits, 1.5)
    elif function == "estimate_test_prior":
        # (passes over blocks of 2**17 entries, no float64 copy: 0.2x)
        proba = softmax_temperature(logits, 0.2)  # (rows far from uniform)
        with warnings.catch_warnings():  # (max_iter=5 does not converge)
            warnings.simplefilter("ignore")
            peak = _peak_bytes(estimate_test_prior, proba, prior, max_iter=5)
    elif function == "adjust_to_prior":
        # (the float32 output, 1x, and one float64 block; was 3x)
        proba = softmax_temperature(logits, 1.0)
        shifted = np.r_[0.5, np.full(logits.shape[1] - 1, 0.5 / 1023)]
        peak = _peak_bytes(adjust_to_prior, proba, prior, shifted)
    elif function == "max_over_k":
        proba = softmax_temperature(logits, 1.0)
        peak = _peak_bytes(topk_entropy, proba, 3, kind="max_over_k")
    else:
        if function == "bcts":  # (fewer classes: L-BFGS takes long)
            logits = np.ascontiguousarray(logits[:, :256])
        y = np.argmax(logits + rng.standard_normal(logits.shape), axis=1)
        if function == "bcts":
            y[:256] = np.arange(256)  # (BCTS needs every class)
            peak = _peak_bytes(fit_bias_corrected_temperature, logits, y)
        else:
            peak = _peak_bytes(fit_temperature, logits, y, method=function)
    assert peak < bound * logits.nbytes, peak / logits.nbytes
