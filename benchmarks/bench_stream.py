"""Drifting-stream benchmark of the on-line prior trackers (SPEC section 6, issue 26).

Protocol (``_stream_protocol.py``; the shift processes of Wu et al., 2021,
Bai et al., 2022, and Baby et al., 2023):

* Each stored CIFAR output (``_data.CIFAR_OUTPUTS``) is split 50/50 at random
  into a validation half -- bias-corrected temperature scaling (BCTS), the
  source prior q (the mean calibrated posterior there) and BBSE's confusion
  matrix -- and a pool the streams are drawn from.
* Per seed, two priors mu1, mu2 are drawn from Dirichlet(0.5). Processes over
  ``--rounds`` rounds: ``none`` (the validation half's class frequencies: no shift),
  ``constant`` (mu1), ``bernoulli`` (switch between mu1 and mu2 with
  probability 1/sqrt(T) each round), ``sine`` (a_t mu1 + (1 - a_t) mu2, a_t =
  (1 + sin(2 pi t / sqrt(T))) / 2), ``monotone`` (mu1 to mu2 linearly). A
  round is ``--batches`` rows: a class from pi_t, then a pool row of it.
* Round t is predicted from rounds before t only, then seen. Methods:
  ``unadapted`` (q); ``oracle`` (``adjust_to_prior`` with the true pi_t);
  ``window W``: MAP (Dirichlet hyper-prior, ``estimate_test_prior(...,
  method="map")``) on the last W rows; ``CumulativePrior`` on the posteriors;
  ``FTH (BBSE)`` and ``FLH-FTL (BBSE)`` on the batch's unclipped BBSE estimate;
  ``PAC <online>``: ``PriorAdaptedClassifier``'s stream (``update_prior``,
  the prior ``predict_proba_online`` uses) with its defaults and that
  ``online`` (``aggregate`` is the default).
* Reported per model, batch size and process, averaged over rounds and
  ``--seeds``: accuracy (%), its share of the oracle's gain ((acc -
  unadapted) / (oracle - unadapted)), and the log-loss against the unadapted
  model's (every round of the shifted processes is shifted; ``none`` is the
  no-shift check); and the mean cost of one update (us, the method only).
  With ``PAC aggregate`` and ``AggregatingPrior`` both run, the default
  stream with and without its test of no shift, paired by seed
  (``print_gate``).
* Bounded state: a ``PriorAdaptedClassifier`` around a frozen stand-in model
  whose ``predict_proba`` returns stored CIFAR-100 rows gets 2,000
  ``update_prior`` calls of 10 rows; pickled size (of the estimator, whose
  stand-in model holds the stored outputs, and of its stream state alone:
  the tracker or counts and the shift monitor)
  and median time of one call (over the 150 calls before each mark) after 200
  and 2,000 calls.

Run: ``PYTHONPATH=$PWD python benchmarks/bench_stream.py``. The defaults (6
models x 5 processes x 3 seeds x 500 rounds, batches of 10 rows, the default
stream ``PAC aggregate``) keep a run near 10 minutes on 2 loaded cores; the
full protocol adds ``--batches 1 10 50 --online aggregate cumulative fth flh-ftl``
(each wrapper stream costs 4-9 ms a round, each window 1-2 ms). ``--quick``:
one model, one seed, 200 rounds; ``--json PATH``: every figure; ``--eta``:
FLH-FTL (BBSE) at further learning rates.
"""

import argparse
import json
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import CIFAR_OUTPUTS, load_model_outputs  # noqa: E402
from _stream_protocol import (  # noqa: E402
    DEFAULT_ONLINE,
    OGD,
    ONLINE,
    PROCESSES,
    TRACKERS,
    WINDOWS,
    Setup,
    StoredOutputs,
    evaluate,
    oracle_share,
)

from skprior import AggregatingPrior, PriorAdaptedClassifier  # noqa: E402


def bounded_state(online):
    proba, labels = load_model_outputs("wideresnet-16-4-cifar-100")
    proba = proba.astype(np.float64)
    model = StoredOutputs(proba).fit(None, None)
    method = "mle" if online in ("aggregate", "cumulative") else "bbse"
    wrapper = PriorAdaptedClassifier(model, method=method, online=online)
    wrapper.fit(np.arange(5000)[:, None], labels[:5000])
    rng = np.random.default_rng(0)
    stream = rng.integers(5000, 10000, size=(2000, 10, 1))
    times, out = [], {}
    for step, batch in enumerate(stream, start=1):
        start = time.perf_counter()
        wrapper.update_prior(batch)
        times.append(time.perf_counter() - start)
        if step in (200, 2000):
            state = wrapper._stream  # (tracker or counts, shift monitor)
            out[step] = (
                len(pickle.dumps(wrapper)),
                len(pickle.dumps(state)),
                1e6 * np.median(times[-150:]),
            )
    return out


