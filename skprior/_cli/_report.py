"""The report and the reliability diagram of the ``skprior`` commands."""

from pathlib import Path

import numpy as np

from skprior._cli._common import InputError, check_output_folder


def row_summaries(proba, labels):
    """What the report and the diagram read of each row of ``proba``.

    Its top probability, whether that is the label's, and the label's
    probability, in the dtype of ``proba`` (widened exactly to float64 where
    they are used): a few bytes a row, so that the command need not keep
    ``proba`` for its report.
    """
    picked = proba[np.arange(len(labels)), labels]
    return np.max(proba, axis=1), np.argmax(proba, axis=1) == labels, picked


def reliability(top, correct):
    """Top-label accuracy and confidence per non-empty bin, and the ECE.

    From the rows' top probabilities and hits, with
    ``expected_calibration_error``'s uniform bins and sums (of float64
    values), so that the ECE is that function's exactly.
    """
    from skprior._utils._array_api import numpy_namespace
    from skprior._utils._options import DEFAULT_N_BINS
    from skprior.metrics._ece import _binned_sums

    # (the edges at the precision of the rows' own dtype, as the function's)
    given, ones = top.dtype, np.ones(len(top))
    top, hits = top.astype(np.float64), correct.astype(np.float64)
    weight, top_sum, hit_sum = _binned_sums(
        numpy_namespace(), True, top, hits, ones, DEFAULT_N_BINS, "uniform", given
    )
    full = weight > 0
    ece = float(np.sum(np.abs(hit_sum - top_sum)) / len(top))
    return hit_sum[full] / weight[full], top_sum[full] / weight[full], ece


def summary_scores(top, correct, picked):
    """Accuracy, ECE (top-label, 15 bins) and mean NLL of the rows.

    From their :func:`row_summaries` (concatenated).
    """
    picked = np.clip(picked.astype(np.float64), np.finfo(np.float64).tiny, None)
    return {
        "accuracy": float(np.mean(correct)),
        "ECE": reliability(top, correct)[2],
        "NLL": float(-np.mean(np.log(picked))),
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
            f"--diagram {path}: matplotlib cannot write this file type; use one "
            f"of {known}."
        )
    check_output_folder(path, "--diagram")


def diagram(path, before, after, title, stack):
    """Save a reliability diagram to ``path`` from the rows' summaries.

    ``before`` and ``after`` are :func:`row_summaries` (concatenated): the
    curve needs only each row's top probability and whether it is right,
    so the command keeps neither array of probabilities for it. The file
    replaces ``path`` at the end of ``stack`` (a
    :class:`contextlib.ExitStack`), with --output (``_io.write_array``).
    """
    _matplotlib().use("Agg")
    import matplotlib.pyplot as plt

    from skprior import ReliabilityDisplay

    fig, ax = plt.subplots(figsize=(5, 5), layout="constrained")
    for name, (top, correct, _), ref_line in [
        ("before", before, True),
        ("after", after, False),
    ]:
        accuracy, confidence, ece = reliability(top, correct)
        display = ReliabilityDisplay(
            accuracy, confidence, top.astype(np.float64), ece=ece, estimator_name=name
        )
        display.plot(ax=ax, name=name, histogram=False, ref_line=ref_line)
    ax.set_title(title)
    from skprior._utils._npy_blocks import replaced_atomically

    try:
        # (beside it and renamed once whole, as the outputs are: a full disk
        # or an interrupt leaves an earlier diagram as it was)
        temporary = stack.enter_context(replaced_atomically(path))
        fig.savefig(temporary, format=Path(path).suffix[1:].lower())
    except (OSError, ValueError) as exc:
        raise InputError(
            f"--diagram {path}: cannot write the diagram ({exc})."
        ) from exc
    finally:
        plt.close(fig)
