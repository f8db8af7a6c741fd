"""The numerics of class-wise calibration: vector scaling and Dirichlet calibration.

Solvers behind :func:`skprior.fit_vector_scaling` and
:func:`skprior.fit_dirichlet_calibration`, on validated rows
(:class:`~skprior.calibration._rows.Rows`, no input checks here) of any array
namespace: each loss and gradient is one pass over the rows on their device,
and L-BFGS runs on the host. Every fit minimises a weighted mean log loss of
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

import contextlib
import contextvars
import time
import warnings

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold

from skprior._utils._kernels import single_blas_thread
from skprior._utils._validation import warn_user
from skprior.calibration._rows import (
    Rows,
    finite_product,
    softmax_curvature,
    softmax_residual,
)
from skprior.calibration._temperature_solvers import fit_nll

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

# ``progress(done, total)``, called after each fold fit of ``select_dirichlet``
# (the command line's progress bar): set around a fit by ``fold_progress``, so
# that the public functions, and their checks, stay as they are.
_FOLD_PROGRESS = contextvars.ContextVar("fold_progress", default=None)


@contextlib.contextmanager
def fold_progress(progress):
    """Call ``progress(done, total)`` after each fold fit, in a ``with`` block."""
    token = _FOLD_PROGRESS.set(progress)
    try:
        yield
    finally:
        _FOLD_PROGRESS.reset(token)


def _minimize(loss, start, args, curvature, what, verbose=0):
    """L-BFGS from ``start``, preconditioned by the diagonal ``curvature``.

    The variables are rescaled by the square root of the loss's Hessian
    diagonal at the start (an exact change of variables, so the minimiser is
    the same): the classes' factors are informed by very different amounts of
    data (a class a confident network almost never gives probability gets
    almost no curvature) and the features by very different magnitudes
    (``log p`` ranges from 0 to about -87). On the CIFAR-100 outputs this cuts
    the iterations of a Dirichlet fit about fifteen-fold. Where that fails
    at its first step (the line search: the curvature at the start can be
    far from the loss's elsewhere, as with logits of 1e4), the fit is run
    again without it, and the lower loss kept.
    """
    scale = np.sqrt(np.maximum(curvature, 1e-12 * curvature.max()))
    # (a variable without curvature at the start, e.g. a factor of rows of
    # zeros, is left unscaled rather than divided by 0)
    scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
    result = _lbfgs(loss, start, args, scale, what, verbose)
    if not result.success and result.nit == 0:  # (it never left the start)
        plain = np.ones_like(scale)
        again = _lbfgs(loss, start, args, plain, what, verbose)
        if again.fun <= result.fun:
            result, scale = again, plain
    if verbose >= 1:  # (a fold fit's verbose is one less, maybe -1)
        print(f"{what}: {result.nit} L-BFGS iterations, loss {result.fun:.10g}")
    # (a line search that fails later is the loss's rounding floor, float32's
    # especially: the fit is done)
    if not result.success and result.nit in (0, _LBFGS_OPTIONS["maxiter"]):
        warn_user(
            f"{what} did not converge after {result.nit} L-BFGS iterations "
            f"({result.message}); the fit may be poor. With logits of very large "
            f"magnitude, divide them by a constant first; or use a method with "
            f"fewer parameters (a temperature).",
            ConvergenceWarning,
        )
    return result.x / scale


def _lbfgs(loss, start, args, scale, what, verbose):
    """One L-BFGS run of ``loss`` over the variables divided by ``scale``."""

    def scaled_loss(x):
        value, grad = loss(x / scale, *args)
        if verbose >= 2:  # (a line per evaluation: a pass over the rows each)
            print(f"{what}: loss {value:.10g}")
        return value, grad / scale

    # L-BFGS-B's own linear algebra is on matrices of the size of its memory
    # (10), where BLAS threads cost far more than they give: on a busy 2-core
    # machine an iteration took 16 ms with OpenBLAS's threads and 0.1 ms
    # without (a 600 x 3 cross-validation: 15 s against 1.1 s). One thread
    # for the whole fit; the loss's products are n x K x K at most.
    with single_blas_thread():
        return minimize(
            scaled_loss,
            start * scale,
            jac=True,
            method="L-BFGS-B",
            options=_LBFGS_OPTIONS,
        )


# -- vector scaling ------------------------------------------------------------------


def vector_scaled(xp, rows, weights, bias):
    """``weights * rows + bias`` with ``-inf`` wherever ``rows`` is ``-inf``."""
    with np.errstate(invalid="ignore", over="ignore"):
        u = xp.where(rows == -xp.inf, -xp.inf, rows * weights)
    if bias is not None:
        u += bias  # (in place: u is new, one block-sized temporary less)
    return u


def vs_loss(params, data, scale, has_bias):
    """Weighted mean log loss of ``softmax(scale * v * z + b)`` and its gradient.

    ``params`` is ``v`` (one factor per class), then ``b`` when ``has_bias``;
    ``data`` holds the logits ``z`` (not shifted).
    """
    n_classes, xp = data.shape[1], data.xp
    factor = data.asarray(scale * params[:n_classes])
    bias = data.asarray(params[n_classes:]) if has_bias else None

    def one_block(rows, z):
        w = data.weights[rows]
        loss, r = softmax_residual(data, rows, vector_scaled(xp, z, factor, bias))
        grad_b = w @ r
        return loss, w @ finite_product(xp, r, z), grad_b

    loss, grad_w, grad_b = data.sums(one_block)
    grad = np.concatenate([grad_w * scale, grad_b[: n_classes * has_bias]])
    return float(loss) / data.total, grad / data.total


def fit_vs(data, has_bias, what, verbose=0):
    """Class factors and mean-zero biases (or none) of vector scaling.

    ``data`` holds the logits (:meth:`Rows.usable`) and every class has
    weight in ``y``; ``what`` names the method in a warning. The factors are
    fitted as multiples of ``1 / T`` with ``T`` the NLL temperature, so that
    they are of order 1 at any logit scale, and start there (temperature
    scaling) with zero biases.
    """
    n_classes, xp = data.shape[1], data.xp
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        shifted = Rows(xp, data.is_numpy, data.values, data.y, data.weights, True)
        scale = 1.0 / fit_nll(shifted.usable())
    start = np.concatenate([np.ones(n_classes), np.zeros(n_classes * has_bias)])

    def one_block(rows, z):
        c = softmax_curvature(data, rows, vector_scaled(xp, z, scale, None))
        return xp.sum(c, axis=0), xp.sum(finite_product(xp, c, z * z), axis=0)

    curvature_b, curvature_v = data.sums(one_block)
    curvature = np.concatenate(
        [curvature_v * scale**2, curvature_b[: n_classes * has_bias]]
    )
    params = _minimize(
        vs_loss, start, (data, scale, has_bias), curvature / data.total, what, verbose
    )
    bias = params[n_classes:] if has_bias else np.zeros(n_classes)
    return params[:n_classes] * scale, bias - bias.mean()


# -- Dirichlet calibration -----------------------------------------------------------


def floored_log_proba(xp, rows):
    """``max(log_softmax(rows), LOG_PROBA_FLOOR)`` of a block (overwritten).

    ``u - log sum exp(u)`` with ``u = rows - max rows``, shifted in place: one
    temporary of the block's size (SciPy's ``logsumexp`` makes several).
    """
    rows -= xp.max(rows, axis=1, keepdims=True)
    with np.errstate(under="ignore"):
        rows -= xp.log(xp.sum(xp.exp(rows), axis=1, keepdims=True))
    return xp.maximum(rows, LOG_PROBA_FLOOR)


def _unpack(data, params):
    """``W`` and ``b`` of a flat parameter vector, on the host and the device."""
    n_classes = data.shape[1]
    matrix = params[: n_classes * n_classes].reshape(n_classes, n_classes)
    bias = params[n_classes * n_classes :]
    return matrix, bias, data.asarray(matrix), data.asarray(bias)


def dirichlet_loss(params, data, reg_lambda, reg_mu):
    """Weighted mean log loss of ``softmax(W log p + b)`` plus ODIR, and gradient.

    ``params`` is ``W`` flattened row by row, then ``b``; ``data`` holds the
    floored ``log p``.
    """
    n_classes = data.shape[1]
    matrix, bias, matrix_on, bias_on = _unpack(data, params)

    def one_block(rows, log_p):
        loss, r = softmax_residual(data, rows, log_p @ matrix_on.T + bias_on)
        r *= data.weights[rows][:, None]
        return loss, r.T @ log_p, data.xp.sum(r, axis=0)

    loss, grad_m, grad_b = data.sums(one_block)
    loss, grad_m, grad_b = loss / data.total, grad_m / data.total, grad_b / data.total
    # The ODIR penalty, lambda / (K (K-1)) sum_{i != j} W_ij^2 + mu / K |b|^2,
    # and its gradient.
    off_scale = reg_lambda / (n_classes * (n_classes - 1))
    off = matrix - np.diag(np.diag(matrix))
    loss += off_scale * np.sum(off * off) + reg_mu / n_classes * np.dot(bias, bias)
    grad_m += 2 * off_scale * off
    grad_b += 2 * reg_mu / n_classes * bias
    return float(loss), np.concatenate([grad_m.ravel(), grad_b])


def fit_dirichlet(data, reg_lambda, reg_mu, start=None, verbose=0):
    """``W`` and ``b`` minimising the ODIR-regularised log loss.

    Starts from temperature scaling (``W = I / T``, ``T`` the NLL temperature
    of ``log p``, ``b = 0``; a special case of the map) unless ``start`` (a
    flat parameter vector) is given: from ``W = I`` the softmax of logits of
    1e4 is one-hot, its curvature (the preconditioner) degenerate, and
    L-BFGS stopped at 5-10 times the minimum, reporting success. Without a
    bias penalty the bias is defined up to a constant; the one returned has
    mean zero. ``verbose`` prints a line at the end (1) and one per
    evaluation of the loss (2).
    """
    n_classes, xp = data.shape[1], data.xp
    if start is None:
        with warnings.catch_warnings():  # (its few-rows warnings: the caller's)
            warnings.simplefilter("ignore", UserWarning)
            shifted = Rows(
                xp, data.is_numpy, data.values, data.y, data.weights, True, data.index
            )
            inverse = 1.0 / fit_nll(shifted.usable())
        start = np.concatenate(
            [inverse * np.eye(n_classes).ravel(), np.zeros(n_classes)]
        )
    _, _, matrix, bias = _unpack(data, start)

    def one_block(rows, log_p):
        c = softmax_curvature(data, rows, log_p @ matrix.T + bias)
        return xp.sum(c, axis=0), c.T @ (log_p * log_p)

    curvature_b, curvature_m = data.sums(one_block)
    curvature_m = curvature_m / data.total + (
        2 * reg_lambda / (n_classes * (n_classes - 1)) * (1 - np.eye(n_classes))
    )
    curvature_b = curvature_b / data.total + 2 * reg_mu / n_classes
    params = _minimize(
        dirichlet_loss,
        start,
        (data, reg_lambda, reg_mu),
        np.concatenate([curvature_m.ravel(), curvature_b]),
        "Dirichlet calibration",
        verbose,
    )
    matrix, bias, _, _ = _unpack(data, params)
    return matrix.copy(), bias - bias.mean()


def select_dirichlet(data, y, reg_mu=None, grid=DIRICHLET_GRID, verbose=0):
    """The ``lambda`` of ``grid`` with the least cross-validated log loss.

    ``mu`` is ``lambda`` itself (tied) when ``reg_mu`` is None, else ``reg_mu``;
    ``y`` are the labels of ``data`` on the host.

    Stratified ``DIRICHLET_CV_FOLDS``-fold cross-validation (fewer folds when
    the smallest class has fewer samples), shuffled with a fixed seed: the
    choice is deterministic. The grid is walked from the strongest penalty to
    the weakest, each fold's fit starting from its fit at the previous value
    (warm start). The walk stops once the mean held-out loss is above the best
    so far at two values in a row, or above it by more than 0.5% at one:
    weaker penalties only over-fit more, and they are the slowest fits.
    Returns the chosen value and ``{value: mean held-out log loss}`` for the
    values tried. ``verbose`` prints a line per value (1), and those of each
    fold's fit (one less). The ``progress`` of :func:`fold_progress` is called
    with the fold fits done and the most there may be.
    """
    counts = np.bincount(y, minlength=data.shape[1])
    n_splits = int(min(DIRICHLET_CV_FOLDS, counts.min()))
    # Each row's fold, rather than the folds' index arrays (five times the
    # rows in int64): a fold's indices are made when it is fitted.
    fold_of_row = np.empty(len(y), dtype=np.int8)
    splitter = StratifiedKFold(n_splits, shuffle=True, random_state=DIRICHLET_CV_SEED)
    for f, (_, test) in enumerate(splitter.split(y, y)):
        fold_of_row[test] = f
    starts = [None] * n_splits
    scores = {}
    rises = 0
    progress = _FOLD_PROGRESS.get()
    for step, value in enumerate(sorted(grid, reverse=True)):
        held_out, began = 0.0, time.perf_counter()
        for f in range(n_splits):
            train = data.subset(np.flatnonzero(fold_of_row != f)).totalled()
            mu = value if reg_mu is None else reg_mu
            matrix, bias = fit_dirichlet(train, value, mu, starts[f], verbose - 1)
            starts[f] = np.concatenate([matrix.ravel(), bias])
            test = data.subset(np.flatnonzero(fold_of_row == f)).totalled()
            # (the held-out log loss: no penalty; its gradient is not used)
            held_out += dirichlet_loss(starts[f], test, 0.0, 0.0)[0] * test.total
            if progress is not None:
                progress(step * n_splits + f + 1, len(grid) * n_splits)
        best = min(scores.values(), default=np.inf)
        scores[value] = held_out / data.total
        if verbose:
            print(
                f"[{step + 1}/{len(grid)}] reg_lambda={value:g}: held-out log loss "
                f"{scores[value]:.6f} ({n_splits} folds, "
                f"{time.perf_counter() - began:.1f}s)",
                flush=True,
            )
        rises = rises + 1 if scores[value] > best else 0
        if rises >= 2 or scores[value] > best * (1 + _CLEAR_RISE):
            break
    return min(scores, key=scores.get), scores
