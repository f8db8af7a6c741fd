"""Undoing resampling and class weights: log-loss and ECE on the original distribution.

Protocol: each PMLB dataset is split, stratified, into train (50%) and an
untouched test set (50%), over several seeds. On the training half:

* "no resampling": ``StandardScaler + LogisticRegression`` on the data as it is;
* "undersampled": the same after imbalanced-learn's ``RandomUnderSampler``
  (every class cut to the size of the rarest, drawn with the split's seed),
  inside an imbalanced-learn pipeline;
* "class_weight": the same model with ``class_weight="balanced"``;
* "bagged undersampling": imbalanced-learn's ``BalancedBaggingClassifier``
  with its defaults (10 members, each fitted on a bootstrap sample of the
  training half under-sampled to balance) around the same model, so that the
  rows one under-sample throws away are seen by other members (Wallace and
  Dahabreh, ICDM 2012);
* "no resampling, same rows" (a control): the same model on as many rows as
  undersampling keeps, drawn stratified from the training half (skipped where
  that leaves a class out).

Each resampled or weighted model is scored on the test set as it is
("uncorrected") and after Bayes' rule from its effective training prior
(:func:`skprior.effective_train_prior`, from the fitted sampler's
``sampling_strategy_`` or from ``class_weight``) back to the training label
frequencies ("corrected"). The script checks that ``sampling_strategy_`` gives
the class counts the sampler really kept (``sample_indices_``), and that every
member of the bagged model saw the classes it was given equally often, so
that its effective prior is uniform. (A bootstrap sample can miss a class with
a handful of training rows; that member then gives the class probability 0,
which no prior correction restores.)

Two regularisation protocols for the undersampled model (``--protocol``):

* ``default``: ``LogisticRegression()`` (C=1) for every model, as a user
  would write it. Its objective is ``C * sum(loss) + |w|^2 / 2``: on fewer
  rows the same C regularises more, which pulls the probabilities towards
  the intercept, a bias that no prior correction undoes.
* ``per-row``: the undersampled model (and each member of the bagged one,
  which sees about as many rows) gets ``C * n_train / n_kept``, so the
  penalty weighs the same against the *mean* log-loss per row for every model
  (class weights keep every row and "balanced" weights sum to n_train, so the
  class-weighted model is the same in both).

Reported: mean and standard deviation over splits of the test log-loss and
top-label ECE (15 equal-width bins), and the mean paired difference
"model - no resampling" with its standard error over splits. "Within noise"
(fixed before the results were seen) is |mean paired difference| < 2 x its
standard error, for log-loss and ECE separately; the standard deviation of
the no-resampling model's own figures over splits (the noise of one
evaluation) is shown as context only. ``binary`` variants take the first
class against the rest.

Run: ``python benchmarks/bench_resampling.py --out /tmp/resampling.md``
"""

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np
import sklearn
from imblearn.ensemble import BalancedBaggingClassifier
from imblearn.pipeline import make_pipeline as make_imb_pipeline
from imblearn.under_sampling import RandomUnderSampler
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import load_pmlb  # noqa: E402

from skprior import adjust_to_prior, effective_train_prior  # noqa: E402
from skprior.metrics import expected_calibration_error  # noqa: E402

# The first four were the original benchmark; the last five were added because
# undersampling them to balance keeps hundreds of rows per class or more.
DATASETS = (
    "page_blocks",
    "page_blocks binary",
    "wine_quality_white",
    "yeast",
    "shuttle binary",
    "satimage",
    "ann_thyroid",
    "ann_thyroid binary",
    "letter binary",
)
PROTOCOLS = ("default", "per-row")


def load(name):
    X, y = load_pmlb(name.split()[0])
    if name.endswith("binary"):
        y = (y != 0).astype(int)
    return X, y


def scores(y, proba):
    return log_loss(y, proba, labels=np.arange(proba.shape[1])), (
        expected_calibration_error(y, proba)
    )


def logistic(C=1.0, class_weight=None):
    return LogisticRegression(C=C, max_iter=10000, class_weight=class_weight)


