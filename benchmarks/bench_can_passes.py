"""Cost of CAN at d = 1 in passes over the data (issue 28), with and without numba.

The unit is one ``proba.sum()`` over the same array, timed in the same run.
On CIFAR-100 posteriors (the WideResNet and DenseNet test sets, stacked:
20,000 x 100 float32), tiled to each of ``--rows`` (200,000 and 1,000,000 by
default: 80 and 400 MB):

1. ``alternating_normalization(proba, prior)`` at its defaults (d = 1,
   k = "auto", tau = 0.9, alpha = 1, the batch as its own reference),
   validation included, on the compiled kernel (numba) and on the NumPy path
   (``SKPRIOR_NO_NUMBA=1``): milliseconds (best of ``--repeats``) and the ratio
   "sum passes" = call / sum; "median": the median call over the same sum
   (with a busy process the best call is the one that had both cores; the
   median says what a call usually gets). Target: <= 4 with the kernel. The kernel runs
   as it does by default ("numba": one thread per core of the process, which
   take the batch's tasks in turn, each copying its rows into the output and
   screening them; the result's buffer is one that an earlier call's result,
   let go since, had: ``_output_memory``), with no buffer kept ("new": as a
   first call of its size or a loop that holds every result, every output
   in pages new to the process, which the system clears;
   ``_output_memory.KEEP_SECONDS = 0``), into an output array that exists
   already ("out=", the same array at each repeat) and in the calling thread
   alone ("serial", ``_compiled.THREADS = 1``). Each call's result is held
   until the next call's returns (``result = call()``), as a loop that
   rebinds it does. The largest difference from the "numba" output is
   printed too.
2. ``--startup``: in fresh processes with an empty numba cache directory, the
   first call (numba's import and the compilation of the kernels) and then,
   with that cache filled, the first call of a new process (import and loading
   the cached machine code); and the import time of numba itself.

``--busy`` runs it all with a second process keeping one core busy
(``_common.busy_machine``). ``--cpu-time`` times the CPU time of the process
(all its threads) instead of the wall time: on a machine shared with other
jobs the wall time of a call of tens of milliseconds includes the time it
waits for a core, which a 4 ms ``proba.sum()`` mostly escapes, so the wall
ratios there overstate the cost. It counts the work, not its overlap: the
kernel's threads shorten the wall time on an idle machine, not the CPU time.
Timings on a shared machine move by tens of percent between runs; the ratios
of the same run are the figures to compare.

Run from the repository root::

    python benchmarks/bench_can_passes.py [--rows 200000 1000000] [--repeats 7]
        [--busy] [--cpu-time] [--startup] [--task-mb 4]
"""

import argparse
import functools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _common import best_time, busy_machine  # noqa: E402
from bench_prior_passes import stacked_cifar100, tiled  # noqa: E402

from skprior import alternating_normalization  # noqa: E402
from skprior.can import _compiled, _output_memory  # noqa: E402


def with_numba(enabled):
    if enabled:
        os.environ.pop("SKPRIOR_NO_NUMBA", None)
    else:
        os.environ["SKPRIOR_NO_NUMBA"] = "1"


