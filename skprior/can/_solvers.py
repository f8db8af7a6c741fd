"""The numerics of CAN: uncertainty, screening and the fast exact forms.

What :func:`skprior.alternating_normalization` computes, for all low-confidence
rows at once, without the per-row loop of the paper (Jia et al., 2021).

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

import numpy as np
from scipy.optimize import brentq
from scipy.special import entr, logsumexp

from skprior._utils._kernels import column_sums, integer_view, row_blocks, row_maxima
from skprior._utils._kernels import row_sums as row_sums_of

# The factored form of CAN with d > 1 is exact while the row and column scales
# of each low-confidence row's iteration spread over less than exp(600)
# (double precision spans exp(-708) to exp(709)); see _iterate_block.
_SAFE_LOG_RANGE = 600.0

# A row is low-confidence when its uncertainty is >= tau - TAU_ROUNDING: an
# exactly uniform top k evaluates to 1 - 2e-16, and must count at tau = 1.
TAU_ROUNDING = 1e-12


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


def topk_uncertainty(proba, k, kind, overwrite=False):
    """Uncertainty of validated float rows (no checks).

    ``overwrite=True`` lets the partial sort reorder ``proba`` in place (for a
    copy that the caller no longer needs). Row block by row block, so that
    the partitioned copy and the float64 top-k stay the size of one block.
    """
    n_classes = proba.shape[1]
    out = np.empty(proba.shape[0])
    if kind == "max_over_k":
        log_j = np.log(np.arange(2, n_classes + 1))
        for block in row_blocks(*proba.shape):
            out[block] = _max_over_k_entropy(proba[block], log_j)
        return out
    for block in row_blocks(*proba.shape):
        # Validated probabilities are finite and non-negative: their bit
        # patterns order as integers do, and an integer partition skips the
        # NaN handling.
        as_int = integer_view(proba[block])
        if overwrite:
            as_int.partition(n_classes - k, axis=1)
        else:
            as_int = np.partition(as_int, n_classes - k, axis=1)
        top = as_int[:, n_classes - k :].view(proba.dtype).astype(np.float64)
        if kind == "renormalized":
            out[block] = _renormalized_topk_entropy(top)
        else:
            out[block] = np.minimum(entr(top).sum(axis=1) / np.log(n_classes), 1.0)
    return out


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


def low_confidence(proba, k, tau, kind, row_max=None, row_sums=None):
    """Sorted indices of the rows whose uncertainty is at least ``tau``.

    ``row_max`` and ``row_sums`` of validated ``proba`` may be passed when
    they are at hand (``skprior._utils._validation.check_proba_with_row_max``).
    """
    if kind != "renormalized":
        return np.flatnonzero(topk_uncertainty(proba, k, kind) >= tau - TAU_ROUNDING)
    # Screen with the row maximum p1 before the (comparatively slow) partial
    # sort: the top share is r = p1 / (top-k mass) >= p1 / (row sum), so rows
    # with p1 > r* (row sum) are confident (see _largest_uncertain_share).
    if row_max is None:
        # (an integer maximum is ~2x faster than the NaN-aware float one)
        row_max = row_maxima(integer_view(proba)).view(proba.dtype)
    if row_sums is None:
        row_sums = row_sums_of(proba)
    # In float64, with a slack for the rounding of row sums of float32 input.
    slack = 1.0 + 2 * proba.shape[1] * np.finfo(proba.dtype).eps
    share = _largest_uncertain_share(k, tau) * slack
    candidates = np.flatnonzero(row_max <= share * row_sums.astype(np.float64))
    if candidates.size == 0:
        return candidates
    # The candidates' rows are copied (and partially sorted in place) one
    # block at a time: with most rows candidates, a copy of them all would
    # weigh as much as the input.
    uncertain = np.empty(candidates.size, dtype=bool)
    for block in row_blocks(candidates.size, proba.shape[1]):
        rows = proba[candidates[block]]
        uncertain[block] = (
            topk_uncertainty(rows, k, kind, overwrite=True) >= tau - TAU_ROUNDING
        )
    return candidates[uncertain]


def _column_sums_of_powers(proba, weight, alpha):
    """``sum_i weight_i * proba_i ** alpha``, accumulated in float64.

    For ``alpha = 1`` a weighted sum over all rows avoids copying the selected
    ones; ``einsum`` accumulates float32 input in float64 without a float64
    copy of it. Otherwise the selected rows are raised to ``alpha`` one
    block at a time (a float64 copy of them all would be twice a float32
    input).
    """
    if alpha == 1:
        return np.einsum("i,ij->j", weight, proba, dtype=np.float64, casting="unsafe")
    selected = np.flatnonzero(weight > 0)
    total = np.zeros(proba.shape[1])
    for block in row_blocks(selected.size, proba.shape[1]):
        rows = selected[block]
        total += weight[rows] @ (proba[rows].astype(np.float64) ** alpha)
    return total


def _log_column_sums_of_powers(proba, weight, alpha):
    """``log sum_i weight_i * proba_i ** alpha``, in logs (``-inf``: empty column).

    For ``alpha != 1`` the powers themselves can underflow (``1e-12 ** 30``),
    and a column whose every power underflows would pass for an empty one.
    One block of rows at a time, the blocks' sums added in logs.
    """
    selected = np.flatnonzero(weight > 0)
    total = np.full(proba.shape[1], -np.inf)
    with np.errstate(divide="ignore"):
        for block in row_blocks(selected.size, proba.shape[1]):
            rows = selected[block]
            scaled = alpha * np.log(proba[rows].astype(np.float64))
            scaled += np.log(weight[rows])[:, None]
            total = np.logaddexp(total, logsumexp(scaled, axis=0))
    return total


def _powers_stay_normal(parts, alpha):
    """Whether each positive entry of ``parts`` to the ``alpha`` stays normal.

    That is, above ``e**50`` times the smallest normal float. Then no power
    under- or loses precision, and the closed form in powers is exact; always
    so for ``alpha < 1``, which raises small entries. ``parts`` holds
    ``(array, rows)`` pairs, ``rows`` the indices of the rows to check or
    ``None`` for all; the check goes block by block, so that its masks (and
    the selected rows) stay the size of one block.
    """
    if alpha < 1:
        return True
    floor = np.exp((np.log(np.finfo(np.float64).tiny) + 50.0) / alpha)
    for array, rows in parts:
        n_rows = array.shape[0] if rows is None else rows.size
        for block in row_blocks(n_rows, array.shape[1]):
            values = array[block] if rows is None else array[rows[block]]
            if np.any((values > 0) & (values < floor)):
                return False
    return True


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
    out *= (1.0 / row_sums_of(out))[:, None]
    return out


def _iterated_solver(reference, weight, prior, alpha, n_iter):
    """CAN with ``n_iter`` iterations: a function of the low-confidence rows.

    ``reference`` holds the confident rows, each counted ``weight`` times in the
    column sums. See the module docstring for the factored form
    ``A_t = diag(u) R_t diag(v)``: ``R_t`` and the logs of the starting scales
    are computed here once, and the returned function advances any number of
    rows together, returning the corrected rows and a mask of those whose
    scales span too wide a range for the factored form to be exact (see
    :func:`_iterate_block`).
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

    def solve(rows):
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

    return solve


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
        # (blocks x n_reference: let it go before the next one is made, so
        # that one such array is alive at a time)
        u_alpha = None
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
            # (in place: u_alpha is the one blocks x n_reference array)
            u_alpha = np.exp(log_h - h_shift) @ power.T
            smallest = u_alpha.min(axis=1, keepdims=True)
            np.divide(smallest, u_alpha, out=u_alpha)
            if alpha != 1:
                np.power(u_alpha, alpha, out=u_alpha)
            u_alpha *= weight
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


