"""Count the package's code lines: not docstrings, comments or blank lines.

A line counts when it holds a token of code; lines inside a statement that is
only a string (a docstring, at any level) do not count.

    python benchmarks/code_lines.py [PACKAGE_DIR] [--per-module]
"""

import argparse
import ast
import io
import tokenize
from pathlib import Path

SKIP = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}


def code_lines(source):
    """Number of lines of ``source`` that hold code."""
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            docstrings.update(range(node.lineno, node.end_lineno + 1))
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in SKIP:
            continue
        lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", nargs="?", default="skprior")
    parser.add_argument("--per-module", action="store_true")
    args = parser.parse_args()
    counts = {
        path: code_lines(path.read_text())
        for path in sorted(Path(args.package).rglob("*.py"))
    }
    if args.per_module:
        for path, n in sorted(counts.items(), key=lambda item: -item[1]):
            print(f"{n:6d}  {path}")
    print(f"{sum(counts.values())} code lines in {len(counts)} modules")


if __name__ == "__main__":
    main()
