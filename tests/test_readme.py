"""The README's Python examples run as written, from the repository root."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(block, monkeypatch, capsys):
    """Each python block of the README executes and prints its result."""
    monkeypatch.chdir(ROOT)
    exec(compile(block, "README.md", "exec"), {})
    assert capsys.readouterr().out.strip()


def test_readme_has_examples():
    """The README keeps its examples (the test above is not vacuous)."""
    assert len(BLOCKS) >= 2
