"""CAN on arrays of other libraries (the array API path) and on Dask arrays.

The uncertainty and the corrections of ``_can_solvers.py`` written against
the array API namespace, on the device of the input:

* the top-k uncertainty needs a partition, which the standard lacks:
  :func:`skprior._utils._array_api.top_k` uses ``torch.topk`` for PyTorch and a
  sort elsewhere;
* ``d = 1`` is the closed form, computed for every row and kept for the
  low-confidence ones (no data-dependent shapes);
* ``d > 1`` is the factored iteration of ``_can_solvers._iterate_block`` on
  the low-confidence rows, with the rows whose scales spread too wide redone
  one at a time in logs (a dense log-sum-exp where the NumPy path sums only
  the terms that matter).

A Dask array is different: its blocks are NumPy arrays, so the NumPy code
runs on each block. ``d = 1`` on the batch itself is one pass for the column
sums of the confident rows (a ``K``-vector) and a lazy map; a reference held
in memory makes every row independent, a lazy map for any ``d``. ``d > 1``
with the batch as its own reference would need all its confident rows in
memory at once, and is refused.
"""

import numpy as np

from skprior._utils._array_api import (
    XP_BLOCK_ELEMENTS,
    _is_foreign,
    blocks,
    device_of,
    entr,
    from_host,
    is_dask,
    map_blocks,
    to_host,
    top_k,
    work_dtype,
)
from skprior.can._solvers import TAU_ROUNDING

# As ``_can_solvers._SAFE_LOG_RANGE``.
_SAFE_LOG_RANGE = 600.0


def _safe_log(xp, x):
    """``log x`` with ``log 0 = -inf`` and no warning."""
    positive = x > 0
    return xp.where(positive, xp.log(xp.where(positive, x, 1.0)), -xp.inf)


def _logsumexp(xp, x, axis):
    top = xp.max(x, axis=axis, keepdims=True)
    top = xp.where(xp.isfinite(top), top, 0.0)
    total = _safe_log(xp, xp.sum(xp.exp(x - top), axis=axis, keepdims=True))
    return xp.squeeze(total + top, axis=axis)


def topk_uncertainty_xp(xp, proba, k, kind):
    """Uncertainty of each row, as ``_can_solvers.topk_uncertainty``.

    In the working dtype, block by block on the device.
    """
    device = device_of(proba)
    dtype = work_dtype(xp, device)
    n_classes = proba.shape[1]
    log_j = from_host(xp, np.log(np.arange(2, n_classes + 1)), device, dtype)

    def one_block(block):
        rows = proba[block, :]
        if kind == "max_over_k":
            ordered = xp.sort(xp.astype(rows, dtype), axis=1, descending=True)
            mass = xp.cumulative_sum(ordered, axis=1)[:, 1:]
            plogp = -xp.cumulative_sum(entr(xp, ordered), axis=1)[:, 1:]
            entropy = xp.log(mass) - plogp / mass
            return xp.clip(xp.max(entropy / log_j, axis=1), max=1.0)
        top = xp.astype(top_k(xp, rows, k), dtype)
        if kind == "renormalized":
            top = top / xp.sum(top, axis=1, keepdims=True)
            return xp.clip(xp.sum(entr(xp, top), axis=1) / float(np.log(k)), max=1.0)
        entropy = xp.sum(entr(xp, top), axis=1) / float(np.log(n_classes))
        return xp.clip(entropy, max=1.0)

    return map_blocks(xp, *proba.shape, one_block)


def low_confidence_xp(xp, proba, k, tau, kind):
    """Mask of the rows whose uncertainty is at least ``tau``."""
    return topk_uncertainty_xp(xp, proba, k, kind) >= tau - TAU_ROUNDING


def _powers_stay_normal_xp(xp, arrays, alpha):
    """``_can_solvers._powers_stay_normal`` as one reduction."""
    if alpha < 1:
        return True
    floor = float(np.exp((np.log(np.finfo(np.float64).tiny) + 50.0) / alpha))
    flags = [xp.any((array > 0) & (array < floor)) for array in arrays]
    return not any(bool(flag) for flag in to_host(xp, *flags))


