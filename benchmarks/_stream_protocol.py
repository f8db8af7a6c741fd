"""The drifting-stream protocol of ``bench_stream.py``: streams, methods, scores.

A stream is ``rounds`` batches of ``batch`` rows drawn from the pool half of
stored CIFAR outputs at the round's prior ``pi_t``. Every method predicts
round ``t`` with a prior built from the rounds before ``t`` only (the on-line
protocol of Wu et al., 2021, Bai et al., 2022, Baby et al., 2023), then sees
round ``t``. What a method predicts is recorded as the prior of each round;
the scores (accuracy, log-loss) come from the posteriors adjusted to it.
"""

import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from skprior import (
    FLHFTL,
    AggregatingPrior,
    CumulativePrior,
    FollowTheHistory,
    PriorAdaptedClassifier,
    estimate_test_prior,
    fit_bias_corrected_temperature,
    joint_confusion_matrix,
    softmax_temperature,
)

PROCESSES = ("none", "constant", "bernoulli", "sine", "monotone")
WINDOWS = (50, 100, 200, 400)
ONLINE = ("aggregate", "cumulative", "fth", "flh-ftl")
DEFAULT_ONLINE = "aggregate"  # (PriorAdaptedClassifier's default)
# log-loss of a probability below this is taken at it (as sklearn's log_loss
# clips at the float64 epsilon): a prior estimate with a 0 for a class that
# then comes would otherwise give an infinite mean
LOG_LOSS_FLOOR = np.finfo(np.float64).eps


class StoredOutputs(ClassifierMixin, BaseEstimator):
    """A fitted stand-in model: ``X[:, 0]`` holds row numbers of stored posteriors."""

    def __init__(self, proba=None):
        self.proba = proba

    def fit(self, X=None, y=None):
        self.classes_ = np.arange(self.proba.shape[1])
        self.n_features_in_ = 1
        return self

    def predict_proba(self, X):
        return self.proba[np.asarray(X, dtype=np.intp)[:, 0]]


class Setup:
    """One model's calibrated outputs, split into a validation half and a pool.

    The outputs are split 50/50 at random (``seed``). On the validation half:
    bias-corrected temperature scaling (BCTS) on the log-probabilities, the
    source prior ``q`` (the mean calibrated posterior there, the prior the
    calibrated posteriors are consistent with) and the joint confusion matrix
    of BBSE. Streams are drawn from the pool half.
    """

    def __init__(self, name, proba, labels, seed=0):
        self.name = name
        order = np.random.default_rng(seed).permutation(len(labels))
        half = len(labels) // 2
        self.val, self.pool = order[:half], order[half:]
        logits = np.log(np.maximum(proba.astype(np.float64), 1e-300))
        temperature, bias = fit_bias_corrected_temperature(
            logits[self.val], labels[self.val]
        )
        self.proba = softmax_temperature(logits, temperature, bias)
        self.labels = labels
        self.q = self.proba[self.val].mean(axis=0)
        self.confusion = joint_confusion_matrix(self.proba[self.val], labels[self.val])
        self.n_classes = proba.shape[1]
        self.fitted = {}  # online mode: fitted PriorAdaptedClassifier
        pool_labels = labels[self.pool]
        counts = np.bincount(pool_labels, minlength=self.n_classes)
        if np.any(counts == 0):
            raise ValueError(f"{name}: a class has no row in the pool half.")
        # the class frequencies of the validation half: a stream drawn at
        # them is not shifted from the data the calibration, q and the
        # wrapper's test of no shift were fitted on
        self.fit_prior = np.bincount(labels[self.val], minlength=self.n_classes) / half
        # pool rows sorted by class: rows of class c are
        # by_class[starts[c]:starts[c] + counts[c]]
        self._by_class = self.pool[np.argsort(pool_labels, kind="stable")]
        self._starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self._counts = counts

    def draw(self, path, batch, rng):
        """Row numbers ``(rounds, batch)`` of a stream of priors ``path``.

        Each row of round ``t``: its class drawn from ``path[t]``, then a pool
        row of that class (with replacement).
        """
        cdf = np.cumsum(path, axis=1)
        cdf[:, -1] = 1.0
        u = rng.random((len(path), batch))
        classes = (cdf[:, None, :] <= u[:, :, None]).sum(axis=2)
        within = (rng.random(classes.shape) * self._counts[classes]).astype(np.intp)
        return self._by_class[self._starts[classes] + within]


