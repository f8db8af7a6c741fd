"""Label-shift benchmark of prior adaptation (SPEC section 4 protocol).

Protocol (Lipton et al. 2018; Alexandari et al. 2020):

* Each labelled dataset is split, stratified, into train (50%), validation
  (25%: calibration and the BBSE confusion matrix) and a test pool (25%). For
  the stored CIFAR outputs (the networks' test sets: the networks were trained
  on the CIFAR training sets, whose prior is uniform) the 10,000 rows are split
  into validation (50%) and test pool (50%).
* Test sets of n rows are drawn from the pool with replacement, class by class,
  at proportions from Dirichlet(alpha * 1) with alpha in {0.1, 1, 10}, or
  "tweak-one" (a random class at rho = 0.9, the rest equal). As in Alexandari
  et al.'s experiments, a test set holds floor(n * p_c) rows of each class c
  and the few remaining rows are drawn one by one from p (``--counts
  proportional``, the default); ``--counts multinomial`` draws all n labels
  from p, which adds the multinomial noise of the counts to every test set.
  The realised frequencies are the truth (oracle and prior errors).
* Methods: no adaptation, oracle (Bayes' rule to the realised prior), MLE (EM,
  SQUAREM solver), "MLE, tested" (the default of ``PriorAdaptedClassifier``:
  MLE only where ``label_shift_test`` against the validation posteriors
  rejects "no shift" at level 0.01, the source prior otherwise), MAP
  (Dirichlet(2)), BBSE (estimate projected onto the simplex, the default),
  BBSE-clip (clipped and renormalised, Lipton et al.'s original) and RLLS
  (Azizzadenesheli et al. 2019, ``reg="auto"``).
* "no shift" (alpha = infinity): test sets drawn at the pool's own class
  frequencies, what each method costs when nothing changed. Each on the uncalibrated
  posteriors and on posteriors calibrated on the validation split by EC, NLL
  temperature scaling and BCTS (skprior's fit_temperature and
  fit_bias_corrected_temperature on the logits: decision_function, or
  log predict_proba when there is none). ``--classwise`` adds vector scaling
  and Dirichlet calibration at its default (``reg_lambda="auto"``), fitted the
  same way (fit_vector_scaling, fit_dirichlet_calibration); ``--shifts``
  restricts the shifts run.
* Source prior q (used by every method, the oracle included): the training
  label frequencies for the uncalibrated posteriors (what the model was
  fitted to; uniform for CIFAR); for the calibrated ones, by default the mean
  calibrated posterior on the validation split (``--source-prior
  mean_posterior``), as Alexandari et al. (2020) do: it is the prior the
  calibrated posteriors are consistent with. ``--source-prior labels`` takes
  the validation label frequencies instead. For BCTS the two coincide (at the
  optimum of the bias-corrected log loss the mean posterior equals the label
  frequencies), except for the few validation rows a random forest gives
  probability 0 for their class (BCTS leaves them out); for EC and NLL
  temperature scaling they differ.
* Test-set size: n = 1000 by default, 100 trials per cell (the protocol asks
  for >= 30; 100 makes the per-cell medians less noisy). n is free in the
  protocol; the documented results also report n = 5000 (``--n 5000``), since
  1000 rows is only 10 per class for CIFAR-100. The documented verdict on the
  80%-of-oracle target is read on ``--trials 1000`` (the first 100 trials are
  those of the default run).
* Reported per cell (dataset x model x shift): median over trials of the
  accuracy change against the uncalibrated model without adaptation (points),
  and median L1 error of the prior used; for the target, the ratio of MLE's to
  the oracle's median change with a 95% paired-bootstrap interval
  (``ratio_interval``). ``--save`` writes every trial's values to an .npz.

The array functions are used directly (the posteriors and calibrations are
computed once per dataset and model, the trials only resample rows):
``PriorAdaptedClassifier(TemperatureCalibratedClassifier(model))`` computes the
same thing one batch at a time.

Run: ``python benchmarks/bench_label_shift.py --out /tmp/label_shift.md``
(and ``--n 5000`` for the larger test sets).
"""

import argparse
import platform
import sys
import time
import warnings
import zlib
from pathlib import Path

import numpy as np
import sklearn
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import load_model_outputs, load_pmlb  # noqa: E402

