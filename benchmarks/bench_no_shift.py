"""What adapting costs when nothing changed: the stored outputs' no-shift splits.

For each stored CIFAR output (``_data.CIFAR_OUTPUTS``), rows 0-4,999 are the
fit (validation) data and rows 5,000-9,999 the test batch: the same
distribution, no shift. Reported: the change of accuracy (points) and of the
mean log loss (NLL) of the test batch against its unadapted posteriors, for

* MLE, always: ``adjust_to_prior(p, q, estimate_test_prior(p, q).prior)`` with
  q the fit data's label frequencies (the CLI's ``--prior-from-labels`` before
  the test of no shift), and with q the fit data's mean posterior
  (``source_prior="mean_posterior"``, Alexandari et al. 2020);
* the default of ``PriorAdaptedClassifier`` (and of the CLI with
  ``--val-outputs``): ``label_shift_test`` against the fit posteriors at level
  0.01, MLE only where it rejects -- run as users run it, the estimator around
  the stored outputs (``fit`` on rows 0-4,999, ``predict_proba`` on the rest);
* the CLI's default without ``--val-outputs``, run as printed in the README
  (``skprior adapt test.npy --prior-from-labels val_labels.npy -o out.npy``,
  in-process): the same test against the label frequencies, which holds for
  calibrated posteriors only, so a rejection there leaves the posteriors
  unchanged with a warning ("warned"), since it cannot tell a shift from
  miscalibration;
* the CLI with ``--val-outputs val.npy``.

And the same for streams: ``PriorAdaptedClassifier.update_prior`` over the
test half in 100 batches (10 random orders), ``predict_proba_online`` adapting
only once the stream is found shifted (``online_shifted_``); how many of the
10 no-shift streams were ever declared shifted, and of 10 longer ones redrawn
from the fit half; after how many rows a shifted stream (the classes of the
first half only) was; and a late shift, the same classes after 2,500 rows
without shift: after how many of its rows it was found, and how far the
on-line estimate ends from the shifted rows' class frequencies (L1).

Run: ``python benchmarks/bench_no_shift.py``.
"""

import argparse
import contextlib
import io
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import StoredOutputsClassifier  # noqa: E402
from _data import CIFAR_OUTPUTS, load_model_outputs  # noqa: E402

from skprior import (  # noqa: E402
    PriorAdaptedClassifier,
    adjust_to_prior,
    estimate_test_prior,
    label_shift_test,
)
from skprior._cli import main as cli  # noqa: E402


def run_cli(folder, *options):
    """``skprior adapt`` on the files of ``folder``: (output, stderr)."""
    err = io.StringIO()
    argv = ["adapt", f"{folder}/test.npy", "--prior-from-labels"]
    argv += [f"{folder}/val_labels.npy", "-o", f"{folder}/out.npy", *options]
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert cli(argv) == 0
    return np.load(f"{folder}/out.npy").astype(np.float64), err.getvalue()


def normalised_outputs(name):
    """The stored outputs in float64, rows renormalised, and their labels."""
    proba, y = load_model_outputs(name)
    proba = proba.astype(np.float64)
    return proba / proba.sum(axis=1, keepdims=True), y


def nll(proba, y):
    return float(-np.mean(np.log(np.maximum(proba[np.arange(len(y)), y], 1e-300))))


def changes(before, after, y):
    accuracy = 100 * (np.mean(after.argmax(1) == y) - np.mean(before.argmax(1) == y))
    return f"{accuracy:+.2f} / {nll(after, y) - nll(before, y):+.4f}"


def adapted(proba, q, caught):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        prior = estimate_test_prior(proba, q).prior
    caught.extend(str(w.message).split(":")[0] for w in record)
    return adjust_to_prior(proba, q, prior)


def main():
    print(
        "Rows 0-4,999 fit, 5,000-9,999 test (no shift). Cells: Δaccuracy "
        "(points) / ΔNLL of the test batch; p: the test's p-value.\n"
    )
    print(
        "| outputs | MLE always, q = labels | MLE always, q = mean posterior | "
        "PriorAdaptedClassifier default: p, Δ | CLI without --val-outputs: p, Δ, "
        "warned | CLI with --val-outputs: Δ |"
    )
    print("|---|---|---|---|---|---|")
    for name in CIFAR_OUTPUTS:
        proba, y = normalised_outputs(name)
        fit, test, y_test = proba[:5000], proba[5000:], y[5000:]
        n_classes = proba.shape[1]
        labels = np.bincount(y[:5000], minlength=n_classes) / 5000
        mean = fit.mean(axis=0)
        ignored = []
        always_labels = changes(test, adapted(test, labels, ignored), y_test)
        always_mean = changes(test, adapted(test, mean, ignored), y_test)
        rows = np.arange(len(proba))[:, None]
        model = StoredOutputsClassifier(proba).fit()
        wrapper = PriorAdaptedClassifier(model).fit(rows[:5000], y[:5000])
        out = wrapper.predict_proba(rows[5000:])
        default = label_shift_test(test, fit)
        with tempfile.TemporaryDirectory() as folder:
            np.save(f"{folder}/test.npy", test)
            np.save(f"{folder}/val.npy", fit)
            np.save(f"{folder}/val_labels.npy", y[:5000])
            cli_out, cli_err = run_cli(folder)
            val_out, _ = run_cli(folder, "--val-outputs", f"{folder}/val.npy")
        cli = label_shift_test(test, labels)
        warned = "yes" if "posteriors left unchanged" in cli_err else "no"
        print(
            f"| {name} | {always_labels} | {always_mean} | p = {default.pvalue:.2g}, "
            f"{changes(test, out, y_test)} | p = {cli.pvalue:.2g}, "
            f"{changes(test, cli_out, y_test)}, {warned} | "
            f"{changes(test, val_out, y_test)} |"
        )


