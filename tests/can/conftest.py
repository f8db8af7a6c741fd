"""Each CAN test starts and ends with no kept output buffers (``_output_memory``)."""

import pytest

from skprior.can import _output_memory


@pytest.fixture(autouse=True)
def no_kept_outputs():
    _output_memory.release()
    yield
    _output_memory.release()