def run_seed(X, y, seed, protocol):
    """{variant: (log-loss, ECE)} on the test half of one split."""
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, train_size=0.5, stratify=y, random_state=seed
    )
    prior = effective_train_prior(y_train)
    out = {}
    plain = make_pipeline(StandardScaler(), logistic())
    out["no resampling"] = scores(
        y_test, plain.fit(X_train, y_train).predict_proba(X_test)
    )

    n_kept = np.bincount(y_train).min() * np.unique(y_train).size
    C = 1.0 if protocol == "default" else y_train.size / n_kept
    under = make_imb_pipeline(
        StandardScaler(), RandomUnderSampler(random_state=seed), logistic(C)
    ).fit(X_train, y_train)
    sampler = under[1]
    q_eff = effective_train_prior(y_train, resampled_counts=sampler.sampling_strategy_)
    kept = np.bincount(y_train[sampler.sample_indices_], minlength=prior.size)
    # The correction must use the counts the sampler really kept.
    np.testing.assert_allclose(q_eff, kept / kept.sum(), rtol=1e-12)
    proba = under.predict_proba(X_test)
    # Control: as many rows as undersampling keeps, drawn from the original
    # distribution (stratified), no correction needed. If the correction is
    # exact, the corrected model is no worse than this; what separates both
    # from "no resampling" is the rows thrown away.
    X_same, _, y_same, _ = train_test_split(
        X_train, y_train, train_size=n_kept, stratify=y_train, random_state=seed
    )
    if np.unique(y_same).size == prior.size:
        same = make_pipeline(StandardScaler(), logistic(C)).fit(X_same, y_same)
        out["no resampling, same rows"] = scores(y_test, same.predict_proba(X_test))
    else:  # too few rows to keep every class
        out["no resampling, same rows"] = (np.nan, np.nan)
    out["undersampled, uncorrected"] = scores(y_test, proba)
    out["undersampled, corrected"] = scores(
        y_test, adjust_to_prior(proba, q_eff, prior)
    )

    weighted = make_pipeline(StandardScaler(), logistic(class_weight="balanced"))
    proba = weighted.fit(X_train, y_train).predict_proba(X_test)
    q_eff = effective_train_prior(y_train, class_weight="balanced")
    out["class_weight, uncorrected"] = scores(y_test, proba)
    out["class_weight, corrected"] = scores(
        y_test, adjust_to_prior(proba, q_eff, prior)
    )

    bagged = make_imb_pipeline(
        StandardScaler(), BalancedBaggingClassifier(logistic(C), random_state=seed)
    ).fit(X_train, y_train)
    bag = bagged[-1]
    for member, rows in zip(bag.estimators_, bag.estimators_samples_, strict=True):
        q_member = effective_train_prior(
            y_train[rows], resampled_counts=member[0].sampling_strategy_
        )
        # Balanced: every class the member was given, equally often.
        np.testing.assert_allclose(q_member, 1 / q_member.size, rtol=1e-12)
    proba = bagged.predict_proba(X_test)
    uniform = np.full(prior.size, 1 / prior.size)
    out["bagged undersampling, uncorrected"] = scores(y_test, proba)
    out["bagged undersampling, corrected"] = scores(
        y_test, adjust_to_prior(proba, uniform, prior)
    )
    return out, n_kept, y_train.size


def verdict(mean, se):
    return "yes" if abs(mean) < 2 * se else "no"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--out", default=None)
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS))
    parser.add_argument("--protocol", nargs="*", default=list(PROTOCOLS))
    args = parser.parse_args()
    start = time.perf_counter()
    lines = [
        f"{args.seeds} splits (train/test halves), StandardScaler + "
        f"LogisticRegression; Python {platform.python_version()}, numpy "
        f"{np.__version__}, scikit-learn {sklearn.__version__}.",
        "",
    ]
    for protocol in args.protocol:
        lines += [
            f"Protocol `{protocol}`.",
            "",
            "| dataset | rows kept by undersampling | model | log-loss | ECE "
            "| Δ log-loss (± s.e.) | within noise | Δ ECE (± s.e.) | within noise |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        controls = [
            "",
            "Undersampled and corrected minus the same-rows control "
            f"(protocol `{protocol}`):",
            "",
            "| dataset | Δ log-loss (± s.e.) | within noise | Δ ECE (± s.e.) "
            "| within noise |",
            "|---|---|---|---|---|",
        ]
        for name in args.datasets:
            X, y = load(name)
            results = [run_seed(X, y, seed, protocol) for seed in range(args.seeds)]
            runs = [r[0] for r in results]
            kept = f"{results[0][1]:,} of {results[0][2]:,}"
            base = np.array([r["no resampling"] for r in runs])
            k = int(y.max()) + 1
            for variant in runs[0]:
                values = np.array([r[variant] for r in runs])
                if np.isnan(values).any():
                    lines.append(
                        f"| {name} (K={k}) | {kept} | {variant} | n/a (a class "
                        f"absent) | | | | | |"
                    )
                    continue
                diff = values - base
                mean = diff.mean(axis=0)
                se = diff.std(axis=0, ddof=1) / np.sqrt(len(runs))
                if variant == "no resampling":
                    delta = "– | – | – | –"
                else:
                    delta = (
                        f"{mean[0]:+.4f} ± {se[0]:.4f} | {verdict(mean[0], se[0])} | "
                        f"{mean[1]:+.4f} ± {se[1]:.4f} | {verdict(mean[1], se[1])}"
                    )
                lines.append(
                    f"| {name} (K={k}) | {kept} | {variant} | "
                    f"{values[:, 0].mean():.4f} ± {values[:, 0].std(ddof=1):.4f} | "
                    f"{values[:, 1].mean():.4f} ± {values[:, 1].std(ddof=1):.4f} "
                    f"| {delta} |"
                )
            control = np.array([r["no resampling, same rows"] for r in runs])
            if not np.isnan(control).any():
                diff = np.array([r["undersampled, corrected"] for r in runs]) - control
                mean = diff.mean(axis=0)
                se = diff.std(axis=0, ddof=1) / np.sqrt(len(runs))
                controls.append(
                    f"| {name} (K={k}) | {mean[0]:+.4f} ± {se[0]:.4f} | "
                    f"{verdict(mean[0], se[0])} | {mean[1]:+.4f} ± {se[1]:.4f} | "
                    f"{verdict(mean[1], se[1])} |"
                )
            print(
                f"{protocol} {name}: {time.perf_counter() - start:.0f} s",
                file=sys.stderr,
            )
        lines += [*controls, ""]
    lines.append(f"Total {time.perf_counter() - start:.0f} s.")
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    with threadpool_limits(1):
        main()
