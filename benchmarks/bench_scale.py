"""Scale benchmark: skprior on a stored output larger than memory, with Dask.

Writes ``--rows`` x ``--classes`` float32 posteriors (7e7 x 100 is 28 GB,
more than this machine's 24 GB of RAM) and their labels to ``--path`` as
.npy, then, reading it as a Dask array of row chunks
(:func:`skprior._utils._npy_blocks.open_lazy`, positioned reads):

1. one bare ``proba.sum()`` pass: the disk-bound limit of a pass;
2. ``estimate_test_prior`` by EM (``--em-iter`` steps) and by SQUAREM to
   convergence: wall time, passes, time per pass (the validation pass
   included as one);
3. ``adjust_to_prior`` to the estimate, written block by block to a second
   .npy file;
4. the top-label ECE of the input.

It reports peak RSS (the process and its children, sampled every 50 ms,
and ``ru_maxrss``) and wall times, first on Dask's threaded scheduler, then
on a ``dask.distributed.LocalCluster`` with two workers (``--cluster``).
To run on a real cluster, pass ``--scheduler tcp://host:8786`` (the address
of a running ``dask scheduler``); the file must then lie on storage every
worker can read at the same path.

    PYTHONPATH=$PWD python benchmarks/bench_scale.py --rows 70000000 \\
        --classes 100 --path /tmp/skprior_scale --em-iter 2 \\
        --steps sum,em,adjust,ece --cluster-steps sum,em --cluster

(the run of ``docs/results_scale.md``; ``--steps`` and ``--cluster-steps``
choose among sum, em, squarem, adjust, ece).

The files are deleted at the end unless ``--keep``.
"""

import argparse
import json
import os
import resource
import threading
import time
import warnings
from pathlib import Path

import numpy as np

from skprior import adjust_to_prior, estimate_test_prior
from skprior._utils._npy_blocks import NpyRowWriter, open_lazy, store_lazy
from skprior.metrics import expected_calibration_error


