"""CAN: Classification with Alternating Normalization (Jia et al., 2021).

Pure array functions first (:func:`topk_entropy`, :func:`alternating_normalization`),
then the estimator :class:`CANClassifier` that calls them.

How the fast forms follow from the per-row algorithm
----------------------------------------------------
For one low-confidence row ``b`` and the confident block ``A0`` (n x m), each of
the ``d`` iterations raises ``L = [A; b]`` to the power ``alpha``, divides every
column by its sum and then multiplies by the prior ``q`` and divides every row by
its sum.

* ``d = 1``: the column sums are ``C + b**alpha`` with ``C = sum_i A0_i**alpha``,
  so the corrected row is ``q * b**alpha / (C + b**alpha)``, renormalised.
  ``C`` is shared by every low-confidence row: O((n + U) m) in all.
* ``d > 1``: by induction the confident block after ``t`` iterations is a row-
  and column-scaled copy of ``A0**(alpha**t)``: ``A_t = diag(u) R_t diag(v)``.
  One iteration needs the column sums ``v**alpha * (R_{t+1}^T u**alpha)`` and the
  new row scale ``u' = 1 / (R_{t+1} h)`` with ``h = v**alpha q / colsum``, so
  all low-confidence rows advance together by two matrix products. ``u`` and
  ``v`` are kept in logs and ``R_0`` is scaled so that every row and column has
  maximum 1, so that no power ``alpha**t`` over- or underflows a whole row or
  column.

Division of a column whose sum is 0 (no row gives the class any probability)
gives 0, as ``0 * log 0 = 0`` does in the entropy.
"""

import functools
import warnings
from numbers import Integral, Real

import numpy as np
from scipy.optimize import brentq
from scipy.special import entr, logsumexp

from skprior._base import BasePriorClassifier
from skprior._sklearn_compat import Interval, StrOptions
from skprior._validation import (
    check_int,
    check_prior,
    check_proba,
    check_proba_with_row_max,
    check_real,
    row_blocks,
    row_maxima,
)

UNCERTAINTY_KINDS = ("renormalized", "unrenormalized", "max_over_k")

# The factored form of CAN with d > 1 is exact while the row and column scales
# of each low-confidence row's iteration spread over less than exp(600)
# (double precision spans exp(-708) to exp(709)); see _iterate_block.
_SAFE_LOG_RANGE = 600.0

# A row is low-confidence when its uncertainty is >= tau - _TAU_ROUNDING: an
# exactly uniform top k evaluates to 1 - 2e-16, and must count at tau = 1.
_TAU_ROUNDING = 1e-12


def _renormalized_topk_entropy(top):
    """Entropy of the rows of ``top`` renormalised, divided by log k.

    ``scipy.special.entr`` is ``-x log x`` with ``entr(0) = 0``.
    """
    top = top / top.sum(axis=1, keepdims=True)
    # (a uniform row rounds to 1 +- a few ulps: kept in [0, 1] as documented)
    return np.minimum(entr(top).sum(axis=1) / np.log(top.shape[1]), 1.0)


def _max_over_k_entropy(proba, log_j):
    """Largest normalised entropy of the top-j renormalised, j = 2..n_classes."""
    ordered = -np.sort(-proba.astype(np.float64), axis=1)
    mass = np.cumsum(ordered, axis=1)[:, 1:]
    plogp = -np.cumsum(entr(ordered), axis=1)[:, 1:]
    # Entropy of the top-j renormalised: log S_j - (sum p log p) / S_j.
    entropy = np.log(mass) - plogp / mass
    return np.minimum(np.max(entropy / log_j, axis=1), 1.0)


def _check_uncertainty_args(k, n_classes, kind):
    if kind not in UNCERTAINTY_KINDS:
        raise ValueError(
            f"uncertainty must be one of {UNCERTAINTY_KINDS}, got {kind!r}."
        )
    k = check_int(k, "k", low=2)
    if k > n_classes and kind != "max_over_k":  # "max_over_k" does not use k
        hint = " (with two classes, k=2 is the entropy of the row)"
        raise ValueError(
            f"k={k} is larger than the number of classes ({n_classes}); "
            f"choose k between 2 and {n_classes}"
            f"{hint if n_classes == 2 else ''}."
        )
    return k


def _integer_view(proba):
    """The float rows seen as integers of the same width (same order if >= 0)."""
    return proba.view(np.int32 if proba.dtype == np.float32 else np.int64)


