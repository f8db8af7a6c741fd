"""The command line's bad-input table, and the valid files that look odd.

Every malformed file, wrong shape, bad value and contradictory option of the
table is run through each command that takes it; each must exit 2 with one
``error:`` line on stderr that names the option (or OUTPUTS) and says the fix,
and no traceback. Each outcome is classified (clear, unclear, traceback,
silent) so that a failure says which. The valid-but-tricky files (a UTF-8
byte-order mark, pandas' default header, comment lines, ...) must give exactly
the result of the same numbers in an .npy file.
"""

import shutil
import zipfile

import numpy as np
import pytest

from skprior._cli import main

N, K = 60, 10
PRIOR = ",".join(["1"] * K)
COMMANDS = ("can", "adapt", "calibrate")


@pytest.fixture(scope="module")
def folder(tmp_path_factory, cifar10):
    """Good and bad files built from 60 rows of real CIFAR-10 outputs."""
    path = tmp_path_factory.mktemp("inputs")
    proba, labels = cifar10
    proba, labels = proba[:N].astype(np.float64), labels[:N]
    proba /= proba.sum(axis=1, keepdims=True)
    _write_files(path, proba, labels)
    return path


def _csv(rows):
    return "".join(",".join(str(v) for v in row) + "\n" for row in rows)


