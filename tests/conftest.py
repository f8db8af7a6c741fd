"""Shared fixtures: the real model outputs and datasets copied into benchmarks/data."""

import os
from importlib.metadata import version
from pathlib import Path

# scikit-learn < 1.7 enables its array API support when it imports its test
# utilities (as parametrize_with_checks does) whenever array-api-compat is
# installed, and then refuses to run unless SciPy's is enabled too: set it
# before anything imports scikit-learn or SciPy. (Later versions check lazily.)
if tuple(int(part) for part in version("scikit-learn").split(".")[:2]) < (1, 7):
    os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "benchmarks" / "data"


def load_model_outputs(name):
    """Stored softmax outputs and labels of a CIFAR network (netcal or cleanlab)."""
    if name == "cleanlab-cifar-10":
        folder = DATA / "model_outputs"
        proba = np.load(folder / "cleanlab_cifar10_test_pyx.npy")
        labels = np.load(folder / "cleanlab_cifar10_test_labels.npy")
        return proba, labels
    stored = np.load(DATA / "model_outputs" / f"netcal_{name}.npz")
    return stored["predictions"], stored["ground_truth"]


@pytest.fixture(scope="session")
def cifar100():
    """(proba, labels) of WideResNet-16-4 on the CIFAR-100 test set, float32."""
    return load_model_outputs("wideresnet-16-4-cifar-100")


@pytest.fixture(scope="session")
def cifar10():
    """(proba, labels) of WideResNet-16-4 on the CIFAR-10 test set, float32."""
    return load_model_outputs("wideresnet-16-4-cifar-10")


@pytest.fixture(scope="module")
def blob_wrapper():
    """A logistic regression fitted on the first half of three noisy blobs, X, y
    (the stream tests)."""
    from sklearn.datasets import make_blobs
    from sklearn.linear_model import LogisticRegression

    X, y = make_blobs(n_samples=3000, centers=3, cluster_std=3.0, random_state=0)
    model = LogisticRegression(max_iter=1000).fit(X[:1500], y[:1500])
    return model, X, y


# -- hypothesis profiles (tests/test_properties.py) -----------------------------------
# "ci", the default: few examples, derandomised (the same inputs on every run),
# no example database written into the tree. "release": many examples, random:
#     python -m pytest tests/test_properties.py --hypothesis-profile release
# (hypothesis's pytest plugin loads the named profile after this file has run).
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile(
    "release",
    max_examples=1500,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.load_profile("ci")
