"""Cost of the prior estimates in passes over the data (issue 28).

The unit is one ``proba.sum()`` over the same array, timed in the same run: a
pass that reads the array once from memory. On CIFAR-100 posteriors (the
WideResNet and DenseNet test sets, stacked: 20,000 x 100 float32 with their
labels), tiled to ``--rows`` rows (200,000 by default, 80 MB):

1. ``estimate_test_prior(proba, q)`` at its defaults, and with each solver at
   the default tolerance, against ``proba.sum()``: milliseconds (best of
   ``--repeats``), EM steps or cycles, passes of the solver (``n_passes``) and
   the ratio "sum passes" = call / sum (validation and the degenerate-estimate
   check included). Target: the default call <= 25 sum passes.
2. The solvers on shifted batches of ``--rows`` rows: the stacked outputs
   resampled at Dirichlet(alpha) class proportions (alpha = 1, 0.3, 0.1; the
   smaller, the more classes nearly or entirely absent), each solver at the
   default tolerance, with its L1 distance to the exact MLE (SQUAREM to 1e-12).
   Which solver is fastest to the same estimate. (PGA, thousands of passes on
   these batches, is timed once.)
3. ``bbse_test_prior`` and ``rlls_test_prior`` at K = 100: the joint confusion
   matrix of the WideResNet test set, a batch of the DenseNet test set (10,000
   rows), milliseconds idle and, with ``--busy``, with a second process keeping
   one core busy (``_common.busy_machine``). Target: busy within 1.5x of idle.
4. ``--part solvers``: the default solver. EM and SQUAREM at the default
   tolerance on batches of the shipped CIFAR outputs (K = 10: WideResNet on
   CIFAR-10; K = 100: the stacked CIFAR-100 outputs) of n = 500, 5,000 and
   200,000 rows, drawn at the test set's class proportions ("none") or at
   Dirichlet(1) and Dirichlet(0.1) proportions, MLE and MAP: milliseconds
   (best of ``--repeats``, one run at 200,000 rows), passes, and the L1
   distance to the exact optimum (SQUAREM to tol 1e-12). PGA, ten to a
   thousand times slower on these batches, is left out.
5. ``--part dask``: the same tiled array as a Dask array in memory (chunks of
   ``--chunk-rows`` rows, whole rows; the default scheduler): one EM pass (the
   E-step and M-step sums of one EM step, one ``dask.compute``) and the
   default estimate against a bare ``x.sum().compute()`` of the same run.
   Target: an EM pass <= 3 sum passes. With ``--chunk-rows 1`` (and small
   ``--rows``), the cost of a graph of one-row chunks.

Default threading (no ``threadpoolctl`` limit here: the library sets its own).
Timings on a shared machine move by tens of percent between runs; the ratios
to ``proba.sum()`` of the same run are the figures to compare.

Run from the repository root::

    python benchmarks/bench_prior_passes.py [--rows 200000] [--repeats 5] [--busy]
        [--part {1,2,3,solvers,dask}] [--chunk-rows 25000]

``--tree PATH`` imports skprior from another checkout (the "before" figures).
"""

import argparse
import functools
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SOLVERS = ("em", "squarem", "pga")


def stacked_cifar100():
    from _data import load_model_outputs

    parts = [
        load_model_outputs(name)
        for name in ("wideresnet-16-4-cifar-100", "densenet-bc-100-cifar-100")
    ]
    proba = np.concatenate([p for p, _ in parts]).astype(np.float32)
    labels = np.concatenate([y for _, y in parts])
    return proba, labels