def two_priors(n_classes, seed):
    """The two priors ``mu1, mu2`` of a seed: Dirichlet(0.5) draws (fixed per seed)."""
    rng = np.random.default_rng([seed, n_classes])
    return rng.dirichlet(np.full(n_classes, 0.5), size=2)


def prior_path(process, rounds, mu1, mu2, base, rng, period=None):
    """The prior ``pi_t`` of each round, ``(rounds, n_classes)``.

    ``none``: ``base`` (the validation half's class frequencies: no shift);
    ``constant``: ``mu1``; ``bernoulli``: from ``mu1``, switch between
    ``mu1`` and ``mu2`` with probability ``1 / sqrt(rounds)`` each round (Wu
    et al., 2021); ``sine``: ``a_t mu1 + (1 - a_t) mu2`` with ``a_t = (1 +
    sin(2 pi t / period)) / 2`` (``period`` default ``sqrt(rounds)``);
    ``monotone``: ``mu1`` to ``mu2`` linearly over the stream.
    """
    t = np.arange(rounds)
    if process == "none":
        return np.tile(base, (rounds, 1))
    if process == "constant":
        a = np.ones(rounds)
    elif process == "bernoulli":
        switches = rng.random(rounds) < 1 / np.sqrt(rounds)
        switches[0] = False
        a = 1.0 - np.cumsum(switches) % 2
    elif process == "sine":
        period = np.sqrt(rounds) if period is None else period
        a = (1 + np.sin(2 * np.pi * t / period)) / 2
    elif process == "monotone":
        a = 1 - t / max(rounds - 1, 1)
    else:
        raise ValueError(f"unknown shift process {process!r}; one of {PROCESSES}")
    return a[:, None] * mu1 + (1 - a[:, None]) * mu2


class WindowMAP:
    """MAP (Dirichlet hyper-prior, default ``a = 2``) on the last ``size`` rows.

    Each estimate starts from the previous one (``init``): the same optimum
    (the MAP objective is strictly concave), fewer EM passes.
    """

    def __init__(self, q, size):
        self.q, self.size = q, size
        self.rows = np.zeros((0, len(q)))
        self.prior = q

    def update(self, proba, _setup_round):
        self.rows = np.concatenate([self.rows, proba])[-self.size :]
        self.prior = estimate_test_prior(
            self.rows, self.q, method="map", init=self.prior
        ).prior


class Tracker:
    """A tracker of ``skprior.label_shift`` fed directly.

    ``CumulativePrior`` and ``AggregatingPrior`` get the batch's posteriors;
    ``FollowTheHistory`` and
    ``FLHFTL`` the unbiased, unclipped BBSE estimate ``s_t = C_cond^-1 mu_t``
    of the batch (Baby et al., 2023), whose cost is counted with theirs.
    """

    def __init__(self, tracker, setup):
        self.tracker = tracker
        self.inverse = np.linalg.pinv(setup.confusion)
        self.held_out = setup.confusion.sum(axis=0)
        self.prior = on_host(tracker.prior_)

    def update(self, proba, _round):
        if isinstance(self.tracker, (CumulativePrior, AggregatingPrior)):
            self.tracker.update(proba)
        else:
            hard = np.bincount(proba.argmax(axis=1), minlength=proba.shape[1])
            estimate = (self.inverse @ (hard / len(proba))) * self.held_out
            # (C singular, a class never predicted on the validation half:
            # the minimum-norm solution need not sum to one, and the trackers
            # refuse it; onto the plane of sum one, as the wrapper's stream
            # does, _online.StreamState)
            estimate += (1.0 - estimate.sum()) / estimate.size
            self.tracker.update(estimate)
        self.prior = on_host(self.tracker.prior_)