def _topk_entropy(proba, k, kind, overwrite=False):
    """Uncertainty of validated float rows (no checks).

    ``overwrite=True`` lets the partial sort reorder ``proba`` in place (for a
    copy that the caller no longer needs).
    """
    n_classes = proba.shape[1]
    if kind == "max_over_k":
        log_j = np.log(np.arange(2, n_classes + 1))
        out = np.empty(proba.shape[0])
        for block in row_blocks(*proba.shape):
            out[block] = _max_over_k_entropy(proba[block], log_j)
        return out
    # Validated probabilities are finite and non-negative: their bit patterns
    # order as integers do, and an integer partition skips the NaN handling.
    as_int = _integer_view(proba)
    if overwrite:
        as_int.partition(n_classes - k, axis=1)
    else:
        as_int = np.partition(as_int, n_classes - k, axis=1)
    top = as_int[:, n_classes - k :]
    top = top.view(proba.dtype).astype(np.float64)
    if kind == "renormalized":
        return _renormalized_topk_entropy(top)
    return np.minimum(entr(top).sum(axis=1) / np.log(n_classes), 1.0)


def topk_entropy(proba, k=3, *, kind="renormalized"):
    r"""Uncertainty of each prediction: the normalised entropy of its top k classes.

    Three definitions are in use for CAN (Jia et al., 2021):

    ``"renormalized"`` (default; Su's write-up)
        The k largest probabilities renormalised to sum to one, entropy divided
        by :math:`\log k`:
        :math:`u = -\sum_{j \le k} \tilde p_j \log \tilde p_j / \log k`,
        :math:`\tilde p_j = p_{(j)} / \sum_{l \le k} p_{(l)}`.
    ``"unrenormalized"`` (the paper's text)
        :math:`u = -\sum_{j \le k} p_{(j)} \log p_{(j)} / \log m`.
    ``"max_over_k"`` (the paper's code)
        The maximum of the renormalised form over every :math:`k = 2, \dots, m`;
        the argument ``k`` is then not used.

    All lie in [0, 1]; ``0 log 0 = 0``, so exact zeros give no NaN.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Class probabilities; rows sum to one.
    k : int, default=3
        Number of top classes, ``2 <= k <= n_classes``.
    kind : {"renormalized", "unrenormalized", "max_over_k"}, default="renormalized"
        Which definition.

    Returns
    -------
    uncertainty : ndarray of shape (n_samples,)
        Values in [0, 1]; 1 is most uncertain.

    References
    ----------
    .. [1] Jia, Liu, Ren, Wang, Ma, Bao, Wang and Lin, "When in Doubt: Improving
       Classification Performance with Alternating Normalization", Findings of
       EMNLP 2021. arXiv:2109.13449.
    .. [2] Su Jianlin, "CAN: a simple post-processing trick that uses the prior
       distribution to improve classification" (in Chinese), kexue.fm, 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import topk_entropy
    >>> topk_entropy(np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]]), k=2)
    array([0., 1.])
    """
    proba = check_proba(proba)
    k = _check_uncertainty_args(k, proba.shape[1], kind)
    return _topk_entropy(proba, k, kind)


def _entropy_bound(top_share, k):
    """Largest normalised entropy of k values whose largest share is ``top_share``.

    With the largest share r >= 1/k fixed, the entropy is largest when the other
    k - 1 shares are equal, (1 - r) / (k - 1) each, and that bound decreases
    as r grows.
    """
    r = np.clip(top_share, 1.0 / k, 1.0)
    return (entr(r) + (k - 1) * entr((1 - r) / (k - 1))) / np.log(k)


@functools.lru_cache(maxsize=64)
def _largest_uncertain_share(k, tau):
    """The top share r* above which the renormalised top-k entropy is < tau.

    The bound :func:`_entropy_bound` falls from 1 at r = 1/k to 0 at r = 1, so
    ``entropy >= tau`` needs ``r <= r*`` with ``bound(r*) = tau``. The root is
    found for ``tau - 1e-9``: the margin keeps rows within rounding of tau.
    """
    target = tau - 1e-9
    if target <= 0:
        return np.inf
    if target >= 1:
        return 1.0 / k
    return brentq(lambda r: _entropy_bound(r, k) - target, 1.0 / k, 1.0, xtol=1e-15)


