"""Speed of the MLE prior estimate: skprior against QuaPy's EMQ, EM against SQUAREM.

Part 1 runs the same maximum-likelihood EM (Saerens et al., 2002) with
skprior's ``estimate_test_prior`` and with QuaPy's ``EMQ.EM`` (used as a black
box, through its public static method) on the same posteriors, training prior
and tolerance, checks that the estimates agree, and times both (the best of
several repeats, as ``timeit`` advises on a shared machine). skprior is timed
twice: the estimate alone, and the estimate followed by ``adjust_to_prior``
(QuaPy's ``EM`` returns the adjusted posteriors too).

Tolerances: skprior stops when one EM step moves the prior by at most ``tol``
in L1 norm. QuaPy's ``epsilon`` is "the threshold difference between two
consecutive iterations" (its docstring); observed as a black box, its result is
the plain EM iterate at which the *mean* absolute difference of consecutive
prevalence vectors first falls below ``epsilon`` (checked at epsilon = 1e-6 on
CIFAR-100 outputs). The same criterion in skprior's terms is therefore
``tol = n_classes * epsilon`` (L1 = K x mean); both then run the same number of
EM iterations, and the estimates agree to about ``tol``.

Part 2 counts passes over the data (E-step evaluations) of plain EM and of
SQUAREM to a tolerance of 1e-8 on batches where classes are absent: CIFAR-100
outputs resampled at Dirichlet(0.1) class proportions (about half of the 100
classes absent from each batch of 2,000).

Part 0 times the default call, ``estimate_test_prior(proba, q)`` (default
solver and tolerance), against QuaPy's ``EMQ.EM`` on 20,000 x 100 CIFAR-100
outputs (WideResNet and DenseNet test sets, stacked), with default threading,
on the machine as it is ("idle") and with a second busy process that this
script starts (``python -c "while True: pass"``), the situation of
``GridSearchCV(n_jobs=...)``, joblib or Dask workers. QuaPy runs at the
largest ``epsilon`` of 1e-2, 3e-3, 1e-3, ... that brings its estimate at least
as close (L1) to the exact MLE (SQUAREM to tol 1e-13) as skprior's default
estimate is. skprior limits BLAS to one thread inside its solves
(``_kernels.single_blas_thread``); QuaPy's element-wise numpy uses no BLAS.

Part 3 is EM with bias-corrected temperature scaling (BCTS, Alexandari et
al., 2020) as a user runs it with each library, on the WideResNet CIFAR-100
outputs: a random half of the test set (5,000 rows) is the held-out data, the
other half the pool that batches of 5,000 rows are drawn from (with
replacement) at the test set's class proportions ("none") or at Dirichlet(1)
and Dirichlet(0.1) proportions; three splits, five batches each. QuaPy:
``EMQ(model, calib="bcts", exact_train_prev=False)`` (its ``EMQ_BCTS``
configuration) fitted on the held-out half, and ``quantify`` per batch, which
recalibrates the batch's posteriors and runs EM to its default ``epsilon``
(1e-4: the mean absolute change of the prevalence, ``K x 1e-4`` in L1).
skprior: ``fit_bias_corrected_temperature`` and ``estimate_source_prior(...,
source="mean_posterior")`` on the held-out half once, and per batch
``softmax_temperature`` of its logits then ``estimate_test_prior`` at its
defaults. The model is a stored-outputs one (``_common.StoredOutputsClassifier``;
logits are the log posteriors). Reported: milliseconds per estimate (median
over the batches; the fit once per split, apart), the L1 distance and the
absolute error (AE, L1 / K) to the batch's true class proportions. Per
estimate QuaPy predicts, recalibrates (the log of the posteriors, scaled and
shifted, a softmax) and runs EM on ``n x K`` temporaries (an E-step, a
normalisation and a mean per step); skprior's estimate is the softmax of the
calibrated logits (timed apart in brackets) and its EM passes (SQUAREM).

Every part runs with the default threading (no ``threadpoolctl`` limit here).

Run: ``python benchmarks/bench_prior_speed.py`` (needs ``quapy``);
``--part 0`` runs part 0 only (``--part 3``: EM + BCTS against QuaPy's
EMQ-BCTS).
"""

import argparse
import functools
import os
import platform
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_info

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import StoredOutputsClassifier, best_time, busy_machine  # noqa: E402
from _data import load_model_outputs  # noqa: E402

from skprior import (  # noqa: E402
    adjust_to_prior,
    estimate_source_prior,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    softmax_temperature,
)


def shifted_sample(labels, n, alpha, rng):
    n_classes = labels.max() + 1
    counts = rng.multinomial(n, rng.dirichlet(np.full(n_classes, alpha)))
    return np.concatenate(
        [
            rng.choice(np.flatnonzero(labels == c), size=m, replace=True)
            for c, m in enumerate(counts)
        ]
    )


