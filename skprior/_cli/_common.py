"""What the command's modules share: the input error, the memory factors.

A leaf module (it imports nothing of skprior), so that the parser and the
commands import it without importing each other.
"""

import contextlib
import os
import re
from pathlib import Path


class InputError(Exception):
    """A problem with the user's input: reported in one line, exit code 2."""


# The peak memory of each command in memory, as a multiple of the size of its
# OUTPUTS file: the input, at most one other array of its size and dtype,
# a few bytes per row and a row block's temporaries (peak resident memory
# above the imports' on 750,000 x 100 float32 with --labels and --diagram,
# rounded up: benchmarks/bench_cli_memory.py: can 1.18, adapt 1.42,
# calibrate 1.27 (ec, nll), 1.30-1.53 before with the class-wise fits).
MEMORY_FACTOR = {"can": 1.25, "adapt": 1.5, "calibrate": 1.6}


def check_output_folder(path, option):
    """Refuse an output whose folder is missing or cannot be written.

    Before any work: a run of minutes should not end in "permission denied"
    (a read-only file system, a folder of another user).
    """
    folder = Path(path).resolve().parent
    if not folder.is_dir():
        raise InputError(
            f"{option} {path}: the folder {folder} does not exist; create it first."
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(
            f"{option} {path}: the folder {folder} cannot be written (read-only, "
            f"or not yours); choose another folder."
        )


# The library's messages name its parameters; the user typed options.
_PARAMETER = re.compile(r"The '(\w+)' parameter of \w+ ")
_OPTIONS = {"prior": "--prior", "train_prior": "--prior", "test_prior": "--test-prior"}


def _as_option(match):
    name = match.group(1)
    return _OPTIONS.get(name, "--" + name.replace("_", "-")) + " "


# The library's advice in the words of the command line (errors and
# warnings): its arguments and functions become the commands' options.
_ADVICE = (
    ("or k='auto'", "or --k auto"),
    (
        "Lower tau, or use a reference set (the `reference` argument, or "
        "reference='fit' in CANClassifier)",
        "Lower --tau, or pass --reference FILE (held-out outputs)",
    ),
    ("or use fit_temperature (one parameter)", "or use --method ec, nll or bcts"),
)


def in_command_words(message):
    """``message`` of the library with its parameters and advice as options."""
    message = _PARAMETER.sub(_as_option, message)
    for library, command in _ADVICE:
        message = message.replace(library, command)
    return message


@contextlib.contextmanager
def library_errors():
    """Report the library's refusals of bad arguments as input errors.

    Also its refusals of bad rows that lazy (out-of-core) checks raise only
    when the rows are computed: in the last pass, writing --output.
    """
    try:
        yield
    except (ValueError, TypeError) as exc:
        raise InputError(in_command_words(str(exc))) from exc