def _low_confidence(proba, k, tau, kind, row_max=None, row_sums=None):
    """Sorted indices of the rows whose uncertainty is at least ``tau``.

    ``row_max`` and ``row_sums`` of validated ``proba`` may be passed when
    they are at hand (:func:`check_proba_with_row_max`).
    """
    if kind != "renormalized":
        return np.flatnonzero(_topk_entropy(proba, k, kind) >= tau - _TAU_ROUNDING)
    # Screen with the row maximum p1 before the (comparatively slow) partial
    # sort: the top share is r = p1 / (top-k mass) >= p1 / (row sum), so rows
    # with p1 > r* (row sum) are confident (see _largest_uncertain_share).
    if row_max is None:
        # (an integer maximum is ~2x faster than the NaN-aware float one)
        row_max = row_maxima(_integer_view(proba)).view(proba.dtype)
    if row_sums is None:
        row_sums = np.einsum("ij->i", proba)
    # In float64, with a slack for the rounding of row sums of float32 input.
    slack = 1.0 + 2 * proba.shape[1] * np.finfo(proba.dtype).eps
    share = _largest_uncertain_share(k, tau) * slack
    candidates = np.flatnonzero(row_max <= share * row_sums.astype(np.float64))
    if candidates.size == 0:
        return candidates
    uncertainty = _topk_entropy(proba[candidates], k, kind, overwrite=True)
    return candidates[uncertainty >= tau - _TAU_ROUNDING]


def _column_sums_of_powers(proba, weight, alpha):
    """``sum_i weight_i * proba_i ** alpha``, accumulated in float64.

    For ``alpha = 1`` a weighted sum over all rows avoids copying the selected
    ones; ``einsum`` accumulates float32 input in float64 without a float64
    copy of it.
    """
    if alpha == 1:
        return np.einsum("i,ij->j", weight, proba, dtype=np.float64, casting="unsafe")
    selected = weight > 0
    return weight[selected] @ (proba[selected].astype(np.float64) ** alpha)


def _column_sums(proba, block=16):
    """Column sums in float64, summing ``block`` rows at a time in the input dtype.

    Rows ``i, i + n/block, i + 2 n/block, ...`` are added as ``block`` long
    contiguous vectors (one vectorised loop, as fast as ``proba.sum()``), and
    only these partial sums, a ``block``-th of the data, are converted to
    float64 and summed. The error is that of ``block - 1`` additions in the
    input's dtype: at most about ``1e-6`` relative for float32 (``2e-8``
    measured on the CIFAR-100 outputs) and ``2e-15`` for float64. Converting
    every entry to float64 first is two to three times slower.
    """
    n_rows, n_classes = proba.shape
    head = n_rows - n_rows % block
    partial = proba[:head].reshape(block, -1).sum(axis=0).reshape(-1, n_classes)
    tail = proba[head:]
    return partial.astype(np.float64).sum(axis=0) + tail.astype(np.float64).sum(axis=0)


def _log_column_sums_of_powers(proba, weight, alpha):
    """``log sum_i weight_i * proba_i ** alpha``, in logs (``-inf``: empty column).

    For ``alpha != 1`` the powers themselves can underflow (``1e-12 ** 30``),
    and a column whose every power underflows would pass for an empty one.
    """
    selected = weight > 0
    with np.errstate(divide="ignore"):
        scaled = alpha * np.log(proba[selected].astype(np.float64))
        scaled += np.log(weight[selected])[:, None]
        return logsumexp(scaled, axis=0)


def _powers_stay_normal(arrays, alpha):
    """Whether every positive entry of ``arrays`` raised to ``alpha`` stays
    above ``e**50`` times the smallest normal float.

    Then no power under- or loses precision, and the closed form in powers is
    exact; always so for ``alpha < 1``, which raises small entries.
    """
    if alpha < 1:
        return True
    floor = np.exp((np.log(np.finfo(np.float64).tiny) + 50.0) / alpha)
    return all(not np.any((array > 0) & (array < floor)) for array in arrays)