def each_time(func, repeats, clock):
    """The times of ``repeats`` calls of ``func()``, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = clock()
        result = func()
        times.append(clock() - start)
    return times, result


def passes(rows, repeats, timer):
    proba, labels = stacked_cifar100()
    prior = np.bincount(labels, minlength=100) / labels.size
    alternating_normalization(proba, prior)  # (numba's import and cache load)
    keep_seconds = _output_memory.KEEP_SECONDS
    print(
        f"{'rows':>10} {'path':>7} {'sum (ms)':>9} {'call (ms)':>10} "
        f"{'sum passes':>11} {'median':>7} {'max |numba - numpy|':>20}"
    )
    for n_rows in rows:
        big = tiled(proba, n_rows)
        outputs, buffer = {}, np.empty_like(big)
        for path in ("numba", "new", "out=", "serial", "numpy"):
            with_numba(path != "numpy")
            _compiled.THREADS = 1 if path == "serial" else None
            _output_memory.KEEP_SECONDS = 0 if path == "new" else keep_seconds
            _output_memory.release()
            out = buffer if path == "out=" else None
            sum_time, _ = timer(big.sum, max(repeats, 20))
            call_times, outputs[path] = each_time(
                lambda big=big, out=out: alternating_normalization(big, prior, out=out),
                repeats,
                timer.keywords["clock"],
            )
            call_time, median = min(call_times), float(np.median(call_times))
            diff = ""
            if path != "numba":
                diff = f"{np.max(np.abs(outputs['numba'] - outputs[path])):.1e}"
            print(
                f"{n_rows:>10,} {path:>7} {sum_time * 1e3:>9.2f} "
                f"{call_time * 1e3:>10.2f} {call_time / sum_time:>11.1f} "
                f"{median / sum_time:>7.1f} {diff:>20}"
            )
        with_numba(True)
        del big, outputs, buffer


STARTUP = """
import time
start = time.perf_counter()
import numpy as np
from skprior import alternating_normalization
proba = np.random.default_rng(0).dirichlet(np.full(100, 0.1), 20000)
proba = proba.astype(np.float32)
proba /= proba.sum(axis=1, keepdims=True)
begin = time.perf_counter()
alternating_normalization(proba, np.full(100, 0.01))
first = time.perf_counter() - begin
begin = time.perf_counter()
alternating_normalization(proba, np.full(100, 0.01))
print(f"{first:.3f} {time.perf_counter() - begin:.4f}")
"""


def startup():
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    env.pop("SKPRIOR_NO_NUMBA", None)
    command = [sys.executable, "-c", STARTUP]
    with tempfile.TemporaryDirectory() as cache:
        env["NUMBA_CACHE_DIR"] = cache
        compile_run = subprocess.run(command, env=env, capture_output=True, text=True)
        cached_run = subprocess.run(command, env=env, capture_output=True, text=True)
    env["SKPRIOR_NO_NUMBA"] = "1"
    numpy_run = subprocess.run(command, env=env, capture_output=True, text=True)
    numba_import = subprocess.run(
        [
            sys.executable,
            "-c",
            "import time; t = time.perf_counter(); import numba; "
            "print(f'{time.perf_counter() - t:.3f}')",
        ],
        capture_output=True,
        text=True,
    )
    print("first call of a process (20,000 x 100 float32), seconds:")
    for label, run in (
        ("empty numba cache (import + compile)", compile_run),
        ("cached kernels (import + load)", cached_run),
        ("without numba (SKPRIOR_NO_NUMBA=1)", numpy_run),
    ):
        first, second = run.stdout.split() if run.returncode == 0 else ("?", "?")
        print(f"  {label:<40} first {first:>7}  second call {second:>7}")
        if run.returncode:
            print(run.stderr)
    print(f"  import numba alone: {numba_import.stdout.strip()} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--busy", action="store_true")
    parser.add_argument("--cpu-time", action="store_true")
    parser.add_argument("--startup", action="store_true")
    parser.add_argument(
        "--task-mb",
        type=float,
        default=_compiled.TASK_BYTES / 2**20,
        help="size of the kernel's tasks (_compiled.TASK_BYTES), MB",
    )
    args = parser.parse_args()
    _compiled.TASK_BYTES = int(args.task_mb * 2**20)
    import numba  # (the kernel's requirement: fail early without it)

    clock = time.process_time if args.cpu_time else time.perf_counter
    timer = functools.partial(best_time, clock=clock)
    now = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    print(
        f"CAN d = 1 in proba.sum() passes; {now} UTC; numpy {np.__version__}, "
        f"numba {numba.__version__}; "
        f"{os.cpu_count()} CPU cores; "
        f"{'process CPU' if args.cpu_time else 'wall'} time; "
        f"tasks of {args.task_mb:g} MB"
        f"{'; with a second process keeping one core busy' if args.busy else ''}"
    )
    with busy_machine(args.busy):
        passes(args.rows, args.repeats, timer)
        if args.startup:
            startup()


if __name__ == "__main__":
    main()