def _write_files(path, proba, labels):
    """Every file the table refers to, under ``path``."""
    np.save(path / "good.npy", proba)
    np.save(path / "labels.npy", labels)
    np.save(path / "logits.npy", np.log(proba) + 2.0)
    text = {
        "empty.csv": "",
        "header_only.csv": "p0,p1\n",
        "blank.csv": "\n\n",
        "ragged.csv": _csv(proba[:3]) + _csv([proba[3, :-1]]) + _csv(proba[4:]),
        "typo_first.csv": "0O24," + _csv(proba)[_csv(proba).index(",") + 1 :],
        "typo_middle.csv": _csv(proba[:5])
        + _csv([[*proba[5, :2], "x", *proba[5, 3:]]])
        + _csv(proba[6:]),
        "none.csv": _csv(proba[:5]) + ",".join(["None"] * K) + "\n" + _csv(proba[6:]),
        "semicolon.csv": _csv(proba).replace(",", ";"),
        "nan.csv": _csv(proba[:2]) + ",".join(["nan"] * K) + "\n" + _csv(proba[3:]),
        "pandas_index.csv": ","
        + ",".join(map(str, range(K)))
        + "\n"
        + "".join(f"{i}," + _csv([row]) for i, row in enumerate(proba)),
        "index_column.csv": "".join(
            f"{i}," + _csv([row]) for i, row in enumerate(proba)
        ),
        "text.npy": _csv(proba),
        "labels_empty.csv": "",
        "labels_names.csv": "cat\ndog\ncat\n",
        "labels_pandas_0.csv": "0\n" + "".join(f"{v}\n" for v in labels),
        "labels_with_header.csv": "label\n" + "".join(f"{v}\n" for v in labels),
    }
    for name, content in text.items():
        (path / name).write_text(content)
    (path / "latin1.csv").write_bytes("é,1\n".encode("latin-1"))
    (path / "empty.npy").write_bytes(b"")
    (path / "empty.npz").write_bytes(b"")
    (path / "garbage.npy").write_bytes(bytes(range(256)) * 4)
    np.savez(path / "arrays.npz", a=proba, b=proba)
    shutil.copy(path / "arrays.npz", path / "zip_named.npy")
    shutil.copy(path / "good.npy", path / "npy_named.npz")
    raw = (path / "good.npy").read_bytes()
    (path / "truncated.npy").write_bytes(raw[: len(raw) // 2])
    with zipfile.ZipFile(path / "not_arrays.npz", "w") as archive:
        archive.writestr("notes.txt", "not an array")
    sparse = {"format": np.array("csr"), "shape": np.array([N, K])}
    sparse.update(data=proba.ravel(), indices=np.arange(N * K), indptr=np.arange(N + 1))
    np.savez(path / "sparse.npz", **sparse)
    arrays = {
        "one_d": proba[:, 0],
        "three_d": proba[None],
        "one_column": proba[:, :1],
        "no_rows": proba[:0],
        "nan": np.where(np.arange(K) == 3, np.nan, proba),
        "inf": np.where(np.arange(K) == 3, np.inf, proba),
        "negative": proba - 0.05,
        "rows_not_1": proba * 1.5,
        "strings": proba.astype(str),
        "complex": proba.astype(complex),
        "bool": proba > 0.5,
        "logits_nan": np.where(np.arange(K) == 3, np.nan, np.log(proba)),
        "nine_classes": proba[:, :9] / proba[:, :9].sum(axis=1, keepdims=True),
        "labels_inf": np.r_[labels[:-1].astype(float), np.inf],
        "labels_nan": np.r_[np.nan, labels[1:].astype(float)],
        "labels_half": np.r_[1.5, labels[1:].astype(float)],
        "labels_strings": np.array(["cat"] * N),
        "labels_out_of_range": np.r_[K, labels[1:]],
        "labels_negative": np.r_[-1, labels[1:]],
        "labels_one_hot": np.eye(K)[labels],
        "labels_short": labels[:-1],
        "labels_no_rows": labels[:0],
        "prior_matrix": np.ones((2, 5)),
    }
    for name, array in arrays.items():
        np.save(path / f"{name}.npy", array)
    np.save(
        path / "objects.npy", np.array([[1.0], "x"], dtype=object), allow_pickle=True
    )
    (path / "folder.npy").mkdir()


def _args(command, outputs="good.npy", *extra):
    """A valid command line, with OUTPUTS and extra options."""
    base = {
        "can": [outputs, "--prior", PRIOR],
        "adapt": [outputs, "--prior", PRIOR],
        "calibrate": [outputs, "--fit-labels", "labels.npy"],
    }[command]
    return [command, *base, *extra]


# OUTPUTS files: (file, extra options, what stderr must contain).
BAD_OUTPUTS = [
    ("missing.npy", [], ["OUTPUTS missing.npy", "no such file", "check the path"]),
    ("folder.npy", [], ["OUTPUTS folder.npy is a folder", "pass a file"]),
    ("good.xlsx", [], ["OUTPUTS good.xlsx", "unknown file type", "use one of"]),
    ("empty.npy", [], ["OUTPUTS empty.npy is empty (0 bytes)", "numpy.save"]),
    ("empty.npz", [], ["OUTPUTS empty.npz is empty (0 bytes)", "numpy.savez"]),
    ("zip_named.npy", [], ["OUTPUTS zip_named.npy is a zip", "rename it to .npz"]),
    ("npy_named.npz", [], ["OUTPUTS npy_named.npz is an .npy", "rename it to .npy"]),
    ("not_arrays.npz", [], ["OUTPUTS not_arrays.npz", "'notes.txt' is not a NumPy"]),
    ("garbage.npy", [], ["OUTPUTS garbage.npy is not a .npy file", "numpy.save"]),
    ("text.npy", [], ["OUTPUTS text.npy holds text", "rename it to .csv"]),
    ("truncated.npy", [], ["OUTPUTS truncated.npy is damaged", "write it again"]),
    ("objects.npy", [], ["OUTPUTS objects.npy holds Python objects", "dtype=float"]),
    ("sparse.npz", [], ["OUTPUTS sparse.npz holds a scipy.sparse", "toarray()"]),
    (
        "arrays.npz",
        [],
        ["OUTPUTS arrays.npz holds the arrays", "choose one with --key"],
    ),
    (
        "arrays.npz",
        ["--key", "c"],
        ["OUTPUTS arrays.npz has no array 'c'", "fix --key"],
    ),
    ("one_d.npy", [], ["OUTPUTS one_d.npy", "2-D", "column_stack([1 - p, p])"]),
    ("three_d.npy", [], ["OUTPUTS three_d.npy", "shape (n_samples, n_classes)"]),
    ("one_column.npy", [], ["OUTPUTS one_column.npy", "at least 2 classes"]),
    ("no_rows.npy", [], ["OUTPUTS no_rows.npy holds no rows"]),
    ("nan.npy", [], ["OUTPUTS nan.npy contains NaN", "check the model's outputs"]),
    ("inf.npy", [], ["OUTPUTS inf.npy contains NaN or inf", "check the model's"]),
    ("negative.npy", [], ["OUTPUTS negative.npy contains negative", "pass --logits"]),
    (
        "rows_not_1.npy",
        [],
        ["rows of OUTPUTS rows_not_1.npy must sum to 1", "pass --logits"],
    ),  # fmt: skip
    ("logits.npy", [], ["OUTPUTS logits.npy", "pass --logits"]),
    ("strings.npy", [], ["OUTPUTS strings.npy", "dtype <U", "dtype=float"]),
    ("complex.npy", [], ["OUTPUTS complex.npy", "dtype complex", "dtype=float"]),
    ("bool.npy", [], ["OUTPUTS bool.npy", "dtype bool", "dtype=float"]),
    (
        "logits_nan.npy",
        ["--logits"],
        ["OUTPUTS logits_nan.npy", "NaN or +inf", "Check the model's outputs"],
    ),  # fmt: skip
    ("empty.csv", [], ["OUTPUTS empty.csv holds no data lines", "one row of numbers"]),
    ("blank.csv", [], ["OUTPUTS blank.csv holds no data lines", "one row of numbers"]),
    ("header_only.csv", [], ["OUTPUTS header_only.csv holds a header line but no"]),
    (
        "ragged.csv",
        [],
        [
            "OUTPUTS ragged.csv: line 4 has 9 values but line 1 has 10",
            "same number of comma-separated numbers",
        ],
    ),  # fmt: skip
    (
        "typo_first.csv",
        [],
        ["OUTPUTS typo_first.csv: line 1, value 1: '0O", "is not a number"],
    ),  # fmt: skip
    ("typo_middle.csv", [], ["OUTPUTS typo_middle.csv: line 6, value 3: 'x' is not"]),
    ("none.csv", [], ["OUTPUTS none.csv: line 6, value 1: 'None' is not a number"]),
    (
        "semicolon.csv",
        [],
        ["OUTPUTS semicolon.csv: line 1", "separate them with commas"],
    ),
    ("nan.csv", [], ["OUTPUTS nan.csv contains NaN", "(first in row 2)"]),
    ("pandas_index.csv", [], ["OUTPUTS pandas_index.csv: line 1", "index=False"]),
    ("index_column.csv", [], ["OUTPUTS index_column.csv", "row index", "index=False"]),
    ("latin1.csv", [], ["OUTPUTS latin1.csv: byte 0 is not UTF-8", "CSV UTF-8"]),
]


def _classify(code, stdout, stderr, expected):
    """clear, unclear (exit 2, message lacks the expected words), traceback or
    silent (exit 0: a wrong answer without a word)."""
    if "Traceback" in stderr or code == 1:
        return "traceback"
    if code == 0:
        return "silent"
    errors = [line for line in stderr.splitlines() if "error:" in line]
    if code == 2 and len(errors) == 1 and stdout == "":
        if all(word in errors[0] for word in expected):
            return "clear"
    return f"unclear (exit {code}): {stderr!r}"


def _outcome(capsys, monkeypatch, folder, argv, expected):
    monkeypatch.chdir(folder)
    code = main(argv)
    out, err = capsys.readouterr()
    return _classify(code, out, err, expected)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("name", "extra", "expected"),
    BAD_OUTPUTS,
    ids=[f"{c[0]}{c[1]}" for c in BAD_OUTPUTS],
)
def test_bad_outputs_file(folder, capsys, monkeypatch, command, name, extra, expected):
    """A bad OUTPUTS file: exit 2, one line naming OUTPUTS, the file and the fix."""
    argv = _args(command, name, *extra)
    assert _outcome(capsys, monkeypatch, folder, argv, expected) == "clear"


@pytest.mark.parametrize("command", COMMANDS)
def test_bad_logits_out_of_core(folder, capsys, monkeypatch, command):
    """Out of core the logits are checked as their blocks are read (adapt's
    first read writes their softmax to a file): exit 2, not a traceback."""
    argv = _args(command, "logits_nan.npy", "--logits", "--out-of-core")
    expected = ["OUTPUTS logits_nan.npy", "NaN or +inf", "first in row"]
    assert _outcome(capsys, monkeypatch, folder, argv, expected) == "clear"


# adapt with a given test prior: no pass over OUTPUTS before the last ones
_KNOWN = ["adapt", "nan.npy", "--prior", PRIOR, "--method", "known", "--test-prior"]


@pytest.mark.parametrize(
    "argv",
    [
        [*_KNOWN, PRIOR, "-o", "out.npy"],
        [*_KNOWN, PRIOR, "--labels", "labels.npy"],
        [
            "can",
            "nan.npy",
            "--prior",
            PRIOR,
            "--reference",
            "good.npy",
            "-o",
            "out.npy",
        ],
        ["calibrate", "nan.npy", "--fit-outputs", "good.npy", "--fit-labels"]
        + ["labels.npy", "-o", "out.npy"],
        [*_KNOWN, PRIOR],
        ["calibrate", "nan.npy", "--fit-outputs", "good.npy", "--fit-labels"]
        + ["labels.npy"],
    ],
)
def test_a_bad_row_first_met_writing_out_of_core_is_an_input_error(
    folder, capsys, monkeypatch, argv
):
    """Out of core, a run whose fit read other files meets OUTPUTS' bad rows
    only while writing --output or the report: the same one-line error as in
    memory, not a traceback (exit 1), and no output left. Without either, a
    pass of its own checks them (it exited 0, the file never read)."""
    monkeypatch.chdir(folder)
    for extra in ([], ["--out-of-core"]):
        code = main([*argv, *extra])
        err = capsys.readouterr().err  # (out of core the estimate is printed first)
        errors = [line for line in err.splitlines() if "error:" in line]
        assert code == 2 and "Traceback" not in err, err
        assert len(errors) == 1 and "OUTPUTS nan.npy contains NaN" in errors[0]
        assert not (folder / "out.npy").exists()


def test_nan_in_a_text_file_gets_no_rounding_note(folder, capsys, monkeypatch):
    """A NaN cell fails every comparison: it was taken for rounded rows (a
    'rows sum to 1 only within nan' note) before the NaN error."""
    monkeypatch.chdir(folder)
    assert main(_args("can", "nan.csv")) == 2
    err = capsys.readouterr().err
    assert "note:" not in err and "contains NaN" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_minus_inf_logits_are_read_in_memory_as_out_of_core(
    folder, capsys, monkeypatch, command, tmp_path
):
    """-inf is a logit (the log of a zero probability: what the command's own
    advice, numpy.log(proba), gives): refused in memory, it ran out of core.
    Both now give the same result."""
    proba = np.load(folder / "good.npy")
    proba[0] = np.eye(K)[0]
    with np.errstate(divide="ignore"):
        np.save(tmp_path / "log.npy", np.log(proba))
    shutil.copy(folder / "labels.npy", tmp_path / "labels.npy")
    monkeypatch.chdir(tmp_path)
    results = []
    for extra in ([], ["--out-of-core"]):
        argv = _args(command, "log.npy", "--logits", "-q", "-o", "out.npy", *extra)
        assert main(argv) == 0, capsys.readouterr().err
        capsys.readouterr()
        results.append(np.load(tmp_path / "out.npy"))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6, atol=1e-12)