def _found_after(wrapper, rows, batches, *, feed_all=False):
    """Rows of ``batches`` given to ``update_prior`` until the stream was found
    shifted (None if never); with ``feed_all`` the rest is given too."""
    seen, found = 0, None
    for batch in batches:
        wrapper.update_prior(rows[batch])
        seen += len(batch)
        if found is None and wrapper.online_shifted_:
            found = seen
            if not feed_all:
                break
    return found


def _late_shift(model, rows, y, n_calm, n_classes):
    """A stream of ``n_calm`` rows without shift, then those of the first half
    of the classes, in batches of 50: (cell "found after", L1 at the end)."""
    rng = np.random.default_rng(0)
    calm = rng.permutation(np.arange(5000, 7500))[:n_calm]
    late = rng.permutation(np.flatnonzero(y[7500:] < n_classes // 2) + 7500)
    wrapper = PriorAdaptedClassifier(model).fit(rows[:5000], y[:5000])
    calm_found = _found_after(wrapper, rows, np.array_split(calm, n_calm // 50))
    late_batches = np.array_split(late, late.size // 50)
    late_found = _found_after(wrapper, rows, late_batches, feed_all=True)
    truth = np.bincount(y[late], minlength=n_classes) / late.size
    l1 = np.abs(wrapper.online_prior_ - truth).sum()
    if calm_found is not None:
        return f"in the calm part ({calm_found:,})", f"{l1:.2f}"
    if late_found is None:
        return f"not in {late.size:,}", f"{l1:.2f}"
    return f"{late_found:,}", f"{l1:.2f}"


def streams(n_orders=10, n_batches=100, n_long=10, long_rows=10_000):
    print(
        "\nStreams (default PriorAdaptedClassifier, online="
        f"{PriorAdaptedClassifier().online!r}, fit "
        "on rows 0-4,999). No shift: the test half in a random order, in 100 "
        "batches of 50 rows and in 500 of 10. Long: "
        f"{long_rows:,} rows drawn with replacement from the fit half in "
        "batches of 50 (no shift, and a mean that equals the reference's: a "
        "conservative check). Shifted: the test half's rows of the first half "
        "of the classes from the start. Late shift: 2,000 / 2,450 / 2,500 rows "
        "of the test half without shift, then the rows 7,500-9,999 of the "
        "first half of the classes, in batches of 50; found after that many "
        "shifted rows; L1: the on-line estimate at the end against those rows' "
        "class frequencies.\n"
    )
    print(
        "| outputs | no shift, 50-row batches: found shifted | Δ of "
        "predict_proba_online after the stream | no shift, 10-row batches: "
        "found shifted | long, no shift: found shifted | shifted from the "
        "start: found after | late shift found after (2,000 / 2,450 / 2,500 "
        "calm rows) | late shift: L1 at the end |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in CIFAR_OUTPUTS:
        proba, y = normalised_outputs(name)
        rows = np.arange(len(proba))[:, None]
        model = StoredOutputsClassifier(proba).fit()
        n_classes = proba.shape[1]
        found, deltas, found_small, found_long = 0, [], 0, 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for seed in range(n_orders):
                order = np.random.default_rng(seed).permutation(np.arange(5000, 10000))
                wrapper = PriorAdaptedClassifier(model).fit(rows[:5000], y[:5000])
                for batch in np.array_split(order, n_batches):
                    wrapper.update_prior(rows[batch])
                out = wrapper.predict_proba_online(rows[5000:])
                found += wrapper.online_shifted_
                deltas.append(changes(proba[5000:], out, y[5000:]))
                wrapper = PriorAdaptedClassifier(model).fit(rows[:5000], y[:5000])
                small = np.array_split(order, order.size // 10)
                found_small += _found_after(wrapper, rows, small) is not None
            for seed in range(n_long):
                wrapper = PriorAdaptedClassifier(model).fit(rows[:5000], y[:5000])
                draws = np.random.default_rng(seed).integers(0, 5000, long_rows)
                found_long += (
                    _found_after(wrapper, rows, np.split(draws, long_rows // 50))
                    is not None
                )
            shifted = np.flatnonzero(y[5000:] < n_classes // 2) + 5000
            wrapper = PriorAdaptedClassifier(model).fit(rows[:5000], y[:5000])
            seen = _found_after(wrapper, rows, np.array_split(shifted, n_batches // 2))
            late = [
                _late_shift(model, rows, y, n, n_classes) for n in (2000, 2450, 2500)
            ]
        worst = max(deltas, key=lambda cell: abs(float(cell.split(" / ")[0])))
        print(
            f"| {name} | {found} of {n_orders} | {worst} (the largest of "
            f"{n_orders}) | {found_small} of {n_orders} | {found_long} of "
            f"{n_long} | {seen} rows | {' / '.join(cell[0] for cell in late)} | "
            f"{' / '.join(cell[1] for cell in late)} |"
        )


if __name__ == "__main__":
    # No options: --help prints the purpose instead of starting the run.
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    main()
    streams()
