"""Run the bad-input table of the test suite and count its outcomes.

Every case calls one public function or estimator method with one bad
argument (tests/test_bad_input.py), runs one ``skprior`` command on a bad
file or with a fault (:func:`cli_cases`: out of core, a full disk, an output
over an input), or tries one of the library's edge cases of issue 29 (inputs
that gave silent wrong answers, hangs or tracebacks), which must end as a
clear error or a right answer (counted as clear; a wrong one as silent). An
outcome is *clear* (ValueError or TypeError naming the argument), *unclear*
(the right type, a message that does not name it), *traceback* (any other
exception) or *silent* (no error).

Usage::

    PYTHONPATH=$PWD python benchmarks/adversarial_inputs.py [-v]

``-v`` prints every case that is not clear, with its message.
"""

import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_bad_input import CASES, OUTCOMES, Case, count_outcomes, run_case  # noqa: E402

# -- the library's edges (issue 29) ------------------------------------------------
# Cases of the second adversarial run on the library (not the CLI): each must
# end as a clear error (``LIBRARY_ERRORS``: ValueError/TypeError whose message
# matches) or a right answer (``LIBRARY_ANSWERS``: ``check(result)`` holds;
# a wrong result counts as silent, an exception as a traceback).


def _library_data():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((300, 3)) * 2
    y = rng.integers(0, 3, 300)
    y[:100] = logits[:100].argmax(axis=1)
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return logits, y, proba


def _many_classes(n_classes):
    rng = np.random.default_rng(0)
    y = np.arange(2 * n_classes) % n_classes
    logits = rng.standard_normal((len(y), n_classes))
    logits[np.arange(len(y)), y] += 5
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    return logits, y, proba / proba.sum(axis=1, keepdims=True)


def _fitted_gate(level):
    from sklearn.linear_model import LogisticRegression

    from skprior import PriorAdaptedClassifier

    logits, y, _ = _library_data()
    wrapper = PriorAdaptedClassifier(LogisticRegression().fit(logits, y)).fit(logits, y)
    wrapper.update_prior(logits[:50])
    return wrapper.set_params(shift_level=level)


def _ovo_svc():
    from sklearn.datasets import load_iris
    from sklearn.svm import SVC

    from skprior import TemperatureCalibratedClassifier

    X, y = load_iris(return_X_y=True)
    model = SVC(decision_function_shape="ovo").fit(X[::2], y[::2])
    return TemperatureCalibratedClassifier(model).fit(X[1::2], y[1::2])


def _library_errors():
    import skprior as sp

    logits, y, proba = _library_data()
    huge = logits.copy()
    huge[3, 1] = 1e307
    cases = [
        Case("svc-ovo-as-logits", _ovo_svc, "decision_function_shape"),
        Case("rlls-reg-True", lambda: sp.rlls_test_prior(
            proba, sp.joint_confusion_matrix(proba, y), reg=True), r"reg=True"),
        Case("effective_train_prior-nan-label", lambda: sp.effective_train_prior(
            np.array([0.0, 1.0, np.nan])), r"\by\b.*NaN"),
        Case("effective_train_prior-class-weight-0", lambda: sp.effective_train_prior(
            np.array([0, 1, 2]), sample_weight=np.array([1.0, 1.0, 0.0])),
            "weight 0"),
        Case("train_prior-1e-320", lambda: sp.estimate_test_prior(
            proba, [1e-320, 0.5, 0.5]), "train_prior"),
        Case("reg_lambda-1e308", lambda: sp.fit_dirichlet_calibration(
            logits, y, reg_lambda=1e308), "reg_lambda"),
        Case("rlls-2000-classes", lambda: sp.rlls_test_prior(
            *_rlls_inputs(2000)), "RLLS takes at most"),
        Case("dirichlet-1200-classes", lambda: sp.fit_dirichlet_calibration(
            np.zeros((2400, 1200)), np.arange(2400) % 1200), "Dirichlet.*at most"),
    ]  # fmt: skip
    cases += _out_cases(proba)
    for fit in (sp.fit_temperature, sp.fit_bias_corrected_temperature,
                sp.fit_vector_scaling):  # fmt: skip
        for sign in (1, -1):
            bad = huge * sign
            call = lambda fit=fit, bad=bad: fit(bad, y)  # noqa: E731
            cases.append(Case(f"{fit.__name__}-logits-{sign}e307", call, "logits"))
    for level in (7.0, 2.0, 0):
        for method in ("predict_proba", "update_prior", "test_shift"):
            cases.append(Case(
                f"shift_level-{level}-after-fit-{method}",
                lambda level=level, method=method: getattr(
                    _fitted_gate(level), method)(logits[50:100]),
                "shift_level"))  # fmt: skip
    try:
        import torch
    except ImportError:
        return cases
    meta = torch.empty((300, 3), device="meta", dtype=torch.float64)
    labels = torch.tensor(y)
    for name, call in _tensor_calls().items():
        cases.append(Case(f"{name}-meta-tensor",
                          lambda call=call: call(meta, meta, labels),
                          "on PyTorch's 'meta' device"))  # fmt: skip
    return cases