def speed_against_quapy(repeats=7, epsilon=1e-6):
    import quapy
    from quapy.method.aggregative import EMQ

    print(
        f"QuaPy {quapy.__version__}, numpy {np.__version__}, "
        f"Python {platform.python_version()}, QuaPy epsilon = {epsilon:g}, "
        f"skprior tol = n_classes * epsilon; best of {repeats} runs\n"
    )
    print(
        "| outputs | batch | n | K | EM iterations | skprior estimate (ms) | "
        "skprior estimate + adjust (ms) | QuaPy EMQ.EM (ms) | speed-up "
        "(estimate + adjust) | L1(skprior, QuaPy) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for name in (
        "wideresnet-16-4-cifar-10",
        "wideresnet-16-4-cifar-100",
        "densenet-bc-100-cifar-100",
    ):
        proba, labels = load_model_outputs(name)
        proba = proba.astype(np.float64)
        proba /= proba.sum(axis=1, keepdims=True)  # float32 rows to exact sums
        n_classes = proba.shape[1]
        q = np.bincount(labels, minlength=n_classes) / len(labels)
        tol = n_classes * epsilon
        rng = np.random.default_rng(0)
        batches = {
            "whole test set (no shift)": np.arange(len(labels)),
            "Dirichlet(1) n=5000": shifted_sample(labels, 5000, 1.0, rng),
            "Dirichlet(0.1) n=5000": shifted_sample(labels, 5000, 0.1, rng),
        }
        for batch_name, idx in batches.items():
            batch = proba[idx]

            def ours(batch=batch, q=q, tol=tol):
                return estimate_test_prior(batch, q, tol=tol, max_iter=100_000)

            def ours_adjust(batch=batch, q=q, ours=ours):
                result = ours()
                return result, adjust_to_prior(batch, q, result.prior)

            def theirs(batch=batch, q=q):
                return EMQ.EM(q, batch, epsilon=epsilon)

            t_ours, result = best_time(ours, repeats)
            t_adjust, _ = best_time(ours_adjust, repeats)
            t_theirs, (prior_quapy, _) = best_time(theirs, repeats)
            gap = np.abs(result.prior - np.asarray(prior_quapy)).sum()
            ratio = t_theirs / t_adjust
            ratios.append(ratio)
            print(
                f"| {name} | {batch_name} | {len(idx)} | {n_classes} | "
                f"{result.n_iter} | {1e3 * t_ours:.1f} | {1e3 * t_adjust:.1f} | "
                f"{1e3 * t_theirs:.1f} | {ratio:.1f}x | {gap:.1e} |"
            )
    print(
        f"\nSpeed-up (QuaPy time / skprior estimate + adjust time): "
        f"min {min(ratios):.1f}x, median {np.median(ratios):.1f}x\n"
    )
    return ratios


def quapy_epsilon_as_close(batch, q, exact, target):
    """Largest epsilon of a 1e-2, 3e-3, 1e-3, ... grid whose QuaPy estimate is
    within ``target`` (L1) of ``exact``."""
    from quapy.method.aggregative import EMQ

    for exponent in np.arange(4, 21) / 2:
        epsilon = float(f"{10.0**-exponent:.0e}")
        prior, _ = EMQ.EM(q, batch, epsilon=epsilon)
        gap = np.abs(np.asarray(prior) - exact).sum()
        if gap <= target:
            return epsilon, gap
    return epsilon, gap


def default_call_idle_and_busy(repeats=9):
    from quapy.method.aggregative import EMQ

    parts = [load_model_outputs(name)[0] for name in CIFAR100_NETWORKS]
    batch = np.concatenate(parts).astype(np.float64)
    batch /= batch.sum(axis=1, keepdims=True)
    n, n_classes = batch.shape
    q = np.full(n_classes, 1 / n_classes)
    exact = estimate_test_prior(
        batch, q, solver="squarem", tol=1e-13, max_iter=100_000
    ).prior
    ours = estimate_test_prior(batch, q)
    our_gap = np.abs(ours.prior - exact).sum()
    epsilon, their_gap = quapy_epsilon_as_close(batch, q, exact, our_gap)
    blas = ", ".join(
        f"{info['internal_api']} {info['num_threads']} threads"
        for info in threadpool_info()
        if info["user_api"] == "blas"
    )
    print(
        f"Default call on {n} x {n_classes} (CIFAR-100 WideResNet + DenseNet "
        f"outputs, float64): estimate_test_prior(proba, q), {ours.n_iter} EM "
        f"iterations, L1 to the exact MLE {our_gap:.1e}; QuaPy EMQ.EM at "
        f"epsilon = {epsilon:g} (L1 to the exact MLE {their_gap:.1e}). Default "
        f"threading ({blas}); {os.cpu_count()} cores; best of {repeats} runs; "
        f"load average before the runs {os.getloadavg()[0]:.1f}.\n"
    )
    print("| machine | skprior (ms) | QuaPy EMQ.EM (ms) | speed-up |")
    print("|---|---|---|---|")
    for state in ("idle", "a second busy process"):
        with busy_machine(state != "idle"):
            t_ours, _ = best_time(lambda: estimate_test_prior(batch, q), repeats)
            t_theirs, _ = best_time(lambda: EMQ.EM(q, batch, epsilon=epsilon), repeats)
        print(
            f"| {state} | {1e3 * t_ours:.1f} | {1e3 * t_theirs:.1f} | "
            f"{t_theirs / t_ours:.1f}x |"
        )
    print()


