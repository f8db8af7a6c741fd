"""What the command line's files hold, and what it prints about them.

--logits says that every outputs file of a command holds logits: a file of
probabilities among them is refused, naming the file (a softmax of
probabilities is a wrong answer without an error). ``adapt`` that leaves a
batch alone says that the prior it prints is the training prior. Text files
written by ``numpy.savetxt`` with its default space separator are read.
"""

import numpy as np
import pytest

from skprior._cli import main

N, K = 300, 4


@pytest.fixture
def folder(tmp_path, cifar10):
    proba, labels = cifar10
    proba = proba[:N, :].astype(np.float64)
    proba /= proba.sum(axis=1, keepdims=True)
    np.save(tmp_path / "p.npy", proba)
    np.save(tmp_path / "z.npy", np.log(proba) + 2.0)
    np.save(tmp_path / "y.npy", labels[:N])
    return tmp_path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


PRIOR = ",".join(["1"] * 10)


@pytest.mark.parametrize(
    "argv",
    [
        ["calibrate", "z.npy", "--logits", "--fit-outputs", "p.npy", "--fit-labels"],
        ["calibrate", "p.npy", "--logits", "--fit-outputs", "z.npy", "--fit-labels"],
        ["can", "p.npy", "--logits", "--prior", PRIOR, "--labels"],
        ["adapt", "p.npy", "--logits", "--prior", PRIOR, "--labels"],
        [
            "can",
            "z.npy",
            "--logits",
            "--prior",
            PRIOR,
            "--reference",
            "p.npy",
            "--labels",
        ],
        ["can", "p.npy", "--logits", "--prior", PRIOR, "--out-of-core", "--labels"],
    ],
)
def test_probabilities_under_logits_are_refused_by_name(
    folder, capsys, monkeypatch, argv
):
    """Each probabilities file under --logits is named, with the fix; nothing
    is computed from it."""
    monkeypatch.chdir(folder)
    if "--out-of-core" in argv:
        pytest.importorskip("dask")
    code, stdout, err = run(capsys, *argv, "y.npy")
    assert code == 2, err
    assert "p.npy holds probabilities" in err and "Drop --logits" in err
    assert "numpy.log(proba)" in err and stdout == ""


def test_logits_and_probabilities_each_read_as_they_are(folder, capsys, monkeypatch):
    """Without the mix-up, the probabilities of a file and its logits give the
    same calibration (probabilities are read as logits log p)."""
    monkeypatch.chdir(folder)
    argv = ["--fit-labels", "y.npy", "--method", "nll", "-q"]
    code, from_logits, err = run(capsys, "calibrate", "z.npy", "--logits", *argv)
    assert code == 0, err
    code, from_proba, err = run(capsys, "calibrate", "p.npy", *argv)
    assert code == 0, err
    assert from_logits.replace("z.npy", "p.npy") == from_proba


def test_adapt_that_keeps_the_batch_says_what_it_prints(folder, capsys, monkeypatch):
    """The prior printed under a batch left alone is the training prior, and
    the heading says so (it said "test prior")."""
    monkeypatch.chdir(folder)
    train = np.bincount(np.load("y.npy"), minlength=10) + 1
    prior = ",".join(map(str, train))
    code, stdout, err = run(capsys, "adapt", "p.npy", "--prior", prior, "-q")
    assert code == 0, err
    heading, values = stdout.splitlines()
    assert heading.startswith("not adapted, training prior kept (")
    assert heading.endswith("posteriors unchanged):")
    assert "test prior" not in stdout
    np.testing.assert_allclose(
        np.array(values.split(","), dtype=float), train / train.sum(), atol=1e-6
    )
    code, stdout, _ = run(
        capsys, "adapt", "p.npy", "--prior", prior, "-q", "--shift-level", "1"
    )
    assert code == 0 and stdout.startswith("test prior (MLE by ")


@pytest.mark.parametrize(
    "write",
    [
        lambda path, a: np.savetxt(path, a),  # "%.18e", one space
        lambda path, a: np.savetxt(path, a, delimiter="\t", fmt="%.17g"),
        lambda path, a: path.write_text(
            "".join("  ".join(f"{v:.17g}" for v in row) + " \n" for row in a)
        ),
    ],
    ids=["savetxt", "tabs", "spaces"],
)
@pytest.mark.parametrize("suffix", [".txt", ".csv"])
def test_space_separated_text_is_read(folder, capsys, monkeypatch, write, suffix):
    """numpy.savetxt's default text (space-separated) gives the .npy result;
    labels written one per line by it too."""
    monkeypatch.chdir(folder)
    proba = np.load("p.npy")
    write(folder / f"p{suffix}", proba)
    np.savetxt(folder / f"y{suffix}", np.load("y.npy"), fmt="%d")
    argv = ["--prior", PRIOR, "-q", "--labels"]
    code, from_text, err = run(capsys, "can", f"p{suffix}", *argv, f"y{suffix}")
    assert code == 0, err
    assert "header" not in err
    code, from_npy, err = run(capsys, "can", "p.npy", *argv, "y.npy")
    assert from_text == from_npy


def test_space_separated_text_with_a_bad_cell_names_it(folder, capsys):
    (folder / "bad.txt").write_text("0.5 0.5\n0.2 x\n")
    code, _, err = run(capsys, "can", folder / "bad.txt", "--prior", "1,1")
    assert code == 2 and "line 2, value 2: 'x' is not a number" in err
