"""The numerics of class-wise calibration: vector scaling and Dirichlet calibration.

Solvers behind :func:`skprior.fit_vector_scaling` and
:func:`skprior.fit_dirichlet_calibration`, on validated float64 arrays (no
input checks here). Every fit minimises a weighted mean log loss of
``softmax(u)`` plus, for Dirichlet calibration, the ODIR penalty, with L-BFGS
and an analytic gradient summed over row blocks (the temporaries stay the size
of one block): with ``r = softmax(u) - onehot(y)`` the gradient of the log loss
with respect to ``u`` is ``r``, and the chain rule does the rest.

* Vector scaling: ``u = w * z + b`` on the logits ``z`` themselves (not on
  ``z - max z``: with one factor per class, a shift of a row does not cancel).
  ``-inf`` logits are probability exactly 0 whatever ``w`` (even ``w_k <= 0``,
  where ``w_k * -inf`` would be ``+inf`` or NaN) and add nothing to the
  gradient.
* Dirichlet calibration: ``u = W @ log p + b``, with ``log p`` the log-softmax
  of the logits floored at ``LOG_PROBA_FLOOR`` (an exact zero would make
  ``W @ log p`` NaN as soon as an off-diagonal entry of ``W`` is 0).

The log losses are convex in the parameters (the log loss of an affine map of
fixed features, plus a quadratic penalty), so L-BFGS finds the minimum from any
start.
"""

import functools
import warnings

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold
from threadpoolctl import ThreadpoolController

from skprior._utils._kernels import row_blocks
from skprior.calibration._temperature_solvers import ShiftedLogits, fit_nll

# The smallest positive normal float32 is 1.2e-38: no float32 softmax carries a
# smaller probability as a normal number, and a probability below it is 0 for
# every practical purpose. Flooring log p there keeps W @ log p finite for exact
# zeros and changes nothing else a float32 model can output (the smallest
# non-zero probability in the stored CIFAR outputs is 2.6e-37, log -84.2).
LOG_PROBA_FLOOR = float(np.log(np.finfo(np.float32).tiny))  # -87.34

# The default ODIR regularisation is chosen by cross-validation over this
# grid, lambda = mu tied (see select_dirichlet_regularization): the off-diagonal
# penalty of one entry is lambda / (K (K - 1)), so a useful lambda grows with
# the number of classes; the grid spans no regularisation worth the name (0.01)
# to W forced diagonal (1e6).
DIRICHLET_GRID = tuple(10.0**p for p in range(-2, 7))
DIRICHLET_CV_FOLDS = 5
DIRICHLET_CV_SEED = 0
# A held-out loss this far (relative) above the best ends the walk at once.
_CLEAR_RISE = 0.005

_LBFGS_OPTIONS = {"maxiter": 5000, "maxfun": 10000, "gtol": 1e-9, "ftol": 1e-10}


@functools.cache
def _blas_controller():
    """The BLAS libraries loaded (found once: a scan takes about 0.1 s)."""
    return ThreadpoolController()


def _minimize(loss, start, args, curvature, what):
    """L-BFGS from ``start``, preconditioned by the diagonal ``curvature``.

    The variables are rescaled by the square root of the loss's Hessian
    diagonal at the start (an exact change of variables, so the minimiser is
    the same): the classes' factors are informed by very different amounts of
    data (a class a confident network almost never gives probability gets
    almost no curvature) and the features by very different magnitudes
    (``log p`` ranges from 0 to about -87). On the CIFAR-100 outputs this cuts
    the iterations of a Dirichlet fit about fifteen-fold.
    """
    scale = np.sqrt(np.maximum(curvature, 1e-12 * curvature.max()))

    def scaled_loss(x):
        value, grad = loss(x / scale, *args)
        return value, grad / scale

    # L-BFGS-B's own linear algebra is on matrices of the size of its memory
    # (10), where BLAS threads cost far more than they give: on a busy 2-core
    # machine an iteration took 16 ms with OpenBLAS's threads and 0.1 ms
    # without (a 600 x 3 cross-validation: 15 s against 1.1 s). One thread
    # for the whole fit; the loss's products are n x K x K at most.
    with _blas_controller().limit(limits=1, user_api="blas"):
        result = minimize(
            scaled_loss,
            start * scale,
            jac=True,
            method="L-BFGS-B",
            options=_LBFGS_OPTIONS,
        )
    if not result.success and result.nit >= _LBFGS_OPTIONS["maxiter"]:
        warnings.warn(
            f"{what} did not converge: {result.message}",
            ConvergenceWarning,
            stacklevel=4,
        )
    return result.x / scale


