"""Every benchmark script answers ``--help`` with its purpose, without running.

A user reading ``benchmarks/`` asks a script what it does before spending
minutes on it; a script without options used to start its whole run instead.
"""

import runpy
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("bench_*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_help_prints_the_purpose_and_exits(script, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(script), "--help"])
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(SystemExit) as exited:
        try:
            runpy.run_path(str(script), run_name="__main__")
        except ImportError as error:  # (a peer's API of a newer version)
            pytest.skip(f"{script.name} cannot import here: {error}")
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:")
    # The description is the docstring's first line.
    first_line = runpy.run_path(str(script))["__doc__"].split("\n")[0]
    assert first_line.split()[0] in out
