"""Smoke test of the drifting-stream benchmark (benchmarks/bench_stream.py).

A tiny stream of the shipped LeNet-5 / CIFAR-10 outputs through the script's
own functions: the protocol is on-line (no method sees a round before
predicting it), the oracle gains on a shifted stream, the figures are finite.
"""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from _data import load_model_outputs  # noqa: E402
from _stream_protocol import (  # noqa: E402
    PROCESSES,
    OnlineGradient,
    Setup,
    Tracker,
    Wrapper,
    evaluate,
    make_methods,
    prior_path,
    project_simplex,
    row_log_losses,
    run_stream,
    scores,
    two_priors,
)
from bench_stream import main, paired_difference, print_gate, summarise  # noqa: E402


@pytest.fixture(scope="module")
def setup():
    return Setup("lenet-5-cifar-10", *load_model_outputs("lenet-5-cifar-10"))


def test_prior_paths():
    mu1, mu2 = two_priors(10, seed=0)
    base = np.full(10, 0.1)
    rng = np.random.default_rng(0)
    for process in PROCESSES:
        path = prior_path(process, 400, mu1, mu2, base, rng)
        assert path.shape == (400, 10)
        np.testing.assert_allclose(path.sum(axis=1), 1.0)
        assert np.all(path >= 0)
    np.testing.assert_array_equal(prior_path("none", 5, mu1, mu2, base, rng)[3], base)
    switching = prior_path("bernoulli", 400, mu1, mu2, base, rng)
    at_mu1 = np.all(switching == mu1, axis=1)
    assert np.all(at_mu1 | np.all(switching == mu2, axis=1))
    assert at_mu1[0] and not at_mu1.all()  # (p = 1/20: ~20 switches expected)
    monotone = prior_path("monotone", 400, mu1, mu2, base, rng)
    np.testing.assert_allclose(monotone[[0, -1]], [mu1, mu2])


def test_draw_follows_the_prior(setup):
    rng = np.random.default_rng(1)
    prior = two_priors(10, seed=3)[0]
    rows = setup.draw(np.tile(prior, (200, 1)), 50, rng)
    frequencies = np.bincount(setup.labels[rows].ravel(), minlength=10) / rows.size
    np.testing.assert_allclose(frequencies, prior, atol=0.01)  # (10,000 rows)
    assert np.isin(rows, setup.pool).all()


def test_row_log_losses_against_a_loop(setup):
    """Each row's log-loss under its round's prior by Bayes' rule, in stream
    order (a loop from the formula), and their mean is the scores' log-loss."""
    rng = np.random.default_rng(2)
    mu1, mu2 = two_priors(10, seed=1)
    path = prior_path("sine", 6, mu1, mu2, setup.q, rng)
    rows = setup.draw(path, 4, rng)
    losses = row_log_losses(setup, rows, path)
    expected = []
    for t in range(rows.shape[0]):
        for i in rows[t]:
            adjusted = setup.proba[i] * path[t] / setup.q
            expected.append(-np.log(adjusted[setup.labels[i]] / adjusted.sum()))
    np.testing.assert_allclose(losses, expected, rtol=1e-12)
    assert scores(setup, rows, path)[1] == pytest.approx(np.mean(expected), rel=1e-12)


def test_each_round_is_predicted_from_the_rounds_before_it(setup):
    rng = np.random.default_rng(2)
    mu1, mu2 = two_priors(10, seed=0)
    path = prior_path("bernoulli", 30, mu1, mu2, setup.fit_prior, rng)
    rows = setup.draw(path, 10, rng)
    altered = rows.copy()
    altered[12:] = setup.draw(np.tile(mu2, (18, 1)), 10, rng)
    online = ("aggregate", "cumulative", "fth", "flh-ftl")
    before, _ = run_stream(setup, rows, make_methods(setup, online=online))
    after, _ = run_stream(setup, altered, make_methods(setup, online=online))
    for name in before:
        # round 12's prediction is made before it is seen
        np.testing.assert_array_equal(before[name][:13], after[name][:13])
    trackers = ("AggregatingPrior", "CumulativePrior", "FTH (BBSE)")
    for name in ("window 50", "window 400", *trackers, "PAC aggregate"):
        assert not np.allclose(before[name][13], after[name][13])  # (it sees 12)


def test_wrapper_prior_is_that_of_predict_proba_online(setup):
    wrapper = Wrapper(setup, "cumulative")
    rng = np.random.default_rng(3)
    rows = setup.draw(np.tile(two_priors(10, seed=0)[0], (5, 1)), 20, rng)
    for batch in rows:
        wrapper.update(setup.proba[batch], batch)
    assert wrapper.est.online_shifted_
    adjusted = setup.proba[rows[0]] * wrapper.prior / setup.q
    np.testing.assert_allclose(
        wrapper.est.predict_proba_online(rows[0][:, None]),
        adjusted / adjusted.sum(axis=1, keepdims=True),
        rtol=1e-12,
    )