def tiled(proba, n_rows):
    reps = -(-n_rows // len(proba))
    return np.ascontiguousarray(np.tile(proba, (reps, 1))[:n_rows])


def shifted_rows(labels, n_rows, alpha, rng):
    """Row indices with Dirichlet(alpha) class proportions (with replacement)."""
    n_classes = labels.max() + 1
    counts = rng.multinomial(n_rows, rng.dirichlet(np.full(n_classes, alpha)))
    return np.concatenate(
        [
            rng.choice(np.flatnonzero(labels == c), size=m)
            for c, m in enumerate(counts)
            if m
        ]
    )


def solver_rows(title, proba, q, repeats, best_time, slow_pga=False):
    from skprior import estimate_test_prior

    sum_time, _ = best_time(proba.sum, max(repeats, 10))
    exact = estimate_test_prior(proba, q, solver="squarem", tol=1e-12, max_iter=10**5)
    print(f"\n{title}: proba.sum() {1e3 * sum_time:.2f} ms")
    print("| call | ms | iterations | passes | sum passes | L1 to exact MLE |")
    print("|---|---|---|---|---|---|")
    calls = {"defaults": {}} | {f"solver={s!r}": {"solver": s} for s in SOLVERS}
    for name, kwargs in calls.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            seconds, result = best_time(
                lambda kwargs=kwargs: estimate_test_prior(proba, q, **kwargs),
                1 if kwargs.get("solver") == "pga" and slow_pga else repeats,
            )
        gap = np.abs(result.prior - exact.prior).sum()
        print(
            f"| {name} | {1e3 * seconds:.1f} | {result.n_iter} | {result.n_passes} "
            f"| {seconds / sum_time:.1f} | {gap:.1e} |"
        )


def confusion_rows(repeats, busy, best_time, busy_machine):
    from _data import load_model_outputs

    from skprior import bbse_test_prior, joint_confusion_matrix, rlls_test_prior

    held_out, labels = load_model_outputs("wideresnet-16-4-cifar-100")
    batch, _ = load_model_outputs("densenet-bc-100-cifar-100")
    confusion = joint_confusion_matrix(held_out, labels)
    calls = {
        "bbse_test_prior": lambda: bbse_test_prior(batch, confusion),
        "rlls_test_prior": lambda: rlls_test_prior(batch, confusion),
    }
    print(f"\nBBSE / RLLS, K = 100, batch {batch.shape[0]:,} rows")
    print("| call | idle (ms) | busy (ms) | busy / idle |")
    print("|---|---|---|---|")
    for name, call in calls.items():
        call()  # (first call: the thread-pool inspection)
        idle, _ = best_time(call, repeats)
        if busy:
            with busy_machine():
                loaded, _ = best_time(call, repeats)
            figures = f"{1e3 * loaded:.1f} | {loaded / idle:.2f}x"
        else:
            figures = "- | -"
        print(f"| {name} | {1e3 * idle:.1f} | {figures} |")


def solver_table(repeats, best_time):
    from _data import load_model_outputs

    from skprior import estimate_test_prior

    cifar10 = load_model_outputs("wideresnet-16-4-cifar-10")
    outputs = {10: cifar10, 100: stacked_cifar100()}
    print("\n| K | n | shift | method | EM ms | SQUAREM ms | EM / SQUAREM | ", end="")
    print("EM passes | SQUAREM passes | EM L1 to optimum | SQUAREM L1 to optimum |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for n_classes, (proba, labels) in outputs.items():
        proba = proba.astype(np.float32)
        q = np.bincount(labels, minlength=n_classes) / len(labels)
        for n in (500, 5_000, 200_000):
            rng = np.random.default_rng(0)
            for shift in ("none", 1.0, 0.1):
                if shift == "none":
                    rows = rng.choice(len(labels), size=n)
                else:
                    rows = shifted_rows(labels, n, shift, rng)
                batch = np.ascontiguousarray(proba[rows])
                for method in ("mle", "map"):
                    exact = estimate_test_prior(
                        batch,
                        q,
                        method=method,
                        solver="squarem",
                        tol=1e-12,
                        max_iter=10**5,
                    ).prior
                    figures = {}
                    for solver in ("em", "squarem"):
                        seconds, result = best_time(
                            functools.partial(
                                estimate_test_prior,
                                batch,
                                q,
                                method=method,
                                solver=solver,
                            ),
                            1 if n > 100_000 else repeats,
                        )
                        gap = np.abs(result.prior - exact).sum()
                        figures[solver] = (seconds, result.n_passes, gap)
                    (t_em, p_em, g_em), (t_sq, p_sq, g_sq) = figures.values()
                    ratios.append(t_em / t_sq)
                    name = "none" if shift == "none" else f"Dirichlet({shift})"
                    print(
                        f"| {n_classes} | {n:,} | {name} | {method} | "
                        f"{1e3 * t_em:.1f} | {1e3 * t_sq:.1f} | "
                        f"{t_em / t_sq:.2f} | {p_em} | {p_sq} | "
                        f"{g_em:.1e} | {g_sq:.1e} |",
                        flush=True,
                    )
    print(
        f"\nEM time / SQUAREM time: min {min(ratios):.2f}, median "
        f"{np.median(ratios):.2f}, max {max(ratios):.2f}"
    )


def dask_rows(proba, q, chunk_rows, repeats, best_time):
    import dask.array as da

    from skprior import estimate_test_prior
    from skprior.label_shift._solvers import _Problem

    x = da.from_array(proba, chunks=(chunk_rows, -1))
    sum_time, _ = best_time(lambda: x.sum().compute(), max(repeats, 10))
    problem = _Problem(x, q, 0.0, 1e-6, "em")
    pass_time, _ = best_time(lambda: problem.evaluate(q), repeats)
    call_time, result = best_time(lambda: estimate_test_prior(x, q), repeats)
    print(
        f"\nDask in memory, {proba.shape[0]:,} x {proba.shape[1]} "
        f"{proba.dtype}, {x.numblocks[0]} chunks of {chunk_rows:,} rows: "
        f"x.sum().compute() {1e3 * sum_time:.2f} ms"
    )
    print("| call | ms | computes | sum passes |")
    print("|---|---|---|---|")
    print(f"| one EM pass | {1e3 * pass_time:.1f} | 1 | {pass_time / sum_time:.1f} |")
    print(
        f"| estimate_test_prior(x, q) | {1e3 * call_time:.1f} | "
        f"{result.n_passes + 2} | {call_time / sum_time:.1f} |"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--busy", action="store_true")
    parser.add_argument("--tree", default=str(HERE.parent))
    parser.add_argument("--part", choices=("1", "2", "3", "solvers", "dask"))
    parser.add_argument("--chunk-rows", type=int, default=25_000)
    args = parser.parse_args()
    sys.path.insert(0, args.tree)
    sys.path.insert(0, str(HERE))
    from _common import best_time, busy_machine

    import skprior

    print(f"skprior from {Path(skprior.__file__).parent}, numpy {np.__version__}")
    proba, labels = stacked_cifar100()
    q = np.bincount(labels, minlength=100) / len(labels)
    if args.part in (None, "1"):
        title = f"CIFAR-100 tiled, {args.rows:,} x 100 float32"
        solver_rows(title, tiled(proba, args.rows), q, args.repeats, best_time)
    if args.part in (None, "2"):
        rng = np.random.default_rng(0)
        for alpha in (1.0, 0.3, 0.1):
            rows = shifted_rows(labels, args.rows, alpha, rng)
            title = f"Shifted CIFAR-100, Dirichlet({alpha}), {args.rows:,} rows"
            solver_rows(title, proba[rows], q, args.repeats, best_time, True)
    if args.part in (None, "3"):
        confusion_rows(args.repeats, args.busy, best_time, busy_machine)
    if args.part in (None, "solvers"):
        solver_table(args.repeats, best_time)
    if args.part in (None, "dask"):
        x = tiled(proba, args.rows)
        dask_rows(x, q, args.chunk_rows, args.repeats, best_time)


if __name__ == "__main__":
    main()
