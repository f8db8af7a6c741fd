"""The ``skprior`` command line, end to end on stored CIFAR outputs.

Each test splits a real output file into a "validation" half and a "test" half
written to temporary files, runs a command through ``skprior._cli.main`` (one
test through a real ``python -m skprior`` process) and checks the files it
writes, the report it prints, its exit code and its error messages.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from skprior import alternating_normalization
from skprior._cli import main

ROOT = Path(__file__).resolve().parents[2]
N_HALF = 2000


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Two halves of WideResNet-16-4 CIFAR-100 outputs as .npy/.npz/.csv files."""
    folder = tmp_path_factory.mktemp("outputs")
    stored = np.load(
        ROOT / "benchmarks/data/model_outputs/netcal_wideresnet-16-4-cifar-100.npz"
    )
    proba, labels = stored["predictions"], stored["ground_truth"]
    val, test = slice(0, N_HALF), slice(N_HALF, 2 * N_HALF)
    paths = {
        "val": folder / "val.npy",
        "val_labels": folder / "val_labels.npy",
        "test": folder / "test.npy",
        "test_labels": folder / "test_labels.npy",
        "test_npz": folder / "test.npz",
        "test_csv": folder / "test.csv",
        "test_logits": folder / "test_logits.npy",
        "labels_csv": folder / "test_labels.csv",
    }
    np.save(paths["val"], proba[val])
    np.save(paths["val_labels"], labels[val])
    np.save(paths["test"], proba[test])
    np.save(paths["test_labels"], labels[test])
    np.savez(paths["test_npz"], predictions=proba[test], ground_truth=labels[test])
    np.savetxt(paths["test_csv"], proba[test], delimiter=",", fmt="%.9g")
    np.save(paths["test_logits"], np.log(proba[test].astype(np.float64)) + 3.0)
    paths["labels_csv"].write_text("label\n" + "\n".join(map(str, labels[test])))
    arrays = {
        "val": proba[val],
        "val_labels": labels[val],
        "test": proba[test],
        "test_labels": labels[test],
    }
    return {key: str(path) for key, path in paths.items()}, arrays


@pytest.fixture(scope="module")
def files10(tmp_path_factory, cifar10):
    """Two halves of WideResNet-16-4 CIFAR-10 outputs as .npy files: the
    class-wise fits (K^2 + K parameters) are cheap on 10 classes, where on
    100 each fit took half a minute."""
    folder = tmp_path_factory.mktemp("outputs10")
    proba, labels = cifar10
    arrays = {
        "val": proba[:N_HALF],
        "val_labels": labels[:N_HALF],
        "test": proba[N_HALF : 2 * N_HALF],
    }
    paths = {key: folder / f"{key}.npy" for key in arrays}
    for key, path in paths.items():
        np.save(path, arrays[key])
    return {key: str(path) for key, path in paths.items()}, arrays


def run(capsys, *argv):
    """Run ``main`` and return (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def prior_of(labels, n_classes=100):
    return np.bincount(labels, minlength=n_classes) / len(labels)


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".csv"])
def test_can_writes_what_the_array_function_gives(files, tmp_path, capsys, suffix):
    """`skprior can` writes alternating_normalization's result, in every format."""
    paths, arrays = files
    out = tmp_path / f"adjusted{suffix}"
    code, stdout, stderr = run(
        capsys,
        "can",
        paths["test"],
        "--prior-from-labels",
        paths["val_labels"],
        "--tau",
        "0.7",
        "-o",
        out,
    )
    assert code == 0, stderr
    expected = alternating_normalization(
        arrays["test"], prior_of(arrays["val_labels"]), tau=0.7
    )
    if suffix == ".npy":
        written = np.load(out)
    elif suffix == ".npz":
        written = np.load(out)["proba"]
    else:
        written = np.loadtxt(out, delimiter=",")
    np.testing.assert_allclose(written, expected, rtol=1e-6, atol=1e-9)
    assert "wrote" in stderr and "rows" in stderr
    assert stdout == ""


def test_can_report_before_after(files, capsys):
    """With --labels, the report gives accuracy and NLL before, after, change."""
    paths, arrays = files
    code, stdout, _ = run(
        capsys,
        "can",
        paths["test"],
        "--prior",
        ",".join(map(str, np.bincount(arrays["val_labels"], minlength=100) + 1)),
        "--labels",
        paths["test_labels"],
        "--quiet",
    )
    assert code == 0
    lines = stdout.splitlines()
    assert lines[0].split() == ["before", "after", "change"]
    accuracy = dict(
        zip(["name", "before", "after", "change"], lines[1].split(), strict=True)
    )
    assert accuracy["name"] == "accuracy"
    expected = np.mean(arrays["test"].argmax(axis=1) == arrays["test_labels"])
    assert float(accuracy["before"]) == pytest.approx(expected, abs=1e-4)
    assert any(line.startswith("NLL") for line in lines)


def test_npz_csv_and_logits_inputs_agree(files, tmp_path, capsys):
    """An .npz (default key), a .csv and logits give the same CAN result."""
    paths, _ = files
    results = []
    for source, extra in [
        (paths["test_npz"], []),
        (paths["test_csv"], []),
        (paths["test_logits"], ["--logits"]),
    ]:
        out = tmp_path / f"{len(results)}.npy"
        args = ["can", source, *extra, "--prior", ",".join(["1"] * 100), "-o", out]
        code, _, stderr = run(capsys, *args)
        assert code == 0, stderr
        results.append(np.load(out))
    for other in results[1:]:
        np.testing.assert_allclose(other, results[0], rtol=1e-5, atol=1e-8)