def _softmax_curvature(u, w):
    """``w_i p_ik (1 - p_ik)``: the diagonal curvature of the log loss in ``u``."""
    u = u - u.max(axis=1, keepdims=True)
    with np.errstate(under="ignore"):
        p = np.exp(u)
    p /= p.sum(axis=1, keepdims=True)
    return w[:, None] * p * (1 - p)


def _softmax_residual(u, labels, w):
    """Weighted log loss of the rows ``u`` and the residual ``softmax - onehot``.

    ``u`` is overwritten by the residual (one block-sized temporary less).
    """
    index = np.arange(u.shape[0])
    top = u.max(axis=1, keepdims=True)
    with np.errstate(under="ignore"):
        u_true = u[index, labels]
        u -= top
        np.exp(u, out=u)
    sums = u.sum(axis=1, keepdims=True)
    loss = np.dot(w, (top + np.log(sums))[:, 0] - u_true)
    u /= sums
    u[index, labels] -= 1.0
    return loss, u


# -- vector scaling ------------------------------------------------------------------


def vector_scaled(rows, weights, bias):
    """``weights * rows + bias`` with ``-inf`` wherever ``rows`` is ``-inf``."""
    with np.errstate(invalid="ignore", over="ignore"):
        u = rows * weights
    u[np.isneginf(rows)] = -np.inf
    if bias is not None:
        u += bias
    return u


def vs_loss(params, z, y, weights, scale, has_bias):
    """Weighted mean log loss of ``softmax(scale * v * z + b)`` and its gradient.

    ``params`` is ``v`` (one factor per class), then ``b`` when ``has_bias``.
    """
    n_classes = z.shape[1]
    factor = scale * params[:n_classes]
    bias = params[n_classes:] if has_bias else None
    loss, grad_w, grad_b = 0.0, np.zeros(n_classes), np.zeros(n_classes)
    for block in row_blocks(*z.shape):
        rows, w = z[block], weights[block]
        block_loss, r = _softmax_residual(
            vector_scaled(rows, factor, bias), y[block], w
        )
        loss += block_loss
        grad_b += w @ r
        # (the residual is 0 at the -inf entries: left there, not 0 * -inf)
        np.multiply(r, rows, out=r, where=np.isfinite(rows))
        grad_w += w @ r
    total = weights.sum()
    grad = grad_w * scale
    if has_bias:
        grad = np.concatenate([grad, grad_b])
    return loss / total, grad / total


