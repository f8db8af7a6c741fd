"""Peak memory of the ``skprior`` commands, as a multiple of their input file.

Each command runs in a fresh process (``python -m skprior ...``, the tree on
``PYTHONPATH``) on synthetic float32 outputs of ``--rows`` x ``--classes``
(logits: standard normal times 3; probabilities: their softmax; labels: the
argmax of noisy logits; written by a child process, so that this one stays
small: a child starts as a copy of it, and the copy counts in its peak), with
``--labels`` (the report) and ``--output`` (a .npy file), in memory and with
``--out-of-core``. Its peak resident memory (``ru_maxrss`` of the finished
child, from ``os.wait4``) is compared with the
same command's on a small file of the same classes (2**20 entries, the least
on which CAN runs its numba kernel where numba is installed), which holds the
interpreter and the same imports (NumPy, SciPy, scikit-learn, Dask, numba):
what grows with the file is its size times

    ratio = (peak RSS - peak RSS on the small file) / (size - small file's size)

where size is the OUTPUTS file's (the labels file, 8 bytes a row, is not
counted: 2% of 100 float32 classes).

The issue's bound (29): every command <= 2x in memory, or out of core, and out
of core within the few blocks ``docs/cli.rst`` states (blocks of 16 MB:
``skprior._cli._blocks.BLOCK_BYTES``; ``--chunk-mb`` changes it here). The
class-wise fits (``vs``, ``dirichlet``) take one pass per L-BFGS step, minutes
out of core on big files: ``--methods`` picks the calibrations.

Run (from the repository root; a few minutes at the default 100,000 rows):

    PYTHONPATH=$PWD python benchmarks/bench_cli_memory.py [--rows 750000]
        [--classes 100] [--commands can,adapt,calibrate] [--methods ec,nll,bcts,vs]
        [--modes memory,out-of-core] [--chunk-mb 16] [--folder DIR] [--diagram]

``--diagram`` adds ``--diagram`` (a PNG) to the in-memory runs.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# The child: the command line, with the out-of-core block size of --chunk-mb
# (the command line's BLOCK_BYTES; a tree without it keeps its own).
CHILD = (
    "import sys; import skprior._cli._blocks as b; "
    "b.BLOCK_BYTES = int(sys.argv[1]); from skprior._cli import main; "
    "sys.exit(main(sys.argv[2:]))"
)
SMALL_ENTRIES = 2**20
HERE = Path(__file__).resolve().parent


def write_files(folder, n_rows, n_classes, seed=0):
    """z.npy (float32 logits), p.npy (their softmax), y.npy (labels), by blocks."""
    from numpy.lib.format import open_memmap

    folder = Path(folder)
    rng = np.random.default_rng(seed)
    shape, step = (n_rows, n_classes), max(1, 2**22 // n_classes)
    z = open_memmap(folder / "z.npy", "w+", np.float32, shape)
    p = open_memmap(folder / "p.npy", "w+", np.float32, shape)
    y = np.empty(n_rows, dtype=np.int64)
    for start in range(0, n_rows, step):
        rows = slice(start, min(start + step, n_rows))
        block = (3 * rng.standard_normal((rows.stop - start, n_classes))).astype(
            np.float32
        )
        z[rows] = block
        y[rows] = np.argmax(block + 3 * rng.standard_normal(block.shape), axis=1)
        block -= block.max(axis=1, keepdims=True)
        np.exp(block, out=block)
        p[rows] = block / block.sum(axis=1, keepdims=True, dtype=np.float64)
    y[: min(n_classes, n_rows)] = np.arange(min(n_classes, n_rows))  # (every class)
    np.save(folder / "y.npy", y)
    del z, p


def cases(methods, n_classes):
    """(command, what, argv after OUTPUTS, whether OUTPUTS holds logits)."""
    prior = ["--prior", ",".join(["1"] * n_classes)]
    yield "can", "probabilities", prior, False
    yield "can", "--logits", [*prior, "--logits"], True
    adapt = [*prior, "--shift-level", "1"]  # (estimate and adapt every time)
    yield "adapt", "probabilities", adapt, False
    yield "adapt", "--logits", [*adapt, "--logits"], True
    fit = ["--fit-labels", "{y}", "--method"]
    for method in methods:
        extra = ["--reg-lambda", "0.001"] if method == "dirichlet" else []
        yield "calibrate", f"--method {method}", [*fit, method, *extra], False
    yield "calibrate", "--method nll --logits", [*fit, "nll", "--logits"], True


def peak_rss(argv, chunk_bytes, cwd):
    """Peak resident bytes of a child running the command ``argv``, and its time.

    ``cwd`` is the child's folder: not the repository's, whose ``skprior``
    would come before the tree on ``PYTHONPATH`` (``python -c`` puts the
    current folder first on ``sys.path``).
    """
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(chunk_bytes), *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=cwd,
    )
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {stderr.decode()[-2000:]}")
    unit = 1 if sys.platform == "darwin" else 1024  # (Linux reports kB)
    return usage.ru_maxrss * unit, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--methods", default="ec,nll,bcts,vs")
    parser.add_argument("--modes", default="memory,out-of-core")
    parser.add_argument("--commands", default="can,adapt,calibrate")
    parser.add_argument("--chunk-mb", type=float, default=16)
    parser.add_argument("--folder", default=None, help="where the files are written")
    parser.add_argument(
        "--diagram", action="store_true", help="also draw --diagram (in memory)"
    )
    args = parser.parse_args()
    chunk_bytes = int(args.chunk_mb * 2**20)
    folder = Path(tempfile.mkdtemp(prefix="bench_cli_memory_", dir=args.folder))
    try:
        big, small = folder / "big", folder / "small"
        big.mkdir(), small.mkdir()
        # (in a child: a child starts as a copy of this process, whose peak
        # would otherwise count in every command's)
        for where, rows in [
            (big, args.rows),
            (small, -(-SMALL_ENTRIES // args.classes)),
        ]:
            write = f"import bench_cli_memory as b; b.write_files({str(where)!r}, "
            write += f"{max(rows, 1)}, {args.classes})"
            subprocess.run([sys.executable, "-c", write], check=True, cwd=HERE)
        size = (big / "p.npy").stat().st_size
        grown = size - (small / "p.npy").stat().st_size
        blocks = -(-size // chunk_bytes)
        print(
            f"{args.rows} x {args.classes} float32 ({size / 2**20:.0f} MB; out of "
            f"core: {blocks} blocks of {args.chunk_mb:g} MB); ratio = (peak RSS - "
            f"peak RSS on a file of {SMALL_ENTRIES} entries) / (the difference of "
            f"their sizes)\n"
        )
        print("| command | input | mode | peak (MB) | small's (MB) | ratio | s |")
        print("|---|---|---|---|---|---|---|")
        for command, what, rest, logits in cases(args.methods.split(","), args.classes):
            if command not in args.commands.split(","):
                continue
            for mode in args.modes.split(","):
                flags = ["--out-of-core"] if mode == "out-of-core" else []
                peaks = []
                # (the small file twice: a first run may compile numba's kernel
                # for a tree without its cache, which costs more than the run)
                for where in (small, small, big):
                    name = "z.npy" if logits else "p.npy"
                    argv = [command, str(where / name), *flags, "-q"]
                    argv += [a.format(y=where / "y.npy") for a in rest]
                    argv += ["--labels", str(where / "y.npy")]
                    argv += ["-o", str(where / "out.npy")]
                    if args.diagram and mode == "memory":
                        argv += ["--diagram", str(where / "diagram.png")]
                    peaks.append(peak_rss(argv, chunk_bytes, folder))
                (_, _), (base, _), (peak, seconds) = peaks
                print(
                    f"| {command} | {what} | {mode} | {peak / 2**20:.0f} | "
                    f"{base / 2**20:.0f} | {(peak - base) / grown:.2f}x | "
                    f"{seconds:.1f} |",
                    flush=True,
                )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
