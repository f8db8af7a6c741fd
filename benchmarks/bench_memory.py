"""Peak memory of skprior's array functions, as a multiple of the input's size.

Each function runs once on synthetic float32 logits (standard normal times 3)
or on their softmax, under ``tracemalloc``; the figure is the peak of what the
call allocates (its output included) divided by the size of the float32 input.
numpy reports its allocations to ``tracemalloc``, so these are the arrays the
call creates, not the process's resident size.

The computations that are not a single pass work over row blocks of about
2**22 entries (``skprior._utils._kernels.BLOCK_ELEMENTS``), so the peaks tend to a
constant times the input as the batch grows: at 8,192 x 1,024 one block's
temporaries still weigh as much as the input, at 32,768 x 1,024 (the default)
a quarter. CAN is given ``tau=0.5`` here, which makes most rows low-confidence
(the worst case; with real outputs few rows are, see ``bench_can_speed.py``).

Run: ``python benchmarks/bench_memory.py [--rows N] [--classes K] [--only WORD]``
(``--only prior`` runs the cases whose name contains "prior").
"""

import argparse

import numpy as np
from _common import peak_allocation

from skprior import (
    adjust_to_prior,
    alternating_normalization,
    bbse_test_prior,
    estimate_source_prior,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    fit_dirichlet_calibration,
    fit_temperature,
    fit_vector_scaling,
    joint_confusion_matrix,
    label_shift_test,
    per_label,
    rlls_test_prior,
    softmax_dirichlet_calibration,
    softmax_temperature,
    softmax_vector_scaling,
    topk_entropy,
)
from skprior.metrics import expected_calibration_error, reliability_curve


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32768)
    parser.add_argument("--classes", type=int, default=1024)
    parser.add_argument("--only", default=None, help="cases whose name contains this")
    parser.add_argument(
        "--skip", default=None, help="leave out the cases whose name contains this"
    )
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    logits = (3 * rng.standard_normal((args.rows, args.classes))).astype(np.float32)
    proba = softmax_temperature(logits, 1.0)
    labels = np.argmax(logits + 3 * rng.standard_normal(logits.shape), axis=1)
    labels[: args.classes] = np.arange(args.classes)  # (BCTS needs every class)
    uniform = np.full(args.classes, 1 / args.classes)
    shifted = np.r_[0.5, np.full(args.classes - 1, 0.5 / (args.classes - 1))]
    confusion = joint_confusion_matrix(proba, labels)
    factors = np.linspace(0.5, 1.5, args.classes)
    bias = np.linspace(-0.5, 0.5, args.classes)
    matrix = np.eye(args.classes) + 0.01
    # Multi-label outputs: one probability per label (n_samples, n_labels),
    # with as many labels as there are classes here, so the same input size.
    label_proba = (1 / (1 + np.exp(-logits))).astype(np.float32)
    label_prior = np.full(args.classes, 0.5)

    cases = [
        ("softmax_temperature(logits, T)", softmax_temperature, (logits, 1.5), {}),
        ("fit_temperature(method='ec')", fit_temperature, (logits, labels), {}),
        (
            "fit_temperature(method='nll')",
            fit_temperature,
            (logits, labels),
            {"method": "nll"},
        ),
        (
            "fit_bias_corrected_temperature",
            fit_bias_corrected_temperature,
            (logits, labels),
            {},
        ),
        ("topk_entropy(kind='renormalized')", topk_entropy, (proba, 3), {}),
        (
            "topk_entropy(kind='max_over_k')",
            topk_entropy,
            (proba, 3),
            {"kind": "max_over_k"},
        ),
        (
            "alternating_normalization(d=1)",
            alternating_normalization,
            (proba, uniform),
            {"tau": 0.5},
        ),
        (
            "alternating_normalization(d=3)",
            alternating_normalization,
            (proba, uniform),
            {"tau": 0.5, "n_iter": 3},
        ),
        (
            "estimate_test_prior(solver='em')",
            estimate_test_prior,
            (proba, uniform),
            {"solver": "em"},
        ),
        (
            "estimate_test_prior(solver='squarem')",
            estimate_test_prior,
            (proba, uniform),
            {"solver": "squarem"},
        ),
        ("adjust_to_prior", adjust_to_prior, (proba, uniform, shifted), {}),
        ("label_shift_test(proba, prior)", label_shift_test, (proba, uniform), {}),
        (
            "expected_calibration_error",
            expected_calibration_error,
            (labels, proba),
            {},
        ),
        (
            "expected_calibration_error(kind='classwise')",
            expected_calibration_error,
            (labels, proba),
            {"kind": "classwise"},
        ),
        ("reliability_curve", reliability_curve, (labels, proba), {}),
        ("joint_confusion_matrix", joint_confusion_matrix, (proba, labels), {}),
        ("bbse_test_prior", bbse_test_prior, (proba, confusion), {}),
        ("rlls_test_prior", rlls_test_prior, (proba, confusion), {}),
        (
            "estimate_source_prior(source='labels')",
            estimate_source_prior,
            (proba, labels),
            {},
        ),
        (
            "estimate_source_prior(source='mean_posterior')",
            estimate_source_prior,
            (proba,),
            {"source": "mean_posterior"},
        ),
        (
            "per_label(adjust_to_prior)",
            per_label,
            (adjust_to_prior,),
            {
                "proba": label_proba,
                "train_prior": label_prior,
                "test_prior": 0.8 * label_prior,
            },
        ),
        (
            "softmax_vector_scaling",
            softmax_vector_scaling,
            (logits, factors, bias),
            {},
        ),
        (
            "softmax_dirichlet_calibration",
            softmax_dirichlet_calibration,
            (logits, matrix, bias),
            {},
        ),
        ("fit_vector_scaling", fit_vector_scaling, (logits, labels), {}),
        (
            "fit_dirichlet_calibration(reg_lambda=1.0)",
            fit_dirichlet_calibration,
            (logits, labels),
            {"reg_lambda": 1.0, "reg_mu": 1.0},
        ),
        (
            "fit_dirichlet_calibration(reg_lambda='auto')",
            fit_dirichlet_calibration,
            (logits, labels),
            {},
        ),
    ]
    if args.only:
        cases = [case for case in cases if args.only in case[0]]
    if args.skip:
        cases = [case for case in cases if args.skip not in case[0]]
    print(
        f"{args.rows} x {args.classes} float32 input ({logits.nbytes / 2**20:.0f} MB);"
        f" peak allocation of the call / input size"
    )
    print()
    print("| function | peak (MB) | peak / input |")
    print("|---|---|---|")
    for name, function, call_args, kwargs in cases:
        peak = peak_allocation(lambda f=function, a=call_args, kw=kwargs: f(*a, **kw))
        print(f"| {name} | {peak / 2**20:.0f} | {peak / logits.nbytes:.2f}x |")


if __name__ == "__main__":
    main()
