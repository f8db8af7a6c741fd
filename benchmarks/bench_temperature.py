"""Temperature calibration: EC vs NLL vs BCTS vs scikit-learn's temperature scaling.

For each dataset, a model's outputs are calibrated on one split and measured on
another: top-label ECE (15 equal-width bins) and log loss (NLL), before
calibration and after each calibrator. Also the fit time of EC and of
scikit-learn's ``CalibratedClassifierCV(FrozenEstimator(model),
method="temperature")`` on the same calibration data, as a ratio measured in the
same run (best of several repeats).

* Stored CIFAR outputs (netcal, cleanlab): the 10,000 test-set softmax outputs
  are split in two random halves (calibrate / evaluate). They are wrapped in a
  tiny fitted "array model" whose ``predict_proba(X)`` returns the stored rows
  indexed by ``X[:, 0]``, so that both our wrapper and scikit-learn's go through
  their ordinary estimator path (both then read logits as ``log(predict_proba)``;
  scikit-learn adds 1e-12 before the log).
* PMLB datasets: a random forest and a HistGradientBoostingClassifier fitted on
  60% (stratified), calibrated on 20%, evaluated on 20%. The forest gives
  probabilities only (logits ``log p``); gradient boosting has a
  ``decision_function`` (its raw logits), which both wrappers use.

Run from the repository root::

    python benchmarks/bench_temperature.py [--busy]

``--busy`` times everything with a second process keeping one core busy.
"""

import argparse
import itertools
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

# _TemperatureScaling is scikit-learn's private calibrator, imported here (a
# benchmark, not the package) to time its optimiser on the arrays ours gets.
from sklearn.calibration import CalibratedClassifierCV, _TemperatureScaling
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.frozen import FrozenEstimator
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import StoredOutputsClassifier, best_time, busy_machine  # noqa: E402
from _data import CIFAR_OUTPUTS, load_model_outputs, load_pmlb  # noqa: E402

from skprior import TemperatureCalibratedClassifier, fit_temperature  # noqa: E402
from skprior.metrics import expected_calibration_error  # noqa: E402

PMLB = ("letter", "satimage", "pendigits", "yeast", "page_blocks")
N_REPEATS = 3
N_ARRAY_REPEATS = 7
SEED = 0


def scores(y, proba, labels):
    # Stored float32 softmax rows sum to 1 within ~1e-7 only; renormalise in
    # float64 so that log_loss does not warn (changes the NLL by ~1e-7).
    proba = np.asarray(proba, dtype=np.float64)
    proba = proba / proba.sum(axis=1, keepdims=True)
    return (
        expected_calibration_error(y, proba, n_bins=15, labels=labels),
        log_loss(y, proba, labels=labels),
    )


def array_times(model, X_cal, y_cal):
    """Best-of-N fit time of EC and of scikit-learn's optimiser on the same arrays.

    Both get the model's raw output once computed (decision_function, else
    predict_proba): ours as logits (log p for probabilities), scikit-learn's
    as it reads them itself. Calls alternate, so that load from other
    processes on the machine hits both alike.
    """
    y_index = np.searchsorted(model.classes_, y_cal)
    if hasattr(model, "decision_function"):
        raw = model.decision_function(X_cal)
        logits = raw
    else:
        raw = model.predict_proba(X_cal)
        with np.errstate(divide="ignore"):
            logits = np.log(raw.astype(np.float64))
    ours, theirs = np.inf, np.inf
    for _ in range(N_ARRAY_REPEATS):
        start = time.perf_counter()
        fit_temperature(logits, y_index)
        ours = min(ours, time.perf_counter() - start)
        start = time.perf_counter()
        _TemperatureScaling().fit(raw, y_index)
        theirs = min(theirs, time.perf_counter() - start)
    return ours, theirs


def evaluate(name, model, X_cal, y_cal, X_test, y_test):
    """One row of the table: scores before/after each calibrator, and times."""
    labels = model.classes_
    row = {"dataset": name, "n_cal": len(y_cal), "n_classes": len(labels)}
    row["raw"] = scores(y_test, model.predict_proba(X_test), labels)
    frozen = FrozenEstimator(model)
    times = {}
    with warnings.catch_warnings():
        # Should a calibrator find no finite temperature, say so in the table
        # rather than stop the run; scikit-learn's 5-fold split of the
        # calibration data warns on classes with fewer than 5 samples.
        warnings.simplefilter("ignore")
        for method in ("ec", "nll", "bcts"):
            calibrator = TemperatureCalibratedClassifier(frozen, method=method)
            repeats = N_REPEATS if method == "ec" else 1
            times[method], fitted = best_time(
                lambda c=calibrator: c.fit(X_cal, y_cal), repeats
            )
            row[method] = scores(y_test, fitted.predict_proba(X_test), labels)
            row[f"T_{method}"] = fitted.temperature_
        sk = CalibratedClassifierCV(frozen, method="temperature")
        times["sklearn"], fitted = best_time(lambda: sk.fit(X_cal, y_cal), N_REPEATS)
        row["sklearn"] = scores(y_test, fitted.predict_proba(X_test), labels)
        beta = fitted.calibrated_classifiers_[0].calibrators[0].beta_
        row["T_sklearn"] = float(1 / beta)
        row["a_ec"], row["a_sklearn"] = array_times(model, X_cal, y_cal)
    row["t_ec"], row["t_nll"], row["t_sklearn"] = (
        times["ec"],
        times["nll"],
        times["sklearn"],
    )
    return row


