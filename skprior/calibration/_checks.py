"""Run-time warnings for calibrators fitted by log loss that can make things worse.

BCTS, vector scaling (NBVS, VS) and Dirichlet calibration minimise a log loss
over several parameters. Two cases make their fit meaningless without any
error being raised, so they warn (reason and fix) instead:

* **Separable fit data.** If the fitted calibration puts every fit sample's
  true class strictly on top, multiplying its parameters by ``c > 1`` lowers
  every sample's loss, so no finite minimiser exists: a finite optimum always
  leaves at least one sample misclassified or tied. L-BFGS then stops at an
  arbitrary point on the way to infinity (``T -> 0``, factors or biases
  ``-> inf``) with (nearly) one-hot probabilities. This is the multi-parameter
  counterpart of NLL temperature scaling's "every true class has the top
  logit" warning.
* **Too few rows for the parameters.** A maximum-likelihood fit with more
  than a tenth as many free parameters as (effective) samples over-fits the
  fit set (the "ten events per variable" rule of logistic regression,
  Peduzzi et al., J. Clin. Epidemiol. 49(12), 1996); its factors can be
  large and its held-out log loss worse than the model's own.

The checks read the fitted scores in row blocks, so they cost one pass over
the data and a block of memory. The one error they share is here too: a
class without a sample, whose parameters would go to infinity.
"""

import numpy as np

from skprior._utils._validation import warn_user

# Samples per free parameter below which a fit warns.
ROWS_PER_PARAMETER = 10


def warn_if_separable(data, scores, what, grows):
    """Warn when the fitted calibration separates the fit data.

    ``scores(rows, block)`` maps a block of ``data`` (:class:`Rows`) to its
    calibrated logits; the data are separated when every row of positive
    weight ranks its true class strictly first (a tie counts as not
    separated). One pass. ``what`` names the method, ``grows`` what goes to
    infinity.
    """
    xp = data.xp

    def one_block(rows, block):
        u = scores(rows, block)
        onehot = data.onehot(rows)
        other = xp.max(xp.where(onehot, -xp.inf, u), axis=1)
        missed = (data.weights[rows] > 0) & ~(data.take_true(rows, u) > other)
        return (xp.sum(xp.astype(missed, data.dtype)),)

    (n_missed,) = data.sums(one_block)
    if float(n_missed) > 0:
        return
    warn_user(
        f"{what} was fitted on data it separates: the calibrated "
        f"probabilities put every fit sample's true class on top, so the "
        f"log loss keeps decreasing as {grows}, and the fit stopped at an "
        f"arbitrary point with (nearly) one-hot probabilities that will be "
        f"over-confident on new data. This happens when the model makes no "
        f"error on the fit data (its own training data, or a tiny fit "
        f"set). Calibrate on more held-out data on which the model makes "
        f"errors."
    )


def effective_rows(data):
    """``(sum w)^2 / sum w^2``: the number of rows for unit weights."""
    w = data.weights
    total, squares = data.host(data.xp.sum(w), data.dot(w, w))
    return float(total) ** 2 / float(squares)


def dirichlet_free_parameters(data, reg_lambda, reg_mu):
    """The free parameters of Dirichlet calibration on ``data`` (log p rows).

    ODIR leaves the diagonal of ``W`` free; the off-diagonal entries and the
    biases are free too where their penalty per entry weighs less than one
    sample does in the mean loss (``1 / n_eff``): ``lambda = 1e-3`` at
    ``K = 10`` on 200 rows over-fits as ``lambda = 0`` does (test log loss
    2.36 against 1.94 for the model itself).
    """
    n_classes, n_eff = data.shape[1], effective_rows(data)
    # (Python bools: a NumPy scalar reg_lambda would make them numpy.bool_,
    # and the count a NumPy integer that the warning's text cannot use)
    off_free = bool(reg_lambda / max(n_classes * (n_classes - 1), 1) < 1 / n_eff)
    bias_free = bool(reg_mu / n_classes < 1 / n_eff)
    off_diagonal = n_classes * (n_classes - 1)
    return n_classes + off_diagonal * off_free + (n_classes - 1) * bias_free


def warn_if_few_rows(data, n_params, what, fix):
    """Warn when the effective number of rows is below 10 per free parameter."""
    n_eff = effective_rows(data)
    need = ROWS_PER_PARAMETER * n_params
    if n_eff < need:
        warn_user(
            f"{what} fits {n_params} free parameter{'s' * (n_params != 1)} on "
            f"{n_eff:.4g} (effective) "
            f"samples, fewer than the {need} ({ROWS_PER_PARAMETER} per parameter) "
            f"a log-loss fit needs not to over-fit: its factors can be large and "
            f"its probabilities worse than the model's own on new data. {fix}"
        )


def require_every_class(data, what, fix):
    """Refuse fit rows ``data`` in which a class has no weight (``fix``: how)."""
    class_weight = data.class_totals()
    if np.any(class_weight <= 0):
        missing = np.flatnonzero(class_weight <= 0)
        more = ", ..." if missing.size > 10 else ""  # (10,000 classes: 54 kB)
        raise ValueError(
            f"{what} needs every class in y, but {missing.size} of them (columns "
            f"{', '.join(map(str, missing[:10]))}{more}) "
            f"have no usable sample (weight > 0 and, but for Dirichlet "
            f"calibration, a finite logit of the true class): their parameters "
            f"would go to infinity. {fix}"
        )
