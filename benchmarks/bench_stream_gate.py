"""The default stream's test of no shift, paired by seed (docs/results_stream.md, 0.00).

Runs ``PriorAdaptedClassifier``'s default stream (``online="aggregate"``) on
the streams of ``_stream_protocol.py`` (the same draws as ``bench_stream.py``:
a stream depends on the model, process, batch size and seed only) with the
stream monitor's bets at several shares of ``shift_level`` and several prior
odds of a shift behind the weight the estimate gets while they run
(``--variants name=share[:odds[:c]],...``; share 0 is the monitor without
bets, as before session 17, odds 0 the prediction without that weight, as
before session 18; odds default ``_online.SHIFT_ODDS``; ``c`` the tracker's
``predictive_concentration``, ``None`` for the experts' own as before session
20, its default when left out), and optionally the tracker without the test
(``ungated``: ``AggregatingPrior`` fed directly) and the window MAPs
(``w50``, ``w100``, ``w200``, ``w400``). Prints per cell the accuracy and
log-loss against the unadapted model and every variant minus the first,
paired by seed; ``--json`` keeps the per-seed figures (accuracy %, log-loss).
``--row-se`` also prints, for each stream whose log-loss a method leaves above
the unadapted model's, the mean of the rows' paired differences and its
standard error (over blocks of 25 consecutive rows, which carries the rows'
dependence through the shared estimate): whether that stream's excess is more
than noise.

Run: ``PYTHONPATH=$PWD python benchmarks/bench_stream_gate.py --models
lenet-5-cifar-100 --processes monotone --seeds 30``.
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import load_model_outputs  # noqa: E402
from _stream_protocol import (  # noqa: E402
    PROCESSES,
    Setup,
    Tracker,
    WindowMAP,
    Wrapper,
    prior_path,
    row_log_losses,
    run_stream,
    scores,
    two_priors,
)

from skprior import AggregatingPrior  # noqa: E402
from skprior.label_shift import _online  # noqa: E402

_DEFAULT = object()  # (a variant that leaves the tracker's smoothing as it is)


class _VariantTracker(AggregatingPrior):
    """``AggregatingPrior`` at the smoothing of the variant being updated.

    The stream state builds its tracker at ``reset_prior`` and again when the
    monitor dates a shift "recent" (a restart mid-stream), each time from the
    class it finds in ``_online``: this one, whose ``predictive_concentration``
    is the current variant's, so that a restarted tracker keeps it.
    """

    smoothing = _DEFAULT

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if _VariantTracker.smoothing is not _DEFAULT:
            self.predictive_concentration = _VariantTracker.smoothing


class Variant(Wrapper):
    """The default stream with a variant's bets, odds and smoothing.

    The settings are module globals and a class attribute, read whenever the
    stream state is (re)built: they are set before each of this variant's
    calls, since the variants' streams run interleaved.
    """

    def __init__(self, setup, share, odds, smoothing):
        self.settings = share, odds, smoothing
        self.apply()
        super().__init__(setup, "aggregate")

    def apply(self):
        share, odds, smoothing = self.settings
        _online.BET_SHARE, _online.SHIFT_ODDS = share, odds
        _VariantTracker.smoothing = smoothing

    def update(self, proba, rows):
        self.apply()
        super().update(proba, rows)
        tracker = self.est._stream.tracker
        if self.settings[2] is not _DEFAULT:  # (a restart keeps the smoothing)
            assert tracker.predictive_concentration == self.settings[2]


def mean_se(x, digits=3):
    return f"{x.mean():+.{digits}f} +- {x.std(ddof=1) / np.sqrt(len(x)):.{digits}f}"


def print_row_se(setup, rows, priors, figures, model, process, seed, block=25):
    """Each stream above the unadapted log-loss: its excess +- a block SE."""
    unadapted = row_log_losses(setup, rows, priors["unadapted"])
    for method, prior_rows in priors.items():
        if method in ("unadapted", "oracle"):
            continue
        if figures[method][1] <= figures["unadapted"][1]:
            continue
        excess = row_log_losses(setup, rows, prior_rows) - unadapted
        blocks = excess[: excess.size // block * block].reshape(-1, block).mean(axis=1)
        se = blocks.std(ddof=1) / np.sqrt(blocks.size)
        print(
            f"  {model} {process} seed {seed} {method}: log-loss - unadapted "
            f"{excess.mean():+.4f} +- {se:.4f} ({excess.mean() / se:+.2f} SE)"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", required=True)
    parser.add_argument("--processes", nargs="+", required=True)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument(
        "--variants",
        default=f"before={_online.BET_SHARE}:0,now={_online.BET_SHARE}",
    )
    parser.add_argument(
        "--extra",
        nargs="*",
        default=[],
        choices=["ungated", "w50", "w100", "w200", "w400"],
    )
    parser.add_argument("--json")
    parser.add_argument("--row-se", action="store_true")
    args = parser.parse_args()
    variants = {}
    for item in args.variants.split(","):
        name, setting = item.split("=")
        share, _, rest = setting.partition(":")
        odds, _, smoothing = rest.partition(":")  # (smoothing "": the default)
        smoothing = (
            _DEFAULT
            if not smoothing
            else None
            if smoothing == "None"
            else float(smoothing)
        )
        variants[name] = (float(share), float(odds or _online.SHIFT_ODDS), smoothing)
    # (the stream state builds its trackers from this module-level name; set
    # in main, not at import, which --help and the tests do)
    _online.AggregatingPrior = _VariantTracker
    out = {}
    for model in args.models:
        setup = Setup(model, *load_model_outputs(model))
        fitted = {name: {} for name in variants}  # (one fitted wrapper each)
        for process in args.processes:
            start, per_seed = time.perf_counter(), []
            for seed in range(args.seeds):
                rng = np.random.default_rng(
                    [seed, args.batch, PROCESSES.index(process)]
                )
                mu1, mu2 = two_priors(setup.n_classes, seed)
                path = prior_path(process, args.rounds, mu1, mu2, setup.fit_prior, rng)
                rows = setup.draw(path, args.batch, rng)
                methods = {}
                for name, settings in variants.items():
                    setup.fitted = fitted[name]
                    methods[name] = Variant(setup, *settings)
                if "ungated" in args.extra:
                    methods["ungated"] = Tracker(AggregatingPrior(setup.q), setup)
                for size in (50, 100, 200, 400):
                    if f"w{size}" in args.extra:
                        methods[f"w{size}"] = WindowMAP(setup.q, size)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    priors, _ = run_stream(setup, rows, methods)
                priors["unadapted"] = np.tile(setup.q, (args.rounds, 1))
                priors["oracle"] = path
                per_seed.append({m: scores(setup, rows, p) for m, p in priors.items()})
                if args.row_se:
                    print_row_se(
                        setup, rows, priors, per_seed[-1], model, process, seed
                    )
            out[f"{model}|{process}"] = per_seed
            acc = {m: np.array([r[m][0] for r in per_seed]) for m in per_seed[0]}
            loss = {m: np.array([r[m][1] for r in per_seed]) for m in per_seed[0]}
            gain = acc["oracle"].mean() - acc["unadapted"].mean()
            print(
                f"{model} {process}: {args.seeds} seeds, oracle gain {gain:+.2f} "
                f"({time.perf_counter() - start:.0f} s)"
            )
            first = next(iter(variants))
            for m in acc:
                if m in ("unadapted", "oracle"):
                    continue
                print(
                    f"  {m}: accuracy - unadapted {mean_se(acc[m] - acc['unadapted'])}"
                    f", log-loss - unadapted "
                    f"{mean_se(loss[m] - loss['unadapted'], 4)}"
                    + (
                        ""
                        if m == first
                        else f"; - {first} {mean_se(acc[m] - acc[first])}"
                    )
                )
    if args.json:
        Path(args.json).write_text(json.dumps(out))


if __name__ == "__main__":
    main()