def _out_cases(proba):
    """``alternating_normalization(..., out=)`` with a bad ``out``."""
    from skprior import alternating_normalization

    prior = np.full(proba.shape[1], 1 / proba.shape[1])
    read_only = np.empty_like(proba)
    read_only.flags.writeable = False
    twice = np.concatenate([proba, proba])
    bad = {
        "shape": (proba, np.empty((2, 2)), "has shape"),
        "dtype": (proba, proba.astype(np.float32), "dtype float32"),
        "read-only": (proba, read_only, "read-only"),
        "overlapping": (twice[:-1], twice[1:], "overlaps proba"),
        "list": (proba, proba.tolist(), "out"),
    }
    return [
        Case(f"can-out-{name}",
             lambda p=p, o=o: alternating_normalization(p, prior, out=o), match)
        for name, (p, o, match) in bad.items()
    ]  # fmt: skip


def _rlls_inputs(n_classes):
    from skprior import joint_confusion_matrix

    _, y, proba = _many_classes(n_classes)
    return proba, joint_confusion_matrix(proba, y)


def _tensor_calls():
    import skprior as sp

    prior = np.full(3, 1 / 3)
    return {
        "label_shift_test": lambda P, L, Y: sp.label_shift_test(P[:50], P),
        "joint_confusion_matrix": lambda P, L, Y: sp.joint_confusion_matrix(P, Y),
        "estimate_source_prior": lambda P, L, Y: sp.estimate_source_prior(P, Y),
        "estimate_test_prior": lambda P, L, Y: sp.estimate_test_prior(P, prior),
        "adjust_to_prior": lambda P, L, Y: sp.adjust_to_prior(P, prior, prior),
        "fit_vector_scaling": lambda P, L, Y: sp.fit_vector_scaling(L, Y),
        "fit_dirichlet_calibration": lambda P, L, Y: sp.fit_dirichlet_calibration(
            L, Y, reg_lambda=1e-3
        ),
        "fit_temperature": lambda P, L, Y: sp.fit_temperature(L, Y),
        "fit_bias_corrected_temperature": (
            lambda P, L, Y: sp.fit_bias_corrected_temperature(L, Y)
        ),
        "softmax_temperature": lambda P, L, Y: sp.softmax_temperature(L, 2.0),
    }


def _level_on_real_outputs():
    """Rejections at level 0.05 of 40 random CIFAR-100 halves of 300 / 300."""
    from _data import load_model_outputs

    from skprior import label_shift_test

    proba = load_model_outputs("densenet-bc-100-cifar-100")[0]
    rng = np.random.default_rng(3)
    rejected = 0
    for _ in range(40):
        rows = rng.permutation(len(proba))
        rejected += label_shift_test(
            proba[rows[300:600]], proba[rows[:300]], level=0.05
        ).shifted
    return rejected


def _library_answers():
    """``(id, call, check)``: right when ``check(call())`` holds."""
    import skprior as sp
    from skprior._utils._validation import check_prior

    logits, y, proba = _library_data()
    answers = [
        ("label_shift_test-level-cifar100-300/300", _level_on_real_outputs,
         lambda rejected: rejected <= 7),  # P(Binomial(40, 0.05) > 7) < 0.002
        ("train_prior-dict-vs-series-unsorted-classes",
         lambda: [check_prior(prior, 3, classes=[2, 1, 0]) for prior in
                  ({0: 0.2, 1: 0.3, 2: 0.5}, _series({0: 0.2, 1: 0.3, 2: 0.5}))],
         lambda priors: np.allclose(priors[0], priors[1])
         and np.allclose(priors[0], [0.5, 0.3, 0.2])),
        ("labels-0..2-for-classes-5,6,7-warn", lambda: _positions_warning(logits, y),
         lambda messages: any("read as column positions" in m for m in messages)),
        ("bbse-2000-classes", lambda: sp.bbse_test_prior(_rlls_inputs(2000)[0][:500],
                                                         _rlls_inputs(2000)[1]),
         lambda prior: abs(prior.sum() - 1) < 1e-9),
        ("label_shift_test-2000-classes",
         lambda: sp.label_shift_test(*_halves(_many_classes(2000)[2])),
         lambda result: np.isfinite(result.pvalue)),
    ]  # fmt: skip
    for weight in (1e308, 1e-320):
        w = np.full(len(y), weight)
        for name, call in {
            "fit_temperature": lambda w: sp.fit_temperature(logits, y, sample_weight=w),
            "joint_confusion_matrix": lambda w: sp.joint_confusion_matrix(
                proba, y, sample_weight=w),
            "estimate_source_prior": lambda w: sp.estimate_source_prior(
                proba, y, sample_weight=w),
            "effective_train_prior": lambda w: sp.effective_train_prior(
                y, sample_weight=w),
            "fit_vector_scaling": lambda w: sp.fit_vector_scaling(
                logits, y, sample_weight=w)[0],
        }.items():  # fmt: skip
            expected = call(None)
            same = lambda got, expected=expected: np.allclose(got, expected)  # noqa: E731
            answers.append(
                (f"{name}-weights-{weight:g}", lambda c=call, w=w: c(w), same)
            )
    try:
        import torch
    except ImportError:
        return answers
    rows = np.random.default_rng(0).dirichlet(np.ones(100), size=200)
    uniform = np.full(100, 0.01)
    answers.append(("bfloat16-probabilities",
                    lambda: sp.adjust_to_prior(torch.tensor(rows, dtype=torch.bfloat16),
                                               uniform, uniform),
                    lambda got: got.shape == (200, 100)))  # fmt: skip
    labels = torch.tensor(y)
    for name, call in _tensor_calls().items():
        answers.append((f"{name}-requires-grad",
                        lambda call=call: call(torch.tensor(proba, requires_grad=True),
                                               torch.tensor(logits, requires_grad=True),
                                               labels),
                        lambda got: got is not None))  # fmt: skip
    return answers


