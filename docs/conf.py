"""Sphinx configuration of the skprior documentation.

Build from the repository root with ``docs/build.sh`` (warnings are errors and
every gallery example is executed).
"""

import contextlib
import io
import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# Document the package of this checkout, installed or not; examples read
# ROOT/benchmarks/data, so they run from the repository root too.
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "Agg")

import skprior  # noqa: E402
from skprior._cli import main as skprior_main  # noqa: E402


def write_cli_help(names=("can", "adapt", "calibrate")):
    """Write ``skprior NAME --help`` to generated/cli_NAME_help.txt for each name.

    The command-line page includes these files, so that the option lists it
    shows are the ones the code has.
    """
    folder = DOCS / "generated"
    folder.mkdir(exist_ok=True)
    os.environ["COLUMNS"] = "88"
    for name in names:
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            code = skprior_main([name, "--help"])
        if code != 0:
            raise RuntimeError(f"skprior {name} --help exited with {code}")
        (folder / f"cli_{name}_help.txt").write_text(text.getvalue())


write_cli_help()

project = "skprior"
author = "skprior developers"
copyright = "skprior developers, BSD-3-Clause"
version = release = skprior.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "matplotlib.sphinxext.plot_directive",
    "myst_parser",
]

templates_path = ["_templates"]
# The measured tables (results_*.md) and the README snippets are included in
# other pages, not pages of their own.
exclude_patterns = ["_build", "results_*.md", "readme_snippets.md", "examples"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
nitpicky = False

# -- API reference -----------------------------------------------------------------
autosummary_generate = True
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- pictures made at build time ---------------------------------------------------
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 110)]
plot_rcparams = {"figure.autolayout": True}

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "doc_module": ("skprior",),
    "backreferences_dir": "generated/backreferences",
    "download_all_examples": False,
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
}

# -- HTML --------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skprior {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False


# -- methods inherited from scikit-learn -------------------------------------------
# Their docstrings link into scikit-learn's own documentation (:ref:, :term:),
# which this offline build cannot resolve: keep the text, drop the link.
_SKLEARN_ROLE = re.compile(r":(?:ref|term):`([^`<]*?)\s*(?:<([^>`]*)>)?`")


def _unlink_sklearn_roles(app, what, name, obj, options, lines):
    module = getattr(obj, "__module__", None) or ""
    if not module.startswith("sklearn"):
        return
    for i, line in enumerate(lines):
        lines[i] = _SKLEARN_ROLE.sub(lambda m: m.group(1) or m.group(2), line)


def setup(app):
    app.connect("autodoc-process-docstring", _unlink_sklearn_roles, priority=400)
