"""Drifting-stream benchmark of the on-line prior trackers (SPEC section 6).

Protocol (the shift processes of Bai et al., 2022, and Baby et al., 2023):

* The stored CIFAR outputs (the networks' test sets) are split 50/50, stratified
  by a fixed seed, into a validation half -- bias-corrected temperature scaling
  (BCTS, skprior's ``fit_bias_corrected_temperature`` on log-probabilities), the
  BBSE confusion matrix, and the source prior q (the mean calibrated posterior
  there) -- and a pool the streams are drawn from.
* Two priors: mu1 puts 90% of the mass, evenly, on the first half of the
  classes and 10% on the rest; mu2 the reverse. At step t the prior pi_t is
  - ``stationary``: mu1 throughout;
  - ``bernoulli p``: switch between mu1 and mu2 with probability p each step;
  - ``sine P``: pi_t = a_t mu1 + (1 - a_t) mu2, a_t = (1 + sin(2 pi t / P)) / 2.
  A batch of ``--batch`` rows is drawn at pi_t (labels from pi_t, then a row of
  that class from the pool, with replacement), for ``--steps`` steps.
* Every method predicts batch t with a prior built from batches before t (the
  on-line protocol of the papers), then sees batch t:
  - ``unadapted``: q; ``oracle``: pi_t itself;
  - ``batch MLE``: the MLE of batch t alone (transductive, the plain
    ``predict_proba``; it sees its own batch);
  - ``cumulative``: ``CumulativePrior`` (all rows so far, default budget);
  - ``FTH``/``FLH-FTL`` on per-batch estimates s_t, by BBSE (unclipped,
    unbiased) or by the batch MLE; FLH-FTL at its default learning rate
    (``--eta`` adds others).
  Reported: accuracy (%) averaged over steps and over ``--seeds`` streams,
  and the mean cost of one update (us, the tracker only: the stored outputs
  need no model, and the per-batch estimate s_t is timed with it).
* Bounded state: a ``PriorAdaptedClassifier`` around a frozen stand-in model
  whose ``predict_proba`` returns stored CIFAR-100 rows gets 2,000
  ``update_prior`` calls of 10 rows; pickled size (of the estimator, whose
  stand-in model holds the 8 MB of outputs, and of its stream state alone)
  and median time of one call (over the 150 calls before each mark) after 200
  and 2,000 calls.

Run: ``PYTHONPATH=$PWD python benchmarks/bench_stream.py``.
"""

import argparse
import pickle
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import load_model_outputs  # noqa: E402

from skprior import (  # noqa: E402
    FLHFTL,
    CumulativePrior,
    FollowTheHistory,
    PriorAdaptedClassifier,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    joint_confusion_matrix,
    softmax_temperature,
)
from skprior._utils._options import DEFAULT_FLH_LEARNING_RATE  # noqa: E402
from skprior.label_shift._solvers import reweight  # noqa: E402


def prepare(name, seed=0):
    proba, labels = load_model_outputs(name)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    half = len(labels) // 2
    val, pool = order[:half], order[half:]
    logits = np.log(np.maximum(proba.astype(np.float64), 1e-300))
    temperature, bias = fit_bias_corrected_temperature(logits[val], labels[val])
    calibrated = softmax_temperature(logits, temperature, bias)
    q = calibrated[val].mean(axis=0)
    confusion = joint_confusion_matrix(calibrated[val], labels[val])
    return calibrated[pool], labels[pool], q, confusion


def priors(n_classes):
    first = np.arange(n_classes) < n_classes // 2
    mu1 = np.where(first, 0.9 / first.sum(), 0.1 / (~first).sum())
    return mu1, mu1[::-1].copy()


def prior_path(kind, value, steps, mu1, mu2, rng):
    if kind == "stationary":
        return np.tile(mu1, (steps, 1))
    if kind == "bernoulli":
        state, path = 0, []
        for _ in range(steps):
            if rng.random() < value:
                state = 1 - state
            path.append(mu2 if state else mu1)
        return np.array(path)
    a = (1 + np.sin(2 * np.pi * np.arange(steps) / value)) / 2
    return a[:, None] * mu1 + (1 - a[:, None]) * mu2


