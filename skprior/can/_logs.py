"""CAN in logs: the rows whose fast forms (``_solvers``) would lose digits.

Large powers ``alpha ** n_iter`` (``5 ** 5`` on CIFAR-100 outputs) spread a
row's iteration scales beyond what double precision holds; such rows are
computed here with every scale kept in logs, at a cost of order
``n_reference * n_classes * n_iter`` per row.
"""

import functools

import numpy as np

from skprior._utils._array_api import blocks, logsumexp
from skprior._utils._kernels import row_blocks


def _sparse_logsumexp(terms, axis):
    """``logsumexp(terms, axis)`` over the terms within ``e**50`` of the largest.

    NumPy. Each of the others adds less than ``e**-50 = 2e-22`` of the
    largest, and they are most of the terms when ``terms`` spans a wide range:
    only the kept ones are exponentiated. (An all ``-inf`` line keeps nothing
    and gives ``-inf``.)
    """
    lines = np.moveaxis(terms, axis, -1)
    shape, lines = lines.shape[:-1], lines.reshape(-1, lines.shape[-1])
    peak = lines.max(axis=1)
    i, j = np.nonzero(lines > peak[:, None] - 50.0)  # grouped by line i
    out = np.full(lines.shape[0], -np.inf)
    if i.size:
        starts = np.flatnonzero(np.r_[True, i[1:] != i[:-1]])
        total = np.add.reduceat(np.exp(lines[i, j] - peak[i]), starts)
        out[i[starts]] = np.log(total) + peak[i[starts]]
    return out.reshape(shape)


def log_domain(xp, is_numpy, rows, reference, weight, prior, alpha, n_iter):
    """CAN in logs, for the rows where the fast forms lose digits.

    The same factored iteration as ``_solvers._iterate_block``, with ``u``, ``v``
    and ``R_t = A0**(alpha**t)`` (scaled) all kept in logs, so nothing under-
    or overflows at any ``alpha ** n_iter``; the cost is of order
    ``n_reference * n_classes * n_iter`` per row, in blocks of rows. NumPy
    sums over ``R_t`` only the terms within ``e**50`` of the largest
    (:func:`_sparse_logsumexp`), which are few when ``alpha ** t`` is large,
    as it is where the fast form fails.
    """
    reference = xp.astype(reference, prior.dtype)
    log_row_max = xp.log(xp.max(reference, axis=1))
    log_reference = xp.log(reference) - log_row_max[:, None]
    log_col_max = xp.max(log_reference, axis=0)
    log_col_max = xp.where(xp.isfinite(log_col_max), log_col_max, 0.0)
    log_base = (log_reference - log_col_max)[None, :, :]  # rows, columns: max 0
    n_terms = reference.shape[0] * reference.shape[1]
    log_prior, log_weight = xp.log(prior), xp.log(weight)
    lse = _sparse_logsumexp if is_numpy else functools.partial(logsumexp, xp)
    pieces = []
    n_rows = rows.shape[0]
    walk = row_blocks(n_rows, n_terms) if is_numpy else blocks(xp, n_rows, n_terms)
    for block in walk:
        log_b = xp.log(xp.astype(rows[block, :], prior.dtype))
        log_u, log_v, power = log_row_max[None, :], log_col_max[None, :], 1.0
        for t in range(n_iter):
            power *= alpha
            log_power = power * log_base
            scale = alpha * log_u + log_weight
            log_col = lse(scale[:, :, None] + log_power, axis=1)
            log_col = xp.logaddexp(log_col + alpha * log_v, alpha * log_b)
            empty = log_col == -xp.inf  # 0 / 0 = 0
            log_col = xp.where(empty, 0.0, log_col)
            log_b = xp.where(empty, -xp.inf, alpha * log_b + log_prior - log_col)
            log_b = log_b - logsumexp(xp, log_b, axis=1)[:, None]
            if t + 1 < n_iter:
                log_h = xp.where(empty, -xp.inf, alpha * log_v + log_prior - log_col)
                log_u = -lse(log_power + log_h[:, None, :], axis=2)
                log_v = log_h
        pieces.append(xp.exp(log_b))
    return xp.concat(pieces)