# Labels files: (file, what stderr must contain, after the option's name).
BAD_LABELS = [
    ("labels_empty.csv", ["holds no data lines", "one label per line"]),
    ("labels_inf.npy", ["label 59 (counting from 0) is inf", "class indices"]),
    ("labels_nan.npy", ["label 0 (counting from 0) is nan", "class indices"]),
    ("labels_half.npy", ["is 1.5, not a whole number", "class indices"]),
    ("labels_strings.npy", ["dtype <U3", "map each class name"]),
    ("labels_names.csv", ["line 2, value 1: 'dog' is not a number", "class indices"]),
    ("labels_out_of_range.npy", ["must lie in 0..9", "from 0 to 10", "subtract 1"]),
    ("labels_negative.npy", ["must lie in 0..9", "from -1 to"]),
    ("labels_one_hot.npy", ["must be 1-D", "argmax(axis=1)"]),
    ("empty.npy", ["is empty (0 bytes)", "numpy.save"]),
]
# As labels of OUTPUTS only (the training labels may be of any number).
BAD_ROW_LABELS = [
    ("labels_short.npy", ["has 59 labels but", "has 60 rows", "one label per row"]),
    ("labels_no_rows.npy", ["has 0 labels but", "one label per row"]),
    ("labels_pandas_0.csv", ["has 61 labels but", "pandas", "header=False"]),
]
LABEL_OPTIONS = [
    ("can", "--labels"),
    ("adapt", "--labels"),
    ("calibrate", "--labels"),
    ("calibrate", "--fit-labels"),
    ("can", "--prior-from-labels"),
    ("adapt", "--prior-from-labels"),
]


