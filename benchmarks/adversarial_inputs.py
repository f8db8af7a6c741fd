"""Run the bad-input table of the test suite and count its outcomes.

Every case calls one public function or estimator method with one bad
argument (tests/test_bad_input.py), or runs one ``skprior`` command on a bad
file or with a fault (:func:`cli_cases`: out of core, a full disk, an output
over an input). An outcome is *clear* (ValueError or
TypeError naming the argument), *unclear* (the right type, a message that
does not name it), *traceback* (any other exception) or *silent* (no error).

Usage::

    PYTHONPATH=$PWD python benchmarks/adversarial_inputs.py [-v]

``-v`` prints every case that is not clear, with its message.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_bad_input import CASES, OUTCOMES, count_outcomes  # noqa: E402


def main(argv=None):
    import tempfile

    argv = sys.argv[1:] if argv is None else argv
    with tempfile.TemporaryDirectory() as folder:
        cases = CASES + cli_cases(Path(folder))
        outcomes = count_outcomes(cases)
    counts = ", ".join(f"{name} {len(outcomes[name])}" for name in OUTCOMES)
    print(f"tried {len(cases)}: {counts}")
    if "-v" in argv:
        for name in OUTCOMES[1:]:
            for case, detail in outcomes[name]:
                message = str(detail).replace("\n", " ")[:300]
                print(f"{name:9} {case.id}: {type(detail).__name__}: {message}")
    return 0 if len(outcomes["clear"]) == len(cases) else 1


# -- the command line: out of core, faults, outputs over inputs ----------------------
# (each case runs ``skprior ...`` in-process on small files: exit 2 with an
# error line naming the option is clear; exit 1 (a traceback) or exit 0 is
# not; a case that changes a file the command reads, or leaves a file named
# --output after a failure, is a data loss and counted as silent)


def _cli_files(folder):
    """The files of the CLI cases, under ``folder``."""
    import numpy as np

    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(4), size=40)
    labels = np.arange(40) % 4
    arrays = {
        "p.npy": proba,
        "z.npy": np.log(proba) + 1.0,
        "y.npy": labels,
        "val.npy": proba[::-1].copy(),
        "prior.npy": np.full(4, 0.25),
        "y_range.npy": labels + 1,
        "y_negative.npy": labels - 1,
        "y_fraction.npy": labels + 0.5,
        "y_2d.npy": np.c_[labels, labels],
        "y_strings.npy": np.array(["cat"] * 40),
        "y_short.npy": labels[:-1],
        "y_objects.npy": None,
        "p_3d.npy": proba.reshape(40, 2, 2),
    }
    for name, array in arrays.items():
        if array is not None:
            np.save(folder / name, array)
    np.save(folder / "y_objects.npy", np.array([{}] * 40), allow_pickle=True)
    for name in ("p.npy", "y.npy"):
        raw = (folder / name).read_bytes()
        (folder / f"truncated_{name}").write_bytes(raw[:-64])
    (folder / "p.csv").write_text("0.5,0.5\n")
    (folder / "folder.npy").mkdir()
    (folder / "mixed.zarr").mkdir()
    (folder / "mixed.zarr" / "notes.txt").write_text("the user's")
    (folder / "full.npy").symlink_to("/dev/full")


PRIOR = ["--prior", "1,1,1,1"]
FIT = ["--fit-labels", "y.npy"]
# The commands on stored outputs, with the options each needs.
CLI_COMMANDS = {
    "can": ["can", "p.npy", *PRIOR],
    "adapt": ["adapt", "p.npy", *PRIOR, "--shift-level", "1"],
    "calibrate": ["calibrate", "p.npy", *FIT],
}


def _cli_call(folder, argv, keep=(), absent=(), stdout=None):
    """Run ``skprior argv`` in ``folder``; raise its error as ValueError.

    ``keep`` are files that must be unchanged after the run, ``absent``
    files that must not exist after a failure (data loss otherwise).
    """
    import contextlib
    import io
    import os

    from skprior._cli import main

    before = {name: (folder / name).read_bytes() for name in keep}
    err = io.StringIO()
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with (
            contextlib.redirect_stderr(err),
            contextlib.redirect_stdout(stdout or io.StringIO()),
        ):
            code = main(argv)
    finally:
        os.chdir(cwd)
    changed = [name for name in keep if (folder / name).read_bytes() != before[name]]
    for name in changed:  # (restored for the next cases)
        (folder / name).write_bytes(before[name])
    left = [name for name in absent if code and os.path.lexists(folder / name)]
    for name in left:
        if (folder / name).is_file():
            (folder / name).unlink()
    if changed or left:
        return f"data loss: {changed or left} (exit {code})"
    if code == 2:
        raise ValueError(err.getvalue().strip().splitlines()[-1])
    if code == 1:
        raise RuntimeError(err.getvalue()[-500:])
    return f"exit {code}"


def _failing_block_write(call):
    """``call`` with every block write failing (a full disk, out of core)."""

    def run():
        from skprior._utils import _npy_blocks

        def full(*args, **kwargs):
            raise OSError(28, "No space left on device")

        original = _npy_blocks.NpyRowWriter.__setitem__
        _npy_blocks.NpyRowWriter.__setitem__ = full
        try:
            return call()
        finally:
            _npy_blocks.NpyRowWriter.__setitem__ = original

    return run


class _FullStdout:
    """A stdout that fails as a full device does."""

    def write(self, text):
        raise OSError(28, "No space left on device")

    def flush(self):
        pass


def cli_cases(folder):
    """The CLI cases (out of core, faults, outputs over inputs), in ``folder``."""
    from test_bad_input import Case

    _cli_files(folder)
    cases = []

    def add(case_id, argv, names, keep=(), absent=(), wrap=None, stdout=None):
        def call(argv=argv):
            return _cli_call(folder, argv, keep, absent, stdout)

        cases.append(Case(f"cli-{case_id}", wrap(call) if wrap else call, names))

    ooc = ["--out-of-core"]
    for command, base in CLI_COMMANDS.items():
        for mode, extra in (("in memory", []), ("out of core", ooc)):
            run = [*base, *extra]
            where = f"{command} {mode}"
            # -- an output that is an input: refused before reading anything
            victims = {"OUTPUTS": "p.npy", "--labels": "y.npy"}
            if command == "calibrate":
                victims["--fit-labels"] = "y.npy"
                victims["--fit-outputs"] = "val.npy"
            else:
                victims["--prior"] = "prior.npy"
            for option, victim in victims.items():
                argv = list(run)
                if option == "--prior":
                    argv[argv.index("--prior") + 1] = victim
                elif option not in ("OUTPUTS", "--fit-labels"):
                    argv += [option, victim]
                for spelling in (victim, f"./{victim}", str(folder / victim)):
                    add(
                        f"{where}-output is {option} ({spelling})",
                        [*argv, "-o", spelling],
                        r"--output",
                        keep=(victim,),
                    )
            add(
                f"{where}-diagram is OUTPUTS",
                [*run, "--labels", "y.npy", "--diagram", "p.npy"],
                "--diagram",
                keep=("p.npy",),
            )
            # -- faults: the output cannot be written
            add(
                f"{where}-output on a full device", [*run, "-o", "full.npy"], "--output"
            )
            add(f"{where}-output is a folder", [*run, "-o", "folder.npy"], "--output")
            # -- a probabilities file under --logits
            add(f"{where}-probabilities under --logits", [*run, "--logits"], "--logits")
            # -- bad labels, a truncated or wrong file
            for label_option in ("--labels", "--fit-labels")[
                : 1 + (command == "calibrate")
            ]:
                for name in (
                    "range",
                    "negative",
                    "fraction",
                    "2d",
                    "strings",
                    "short",
                    "objects",
                ):
                    argv = list(run)
                    if label_option == "--fit-labels":
                        argv[argv.index("--fit-labels") + 1] = f"y_{name}.npy"
                    else:
                        argv += ["--labels", f"y_{name}.npy"]
                    add(
                        f"{where}-{label_option} {name}",
                        [*argv, "-o", "o.npy"],
                        label_option,
                        absent=("o.npy",),
                    )
                argv = [*run, label_option, "truncated_y.npy"]
                if label_option == "--fit-labels":
                    argv = list(run)
                    argv[argv.index("--fit-labels") + 1] = "truncated_y.npy"
                add(f"{where}-{label_option} truncated", argv, label_option)
            for name in ("truncated_p.npy", "p_3d.npy"):
                argv = list(run)
                argv[1] = name
                add(
                    f"{where}-OUTPUTS {name}",
                    [*argv, "-o", "o.npy"],
                    "OUTPUTS",
                    absent=("o.npy",),
                )
        # -- out of core only: what it cannot do
        run = [*base, *ooc]
        add(
            f"{command} out of core-output .csv",
            [*run, "-o", "o.csv"],
            "--output",
            absent=("o.csv",),
        )
        add(
            f"{command} out of core-output a folder of other files",
            [*run, "-o", "mixed.zarr"],
            "--output",
        )
        add(
            f"{command} out of core-OUTPUTS .csv",
            [*base[:1], "p.csv", *base[2:], *ooc],
            "OUTPUTS",
        )
        add(
            f"{command} out of core-a block write fails",
            [*run, "-o", "o.npy"],
            "--output",
            absent=("o.npy",),
            wrap=_failing_block_write,
        )
    for command in ("adapt",):
        add(
            f"{command}-stdout on a full device",
            [*CLI_COMMANDS[command], "-q"],
            "results",
            stdout=_FullStdout(),
        )
    for seed in ("-1", "1.5", str(2**32)):
        add(f"demo-seed {seed}", ["demo", "--seed", seed], "--seed")
    return cases


if __name__ == "__main__":
    sys.exit(main())