def can_xp(xp, proba, prior, k, tau, alpha, n_iter, reference, weight, kind):
    """:func:`skprior.alternating_normalization` on a validated array API array.

    Not Dask; ``weight`` is the reference's weight vector on the device
    (``None`` for the batch itself).
    """
    device = device_of(proba)
    dtype = work_dtype(xp, device)
    low = low_confidence_xp(xp, proba, k, tau, kind)
    if reference is None:
        reference, weight = proba, xp.where(low, 0.0, xp.ones_like(low, dtype=dtype))
    else:
        ref_low = low_confidence_xp(xp, reference, k, tau, kind)
        weight = xp.where(ref_low, 0.0, weight)
    n_low, n_reference = (
        int(v)
        for v in to_host(
            xp,
            xp.sum(xp.astype(low, xp.int64)),
            xp.sum(xp.astype(weight > 0, xp.int64)),
        )
    )
    if n_low == 0:
        return xp.asarray(proba, copy=True), n_low, n_reference
    prior_d = from_host(xp, prior, device, dtype)
    if n_iter == 1 or n_reference == 0:
        corrected = _one_step_xp(xp, proba, reference, weight, prior_d, alpha, dtype)
        out = xp.where(low[:, None], xp.astype(corrected, proba.dtype), proba)
        return out, n_low, n_reference
    # (a boolean index alone: the standard specifies no other masking)
    rows = proba[low]
    selected = weight > 0
    ref_rows, ref_weight = reference[selected], weight[selected]
    corrected, lost = _can_iterated_xp(
        xp, rows, ref_rows, ref_weight, prior_d, alpha, n_iter, dtype
    )
    sums = xp.sum(corrected, axis=1)
    lost = lost | ~xp.isfinite(sums) | (xp.abs(sums - 1) > 1e-6)
    (n_lost,) = to_host(xp, xp.sum(xp.astype(lost, xp.int64)))
    if n_lost:
        corrected = _redo_in_logs(
            xp, corrected, rows, lost, ref_rows, ref_weight, prior_d, alpha, n_iter
        )
    # Scatter back without data-dependent writes: row i of the output is the
    # corrected row number (low rows before i), where row i is low.
    position = xp.cumulative_sum(xp.astype(low, xp.int64)) - 1
    gathered = xp.take(corrected, xp.clip(position, min=0), axis=0)
    return (
        xp.where(low[:, None], xp.astype(gathered, proba.dtype), proba),
        n_low,
        n_reference,
    )


