"""The LLVM-level pieces of CAN's kernel (``skprior/can/_kernels.py``).

:func:`level_sweep` against a naive reference written from its definition
(sort the entries below the level), on rows of every length around the
vector widths (16 float32 or 8 float64 entries), with ties, zeros and
levels that are in the row or not.
"""

import numpy as np
import pytest

try:  # (ImportError too: numba installed but broken, e.g. for this NumPy)
    import numba  # noqa: F401
except ImportError:
    pytest.skip("numba is not installed", allow_module_level=True)
from skprior.can._kernels import level_sweep  # noqa: E402


def naive_level_sweep(row, level):
    below = sorted((int(value) for value in row if value < level), reverse=True)
    below += [0, 0]
    return int(np.sum(row == level)), below[0], below[1]


@pytest.mark.parametrize(
    "dtype, unsigned", [(np.float32, np.uint32), (np.float64, np.uint64)]
)
@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 100, 1000])
def test_level_sweep_matches_naive(dtype, unsigned, n):
    rng = np.random.default_rng(n)
    proba = rng.dirichlet(np.full(n, 0.3), 60).astype(dtype)
    proba[::3, : n // 2] = 0.0  # (zeros)
    proba[1::4, :] = proba[1::4, :1]  # (a row of one value)
    proba[2::5, -3:] = proba[2::5, :1]  # (ties with the first entry)
    proba[3::7, 2 % n] = proba[3::7, 1 % n]  # (a value held twice, in two lanes)
    bits = proba.view(unsigned)
    ordered = np.sort(bits, axis=1)
    for row, levels in zip(bits, ordered, strict=True):
        absent = unsigned(levels[-1] + 1)
        for level in {levels[-1], levels[-2 % n], levels[n // 2], levels[0], absent}:
            assert level_sweep(row, level) == naive_level_sweep(row, level)


def test_a_value_held_twice_fills_both_places():
    """The two largest below the level equal (a tie in two lanes): the
    second place is that value again, not the next one."""
    row = np.full(100, 0.1 / 97, dtype=np.float32)
    row[:3] = 0.4, 0.25, 0.25
    bits = row.view(np.uint32)
    assert level_sweep(bits, bits[0]) == (1, bits[1], bits[2])


def test_level_sweep_reads_only_the_row():
    """A row cut from a longer buffer: the entries beside it are not read
    (the level before the row and a value between the row's two largest
    after it would change the result)."""
    buffer = np.empty(64, dtype=np.float32)
    buffer[20:40] = np.linspace(0.01, 0.2, 20, dtype=np.float32)
    buffer[:20], buffer[40:] = buffer[39], 0.195
    bits = buffer.view(np.uint32)[20:40]
    count, first, second = level_sweep(bits, bits[-1])
    assert count == 1 and (first, second) == (bits[-2], bits[-3])


@pytest.mark.parametrize("unsigned", [np.uint8, np.uint16])
def test_level_sweep_refuses_narrow_integers(unsigned):
    """Only the bits of float32 or float64: the lanes count in the entries'
    width, which 8 or 16 bits would overflow."""
    from numba.core.errors import TypingError

    with pytest.raises(TypingError):
        level_sweep(np.zeros(300, dtype=unsigned), unsigned(0))
