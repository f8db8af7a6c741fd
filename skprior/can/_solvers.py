"""The numerics of CAN, written once for every array namespace.

What :func:`skprior.alternating_normalization` computes, for all low-confidence
rows at once, without the per-row loop of the paper (Jia et al., 2021). Each
function takes the namespace ``xp`` and ``is_numpy``
(:func:`skprior._utils._array_api.get_namespace`): NumPy takes a few faster
forms of its own (a partition on an integer view, a screen by the row maximum,
sums 16 rows at a time, updates in place, row blocks of ``BLOCK_ELEMENTS``);
the others compute on their device, in blocks of ``XP_BLOCK_ELEMENTS``. A Dask
array is a map of the NumPy form over its blocks (:func:`can_dask`).

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
from scipy.special import entr as scipy_entr

from skprior._utils._array_api import (
    blocks,
    device_of,
    entr,
    logsumexp,
    numpy_namespace,
    top_k,
    work_dtype,
)
from skprior._utils._kernels import column_sums, integer_view, row_blocks, row_maxima
from skprior._utils._kernels import row_sums as numpy_row_sums
from skprior.can._logs import log_domain

# The factored form of CAN with d > 1 is exact while the row and column scales
# of each low-confidence row's iteration spread over less than exp(600)
# (double precision spans exp(-708) to exp(709)); see _iterate_block.
_SAFE_LOG_RANGE = 600.0

# A row is low-confidence when its uncertainty is >= tau less the rounding of
# tau_threshold: an exactly uniform top k evaluates to 1 - 2e-16, and must
# count at tau = 1.
TAU_ROUNDING = 1e-12


def tau_threshold(tau, finfo):
    """The uncertainty from which a row is low-confidence: ``tau`` less rounding.

    1e-12 for float64 rows; the input's machine epsilon for float32 (1.2e-7):
    a ``tau`` read off :func:`topk_entropy` of float32 rows is that value
    rounded to float32, up to 6e-8 above the float64 entropy the screen
    computes (``finfo``: of the rows' dtype, NumPy's or the namespace's).
    """
    eps = min(float(finfo.eps), float(np.finfo(np.float32).eps))  # (float16 too)
    return tau - max(TAU_ROUNDING, eps)


def _blocks(xp, is_numpy, n_rows, n_columns):
    """Row slices: NumPy's blocks are ``BLOCK_ELEMENTS``, read at each call."""
    return row_blocks(n_rows, n_columns) if is_numpy else blocks(xp, n_rows, n_columns)


def _row_sums(xp, is_numpy, x):
    return numpy_row_sums(x) if is_numpy else xp.sum(x, axis=1)


def _top_k(xp, is_numpy, rows, k, overwrite):
    """The ``k`` largest entries of each row, in no particular order.

    NumPy partitions the rows seen as integers (validated probabilities are
    finite and non-negative: their bit patterns order as integers do, and an
    integer partition skips the NaN handling), in place when ``overwrite``;
    elsewhere :func:`skprior._utils._array_api.top_k` (``torch.topk``, a sort).
    """
    if not is_numpy:
        return top_k(xp, rows, k)
    as_int, cut = integer_view(rows if overwrite else rows.copy()), rows.shape[1] - k
    as_int.partition(cut, axis=1)
    return as_int[:, cut:].view(rows.dtype)


def topk_uncertainty(xp, is_numpy, proba, k, kind, overwrite=False):
    """Uncertainty of validated rows (no checks), in the working dtype.

    ``overwrite=True`` lets NumPy's partial sort reorder ``proba`` in place
    (for a copy that the caller no longer needs). Row block by row block, so
    that the partitioned copy and the float64 top k stay the size of a block.
    """
    dtype = work_dtype(xp, device_of(proba))
    n_classes = proba.shape[1]
    ent = scipy_entr if is_numpy else functools.partial(entr, xp)

    def one_block(rows):
        if kind == "max_over_k":
            ordered = -xp.sort(-xp.astype(rows, dtype), axis=1)
            mass = xp.cumulative_sum(ordered, axis=1)[:, 1:]
            plogp = -xp.cumulative_sum(ent(ordered), axis=1)[:, 1:]
            # Entropy of the top-j renormalised: log S_j - (sum p log p) / S_j.
            j = xp.arange(2, n_classes + 1, dtype=dtype, device=device_of(rows))
            entropy = xp.max((xp.log(mass) - plogp / mass) / xp.log(j), axis=1)
        else:
            top = xp.astype(_top_k(xp, is_numpy, rows, k, overwrite), dtype, copy=False)
            if kind == "renormalized":
                top = top / xp.sum(top, axis=1, keepdims=True)
            log_n = np.log(k if kind == "renormalized" else n_classes)
            entropy = xp.sum(ent(top), axis=1) / float(log_n)
        # (a uniform row rounds to 1 +- a few ulps: kept in [0, 1] as documented)
        return xp.where(entropy > 1.0, 1.0, entropy)

    blocks_ = _blocks(xp, is_numpy, *proba.shape)
    return xp.concat([one_block(proba[block, :]) for block in blocks_])


def _entropy_bound(top_share, k):
    """Largest normalised entropy of k values whose largest share is ``top_share``.

    With the largest share r >= 1/k fixed, the entropy is largest when the other
    k - 1 shares are equal, (1 - r) / (k - 1) each, and that bound decreases
    as r grows.
    """
    r = np.clip(top_share, 1.0 / k, 1.0)
    return (scipy_entr(r) + (k - 1) * scipy_entr((1 - r) / (k - 1))) / np.log(k)


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


def screen_share(k, tau, shape, dtype):
    """The bound r* of :func:`_largest_uncertain_share`, with a slack.

    For the threshold of ``tau`` (:func:`tau_threshold`), compared in float64
    with row sums that carry the rounding of float32 input.
    """
    slack = 1.0 + 2 * shape[1] * np.finfo(dtype).eps
    return _largest_uncertain_share(k, tau_threshold(tau, np.finfo(dtype))) * slack


def low_confidence(xp, is_numpy, proba, k, tau, kind, row_max=None, row_sums=None):
    """Mask of the rows whose uncertainty is at least ``tau``.

    ``row_max`` and ``row_sums`` of validated NumPy ``proba`` may be passed
    when they are at hand (``_validation.check_proba_with_row_max``).
    """
    threshold = tau_threshold(tau, xp.finfo(proba.dtype))
    if kind != "renormalized" or not is_numpy:
        return topk_uncertainty(xp, is_numpy, proba, k, kind) >= threshold
    # NumPy screens with the row maximum p1 before the (comparatively slow)
    # partial sort: the top share is r = p1 / (top-k mass) >= p1 / (row sum),
    # so rows with p1 > r* (row sum) are confident (_largest_uncertain_share).
    share = screen_share(k, tau, proba.shape, proba.dtype)
    if row_max is None:
        # (an integer maximum is ~2x faster than the NaN-aware float one)
        row_max = row_maxima(integer_view(proba)).view(proba.dtype)
    if row_sums is None:
        row_sums = numpy_row_sums(proba)
    candidates = (row_max <= share * row_sums.astype(np.float64)).nonzero()[0]
    low = np.zeros(proba.shape[0], dtype=bool)
    # The candidates' rows are copied (and partially sorted in place) one
    # block at a time: with most rows candidates, a copy of them all would
    # weigh as much as the input.
    for block in row_blocks(candidates.size, proba.shape[1]):
        rows = proba[candidates[block]]
        uncertainty = topk_uncertainty(xp, True, rows, k, kind, overwrite=True)
        low[candidates[block]] = uncertainty >= threshold
    return low


def power_floor(alpha):
    """``e**50`` times the smallest normal float64, to the power ``1 / alpha``."""
    return float(np.exp((np.log(np.finfo(np.float64).tiny) + 50.0) / alpha))


def _powers_stay_normal(xp, is_numpy, parts, alpha):
    """Whether each positive entry of ``parts`` to the ``alpha`` stays normal.

    That is, above ``e**50`` times the smallest normal float. Then no power
    under- or loses precision, and the closed form in powers is exact; always
    so for ``alpha < 1``, which raises small entries. ``parts`` holds
    ``(array, rows)`` pairs, ``rows`` the indices of the rows to check or
    ``None`` for all; the check goes block by block, so that its masks (and
    the selected rows) stay the size of one block, and every block's flag is
    queued before the first is read (one wait on a device).
    """
    if alpha < 1:
        return True
    floor, flags = power_floor(alpha), []
    for array, rows in parts:
        n_rows = array.shape[0] if rows is None else rows.shape[0]
        for block in _blocks(xp, is_numpy, n_rows, array.shape[1]):
            values = (
                array[block, :] if rows is None else xp.take(array, rows[block], axis=0)
            )
            flags.append(xp.any((values > 0) & (values < floor)))
    return not any(bool(flag) for flag in flags)


def _column_sums(xp, is_numpy, reference, weight, alpha, in_logs):
    """``sum_i weight_i * reference_i ** alpha`` (its log when ``in_logs``).

    Accumulated in the working dtype over the rows of positive weight, one
    block of them at a time. In logs, a column whose every power underflows
    (``1e-12 ** 30``) does not pass for an empty one (``-inf``). NumPy with
    ``alpha = 1`` takes a weighted sum over all rows instead, with no copy of
    the selected ones (``einsum`` accumulates float32 in float64 without a
    float64 copy).
    """
    if is_numpy and alpha == 1 and not in_logs:
        return np.einsum(
            "i,ij->j", weight, reference, dtype=np.float64, casting="unsafe"
        )
    dtype = work_dtype(xp, device_of(reference))
    selected = xp.nonzero(weight > 0)[0]
    total = xp.full_like(reference[0, :], -xp.inf if in_logs else 0.0, dtype=dtype)
    for block in _blocks(xp, is_numpy, selected.shape[0], reference.shape[1]):
        rows = selected[block]
        values = xp.astype(xp.take(reference, rows, axis=0), dtype)
        if in_logs:
            terms = alpha * xp.log(values) + xp.log(xp.take(weight, rows))[:, None]
            total = xp.logaddexp(total, logsumexp(xp, terms, axis=0))
        else:
            total += xp.take(weight, rows) @ values**alpha
    return total


def _one_step(xp, is_numpy, column_sums, in_logs, prior, alpha, rows):
    """Closed form of CAN with one iteration, for every row of ``rows`` at once.

    Returns the corrected rows and ``False`` (no row flagged, as
    :func:`_iterate_block` flags them).

    In logs (``column_sums`` then holds logs) ``b**alpha / (C + b**alpha) =
    1 / (1 + exp(log C - alpha log b))`` keeps its precision where both powers
    underflow; the renormalisation is then a softmax of ``log q`` plus its log.
    """
    rows = xp.astype(rows, column_sums.dtype, copy=False)
    if in_logs:
        gap = column_sums - alpha * xp.log(rows)
        # 0 / 0 = 0: a class that neither the row nor the reference predicts
        gap = xp.where(xp.isnan(gap), xp.inf, gap)
        log_out = xp.log(prior) - xp.logaddexp(xp.zeros_like(gap), gap)
        return xp.exp(log_out - logsumexp(xp, log_out, axis=1)[:, None]), False
    rows_alpha = rows if alpha == 1 else rows**alpha
    out = rows_alpha + column_sums
    # A zero denominator has a zero numerator: 0 / 0 = 0 (a class nobody
    # predicts), so such denominators are set to 1 -- on NumPy in the columns
    # that sum to zero only, with no pass over the others.
    if not is_numpy:
        out = xp.where(out == 0, 1.0, out)
    elif (empty := np.flatnonzero(column_sums == 0)).size:
        out[:, empty] = np.where(out[:, empty] == 0, 1.0, out[:, empty])
    out = xp.divide(rows_alpha, out, **({"out": out} if is_numpy else {}))
    out *= prior
    out *= (1.0 / _row_sums(xp, is_numpy, out))[:, None]
    return out, False


def _iterated_solver(xp, is_numpy, reference, weight, selected, prior, alpha, n_iter):
    """CAN with ``n_iter`` iterations: a function of the low-confidence rows.

    The rows of ``reference`` where ``selected`` holds are the confident ones,
    each counted ``weight`` times in the column sums. See the module
    docstring for the factored form ``A_t = diag(u) R_t diag(v)``: ``R_t``
    and the logs of the starting scales are computed here once; the returned
    function advances a block of rows together (``n_rows x n_reference``
    work arrays), returning the corrected rows and a mask of those whose
    scales span too wide a range for the factored form to be exact (see
    :func:`_iterate_block`).
    """
    # The confident rows in the working dtype, scaled in place to R_0 (NumPy:
    # copied by row blocks, with no copy of them in the input's dtype)
    if is_numpy:
        index = np.flatnonzero(selected)
        base = np.empty((index.size, reference.shape[1]), dtype=prior.dtype)
        for rows in row_blocks(*base.shape):
            base[rows] = reference[index[rows]]
    else:
        base = xp.astype(reference[selected], prior.dtype)
    weight = weight[selected]
    row_max = xp.max(base, axis=1)
    base /= row_max[:, None]
    col_max = xp.max(base, axis=0)
    col_max = xp.where(col_max > 0, col_max, 1.0)
    base /= col_max
    logs = [xp.log(x)[None, :] for x in (row_max, col_max, weight, prior)]
    # Equal weights (every confident row of the batch counts once) factor out
    # of u ** alpha * w: the per-row weighting and spread need no pass then.
    equal_weights = bool(xp.all(weight == weight[0]))

    # R_{t+1} = R_t ** alpha for t = 0..n_iter-1, shared by every row (kept:
    # n_iter arrays of the confident rows, see can_rows on memory).
    powers, current = [], base
    for _ in range(n_iter):
        current = current if alpha == 1 else current**alpha
        powers.append(current)

    return functools.partial(
        _iterate_block, xp, is_numpy, powers, *logs, alpha, equal_weights
    )


def _iterate_block(
    xp,
    is_numpy,
    powers,
    log_u,
    log_v,
    log_weight,
    log_prior,
    alpha,
    equal_weights,
    block,
):
    """Run the CAN iterations for one chunk of low-confidence rows (in logs).

    Returns the corrected rows and a mask of the rows for which the factored
    form may have lost digits. Every row and column of ``R_t`` has maximum 1,
    so an entry of ``R_t`` that underflows changes a column sum by at most
    ``tiny * max(u**alpha) / min(u**alpha)`` relative, and a row sum ``R h``
    by at most ``tiny * max(h) / min(h)``. While both ratios stay below
    ``exp(_SAFE_LOG_RANGE)`` that is below double precision; a row whose
    scales spread wider (large ``alpha ** n_iter``) is flagged, for the
    computation in logs. With ``equal_weights`` the weight is a constant
    factor of ``u ** alpha``, and the spread of ``u ** alpha`` is
    ``alpha * (log min(R h) - log max(R h))``: two reductions of the
    ``(rows x n_reference)`` array instead of a product and two reductions.
    """
    log_b = xp.log(xp.astype(block, log_prior.dtype, copy=False))
    # ``u ** alpha`` enters only through the column sums, as the weights of the
    # reference rows; keep it as ``exp(scaled_u - shift)`` with entries <= 1.
    scaled_u = alpha * log_u + log_weight
    shift = xp.max(scaled_u, axis=1, keepdims=True)
    u_alpha = xp.exp(scaled_u - shift)
    spread = xp.min(scaled_u, axis=1) - shift[:, 0]  # (shared by all rows at t = 0)
    lost = xp.broadcast_to(spread < -_SAFE_LOG_RANGE, (block.shape[0],))
    weight = xp.exp(log_weight)
    for t, power in enumerate(powers):
        # A reference row of weight w counts as w copies of itself in the
        # column sums (copies stay identical through the iterations).
        log_col_ref = xp.log(u_alpha @ power) + shift + alpha * log_v
        # (blocks x n_reference: let it go before the next one is made, so
        # that one such array is alive at a time)
        u_alpha = None
        log_b_alpha = alpha * log_b
        log_col = xp.logaddexp(log_col_ref, log_b_alpha)
        empty = log_col == -xp.inf  # 0 / 0 = 0
        log_col = xp.where(empty, 0.0, log_col)
        log_b = xp.where(empty, -xp.inf, log_b_alpha + log_prior - log_col)
        log_b = log_b - logsumexp(xp, log_b, axis=1)[:, None]
        if t + 1 < len(powers):
            log_h = xp.where(empty, -xp.inf, alpha * log_v + log_prior - log_col)
            h_shift = xp.max(log_h, axis=1, keepdims=True)
            h_low = xp.min(xp.where(empty, xp.inf, log_h), axis=1)
            lost = lost | ((h_low - h_shift[:, 0]) < -_SAFE_LOG_RANGE)
            # New row scale u = 1 / (R h): scaled by its smallest row sum, its
            # alpha-th power is (min / row_sum) ** alpha <= 1 -- a division
            # when alpha = 1, where exp and log would cost ten times more.
            # (in place on NumPy: u_alpha is the one blocks x n_reference array)
            u_alpha = xp.exp(log_h - h_shift) @ power.T
            in_place = {"out": u_alpha} if is_numpy else {}
            smallest = xp.min(u_alpha, axis=1, keepdims=True)
            if equal_weights:
                spread = alpha * (
                    xp.log(smallest[:, 0]) - xp.log(xp.max(u_alpha, axis=1))
                )
            u_alpha = xp.divide(smallest, u_alpha, **in_place)
            if alpha != 1:
                u_alpha = xp.pow(u_alpha, alpha, **in_place)
            if equal_weights:
                shift = log_weight[:, :1] - alpha * (xp.log(smallest) + h_shift)
            else:
                u_alpha *= weight
                shift = -alpha * (xp.log(smallest) + h_shift)
                spread = xp.log(xp.min(u_alpha, axis=1)) - xp.log(
                    xp.max(u_alpha, axis=1)
                )
            log_v = log_h
            lost = lost | ~(spread >= -_SAFE_LOG_RANGE)  # (NaN counts as lost)
    return xp.exp(log_b), lost


def _put_rows(xp, target, mask, values):
    """``target`` with its rows where ``mask`` holds replaced by ``values``.

    Without data-dependent writes, which the standard lacks: row i of the
    output is row (number of masked rows before i) of ``values``.
    """
    position = xp.cumulative_sum(xp.astype(mask, xp.int64)) - 1
    values = xp.take(values, xp.clip(position, min=0), axis=0)
    return xp.where(mask[:, None], xp.astype(values, target.dtype), target)


@np.errstate(divide="ignore", invalid="ignore", under="ignore")
def can_rows(
    xp,
    is_numpy,
    proba,
    prior,
    low,
    reference,
    weight,
    alpha,
    n_iter,
    sums=None,
    out=None,
    pristine=True,
):
    """CAN's output for the whole batch, given the mask ``low`` of its rows to correct.

    Returns the output and the numbers of low-confidence and of confident
    rows (``None`` when ``low`` is empty or ``sums`` is given).

    ``reference`` holds the candidate confident rows and ``weight`` their
    weights, 0 for the low-confidence ones (``reference`` is ``proba`` itself
    when the batch is its own reference). Confident rows come back unchanged;
    the rows of ``low`` are corrected by the closed form (``n_iter = 1``, or
    no reference row), the factored iteration (``n_iter > 1``), or in logs
    where those would lose digits. ``sums``, ``(column sums, in_logs)`` of the
    reference for ``n_iter = 1``, may be given instead of ``reference`` (a
    block of a Dask array).

    On NumPy the output is written once, as a copy of the input in its dtype
    (or given: ``out``, a copy of ``proba`` that the compiled screen made,
    or ``proba`` itself), and the low-confidence rows are corrected in place
    one block at a time: the float64 temporaries stay the size of a block
    whatever the batch, so that the peak is the output plus a few blocks --
    for ``n_iter = 1``. The factored iteration (``n_iter > 1``) adds the
    confident rows in float64, ``R_0``, and with ``alpha != 1`` each power
    ``R_t = R_{t-1} ** alpha`` as well (``n_iter`` arrays of the confident
    rows' size): they are shared by every block of low rows, where making
    them again for each block would cost several times the iteration itself.
    Each block's rows are read before they are written, so ``out`` may be
    ``proba``; ``pristine=False`` says that ``out`` does not hold a copy of
    the batch's rows (it is ``proba``, or rows of it are already corrected).
    """
    indices = xp.nonzero(low)[0]
    n_low, n_classes = indices.shape[0], proba.shape[1]
    result = out
    if out is None and (is_numpy or not n_low):
        result = xp.asarray(proba, copy=True)
    if not n_low:
        return result, 0, None
    confident, width, n_reference = None, n_classes, None
    if sums is None:
        selected = weight > 0
        n_reference = int(xp.count_nonzero(selected))
    if sums is None and (n_iter == 1 or not n_reference):
        # (with no reference row every iteration returns the prior on the
        # row's support, so one step is the whole answer)
        checked = [(reference, None)]
        if reference is not proba:
            checked.append((proba, indices))
        in_logs = alpha != 1 and not _powers_stay_normal(xp, is_numpy, checked, alpha)
        if is_numpy and reference is proba and alpha == 1 and pristine:
            # With its low rows zeroed, the output's copy of the batch holds
            # exactly the confident rows: sum it, with no weights to apply.
            result[indices] = 0  # (a few rows: cheaper by index than by mask)
            sums = column_sums(result), False
        else:
            total = _column_sums(xp, is_numpy, reference, weight, alpha, in_logs)
            sums = total, in_logs
    if sums is None:
        given = (reference, weight, selected, prior, alpha, n_iter)
        solve = _iterated_solver(xp, is_numpy, *given)
        width = max(n_reference, n_classes)
    else:
        solve = functools.partial(_one_step, xp, is_numpy, *sums, prior, alpha)
    pieces = []
    for block in _blocks(xp, is_numpy, n_low, width):
        rows = xp.take(proba, indices[block], axis=0)
        corrected, lost = solve(rows)
        row_sums = _row_sums(xp, is_numpy, corrected)
        lost = ~(xp.abs(row_sums - 1) <= 1e-6) | lost  # (NaN and inf too)
        if n_reference and bool(xp.any(lost)):
            if confident is None:  # (the confident rows, copied once)
                confident = reference[selected], weight[selected]
            redone = log_domain(
                xp, is_numpy, rows[lost], *confident, prior, alpha, n_iter
            )
            corrected = _put_rows(xp, corrected, lost, redone)
        if is_numpy:
            result[indices[block]] = corrected
        else:
            pieces.append(corrected)
    if not is_numpy:
        result = _put_rows(xp, proba, low, xp.concat(pieces))
    return result, n_low, n_reference


def can_dask(proba, prior, args, alpha, n_iter, reference, weight):
    """:func:`skprior.alternating_normalization` on a Dask array: a lazy map.

    Each block runs the NumPy form. A reference held in memory makes every
    row independent: a lazy map for any ``d``. With the batch as its own
    reference, ``d = 1`` takes one pass for the column sums of its confident
    rows (a ``K``-vector, in logs for ``alpha != 1``, where a power may
    underflow, with the numbers of rows) and then a lazy map; ``d > 1`` would
    need all the confident rows in memory at each step, and is refused.
    Returns the lazy result and, from the pass, the numbers of low-confidence
    and of confident rows (0 and ``None`` without it).
    """
    np_xp, sums, counts = numpy_namespace(), None, (0, None)
    if reference is None:
        if n_iter > 1:
            raise ValueError(
                f"CAN with n_iter={n_iter} on a Dask array needs a reference held "
                f"in memory: with the batch as its own reference every "
                f"low-confidence row depends on all confident rows at every step. "
                f"Pass reference= a NumPy array (for example held-out outputs, or "
                f"the confident rows of a sample of the batch), or use n_iter=1."
            )
        in_logs = alpha != 1

        @np.errstate(divide="ignore")
        def confident_sums(block):
            low = low_confidence(np_xp, True, block, *args)
            weight = (~low).astype(np.float64)
            sums = _column_sums(np_xp, True, block, weight, alpha, in_logs)
            return np.concatenate([sums, [low.sum(), weight.sum()]])[None, :]

        chunks = ((1,) * proba.numblocks[0], (proba.shape[1] + 2,))
        partial = proba.map_blocks(confident_sums, chunks=chunks, dtype=np.float64)
        partial = partial.compute()  # the one pass
        sums, counts = partial[:, :-2], partial[:, -2:].sum(axis=0)
        sums = logsumexp(np_xp, sums, axis=0) if in_logs else sums.sum(axis=0)
        sums = sums, in_logs

    def correct(block):
        low = low_confidence(np_xp, True, block, *args)
        given = (reference, weight, alpha, n_iter, sums)
        return can_rows(np_xp, True, block, prior, low, *given)[0]

    return proba.map_blocks(correct, dtype=proba.dtype), *counts