def cifar_rows():
    rng = np.random.default_rng(SEED)
    for name in CIFAR_OUTPUTS:
        proba, y = load_model_outputs(name)
        order = rng.permutation(len(y))
        cal, test = order[: len(y) // 2], order[len(y) // 2 :]
        model = StoredOutputsClassifier(proba).fit()
        X = np.arange(len(y))[:, None]
        yield evaluate(name, model, X[cal], y[cal], X[test], y[test])


def pmlb_rows():
    models = {
        "RF": lambda: RandomForestClassifier(
            n_estimators=100, n_jobs=-1, random_state=SEED
        ),
        "HGB": lambda: HistGradientBoostingClassifier(random_state=SEED),
    }
    for dataset in PMLB:
        X, y = load_pmlb(dataset)
        X_train, X_rest, y_train, y_rest = train_test_split(
            X, y, train_size=0.6, stratify=y, random_state=SEED
        )
        X_cal, X_test, y_cal, y_test = train_test_split(
            X_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=SEED
        )
        for model_name, make in models.items():
            model = make().fit(X_train, y_train)
            yield evaluate(
                f"{dataset} {model_name}", model, X_cal, y_cal, X_test, y_test
            )


def markdown(rows):
    methods = ("raw", "ec", "nll", "bcts", "sklearn")
    head = (
        "| data / model | K | n_cal | "
        + " | ".join(f"ECE {m}" for m in methods)
        + " | "
        + " | ".join(f"NLL {m}" for m in methods)
        + " | T ec | T nll | T sklearn | fit time EC / sklearn, estimators"
        + " | fit time EC / sklearn, arrays |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in rows:
        lines.append(
            f"| {row['dataset']} | {row['n_classes']} | {row['n_cal']} | "
            + " | ".join(f"{row[m][0]:.4f}" for m in methods)
            + " | "
            + " | ".join(f"{row[m][1]:.4f}" for m in methods)
            + f" | {row['T_ec']:.3f} | {row['T_nll']:.3f} | {row['T_sklearn']:.3f}"
            + f" | {row['t_ec'] / row['t_sklearn']:.2f}"
            + f" | {row['a_ec'] / row['a_sklearn']:.2f} |"
        )
    return "\n".join(lines)


def summary(rows):
    ece = {
        m: np.array([r[m][0] for r in rows]) for m in ("raw", "ec", "nll", "sklearn")
    }
    nll = {
        m: np.array([r[m][1] for r in rows]) for m in ("raw", "ec", "nll", "sklearn")
    }
    ratio = np.array([r["t_ec"] / r["t_sklearn"] for r in rows])
    ratio_nll = np.array([r["t_nll"] / r["t_sklearn"] for r in rows])
    ratio_arrays = np.array([r["a_ec"] / r["a_sklearn"] for r in rows])
    t_ec = np.array([r["t_ec"] for r in rows])
    t_sk = np.array([r["t_sklearn"] for r in rows])
    return "\n".join(
        [
            f"- datasets: {len(rows)}",
            f"- median ECE: raw {np.median(ece['raw']):.4f}, EC "
            f"{np.median(ece['ec']):.4f}, NLL {np.median(ece['nll']):.4f}, "
            f"sklearn {np.median(ece['sklearn']):.4f}",
            f"- EC has lower ECE than NLL on {int((ece['ec'] < ece['nll']).sum())} "
            f"of {len(rows)}; median ECE(EC) - ECE(NLL) = "
            f"{np.median(ece['ec'] - ece['nll']):+.4f}",
            f"- median NLL: raw {np.median(nll['raw']):.4f}, EC "
            f"{np.median(nll['ec']):.4f}, NLL {np.median(nll['nll']):.4f}, "
            f"sklearn {np.median(nll['sklearn']):.4f}; median NLL(EC) - NLL(NLL) = "
            f"{np.median(nll['ec'] - nll['nll']):+.4f}",
            f"- fit time EC / sklearn temperature (estimators, best of "
            f"{N_REPEATS}): median {np.median(ratio):.2f}, "
            f"max {ratio.max():.2f} (EC not slower on {int((ratio <= 1).sum())} of "
            f"{len(rows)}); total {t_ec.sum():.3f} s vs {t_sk.sum():.3f} s",
            f"- fit time our NLL / sklearn temperature (estimators, NLL timed "
            f"once): median {np.median(ratio_nll):.2f}",
            f"- optimiser alone on the same arrays, EC / sklearn: median "
            f"{np.median(ratio_arrays):.2f}, max {ratio_arrays.max():.2f} (EC not "
            f"slower on {int((ratio_arrays <= 1).sum())} of {len(rows)})",
        ]
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--busy",
        action="store_true",
        help="time with a second process keeping one core busy",
    )
    args = parser.parse_args()
    start = time.perf_counter()
    rows = []
    with busy_machine(args.busy):
        for row in itertools.chain(cifar_rows(), pmlb_rows()):
            rows.append(row)
            print(f"done {row['dataset']}", file=sys.stderr, flush=True)
    machine = "a second busy process" if args.busy else "the machine as it is"
    print(f"Timed with {machine}; load average at the end {os.getloadavg()[0]:.1f}.\n")
    print(markdown(rows))
    print()
    print(summary(rows))
    print(f"\n(total run time {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