def test_oracle_gains_and_every_share_is_finite(setup):
    runs = {
        ("lenet-5-cifar-10", process, 10): {
            m: [r] for m, r in evaluate(setup, process, 10, 40, seed=0).items()
        }
        for process in ("constant", "monotone")
    }
    for figures in summarise(runs).values():
        oracle, unadapted = figures["oracle"], figures["unadapted"]
        assert oracle["accuracy"] > unadapted["accuracy"] + 5  # (Dirichlet(0.5))
        assert oracle["log_loss"] < unadapted["log_loss"]
        assert oracle["share_of_oracle_gain"] == 1.0
        assert unadapted["share_of_oracle_gain"] == 0.0
        for name, f in figures.items():
            assert np.isfinite(list(f.values())).all(), name
        assert len(figures) == 2 + 4 + 4 + 4  # (oracle/unadapted, windows, ...)


def test_script_prints_and_dumps_every_figure(tmp_path, capsys):
    # (--quick: one model, one seed; a non-default stream only)
    dump = tmp_path / "stream.json"
    argv = ["--quick", "--no-state", "--rounds", "40", "--processes", "sine"]
    main([*argv, "--online", "fth", "--json", str(dump)])
    printed = capsys.readouterr().out
    assert "| PAC fth | " in printed and "| lenet-5-cifar-10 | sine | 10 |" in printed
    figures = json.loads(dump.read_text())
    assert figures["config"]["rounds"] == 40
    means = figures["mean_over_seeds"]["lenet-5-cifar-10/sine/10"]
    assert len(means) == 2 + 4 + 4 + 1
    assert len(figures["per_seed"]["lenet-5-cifar-10/sine/10"]["PAC fth"]) == 1


def test_paired_difference_is_the_mean_and_standard_error_over_seeds():
    """The summary's "default - best window": per seed, then mean and s.e."""
    accuracy = {"PAC aggregate": [90.0, 91.5, 89.0], "window 400": [89.5, 91.0, 89.25]}
    runs = {
        ("m", "sine", 10): {m: [(a, 0.3, 1.0) for a in v] for m, v in accuracy.items()}
    }
    mean, error = paired_difference(
        runs, ("m", "sine", 10), "PAC aggregate", "window 400"
    )
    d = [0.5, 0.5, -0.25]
    naive_mean = sum(d) / 3
    naive_error = (sum((x - naive_mean) ** 2 for x in d) / 2 / 3) ** 0.5
    assert mean == pytest.approx(naive_mean, rel=1e-12)
    assert error == pytest.approx(naive_error, rel=1e-12)
    runs[("m", "sine", 10)] = {m: v[:1] for m, v in runs[("m", "sine", 10)].items()}
    assert np.isnan(
        paired_difference(runs, ("m", "sine", 10), "PAC aggregate", "window 400")[1]
    )


def test_print_gate_pairs_gated_and_ungated_by_seed(capsys):
    """The table of the test of no shift: ungated minus gated paired by seed,
    the best window chosen on the mean, the worst no-shift seed."""
    acc = {
        "unadapted": [80.0, 81.0, 79.0],
        "oracle": [84.0, 85.0, 83.0],
        "window 100": [82.0, 83.0, 80.0],
        "window 400": [82.5, 82.0, 81.0],
        "PAC aggregate": [82.0, 83.5, 80.5],
        "AggregatingPrior": [82.5, 83.5, 81.5],
    }
    loss = dict.fromkeys(acc, 0.5) | {"PAC aggregate": 0.49, "AggregatingPrior": 0.47}
    shifted = {m: [(a, loss[m], 0.0) for a in v] for m, v in acc.items()}
    calm = {m: [(80.0, 0.5, 0.0)] * 3 for m in acc}
    calm["AggregatingPrior"] = [
        (79.9, 0.501, 0.0),
        (80.0, 0.5, 0.0),
        (79.6, 0.507, 0.0),
    ]
    print_gate({("m", "sine", 10): shifted, ("m", "none", 10): calm})
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| m |")]
    # (window means 81.67 and 81.83: 400 is the best, (81.83 - 80) / 4 = 46%)
    d = [0.5, 0.0, 1.0]
    error = (sum((x - 0.5) ** 2 for x in d) / 2 / 3) ** 0.5
    assert rows[0].startswith("| m | sine | 10 | 3 | +4.00 | window 400: 46% |")
    assert f"| +0.500 +- {error:.3f} |" in rows[0]
    assert rows[0].endswith("| -0.0100 / -0.0300 |")
    assert rows[1].startswith("| m | 10 | 3 | +0.000 +- 0.000 | -0.167 +- 0.120 |")
    assert "| +0.00000 / +0.00700 |" in rows[1] and "| +0.000 / -0.400 |" in rows[1]


