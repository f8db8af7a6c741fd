"""The documentation covers the public API and its examples follow the rules.

The docs build itself (docs/build.sh, run by CI) checks that pages render and
examples run; these fast checks catch a public name added without an API
reference entry, or an example file the gallery would not pick up.
"""

import re
from pathlib import Path

import pytest

import skprior
import skprior.datasets
import skprior.metrics

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _api_entries():
    text = (DOCS / "api.rst").read_text()
    entries = set()
    module = None
    for line in text.splitlines():
        match = re.match(r"\.\. currentmodule:: (\S+)", line)
        if match:
            module = match.group(1)
        elif re.match(r"   [A-Za-z_]\w*$", line):
            entries.add(f"{module}.{line.strip()}")
        match = re.match(r"\.\. data:: (\S+)", line)
        if match:
            entries.add(f"{module}.{match.group(1)}")
    return entries


@pytest.mark.parametrize(
    "module", [skprior, skprior.metrics, skprior.datasets], ids=lambda m: m.__name__
)
def test_every_public_name_is_in_the_api_reference(module):
    """Each name in a public module's __all__ has an entry in docs/api.rst."""
    entries = _api_entries()
    missing = [n for n in module.__all__ if f"{module.__name__}.{n}" not in entries]
    assert not missing, f"add {missing} to docs/api.rst"


def test_gallery_examples_are_plot_files_with_cells():
    """Gallery examples are docs/examples/plot_*.py with a title and # %% cells."""
    examples = sorted((DOCS / "examples").glob("*.py"))
    assert examples
    for path in examples:
        assert path.name.startswith("plot_"), path.name
        text = path.read_text()
        assert text.startswith('"""\n===='), f"{path.name}: no gallery title"
        assert "\n# %%\n" in text, f"{path.name}: no # %% cells"