def _labels_args(command, option, name):
    if option == "--fit-labels":
        return ["calibrate", "good.npy", "--fit-labels", name]
    if option == "--prior-from-labels":
        return [command, "good.npy", "--prior-from-labels", name]
    return _args(command, "good.npy", option, name)


@pytest.mark.parametrize(("command", "option"), LABEL_OPTIONS)
@pytest.mark.parametrize(
    ("name", "expected"), BAD_LABELS, ids=[case[0] for case in BAD_LABELS]
)
def test_bad_labels_file(folder, capsys, monkeypatch, command, option, name, expected):
    """A bad labels file: exit 2, one line naming the option, the file, the fix."""
    argv = _labels_args(command, option, name)
    expected = [f"{option} {name}", *expected]
    assert _outcome(capsys, monkeypatch, folder, argv, expected) == "clear"


@pytest.mark.parametrize(("command", "option"), LABEL_OPTIONS[:4])
@pytest.mark.parametrize(
    ("name", "expected"), BAD_ROW_LABELS, ids=[case[0] for case in BAD_ROW_LABELS]
)
def test_labels_not_one_per_row(
    folder, capsys, monkeypatch, command, option, name, expected
):
    """Labels whose number differs from the rows of their outputs are refused."""
    argv = _labels_args(command, option, name)
    expected = [f"{option} {name}", *expected]
    assert _outcome(capsys, monkeypatch, folder, argv, expected) == "clear"