def fit_vs(z, y, weights, has_bias):
    """Class factors and mean-zero biases (or none) of vector scaling.

    ``z`` holds the usable rows (true class logit finite, weight > 0) and every
    class has weight in ``y``. The factors are fitted as multiples of
    ``1 / T`` with ``T`` the NLL temperature, so that they are of order 1 at any
    logit scale, and start there (temperature scaling) with zero biases.
    """
    n_classes = z.shape[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        scale = 1.0 / fit_nll(ShiftedLogits(z), y, weights)
    start = np.concatenate([np.ones(n_classes), np.zeros(n_classes * has_bias)])
    curvature_v, curvature_b = np.zeros(n_classes), np.zeros(n_classes)
    for block in row_blocks(*z.shape):
        rows = z[block].astype(np.float64)
        c = _softmax_curvature(vector_scaled(rows, scale, None), weights[block])
        curvature_b += c.sum(axis=0)
        np.multiply(c, rows * rows, out=c, where=np.isfinite(rows))
        curvature_v += c.sum(axis=0) * scale**2
    curvature = np.concatenate([curvature_v, curvature_b[: n_classes * has_bias]])
    what = "Vector scaling" if has_bias else "No-bias vector scaling"
    params = _minimize(
        vs_loss,
        start,
        (z, y, weights, scale, has_bias),
        curvature / weights.sum(),
        what,
    )
    factors = params[:n_classes] * scale
    if not has_bias:
        return factors, np.zeros(n_classes)
    bias = params[n_classes:]
    return factors, bias - bias.mean()


# -- Dirichlet calibration -----------------------------------------------------------


def floored_log_proba(z, dtype=np.float64):
    """``max(log_softmax(z), LOG_PROBA_FLOOR)``, a new array of ``dtype``.

    Computed in float64 block by block, whatever ``dtype`` it is stored in.
    """
    out = np.empty(z.shape, dtype=dtype)
    for block in row_blocks(*z.shape):
        rows = z[block].astype(np.float64)
        with np.errstate(invalid="ignore", under="ignore"):
            rows -= logsumexp(rows, axis=1, keepdims=True)
        out[block] = np.maximum(rows, LOG_PROBA_FLOOR)
    return out


class LogProbaRows:
    """The features ``log p`` of a Dirichlet fit, read as float64 row blocks.

    ``values`` is kept as it is, never written to: float32 logits give float32
    log-probabilities (half the size of a float64 copy; the rounding, 6e-8
    relative, is that of the float32 logits themselves) and each block is
    converted to float64 for the arithmetic. ``index`` (optional) selects rows
    of ``values`` -- the fit rows, a cross-validation fold -- without copying
    them.
    """

    def __init__(self, values, index=None):
        self.values = values
        self.index = index
        n_rows = len(values) if index is None else len(index)
        self.shape = (n_rows, values.shape[1])

    def block(self, rows):
        """Rows ``rows`` (a slice) as float64 (a view when already float64)."""
        picked = self.values[rows if self.index is None else self.index[rows]]
        return picked.astype(np.float64, copy=False)

    def blocks(self):
        """``(slice, rows)`` over the rows, one row block at a time."""
        for rows in row_blocks(*self.shape):
            yield rows, self.block(rows)

    def subset(self, index):
        """The rows ``index`` (integer array) of these rows, without a copy."""
        return LogProbaRows(
            self.values, index if self.index is None else self.index[index]
        )


def dirichlet_scaled(log_proba, matrix, bias):
    """``log_proba @ matrix.T + bias``: the map ``u = W log p + b`` per row."""
    return log_proba @ matrix.T + bias


def odir_penalty(matrix, bias, reg_lambda, reg_mu):
    """ODIR: ``lambda / (K (K-1)) sum_{i != j} W_ij^2 + mu / K sum_j b_j^2``."""
    n_classes = len(bias)
    off = matrix - np.diag(np.diag(matrix))
    return reg_lambda / (n_classes * (n_classes - 1)) * np.sum(
        off * off
    ) + reg_mu / n_classes * np.dot(bias, bias)


def dirichlet_loss(params, log_proba, y, weights, reg_lambda, reg_mu):
    """Weighted mean log loss of ``softmax(W log p + b)`` plus ODIR, and gradient.

    ``params`` is ``W`` flattened row by row, then ``b``.
    """
    n_classes = log_proba.shape[1]
    matrix = params[: n_classes * n_classes].reshape(n_classes, n_classes)
    bias = params[n_classes * n_classes :]
    loss, grad_m, grad_b = 0.0, np.zeros((n_classes, n_classes)), np.zeros(n_classes)
    for block, rows in log_proba.blocks():
        w = weights[block]
        u = dirichlet_scaled(rows, matrix, bias)
        block_loss, r = _softmax_residual(u, y[block], w)
        loss += block_loss
        r *= w[:, None]
        grad_b += r.sum(axis=0)
        grad_m += r.T @ rows
    total = weights.sum()
    loss /= total
    grad_m /= total
    grad_b /= total
    # The ODIR penalty and its gradient.
    off_scale = reg_lambda / (n_classes * (n_classes - 1))
    off = matrix - np.diag(np.diag(matrix))
    loss += odir_penalty(matrix, bias, reg_lambda, reg_mu)
    grad_m += 2 * off_scale * off
    grad_b += 2 * reg_mu / n_classes * bias
    return loss, np.concatenate([grad_m.ravel(), grad_b])


def fit_dirichlet(log_proba, y, weights, reg_lambda, reg_mu, start=None):
    """``W`` and ``b`` minimising the ODIR-regularised log loss.

    Starts from the identity map (``W = I``, ``b = 0``) unless ``start`` (a
    flat parameter vector) is given. Without a bias penalty the bias is
    defined up to a constant; the one returned has mean zero.
    """
    n_classes = log_proba.shape[1]
    if start is None:
        start = np.concatenate([np.eye(n_classes).ravel(), np.zeros(n_classes)])
    matrix = start[: n_classes * n_classes].reshape(n_classes, n_classes)
    bias = start[n_classes * n_classes :]
    curvature_m = np.zeros((n_classes, n_classes))
    curvature_b = np.zeros(n_classes)
    for block, rows in log_proba.blocks():
        c = _softmax_curvature(dirichlet_scaled(rows, matrix, bias), weights[block])
        curvature_b += c.sum(axis=0)
        curvature_m += c.T @ (rows * rows)
    total = weights.sum()
    curvature_m /= total
    curvature_m += (
        2 * reg_lambda / (n_classes * (n_classes - 1)) * (1 - np.eye(n_classes))
    )
    curvature_b = curvature_b / total + 2 * reg_mu / n_classes
    params = _minimize(
        dirichlet_loss,
        start,
        (log_proba, y, weights, reg_lambda, reg_mu),
        np.concatenate([curvature_m.ravel(), curvature_b]),
        "Dirichlet calibration",
    )
    matrix = params[: n_classes * n_classes].reshape(n_classes, n_classes)
    bias = params[n_classes * n_classes :]
    return matrix.copy(), bias - bias.mean()


def mean_log_loss(log_proba, y, weights, matrix, bias):
    """Weighted mean log loss of ``softmax(W log p + b)`` (no penalty)."""
    loss = 0.0
    for block, rows in log_proba.blocks():
        u = dirichlet_scaled(rows, matrix, bias)
        loss += _softmax_residual(u, y[block], weights[block])[0]
    return loss / weights.sum()


def select_dirichlet(log_proba, y, weights, reg_mu=None, grid=DIRICHLET_GRID):
    """The ``lambda`` of ``grid`` with the least cross-validated log loss.

    ``mu`` is ``lambda`` itself (tied) when ``reg_mu`` is None, else ``reg_mu``.

    Stratified ``DIRICHLET_CV_FOLDS``-fold cross-validation (fewer folds when
    the smallest class has fewer samples), shuffled with a fixed seed: the
    choice is deterministic. The grid is walked from the strongest penalty to
    the weakest, each fold's fit starting from its fit at the previous value
    (warm start). The walk stops once the mean held-out loss is above the best
    so far at two values in a row, or above it by more than 0.5% at one:
    weaker penalties only over-fit more, and they are the slowest fits.
    Returns the chosen value and ``{value: mean held-out log loss}`` for the
    values tried.
    """
    counts = np.bincount(y, minlength=log_proba.shape[1])
    n_splits = int(min(DIRICHLET_CV_FOLDS, counts.min()))
    # Each row's fold, rather than the folds' index arrays (five times the
    # rows in int64): a fold's indices are made when it is fitted.
    fold_of_row = np.empty(len(y), dtype=np.int8)
    splitter = StratifiedKFold(n_splits, shuffle=True, random_state=DIRICHLET_CV_SEED)
    for f, (_, test) in enumerate(splitter.split(y, y)):
        fold_of_row[test] = f
    starts = [None] * n_splits
    scores = {}
    total = weights.sum()
    rises = 0
    for value in sorted(grid, reverse=True):
        held_out = 0.0
        for f in range(n_splits):
            train = np.flatnonzero(fold_of_row != f)
            matrix, bias = fit_dirichlet(
                log_proba.subset(train),
                y[train],
                weights[train],
                value,
                value if reg_mu is None else reg_mu,
                starts[f],
            )
            test = np.flatnonzero(fold_of_row == f)
            starts[f] = np.concatenate([matrix.ravel(), bias])
            loss = mean_log_loss(
                log_proba.subset(test), y[test], weights[test], matrix, bias
            )
            held_out += loss * weights[test].sum()
        best = min(scores.values(), default=np.inf)
        scores[value] = held_out / total
        rises = rises + 1 if scores[value] > best else 0
        if rises >= 2 or scores[value] > best * (1 + _CLEAR_RISE):
            break
    return min(scores, key=scores.get), scores