def can_rows(proba, prior, low, reference, weight, alpha, n_iter, transductive):
    """CAN's output for the whole batch, given the low-confidence rows ``low``.

    ``reference`` holds the candidate confident rows and ``weight`` their
    weights, 0 for the low-confidence ones (``reference`` is ``proba`` itself
    when ``transductive``). Confident rows come back unchanged; the rows of
    ``low`` are corrected by the closed form (``n_iter = 1``), the factored
    iteration (``n_iter > 1``), or in logs where those would lose digits.

    The output is written once, as a copy of the input in its dtype, and the
    low-confidence rows are corrected in place one block at a time: the
    float64 temporaries stay the size of a block whatever the batch, so that
    the peak is the output plus a few blocks.
    """
    result = proba.copy()
    if low.size == 0:
        return result
    selected = weight > 0
    if n_iter == 1 or not selected.any():
        # (with no reference row every iteration returns the prior on the
        # row's support, so one step is the whole answer)
        checked = [(reference, None)]
        if not transductive:
            checked.append((proba, low))
        if alpha != 1 and not _powers_stay_normal(checked, alpha):
            log_column_sums = _log_column_sums_of_powers(reference, weight, alpha)

            def solve(rows):
                return _can_one_step_log(rows, log_column_sums, prior, alpha), False

        else:
            if transductive and alpha == 1:
                # With its low rows zeroed, the output's copy of the batch holds
                # exactly the confident rows: sum it, with no weights to apply.
                result[low] = 0
                reference_sums = column_sums(result)
            else:
                reference_sums = _column_sums_of_powers(reference, weight, alpha)

            def solve(rows):
                return _can_one_step(rows, reference_sums, prior, alpha), False

    else:
        solve = _iterated_solver(
            reference[selected], weight[selected], prior, alpha, n_iter
        )
    log_domain_reference = None
    for block in row_blocks(low.size, proba.shape[1]):
        indices = low[block]
        rows = proba[indices]
        corrected, lost = solve(rows)
        corrected_sums = row_sums_of(corrected)
        lost = ~np.isfinite(corrected_sums) | (np.abs(corrected_sums - 1) > 1e-6) | lost
        if lost.any() and selected.any():
            if log_domain_reference is None:
                log_domain_reference = reference[selected], weight[selected]
            corrected[lost] = _can_log_domain(
                rows[lost], *log_domain_reference, prior, alpha, n_iter
            )
        result[indices] = corrected
    return result