from skprior import (  # noqa: E402
    adjust_to_prior,
    bbse_test_prior,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    fit_dirichlet_calibration,
    fit_temperature,
    fit_vector_scaling,
    rlls_test_prior,
    softmax_dirichlet_calibration,
    softmax_temperature,
    softmax_vector_scaling,
)
from skprior._utils._options import DEFAULT_SHIFT_LEVEL  # noqa: E402
from skprior._utils._validation import check_proba  # noqa: E402
from skprior.label_shift._policy import ShiftGate  # noqa: E402

PMLB = ("satimage", "pendigits", "optdigits", "texture", "page_blocks")
CIFAR = (
    "wideresnet-16-4-cifar-10",
    "lenet-5-cifar-10",
    "wideresnet-16-4-cifar-100",
    "densenet-bc-100-cifar-100",
)
SHIFTS = ("dirichlet 0.1", "dirichlet 1", "dirichlet 10", "tweak-one 0.9", "no shift")
CALIBRATIONS = ("none", "EC", "NLL", "BCTS")
# Class-wise calibrators, added to CALIBRATIONS by --classwise (issue 17):
# vector scaling and Dirichlet calibration at its default (reg_lambda="auto").
CLASSWISE = ("VS", "Dirichlet")
METHODS = (
    "no adaptation",
    "oracle",
    "MLE",
    "MLE, tested",
    "MAP",
    "BBSE",
    "BBSE-clip",
    "RLLS",
)


def models():
    return {
        "logistic regression": make_pipeline(
            StandardScaler(), LogisticRegression(max_iter=2000)
        ),
        "random forest": RandomForestClassifier(n_estimators=100, random_state=0),
        "gradient boosting": HistGradientBoostingClassifier(random_state=0),
    }


def logits_of(model, X):
    if hasattr(model, "decision_function"):
        scores = model.decision_function(X)
        if scores.ndim == 1:
            scores = np.column_stack([np.zeros_like(scores), scores])
        return scores.astype(np.float64)
    with np.errstate(divide="ignore"):
        return np.log(model.predict_proba(X).astype(np.float64))