def _can_one_step_log(rows, log_column_sums, prior, alpha):
    """:func:`_can_one_step` in logs, for ``alpha != 1``.

    ``b**alpha / (C + b**alpha) = 1 / (1 + exp(log C - alpha log b))`` holds
    its precision where both powers underflow; the renormalisation is a
    softmax of ``log q`` plus its log.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        log_b_alpha = alpha * np.log(rows.astype(np.float64))
        gap = log_column_sums - log_b_alpha
        # 0 / 0 = 0: a class that neither the row nor the reference predicts
        gap[np.isnan(gap)] = np.inf
        log_out = np.log(prior) - np.logaddexp(0.0, gap)
    log_out -= logsumexp(log_out, axis=1, keepdims=True)
    return np.exp(log_out)


def _can_one_step(rows, reference_column_sums, prior, alpha):
    """Closed form of CAN with one iteration, for every row at once."""
    # (converting first: a ufunc on mixed float32/float64 operands is slower)
    rows = rows.astype(np.float64)
    rows_alpha = rows if alpha == 1 else rows**alpha
    out = rows_alpha + reference_column_sums
    # A zero denominator has a zero numerator: 0 / 0 = 0 (a class nobody
    # predicts), so such denominators are set to 1.
    empty = np.flatnonzero(reference_column_sums == 0)
    if empty.size:
        block = out[:, empty]
        block[block == 0] = 1.0
        out[:, empty] = block
    np.divide(rows_alpha, out, out=out)
    out *= prior
    out *= (1.0 / np.einsum("ij->i", out))[:, None]
    return out


def _can_iterated(rows, reference, weight, prior, alpha, n_iter):
    """CAN with ``n_iter`` iterations, all rows advanced together.

    ``reference`` holds the confident rows, each counted ``weight`` times in the
    column sums. See the module docstring for the factored form
    ``A_t = diag(u) R_t diag(v)``. Returns the corrected rows and a mask of
    those whose scales span too wide a range for the factored form to be
    exact (see :func:`_iterate_block`).
    """
    base = reference.astype(np.float64)  # a copy, scaled in place to R_0
    row_max = base.max(axis=1)
    base /= row_max[:, None]
    col_max = base.max(axis=0)
    col_max = np.where(col_max > 0, col_max, 1.0)
    base /= col_max
    log_u0 = np.log(row_max)[None, :]
    with np.errstate(divide="ignore"):
        log_v0 = np.log(col_max)[None, :]
        log_prior = np.log(prior)[None, :]
        log_weight = np.log(weight)[None, :]

    # R_{t+1} = R_t ** alpha for t = 0..n_iter-1, shared by every row.
    powers = []
    current = base
    for _ in range(n_iter):
        current = current if alpha == 1 else current**alpha
        powers.append(current)

    n_reference = reference.shape[0]
    out = np.empty(rows.shape, dtype=np.float64)
    lost = np.zeros(rows.shape[0], dtype=bool)
    # (blocks x n_reference) work arrays
    for block in row_blocks(rows.shape[0], max(n_reference, rows.shape[1])):
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            out[block], lost[block] = _iterate_block(
                rows[block].astype(np.float64),
                powers,
                log_u0,
                log_v0,
                log_weight,
                log_prior,
                alpha,
            )
    return out, lost


def _iterate_block(block, powers, log_u, log_v, log_weight, log_prior, alpha):
    """Run the CAN iterations for one chunk of low-confidence rows (in logs).

    Returns the corrected rows and a mask of the rows for which the factored
    form may have lost digits. Every row and column of ``R_t`` has maximum 1,
    so an entry of ``R_t`` that underflows changes a column sum by at most
    ``tiny * max(u**alpha) / min(u**alpha)`` relative, and a row sum ``R h``
    by at most ``tiny * max(h) / min(h)``. While both ratios stay below
    ``exp(_SAFE_LOG_RANGE)`` that is below double precision; a row whose
    scales spread wider (large ``alpha ** n_iter``) is flagged, for the
    per-row computation in logs.
    """
    log_b = np.log(block)
    # ``u ** alpha`` enters only through the column sums, as the weights of the
    # reference rows; keep it as ``exp(scaled_u - shift)`` with entries <= 1.
    scaled_u = alpha * log_u + log_weight
    shift = scaled_u.max(axis=1, keepdims=True)
    u_alpha = np.exp(scaled_u - shift)
    spread = scaled_u.min(axis=1) - shift[:, 0]  # (shared by all rows at t = 0)
    lost = np.broadcast_to(spread < -_SAFE_LOG_RANGE, (block.shape[0],)).copy()
    weight = np.exp(log_weight)
    n_iter = len(powers)
    for t, power in enumerate(powers):
        # A reference row of weight w counts as w copies of itself in the
        # column sums (copies stay identical through the iterations).
        log_col_ref = np.log(u_alpha @ power) + shift + alpha * log_v
        log_b_alpha = alpha * log_b
        log_col = np.logaddexp(log_col_ref, log_b_alpha)
        empty = np.isneginf(log_col)  # 0 / 0 = 0
        log_col = np.where(empty, 0.0, log_col)
        log_b = np.where(empty, -np.inf, log_b_alpha + log_prior - log_col)
        log_b = log_b - logsumexp(log_b, axis=1, keepdims=True)
        if t + 1 < n_iter:
            log_h = np.where(empty, -np.inf, alpha * log_v + log_prior - log_col)
            h_shift = log_h.max(axis=1, keepdims=True)
            h_low = np.where(empty, np.inf, log_h).min(axis=1)
            lost |= (h_low - h_shift[:, 0]) < -_SAFE_LOG_RANGE
            # New row scale u = 1 / (R h): scaled by its smallest row sum, its
            # alpha-th power is (min / row_sum) ** alpha <= 1 -- a division
            # when alpha = 1, where exp and log would cost ten times more.
            row_sums = np.exp(log_h - h_shift) @ power.T
            smallest = row_sums.min(axis=1, keepdims=True)
            ratio = smallest / row_sums
            u_alpha = (ratio if alpha == 1 else ratio**alpha) * weight
            shift = -alpha * (np.log(smallest) + h_shift)
            log_v = log_h
            log_spread = np.log(u_alpha.min(axis=1)) - np.log(u_alpha.max(axis=1))
            lost |= ~(log_spread >= -_SAFE_LOG_RANGE)  # (NaN counts as lost)
    return np.exp(log_b), lost


def _sparse_logsumexp(terms, axis):
    """``logsumexp(terms, axis)`` over the terms within ``e**50`` of the largest.

    Each of the others adds less than ``e**-50 = 2e-22`` of the largest, and
    they are most of the terms when ``terms`` spans a wide range: only the
    kept ones are exponentiated. (An all ``-inf`` line keeps nothing and
    gives ``-inf``.)
    """
    peak = terms.max(axis=axis, keepdims=True)
    keep = terms > peak - 50.0
    if axis == 0:
        i, j = np.nonzero(keep.T)[::-1]  # grouped by column j
        groups, n_groups = j, terms.shape[1]
    else:
        i, j = np.nonzero(keep)  # grouped by row i
        groups, n_groups = i, terms.shape[0]
    out = np.full(n_groups, -np.inf)
    if groups.size == 0:
        return out
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    shift = peak.reshape(-1)[groups]
    total = np.add.reduceat(np.exp(terms[i, j] - shift), starts)
    out[groups[starts]] = np.log(total) + shift[starts]
    return out


def _can_log_domain(rows, reference, weight, prior, alpha, n_iter):
    """CAN in logs, for the rows where the fast forms lose digits.

    The same factored iteration as :func:`_iterate_block`, with ``u``, ``v``
    and ``R_t = A0**(alpha**t)`` (scaled) all kept in logs, so nothing under-
    or overflows at any ``alpha ** n_iter``. One row at a time: each sum
    over ``R_t`` is taken over its terms within ``e**50`` of the largest
    (:func:`_sparse_logsumexp`), which are few when ``alpha ** t`` is large,
    as it is where the fast form fails.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        reference = reference.astype(np.float64)
        log_row_max = np.log(reference.max(axis=1))
        log_reference = np.log(reference) - log_row_max[:, None]
        log_col_max = log_reference.max(axis=0)
        log_col_max = np.where(np.isfinite(log_col_max), log_col_max, 0.0)
        log_base = log_reference - log_col_max  # rows and columns have max 0
        log_prior = np.log(prior)
        log_weight = np.log(weight)
        out = np.empty(rows.shape, dtype=np.float64)
        for index, row in enumerate(np.log(rows.astype(np.float64))):
            log_b, log_u, log_v, power = row, log_row_max, log_col_max, 1.0
            for t in range(n_iter):
                power *= alpha
                log_power = power * log_base
                scale = alpha * log_u + log_weight
                log_col = _sparse_logsumexp(scale[:, None] + log_power, axis=0)
                log_col = np.logaddexp(log_col + alpha * log_v, alpha * log_b)
                empty = np.isneginf(log_col)  # 0 / 0 = 0
                log_col = np.where(empty, 0.0, log_col)
                log_b = np.where(empty, -np.inf, alpha * log_b + log_prior - log_col)
                log_b = log_b - logsumexp(log_b)
                if t + 1 < n_iter:
                    log_h = np.where(
                        empty, -np.inf, alpha * log_v + log_prior - log_col
                    )
                    log_u = -_sparse_logsumexp(log_power + log_h, axis=1)
                    log_v = log_h
            out[index] = np.exp(log_b)
    return out