def test_labels_csv_with_header(files, capsys):
    """A labels .csv whose first line is a header is read without it."""
    paths, _ = files
    code, stdout, stderr = run(
        capsys, "can", paths["test"], "--prior-from-labels", paths["labels_csv"],
        "--labels", paths["labels_csv"], "-q",
    )  # fmt: skip
    assert code == 0, stderr
    assert "accuracy" in stdout


@pytest.mark.parametrize("logits", [False, True])
@pytest.mark.parametrize("first", [0, 1])
def test_csv_with_an_index_column_is_refused(files, tmp_path, capsys, logits, first):
    """pandas' to_csv(header=False) still writes the row index as column 0: as
    logits it would pass for a 101st class (a wrong temperature, no error)."""
    paths, arrays = files
    values = np.log(arrays["test"]) if logits else arrays["test"]
    path = tmp_path / "with_index.csv"
    index = np.arange(first, first + len(values))
    np.savetxt(path, np.column_stack([index, values]), delimiter=",")
    extra = ["--logits"] if logits else []
    code, _, stderr = run(
        capsys, "calibrate", path, *extra, "--fit-labels", paths["test_labels"],
    )  # fmt: skip
    assert code == 2
    last = first + len(values) - 1
    assert f"first column is {first}, {first + 1}, ..., {last}, a row index" in stderr
    assert "index=False" in stderr


def test_logits_without_the_flag_get_one_fix(files, capsys):
    """The CLI's advice for logits is --logits, not the Python one (softmax)."""
    paths, _ = files
    code, _, stderr = run(capsys, "can", paths["test_logits"], "--prior", "1,1")
    assert code == 2
    assert "pass --logits" in stderr and "softmax" not in stderr


def test_reference_file(files, tmp_path, capsys):
    """--reference takes the confident rows from another file (inductive CAN)."""
    paths, arrays = files
    out = tmp_path / "adjusted.npy"
    code, _, _ = run(
        capsys, "can", paths["test"], "--prior", ",".join(["1"] * 100),
        "--reference", paths["val"], "-o", out, "-q",
    )  # fmt: skip
    assert code == 0
    expected = alternating_normalization(
        arrays["test"], np.full(100, 0.01), reference=arrays["val"]
    )
    np.testing.assert_allclose(np.load(out), expected, rtol=1e-6)


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        (lambda p, t: ["can", t / "missing.npy", "--prior", "1,1"], "no such file"),
        (
            lambda p, t: ["can", p["test"], "--prior", "1,1"],
            "--prior '1,1' has 2 entries but the outputs have 100 classes",
        ),
        (
            lambda p, t: [
                "can", p["test"], "--prior-from-labels", p["val_labels"],
                "--labels", p["val_labels"][:-4] + "_short.npy",
            ],
            "no such file",
        ),
        (
            lambda p, t: ["can", p["test_logits"], "--prior", ",".join(["1"] * 100)],
            "pass --logits",
        ),
        (
            lambda p, t: [
                "can", p["test"], "--prior", ",".join(["1"] * 100), "-o", t / "x.txtx",
            ],
            "unknown file type",
        ),
        (
            lambda p, t: [
                "can", p["test"], "--prior", ",".join(["1"] * 100), "--k", "1",
            ],
            "--k must be an int in the range [2, inf) or a str among {'auto'}",
        ),
        (
            lambda p, t: [
                "can", p["test_npz"], "--key", "nope", "--prior", "1,1",
            ],
            "has no array 'nope'",
        ),
        (
            lambda p, t: [
                "adapt", p["test"], "--prior-from-labels", p["val_labels"],
                "--method", "known",
            ],
            "pass it with --test-prior",
        ),
        (
            lambda p, t: [
                "adapt", p["test"], "--prior-from-labels", p["val_labels"],
                "--test-prior", "1,1", "--method", "bbse",
            ],
            "--test-prior is used only with --method known",
        ),
    ],
)  # fmt: skip
def test_input_errors_exit_2_without_traceback(
    files, tmp_path, capsys, make_args, message
):
    """Bad input: exit code 2, one clear message on stderr, no traceback."""
    paths, _ = files
    code, stdout, stderr = run(capsys, *make_args(paths, tmp_path))
    assert code == 2
    assert message in stderr
    assert "Traceback" not in stderr
    assert stdout == ""


def test_mismatched_label_file(files, tmp_path, capsys):
    """A label file with a different number of rows is refused (exit 2)."""
    paths, arrays = files
    short = tmp_path / "short.npy"
    np.save(short, arrays["test_labels"][:-1])
    code, _, stderr = run(
        capsys, "can", paths["test"], "--prior", ",".join(["1"] * 100),
        "--labels", short,
    )  # fmt: skip
    assert code == 2
    assert f"has {N_HALF - 1} labels but OUTPUTS has {N_HALF} rows" in stderr


def test_usage_errors_and_help(capsys):
    """argparse's own conventions: --help exits 0, a missing option exits 2."""
    code, stdout, _ = run(capsys, "can", "--help")
    assert code == 0
    assert "exit codes" in stdout and "--prior-from-labels" in stdout
    code, _, stderr = run(capsys, "can", "x.npy")
    assert code == 2
    assert "one of the arguments --prior --prior-from-labels is required" in stderr
    code, _, stderr = run(capsys, "no-such-command")
    assert code == 2