def run_stream(proba, labels, q, confusion, path, batch, rng, etas):
    n_classes = proba.shape[1]
    by_class = [np.flatnonzero(labels == c) for c in range(n_classes)]
    inverse = np.linalg.pinv(confusion)
    held_out = confusion.sum(axis=0)
    trackers = {"cumulative": CumulativePrior(q)}
    for source in ("BBSE", "MLE"):
        trackers[f"FTH ({source})"] = FollowTheHistory(q)
        for eta in etas:
            trackers[f"FLH-FTL eta={eta:g} ({source})"] = FLHFTL(q, learning_rate=eta)
    correct = {m: 0 for m in ("unadapted", "oracle", "batch MLE", *trackers)}
    cost = {m: 0.0 for m in trackers}
    total = 0
    for prior in path:
        classes = rng.choice(n_classes, size=batch, p=prior)
        rows = np.array([rng.choice(by_class[c]) for c in classes])
        p, y = proba[rows], labels[rows]
        total += batch

        def score(method, pi, p=p, y=y):
            correct[method] += int((reweight(p, q, pi).argmax(axis=1) == y).sum())

        score("unadapted", q)
        score("oracle", prior)
        for name, tracker in trackers.items():
            score(name, tracker.prior_)
        start = time.perf_counter()
        mle = estimate_test_prior(p, q, solver="squarem").prior
        mle_time = time.perf_counter() - start
        score("batch MLE", mle)
        start = time.perf_counter()
        frequencies = np.bincount(p.argmax(axis=1), minlength=n_classes) / batch
        # (C_cond^-1 mu unclipped, as the wrapper's stream feeds its trackers)
        bbse = (inverse @ frequencies) * held_out
        bbse_time = time.perf_counter() - start
        for name, tracker in trackers.items():
            start = time.perf_counter()
            if name == "cumulative":
                tracker.update(p)
                extra = 0.0
            elif name.endswith("(BBSE)"):
                tracker.update(bbse)
                extra = bbse_time
            else:
                tracker.update(mle)
                extra = mle_time
            cost[name] += time.perf_counter() - start + extra
    steps = len(path)
    accuracy = {m: 100 * c / total for m, c in correct.items()}
    return accuracy, {m: 1e6 * c / steps for m, c in cost.items()}


class StoredOutputs(ClassifierMixin, BaseEstimator):
    """A fitted stand-in model: X holds row numbers of stored posteriors."""

    def __init__(self, proba=None):
        self.proba = proba

    def fit(self, X, y):
        self.classes_ = np.arange(self.proba.shape[1])
        self.n_features_in_ = 1
        return self

    def predict_proba(self, X):
        return self.proba[np.asarray(X, dtype=np.intp).ravel()]


def bounded_state(online):
    proba, labels = load_model_outputs("wideresnet-16-4-cifar-100")
    proba = proba.astype(np.float64)
    model = StoredOutputs(proba).fit(None, None)
    method = "mle" if online == "cumulative" else "bbse"
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
            state = wrapper._stream_tracker or wrapper._stream_counts
            out[step] = (
                len(pickle.dumps(wrapper)),
                len(pickle.dumps(state)),
                1e6 * np.median(times[-150:]),
            )
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eta", type=float, nargs="*", default=[])
    parser.add_argument(
        "--state-only", action="store_true", help="only the bounded-state table"
    )
    parser.add_argument(
        "--outputs",
        nargs="*",
        default=["wideresnet-16-4-cifar-10:10", "wideresnet-16-4-cifar-100:50"],
        help="NAME:BATCH pairs",
    )
    args = parser.parse_args(argv)
    etas = [
        DEFAULT_FLH_LEARNING_RATE,
        *[e for e in args.eta if e != DEFAULT_FLH_LEARNING_RATE],
    ]
    scenarios = [
        ("stationary", None),
        ("bernoulli", 0.002),
        ("bernoulli", 0.02),
        ("bernoulli", 0.2),
        ("sine", 500),
        ("sine", 100),
    ]
    print(f"steps={args.steps}, seeds={args.seeds}, numpy {np.__version__}")
    for spec in [] if args.state_only else args.outputs:
        name, batch = spec.split(":")
        batch = int(batch)
        proba, labels, q, confusion = prepare(name)
        mu1, mu2 = priors(proba.shape[1])
        rows, costs = [], None
        for kind, value in scenarios:
            results, cost_sum = [], None
            for seed in range(args.seeds):
                rng = np.random.default_rng(seed)
                path = prior_path(kind, value, args.steps, mu1, mu2, rng)
                accuracy, cost = run_stream(
                    proba, labels, q, confusion, path, batch, rng, etas
                )
                results.append(accuracy)
                cost_sum = (
                    cost
                    if cost_sum is None
                    else {m: cost_sum[m] + cost[m] for m in cost}
                )
            label = kind if value is None else f"{kind} {value:g}"
            rows.append(
                (label, {m: np.mean([r[m] for r in results]) for m in results[0]})
            )
            costs = {m: c / args.seeds for m, c in cost_sum.items()}
        methods = list(rows[0][1])
        print(f"\n{name}, batches of {batch} rows, accuracy (%) averaged over steps\n")
        print("| shift | " + " | ".join(methods) + " |")
        print("|---" * (len(methods) + 1) + "|")
        for label, accuracy in rows:
            best = max(v for m, v in accuracy.items() if m != "oracle")
            cells = [
                f"**{accuracy[m]:.2f}**"
                if m != "oracle" and accuracy[m] == best
                else f"{accuracy[m]:.2f}"
                for m in methods
            ]
            print(f"| {label} | " + " | ".join(cells) + " |")
        print(
            "\nmean cost of one update (us), last scenario: "
            + ", ".join(f"{m} {c:.0f}" for m, c in costs.items())
        )
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
    for online in ("cumulative", "fth", "flh-ftl"):
        out = bounded_state(online)
        (s1, k1, t1), (s2, k2, t2) = out[200], out[2000]
        print(
            f"| {online} | {s1} / {s2} | {s2 / s1:.2f} | {k1} / {k2} | {k2 / k1:.2f} "
            f"| {t1:.0f} / {t2:.0f} | {t2 / t1:.2f} |"
        )


if __name__ == "__main__":
    main()