def calibrated_sets(proba_val, proba_pool, logits_val, logits_pool, y_val):
    """{calibration: (proba_val, proba_pool)} for none, EC, NLL, BCTS."""
    out = {"none": (proba_val, proba_pool)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a clipped temperature is reported below
        for name, method in (("EC", "ec"), ("NLL", "nll")):
            t = fit_temperature(logits_val, y_val, method=method)
            out[name] = tuple(
                softmax_temperature(z, t) for z in (logits_val, logits_pool)
            )
        t, bias = fit_bias_corrected_temperature(logits_val, y_val)
        out["BCTS"] = tuple(
            softmax_temperature(z, t, bias) for z in (logits_val, logits_pool)
        )
        if "VS" in CALIBRATIONS:
            w, b = fit_vector_scaling(logits_val, y_val)
            out["VS"] = tuple(
                softmax_vector_scaling(z, w, b) for z in (logits_val, logits_pool)
            )
        if "Dirichlet" in CALIBRATIONS:
            matrix, b = fit_dirichlet_calibration(logits_val, y_val)
            out["Dirichlet"] = tuple(
                softmax_dirichlet_calibration(z, matrix, b)
                for z in (logits_val, logits_pool)
            )
    return out


def draw_prior(shift, n_classes, rng):
    kind, value = shift.split()
    if kind == "no":  # (handled by draw_test_set: the pool's own frequencies)
        raise ValueError("'no shift' has no prior to draw")
    if kind == "dirichlet":
        return rng.dirichlet(np.full(n_classes, float(value)))
    prior = np.full(n_classes, (1 - float(value)) / (n_classes - 1))
    prior[rng.integers(n_classes)] = float(value)
    return prior


def draw_counts(prior, n, rng, how="proportional"):
    """Class counts of a test set of n rows at the class proportions ``prior``.

    ``"proportional"`` (Alexandari et al. 2020): floor(n * p_c) rows of class c,
    and the n - sum(floor(n * p)) remaining rows drawn one by one from p.
    ``"multinomial"``: all n labels drawn independently from p.
    """
    if how == "multinomial":
        return rng.multinomial(n, prior)
    counts = np.floor(n * prior).astype(np.int64)
    return counts + rng.multinomial(n - counts.sum(), prior)


def draw_test_set(by_class, shift, n, rng, how="proportional"):
    """Pool rows of one shifted test set, and its realised class frequencies.

    ``by_class[c]`` holds the pool rows of class c; a class without rows gets
    none, its share going to the others.
    """
    if shift == "no shift":  # (alpha = infinity: the pool's class frequencies)
        sizes = np.array([len(rows) for rows in by_class], dtype=np.float64)
        prior = sizes / sizes.sum()
    else:
        prior = draw_prior(shift, len(by_class), rng)
    present = np.array([len(rows) > 0 for rows in by_class])
    if not present.all():
        prior = prior * present / prior[present].sum()
    counts = draw_counts(prior, n, rng, how)
    idx = np.concatenate(
        [rng.choice(by_class[c], size=m) for c, m in enumerate(counts) if m]
    )
    return idx, counts / n


def run_cell(
    sets, y_pool, sources, confusions, shift, n, n_trials, rng, how="proportional"
):
    """Per-trial accuracy change and prior L1 error of every method.

    ``sources[calibration]`` is the source prior q of those posteriors (used by
    every method, the oracle included); ``confusions[calibration]`` the joint
    validation confusion matrix C[predicted, true] for BBSE.
    """
    n_classes = len(sources["none"])
    # The default of PriorAdaptedClassifier: adapt only a batch whose mean
    # posterior a test finds shifted from the validation posteriors'.
    # (the estimator's own gate: Hotelling's T^2 from 50 reference rows per
    # class, the class-by-class statistic with the batch's variances below)
    gates = {c: ShiftGate(check_proba(sets[c][0])) for c in CALIBRATIONS}
    by_class = [np.flatnonzero(y_pool == c) for c in range(n_classes)]
    acc = {(c, m): [] for c in CALIBRATIONS for m in METHODS}
    err = {(c, m): [] for c in CALIBRATIONS for m in METHODS}
    iters = []
    for _ in range(n_trials):
        idx, truth = draw_test_set(by_class, shift, n, rng, how)
        y = y_pool[idx]
        base = np.mean(sets["none"][1][idx].argmax(axis=1) == y)
        for calibration in CALIBRATIONS:
            proba = sets[calibration][1][idx]
            q = sources[calibration]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                # (degenerate estimates are measured here, not reported)
                warnings.simplefilter("ignore", UserWarning)
                mle = estimate_test_prior(proba, q, solver="squarem")
                map_ = estimate_test_prior(proba, q, method="map", solver="squarem")
            iters.append(mle.n_passes)
            shifted = gates[calibration].test(proba, DEFAULT_SHIFT_LEVEL).shifted
            priors = {
                "no adaptation": q,
                "oracle": truth,
                "MLE": mle.prior,
                "MLE, tested": mle.prior if shifted else q,
                "MAP": map_.prior,
                "BBSE": bbse_test_prior(proba, confusions[calibration]),
                "BBSE-clip": bbse_test_prior(
                    proba, confusions[calibration], projection="clip"
                ),
                "RLLS": rlls_test_prior(proba, confusions[calibration]),
            }
            for method, prior in priors.items():
                adjusted = (
                    proba
                    if method == "no adaptation"
                    else (adjust_to_prior(proba, q, prior))
                )
                acc[calibration, method].append(
                    100 * (np.mean(adjusted.argmax(axis=1) == y) - base)
                )
                err[calibration, method].append(np.abs(prior - truth).sum())
    return acc, err, iters


def source_priors(sets, q_uncal, q_val, how):
    """{calibration: source prior q}.

    Uncalibrated posteriors: the training label frequencies ``q_uncal``.
    Calibrated ones: the validation label frequencies (``how="labels"``) or the
    mean calibrated posterior on the validation split (``"mean_posterior"``,
    Alexandari et al. 2020: the prior the calibrated posteriors are consistent
    with).
    """
    out = {"none": q_uncal}
    for calibration in CALIBRATIONS[1:]:
        if how == "labels":
            out[calibration] = q_val
        else:
            q = sets[calibration][0].mean(axis=0)
            out[calibration] = q / q.sum()
    return out


def confusion_matrices(sets, y_val):
    """{calibration: joint confusion C[predicted, true] on the validation split}."""
    out = {}
    for calibration in CALIBRATIONS:
        proba_val = sets[calibration][0]
        n_classes = proba_val.shape[1]
        confusion = np.zeros((n_classes, n_classes))
        np.add.at(confusion, (proba_val.argmax(axis=1), y_val), 1)
        out[calibration] = confusion / confusion.sum()
    return out


def median_points(values):
    """Median of accuracy changes in points, rounded to 1e-6.

    The changes are multiples of 100 / n up to float error; rounding keeps a
    ratio such as 0.40 / 0.50 from landing just below 0.8.
    """
    return round(float(np.median(values)), 6)


def ratio_interval(oracle, mle, rng, n_boot=2000, level=0.95):
    """Percentile bootstrap interval of median(mle) / median(oracle).

    The trials are resampled in pairs (a trial's oracle and MLE changes come
    from the same test set), so the interval reflects how much the per-cell
    ratio would move with another set of trials of the same size.
    """
    oracle, mle = np.asarray(oracle), np.asarray(mle)
    idx = rng.integers(len(oracle), size=(n_boot, len(oracle)))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.median(mle[idx], axis=1) / np.median(oracle[idx], axis=1)
    tail = (1 - level) / 2
    # A resample whose oracle median is 0 gives +-inf or nan (0 / 0): drop nan.
    # The ratios take few distinct values (the changes are multiples of
    # 100 / n), so the ends are taken outward, as values the ratio takes.
    return (
        float(np.nanquantile(ratios, tail, method="lower")),
        float(np.nanquantile(ratios, 1 - tail, method="higher")),
    )


def frequencies(y, n_classes):
    return np.bincount(y, minlength=n_classes) / len(y)


def datasets(pmlb_names, cifar_names):
    """Yield (name, model name, sets, y_val, y_pool, q_uncal, q_val)."""
    for name in pmlb_names:
        X, y = load_pmlb(name)
        n_classes = y.max() + 1
        X_train, X_rest, y_train, y_rest = train_test_split(
            X, y, train_size=0.5, stratify=y, random_state=0
        )
        X_val, X_pool, y_val, y_pool = train_test_split(
            X_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=0
        )
        for model_name, model in models().items():
            model.fit(X_train, y_train)
            sets = calibrated_sets(
                model.predict_proba(X_val),
                model.predict_proba(X_pool),
                logits_of(model, X_val),
                logits_of(model, X_pool),
                y_val,
            )
            yield (
                name,
                model_name,
                sets,
                y_val,
                y_pool,
                frequencies(y_train, n_classes),
                frequencies(y_val, n_classes),
            )
    for name in cifar_names:
        proba, y = load_model_outputs(name)
        proba = proba.astype(np.float64)
        proba /= proba.sum(axis=1, keepdims=True)
        n_classes = proba.shape[1]
        val, pool = train_test_split(
            np.arange(len(y)), train_size=0.5, stratify=y, random_state=0
        )
        with np.errstate(divide="ignore"):
            logits = np.log(proba)
        sets = calibrated_sets(
            proba[val], proba[pool], logits[val], logits[pool], y[val]
        )
        yield (
            name,
            "CNN (stored outputs)",
            sets,
            y[val],
            y[pool],
            np.full(n_classes, 1 / n_classes),
            frequencies(y[val], n_classes),
        )


def target_cells(rows, method="MLE"):
    """Per-cell ratio of MLE's to the oracle's median gain, with its interval.

    One tuple (dataset, model, shift, calibration, oracle, MLE, ratio,
    (low, high)) per cell where the oracle gains at least 0.5 points.
    """
    out = []
    for name, model_name, shift, acc, _, _ in rows:
        for calibration in CALIBRATIONS:
            oracle = median_points(acc[calibration, "oracle"])
            if oracle < 0.5:
                continue
            mle = median_points(acc[calibration, method])
            rng = np.random.default_rng(
                zlib.crc32(f"{name}/{model_name}/{shift}/{calibration}".encode())
            )
            interval = ratio_interval(
                acc[calibration, "oracle"], acc[calibration, method], rng
            )
            out.append(
                (
                    name,
                    model_name,
                    shift,
                    calibration,
                    oracle,
                    mle,
                    mle / oracle,
                    interval,
                )
            )
    return out


def trial_arrays(rows):
    """{"dataset|model|shift|calibration|method|acc or l1": per-trial values}."""
    out = {}
    for name, model_name, shift, acc, err, _ in rows:
        for (calibration, method), values in acc.items():
            key = f"{name}|{model_name}|{shift}|{calibration}|{method}"
            out[key + "|acc"] = np.asarray(values)
            out[key + "|l1"] = np.asarray(err[calibration, method])
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument(
        "--source-prior",
        choices=("labels", "mean_posterior"),
        default="mean_posterior",
        help="source prior of the calibrated posteriors (see the docstring)",
    )
    parser.add_argument(
        "--counts",
        choices=("proportional", "multinomial"),
        default="proportional",
        help="how the class counts of a test set are drawn (see the docstring)",
    )
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--save",
        default=None,
        help="also write every trial's accuracy change and L1 error to this .npz",
    )
    parser.add_argument("--pmlb", nargs="*", default=list(PMLB))
    parser.add_argument("--cifar", nargs="*", default=list(CIFAR))
    parser.add_argument(
        "--classwise",
        action="store_true",
        help="also calibrate by vector scaling and default Dirichlet calibration",
    )
    parser.add_argument(
        "--shifts", nargs="*", default=list(SHIFTS), help="shifts to run"
    )
    args = parser.parse_args()
    if args.classwise:
        global CALIBRATIONS
        CALIBRATIONS = (*CALIBRATIONS, *CLASSWISE)

    start = time.perf_counter()
    rows = []
    for name, model_name, sets, y_val, y_pool, q_uncal, q_val in datasets(
        args.pmlb, args.cifar
    ):
        sources = source_priors(sets, q_uncal, q_val, args.source_prior)
        confusions = confusion_matrices(sets, y_val)
        for s, shift in enumerate(SHIFTS):
            if shift not in args.shifts:
                continue
            rng = np.random.default_rng([zlib.crc32(name.encode()), s])
            acc, err, iters = run_cell(
                sets,
                y_pool,
                sources,
                confusions,
                shift,
                args.n,
                args.trials,
                rng,
                args.counts,
            )
            rows.append((name, model_name, shift, acc, err, iters))
        print(
            f"{name} / {model_name}: {time.perf_counter() - start:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    elapsed = time.perf_counter() - start

    lines = [
        f"n = {args.n} per test set, {args.trials} trials per cell, "
        f"{args.counts} class counts; source "
        f"prior of the calibrated posteriors: {args.source_prior}; "
        f"Python {platform.python_version()}, numpy {np.__version__}, "
        f"scikit-learn {sklearn.__version__}; single-threaded BLAS/OpenMP; "
        f"total {elapsed / 60:.1f} min.",
        "",
    ]
    # Summary: the 80%-of-oracle target, per calibration.
    target = target_cells(rows)
    tested = target_cells(rows, "MLE, tested")
    lines += [
        "### Does calibrated MLE recover >= 80% of the oracle's median gain?",
        "",
        "Per cell: ratio = median Δacc(MLE) / median Δacc(oracle), both with the "
        "same calibration and against the uncalibrated, unadapted model. Cells "
        "where the oracle gains < 0.5 points are left out (nothing to recover). "
        "Clearly below: the cell's 95% bootstrap interval of the ratio "
        "(trials resampled in pairs) lies below 0.8.",
        "",
        "| shift | calibration | cells | median ratio | cells with ratio >= 0.8 "
        "| clearly below 0.8 | MLE, tested: median ratio | cells >= 0.8 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for shift in [s for s in SHIFTS if s in args.shifts]:
        for calibration in CALIBRATIONS:
            cells = [t for t in target if t[2] == shift and t[3] == calibration]
            if cells:
                ratios = [t[6] for t in cells]
                tested_ratios = [
                    t[6] for t in tested if t[2] == shift and t[3] == calibration
                ]
                lines.append(
                    f"| {shift} | {calibration} | {len(cells)} | "
                    f"{np.median(ratios):.2f} | "
                    f"{sum(r >= 0.8 for r in ratios)}/{len(cells)} | "
                    f"{sum(t[7][1] < 0.8 for t in cells)}/{len(cells)} | "
                    f"{np.median(tested_ratios):.2f} | "
                    f"{sum(r >= 0.8 for r in tested_ratios)}/{len(cells)} |"
                )
    lines += [
        "",
        "### Calibrated cells below 0.8 (Dirichlet 0.1 and 1)",
        "",
        "Median Δacc (points) of the oracle and of MLE, their ratio and its 95% "
        "bootstrap interval.",
        "",
        "| dataset | model | shift | calibration | oracle | MLE | ratio "
        "| 95% interval |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, model_name, shift, calibration, oracle, mle, ratio, (lo, hi) in target:
        if (
            calibration != "none"
            and shift in ("dirichlet 0.1", "dirichlet 1")
            and ratio < 0.8
        ):
            lines.append(
                f"| {name} | {model_name} | {shift} | {calibration} | "
                f"{oracle:+.2f} | {mle:+.2f} | {ratio:.3f} | {lo:.3f}–{hi:.3f} |"
            )
    lines += [
        "",
        "### Per-cell ratios (Dirichlet 0.1 and 1)",
        "",
        "Median Δacc of the oracle and of MLE (points), and their ratio, per "
        "calibration; a ratio is left out (\u2013) where the oracle gains < 0.5 "
        "points.",
        "",
        "| dataset | model | shift | "
        + " | ".join(f"{c}: oracle / MLE / ratio" for c in CALIBRATIONS)
        + " |",
        "|---|---|---|" + "---|" * len(CALIBRATIONS),
    ]
    for name, model_name, shift, acc, _, _ in rows:
        if shift not in ("dirichlet 0.1", "dirichlet 1"):
            continue
        entries = []
        for calibration in CALIBRATIONS:
            oracle = median_points(acc[calibration, "oracle"])
            mle = median_points(acc[calibration, "MLE"])
            ratio = f"{mle / oracle:.3f}" if oracle >= 0.5 else "\u2013"
            entries.append(f"{oracle:+.2f} / {mle:+.2f} / {ratio}")
        cells = " | ".join(entries)
        lines.append(f"| {name} | {model_name} | {shift} | {cells} |")
    lines += [
        "",
        "### Median over cells",
        "",
        "Median over all dataset x model cells of the per-cell medians.",
        "",
        "| shift | calibration | "
        + " | ".join(f"Δacc {m}" for m in METHODS)
        + " | "
        + " | ".join(f"L1 {m}" for m in METHODS if m != "oracle")
        + " |",
        "|---|---|" + "---|" * (2 * len(METHODS) - 1),
    ]
    for shift in [s for s in SHIFTS if s in args.shifts]:
        for calibration in CALIBRATIONS:
            cells = [r for r in rows if r[2] == shift]
            accs = [
                np.median([np.median(r[3][calibration, m]) for r in cells])
                for m in METHODS
            ]
            errs = [
                np.median([np.median(r[4][calibration, m]) for r in cells])
                for m in METHODS
                if m != "oracle"
            ]
            lines.append(
                f"| {shift} | {calibration} | "
                + " | ".join(f"{a:+.2f}" for a in accs)
                + " | "
                + " | ".join(f"{e:.3f}" for e in errs)
                + " |"
            )
    lines += [
        "",
        "### Every cell",
        "",
        "Median Δaccuracy in points (median L1 prior error) per method; "
        "calibrated rows use BCTS, the calibrator Alexandari et al. "
        "recommend; all four calibrations are in the summary above.",
        "",
        "| dataset | model | shift | calibration | "
        + " | ".join(METHODS)
        + " | MLE passes (median over calibrations) |",
        "|---|---|---|---|" + "---|" * (len(METHODS) + 1),
    ]
    for name, model_name, shift, acc, err, iters in rows:
        for calibration in (
            "none",
            "BCTS",
            *(c for c in CLASSWISE if c in CALIBRATIONS),
        ):
            cells = " | ".join(
                f"{np.median(acc[calibration, m]):+.2f} "
                f"({np.median(err[calibration, m]):.3f})"
                for m in METHODS
            )
            lines.append(
                f"| {name} | {model_name} | {shift} | {calibration} | "
                f"{cells} | {np.median(iters):.0f} |"
            )
    text = "\n".join(lines) + "\n"
    if args.save:
        np.savez_compressed(args.save, **trial_arrays(rows))
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    with threadpool_limits(1):
        main()
