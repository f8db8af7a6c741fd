"""What the command's modules share: the input error, the memory factors.

A leaf module (it imports nothing of skprior), so that the parser and the
commands import it without importing each other.
"""


class InputError(Exception):
    """A problem with the user's input: reported in one line, exit code 2."""


# The peak memory of each command in memory, as a multiple of the size of its
# OUTPUTS file: the input, at most one other array of its size and dtype,
# vectors of one entry per row and a row block's temporaries (peak resident
# memory above the imports' on 750,000 x 100 float32 with --labels, rounded
# up: benchmarks/bench_cli_memory.py: adapt 1.42, calibrate 1.30-1.53; with
# --diagram calibrate holds the probabilities before too, 2.1).
MEMORY_FACTOR = {"can": 2.25, "adapt": 1.5, "calibrate": 1.6}
# With --diagram a command holds the probabilities before beside its input.
DIAGRAM_MEMORY_FACTOR = 2.25