CIFAR100_NETWORKS = ("wideresnet-16-4-cifar-100", "densenet-bc-100-cifar-100")


def squarem_passes(n_trials=20, tol=1e-8):
    proba, labels = load_model_outputs("wideresnet-16-4-cifar-100")
    q = np.bincount(labels, minlength=100) / len(labels)
    rows = []
    for seed in range(n_trials):
        rng = np.random.default_rng(seed)
        idx = shifted_sample(labels, 2000, 0.1, rng)
        absent = 100 - len(np.unique(labels[idx]))
        em = estimate_test_prior(proba[idx], q, solver="em", tol=tol, max_iter=100_000)
        sq = estimate_test_prior(
            proba[idx], q, solver="squarem", tol=tol, max_iter=100_000
        )
        rows.append(
            (
                absent,
                em.n_passes,
                sq.n_passes,
                np.abs(em.prior - sq.prior).sum(),
                sq.objective - em.objective,
            )
        )
    rows = np.array(rows)
    print(
        f"SQUAREM vs EM, CIFAR-100 WRN outputs, n=2000 at Dirichlet(0.1), "
        f"tol={tol:g}, {n_trials} batches\n"
    )
    print(
        "| classes absent (median) | EM passes (median) | SQUAREM passes "
        "(median) | ratio of medians | median per-batch ratio | min per-batch "
        "ratio | ratio of totals | max L1(EM, SQUAREM) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    per_batch = rows[:, 1] / rows[:, 2]
    print(
        f"| {np.median(rows[:, 0]):.0f} | {np.median(rows[:, 1]):.0f} | "
        f"{np.median(rows[:, 2]):.0f} | "
        f"{np.median(rows[:, 1]) / np.median(rows[:, 2]):.1f}x | "
        f"{np.median(per_batch):.1f}x | {per_batch.min():.1f}x | "
        f"{rows[:, 1].sum() / rows[:, 2].sum():.1f}x | {rows[:, 3].max():.1e} |"
    )
    print(
        f"\nSQUAREM's final log-likelihood minus EM's (per sample): median "
        f"{np.median(rows[:, 4]):.1e}, min {rows[:, 4].min():.1e} (positive: "
        f"SQUAREM stopped closer to the optimum)"
    )
    return per_batch


def passes_to_optimum(proba, q, solver, optimum, target=1e-6, limit=20_000):
    """Passes until the iterate is within ``target`` (L1) of ``optimum``.

    The solver is run one iteration (EM step or SQUAREM cycle) at a time,
    restarted from its last iterate; the extra evaluation each call makes to
    test convergence is not counted (the next call repeats it).
    """
    prior, passes = q, 0
    while np.abs(prior - optimum).sum() > target and passes < limit:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            result = estimate_test_prior(
                proba, q, solver=solver, init=prior, max_iter=1, tol=1e-300
            )
        prior, passes = result.prior, passes + result.n_passes - 1
    return passes


def squarem_to_optimum(n_trials=20, target=1e-6):
    proba, labels = load_model_outputs("wideresnet-16-4-cifar-100")
    q = np.bincount(labels, minlength=100) / len(labels)
    ratios, em_passes, sq_passes = [], [], []
    for seed in range(n_trials):
        rng = np.random.default_rng(seed)
        idx = shifted_sample(labels, 2000, 0.1, rng)
        batch = proba[idx].astype(np.float64)
        optimum = estimate_test_prior(
            batch, q, solver="squarem", tol=1e-13, max_iter=100_000
        ).prior
        em = passes_to_optimum(batch, q, "em", optimum, target)
        sq = passes_to_optimum(batch, q, "squarem", optimum, target)
        em_passes.append(em)
        sq_passes.append(sq)
        ratios.append(em / sq)
    print(
        f"\nPasses to come within {target:g} (L1) of the optimum (found by SQUAREM "
        f"to tol 1e-13), same {n_trials} batches:\n"
    )
    print(
        "| EM passes (median) | SQUAREM passes (median) | median per-batch ratio "
        "| min per-batch ratio |"
    )
    print("|---|---|---|---|")
    print(
        f"| {np.median(em_passes):.0f} | {np.median(sq_passes):.0f} | "
        f"{np.median(ratios):.1f}x | {min(ratios):.1f}x |"
    )


def bcts_against_quapy(n_splits=3, n_batches=5, n=5_000, shifts=("none", 1.0, 0.1)):
    """Part 3's table; returns ``{shift: (QuaPy ms, skprior ms)}``, medians."""
    import time

    from quapy.method.aggregative import EMQ

    proba, labels = load_model_outputs("wideresnet-16-4-cifar-100")
    proba = proba.astype(np.float64)
    proba /= proba.sum(axis=1, keepdims=True)
    n_classes = proba.shape[1]
    model = StoredOutputsClassifier(proba).fit()
    index = np.arange(len(labels))[:, None]  # (the "features": row numbers)
    print(
        f"\nEM + BCTS, WideResNet CIFAR-100 outputs: held-out {len(labels) // 2:,} "
        f"rows, batches of {n:,}; {n_splits} splits x {n_batches} batches\n"
    )
    print(
        "| shift | QuaPy fit (s) | skprior fit (s) | QuaPy ms / estimate | "
        "skprior ms / estimate (of which calibration) | speed-up | QuaPy L1 (AE) "
        "| skprior L1 (AE) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    medians = {}
    for shift in shifts:
        rows = []
        for split in range(n_splits):
            rng = np.random.default_rng(split)
            order = rng.permutation(len(labels))
            held, pool = order[: len(labels) // 2], order[len(labels) // 2 :]
            start = time.perf_counter()
            held_out = (index[held], labels[held])
            quapy = EMQ(
                model,
                fit_classifier=False,
                val_split=held_out,
                exact_train_prev=False,
                calib="bcts",
            ).fit(*held_out)
            their_fit = time.perf_counter() - start
            start = time.perf_counter()
            logits = np.log(proba[held])
            temperature, bias = fit_bias_corrected_temperature(logits, labels[held])
            calibrated = softmax_temperature(logits, temperature, bias)
            q = estimate_source_prior(calibrated, source="mean_posterior")
            our_fit = time.perf_counter() - start
            for _ in range(n_batches):
                if shift == "none":
                    batch = rng.choice(pool, size=n)
                else:
                    p = rng.dirichlet(np.full(n_classes, shift))
                    counts = rng.multinomial(n, p)
                    batch = np.concatenate(
                        [
                            rng.choice(pool[labels[pool] == c], size=m)
                            for c, m in enumerate(counts)
                            if m
                        ]
                    )
                true = np.bincount(labels[batch], minlength=n_classes) / n

                def calibrate(batch=batch, temperature=temperature, bias=bias):
                    logits = np.log(model.predict_proba(index[batch]))
                    return softmax_temperature(logits, temperature, bias)

                def ours(calibrate=calibrate, q=q):
                    return estimate_test_prior(calibrate(), q).prior

                t_theirs, theirs = best_time(
                    functools.partial(quapy.predict, index[batch]), 1
                )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t_ours, prior = best_time(ours, 1)
                t_calibrate, _ = best_time(calibrate, 1)
                rows.append(
                    (
                        their_fit,
                        our_fit,
                        t_theirs,
                        t_ours,
                        t_calibrate,
                        np.abs(theirs - true).sum(),
                        np.abs(prior - true).sum(),
                    )
                )
        fits = np.mean(rows, axis=0)
        median = np.median(rows, axis=0)
        name = "none" if shift == "none" else f"Dirichlet({shift})"
        print(
            f"| {name} | {fits[0]:.2f} | {fits[1]:.2f} | {1e3 * median[2]:.1f} | "
            f"{1e3 * median[3]:.1f} ({1e3 * median[4]:.1f}) | "
            f"{median[2] / median[3]:.1f}x | "
            f"{fits[5]:.3f} ({fits[5] / n_classes:.4f}) | "
            f"{fits[6]:.3f} ({fits[6] / n_classes:.4f}) |",
            flush=True,
        )
        medians[shift] = (1e3 * median[2], 1e3 * median[3])
    return medians


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", type=int, choices=(0, 1, 2, 3), default=None)
    args = parser.parse_args()
    if args.part in (None, 0):
        default_call_idle_and_busy()
    if args.part in (None, 1):
        speed_against_quapy()
    if args.part in (None, 2):
        squarem_passes()
        squarem_to_optimum()
    if args.part in (None, 3):
        bcts_against_quapy()