def _redo_in_logs(xp, corrected, rows, lost, reference, weight, prior, alpha, n_iter):
    """The rows of ``corrected`` flagged ``lost``, redone in logs.

    In blocks of about ``XP_BLOCK_ELEMENTS`` temporaries.
    """
    redone = []
    lost_rows = rows[lost]
    step = max(1, XP_BLOCK_ELEMENTS // (reference.shape[0] * reference.shape[1]))
    for start in range(0, lost_rows.shape[0], step):
        block = lost_rows[start : min(start + step, lost_rows.shape[0]), :]
        redone.append(
            _can_log_domain_xp(xp, block, reference, weight, prior, alpha, n_iter)
        )
    redone = redone[0] if len(redone) == 1 else xp.concat(redone, axis=0)
    position = xp.cumulative_sum(xp.astype(lost, xp.int64)) - 1
    gathered = xp.take(redone, xp.clip(position, min=0), axis=0)
    return xp.where(lost[:, None], gathered, corrected)


def _one_step_xp(xp, proba, reference, weight, prior, alpha, dtype):
    """Closed form of one step for every row.

    As ``_can_one_step`` and, where powers underflow, ``_can_one_step_log``.
    """
    if alpha != 1 and not _powers_stay_normal_xp(xp, (reference, proba), alpha):
        selected = weight > 0
        log_ref = alpha * _safe_log(xp, xp.astype(reference, dtype))
        log_ref = log_ref + _safe_log(xp, weight)[:, None]
        log_ref = xp.where(selected[:, None], log_ref, -xp.inf)
        log_column_sums = _logsumexp(xp, log_ref, axis=0)
        log_b_alpha = alpha * _safe_log(xp, xp.astype(proba, dtype))
        both_empty = (log_column_sums[None, :] == -xp.inf) & (log_b_alpha == -xp.inf)
        gap = xp.where(both_empty, xp.inf, log_column_sums[None, :] - log_b_alpha)
        log_out = xp.log(prior)[None, :] - xp.logaddexp(xp.zeros_like(gap), gap)
        log_out = log_out - _logsumexp(xp, log_out, axis=1)[:, None]
        return xp.exp(log_out)
    ref = xp.astype(reference, dtype)
    powers = ref if alpha == 1 else ref**alpha
    column_sums = weight @ powers
    rows = xp.astype(proba, dtype)
    rows_alpha = rows if alpha == 1 else rows**alpha
    denominator = rows_alpha + column_sums
    # 0 / 0 = 0: a class that neither the row nor the reference predicts
    denominator = xp.where(denominator == 0, 1.0, denominator)
    out = rows_alpha / denominator * prior
    return out / xp.sum(out, axis=1, keepdims=True)


def _can_iterated_xp(xp, rows, reference, weight, prior, alpha, n_iter, dtype):
    """``_can_solvers._can_iterated``: the factored iteration on the device."""
    base = xp.astype(reference, dtype)
    row_max = xp.max(base, axis=1)
    base = base / row_max[:, None]
    col_max = xp.max(base, axis=0)
    col_max = xp.where(col_max > 0, col_max, 1.0)
    base = base / col_max
    log_u0 = xp.log(row_max)[None, :]
    log_v0 = xp.log(col_max)[None, :]
    log_prior = xp.log(prior)[None, :]
    log_weight = xp.log(weight)[None, :]
    powers, current = [], base
    for _ in range(n_iter):
        current = current if alpha == 1 else current**alpha
        powers.append(current)
    outs, losts = [], []
    for block in blocks(xp, rows.shape[0], max(reference.shape[0], rows.shape[1])):
        out, lost = _iterate_block_xp(
            xp,
            xp.astype(rows[block, :], dtype),
            powers,
            log_u0,
            log_v0,
            log_weight,
            log_prior,
            alpha,
        )
        outs.append(out)
        losts.append(lost)
    if len(outs) == 1:
        return outs[0], losts[0]
    return xp.concat(outs, axis=0), xp.concat(losts, axis=0)


def _iterate_block_xp(xp, block, powers, log_u, log_v, log_weight, log_prior, alpha):
    """``_can_solvers._iterate_block`` in the namespace (see its docstring)."""
    log_b = _safe_log(xp, block)
    scaled_u = alpha * log_u + log_weight
    shift = xp.max(scaled_u, axis=1, keepdims=True)
    u_alpha = xp.exp(scaled_u - shift)
    spread = xp.min(scaled_u, axis=1) - shift[:, 0]
    lost = xp.zeros(block.shape[0], dtype=xp.bool, device=device_of(block))
    lost = lost | (spread < -_SAFE_LOG_RANGE)
    weight = xp.exp(log_weight)
    n_iter = len(powers)
    for t, power in enumerate(powers):
        log_col_ref = _safe_log(xp, u_alpha @ power) + shift + alpha * log_v
        log_b_alpha = alpha * log_b
        log_col = xp.logaddexp(log_col_ref, log_b_alpha)
        empty = log_col == -xp.inf  # 0 / 0 = 0
        log_col = xp.where(empty, 0.0, log_col)
        log_b = xp.where(empty, -xp.inf, log_b_alpha + log_prior - log_col)
        log_b = log_b - _logsumexp(xp, log_b, axis=1)[:, None]
        if t + 1 < n_iter:
            log_h = xp.where(empty, -xp.inf, alpha * log_v + log_prior - log_col)
            h_shift = xp.max(log_h, axis=1, keepdims=True)
            h_low = xp.min(xp.where(empty, xp.inf, log_h), axis=1)
            lost = lost | ((h_low - h_shift[:, 0]) < -_SAFE_LOG_RANGE)
            row_sums = xp.exp(log_h - h_shift) @ power.T
            smallest = xp.min(row_sums, axis=1, keepdims=True)
            ratio = smallest / row_sums
            u_alpha = (ratio if alpha == 1 else ratio**alpha) * weight
            shift = -alpha * (_safe_log(xp, smallest) + h_shift)
            log_v = log_h
            log_spread = _safe_log(xp, xp.min(u_alpha, axis=1)) - _safe_log(
                xp, xp.max(u_alpha, axis=1)
            )
            lost = lost | ~(log_spread >= -_SAFE_LOG_RANGE)
    return xp.exp(log_b), lost


def _can_log_domain_xp(xp, rows, reference, weight, prior, alpha, n_iter):
    """``_can_solvers._can_log_domain`` for a block of rows at once.

    With dense sums (rows x reference rows x classes temporaries).
    """
    dtype = prior.dtype
    reference = xp.astype(reference, dtype)
    log_row_max = xp.log(xp.max(reference, axis=1))
    log_reference = _safe_log(xp, reference) - log_row_max[:, None]
    log_col_max = xp.max(log_reference, axis=0)
    log_col_max = xp.where(xp.isfinite(log_col_max), log_col_max, 0.0)
    log_base = (log_reference - log_col_max)[None, :, :]
    log_prior, log_weight = xp.log(prior)[None, :], xp.log(weight)[None, :]
    log_b = _safe_log(xp, xp.astype(rows, dtype))
    log_u, log_v, power = log_row_max[None, :], log_col_max[None, :], 1.0
    for t in range(n_iter):
        power *= alpha
        log_power = power * log_base
        scale = alpha * log_u + log_weight
        log_col = _logsumexp(xp, scale[:, :, None] + log_power, axis=1)
        log_col = xp.logaddexp(log_col + alpha * log_v, alpha * log_b)
        empty = log_col == -xp.inf  # 0 / 0 = 0
        log_col = xp.where(empty, 0.0, log_col)
        log_b = xp.where(empty, -xp.inf, alpha * log_b + log_prior - log_col)
        log_b = log_b - _logsumexp(xp, log_b, axis=1)[:, None]
        if t + 1 < n_iter:
            log_h = xp.where(empty, -xp.inf, alpha * log_v + log_prior - log_col)
            log_u = -_logsumexp(xp, log_power + log_h[:, None, :], axis=2)
            log_v = log_h
    return xp.exp(log_b)


# -- Dask ----------------------------------------------------------------------------


def can_dask(proba, prior, k, tau, alpha, n_iter, reference, weight, kind):
    """:func:`skprior.alternating_normalization` on a Dask array: a lazy map.

    After one pass for the column sums when the batch is its own reference.

    ``reference`` is ``None`` or a validated NumPy array, with its weights.
    Returns the lazy result and, when the batch is its own reference, the
    numbers of low-confidence and of confident rows (from the one pass).
    """
    import dask

    from skprior.can._solvers import (
        _can_one_step,
        _can_one_step_log,
        can_rows,
        low_confidence,
    )

    proba = proba.rechunk({1: -1})
    n_classes = proba.shape[1]
    if reference is not None:
        weight = weight.copy()
        weight[low_confidence(reference, k, tau, kind)] = 0.0

        def correct_with_reference(block):
            low = low_confidence(block, k, tau, kind)
            return can_rows(block, prior, low, reference, weight, alpha, n_iter, False)

        lazy = proba.map_blocks(correct_with_reference, dtype=proba.dtype)
        return lazy, None
    if n_iter > 1:
        raise ValueError(
            f"CAN with n_iter={n_iter} on a Dask array needs a reference held in "
            f"memory: with the batch as its own reference every low-confidence "
            f"row depends on all confident rows at every step. Pass reference= "
            f"a NumPy array (for example held-out outputs, or the confident rows "
            f"of a sample of the batch), or use n_iter=1."
        )
    width = 2 * n_classes + 3
    partial = proba.map_blocks(
        _confident_sums,
        k,
        tau,
        kind,
        alpha,
        chunks=((1,) * proba.numblocks[0], (width,)),
        dtype=np.float64,
    )
    (partial,) = dask.compute(partial)  # the one pass
    column_sums = partial[:, :n_classes].sum(axis=0)
    log_column_sums = _log_sum_exp_rows(partial[:, n_classes : 2 * n_classes])
    n_low, n_reference, subnormal = partial[:, -3:].sum(axis=0)
    in_logs = alpha != 1 and subnormal > 0

    def correct(block):
        low = low_confidence(block, k, tau, kind)
        out = block.copy()
        if low.size:
            if in_logs:
                corrected = _can_one_step_log(block[low], log_column_sums, prior, alpha)
            else:
                corrected = _can_one_step(block[low], column_sums, prior, alpha)
            out[low] = corrected
        return out

    return proba.map_blocks(correct, dtype=proba.dtype), (int(n_low), int(n_reference))


def _confident_sums(block, k, tau, kind, alpha):
    """One block's share of the pass of CAN on Dask.

    The column sums of the powers of its confident rows (plain and in logs),
    its numbers of low-confidence and confident rows, and whether a power of
    one of its entries underflows (``_can_solvers._powers_stay_normal``).
    """
    from skprior.can._solvers import (
        _column_sums_of_powers,
        _log_column_sums_of_powers,
        _powers_stay_normal,
        low_confidence,
    )

    low = low_confidence(block, k, tau, kind)
    weight = np.ones(block.shape[0])
    weight[low] = 0.0
    if alpha != 1 and weight.any():
        log_sums = _log_column_sums_of_powers(block, weight, alpha)
    else:
        log_sums = np.full(block.shape[1], -np.inf)
    sums = _column_sums_of_powers(block, weight, alpha)
    counts = [
        low.size,
        np.sum(weight > 0),
        not _powers_stay_normal(((block, None),), alpha),
    ]
    return np.concatenate([sums, log_sums, counts])[None, :]


def _log_sum_exp_rows(logs):
    """``log sum_b exp(logs[b])`` over the blocks, per column."""
    top = logs.max(axis=0)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(logs - safe).sum(axis=0)) + safe


