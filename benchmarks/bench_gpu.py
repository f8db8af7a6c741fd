"""Array functions on a GPU (PyTorch): time against the memory-bandwidth limit.

For ``--rows`` x ``--classes`` float32 logits on ``--device`` (default:
``cuda`` when available, else ``cpu``), each array function's time is
compared with one ``x.sum()`` over the same tensor on the same device (one
read of the data: the memory-bandwidth limit) and with the NumPy path on the
CPU (the same data as a NumPy array). The functions run as a user calls
them (default settings); each time is the best of ``--repeat`` runs after a
warm-up, with ``torch.cuda.synchronize()`` around it on a GPU. On a GPU the
number of host synchronisations of one call is counted too (PyTorch's sync
debug mode warns at each operation that waits for the device: a transfer of a
result to the host, a data-dependent shape); every one is a stall of the
device's queue.

    PYTHONPATH=$PWD python benchmarks/bench_gpu.py --rows 1000000 --classes 1000

With no GPU the script runs on CPU tensors (it proves the path works; the
figures are then CPU figures, not GPU ones). ``--no-numpy`` skips the NumPy
comparison (slow at 1e6 x 1,000).
"""

import argparse
import json
import time

import numpy as np

from skprior import (
    adjust_to_prior,
    alternating_normalization,
    bbse_test_prior,
    estimate_source_prior,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    fit_temperature,
    fit_vector_scaling,
    joint_confusion_matrix,
    label_shift_test,
    softmax_temperature,
    softmax_vector_scaling,
    topk_entropy,
)
from skprior.metrics import expected_calibration_error


def _best_time(function, repeat, synchronize):
    function()  # warm-up (kernels, caches)
    synchronize()
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def _count_syncs(function):
    """Host synchronisations in one call of ``function`` (CUDA only)."""
    import warnings

    import torch

    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            function()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def workloads(logits, proba, labels, n_classes):
    """name -> function of (logits, proba, labels) for one backend."""
    train = np.full(n_classes, 1.0 / n_classes)
    test = np.linspace(1.0, 2.0, n_classes)
    test /= test.sum()
    return {
        "softmax_temperature": lambda z, p, y: softmax_temperature(z, 1.5),
        "fit_temperature (EC)": lambda z, p, y: fit_temperature(z, y),
        "fit_temperature (NLL)": lambda z, p, y: fit_temperature(z, y, method="nll"),
        "fit_bias_corrected_temperature": lambda z, p, y: (
            fit_bias_corrected_temperature(z, y)
        ),
        "estimate_test_prior (EM, 10 passes)": lambda z, p, y: estimate_test_prior(
            p, train, solver="em", max_iter=9, tol=1e-300
        ),
        "estimate_test_prior (default: SQUAREM)": lambda z, p, y: estimate_test_prior(
            p, train, solver="squarem"
        ),
        "adjust_to_prior": lambda z, p, y: adjust_to_prior(p, train, test),
        "topk_entropy": lambda z, p, y: topk_entropy(p, 3),
        "alternating_normalization (d=1)": lambda z, p, y: alternating_normalization(
            p, train
        ),
        "expected_calibration_error": lambda z, p, y: expected_calibration_error(
            y, p, labels=range(n_classes)
        ),
        "fit_vector_scaling": lambda z, p, y: fit_vector_scaling(z, y),
        "softmax_vector_scaling": lambda z, p, y: softmax_vector_scaling(
            z, 1.0 + 0.0 * z[0], 0.0 * z[0]
        ),
        "estimate_source_prior": lambda z, p, y: estimate_source_prior(
            p, source="mean_posterior"
        ),
        "joint_confusion_matrix": lambda z, p, y: joint_confusion_matrix(p, y),
        "bbse_test_prior": lambda z, p, y: bbse_test_prior(p, _confusion(p, y)),
        "label_shift_test": lambda z, p, y: label_shift_test(p, train),
    }


_CONFUSION = {}


def _confusion(proba, labels):
    """One confusion matrix per backend, computed once (BBSE's input)."""
    key = type(proba).__module__
    if key not in _CONFUSION:
        _CONFUSION[key] = joint_confusion_matrix(proba, labels)
    return _CONFUSION[key]


def main(argv=None):
    import warnings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--device", default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-numpy", action="store_true")
    args = parser.parse_args(argv)
    import torch  # (after the options: --help without PyTorch)

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    on_gpu = device.startswith("cuda")
    synchronize = torch.cuda.synchronize if on_gpu else (lambda: None)
    name = torch.cuda.get_device_name(device) if on_gpu else "CPU (torch)"

    generator = torch.Generator(device=device).manual_seed(0)
    labels = torch.randint(
        0, args.classes, (args.rows,), device=device, generator=generator
    )
    logits = torch.randn(
        args.rows, args.classes, device=device, generator=generator, dtype=torch.float32
    )
    logits[torch.arange(args.rows, device=device), labels] += 3.0
    logits *= 2.0  # over-confident: temperatures above 1
    proba = torch.softmax(logits, dim=1)

    bandwidth = _best_time(lambda: logits.sum(), args.repeat, synchronize)
    host = None
    if not args.no_numpy:
        host = (logits.cpu().numpy(), proba.cpu().numpy(), labels.cpu().numpy())
        numpy_bandwidth = _best_time(lambda: host[0].sum(), args.repeat, lambda: None)
    results = {
        "device": name,
        "shape": [args.rows, args.classes],
        "sum_s": bandwidth,
        "numpy_sum_s": None if host is None else numpy_bandwidth,
        "functions": {},
    }
    print(f"{name}: {args.rows} x {args.classes} float32; x.sum() {bandwidth:.4f} s")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # EM stopped after 10 passes on purpose
        for label, function in workloads(logits, proba, labels, args.classes).items():
            seconds = _best_time(
                lambda f=function: f(logits, proba, labels), args.repeat, synchronize
            )
            row = {"s": seconds, "x_sum": seconds / bandwidth}
            if on_gpu:
                row["host_syncs"] = _count_syncs(
                    lambda f=function: f(logits, proba, labels)
                )
            if host is not None:
                numpy_s = _best_time(
                    lambda f=function: f(*host), max(1, args.repeat - 2), lambda: None
                )
                row["numpy_s"] = numpy_s
                row["speedup_vs_numpy"] = numpy_s / seconds
            results["functions"][label] = row
            syncs = f"  {row['host_syncs']:4d} syncs" if on_gpu else ""
            print(
                f"  {label:38} {seconds:9.4f} s  {row['x_sum']:7.1f} x sum{syncs}"
                + (
                    f"  NumPy {row['numpy_s']:8.4f} s ({row['speedup_vs_numpy']:.1f}x)"
                    if host is not None
                    else ""
                ),
                flush=True,
            )
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