def test_aggregating_prior_margin_keeps_a_weak_model_unshifted():
    """The margin's case: no shift, LeNet-5 / CIFAR-100 (BCTS-calibrated, the
    benchmark's protocol, 3 seeds of 500 rounds of 10 rows). The weak model's
    unlabelled likelihood favours a moved prior: without the margin the
    tracker adds about 0.02 to the log-loss; with the default margin it stays
    within the issue's +0.005 of the unadapted model."""
    from _stream_protocol import Tracker, scores

    from skprior import AggregatingPrior

    weak = Setup("lenet-5-cifar-100", *load_model_outputs("lenet-5-cifar-100"))
    added = {}
    for margin in (0.0, 0.01):
        losses = []
        for seed in range(3):
            rng = np.random.default_rng([seed, 10, PROCESSES.index("none")])
            path = prior_path("none", 500, None, None, weak.fit_prior, rng)
            rows = weak.draw(path, 10, rng)
            tracker = Tracker(AggregatingPrior(weak.q, margin=margin), weak)
            priors = run_stream(weak, rows, {"t": tracker})[0]["t"]
            unadapted = np.tile(weak.q, (500, 1))
            losses.append(
                scores(weak, rows, priors)[1] - scores(weak, rows, unadapted)[1]
            )
        added[margin] = np.mean(losses)
    assert added[0.01] < 0.005 < added[0.0]


def test_project_simplex_is_the_nearest_point_above_the_floor():
    """Against the threshold found by bisection: ``p = max(v - t, floor)``
    with ``sum p = 1``, the KKT form of the projection."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        v = rng.normal(0.1, 0.4, size=7)
        low, high = v.min() - 2, v.max() + 2
        for _ in range(200):
            t = (low + high) / 2
            low, high = (t, high) if np.maximum(v - t, 0.01).sum() > 1 else (low, t)
        np.testing.assert_allclose(
            project_simplex(v, 0.01), np.maximum(v - t, 0.01), atol=1e-12
        )


def test_online_gradient_steps_down_the_unbiased_risk(setup):
    """UOGD's step is ``-eta`` times the gradient of ``sum_y s_y L_y(p)``
    (the validation half's class-wise cross-entropy), by finite differences
    in the simplex's plane, and ATLAS's weights follow Hedge on that risk."""
    ogd = OnlineGradient(setup, [1e-6, 1e-3], meta=1.0)
    labels = setup.labels[setup.val]
    ratios = setup.proba[setup.val] / setup.q

    def bbse(proba):
        hard = np.bincount(proba.argmax(axis=1), minlength=10)
        return (ogd.inverse @ (hard / len(proba))) * ogd.held_out

    def risk(p, s):
        adjusted = ratios * p
        adjusted /= adjusted.sum(axis=1, keepdims=True)
        loss = -np.log(adjusted[np.arange(len(labels)), labels])
        return sum(s[y] * loss[labels == y].mean() for y in range(10))

    p, proba = setup.q.copy(), setup.proba[setup.pool[:10]]
    ogd.update(proba, None)
    step = (ogd.bases[1] - p) / 1e-3  # (-gradient, projected on sum 0)
    for k in range(10):
        e = np.full(10, -0.1)
        e[k] += 1.0  # (a direction in the plane sum = 0)
        h = 1e-6
        derivative = (risk(p + h * e, bbse(proba)) - risk(p - h * e, bbse(proba))) / (
            2 * h
        )
        assert -step @ e == pytest.approx(derivative, rel=1e-4, abs=1e-6)
    # (both bases started at q: equal weights; the second round's risk, at
    # the bases before its step, tells them apart)
    bases, proba = ogd.bases.copy(), setup.proba[setup.pool[10:60]]
    ogd.update(proba, None)
    expected = np.exp(-np.array([risk(b, bbse(proba)) for b in bases]))
    np.testing.assert_allclose(np.exp(ogd.log_weights), expected / expected.sum())
    assert abs(expected[0] / expected.sum() - 0.5) > 1e-4


def test_bbse_trackers_take_a_singular_confusion_matrix():
    """A class never predicted on the validation half makes C singular, and
    the minimum-norm BBSE estimate need not sum to one: the benchmark's
    FTH and FLH-FTL (BBSE) feed it onto the plane of sum one, as the
    wrapper's stream does. The default run stopped with "estimate sums to
    0.9, not 1" on LeNet-5 / CIFAR-100."""
    from skprior import FLHFTL, FollowTheHistory

    singular = Setup("lenet-5-cifar-10", *load_model_outputs("lenet-5-cifar-10"))
    singular.confusion = singular.confusion.copy()
    singular.confusion[3] = 0.0  # (class 3 never predicted)
    singular.confusion /= singular.confusion.sum()
    proba = np.eye(10)[[3, 3, 1, 0, 5, 3, 2, 2, 7, 9]]
    for tracker in (FollowTheHistory, FLHFTL):
        method = Tracker(tracker(np.full(10, 0.1)), singular)
        method.update(proba, 0)
        assert np.isfinite(method.prior).all()
        assert method.prior.sum() == pytest.approx(1.0)
