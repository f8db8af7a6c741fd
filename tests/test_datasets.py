"""The PMLB loader: the shipped files, and any PMLB file in a folder."""

import gzip
from pathlib import Path

import numpy as np
import pytest

from skprior.datasets import load_pmlb

PMLB = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "pmlb"


def test_shipped_dataset_loads():
    """vowel ships with the package: 990 rows, 13 features, 11 classes."""
    X, y = load_pmlb("vowel")
    assert X.shape == (990, 13)
    assert len(np.unique(y)) == 11


def test_data_home_reads_the_same_file_format():
    """A folder of PMLB files gives the same arrays as the shipped copy."""
    X, y = load_pmlb("vowel", data_home=PMLB)
    X_shipped, y_shipped = load_pmlb("vowel")
    np.testing.assert_array_equal(X, X_shipped)
    np.testing.assert_array_equal(y, y_shipped)
    X, y = load_pmlb("yeast", data_home=PMLB)
    assert X.shape == (1479, 8)


@pytest.mark.parametrize(
    "name, data_home, match",
    [("iris", None, "data_home="), ("iris", PMLB, "No PMLB file")],
)
def test_unknown_dataset_is_refused(name, data_home, match):
    """A name that is not shipped (or not in data_home) gets the fix."""
    with pytest.raises(ValueError, match=match):
        load_pmlb(name, data_home=data_home)


def _write_pmlb(path, header, rows):
    with gzip.open(path, "wt") as file:
        file.write("\t".join(header) + "\n")
        file.writelines("\t".join(map(str, row)) + "\n" for row in rows)


def test_files_that_are_not_classification_sets_are_refused(tmp_path):
    """A regression target is refused, not truncated into class labels; a
    file without the 'target' column says so."""
    _write_pmlb(tmp_path / "reg.tsv.gz", ["a", "target"], [[1, 0.5], [2, 1.7]])
    with pytest.raises(ValueError, match="not whole numbers"):
        load_pmlb("reg", data_home=tmp_path)
    _write_pmlb(tmp_path / "nolabel.tsv.gz", ["a", "class"], [[1, 0], [2, 1]])
    with pytest.raises(ValueError, match="no column 'target'"):
        load_pmlb("nolabel", data_home=tmp_path)
    _write_pmlb(tmp_path / "ok.tsv.gz", ["a", "target"], [[1, 3.0], [2, -1.0]])
    X, y = load_pmlb("ok", data_home=tmp_path)
    np.testing.assert_array_equal(y, [3, -1])
    assert y.dtype == np.int64


def test_data_home_expands_the_home_folder(tmp_path, monkeypatch):
    """data_home="~/..." is the user's folder, as in scikit-learn's loaders."""
    monkeypatch.setenv("HOME", str(tmp_path))
    _write_pmlb(tmp_path / "ok.tsv.gz", ["a", "target"], [[1, 0], [2, 1]])
    X, y = load_pmlb("ok", data_home="~")
    np.testing.assert_array_equal(y, [0, 1])


def test_a_file_with_a_header_and_no_rows_is_refused_clearly(tmp_path):
    """A header-only file gets the reason, not NumPy's IndexError from the
    empty table (and its loadtxt warning)."""
    _write_pmlb(tmp_path / "empty.tsv.gz", ["a", "target"], [])
    with pytest.raises(ValueError, match="has a header but no rows"):
        load_pmlb("empty", data_home=tmp_path)