def _check_weight(weight, n_rows):
    """Validate reference weights; ``None`` means all ones."""
    if weight is None:
        return np.ones(n_rows)
    weight = np.asarray(weight, dtype=np.float64)
    valid = weight.shape == (n_rows,) and np.all(np.isfinite(weight))
    if not valid or np.any(weight < 0):
        raise ValueError(
            f"reference_weight must hold one finite, non-negative weight per "
            f"reference row ({n_rows}), got shape {weight.shape}."
        )
    return weight


def alternating_normalization(
    proba,
    prior,
    *,
    k=3,
    tau=0.9,
    alpha=1.0,
    n_iter=1,
    reference=None,
    reference_weight=None,
    uncertainty="renormalized",
):
    r"""Correct low-confidence predictions with CAN (alternating normalization).

    Rows whose top-k uncertainty (:func:`topk_entropy`) is below ``tau`` are
    confident: they are returned unchanged and form the matrix :math:`A_0`. Each
    low-confidence row :math:`b_0` is then corrected on its own, against
    :math:`A_0` and the training prior :math:`q`:

    .. math::

        L_0 = \begin{bmatrix} A_0 \\ b_0 \end{bmatrix}, \qquad
        S_t = \Lambda_c\bigl(L_t^{\alpha}\bigr), \qquad
        L_{t+1} = \Lambda_r\bigl(S_t \operatorname{diag}(q)\bigr),

    where :math:`\Lambda_c` divides each column by its sum and :math:`\Lambda_r`
    each row; after ``n_iter`` steps the last row of :math:`L` is the output.
    For one step this is :math:`b' \propto q \odot b^{\alpha} \oslash
    (\sum_i A_{0,i}^{\alpha} + b^{\alpha})`, which is how it is computed;
    for more steps all rows advance together by matrix products (see the
    module's notes). The result equals the one-row-at-a-time loop to rounding.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Class probabilities; rows sum to one. float32 stays float32 (the
        arithmetic is done in float64).
    prior : array-like of shape (n_classes,)
        Training class prior :math:`q`, strictly positive, summing to one.
    k : int, default=3
        Number of top classes in the uncertainty, ``2 <= k <= n_classes``.
    tau : float, default=0.9
        Uncertainty threshold in [0, 1]: rows with uncertainty ``>= tau`` are
        corrected (within 1e-12 of rounding, so that a uniform top k, whose
        uncertainty evaluates to 1 - 2e-16, counts at ``tau=1``).
    alpha : float, default=1.0
        Power :math:`\alpha > 0` applied before each column normalisation.
    n_iter : int, default=1
        Number of alternating normalisation steps :math:`d \geq 1`.
    reference : array-like of shape (n_reference, n_classes), default=None
        Where the confident rows :math:`A_0` come from: ``None`` takes them from
        ``proba`` itself (transductive, as in the paper); an array takes the
        confident rows of ``reference`` (for example, predictions on held-out
        data), so that every row of ``proba`` is treated on its own.
    reference_weight : array-like of shape (n_reference,), default=None
        Non-negative weight of each ``reference`` row in the column sums (a row
        of weight w counts as w copies of itself); ``None`` weighs all rows 1.
        Only with ``reference`` (refused without it).
    uncertainty : str, default="renormalized"
        Definition of the uncertainty: ``"renormalized"``, ``"unrenormalized"``
        or ``"max_over_k"``, see :func:`topk_entropy`.

    Returns
    -------
    proba_can : ndarray of shape (n_samples, n_classes)
        A new array: confident rows equal to the input, the others corrected.

    Warns
    -----
    UserWarning
        When there are low-confidence rows but no confident reference row. The
        formula then returns the prior (restricted to the classes that a row
        gives non-zero probability) for every low-confidence row; lower ``tau``
        or pass a ``reference`` to avoid it.

    Notes
    -----
    A class whose column in :math:`L^\alpha` sums to zero keeps probability 0
    (``0 / 0 = 0``). CAN with :math:`d \to \infty` on the whole batch is
    Sinkhorn matrix scaling; ReMixMatch's distribution alignment is the case
    :math:`d = 1, \alpha = 1`.

    All low-confidence rows are computed together: ``d = 1`` in closed form
    (in logs when a power such as :math:`(10^{-12})^{30}` would come near
    underflow), ``d > 1`` by two matrix products per
    iteration (see the module's notes). That form is exact while a row's
    iteration scales spread over less than :math:`e^{600}`; rows beyond, which
    large :math:`\alpha^d` produces (:math:`5^5` on CIFAR-100 outputs), are
    computed one at a time in logs, at a cost of order
    ``n_reference * n_classes * d`` per row (tens of milliseconds with 7,000
    reference rows of 100 classes).

    References
    ----------
    .. [1] Jia, Liu, Ren, Wang, Ma, Bao, Wang and Lin, "When in Doubt: Improving
       Classification Performance with Alternating Normalization", Findings of
       EMNLP 2021. arXiv:2109.13449.
    .. [2] Su Jianlin, "CAN: a simple post-processing trick that uses the prior
       distribution to improve classification" (in Chinese), kexue.fm, 2021.

    Examples
    --------
    The paper's teaser: one confident row [0, 1] pulls an undecided row towards
    the other class.

    >>> import numpy as np
    >>> from skprior import alternating_normalization
    >>> proba = np.array([[0.0, 1.0], [0.5, 0.5]])
    >>> alternating_normalization(proba, [0.5, 0.5], k=2)
    array([[0.  , 1.  ],
           [0.75, 0.25]])
    """
    proba, row_max, row_sums = check_proba_with_row_max(proba)
    n_classes = proba.shape[1]
    prior = check_prior(prior, n_classes, name="prior", positive=True)
    k = _check_uncertainty_args(k, n_classes, uncertainty)
    tau = check_real(tau, "tau", low=0, high=1)
    alpha = check_real(alpha, "alpha", low=0, closed="neither")
    n_iter = check_int(n_iter, "n_iter", low=1)
    if reference is not None:
        reference = check_proba(reference, name="reference")
        if reference.shape[1] != n_classes:
            raise ValueError(
                f"reference has {reference.shape[1]} columns but proba has "
                f"{n_classes}; both must list the same classes."
            )
        reference_weight = _check_weight(reference_weight, reference.shape[0])
    elif reference_weight is not None:
        raise ValueError(
            "reference_weight weighs the rows of reference, but no reference was "
            "given (the batch is its own reference, each row counted once). Pass "
            "reference= as well, or drop reference_weight."
        )

    low = _low_confidence(proba, k, tau, uncertainty, row_max, row_sums)
    transductive = reference is None
    if transductive:
        reference, weight = proba, np.ones(proba.shape[0])
        weight[low] = 0.0
    else:
        weight = reference_weight.copy()
        weight[_low_confidence(reference, k, tau, uncertainty)] = 0.0
    result = proba.copy()
    if low.size == 0:
        return result
    selected = weight > 0
    if not selected.any():
        warnings.warn(
            f"CAN found {low.size} low-confidence rows but no confident "
            f"reference row (uncertainty < tau={tau}); every low-confidence row is "
            f"replaced by the prior. Lower tau, or use a reference set (the "
            f"`reference` argument, or reference='fit' in CANClassifier).",
            UserWarning,
            stacklevel=2,
        )
    rows = proba[low]
    lost = False
    if n_iter == 1 or not selected.any():
        # (with no reference row every iteration returns the prior on the
        # row's support, so one step is the whole answer)
        if alpha != 1 and not _powers_stay_normal((reference, rows), alpha):
            log_column_sums = _log_column_sums_of_powers(reference, weight, alpha)
            corrected = _can_one_step_log(rows, log_column_sums, prior, alpha)
        else:
            if transductive and alpha == 1:
                # With its low rows zeroed, the output's copy of the batch holds
                # exactly the confident rows: sum it, with no weights to apply.
                result[low] = 0
                column_sums = _column_sums(result)
            else:
                column_sums = _column_sums_of_powers(reference, weight, alpha)
            corrected = _can_one_step(rows, column_sums, prior, alpha)
    else:
        corrected, lost = _can_iterated(
            rows, reference[selected], weight[selected], prior, alpha, n_iter
        )
    corrected_sums = np.einsum("ij->i", corrected)
    lost = ~np.isfinite(corrected_sums) | (np.abs(corrected_sums - 1) > 1e-6) | lost
    if lost.any() and selected.any():
        corrected[lost] = _can_log_domain(
            rows[lost], reference[selected], weight[selected], prior, alpha, n_iter
        )
    result[low] = corrected
    return result