def alternating_normalization_xp(
    xp, proba, prior, k, tau, alpha, n_iter, reference, reference_weight, uncertainty
):
    """:func:`skprior.alternating_normalization` for array API and Dask arrays.

    Returns the result and ``(n_low, n_reference)`` for the warning of an
    empty reference (``None`` when not known without computing).
    """
    from skprior._utils._validation import (
        check_proba,
    )
    from skprior._utils._validation_labels import (
        check_sample_weight,
    )
    from skprior._utils._validation_xp import (
        check_proba_lazy,
        check_proba_xp,
        check_sample_weight_xp,
    )

    dask = is_dask(xp)
    if dask and reference is not None and type(reference).__module__.startswith("dask"):
        raise ValueError(
            "reference is a Dask array: CAN holds the reference in memory. Pass "
            "it as a NumPy array (reference.compute()), or reference=None."
        )
    proba = check_proba_lazy(xp, proba) if dask else check_proba_xp(xp, proba)
    if reference is not None:
        if dask:
            reference = check_proba(reference, name="reference")
            weight = check_sample_weight(
                reference_weight, reference.shape[0], name="reference_weight"
            )
        else:
            if not _is_foreign(reference):  # (held on the host: to the device)
                reference = xp.asarray(np.asarray(reference), device=device_of(proba))
            reference = check_proba_xp(xp, reference, name="reference")
            weight = check_sample_weight_xp(
                xp, reference_weight, reference, name="reference_weight"
            )
        if reference.shape[1] != proba.shape[1]:
            raise ValueError(
                f"reference has {reference.shape[1]} columns but proba has "
                f"{proba.shape[1]}; both must list the same classes."
            )
    if dask:
        return can_dask(
            proba,
            prior,
            k,
            tau,
            alpha,
            n_iter,
            reference,
            weight if reference is not None else None,
            uncertainty,
        )
    out, n_low, n_reference = can_xp(
        xp,
        proba,
        prior,
        k,
        tau,
        alpha,
        n_iter,
        reference,
        weight if reference is not None else None,
        uncertainty,
    )
    return out, (n_low, n_reference)