class OnlineGradient:
    """UOGD (Wu et al., 2021) and, with ``meta``, ATLAS (Bai et al., 2022).

    Each base learner keeps a prior ``p`` on the simplex (each class at
    least ``floor / K``) and steps down the unbiased estimate of the next
    round's risk, ``R(p) = sum_y s_y L_y(p)``: ``s`` the batch's unclipped
    BBSE estimate (as ``Tracker``), ``L_y(p)`` the validation half's mean
    cross-entropy of its class-``y`` rows adjusted to ``p``, so that
    ``grad R = sum_y s_y mean_{i in y}(r_i / L_i(p)) - s / p`` (``r_i = p_i /
    q``, ``L_i(p) = r_i . p``): ``p <- Proj(p - eta grad R)``, O(n_val K) a
    round. ATLAS runs base learners at the step sizes ``etas`` (a geometric
    grid) and mixes them by Hedge (rate ``meta``) on ``R`` before the step.
    The floor keeps ``1 / p`` bounded: at 0.001 / K the 10-row estimates
    drove the prior to a vertex on CIFAR-10 (accuracy -60 points).
    """

    def __init__(self, setup, etas, meta=None, floor=0.1):
        ratios = setup.proba[setup.val] / setup.q
        order = np.argsort(setup.labels[setup.val], kind="stable")
        counts = np.bincount(setup.labels[setup.val], minlength=setup.n_classes)
        self.ratios, self.counts = ratios[order], counts
        self.starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.inverse = np.linalg.pinv(setup.confusion)
        self.held_out = setup.confusion.sum(axis=0)
        self.floor = floor / setup.n_classes
        self.etas = np.asarray(etas, dtype=float)
        self.bases = np.tile(setup.q, (len(self.etas), 1))
        self.log_weights = np.full(len(self.etas), -np.log(len(self.etas)))
        self.meta = meta
        self.prior = setup.q

    def update(self, proba, _round):
        hard = np.bincount(proba.argmax(axis=1), minlength=proba.shape[1])
        s = (self.inverse @ (hard / len(proba))) * self.held_out
        likelihoods = self.ratios @ self.bases.T  # (n_val, J)

        def means(x):  # (class means, the validation rows sorted by class)
            return np.add.reduceat(x, self.starts) / self.counts[:, None]

        gradients = np.stack(
            [
                s @ means(self.ratios / likelihoods[:, [j]]) - s / base
                for j, base in enumerate(self.bases)
            ]
        )
        if self.meta is not None:
            risks = (
                s @ means(np.log(likelihoods)) - np.log(self.bases) @ s
            )  # (up to a constant)
            self.log_weights = self.log_weights - self.meta * risks
            self.log_weights -= np.logaddexp.reduce(self.log_weights)
        self.bases = np.stack(
            [
                project_simplex(b - eta * g, self.floor)
                for b, eta, g in zip(self.bases, self.etas, gradients, strict=True)
            ]
        )
        self.prior = np.exp(self.log_weights) @ self.bases


def project_simplex(v, floor):
    """The Euclidean projection of ``v`` onto ``{p >= floor, sum p = 1}``."""
    u = np.sort(v - floor)[::-1]
    excess = np.cumsum(u) - (1 - floor * v.size)
    last = np.flatnonzero(u - excess / np.arange(1, v.size + 1) > 0)[-1]
    return floor + np.maximum(v - floor - excess[last] / (last + 1), 0.0)


ATLAS_ETAS = (1 / 512, 1 / 128, 1 / 32, 1 / 8)
OGD = {
    # (eta 1/128: the best of ATLAS_ETAS for UOGD alone on CIFAR-10, chosen
    # after the fact, as the windows are)
    "UOGD (BBSE)": lambda setup: OnlineGradient(setup, [1 / 128]),
    "ATLAS (BBSE)": lambda setup: OnlineGradient(setup, ATLAS_ETAS, meta=1.0),
}


class Wrapper:
    """``PriorAdaptedClassifier``'s stream with its defaults (``method="mle"``).

    Only ``online`` is set, and ``train_prior=q`` so that every method shares
    the source prior. The prior of a round is the one
    ``predict_proba_online`` adjusts to: ``w * online_prior_ + (1 - w) *
    train_prior_``, ``w = online_weight_`` (1 once the stream is found
    shifted, the posterior probability of a shift while the bets of its
    first rows run, 0 otherwise).
    """

    def __init__(self, setup, online):
        if online not in setup.fitted:  # (fitted once per model; reset per stream)
            model = StoredOutputs(setup.proba).fit()
            est = PriorAdaptedClassifier(model, train_prior=setup.q, online=online)
            setup.fitted[online] = est.fit(setup.val[:, None], setup.labels[setup.val])
        self.est = setup.fitted[online].reset_prior()
        self.prior = self.effective_prior()

    def effective_prior(self):
        est = self.est
        weight = est.online_weight_
        return weight * on_host(est.online_prior_) + (1 - weight) * est.train_prior_

    def update(self, _proba, rows):
        self.est.update_prior(rows[:, None])
        self.prior = self.effective_prior()


def on_host(prior):
    return np.asarray(prior, dtype=np.float64)


TRACKERS = {
    "AggregatingPrior": AggregatingPrior,
    "CumulativePrior": CumulativePrior,
    "FTH (BBSE)": FollowTheHistory,
    "FLH-FTL (BBSE)": FLHFTL,
}