class CANClassifier(BasePriorClassifier):
    """Classification with Alternating Normalization around any classifier.

    Learns the training class prior in ``fit`` and corrects the low-confidence
    rows of ``predict_proba`` with :func:`alternating_normalization`. The inner
    model is fitted in ``fit`` if it is not fitted yet; a fitted model is used as
    it is and never refitted (also under ``clone``, ``Pipeline`` and
    ``GridSearchCV``), so that ``k``, ``tau``, ``alpha`` and ``n_iter`` can be
    tuned on held-out data at the cost of predictions only.

    Parameters
    ----------
    estimator : classifier, default=None
        Any classifier with ``predict_proba``, fitted or not.
        ``None`` means ``LogisticRegression()``.
    k : int, default=3
        Number of top classes in the uncertainty, ``2 <= k <= n_classes``.
    tau : float, default=0.9
        Rows with uncertainty ``>= tau`` (in [0, 1], within 1e-12 of
        rounding) are corrected.
    alpha : float, default=1.0
        Power before each column normalisation, ``alpha > 0``.
    n_iter : int, default=1
        Number of alternating normalisation steps ``d >= 1``.
    reference : {"batch", "fit"}, default="batch"
        Where the confident rows come from. ``"batch"``: the batch given to
        ``predict_proba`` (transductive, as in the paper's ImageNet runs: a
        row's output depends on the other rows of the batch). ``"fit"``: the
        confident predictions on the data seen in ``fit`` (inductive, as in the
        paper's DialogRE runs; a single sample can be predicted). With ``"fit"``
        the data given to ``fit`` should be held out from the model's training.
    uncertainty : {"renormalized", "unrenormalized", "max_over_k"}, \
            default="renormalized"
        Definition of the uncertainty, see :func:`topk_entropy`.
    train_prior : array-like of shape (n_classes,), dict or Series, default=None
        The training prior, in the order of ``classes_`` (or keyed by class
        label). ``None`` counts the (weighted) label frequencies of
        ``y`` in ``fit``; give it when ``fit`` sees held-out data whose label
        frequencies differ from the training data's.

    Attributes
    ----------
    estimator_ : classifier
        The fitted inner model (the given one itself when it was fitted).
    train_prior_ : ndarray of shape (n_classes,)
        The training prior used as ``q``.
    reference_proba_ : ndarray of shape (n_fit_samples, n_classes) or None
        The inner model's probabilities on the ``fit`` data with
        ``reference="fit"`` (``None`` otherwise).
    reference_weight_ : ndarray of shape (n_fit_samples,) or None
        The ``sample_weight`` given to ``fit``, weighing the reference rows.
    classes_ : ndarray of shape (n_classes,)
        Class labels, from the inner model.
    n_features_in_ : int
        Number of features, when the inner model has it.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Feature names, when the inner model has them.

    See Also
    --------
    alternating_normalization : The array function behind ``predict_proba``.

    Notes
    -----
    With ``reference="batch"`` the method is transductive. scikit-learn has no
    tag for that; the estimator declares ``non_deterministic=True`` in its tags,
    which is what makes scikit-learn's common checks skip the subset-invariance
    test that such a method fails by design.

    References
    ----------
    .. [1] Jia, Liu, Ren, Wang, Ma, Bao, Wang and Lin, "When in Doubt: Improving
       Classification Performance with Alternating Normalization", Findings of
       EMNLP 2021. arXiv:2109.13449.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import train_test_split
    >>> from skprior import CANClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    >>> model = LogisticRegression(max_iter=2000).fit(X_train, y_train)
    >>> can = CANClassifier(model).fit(X_train, y_train)  # model is not refitted
    >>> can.predict_proba(X_test).shape
    (450, 10)
    """

    _parameter_constraints: dict = {
        **BasePriorClassifier._parameter_constraints,
        "k": [Interval(Integral, 2, None, closed="left")],
        "tau": [Interval(Real, 0, 1, closed="both")],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "reference": [StrOptions({"batch", "fit"})],
        "uncertainty": [StrOptions(set(UNCERTAINTY_KINDS))],
    }

    def __init__(
        self,
        estimator=None,
        *,
        k=3,
        tau=0.9,
        alpha=1.0,
        n_iter=1,
        reference="batch",
        uncertainty="renormalized",
        train_prior=None,
    ):
        self.estimator = estimator
        self.k = k
        self.tau = tau
        self.alpha = alpha
        self.n_iter = n_iter
        self.reference = reference
        self.uncertainty = uncertainty
        self.train_prior = train_prior

    def _is_transductive(self):
        return self.reference == "batch"

    def _check_n_classes(self, n_classes):
        _check_uncertainty_args(self.k, n_classes, self.uncertainty)

    def _fit_post_hoc(self, X, y_index, sample_weight):
        self._check_n_classes(len(self.classes_))
        if np.any(self.train_prior_ == 0):
            missing = self.classes_[self.train_prior_ == 0].tolist()
            raise ValueError(
                f"The classes {missing} have no samples in y (weight 0), so their "
                f"training prior is 0 and CAN would divide by it. Pass "
                f"train_prior= (the model's training class frequencies)."
            )
        if self.reference == "fit":
            self.reference_proba_ = self._inner_proba(X)
            self.reference_weight_ = sample_weight
        else:
            self.reference_proba_ = self.reference_weight_ = None

    def _adjust_proba(self, proba):
        if self.reference == "fit" and self.reference_proba_ is None:
            raise ValueError(
                "reference='fit' was set after fit; call fit again so that the "
                "reference predictions are computed."
            )
        reference = self.reference_proba_ if self.reference == "fit" else None
        return alternating_normalization(
            proba,
            self.train_prior_,
            k=self.k,
            tau=self.tau,
            alpha=self.alpha,
            n_iter=self.n_iter,
            reference=reference,
            reference_weight=self.reference_weight_ if reference is not None else None,
            uncertainty=self.uncertainty,
        )