def test_subprocess_python_m_skprior(files, tmp_path):
    """A real process: `python -m skprior can` writes the file and exits 0/2."""
    paths, _ = files
    out = tmp_path / "adjusted.npz"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "skprior", "can", paths["test"]]
    done = subprocess.run(
        [*command, "--prior-from-labels", paths["val_labels"], "-o", str(out),
         "--labels", paths["test_labels"]],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert np.load(out)["proba"].shape == (N_HALF, 100)
    assert "accuracy" in done.stdout
    failed = subprocess.run(
        [*command, "--prior", "1,2"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert failed.returncode == 2
    assert "error:" in failed.stderr and "Traceback" not in failed.stderr


def test_adapt_prints_and_applies_the_mle_prior(files, tmp_path, capsys):
    """`skprior adapt` prints the EM estimate and writes Bayes' rule to it
    (--shift-level 1: every batch adapted)."""
    from skprior import adjust_to_prior, estimate_test_prior

    paths, arrays = files
    out = tmp_path / "adapted.npz"
    code, stdout, stderr = run(
        capsys, "adapt", paths["test"], "--prior-from-labels", paths["val_labels"],
        "--solver", "squarem", "-o", out, "--labels", paths["test_labels"],
        "--shift-level", "1",
    )  # fmt: skip
    assert code == 0, stderr
    train_prior = prior_of(arrays["val_labels"])
    expected = estimate_test_prior(arrays["test"], train_prior, solver="squarem").prior
    lines = stdout.splitlines()
    assert lines[0].startswith("test prior (MLE by squarem")
    printed = np.array([float(v) for v in lines[1].split(",")])
    np.testing.assert_allclose(printed, expected, atol=1e-6)
    stored = np.load(out)
    np.testing.assert_allclose(stored["prior"], expected)
    np.testing.assert_allclose(
        stored["proba"], adjust_to_prior(arrays["test"], train_prior, expected)
    )
    # The 95% interval of the batch's class proportions, as the library's
    # (no --val-labels: it assumes calibrated outputs, and says so).
    assert lines[2].startswith("95% interval of the batch's class proportions")
    assert "assuming calibrated outputs" in lines[2]
    low, high = estimate_test_prior(
        arrays["test"], train_prior, solver="squarem"
    ).confidence_interval(0.95)
    np.testing.assert_allclose(_floats(lines[3], "low:"), low, atol=1e-6)
    np.testing.assert_allclose(_floats(lines[4], "high:"), high, atol=1e-6)
    assert [line.split()[0] for line in lines[6:]] == ["accuracy", "ECE", "NLL"]


def _floats(line, head):
    assert line.startswith(head)
    return np.array([float(v) for v in line[len(head) :].split(",")])


def test_adapt_interval_recentred_by_validation_labels(files, capsys):
    """With --val-outputs and --val-labels the interval is the library's with
    that labelled calibration set."""
    from skprior import estimate_test_prior

    paths, arrays = files
    code, stdout, stderr = run(
        capsys, "adapt", paths["test"], "--prior-from-labels", paths["val_labels"],
        "--val-outputs", paths["val"], "--val-labels", paths["val_labels"],
        "--shift-level", "1",
    )  # fmt: skip
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert "recentred on --val-outputs/--val-labels" in lines[2]
    train_prior = prior_of(arrays["val_labels"])
    calibration = (arrays["val"], arrays["val_labels"])
    low, high = estimate_test_prior(arrays["test"], train_prior).confidence_interval(
        0.95, calibration=calibration
    )
    np.testing.assert_allclose(_floats(lines[3], "low:"), low, atol=1e-6)
    np.testing.assert_allclose(_floats(lines[4], "high:"), high, atol=1e-6)


def test_adapt_bbse_and_known(files, tmp_path, capsys):
    """BBSE/RLLS need labelled validation outputs; a known prior is used as given."""
    paths, _ = files
    prior = ["--prior-from-labels", paths["val_labels"]]
    code, _, stderr = run(capsys, "adapt", paths["test"], *prior, "--method", "bbse")
    assert code == 2
    assert "--val-outputs and --val-labels" in stderr
    code, stdout, _ = run(
        capsys, "adapt", paths["test"], *prior, "--method", "bbse",
        "--val-outputs", paths["val"], "--val-labels", paths["val_labels"], "-q",
        "--shift-level", "1",
    )  # fmt: skip
    assert code == 0
    assert stdout.startswith("test prior (estimated by BBSE)")
    code, stdout, _ = run(
        capsys, "adapt", paths["test"], *prior, "--method", "rlls",
        "--val-outputs", paths["val"], "--val-labels", paths["val_labels"], "-q",
        "--shift-level", "1",
    )  # fmt: skip
    assert code == 0
    assert stdout.startswith("test prior (estimated by RLLS)")
    known = ",".join(["1"] * 99 + ["101"])
    out = tmp_path / "known.npy"
    code, stdout, _ = run(
        capsys, "adapt", paths["test"], *prior, "--method", "known",
        "--test-prior", known, "-o", out, "-q",
    )  # fmt: skip
    assert code == 0
    assert stdout.splitlines()[1].split(",")[-1] == "0.505000"


def test_adapt_leaves_a_batch_without_shift_alone(files, tmp_path, capsys):
    """With --val-outputs, a test half drawn like the validation half is found
    unshifted: the training prior is printed and the posteriors kept."""
    paths, arrays = files
    out = tmp_path / "kept.npy"
    code, stdout, stderr = run(
        capsys, "adapt", paths["test"], "--prior-from-labels", paths["val_labels"],
        "--val-outputs", paths["val"], "-o", out,
    )  # fmt: skip
    assert code == 0, stderr
    assert stdout.startswith("not adapted, training prior kept (no shift found (p = ")
    assert "test of no shift against --val-outputs" in stderr
    np.testing.assert_allclose(
        np.load(out), arrays["test"], rtol=1e-6
    )  # (rows renormalised)
    code, _, stderr = run(
        capsys, "adapt", paths["test"], "--prior-from-labels", paths["val_labels"],
        "--shift-level", "0",
    )  # fmt: skip
    assert (
        code == 2 and "--shift-level must be a float in the range (0.0, 1.0]" in stderr
    )
    # (the estimate is not run on a batch left alone; its options are checked)
    for bad, message in [("--tol", "--tol must be"), ("--max-iter", "--max-iter must")]:
        code, _, stderr = run(
            capsys, "adapt", paths["test"], "--prior-from-labels", paths["val_labels"],
            "--val-outputs", paths["val"], bad, "0",
        )  # fmt: skip
        assert code == 2 and message in stderr


def test_adapt_writes_an_unadapted_batch_as_it_was_read(files, tmp_path, capsys):
    """ "posteriors unchanged" holds to the bit: a batch left alone is written
    as read, not through Bayes' rule from the training prior to itself, which
    moved 2,024 of 8,000 float64 entries by a rounding (2e-16)."""
    paths, arrays = files
    test = arrays["test"].astype(np.float64)
    test /= test.sum(axis=1, keepdims=True)
    np.save(tmp_path / "test64.npy", test)
    out = tmp_path / "kept.npy"
    code, stdout, stderr = run(
        capsys, "adapt", tmp_path / "test64.npy", "--prior-from-labels",
        paths["val_labels"], "--val-outputs", paths["val"], "-o", out, "-q",
    )  # fmt: skip
    assert code == 0, stderr
    assert "posteriors unchanged):" in stdout.splitlines()[0]
    np.testing.assert_array_equal(np.load(out), test)


def test_adapt_without_val_outputs_does_not_adapt_a_miscalibrated_batch(
    files, tmp_path, capsys
):
    """Without --val-outputs, a batch that differs only from the training prior
    (here the same distribution: WideResNet's mean posterior is not its label
    frequencies) is left unchanged, with a warning that names the fix."""
    paths, arrays = files
    out = tmp_path / "kept.npy"
    code, stdout, stderr = run(
        capsys, "adapt", paths["test"], "--prior-from-labels", paths["val_labels"],
        "-o", out,
    )  # fmt: skip
    assert code == 0, stderr
    assert stdout.startswith(
        "not adapted, training prior kept (shift or miscalibration"
    )
    assert "posteriors unchanged):" in stdout.splitlines()[0]
    printed = np.array([float(v) for v in stdout.splitlines()[1].split(",")])
    np.testing.assert_allclose(printed, prior_of(arrays["val_labels"]), atol=1e-6)
    np.testing.assert_allclose(np.load(out), arrays["test"], rtol=1e-6)
    assert "cannot tell a label shift from a miscalibrated model" in stderr
    assert "Pass --val-outputs" in stderr and "--shift-level 1" in stderr


def test_calibrate_fits_on_one_file_and_applies_to_another(files, tmp_path, capsys):
    """`skprior calibrate` fits T by EC on the validation half, applies it."""
    from skprior import fit_temperature, softmax_temperature

    paths, arrays = files
    out = tmp_path / "calibrated.npy"
    diagram = tmp_path / "diagram.png"
    code, stdout, stderr = run(
        capsys, "calibrate", paths["test"], "--fit-outputs", paths["val"],
        "--fit-labels", paths["val_labels"], "-o", out,
        "--labels", paths["test_labels"], "--diagram", diagram,
    )  # fmt: skip
    assert code == 0, stderr
    # (float32 outputs: fitted and applied in float32, the result float32)
    logits_val = np.log(arrays["val"])
    temperature = fit_temperature(logits_val, arrays["val_labels"], method="ec")
    assert stdout.startswith(f"temperature {temperature:.6g} (ec, fitted on {N_HALF}")
    expected = softmax_temperature(np.log(arrays["test"]), temperature)
    assert arrays["test"].dtype == np.load(out).dtype == np.float32
    np.testing.assert_allclose(np.load(out), expected, rtol=1e-6)
    assert diagram.read_bytes()[:4] == b"\x89PNG"
    ece = next(line for line in stdout.splitlines() if line.startswith("ECE"))
    assert float(ece.split()[3]) < 0  # the calibration lowers the ECE


@pytest.mark.parametrize(
    "method, extra",
    [
        ("bcts", []),
        ("nbvs", []),
        ("vs", []),
        ("dirichlet", ["--reg-lambda", "0.5", "--reg-mu", "2"]),
        ("dirichlet", []),
    ],
    ids=["bcts", "nbvs", "vs", "dirichlet given", "dirichlet auto"],
)
def test_calibrate_classwise_methods_equal_the_library(
    files10, tmp_path, capsys, method, extra
):
    """--method bcts / nbvs / vs / dirichlet write (and print) what the array
    functions give."""
    import skprior

    paths, arrays = files10
    out = tmp_path / "calibrated.npz"
    code, stdout, stderr = run(
        capsys, "calibrate", paths["test"], "--fit-outputs", paths["val"],
        "--fit-labels", paths["val_labels"], "--method", method, "-o", out, *extra,
    )  # fmt: skip
    assert code == 0, stderr
    # (float32 outputs: fitted and applied in float32, the result float32)
    fit, test = np.log(arrays["val"]), np.log(arrays["test"])
    assert fit.dtype == np.float32
    labels = arrays["val_labels"]
    stored = np.load(out)
    if method == "dirichlet":
        reg_lambda = 0.5 if extra else "auto"
        if reg_lambda == "auto":
            reg_lambda, _ = skprior.select_dirichlet_regularization(fit, labels)
        reg_mu = 2.0 if extra else reg_lambda
        matrix, bias = skprior.fit_dirichlet_calibration(
            fit, labels, reg_lambda=reg_lambda, reg_mu=reg_mu
        )
        expected = skprior.softmax_dirichlet_calibration(test, matrix, bias)
        np.testing.assert_allclose(stored["matrix"], matrix, rtol=1e-12)
        assert stored["reg_lambda"] == reg_lambda and stored["reg_mu"] == reg_mu
        assert f"reg_lambda {reg_lambda:.6g}" in stdout
    elif method == "bcts":  # (the biases are printed too, as the help says)
        temperature, bias = skprior.fit_bias_corrected_temperature(fit, labels)
        expected = skprior.softmax_temperature(test, temperature, bias)
        np.testing.assert_allclose(stored["bias"], bias, rtol=1e-10, atol=1e-12)
        assert f"temperature {temperature:.6g}" in stdout
        assert f"class biases from {bias.min():.6g} to {bias.max():.6g}" in stdout
    else:
        weights, bias = skprior.fit_vector_scaling(fit, labels, bias=method == "vs")
        expected = skprior.softmax_vector_scaling(test, weights, bias)
        np.testing.assert_allclose(stored["weights"], weights, rtol=1e-12)
        assert f"class factors from {weights.min():.6g}" in stdout
    assert f"({method}, fitted on {N_HALF} rows" in stdout
    assert stored["proba"].dtype == np.float32
    np.testing.assert_allclose(stored["proba"], expected, rtol=1e-6)


def test_calibrate_warns_on_a_tiny_fit_set(files, tmp_path, capsys):
    """Vector scaling on 50 rows of 100 classes: the library's warning, on stderr."""
    paths, arrays = files
    small, small_labels = tmp_path / "small.npy", tmp_path / "small_labels.npy"
    np.save(small, arrays["val"][:50])
    np.save(small_labels, arrays["val_labels"][:50])
    code, _, stderr = run(
        capsys, "calibrate", paths["test"], "--fit-outputs", small,
        "--fit-labels", small_labels, "--method", "nbvs",
    )  # fmt: skip
    # (50 rows cannot hold all 100 classes: the fit is refused, naming the fix)
    assert code == 2 and "needs every class" in stderr
    rows = np.concatenate(
        [np.flatnonzero(arrays["val_labels"] == c)[:2] for c in range(100)]
    )
    np.save(small, arrays["val"][rows])
    np.save(small_labels, arrays["val_labels"][rows])
    code, _, stderr = run(
        capsys, "calibrate", paths["test"], "--fit-outputs", small,
        "--fit-labels", small_labels, "--method", "nbvs",
    )  # fmt: skip
    assert code == 0
    assert "warning: No-bias vector scaling fits 100 free parameters on 200" in stderr


def test_calibrate_errors(files, tmp_path, capsys):
    """Mismatched fit files and --diagram without --labels exit with 2."""
    paths, arrays = files
    short = tmp_path / "short_labels.npy"
    np.save(short, arrays["val_labels"][:10])
    code, _, stderr = run(
        capsys, "calibrate", paths["test"], "--fit-outputs", paths["val"],
        "--fit-labels", short,
    )  # fmt: skip
    assert code == 2
    assert "has 10 labels but --fit-outputs has" in stderr
    code, _, stderr = run(
        capsys, "calibrate", paths["test"], "--fit-labels", paths["test_labels"],
        "--diagram", tmp_path / "d.png",
    )  # fmt: skip
    assert code == 2
    assert "--diagram needs --labels" in stderr
    code, _, stderr = run(capsys, "calibrate", paths["test"])
    assert code == 2
    assert "--fit-labels" in stderr


def test_unexpected_error_exits_1_with_traceback(files, capsys, monkeypatch):
    """A bug (an exception that is not an input error) exits 1, with traceback."""
    from skprior.can import _can

    def broken(*args, **kwargs):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(_can, "alternating_normalization_counts", broken)
    paths, _ = files
    code, _, stderr = run(
        capsys, "can", paths["test"], "--prior", ",".join(["1"] * 100)
    )
    assert code == 1
    assert "Traceback" in stderr and "simulated bug" in stderr
    assert "unexpected error" in stderr


def test_top_level_help_lists_commands_and_exit_codes(capsys):
    """`skprior --help` names every command and the exit codes."""
    code, stdout, _ = run(capsys, "--help")
    assert code == 0
    for command in ("demo", "can", "adapt", "calibrate"):
        assert command in stdout
    assert "exit codes" in stdout


@pytest.mark.parametrize("command", ["adapt", "calibrate"])
def test_bad_labels_or_output_fail_before_any_result(files, tmp_path, capsys, command):
    """A wrong --labels file or --output path is refused before the computation."""
    paths, arrays = files
    short = tmp_path / "short.npy"
    np.save(short, arrays["test_labels"][:5])
    extra = {
        "adapt": ["--prior-from-labels", paths["val_labels"]],
        "calibrate": ["--fit-labels", paths["test_labels"]],
    }[command]
    for bad in (["--labels", short], ["-o", tmp_path / "no_folder" / "out.npy"]):
        code, stdout, stderr = run(capsys, command, paths["test"], *extra, *bad)
        assert code == 2, stderr
        assert stdout == ""  # no prior or temperature printed
        assert "error:" in stderr


def test_npz_with_key_and_npy_mix_in_one_command(files, tmp_path, capsys):
    """--key names an array inside .npz files only: an .npy beside it is fine."""
    paths, _ = files
    out = tmp_path / "out.npz"
    code, _, stderr = run(
        capsys, "calibrate", paths["test_npz"], "--key", "predictions",
        "--fit-outputs", paths["val"], "--fit-labels", paths["val_labels"], "-o", out,
    )  # fmt: skip
    assert code == 0, stderr
    assert "proba" in np.load(out)


def test_float16_outputs_are_read_and_renormalised(files, tmp_path, capsys):
    """Half-precision outputs (rows off 1 by ~1e-3) work in every command."""
    paths, arrays = files
    half = tmp_path / "half.npy"
    np.save(half, arrays["test"].astype(np.float16))
    for argv in (
        ["can", half, "--prior-from-labels", paths["val_labels"]],
        ["adapt", half, "--prior-from-labels", paths["val_labels"]],
        ["calibrate", half, "--fit-labels", paths["test_labels"]],
    ):
        out = tmp_path / "out.npy"
        code, _, stderr = run(capsys, *argv, "-o", out)
        assert code == 0, stderr
        np.testing.assert_allclose(np.load(out).sum(axis=1), 1, atol=1e-12)


def test_upper_case_output_extension_writes_that_file(files, tmp_path, capsys):
    """-o OUT.NPY writes OUT.NPY (numpy alone would append ".npy")."""
    paths, arrays = files
    for name in ("OUT.NPY", "OUT.NPZ"):
        code, _, stderr = run(
            capsys, "can", paths["test"], "--prior-from-labels", paths["val_labels"],
            "-o", tmp_path / name,
        )  # fmt: skip
        assert code == 0, stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["OUT.NPY", "OUT.NPZ"]
    assert np.load(tmp_path / "OUT.NPY").shape == arrays["test"].shape
    assert np.load(tmp_path / "OUT.NPZ")["proba"].shape == arrays["test"].shape


@pytest.mark.parametrize(
    "prior, message",
    [(np.array(["a"] * 100), "one vector of numbers"), (np.ones((2, 50)), "shape")],
)
def test_prior_file_must_be_one_vector_of_numbers(
    files, tmp_path, capsys, prior, message
):
    paths, _ = files
    prior_file = tmp_path / "prior.npy"
    np.save(prior_file, prior)
    code, _, stderr = run(capsys, "can", paths["test"], "--prior", prior_file)
    assert code == 2
    assert message in stderr and "Traceback" not in stderr


def test_adapts_npz_output_is_a_prior_file(files, tmp_path, capsys):
    """adapt's .npz (proba and prior) serves as --test-prior: its 'prior';
    an archive of other arrays is refused with the names it holds."""
    paths, arrays = files
    base = ["adapt", paths["test"], "--prior-from-labels", paths["val_labels"]]
    code, _, stderr = run(capsys, *base, "-o", tmp_path / "adapted.npz", "-q")
    assert code == 0, stderr
    estimated = np.load(tmp_path / "adapted.npz")["prior"]
    known = [*base, "--method", "known", "--test-prior", tmp_path / "adapted.npz"]
    code, _, stderr = run(capsys, *known, "-o", tmp_path / "again.npz", "-q")
    assert code == 0, stderr
    np.testing.assert_allclose(np.load(tmp_path / "again.npz")["prior"], estimated)
    np.savez(tmp_path / "two.npz", a=estimated, b=estimated)
    code, _, stderr = run(capsys, *known[:-1], tmp_path / "two.npz")
    assert code == 2 and "holds the arrays ['a', 'b']" in stderr
    assert "one named 'prior'" in stderr


def test_prior_counts_whose_sum_overflows_are_scaled(files, capsys):
    """Counts near float64's largest sum to inf: scaled first, not 'every
    entry is 0' or a NumPy warning."""
    paths, arrays = files
    n_classes = arrays["test"].shape[1]
    counts = ",".join(["1e308"] * n_classes)
    code, stdout, stderr = run(
        capsys, "adapt", paths["test"], "--prior-from-labels", paths["val_labels"],
        "--method", "known", "--test-prior", counts,
    )  # fmt: skip
    assert code == 0, stderr
    assert "warning" not in stderr
    assert ",".join([f"{1 / n_classes:.6f}"] * n_classes) in stdout


def test_bad_diagram_path_fails_before_any_output(files, tmp_path, capsys):
    """--diagram is checked up front, like --output: nothing is written."""
    pytest.importorskip("matplotlib")
    paths, _ = files
    out = tmp_path / "out.npy"
    for diagram in (tmp_path / "d.xyz", tmp_path / "no_folder" / "d.png"):
        code, stdout, stderr = run(
            capsys, "can", paths["test"], "--prior-from-labels", paths["val_labels"],
            "--labels", paths["test_labels"], "--diagram", diagram, "-o", out,
        )  # fmt: skip
        assert code == 2, stderr
        assert stdout == "" and not out.exists()


@pytest.mark.parametrize("option", ["-o", "--diagram"])
@pytest.mark.parametrize("out_of_core", [False, True])
def test_unwritable_output_folder_fails_before_any_work(
    files, tmp_path, capsys, monkeypatch, option, out_of_core
):
    """A folder the run cannot write (read-only; as root, permission bits do
    not show it, so os.access is told so here) is refused up front."""
    import skprior._cli._common as common

    if option == "--diagram":
        pytest.importorskip("matplotlib")
        if out_of_core:
            pytest.skip("--diagram needs the outputs in memory")
    paths, _ = files
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(
        common.os, "access", lambda p, mode: Path(p) != locked and real(p, mode)
    )
    target = locked / ("d.png" if option == "--diagram" else "out.npy")
    argv = ["can", paths["test"], "--prior-from-labels", paths["val_labels"]]
    argv += ["--labels", paths["test_labels"], option, target]
    code, stdout, stderr = run(capsys, *argv, *(["--out-of-core"] * out_of_core))
    assert code == 2 and stdout == ""
    assert f"the folder {locked} cannot be written" in stderr
    assert list(locked.iterdir()) == []


def test_a_failed_diagram_leaves_the_earlier_one(files, tmp_path, capsys, monkeypatch):
    """--diagram is written beside its path and renamed once whole: a save
    that fails half-way (a full disk) leaves an earlier diagram as it was."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    def half_written(self, path, **kwargs):
        Path(path).write_bytes(b"\x89PNG truncated")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", half_written)
    paths, _ = files
    earlier = tmp_path / "d.png"
    earlier.write_bytes(b"the earlier diagram")
    code, _, stderr = run(
        capsys, "can", paths["test"], "--prior-from-labels", paths["val_labels"],
        "--labels", paths["test_labels"], "--diagram", earlier,
    )  # fmt: skip
    assert code == 2 and "cannot write the diagram" in stderr
    assert earlier.read_bytes() == b"the earlier diagram"
    assert [p.name for p in tmp_path.iterdir()] == ["d.png"]


def test_a_failed_diagram_leaves_the_earlier_output(
    files, tmp_path, capsys, monkeypatch
):
    """--output and --diagram are written beside their paths and renamed
    together: a diagram that cannot be written leaves an earlier --output as
    it was, rather than replacing it and then failing (exit 2)."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    def failing(self, path, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", failing)
    paths, _ = files
    out, diagram = tmp_path / "out.npy", tmp_path / "d.png"
    np.save(out, np.zeros(3))
    code, _, stderr = run(
        capsys, "can", paths["test"], "--prior-from-labels", paths["val_labels"],
        "--labels", paths["test_labels"], "--diagram", diagram, "-o", out,
    )  # fmt: skip
    assert code == 2 and "cannot write the diagram" in stderr
    np.testing.assert_array_equal(np.load(out), np.zeros(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npy"]


def test_version_prints_the_package_version(capsys):
    """`skprior --version` prints skprior.__version__ and exits 0."""
    import skprior

    code, stdout, _ = run(capsys, "--version")
    assert code == 0
    assert stdout.strip() == f"skprior {skprior.__version__}"


def test_help_and_version_import_no_numerics():
    """--help and --version answer before NumPy, SciPy, scikit-learn or pandas
    are imported (they take seconds): a real process, from a clean start."""
    code = (
        "import sys\n"
        "from skprior._cli import main\n"
        "for argv in (['--help'], ['--version'], ['can', '--help']):\n"
        "    assert main(argv) == 0\n"
        "heavy = ('numpy', 'scipy', 'sklearn', 'pandas', 'matplotlib')\n"
        "print(sorted(name for name in heavy if name in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_parser_reads_choices_and_defaults_from_options():
    """Every --method, --solver and --uncertainty choice and every default is
    the library's own (skprior._utils._options), not a copy."""
    from skprior._cli import build_parser
    from skprior._utils import _options

    def option(command, name):
        sub = build_parser()._subparsers._group_actions[0].choices[command]
        return next(a for a in sub._actions if name in a.option_strings)

    assert tuple(option("can", "--uncertainty").choices) == _options.UNCERTAINTY_KINDS
    assert option("can", "--uncertainty").default == _options.DEFAULT_UNCERTAINTY
    assert option("can", "--k").default == _options.DEFAULT_K
    assert option("can", "--tau").default == _options.DEFAULT_TAU
    assert option("can", "--alpha").default == _options.DEFAULT_ALPHA
    assert option("can", "--n-iter").default == _options.DEFAULT_N_ITER
    assert tuple(option("adapt", "--method").choices) == _options.PRIOR_METHODS
    assert option("adapt", "--method").default == _options.DEFAULT_PRIOR_METHOD
    assert tuple(option("adapt", "--solver").choices) == _options.SOLVERS
    assert tuple(option("calibrate", "--method").choices) == (
        _options.ESTIMATOR_CALIBRATION_METHODS
    )
    # (None in the parser, so that a given option can be told from a default)
    assert option("calibrate", "--reg-lambda").default is None
    assert str(_options.DEFAULT_REG_LAMBDA) in option("calibrate", "--reg-lambda").help
    assert str(_options.DEFAULT_REG_MU) in option("calibrate", "--reg-mu").help
    assert option("calibrate", "--method").default == (
        _options.DEFAULT_TEMPERATURE_METHOD
    )
    assert tuple(option("demo", "--dataset").choices) == _options.SHIPPED_DATASETS


@pytest.mark.parametrize(
    "extra, kwargs",
    [
        ([], {}),
        (["--k", "auto"], {"k": "auto"}),
        (["--k", "5", "--uncertainty", "unrenormalized"],
         {"k": 5, "uncertainty": "unrenormalized"}),
        (["--uncertainty", "max_over_k", "--tau", "0.5"],
         {"uncertainty": "max_over_k", "tau": 0.5}),
    ],
)  # fmt: skip
def test_can_k_auto_and_uncertainty(files, tmp_path, capsys, extra, kwargs):
    """--k auto and --uncertainty reach alternating_normalization unchanged."""
    paths, arrays = files
    out = tmp_path / "out.npy"
    code, _, stderr = run(
        capsys, "can", paths["test"], "--prior", ",".join(["1"] * 100), *extra,
        "-o", out, "-q",
    )  # fmt: skip
    assert code == 0, stderr
    expected = alternating_normalization(arrays["test"], np.full(100, 0.01), **kwargs)
    # (the command corrects its input in place, whose confident rows' column
    # sums are taken with weights rather than from a zeroed copy: float32
    # rounding apart)
    assert expected.dtype == np.float32
    np.testing.assert_allclose(np.load(out), expected, rtol=1e-6, atol=0)


def test_adapt_bbse_uses_the_joint_confusion_matrix(files, tmp_path, capsys):
    """BBSE's prior is bbse_test_prior with joint_confusion_matrix of the
    validation files, and the outputs are adjusted to it."""
    from skprior import adjust_to_prior, bbse_test_prior, joint_confusion_matrix

    paths, arrays = files
    out = tmp_path / "bbse.npz"
    code, _, stderr = run(
        capsys, "adapt", paths["test"], "--prior-from-labels", paths["val_labels"],
        "--method", "bbse", "--val-outputs", paths["val"],
        "--val-labels", paths["val_labels"], "-o", out, "-q", "--shift-level", "1",
    )  # fmt: skip
    assert code == 0, stderr
    confusion = joint_confusion_matrix(arrays["val"], arrays["val_labels"])
    expected = bbse_test_prior(arrays["test"], confusion)
    stored = np.load(out)
    np.testing.assert_allclose(stored["prior"], expected)
    train_prior = prior_of(arrays["val_labels"])
    np.testing.assert_allclose(
        stored["proba"], adjust_to_prior(arrays["test"], train_prior, expected)
    )


def test_library_warnings_become_one_line_each(files, capsys):
    """A warning of the library (EM stopped before converging) is printed as
    one 'warning:' line on stderr; the command still succeeds."""
    paths, _ = files
    code, stdout, stderr = run(
        capsys, "adapt", paths["test"], "--prior-from-labels", paths["val_labels"],
        "--max-iter", "2", "-q", "--shift-level", "1",
    )  # fmt: skip
    assert code == 0
    warnings = [line for line in stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 1 and "did not converge" in warnings[0]
    assert "NOT converged" in stdout


def test_negative_prior_list_is_read_as_a_value(files, capsys):
    """`--test-prior -1,...` reaches the prior check (argparse would take it for
    an option and report a missing value); so does the `=` form."""
    paths, _ = files
    base = ["adapt", paths["test"], "--prior-from-labels", paths["val_labels"]]
    values = ",".join(["-1"] + ["1"] * 99)
    for form in (["--test-prior", values], [f"--test-prior={values}"]):
        code, _, stderr = run(capsys, *base, "--method", "known", *form)
        assert code == 2
        assert "--test-prior" in stderr and "entry 0 is -1" in stderr


def test_ctrl_c_while_the_libraries_load_is_a_quiet_interrupt(
    files, capsys, monkeypatch
):
    """Ctrl-C in the first second or two (NumPy, SciPy, scikit-learn being
    imported) ends as one during the command: exit 130, one line."""
    import builtins

    real = builtins.__import__

    def interrupted(name, *args, **kwargs):
        if name == "skprior._cli._commands":
            raise KeyboardInterrupt
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    paths, _ = files
    code, stdout, stderr = run(capsys, "can", paths["test"], "--prior", "1,1")
    assert code == 130 and stdout == ""
    assert stderr == "skprior can: interrupted\n"


def test_closed_stdout_is_not_a_bug(files, capsys, monkeypatch, tmp_path):
    """A reader that stops early (`skprior adapt ... | head -1`) ends the
    command quietly (exit 141, as a shell reports SIGPIPE), without traceback."""
    paths, _ = files

    class ClosedPipe:
        def __init__(self):
            self._file = open(tmp_path / "stdout", "w")  # (a real descriptor)

        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

        def fileno(self):
            return self._file.fileno()

    pipe = ClosedPipe()
    monkeypatch.setattr(sys, "stdout", pipe)
    code = main(["adapt", paths["test"], "--prior-from-labels", paths["val_labels"]])
    monkeypatch.undo()
    pipe._file.close()
    assert code == 141
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("command", ["can", "adapt"])
def test_an_interrupt_during_the_report_out_of_core_leaves_the_output(
    files, capsys, monkeypatch, tmp_path, command
):
    """Out of core the output was renamed into place before the --labels
    report was computed: Ctrl-C during the report exited 130 ("interrupted")
    with the earlier -o file already replaced, where the guide promises it
    is left as it was. The report now comes first, as in memory."""
    from skprior._cli import _blocks

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(_blocks, "_report", interrupted)
    paths, _ = files
    output = tmp_path / "out.npy"
    np.save(output, np.arange(6))
    extra = ["--shift-level", "1"] if command == "adapt" else []
    code, _, stderr = run(
        capsys,
        command,
        paths["test"],
        "--prior-from-labels",
        paths["val_labels"],
        "--labels",
        paths["test_labels"],
        "-o",
        output,
        "--out-of-core",
        *extra,
    )
    assert code == 130 and "interrupted" in stderr
    np.testing.assert_array_equal(np.load(output), np.arange(6))
