#!/usr/bin/env bash
# Build the HTML documentation, warnings as errors, every gallery example run.
# Needs the docs extra: pip install -e ".[docs]". Output: docs/_build/html.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m sphinx -W --keep-going -b html docs docs/_build/html