def make_methods(setup, windows=WINDOWS, online=ONLINE, etas=(), trackers=TRACKERS):
    """The adaptive methods of one stream, by name (new state each call).

    ``etas``: learning rates of further ``FLH-FTL (BBSE)`` columns;
    ``trackers``: the names of ``TRACKERS`` fed directly, or of ``OGD``.
    """
    q = setup.q
    methods = {f"window {w}": WindowMAP(q, w) for w in windows}
    for name in trackers:
        if name in OGD:
            methods[name] = OGD[name](setup)
        else:
            methods[name] = Tracker(TRACKERS[name](q), setup)
    for eta in etas:
        methods[f"FLH-FTL eta={eta:g} (BBSE)"] = Tracker(
            FLHFTL(q, learning_rate=eta), setup
        )
    for mode in online:
        methods[f"PAC {mode}"] = Wrapper(setup, mode)
    return methods


def run_stream(setup, rows, methods):
    """Priors ``(rounds, K)`` each method predicted, and its mean us per update.

    Round ``t`` is predicted with the method's prior before it sees round
    ``t``; then it sees round ``t``.
    """
    rounds = len(rows)
    priors = {name: np.empty((rounds, setup.n_classes)) for name in methods}
    cost = dict.fromkeys(methods, 0.0)
    with warnings.catch_warnings():
        # (estimates from a few rows warn at every round; the scores say it)
        warnings.simplefilter("ignore")
        for t in range(rounds):
            proba = setup.proba[rows[t]]
            for name, method in methods.items():
                priors[name][t] = method.prior
                start = time.perf_counter()
                method.update(proba, rows[t])
                cost[name] += time.perf_counter() - start
    return priors, {name: 1e6 * c / rounds for name, c in cost.items()}


def _adjusted(setup, rows, prior_rows):
    """The rows' posteriors adjusted to each round's prior, and their labels."""
    proba = setup.proba[rows] * (prior_rows / setup.q)[:, None, :]
    proba /= proba.sum(axis=2, keepdims=True)
    return proba, setup.labels[rows]


def row_log_losses(setup, rows, prior_rows):
    """The log-loss of each row (in stream order) adjusted to its round's prior."""
    proba, labels = _adjusted(setup, rows, prior_rows)
    true = np.take_along_axis(proba, labels[:, :, None], axis=2)
    return -np.log(np.maximum(true, LOG_LOSS_FLOOR)).ravel()


def scores(setup, rows, prior_rows):
    """Accuracy (%) and mean log-loss of the rows adjusted to each round's prior.

    ``prior_rows`` is ``(rounds, K)``: round ``t``'s rows are adjusted by Bayes'
    rule, ``p(c|x) pi_c / q_c`` renormalised.
    """
    proba, labels = _adjusted(setup, rows, prior_rows)
    accuracy = 100 * np.mean(proba.argmax(axis=2) == labels)
    return accuracy, row_log_losses(setup, rows, prior_rows).mean()


def evaluate(
    setup,
    process,
    batch,
    rounds,
    seed,
    online=ONLINE,
    period=None,
    etas=(),
    trackers=TRACKERS,
):
    """Every method's accuracy, log-loss and us per update on one stream.

    Returns ``{name: (accuracy, log_loss, us_per_update)}`` with
    ``"unadapted"`` (the training prior ``q``) and ``"oracle"`` (the round's
    true prior) at no cost.
    """
    rng = np.random.default_rng([seed, batch, PROCESSES.index(process)])
    mu1, mu2 = two_priors(setup.n_classes, seed)
    path = prior_path(process, rounds, mu1, mu2, setup.fit_prior, rng, period)
    rows = setup.draw(path, batch, rng)
    methods = make_methods(setup, online=online, etas=etas, trackers=trackers)
    priors, cost = run_stream(setup, rows, methods)
    priors = {"unadapted": np.tile(setup.q, (rounds, 1)), "oracle": path, **priors}
    return {
        name: (*scores(setup, rows, p), cost.get(name, 0.0))
        for name, p in priors.items()
    }


def oracle_share(accuracy, unadapted, oracle):
    """The share of the oracle's accuracy gain, NaN where the oracle gains nothing.

    ``(accuracy - unadapted) / (oracle - unadapted)``.
    """
    gain = oracle - unadapted
    return (accuracy - unadapted) / gain if gain > 0 else float("nan")
