"""The report and the reliability diagram of the ``skprior`` commands."""

from pathlib import Path

import numpy as np

from skprior._cli._common import InputError


def scores(proba, labels, step=lambda: None):
    """Accuracy, ECE (top-label, 15 bins) and mean NLL of ``proba``.

    ``step()`` is called after each (a progress bar's).
    """
    from skprior.metrics import expected_calibration_error

    accuracy = float(np.mean(np.argmax(proba, axis=1) == labels))
    step()
    ece = expected_calibration_error(labels, proba, labels=np.arange(proba.shape[1]))
    step()
    picked = proba[np.arange(len(labels)), labels].astype(np.float64)
    nll = float(-np.mean(np.log(np.clip(picked, np.finfo(np.float64).tiny, None))))
    step()
    return {"accuracy": accuracy, "ECE": ece, "NLL": nll}


def row_summaries(proba, labels):
    """What :func:`scores` reads of each row.

    Its top probability, whether that is the label's, and the label's
    probability (float64).
    """
    picked = proba[np.arange(len(labels)), labels].astype(np.float64)
    top = np.max(proba, axis=1).astype(np.float64)
    return top, np.argmax(proba, axis=1) == labels, picked


def summary_scores(top, correct, picked):
    """:func:`scores` from the rows' :func:`row_summaries` (concatenated).

    The top-label ECE is ``expected_calibration_error``'s (its uniform bins
    and sums), so the two agree exactly.
    """
    from skprior._utils._array_api import numpy_namespace
    from skprior._utils._options import DEFAULT_N_BINS
    from skprior.metrics._ece import _binned_sums

    hits, weights = correct.astype(np.float64), np.ones(len(top))
    _, top_sum, hit_sum = _binned_sums(
        numpy_namespace(), True, top, hits, weights, DEFAULT_N_BINS, "uniform"
    )
    tiny = np.finfo(np.float64).tiny
    return {
        "accuracy": float(np.mean(correct)),
        "ECE": float(np.sum(np.abs(hit_sum - top_sum)) / np.sum(weights)),
        "NLL": float(-np.mean(np.log(np.clip(picked, tiny, None)))),
    }


def print_change(old, new):
    """Print each score of ``old`` (a dict) before, after (``new``) and its change."""
    print(f"{'':10}{'before':>10}{'after':>10}{'change':>10}")
    for name in old:
        change = new[name] - old[name]
        print(f"{name:10}{old[name]:10.4f}{new[name]:10.4f}{change:+10.4f}")


def _matplotlib():
    try:
        import matplotlib
    except ImportError as exc:
        raise InputError(
            "--diagram needs matplotlib: pip install 'skprior[plot]'."
        ) from exc
    return matplotlib


def check_diagram_path(path):
    """Refuse a --diagram path that matplotlib cannot write, before any work."""
    _matplotlib()
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in formats:
        known = ", ".join("." + name for name in sorted(formats))
        raise InputError(
            f"{path}: matplotlib cannot write this file type; use one of {known}."
        )
    folder = Path(path).resolve().parent
    if not folder.is_dir():
        raise InputError(f"{path}: the folder {folder} does not exist.")


def diagram(path, before, after, labels, title):
    """Save a reliability diagram of ``before`` and ``after`` to ``path``."""
    _matplotlib().use("Agg")
    import matplotlib.pyplot as plt

    from skprior import ReliabilityDisplay

    classes = np.arange(before.shape[1])
    fig, ax = plt.subplots(figsize=(5, 5), layout="constrained")
    for name, proba, ref_line in [("before", before, True), ("after", after, False)]:
        ReliabilityDisplay.from_predictions(
            labels,
            proba,
            labels=classes,
            name=name,
            ax=ax,
            histogram=False,
            ref_line=ref_line,
        )
    ax.set_title(title)
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot write the diagram ({exc}).") from exc
    finally:
        plt.close(fig)
