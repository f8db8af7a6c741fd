"""Every CAN test runs twice: on the NumPy path and on the compiled kernel.

The kernel (numba, optional: ``skprior/can/_compiled.py``) serves NumPy batches
of at least ``COMPILED_MIN_ELEMENTS`` entries; the tests force it on for every
size by setting that to 0, and off with ``SKPRIOR_NO_NUMBA=1``.
"""

import importlib.util

import pytest

from skprior.can import _can

HAVE_NUMBA = importlib.util.find_spec("numba") is not None


@pytest.fixture(
    autouse=True,
    params=[
        "numpy",
        pytest.param(
            "compiled",
            marks=pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed"),
        ),
    ],
)
def can_path(request, monkeypatch):
    """``"numpy"`` or ``"compiled"``: the path that CAN takes in this test."""
    if request.param == "numpy":
        monkeypatch.setenv("SKPRIOR_NO_NUMBA", "1")
    else:
        monkeypatch.delenv("SKPRIOR_NO_NUMBA", raising=False)
        monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", 0)
    return request.param
