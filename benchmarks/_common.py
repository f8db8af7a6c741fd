"""Measuring helpers shared by the benchmark scripts: timing, peak memory, and
a "model" that returns stored outputs (data loaders are in ``_data.py``)."""

import contextlib
import subprocess
import sys
import time
import tracemalloc
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin


def best_time(func, repeats, clock=time.perf_counter):
    """Best time of ``repeats`` calls of ``func()``, and the last result.

    The machine is shared: the minimum is the least disturbed run, as
    ``timeit`` recommends. ``clock``: wall time by default;
    ``time.process_time`` for the process's CPU time.
    """
    best, result = np.inf, None
    for _ in range(repeats):
        start = clock()
        result = func()
        best = min(best, clock() - start)
    return best, result


@contextlib.contextmanager
def busy_machine(busy=True):
    """Run the block with a second process keeping one core busy (if ``busy``).

    The situation of ``GridSearchCV(n_jobs=...)``, joblib or Dask workers, or
    any other job on the machine: the standards ask for timings idle and busy.
    """
    if not busy:
        yield
        return
    load = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # (let it start spinning)
        yield
    finally:
        load.kill()
        load.wait()


def peak_allocation(func):
    """Bytes allocated at the peak of ``func()`` above what was allocated before.

    numpy reports its array allocations to ``tracemalloc``; warnings are
    silenced (the figure is about memory, not about the data).
    """
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = func()
        peak = tracemalloc.get_traced_memory()[1]
        del result
        return peak - base
    finally:
        tracemalloc.stop()


class StoredOutputsClassifier(ClassifierMixin, BaseEstimator):
    """A fitted "model" whose outputs are stored: ``X[:, 0]`` indexes ``proba``.

    ``fit`` only sets ``classes_`` (0..n_classes-1), so wrappers can hold it
    like any fitted model and a grid search costs predictions only.
    """

    def __init__(self, proba=None):
        self.proba = proba

    def fit(self, X=None, y=None):
        self.classes_ = np.arange(self.proba.shape[1])
        return self

    def predict_proba(self, X):
        return self.proba[np.asarray(X)[:, 0].astype(np.intp)]

    def predict(self, X):
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
