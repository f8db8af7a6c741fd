"""What the command's modules share: the input error and CAN's option list.

A leaf module (it imports nothing of skprior), so that the parser and the
commands import it without importing each other.
"""


class InputError(Exception):
    """A problem with the user's input: reported in one line, exit code 2."""


def can_options(args):
    """The keywords of ``alternating_normalization`` from ``skprior can``'s options.

    (One list for the in-memory and the out-of-core command, so that an option
    cannot be honoured by one and dropped by the other.)
    """
    return {
        "k": args.k,
        "tau": args.tau,
        "alpha": args.alpha,
        "n_iter": args.n_iter,
        "uncertainty": args.uncertainty,
    }