def _dask_answers():
    """Rows kept by a Dask boolean filter: unknown chunk sizes, chunks of no rows.

    Right when NumPy's answer on the same rows comes back (tests/test_dask.py).
    """
    try:
        from test_dask import FILTERED_CALLS, _filtered
    except ImportError:  # (Dask not installed)
        return []
    from _data import load_model_outputs

    proba, labels = load_model_outputs("wideresnet-16-4-cifar-10")
    proba, labels = proba[:900].astype(np.float64), labels[:900]
    keep = np.ones(900, dtype=bool)
    keep[150:450] = False  # (two whole chunks of no rows)
    keep[600:] = proba[600:, 3] < 0.5
    answers = []
    for known in (False, True):
        p, z = _filtered(proba, keep, known), _filtered(np.log(proba), keep, known)
        for name, call in FILTERED_CALLS.items():
            expected = call(proba[keep], np.log(proba[keep]), labels[keep])
            answers.append((
                f"dask-{'empty-chunks' if known else 'unknown-chunk-sizes'}-{name}",
                lambda call=call, p=p, z=z: np.asarray(call(p, z, labels[keep])),
                lambda got, expected=expected: np.allclose(got, expected, atol=1e-7),
            ))  # fmt: skip
    return answers


def _series(content):
    import pandas as pd

    return pd.Series(content)


def _halves(proba):
    rows = np.random.default_rng(0).permutation(len(proba))
    half = len(rows) // 2
    return proba[rows[:half]], proba[rows[half:]]


def _positions_warning(logits, y):
    from sklearn.linear_model import LogisticRegression

    from skprior import CANClassifier

    model = LogisticRegression().fit(logits, y + 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CANClassifier(model).fit(logits, y)
    return [str(w.message) for w in caught]


def library_outcomes():
    """``{outcome: [(id, detail), ...]}`` of the library's edge cases."""
    outcomes = {outcome: [] for outcome in OUTCOMES}
    for case in _library_errors():
        outcome, detail = run_case(case)
        outcomes[outcome].append((case, detail))
    for name, call, check in _library_answers() + _dask_answers():
        case = Case(name, call, "")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                result = call()
            except Exception as exc:  # noqa: BLE001 - counted as a traceback
                outcomes["traceback"].append((case, exc))
                continue
        right = bool(check(result))
        outcomes["clear" if right else "silent"].append((case, result))
    return outcomes


def main(argv=None):
    import tempfile

    argv = sys.argv[1:] if argv is None else argv
    with tempfile.TemporaryDirectory() as folder:
        outcomes = count_outcomes(CASES + cli_cases(Path(folder)))
    for name, found in library_outcomes().items():  # (right answers: clear)
        outcomes[name] += found
    tried = sum(len(found) for found in outcomes.values())
    counts = ", ".join(f"{name} {len(outcomes[name])}" for name in OUTCOMES)
    print(f"tried {tried}: {counts}")
    if "-v" in argv:
        for name in OUTCOMES[1:]:
            for case, detail in outcomes[name]:
                message = str(detail).replace("\n", " ")[:300]
                print(f"{name:9} {case.id}: {type(detail).__name__}: {message}")
    return 0 if len(outcomes["clear"]) == tried else 1


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
