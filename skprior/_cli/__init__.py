"""The ``skprior`` command line: parser, commands, file formats, out-of-core runs.

``main`` and ``build_parser`` are re-exported from :mod:`skprior._cli._parser`,
which imports nothing heavy (``skprior --help`` answers at once); the commands
in :mod:`skprior._cli._commands` are imported only when one runs.
"""

from skprior._cli._parser import build_parser, main

__all__ = ["build_parser", "main"]