class PeakRSS:
    """Peak resident memory of this process and its children (sampled)."""

    def __init__(self, interval=0.05):
        import psutil

        self.process, self.interval, self.peak = psutil.Process(), interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        total = self.process.memory_info().rss
        for child in self.process.children(recursive=True):
            try:
                total += child.memory_info().rss
            except Exception:  # a worker that just exited
                pass
        self.peak = max(self.peak, total)

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            time.sleep(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()


def write_data(folder, n_rows, n_classes, block=1_000_000, seed=0):
    """Posteriors of a shifted label distribution, and labels, block by block."""
    rng = np.random.default_rng(seed)
    prior = rng.dirichlet(np.full(n_classes, 2.0))
    proba_path, label_path = folder / "proba.npy", folder / "labels.npy"
    proba_out = NpyRowWriter(proba_path, (n_rows, n_classes), np.float32)
    label_out = NpyRowWriter(label_path, (n_rows,), np.int16)
    for start in range(0, n_rows, block):
        stop = min(start + block, n_rows)
        labels = rng.choice(n_classes, size=stop - start, p=prior)
        logits = rng.standard_normal((stop - start, n_classes), dtype=np.float32)
        logits[np.arange(stop - start), labels] += 2.5
        logits -= logits.max(axis=1, keepdims=True)
        np.exp(logits, out=logits)
        logits /= logits.sum(axis=1, keepdims=True)
        proba_out[start:stop] = logits
        label_out[start:stop] = labels.astype(np.int16)
    return proba_path, label_path


def timed(function):
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


def run(proba_path, label_path, output_path, em_iter, squarem_iter, steps, name):
    """The measured ``steps``; returns a dict of figures, printing each."""
    proba = open_lazy(proba_path)
    labels = open_lazy(label_path, rows=proba.chunks[0][0])
    proba[:10].sum().compute()  # (start the scheduler's threads or workers)
    n_classes = proba.shape[1]
    train = np.full(n_classes, 1.0 / n_classes)
    figures = {"chunks": len(proba.chunks[0]), "chunk_rows": proba.chunks[0][0]}

    def record(**values):
        figures.update(values)
        print(json.dumps({name: values}), flush=True)

    if "sum" in steps:
        _, seconds = timed(lambda: float(proba.sum().compute()))
        record(sum_pass_s=seconds)
    if "em" in steps:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # EM stopped after em_iter steps
            em, seconds = timed(
                lambda: estimate_test_prior(
                    proba, train, solver="em", max_iter=em_iter, tol=1e-8
                )
            )
        # passes: the validation (one compute) and one per E-step
        record(em_s=seconds, em_passes=em.n_passes + 1)
        record(em_per_pass_s=seconds / (em.n_passes + 1))
    prior = train if "em" not in steps else em.prior.compute()
    if "squarem" in steps:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # when squarem_iter cycles do not do
            squarem, seconds = timed(
                lambda: estimate_test_prior(
                    proba, train, solver="squarem", tol=1e-6, max_iter=squarem_iter
                )
            )
        record(
            squarem_s=seconds,
            squarem_passes=squarem.n_passes + 1,
            squarem_converged=squarem.converged,
        )
        prior = squarem.prior.compute()
    if "adjust" in steps:
        _, seconds = timed(
            lambda: store_lazy(output_path, adjust_to_prior(proba, train, prior))
        )
        record(adjust_write_s=seconds)
    if "ece" in steps:
        ece, seconds = timed(
            lambda: expected_calibration_error(labels, proba, labels=range(n_classes))
        )
        record(ece_s=seconds, ece=ece)
    return figures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=70_000_000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--path", default="/tmp/skprior_scale")
    parser.add_argument("--em-iter", type=int, default=5)
    parser.add_argument("--squarem-iter", type=int, default=10_000)
    parser.add_argument("--cluster", action="store_true", help="also a LocalCluster")
    parser.add_argument("--scheduler", help="address of a running dask scheduler")
    parser.add_argument("--keep", action="store_true", help="keep the files")
    parser.add_argument(
        "--steps", default="sum,em,squarem,adjust,ece", help="steps on threads"
    )
    parser.add_argument(
        "--cluster-steps", default="sum,em", help="steps on the cluster(s)"
    )
    args = parser.parse_args(argv)

    folder = Path(args.path)
    folder.mkdir(parents=True, exist_ok=True)
    proba_path, label_path = folder / "proba.npy", folder / "labels.npy"
    output_path = folder / "adjusted.npy"
    results = {"rows": args.rows, "classes": args.classes}
    try:
        if not proba_path.exists():
            with PeakRSS() as rss:
                _, seconds = timed(lambda: write_data(folder, args.rows, args.classes))
            results["write_s"], results["write_peak_rss_gb"] = seconds, rss.peak / 1e9
        results["file_gb"] = os.path.getsize(proba_path) / 1e9
        print(json.dumps(results), flush=True)
        settings = [("threads", None)]
        if args.cluster:
            settings.append(("local-cluster-2-workers", "local"))
        if args.scheduler:
            settings.append(("cluster " + args.scheduler, args.scheduler))
        for name, address in settings:
            client = cluster = None
            if address is not None:
                from dask.distributed import Client, LocalCluster

                if address == "local":
                    cluster = LocalCluster(
                        n_workers=2, threads_per_worker=1, memory_limit="4GB"
                    )
                    client = Client(cluster)
                else:
                    client = Client(address)
            try:
                with PeakRSS() as rss:
                    steps = args.steps if address is None else args.cluster_steps
                    (figures, seconds) = timed(
                        lambda steps=steps, name=name: run(
                            proba_path,
                            label_path,
                            output_path,
                            args.em_iter,
                            args.squarem_iter,
                            steps.split(","),
                            name,
                        )
                    )
                figures["total_s"] = seconds
                figures["peak_rss_gb"] = rss.peak / 1e9
                figures["ru_maxrss_gb"] = (
                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
                )
                if "em_per_pass_s" in figures and "sum_pass_s" in figures:
                    figures["em_pass_over_sum_pass"] = (
                        figures["em_per_pass_s"] / figures["sum_pass_s"]
                    )
                results[name] = figures
                print(json.dumps({name: figures}), flush=True)
            finally:
                if client is not None:
                    client.close()
                if cluster is not None:
                    cluster.close()
    finally:
        if not args.keep:
            for path in (proba_path, label_path, output_path):
                if path.exists():
                    path.unlink()
    print(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
