"""The command line on big files: out of core, the switch to it, progress bars.

``calibrate --out-of-core`` fits and applies the calibration block by block
and writes what the in-memory run writes; the automatic switch to out of core
weighs the file's size by the command's in-memory peak; long steps draw a
tqdm bar on a terminal's stderr, never with --quiet or off a terminal.
"""

import io
import sys

import numpy as np
import pytest

from skprior._cli import _blocks, main

pytest.importorskip("dask")

N = 600


@pytest.fixture
def folder(tmp_path, cifar10, monkeypatch):
    """600 rows of CIFAR-10 outputs, read out of core in blocks of 100 rows."""
    from skprior._utils import _npy_blocks

    proba, labels = cifar10
    proba, labels = proba[:N].astype(np.float64), labels[:N]
    proba /= proba.sum(axis=1, keepdims=True)
    np.save(tmp_path / "p.npy", proba[: N // 2])
    np.save(tmp_path / "fit.npy", proba[N // 2 :])
    np.save(tmp_path / "z.npy", np.log(proba[: N // 2]) + 1.0)
    np.save(tmp_path / "y.npy", labels[: N // 2])
    np.save(tmp_path / "fit_y.npy", labels[N // 2 :])
    np.savetxt(tmp_path / "fit_y.csv", labels[N // 2 :], fmt="%d")
    monkeypatch.setattr(_npy_blocks, "CHUNK_BYTES", 100 * 10 * 8)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("method", "extra"),
    [
        ("ec", ["--fit-outputs", "fit.npy", "--fit-labels", "fit_y.npy"]),
        ("nll", ["--fit-labels", "y.npy"]),
        ("bcts", ["--fit-outputs", "fit.npy", "--fit-labels", "fit_y.csv"]),
        ("nll", ["--fit-labels", "y.npy", "--logits", "z.npy"]),
    ],
)
def test_calibrate_out_of_core_writes_the_in_memory_result(
    folder, capsys, method, extra
):
    """Block by block (3 blocks), the same fit, output and report (the
    class-wise fits run too, one pass per L-BFGS step: too slow to test here,
    and their results differ within the optimiser's tolerance)."""
    outputs = extra.pop() if extra[-1] == "z.npy" else "p.npy"
    argv = ["calibrate", outputs, "--method", method, *extra, "--labels", "y.npy"]
    code, memory_out, err = run(capsys, *argv, "-o", "memory.npy")
    assert code == 0, err
    code, blocks_out, err = run(capsys, *argv, "--out-of-core", "-o", "blocks.npy")
    assert code == 0, err
    assert "3 blocks (out of core)" in err and "wrote blocks.npy block by block" in err
    np.testing.assert_allclose(
        np.load("blocks.npy"), np.load("memory.npy"), rtol=1e-6, atol=1e-12
    )
    # (the fit's line, and accuracy and ECE: out of core prints no NLL)
    memory_lines, blocks_lines = memory_out.splitlines(), blocks_out.splitlines()
    fitted = memory_lines[0].split(" (")[0].split()
    assert blocks_lines[0].split(" (")[0].split()[:-1] == fitted[:-1]
    np.testing.assert_allclose(
        float(blocks_lines[0].split(" (")[0].split()[-1]),
        float(fitted[-1]),
        rtol=1e-5,
    )
    assert blocks_lines[1:4] == memory_lines[1:4]


def test_calibrate_out_of_core_refuses_what_it_cannot_do(folder, capsys):
    argv = ["calibrate", "p.npy", "--fit-labels", "y.npy", "--out-of-core"]
    code, _, err = run(capsys, *argv, "--labels", "y.npy", "--diagram", "d.png")
    assert code == 2 and "--diagram needs the outputs in memory" in err
    code, _, err = run(capsys, *argv, "-o", "out.csv")
    assert code == 2 and ".npy or .zarr" in err
    np.save("bad_y.npy", np.full(N // 2, 10))
    code, _, err = run(capsys, *argv[:3], "bad_y.npy", "--out-of-core")
    assert code == 2 and "--fit-labels bad_y.npy: label 0" in err
    assert not (folder / "out.csv").exists()


@pytest.mark.parametrize(("command", "factor"), sorted(_blocks.MEMORY_FACTOR.items()))
def test_switch_to_out_of_core_weighs_the_command_peak(
    folder, monkeypatch, command, factor
):
    """A file whose in-memory run would take more than half the available
    memory (size x the command's factor) runs out of core; one below stays."""
    from argparse import Namespace

    size = (folder / "p.npy").stat().st_size
    args = Namespace(outputs="p.npy", command=command, out_of_core=False)
    # (just enough memory, then just too little)
    monkeypatch.setattr(_blocks, "_available_bytes", lambda: 2 * size * factor + 2)
    assert not _blocks.wants_out_of_core(args)
    monkeypatch.setattr(_blocks, "_available_bytes", lambda: 2 * size * factor - 2)
    assert _blocks.wants_out_of_core(args)
    # (--diagram holds a few bytes a row more: the same factor)
    args.diagram = "d.png"
    monkeypatch.setattr(_blocks, "_available_bytes", lambda: 2 * size * factor + 2)
    assert not _blocks.wants_out_of_core(args)
    monkeypatch.setattr(_blocks, "_available_bytes", lambda: 2 * size * factor - 2)
    assert _blocks.wants_out_of_core(args)
    assert _blocks._available_bytes.__module__  # (a real function was patched)


def test_errors_of_a_run_out_of_core_unasked_say_why(folder, capsys, monkeypatch):
    """A run that went out of core by itself (too little memory) and refuses
    an option (a .csv --output, --diagram) says so: the user did not ask for
    --out-of-core, and learnt only that out-of-core runs cannot. Asked for,
    the error stays as it was."""
    monkeypatch.setattr(_blocks, "_available_bytes", lambda: 1000)
    base = ["can", "p.npy", "--prior", "1,1,1,1,1,1,1,1,1,1"]
    for extra in (["-o", "out.csv"], ["--labels", "y.npy", "--diagram", "d.png"]):
        if "--diagram" in extra:
            pytest.importorskip("matplotlib")
        code, _, err = run(capsys, *base, *extra)
        assert code == 2
        assert "This run went out of core by itself: can on p.npy (24 kB) would" in err
        assert "more than half of the 1 kB available now" in err
        code, _, err = run(capsys, *base, *extra, "--out-of-core")
        assert code == 2 and "went out of core by itself" not in err


def test_float16_files_give_the_in_memory_dtype_out_of_core(folder, capsys):
    """float16 files: the same dtype of result out of core as in memory --
    float32 for logits (can, adapt), float64 for probabilities (calibrate,
    renormalised in float64). Out of core gave float64 and float32."""
    np.save("p16.npy", np.load("p.npy").astype(np.float16))
    np.save("z16.npy", np.load("z.npy").astype(np.float16))
    prior = ["--prior", "1,1,1,1,1,1,1,1,1,1"]
    commands = {
        "cal": ["calibrate", "p16.npy", "--fit-labels", "y.npy"],
        "can": ["can", "z16.npy", "--logits", *prior],
        "adapt": ["adapt", "z16.npy", "--logits", *prior, "--shift-level", "1"],
    }
    for name, argv in commands.items():
        dtypes = []
        for extra in ([], ["--out-of-core"]):
            out = f"{name}{len(extra)}.npy"
            code, _, err = run(capsys, *argv, "-q", "-o", out, *extra)
            assert code == 0, err
            dtypes.append(np.load(out).dtype)
        assert dtypes[0] == dtypes[1], (name, dtypes)
        assert dtypes[0] == (np.float64 if name == "cal" else np.float32)


def test_available_memory_is_read():
    assert _blocks._available_bytes() > 0


class Terminal(io.StringIO):
    """stderr as a terminal: tqdm draws its bars there."""

    def isatty(self):
        return True


def test_reading_and_writing_text_show_their_seconds(folder, monkeypatch):
    """In memory, reading OUTPUTS and writing --output (a .csv of millions of
    rows takes tens of seconds: 17 s for 3M x 20) each show a line counting
    their seconds on a terminal; before, nothing between the last message
    and "wrote"."""
    np.savetxt("p.csv", np.load("p.npy"), delimiter=",")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    argv = ["can", "p.csv", "--prior", ",".join(["1"] * 10), "-o", "o.csv"]
    assert main(argv) == 0
    drawn = terminal.getvalue()
    assert "skprior can: reading p.csv" in drawn
    assert "skprior can: writing o.csv" in drawn


@pytest.mark.parametrize("quiet", [False, True])
def test_progress_bars_on_a_terminal_only(folder, monkeypatch, capsys, quiet):
    """Out of core, each pass over the blocks draws a numbered bar; the
    --labels report in memory draws one per scoring; --quiet draws none, nor
    does a stderr that is not a terminal."""
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    quiet = ["-q"] if quiet else []
    argv = ["can", "p.npy", "--prior", ",".join(["1"] * 10), "--labels", "y.npy"]
    assert main([*argv, "--out-of-core", "-o", "o.npy", *quiet]) == 0
    assert main([*argv, *quiet]) == 0
    drawn = terminal.getvalue()
    if quiet:
        assert drawn == ""
    else:
        assert "pass 1 over the blocks" in drawn and "pass 2 over the blocks" in drawn
        assert "scores before (--labels)" in drawn and "%|" in drawn
    monkeypatch.setattr(sys, "stderr", sys.__stderr__)
    assert main([*argv, "--out-of-core", "-o", "o.npy"]) == 0
    assert "%|" not in capsys.readouterr().err  # (capsys: not a terminal)


def test_dirichlet_auto_draws_a_bar_of_its_fold_fits(folder, monkeypatch):
    """Where the library reports its fold fits (``progress(done, most)``), the
    cross-validation of reg_lambda='auto' draws a bar of them."""
    from skprior.calibration import _classifier

    real = _classifier.fit_calibration

    def reporting(method, logits, y, *, reg_lambda, reg_mu, progress=None):
        for done in range(1, 4):
            progress(done, 10)
        return real(method, logits, y, reg_lambda=1.0, reg_mu=reg_mu)

    monkeypatch.setattr(_classifier, "fit_calibration", reporting)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    argv = ["calibrate", "p.npy", "--fit-labels", "y.npy", "--method", "dirichlet"]
    assert main(argv) == 0
    assert "choosing reg_lambda (fold fits):  30%|" in terminal.getvalue()
    assert "3/10" in terminal.getvalue()


def test_a_long_fit_in_memory_counts_its_seconds(folder, monkeypatch):
    """A fit with no progress of its own (here vs, slowed to 2.5 s) draws a
    line of its elapsed time, redrawn each second, on a terminal only."""
    import time

    from skprior.calibration import _classifier

    real = _classifier.fit_calibration

    def slow(*args, **kwargs):
        time.sleep(2.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(_classifier, "fit_calibration", slow)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    argv = ["calibrate", "p.npy", "--fit-labels", "y.npy", "--method", "vs"]
    assert main(argv) == 0
    drawn = terminal.getvalue()
    assert "skprior calibrate: fitting vs: 00:01" in drawn
    assert "skprior calibrate: fitting vs: 00:02" in drawn
    assert main([*argv, "-q"]) == 0
    assert terminal.getvalue() == drawn  # (--quiet: nothing more)
