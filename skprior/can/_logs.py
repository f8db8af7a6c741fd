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

    Each row's own iteration on its stacked matrix ``[reference; row]``, in
    logs and normalised at every step (columns scaled by ``prior / sums``,
    then rows to sum 1): the largest entry of each row stays near 0, so the
    few terms that carry the result keep their digits at any ``alpha **
    n_iter``. (A factored form ``R_t = A0**(alpha**t)`` with separate log
    scales, as ``_solvers`` uses, cancels two numbers of order ``alpha**t``
    and lost every digit beyond ``alpha**t ~ 1e17``: alpha 10 with 18 steps.)
    The cost is of order ``n_reference * n_classes * n_iter`` per row, in
    blocks of rows; NumPy sums only the terms within ``e**50`` of the largest
    (:func:`_sparse_logsumexp`), few where ``alpha ** t`` is large, as it is
    here.
    """
    log_reference = xp.log(xp.astype(reference, prior.dtype))[None, :, :]
    n_terms = reference.shape[0] * reference.shape[1]
    log_prior, log_weight = xp.log(prior), xp.log(weight)[None, :, None]
    lse = _sparse_logsumexp if is_numpy else functools.partial(logsumexp, xp)
    pieces = []
    n_rows = rows.shape[0]
    walk = row_blocks(n_rows, n_terms) if is_numpy else blocks(xp, n_rows, n_terms)
    for block in walk:
        log_b = xp.log(xp.astype(rows[block, :], prior.dtype))
        log_a = log_reference  # (rows, reference rows, classes) after a step
        for t in range(n_iter):
            log_a, log_b = alpha * log_a, alpha * log_b
            log_col = xp.logaddexp(lse(log_weight + log_a, axis=1), log_b)
            empty = log_col == -xp.inf  # 0 / 0 = 0
            log_col = xp.where(empty, 0.0, log_col) - log_prior
            log_b = _normalized(xp, xp.where(empty, -xp.inf, log_b - log_col), lse)
            if t + 1 < n_iter:
                log_a = xp.where(
                    empty[:, None, :], -xp.inf, log_a - log_col[:, None, :]
                )
                log_a = _normalized(xp, log_a, lse)
        pieces.append(xp.exp(log_b))
    return xp.concat(pieces)


def _normalized(xp, logs, lse):
    """``logs`` less the log of its sums over the last axis (all ``-inf``: kept)."""
    totals = lse(logs, axis=logs.ndim - 1)
    return logs - xp.where(totals == -xp.inf, 0.0, totals)[..., None]
