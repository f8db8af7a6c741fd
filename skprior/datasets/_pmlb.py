"""Loader for the PMLB datasets shipped in ``skprior/datasets/data``."""

import gzip
import io
from importlib import resources
from pathlib import Path

import numpy as np

from skprior._utils._options import SHIPPED_DATASETS


def load_pmlb(name, *, data_home=None):
    """Load a PMLB multiclass dataset shipped with skprior (or kept elsewhere).

    Parameters
    ----------
    name : str
        Without ``data_home``, one of the shipped datasets: ``"letter"``: UCI
        Letter Recognition (Frey & Slate, 1991), 20,000 rows, 16 features, 26
        classes; ``"vowel"``: UCI Vowel (Deterding), 990 rows, 13 features, 11
        classes. With ``data_home``, the name of any PMLB file there.
    data_home : str or path-like, default=None
        A folder of PMLB files ``<name>.tsv.gz`` (as in the PMLB repository:
        tab-separated, a header row, the label in the column ``target``); the
        benchmarks keep eleven of them. ``None`` reads the shipped files.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), dtype float64
        Features.
    y : ndarray of shape (n_samples,), dtype int64
        Labels as found in the file (not always contiguous from 0).

    Notes
    -----
    Files from PMLB (Romano et al., "PMLB v1.0", arXiv:2012.00058), MIT licence,
    ``EpistasisLab/pmlb`` ``datasets/<name>/<name>.tsv.gz``; see
    ``skprior/datasets/data/README.md``.

    Examples
    --------
    >>> from skprior.datasets import load_pmlb
    >>> X, y = load_pmlb("vowel")
    >>> X.shape, len(set(y))
    ((990, 13), 11)
    """
    if data_home is not None:
        path = Path(data_home).expanduser() / f"{name}.tsv.gz"
        if not path.is_file():
            raise ValueError(f"No PMLB file {path}: check name and data_home.")
    elif name not in SHIPPED_DATASETS:
        raise ValueError(
            f"Unknown dataset {name!r}; choose one of {SHIPPED_DATASETS}, or pass "
            f"data_home= the folder that holds {name}.tsv.gz."
        )
    else:
        path = resources.files("skprior.datasets") / "data" / f"{name}.tsv.gz"
    with path.open("rb") as raw, gzip.open(raw, "rt") as text:
        header = text.readline().rstrip("\n").split("\t")
        rows = text.read()
    if not rows.strip():
        raise ValueError(
            f"{path} has a header but no rows: a PMLB file holds one row per "
            f"sample below its header."
        )
    table = np.loadtxt(io.StringIO(rows), delimiter="\t", dtype=np.float64, ndmin=2)
    if "target" not in header:
        raise ValueError(
            f"{path} has no column 'target' (its columns: {header[:5]}...); a "
            f"PMLB file names its label column 'target'."
        )
    target = header.index("target")
    X = np.delete(table, target, axis=1)
    y = table[:, target]
    if not np.array_equal(y, np.round(y)):
        # PMLB's regression sets share the format: refuse, rather than
        # truncate their targets into false class labels.
        raise ValueError(
            f"{path} has targets that are not whole numbers (e.g. "
            f"{y[y != np.round(y)][0]}): a regression dataset, not the "
            f"classification one skprior needs."
        )
    return X, y.astype(np.int64)