# Options: (command line, what stderr must contain).
ONES = ",".join(["1"] * (K - 1))
BAD_OPTIONS = [
    (["can", "good.npy", "--prior", "1,1,1"],
     ["--prior '1,1,1' has 3 entries", "10 classes", "one weight per class"]),
    (["adapt", "good.npy", "--prior", "1,1,1"],
     ["--prior '1,1,1' has 3 entries", "one weight per class"]),
    (["can", "good.npy", "--prior", f"-1,{ONES}"], ["--prior", "entry 0 is -1",
                                                    "non-negative"]),
    (["can", "good.npy", "--prior", f"nan,{ONES}"], ["--prior", "entry 0 is nan"]),
    (["can", "good.npy", "--prior", f"0,{ONES}"],
     ["--prior", "is 0 for the classes [0]", "positive weight"]),
    (["can", "good.npy", "--prior", ",".join(["0"] * K)],
     ["--prior", "every entry is 0"]),
    (["can", "good.npy", "--prior", "a,b"], ["--prior 'a,b' is neither a file",
                                             "comma-separated list of numbers"]),
    (["can", "good.npy", "--prior", "prior_matrix.npy"],
     ["--prior prior_matrix.npy", "one vector of numbers"]),
    (["can", "good.npy", "--prior", "missing.csv"], ["--prior missing.csv: no such"]),
    (["can", "good.npy", "--prior-from-labels", "labels_short.npy", "--k", "2",
      "--prior", PRIOR], ["not allowed with argument", "--help"]),
    (["can", "good.npy"], ["one of the arguments --prior --prior-from-labels is"]),
    (["can", "good.npy", "--prior", PRIOR, "--k", "1"], ["--k must be an int"]),
    (["can", "good.npy", "--prior", PRIOR, "--k", "11"], ["k=11 is larger than",
                                                         "choose k between 2 and 10"]),
    (["can", "good.npy", "--prior", PRIOR, "--k", "three"], ["argument --k",
                                                            "neither an integer"]),
    (["can", "good.npy", "--prior", PRIOR, "--tau", "2"], ["--tau must be a float"]),
    (["can", "good.npy", "--prior", PRIOR, "--tau", "nan"], ["--tau must be a float"]),
    (["can", "good.npy", "--prior", PRIOR, "--tau", "x"], ["argument --tau",
                                                          "invalid float value"]),
    (["can", "good.npy", "--prior", PRIOR, "--alpha", "0"], ["--alpha must be"]),
    (["can", "good.npy", "--prior", PRIOR, "--n-iter", "0"], ["--n-iter must be"]),
    (["can", "good.npy", "--prior", PRIOR, "--n-iter", "3", "--out-of-core"],
     ["--n-iter 3 out of core needs --reference FILE", "or --n-iter 1"]),
    (["can", "good.npy", "--prior", PRIOR, "--uncertainty", "gini"],
     ["argument --uncertainty: invalid choice", "renormalized"]),
    (["can", "good.npy", "--prior", PRIOR, "--reference", "nine_classes.npy"],
     ["--reference nine_classes.npy has 9 classes", "same model"]),
    (["can", "good.npy", "--prior", PRIOR, "--reference", "nan.npy"],
     ["--reference nan.npy contains NaN"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--method", "known"],
     ["--method known", "pass it with --test-prior"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--test-prior", PRIOR],
     ["--test-prior is used only with --method known", "Drop --test-prior"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--method", "known", "--test-prior",
      "-1,1,1"], ["--test-prior '-1,1,1' has 3 entries", "one weight per class"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--method", "known", "--test-prior",
      f"-1,{ONES}"], ["--test-prior", "entry 0 is -1", "non-negative"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--method", "bbse"],
     ["--method bbse needs --val-outputs and --val-labels"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--method", "known", "--test-prior",
      PRIOR, "--val-outputs", "good.npy"],
     ["--val-outputs is used only with --method mle or map or bbse",
      "Drop --val-outputs"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--shift-level", "0"],
     ["--shift-level must be a float in the range (0.0, 1.0]"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--method", "bbse", "--val-outputs",
      "nine_classes.npy", "--val-labels", "labels.npy"],
     ["--val-outputs nine_classes.npy has 9 classes"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--method", "bbse", "--val-outputs",
      "good.npy", "--val-labels", "labels_short.npy"],
     ["--val-labels labels_short.npy has 59 labels but --val-outputs has 60"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--dirichlet-alpha", "3"],
     ["--dirichlet-alpha is used only with --method map"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--method", "map", "--dirichlet-alpha",
      "0.5"], ["--dirichlet-alpha must be a float in the range [1"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--method", "bbse", "--solver", "em"],
     ["--solver is used only with --method mle or map"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--tol", "0"], ["--tol must be"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--max-iter", "0"], ["--max-iter must"]),
    (["adapt", "good.npy", "--prior", PRIOR, "--method", "em"],
     ["argument --method: invalid choice: 'em'", "mle"]),
    (["calibrate", "good.npy", "--fit-labels", "labels.npy", "--fit-outputs",
      "nine_classes.npy"], ["--fit-outputs nine_classes.npy has 9 classes"]),
    (["calibrate", "good.npy", "--fit-labels", "labels.npy", "--method", "ts"],
     ["argument --method: invalid choice: 'ts'", "bcts"]),
    (["calibrate", "good.npy"], ["the following arguments are required: --fit-labels"]),
    (["calibrate", "good.npy", "--fit-labels", "labels.npy", "--method", "vs",
      "--reg-lambda", "1"], ["--reg-lambda is used only with --method dirichlet"]),
    (["calibrate", "good.npy", "--fit-labels", "labels.npy", "--reg-mu", "1"],
     ["--reg-mu is used only with --method dirichlet", "--method ec"]),
    (["calibrate", "good.npy", "--fit-labels", "labels.npy", "--method",
      "dirichlet", "--reg-lambda", "-1"], ["--reg-lambda must be", "[0.0, 1e+100]"]),
    (["calibrate", "good.npy", "--fit-labels", "labels.npy", "--method",
      "dirichlet", "--reg-lambda", "some"],
     ["argument --reg-lambda: 'some' is neither a number nor 'auto'"]),
    (["calibrate", "good.npy", "--fit-labels", "labels.npy", "--method",
      "dirichlet", "--reg-lambda", "1", "--reg-mu", "-2"], ["--reg-mu must be"]),
    (["calibrate", "good.npy", "--fit-labels", "labels.npy", "--fit-outputs",
      "typo_middle.csv"], ["--fit-outputs typo_middle.csv: line 6"]),
    (["can", "good.npy", "--prior", PRIOR, "-o", "out.xlsx"],
     ["--output out.xlsx: unknown file type"]),
    (["can", "good.npy", "--prior", PRIOR, "-o", "no_folder/out.npy"],
     ["--output no_folder/out.npy: the folder", "create it first"]),
    (["can", "good.npy", "--prior", PRIOR, "-o", "folder.npy"],
     ["--output folder.npy is a folder"]),
    (["can", "good.npy", "--prior", PRIOR, "--diagram", "d.png"],
     ["--diagram needs --labels"]),
    (["can", "good.npy", "--prior", PRIOR, "--labels", "labels.npy", "--diagram",
      "d.xyz"], ["--diagram d.xyz: matplotlib cannot write this file type"]),
    (["no-such-command"], ["invalid choice: 'no-such-command'", "--help"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "expected"), BAD_OPTIONS, ids=[" ".join(c[0][2:]) for c in BAD_OPTIONS]
)
def test_bad_options(folder, capsys, monkeypatch, argv, expected):
    """A bad or contradictory option: exit 2, one line naming it and the fix."""
    if "--diagram" in argv:
        pytest.importorskip("matplotlib")
    assert _outcome(capsys, monkeypatch, folder, argv, expected) == "clear"


def test_the_table_covers_every_command():
    """The table is not vacuous: each command meets bad files and bad options."""
    commands = {argv[0] for argv, _ in BAD_OPTIONS}
    assert set(COMMANDS) <= commands
    assert len(BAD_OUTPUTS) >= 40 and len(BAD_LABELS) + len(BAD_ROW_LABELS) >= 12


# -- valid files that look odd ------------------------------------------------------


def _tricky_files(folder, proba, labels):
    """Files that hold exactly ``proba`` (or its logits), written as users do."""
    pd = pytest.importorskip("pandas")
    plain = _csv(proba)
    names = {}
    names["bom.csv"] = ("outputs", [])
    (folder / "bom.csv").write_text(plain, encoding="utf-8-sig")
    names["utf16.csv"] = ("outputs", [])
    (folder / "utf16.csv").write_text(plain, encoding="utf-16")
    names["crlf.csv"] = ("outputs", [])
    (folder / "crlf.csv").write_bytes(plain.replace("\n", "\r\n").encode())
    names["comments.csv"] = ("outputs", ["skipped 2 comment line(s)"])
    (folder / "comments.csv").write_text("# model A\n" + plain + "# end\n")
    names["pandas.csv"] = ("outputs", ["line 1 '0,1,2,3,4,5,6,7,8,9' read as a header"])
    pd.DataFrame(proba).to_csv(folder / "pandas.csv", index=False)
    names["pandas_bom.csv"] = ("outputs", ["read as a header"])
    pd.DataFrame(proba).to_csv(
        folder / "pandas_bom.csv", index=False, encoding="utf-8-sig"
    )
    names["named.csv"] = ("outputs", ["line 1 'p0,p1,", "holds no numbers"])
    pd.DataFrame(proba, columns=[f"p{i}" for i in range(K)]).to_csv(
        folder / "named.csv", index=False
    )
    names["class_ids.csv"] = ("outputs", ["'1,2,3,4,5,6,7,8,9,10' read as a header"])
    pd.DataFrame(proba, columns=range(1, K + 1)).to_csv(
        folder / "class_ids.csv", index=False
    )
    names["pandas_logits.csv"] = ("logits", ["read as a header"])
    pd.DataFrame(np.log(proba)).to_csv(folder / "pandas_logits.csv", index=False)
    names["savetxt_header.csv"] = ("outputs", ["skipped 1 comment line(s)"])
    np.savetxt(folder / "savetxt_header.csv", proba, delimiter=",", header="p")
    return names


@pytest.mark.parametrize("command", COMMANDS)
def test_tricky_but_valid_files_give_the_npy_result(
    folder, cifar10, capsys, monkeypatch, tmp_path, command
):
    """BOM, UTF-16, CRLF, comments, pandas' header: the same result as the .npy,
    and a note on stderr for every line read as a header or skipped."""
    monkeypatch.chdir(folder)
    proba = np.load(folder / "good.npy")
    files = _tricky_files(tmp_path, proba, None)

    def result(path, logits=False):
        out = tmp_path / "out.npy"
        argv = _args(command, str(path), "-o", out, "-q")
        code = main([*argv, "--logits"] if logits else argv)
        _, err = capsys.readouterr()
        assert code == 0, err
        return np.load(out), err

    expected, _ = result(folder / "good.npy")
    for name, (kind, notes) in files.items():
        got, err = result(tmp_path / name, logits=kind == "logits")
        assert got.shape == expected.shape, name  # no row dropped or added
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-12, err_msg=name)
        for note in notes:
            assert note in err, (name, err)


def test_integer_rows_under_0_1_header_are_data(tmp_path, capsys):
    """A first line 0,1 over lines that hold integer cells (numpy.savetxt with
    %g of a confident binary model) is data, not pandas' header."""
    proba = np.array([[0.0, 1.0], [0.25, 0.75], [1.0, 0.0], [0.5, 0.5]])
    path = tmp_path / "binary.csv"
    np.savetxt(path, proba, delimiter=",", fmt="%g")
    out = tmp_path / "out.npy"
    argv = ["adapt", path, "--prior", "1,1", "--method", "known", "--test-prior"]
    code = main([*argv, "1,1", "-o", out, "-q"])  # (the identity)
    _, err = capsys.readouterr()
    assert code == 0, err
    np.testing.assert_array_equal(np.load(out), proba)
    assert "header" not in err


@pytest.mark.parametrize("name", ["labels_with_header.csv", "labels_pandas_0.csv"])
def test_training_labels_csv_header_is_reported(folder, capsys, monkeypatch, name):
    """A labels header is skipped with a note; pandas' bare "0" header cannot be
    told from a label 0, so it is counted but the user is told how to check."""
    monkeypatch.chdir(folder)
    code = main(["can", "good.npy", "--prior-from-labels", name, "-q"])
    _, err = capsys.readouterr()
    assert code == 0, err
    expected = "read as a header" if "with_header" in name else "read as a label"
    assert expected in err


def test_rounded_text_probabilities_are_renormalised(folder, capsys, tmp_path):
    """Probabilities written with 4 or 6 decimals (df.round(4), "%.6f") sum to
    1 only within the rounding: they were refused with the advice to pass
    --logits, which then took the softmax of probabilities (exit 0, ECE 0.69
    for 0.06). Each row is divided by its sum, with a note; under --logits
    they are refused as probabilities; percentages are refused as such."""
    proba = np.load(folder / "good.npy")
    np.savetxt(tmp_path / "r4.csv", proba, delimiter=",", fmt="%.4f")
    np.savetxt(tmp_path / "r6.csv", proba, delimiter=",", fmt="%.6f")
    np.savetxt(tmp_path / "pct.csv", 100 * proba, delimiter=",", fmt="%.2f")
    identity = ["--method", "known", "--test-prior", PRIOR, "--prior", PRIOR]
    for name, decimals in (("r4.csv", 4), ("r6.csv", 6)):
        out = tmp_path / f"{name}.npy"
        code = main(["adapt", tmp_path / name, *identity, "-o", out, "-q"])
        _, err = capsys.readouterr()
        assert code == 0, err
        assert "rounded when written as text" in err
        got = np.load(out)
        np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(got, proba, atol=K * 10.0**-decimals)
        code = main(["adapt", tmp_path / name, *identity, "--logits", "-q"])
        _, err = capsys.readouterr()
        assert code == 2 and "holds probabilities" in err
    for extra in ([], ["--logits"]):
        code = main(["adapt", tmp_path / "pct.csv", *identity, *extra, "-q"])
        _, err = capsys.readouterr()
        assert code == 2 and "percentages" in err and "Traceback" not in err


def test_class_id_header_over_integer_rows_is_refused(tmp_path, capsys):
    """0..K-1 (or 1..K) over integer logits (a quantised model) could be column
    names or a row of data: it was read as data, a sample too many (exit 0).
    Refused with the fix; 0,1 (K = 2) stays a row of probabilities."""
    rows = np.array([[-5, 1, 3], [2, 0, -1], [1, 1, 4]])
    for start in (0, 1):
        path = tmp_path / f"ints{start}.csv"
        header = ",".join(str(start + k) for k in range(3))
        path.write_text(header + "\n" + _csv(rows))
        code = main(["can", path, "--logits", "--prior", "1,1,1", "-q"])
        _, err = capsys.readouterr()
        assert code == 2 and "could be data" in err and "header=False" in err


def test_logits_take_the_logits_member_of_an_npz(folder, capsys, tmp_path):
    """An .npz holding predictions and logits (netcal's layout): --logits read
    'predictions' and refused them as probabilities; it reads 'logits'."""
    proba = np.load(folder / "good.npy")
    np.savez(tmp_path / "both.npz", predictions=proba, logits=np.log(proba) + 1.0)
    identity = ["--method", "known", "--test-prior", PRIOR, "--prior", PRIOR, "-q"]
    out = tmp_path / "out.npy"
    code = main(["adapt", tmp_path / "both.npz", "--logits", *identity, "-o", out])
    _, err = capsys.readouterr()
    assert code == 0, err
    np.testing.assert_allclose(np.load(out), proba, rtol=1e-10)
    code = main(["adapt", tmp_path / "both.npz", *identity, "-o", out])  # (predictions)
    assert code == 0
    np.testing.assert_allclose(np.load(out), proba, rtol=1e-10)


@pytest.mark.parametrize("command", ["can", "adapt"])
def test_float16_outputs_out_of_core_as_in_memory(
    folder, capsys, monkeypatch, command, tmp_path
):
    """float16 rows sum to 1 within ~1e-3: in memory they are renormalised;
    out of core they were refused ('row 41 sums to 1.00037')."""
    np.save(tmp_path / "p16.npy", np.load(folder / "good.npy").astype(np.float16))
    monkeypatch.chdir(tmp_path)
    results = []
    for extra in ([], ["--out-of-core"]):
        argv = _args(command, "p16.npy", "--shift-level", "1", "-q", "-o", "out.npy")
        argv = [
            a for a in argv if command == "adapt" or a not in ("--shift-level", "1")
        ]
        assert main([*argv, *extra]) == 0, capsys.readouterr().err
        capsys.readouterr()
        results.append(np.load(tmp_path / "out.npy"))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12, atol=1e-15)


def test_val_labels_without_a_class_are_refused_before_the_passes(
    folder, capsys, monkeypatch, tmp_path
):
    """MLE's interval is recentred on every class's misfit: --val-labels
    without a class failed after the passes, in the library's words ('y_cal',
    'calibration=None'). Now at once, naming the option and the fix."""
    labels = np.load(folder / "labels.npy")
    np.save(tmp_path / "val_y.npy", np.where(labels == K - 1, K - 2, labels))
    shutil.copy(folder / "good.npy", tmp_path / "good.npy")
    monkeypatch.chdir(tmp_path)
    argv = _args("adapt", "good.npy", "--val-outputs", "good.npy", "--val-labels")
    assert main([*argv, "val_y.npy"]) == 2
    err = capsys.readouterr().err
    assert f"--val-labels val_y.npy has no row of class {K - 1}" in err
    assert "drop --val-labels" in err and "y_cal" not in err


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("empty.npy", "is empty (0 bytes); write the array with numpy.save"),
        ("text.npy", "holds text, not a binary .npy file"),
        ("zip_named.npy", "is a zip archive"),
    ],
)
def test_misnamed_npy_out_of_core_gets_the_fix_as_in_memory(
    folder, capsys, monkeypatch, name, expected
):
    """Out of core, numpy's own words ('the magic string is not correct')
    were the whole message; the file's content and the fix are named now."""
    for extra in ([], ["--out-of-core"]):
        argv = _args("can", name, *extra)
        assert _outcome(capsys, monkeypatch, folder, argv, [expected]) == "clear"


def test_an_empty_folder_as_zarr_output_is_refused_as_such(
    folder, capsys, monkeypatch, tmp_path
):
    """An existing empty folder named as a .zarr --output is refused (it may be
    a mount point, or meant for other files), and the message says it is
    empty, not that it 'holds other files'."""
    (tmp_path / "out.zarr").mkdir()
    shutil.copy(folder / "good.npy", tmp_path / "good.npy")
    argv = _args("can", "good.npy", "--out-of-core", "-o", "out.zarr")
    expected = ["--output out.zarr exists", "(an empty folder)"]
    assert _outcome(capsys, monkeypatch, tmp_path, argv, expected) == "clear"


def test_library_advice_is_given_in_the_commands_options(tmp_path, capsys):
    """The library's advice names its arguments and functions (k='auto', the
    `reference` argument, fit_temperature); the command line's errors and
    warnings name the options instead."""
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(4), size=200)
    np.save(tmp_path / "p.npy", proba)
    y = proba.argmax(axis=1)
    y[y == 2] = 1
    np.save(tmp_path / "y.npy", y)
    prior = ["--prior", "1,1,1,1"]
    cases = [
        (["can", tmp_path / "p.npy", *prior, "--k", "5"], "or --k auto", "k='auto'"),
        (
            ["can", tmp_path / "p.npy", *prior, "--tau", "0"],
            "Lower --tau, or pass --reference FILE",
            "CANClassifier",
        ),
        (
            ["calibrate", tmp_path / "p.npy", "--fit-labels", tmp_path / "y.npy",
             "--method", "vs"],
            "or use --method ec, nll or bcts",
            "fit_temperature",
        ),
    ]  # fmt: skip
    for argv, said, unsaid in cases:
        main([str(a) for a in argv])
        err = capsys.readouterr().err
        assert said in err and unsaid not in err, err