def flat_time(marks=(1_000, 100_000), timed=500):
    """Median us of one ``AggregatingPrior.update`` (10 CIFAR-100 rows) over
    the ``timed`` updates before each mark, and the pickled tracker's size."""
    proba = load_model_outputs("wideresnet-16-4-cifar-100")[0].astype(np.float64)
    tracker = AggregatingPrior(proba.mean(axis=0))
    batches = np.random.default_rng(0).integers(0, len(proba), size=(1000, 10))
    times, out = [], {}
    for step in range(1, max(marks) + 1):
        rows = proba[batches[step % 1000]]
        start = time.perf_counter()
        tracker.update(rows)
        times.append(time.perf_counter() - start)
        if step in marks:
            out[step] = (1e6 * np.median(times[-timed:]), len(pickle.dumps(tracker)))
    return out


def run(
    models,
    processes,
    batches,
    rounds,
    seeds,
    online,
    period,
    etas,
    trackers=TRACKERS,
    log=print,
):
    """``{(model, process, batch): {method: [(acc, log_loss, us), ...per seed]}}``."""
    out = {}
    for name in models:
        setup = Setup(name, *load_model_outputs(name))
        for batch in batches:
            for process in processes:
                start = time.perf_counter()
                per_seed = [
                    evaluate(
                        setup,
                        process,
                        batch,
                        rounds,
                        seed,
                        online,
                        period,
                        etas,
                        trackers,
                    )
                    for seed in seeds
                ]
                out[name, process, batch] = {
                    m: [r[m] for r in per_seed] for m in per_seed[0]
                }
                log(
                    f"  {name}, {process}, batch {batch}: "
                    f"{time.perf_counter() - start:.0f} s",
                    file=sys.stderr,
                )
    return out


def summarise(runs):
    """Means over seeds: ``{key: {method: dict(accuracy, log_loss, share, ...)}}``."""
    summary = {}
    for key, methods in runs.items():
        mean = {m: np.mean(v, axis=0) for m, v in methods.items()}
        unadapted, oracle = mean["unadapted"][0], mean["oracle"][0]
        # (without shift the oracle's gain is noise: no share of it)
        shifted = key[1] != "none"
        summary[key] = {
            m: {
                "accuracy": float(acc),
                "log_loss": float(loss),
                "log_loss_minus_unadapted": float(loss - mean["unadapted"][1]),
                "share_of_oracle_gain": float(
                    oracle_share(acc, unadapted, oracle) if shifted else np.nan
                ),
                "us_per_update": float(us),
            }
            for m, (acc, loss, us) in mean.items()
        }
    return summary


def percent(share):
    return "n/a" if np.isnan(share) else f"{100 * share:.0f}%"


def cell(figures, method):
    if method == "unadapted":
        return f"{figures['accuracy']:.2f} / LL {figures['log_loss']:.3f}"
    return (
        f"{figures['accuracy']:.2f} / {percent(figures['share_of_oracle_gain'])} / "
        f"{figures['log_loss_minus_unadapted']:+.3f}"
    )


def print_tables(summary, models, processes, batches):
    for name in models:
        for batch in batches:
            keys = [(name, p, batch) for p in processes]
            methods = list(summary[keys[0]])
            print(
                f"\n{name}, batches of {batch} rows: accuracy (%) / share of the "
                f"oracle's gain / log-loss minus the unadapted model's "
                f"(unadapted: accuracy / log-loss)\n"
            )
            print("| method | " + " | ".join(processes) + " | us per update |")
            print("|---" * (len(processes) + 2) + "|")
            for m in methods:
                us = np.mean([summary[k][m]["us_per_update"] for k in keys])
                cells = " | ".join(cell(summary[k][m], m) for k in keys)
                print(f"| {m} | {cells} | {us:.0f} |" if us else f"| {m} | {cells} | |")


def paired_difference(runs, key, method, other):
    """Mean and standard error over seeds of ``method``'s accuracy minus ``other``'s.

    Paired by seed (both run on the same streams): the spread of the streams
    themselves cancels.
    """
    accuracy = {m: np.array([r[0] for r in runs[key][m]]) for m in (method, other)}
    difference = accuracy[method] - accuracy[other]
    return difference.mean(), standard_error(difference)


def print_summary(summary, online, runs):
    print(
        f"\nSummary: the oracle's accuracy gain (points); for the best window "
        f"(chosen per row on the mean over seeds), PAC {online} and the best "
        f"tracker, the share of that gain (accuracy minus the unadapted "
        f"model's, points); PAC {online}'s accuracy minus the best window's "
        f"(points, mean +- standard error over seeds, paired); the log-loss of "
        f"PAC {online} minus the unadapted model's\n"
    )
    print(
        f"| model | process | batch | oracle gain | best window | PAC {online} "
        f"| best tracker | PAC {online} - best window | PAC {online} LL - unadapted |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for (name, process, batch), figures in summary.items():
        unadapted = figures["unadapted"]["accuracy"]

        def gain(method, figures=figures, unadapted=unadapted):
            f = figures[method]
            share = percent(f["share_of_oracle_gain"])
            return f"{share} ({f['accuracy'] - unadapted:+.2f})"

        def best(prefixes, figures=figures):
            names = [m for m in figures if m.startswith(prefixes)]
            return max(names, key=lambda m: figures[m]["accuracy"])

        window = best("window")
        tracker = best(
            ("Cumulative", "FTH", "FLH", "PAC", "Aggregating", "UOGD", "ATLAS")
        )
        difference, error = paired_difference(
            runs, (name, process, batch), f"PAC {online}", window
        )
        print(
            f"| {name} | {process} | {batch} "
            f"| {figures['oracle']['accuracy'] - unadapted:+.2f} "
            f"| {window}: {gain(window)} | {gain(f'PAC {online}')} "
            f"| {tracker}: {gain(tracker)} | {difference:+.2f} +- {error:.2f} "
            f"| {figures[f'PAC {online}']['log_loss_minus_unadapted']:+.3f} |"
        )


def print_gate(runs, gated="PAC aggregate", ungated="AggregatingPrior"):
    """The default stream with and without its test of no shift, per cell.

    ``gated`` is the wrapper's stream (adapted once the test rejects),
    ``ungated`` the same tracker fed directly (the wrapper with
    ``shift_level=None``). Shifted cells: each one's share of the oracle's
    gain and accuracy minus the best window's, and ungated minus gated
    (points, mean +- s.e. over seeds, paired); no shift: accuracy and log-loss
    minus the unadapted model's, and the worst seed's.
    """
    print(
        f"\nThe test of no shift: {gated} (gated) against {ungated} (ungated);"
        " paired by seed, mean +- s.e. (points of accuracy)\n"
    )
    print(
        "| model | process | batch | seeds | oracle gain | best window | gated: share "
        "/ - window | ungated: share / - window | ungated - gated "
        "| LL - unadapted gated / ungated |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    calm = []
    for key, methods in runs.items():
        acc, loss = (
            {m: np.array([r[i] for r in v]) for m, v in methods.items()} for i in (0, 1)
        )
        added = {m: loss[m] - loss["unadapted"] for m in (gated, ungated)}
        if key[1] == "none":
            calm.append((key, acc, added))
            continue
        window = max(
            (m for m in acc if m.startswith("window")), key=lambda m: acc[m].mean()
        )
        unadapted, gain = acc["unadapted"].mean(), acc["oracle"].mean()
        gain -= unadapted

        def share(m, acc=acc, unadapted=unadapted, gain=gain):
            return percent((acc[m].mean() - unadapted) / gain if gain > 0 else np.nan)

        def diff(m, other, key=key):
            return "{:+.3f} +- {:.3f}".format(*paired_difference(runs, key, m, other))

        print(
            f"| {key[0]} | {key[1]} | {key[2]} | {len(acc[gated])} | {gain:+.2f} "
            f"| {window}: {share(window)} | {share(gated)} / {diff(gated, window)} "
            f"| {share(ungated)} / {diff(ungated, window)} | {diff(ungated, gated)} "
            f"| {added[gated].mean():+.4f} / {added[ungated].mean():+.4f} |"
        )
    if not calm:
        return
    print(
        "\nNo shift: accuracy (points) and log-loss minus the unadapted model's, "
        "mean +- s.e. over seeds; the worst seed's\n"
    )
    print(
        "| model | batch | seeds | accuracy gated | ungated | worst seed gated / "
        "ungated | log-loss gated | ungated | worst seed gated / ungated |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for key, acc, added in calm:
        lost = {m: acc[m] - acc["unadapted"] for m in (gated, ungated)}
        cells = []
        for d, digits in ((lost, 3), (added, 5)):
            g, u = d[gated], d[ungated]
            cells += [
                f"{x.mean():+.{digits}f} +- {standard_error(x):.{digits}f}"
                for x in (g, u)
            ]
            worst = (g.min(), u.min()) if d is lost else (g.max(), u.max())
            cells.append(f"{worst[0]:+.{digits}f} / {worst[1]:+.{digits}f}")
        print(
            f"| {key[0]} | {key[2]} | {len(acc[gated])} | " + " | ".join(cells) + " |"
        )


def standard_error(x):
    return x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else np.nan


def print_bounded_state():
    print(
        "\nBounded state: PriorAdaptedClassifier.update_prior, CIFAR-100 outputs, "
        "10 rows per call\n"
    )
    print(
        "| online | pickled estimator after 200 / 2,000 calls (bytes) | ratio "
        "| pickled stream state after 200 / 2,000 | ratio "
        "| median us per call after 200 / 2,000 | ratio |"
    )
    print("|---|---|---|---|---|---|---|")
    for online in ONLINE:
        out = bounded_state(online)
        (s1, k1, t1), (s2, k2, t2) = out[200], out[2000]
        print(
            f"| {online} | {s1} / {s2} | {s2 / s1:.2f} | {k1} / {k2} | {k2 / k1:.2f} "
            f"| {t1:.0f} / {t2:.0f} | {t2 / t1:.2f} |"
        )


def print_flat_time():
    out = flat_time()
    (t1, s1), (t2, s2) = out[1_000], out[100_000]
    print(
        "\nAggregatingPrior.update, 10 CIFAR-100 rows: median us over the 500 "
        "updates before 1,000 / 100,000 updates (ratio), pickled bytes\n"
    )
    print(f"| {t1:.0f} / {t2:.0f} us | {t2 / t1:.2f} | {s1} / {s2} bytes |")


def write_json(args, runs, summary):
    """Every figure: the means over seeds and each seed's, keyed model/process/batch."""
    fields = ("accuracy", "log_loss", "us_per_update")
    per_seed = {
        key: {
            m: [dict(zip(fields, map(float, r), strict=True)) for r in v]
            for m, v in methods.items()
        }
        for key, methods in runs.items()
    }
    figures = {"mean_over_seeds": summary, "per_seed": per_seed}
    document = {
        "config": {**vars(args), "json": str(args.json), "windows": WINDOWS},
        **{
            part: {"/".join(map(str, k)): v for k, v in d.items()}
            for part, d in figures.items()
        },
    }
    args.json.write_text(json.dumps(document, indent=1))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(CIFAR_OUTPUTS))
    parser.add_argument("--processes", nargs="+", default=list(PROCESSES))
    parser.add_argument("--batches", type=int, nargs="+", default=[10])
    parser.add_argument(
        "--online",
        nargs="+",
        default=[DEFAULT_ONLINE],
        choices=ONLINE,
        help="PriorAdaptedClassifier streams to run (each ~4-9 ms per round)",
    )
    parser.add_argument(
        "--period", type=float, help="of the sine process (default sqrt(rounds))"
    )
    parser.add_argument(
        "--eta",
        type=float,
        nargs="*",
        default=[],
        help="learning rates of further FLH-FTL (BBSE) columns",
    )
    parser.add_argument(
        "--trackers",
        nargs="*",
        default=list(TRACKERS),
        choices=[*TRACKERS, *OGD],
        help="trackers fed directly (default all of skprior's; none: windows and "
        "wrappers only); also UOGD and ATLAS on BBSE estimates (CIFAR-10 only "
        "in practice: O(n_val K) a round)",
    )
    parser.add_argument("--rounds", type=int, help="default 500 (200 with --quick)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write every figure there")
    parser.add_argument(
        "--quick", action="store_true", help="one model, one seed, 200 rounds"
    )
    parser.add_argument(
        "--state-only", action="store_true", help="only the bounded-state table"
    )
    parser.add_argument(
        "--no-state", action="store_true", help="skip the bounded-state table"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.models, args.seeds = args.models[:1], 1
    args.rounds = args.rounds or (200 if args.quick else 500)
    print(
        f"rounds={args.rounds}, seeds={args.seeds}, windows={WINDOWS}, "
        f"numpy {np.__version__}"
    )
    if not args.state_only:
        start = time.perf_counter()
        runs = run(
            args.models,
            args.processes,
            args.batches,
            args.rounds,
            range(args.seeds),
            args.online,
            args.period,
            args.eta,
            args.trackers,
        )
        summary = summarise(runs)
        if args.json:
            write_json(args, runs, summary)
        print_tables(summary, args.models, args.processes, args.batches)
        shown = DEFAULT_ONLINE if DEFAULT_ONLINE in args.online else args.online[0]
        print_summary(summary, shown, runs)
        if {"PAC aggregate", "AggregatingPrior"} <= set(next(iter(runs.values()))):
            print_gate(runs)
        print(f"\n(streams: {time.perf_counter() - start:.0f} s)")
    if not args.no_state:
        print_bounded_state()
        print_flat_time()


if __name__ == "__main__":
    main()
