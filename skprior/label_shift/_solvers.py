"""The numerics of prior estimation: one pass over the data, EM, SQUAREM, PGA.

Solvers behind :func:`skprior.estimate_test_prior`, Bayes' rule to a new prior
and the BBSE and RLLS solves, on validated arrays of any array API namespace
(no input checks here): the solvers iterate on host ``K``-vectors, and only
the pass functions touch the data, on its device (NumPy by its own kernels).

With weights ``w = pi / q`` and ``D_i = sum_k p_ik w_k`` (a matrix-vector
product), the EM map is ``F(pi)_k = pi_k g_k / N`` where
``g_k = sum_i (p_ik / q_k) / D_i`` (a second product) is also the gradient of
the log-likelihood ``l(pi) = sum_i log D_i``. One "pass" is these two products,
done block by block over the rows (see ``_Problem.evaluate``): no
n_samples x n_classes temporary is formed, and a float32 input is read by
float32 products accumulated in float64 (or converted to float64 one
cache-sized block at a time where float32 would not do, see ``_Problem``).
Every solver stops on the same scale-free criterion, the L1 size of one EM
step, ``||F(pi) - pi||_1 <= tol``, plus, for the MLE, the KKT violation
``max(g_k - 1, 0)`` of classes below ``tol`` (at or near 0, where an EM step
is small whatever the gradient).
"""

import numpy as np

from skprior._utils._array_api import (
    block_totals,
    coarse_chunks,
    device_of,
    from_host,
    get_namespace,
    is_dask,
    map_blocks,
    result_array,
    to_host,
    weighted_counts,
    work_dtype,
)
from skprior._utils._kernels import column_sums, row_blocks, single_blas_thread

# Rows per block of a pass: 1 MB in the dtype it is worked in (see
# ``pass_blocks``), which stays in cache for the second product (8 MB blocks:
# a pass twice as slow on 400,000 x 100) and is large enough that the calls
# per block cost little (a float32 EM pass on 200,000 x 100: 1.6, 1.4, 1.3
# proba.sum() in blocks of 2**16, 2**17, 2**18 float32 entries). Of a float64
# block, read in place, larger blocks only save calls (2**17 entries: 5 ms for
# 7 EM steps on 10,000 x 100, 2**20: 2.9 ms).
FLOAT64_PASS_BLOCK_ELEMENTS = 2**20
_TINY = float(np.finfo(np.float64).tiny)


def pass_blocks(shape, dtype, work=np.float64):
    """The row blocks of one pass over an array of ``shape`` and ``dtype``.

    A float64 array is read in place; another one is worked on in ``work``,
    1 MB of it per block (a float32 block converted to float64 is 2**17
    entries, which keeps the peak of Bayes' rule near its output).
    """
    # (by name: an array-API dtype does not compare with NumPy's)
    wide = str(dtype).endswith("float64")
    elements = FLOAT64_PASS_BLOCK_ELEMENTS if wide else 2**20 // np.dtype(work).itemsize
    return row_blocks(*shape, elements=elements)


def reweight(proba, train_prior, test_prior, dtype=np.float64):
    """Rows of ``proba * test_prior / train_prior`` renormalised.

    A row that is 0 everywhere (all its mass on classes the test prior rules
    out) gets ``test_prior``, the posterior of a sample that carries no usable
    evidence. Computed in float64 (the working dtype off NumPy) block by
    block; a NumPy result is ``dtype``, another library's that of ``proba``
    (a lazy map for Dask).
    """
    xp, is_numpy = get_namespace(proba)
    if is_numpy:
        return _reweight_numpy(proba, test_prior / train_prior, test_prior, dtype)
    device = device_of(proba)
    work = work_dtype(xp, device)
    weights = from_host(xp, test_prior / train_prior, device, work)
    fallback = from_host(xp, test_prior, device, work)

    def one_block(block):
        out = xp.astype(proba[block, :], work) * weights
        total = xp.sum(out, axis=1)
        empty = ~(total > 0)
        out = out * (1.0 / xp.where(empty, 1.0, total))[:, None]
        out = xp.where(empty[:, None], fallback[None, :], out)
        return xp.astype(out, proba.dtype, copy=False)

    return map_blocks(xp, *proba.shape, one_block)


def _reweight_numpy(proba, weights, test_prior, dtype):
    """:func:`reweight` on NumPy: over row blocks written into the output.

    The peak is the output and one block, whatever the batch (a float32 input
    with a float32 output: 1x the input). (In place after the product, and
    without a float64 copy of a float32 input: 8x faster than the plain
    expression on 5,000 x 100 float32.)
    """
    out = np.empty(proba.shape, dtype=dtype)
    for block in pass_blocks(proba.shape, proba.dtype):
        # A float64 output is worked on in place; a float32 one through a
        # float64 block, cast on the last write.
        rows = out[block] if out.dtype == np.float64 else None
        rows = np.multiply(proba[block], weights, out=rows, dtype=np.float64)
        total = np.einsum("ij->i", rows)
        empty = ~(total > 0)
        total[empty] = 1.0
        rows *= (1.0 / total)[:, None]
        rows[empty] = test_prior
        if rows.base is not out:
            out[block] = rows
    return out


class _Problem:
    """The data of one estimate and its single pass (see the module docstring).

    The solvers work on the host, on ``K``-vectors; :meth:`evaluate` is the
    one pass over the data, on their device (one Dask compute), whose two
    results cross back as a ``K``-vector and a scalar.
    """

    def __init__(self, proba, train_prior, concentration, tol, solver, verbose=0):
        self.proba = proba
        self.verbose = verbose
        self.xp, self.is_numpy = get_namespace(proba)
        self.train_prior = train_prior
        self.n_samples, self.n_classes = proba.shape
        # The dtype of the passes' products (see ``_pass_numpy``): float32 for
        # a float32 input of several blocks (of 2**18 entries). A float32 pass
        # errs by about 1e-7 in the L1 size of an EM step and in the mean
        # log-likelihood, so a tolerance below 1e-6 and the line search of PGA
        # on that likelihood keep float64 passes, and so does an input of one
        # block, whose estimate then equals that of every namespace to
        # rounding (iteration counts included), at a cost of microseconds. A
        # Dask array of NumPy chunks is read chunk by chunk by the NumPy pass.
        self.numpy_chunks = is_dask(self.xp) and isinstance(proba._meta, np.ndarray)
        if self.numpy_chunks:
            self.proba = proba = coarse_chunks(proba)
        narrow = self.is_numpy or self.numpy_chunks
        narrow = narrow and proba.size > 2**18 and tol >= 1e-6
        self.dtype = proba.dtype if narrow and solver != "pga" else np.float64
        self.blocks = (
            pass_blocks(proba.shape, proba.dtype, self.dtype) if self.is_numpy else None
        )
        self.concentration = concentration  # a - 1 of the Dirichlet(a) prior
        self.tol = tol  # (classes below it get the KKT check of ``converged``)
        self.leaves_zero = solver == "pga"  # (EM keeps a class at 0 where it is)
        self.n_passes = 0

    def evaluate(self, prior):
        """Return ``(g / N, sum_i log D_i)`` at ``prior``; one pass."""
        self.n_passes += 1
        weights = prior / self.train_prior
        if self.is_numpy:
            gradient, log_d = _pass_numpy(self.proba, weights, self.blocks, self.dtype)
        elif self.numpy_chunks:
            gradient, log_d = _pass_dask(self.proba, weights, self.dtype)
        else:
            gradient, log_d = _pass_xp(self.xp, self.proba, weights)
        if self.verbose >= 2:  # (scikit-learn's convention: print, per step)
            value = self.objective(prior, float(log_d))
            print(f"pass {self.n_passes}: objective {value:.10g}", flush=True)
        with np.errstate(over="ignore"):  # (a class at 0 under one-hot rows: inf)
            return gradient / self.train_prior / self.n_samples, float(log_d)

    def em_map(self, prior, gradient):
        """The (MAP) EM update from the gradient at ``prior``: no extra pass."""
        counts = prior * gradient * self.n_samples  # sum_i r_ik
        a1 = self.concentration
        updated = (counts + a1) / (self.n_samples + self.n_classes * a1)
        return updated / updated.sum()

    def converged(self, prior, gradient):
        """Whether ``tol`` bounds the L1 size of one EM step, plus KKT violations.

        The KKT violations are those of classes at or near 0: at the MLE every
        class has ``g_k <= 1`` (``= 1`` where ``pi_k > 0``). A class with
        ``pi_k < tol`` moves by ``pi_k (g_k - 1) < tol`` per EM step however
        much it should grow, so for such classes the excess ``g_k - 1`` is
        counted too, but for classes at 0 under EM (from ``init``), which
        cannot move: a start near a vertex is not "converged".
        """
        step = np.abs(self.em_map(prior, gradient) - prior).sum()
        if self.concentration == 0:
            small = (prior < self.tol) & ((prior > 0) | self.leaves_zero)
            step += np.maximum(gradient[small] - 1.0, 0.0).sum()
        return step <= self.tol

    def objective(self, prior, log_d_sum):
        """Mean log-likelihood at ``prior`` (plus the MAP term) from its pass."""
        value = log_d_sum / self.n_samples
        if self.concentration != 0:
            with np.errstate(divide="ignore"):
                value += self.concentration * np.log(prior).sum() / self.n_samples
        return float(value)


def _solve_em(problem, start, max_iter):
    prior = start
    for n_iter in range(1, max_iter + 1):
        gradient, log_d = problem.evaluate(prior)
        if problem.converged(prior, gradient):
            return prior, n_iter - 1, True, log_d
        prior = problem.em_map(prior, gradient)
    gradient, log_d = problem.evaluate(prior)
    return prior, max_iter, problem.converged(prior, gradient), log_d


def _squarem_point(prior, r, v, p2, step):
    """The extrapolated point ``p0 - 2 s r + s**2 v`` with the two caps below.

    A class that the two EM steps drive down (``r_k < 0``, ``v_k > 0``) is
    kept at or below ``p2_k`` (see ``_solve_squarem``). A class at exactly 0 in
    ``p2`` is set to 0: EM never moves a class off 0, while the extrapolation
    there can round to a tiny negative number (with ``p1_k = 0`` it is
    ``p0_k (1 + s)**2 >= 0`` in exact arithmetic, a cancellation for ``s``
    near -1), which the positivity test, on the classes with ``p2_k > 0``,
    does not see.
    """
    point = prior - 2 * step * r + step**2 * v
    down = (r < 0) & (v > 0)
    point[down] = np.minimum(point[down], p2[down])
    point[p2 == 0] = 0.0
    return point


def _solve_squarem(problem, start, max_iter):
    r"""SQUAREM, scheme S3 of Varadhan and Roland (2008), on the EM map ``F``.

    One cycle from ``p0``, whose pass is already done: the EM steps
    ``p1 = F(p0)`` and ``p2 = F(p1)`` (one pass, at ``p1``), then the
    extrapolation ``p(s) = p0 - 2 s r + s**2 v`` with ``r = p1 - p0``,
    ``v = p2 - 2 p1 + p0`` and ``s = -max(1, ||r|| / ||v||)`` (``s = -1``
    gives ``p2``, plain EM), and one pass at the extrapolated point, which
    opens the next cycle: two passes per cycle. Varadhan and Roland follow
    the extrapolation with a stabilising EM step; it is left out here, which
    makes a cycle two passes rather than three.

    Three safeguards keep the iterate a positive prior and the likelihood
    non-decreasing:

    - a class that the two EM steps drive down (``r_k < 0``, ``v_k > 0``:
      decreasing and convex, the path of a class absent from the batch) is
      kept at or below ``p2_k``. For such a class EM contracts geometrically,
      ``p_k c**n``, and ``p(s)_k = p0_k (1 + s (1 - c))**2`` grows back when
      ``|s| (1 - c) > 2``: a step suited to the slowest class would throw the
      fast-vanishing ones back up and lower the likelihood;
    - a class with ``p2_k = 0`` is set to 0 (EM never moves it back up), and
      while another entry of ``p(s)`` is not positive, ``s`` moves halfway
      back to -1, towards the always-feasible EM step;
    - when the log-likelihood (or log-posterior) at ``p(s)``, free from its
      pass, is below that at ``p0``, the cycle falls back to ``p2``, at the
      cost of a pass; EM never lowers the objective, so neither does the
      cycle.

    The stopping test (``_Problem.converged``) runs at ``p0`` and at ``p1``
    on their gradients, so it costs no pass. The adaptive bound on ``|s|``
    of Du and Varadhan (2020, ``step.max`` grown by ``mstep``) was measured on
    ``benchmarks/bench_prior_speed.py`` and did not help once the first
    safeguard is in place; the step is left unbounded.

    References
    ----------
    .. [1] Varadhan and Roland, "Simple and globally convergent methods for
       accelerating the convergence of any EM algorithm", Scandinavian Journal
       of Statistics 35(2), 2008.
    .. [2] Du and Varadhan, "SQUAREM: an R package for off-the-shelf
       acceleration of EM, MM and other EM-like monotone algorithms", Journal
       of Statistical Software 92(7), 2020.
    """
    prior = start
    gradient, log_d = problem.evaluate(prior)
    for n_iter in range(1, max_iter + 1):
        if problem.converged(prior, gradient):
            return prior, n_iter - 1, True, log_d
        p1 = problem.em_map(prior, gradient)
        gradient1, log_d1 = problem.evaluate(p1)
        if problem.converged(p1, gradient1):
            return p1, n_iter, True, log_d1
        p2 = problem.em_map(p1, gradient1)
        r = p1 - prior
        v = p2 - p1 - r
        v_norm = np.sqrt(v @ v)
        step = -np.sqrt(r @ r) / v_norm if v_norm > 0 else -1.0
        step = min(step, -1.0)
        positive = p2 > 0
        candidate = _squarem_point(prior, r, v, p2, step)
        while step < -1.0 and np.any(candidate[positive] <= 0):
            step = (step - 1.0) / 2
            if step > -1.0 - 1e-10:
                step = -1.0
            candidate = _squarem_point(prior, r, v, p2, step)
        candidate = p2 if step == -1.0 else candidate / candidate.sum()
        objective0 = problem.objective(prior, log_d)
        gradient, log_d = problem.evaluate(candidate)
        if step < -1.0 and problem.objective(candidate, log_d) < objective0:
            candidate = p2
            gradient, log_d = problem.evaluate(candidate)
        prior = candidate
    return prior, max_iter, problem.converged(prior, gradient), log_d


def project_to_simplex(v):
    r"""Euclidean projection of a vector onto the probability simplex.

    :math:`\arg\min_x \|x - v\|_2` subject to :math:`x \ge 0, \sum x = 1`, by
    sorting: with :math:`u` sorted in decreasing order,
    :math:`\rho = \max\{j : u_j - (\sum_{l \le j} u_l - 1)/j > 0\}`,
    :math:`\theta = (\sum_{l \le \rho} u_l - 1)/\rho` and
    :math:`x = \max(v - \theta, 0)` (Duchi et al., 2008; Wang and
    Carreira-Perpinan, 2013), from :math:`v - \max v` (the same projection).

    Parameters
    ----------
    v : array-like of shape (n,)
        Any real vector.

    Returns
    -------
    x : ndarray of shape (n,)
        The nearest point of the simplex.

    Examples
    --------
    >>> from skprior.label_shift._solvers import project_to_simplex
    >>> project_to_simplex([0.9, 0.6, -1.0])
    array([0.65, 0.35, 0.  ])
    """
    v = np.asarray(v, dtype=np.float64)
    v = v - v.max()  # (u_1 - (u_1 - 1) cancelled to 0 from u_1 = 2**53)
    u = -np.sort(-v)
    cumulative = np.cumsum(u) - 1.0
    rho = np.flatnonzero(u - cumulative / np.arange(1, u.size + 1) > 0)[-1]
    theta = cumulative[rho] / (rho + 1)
    return np.maximum(v - theta, 0.0)


def _solve_pga(problem, start, max_iter):
    """Projected gradient ascent on the simplex (Sulc and Matas, 2019).

    The objective is the mean log-likelihood (plus the MAP term). The step size
    is the Barzilai-Borwein one (the curvature along the last step), halved
    until the objective does not decrease: a fixed learning rate would have to
    be tuned to the smallest prior entry, whose curvature grows like 1/pi**2.
    """
    a1 = problem.concentration

    def ascent_direction(prior, gradient):
        if a1 == 0:
            return gradient
        with np.errstate(divide="ignore"):
            return gradient + a1 / prior / problem.n_samples

    prior = start
    gradient, log_d = problem.evaluate(prior)
    value = problem.objective(prior, log_d)
    direction = ascent_direction(prior, gradient)
    learning_rate = 1.0 / max(np.abs(direction).max(), 1e-12) * 1e-2
    for n_iter in range(1, max_iter + 1):
        if problem.converged(prior, gradient):
            return prior, n_iter - 1, True, log_d
        for _ in range(60):
            candidate = project_to_simplex(prior + learning_rate * direction)
            gradient_c, log_d_c = problem.evaluate(candidate)
            value_c = problem.objective(candidate, log_d_c)
            # Ascent up to rounding: near the optimum the objective is flat
            # to machine precision, and a strict test would stall the steps.
            if value_c >= value - 8 * np.finfo(float).eps * max(1.0, abs(value)):
                break
            learning_rate /= 2
        else:  # no ascent at machine precision: the optimum is reached
            return prior, n_iter - 1, problem.converged(prior, gradient), log_d
        direction_c = ascent_direction(candidate, gradient_c)
        s = candidate - prior
        y = direction - direction_c  # minus the change of the ascent direction
        curvature = s @ y
        learning_rate = (s @ s) / curvature if curvature > 0 else 2 * learning_rate
        prior, gradient, log_d, value = candidate, gradient_c, log_d_c, value_c
        direction = direction_c
    return prior, max_iter, problem.converged(prior, gradient), log_d


_SOLVERS = {"em": _solve_em, "squarem": _solve_squarem, "pga": _solve_pga}


def solve_prior(
    proba, train_prior, concentration, start, solver, max_iter, tol, verbose=0
):
    """Maximise the (MAP) likelihood of the prior with ``solver``.

    Returns ``(prior, n_iter, n_passes, converged, objective)``. ``proba`` is
    used as it is (float32 or float64, any namespace); the passes convert it
    block by block.
    BLAS runs on one thread: the passes are memory-bound (see
    ``_kernels.single_blas_thread``). ``verbose`` prints a line at the end
    (1) and one per pass (2), as scikit-learn's estimators print.
    """
    problem = _Problem(proba, train_prior, concentration, tol, solver, verbose)
    with single_blas_thread():
        prior, n_iter, converged, log_d = _SOLVERS[solver](problem, start, max_iter)
    objective = problem.objective(prior, log_d)
    if verbose:
        print(
            f"{solver} prior estimate: {'converged' if converged else 'stopped'} "
            f"after {n_iter} iterations ({problem.n_passes} passes), objective "
            f"{objective:.10g}",
            flush=True,
        )
    return prior, n_iter, problem.n_passes, converged, objective


def _pass_numpy(proba, weights, blocks, dtype):
    """``(sum_i p_i / D_i, sum_i log D_i)`` on NumPy, block by block.

    Both products on one block while it is in cache: one read of the data per
    pass. In ``dtype`` float32 (see ``_Problem``) a float32 input is read as it
    is, by float32 products (no float64 copy: a pass 1.8x faster on 200,000 x
    100), with the weights scaled to a largest entry of 1, so that
    ``D_i <= 1`` cannot overflow; each ``D_i`` and the sums of each group of
    256 rows are exact to float32 rounding (a relative 1e-7), and the groups
    add up in float64 (see :func:`_float32_column_sums`).
    A block with a ``D_i`` near float32's underflow, where it would lose
    digits, is done in float64, as is every block in ``dtype`` float64 (a
    float32 input converted block by block).
    """
    scale = weights.max() if dtype == np.float32 else 1.0  # (float64 as before)
    weights = weights / scale
    narrow_weights = weights.astype(dtype)
    log_d_sum = 0.0
    column_sums_ = np.zeros(proba.shape[1])
    # D_i = 0 only when row i lies on classes with prior 0 (the projected
    # gradient can put some there): l = -inf, and the row points back in.
    with np.errstate(divide="ignore"):
        for block in blocks:
            rows = proba[block].astype(dtype, copy=False)
            d = rows @ narrow_weights
            if dtype == np.float32 and not d.min() > 2.0**-90:  # (see above)
                rows = rows.astype(np.float64)
                d = rows @ weights
            log_d_sum += np.log(d).sum(dtype=np.float64)
            # (a Python float: a float32 D_i stays float32)
            inverse = 1.0 / np.maximum(d, _TINY)
            if rows.dtype == np.float32:
                column_sums_ += _float32_column_sums(inverse, rows)
            else:
                column_sums_ += inverse @ rows
    return column_sums_ / scale, log_d_sum + len(proba) * np.log(scale)


def _float32_column_sums(inverse, rows, group=256):
    """``inverse @ rows`` in float32 products over ``group`` rows, added in float64.

    One float32 product over a whole block accumulates its rounding with the
    rows: over the 26,214 rows of a CIFAR-10 block (2**18 entries) it erred
    by 1.5e-5 (relative), above ``tol``, and EM at the default tolerance never
    stopped on 200,000 rows; over groups of 256 rows, 1.7e-7, for about 30%
    more time in this product.
    """
    n_rows, n_columns = rows.shape
    whole = n_rows - n_rows % group
    groups = np.matmul(
        inverse[:whole].reshape(-1, 1, group),
        rows[:whole].reshape(-1, group, n_columns),
    )
    return groups.sum(axis=(0, 1), dtype=np.float64) + inverse[whole:] @ rows[whole:]


def _pass_dask(proba, weights, dtype):
    """:func:`_pass_numpy` on each chunk of a Dask array; one compute.

    The chunks are whole rows (see :func:`coarse_chunks`).
    One task per chunk reads it once and returns its ``K + 1`` sums, which
    are added in the same compute: no float64 copy of a float32 array and no
    Dask matrix products (an EM pass on 200,000 x 100 float32 in memory: 22
    bare ``x.sum()`` passes that way, 2 to 3 this way).
    """
    import dask

    def one_chunk(chunk):
        if not chunk.shape[0]:  # (boolean filtering makes empty chunks)
            return np.zeros((1, chunk.shape[1] + 1))
        blocks = pass_blocks(chunk.shape, chunk.dtype, dtype)
        sums, log_d = _pass_numpy(chunk, weights, blocks, dtype)
        return np.append(sums, log_d)[None, :]

    parts = proba.map_blocks(
        one_chunk,
        chunks=((1,) * proba.numblocks[0], (proba.shape[1] + 1,)),
        dtype=np.float64,
        meta=np.empty((0, 0)),
    )
    (totals,) = dask.compute(parts.sum(axis=0))
    return totals[:-1], totals[-1]


def _pass_xp(xp, proba, weights):
    """:func:`_pass_numpy` on the device of ``proba`` (one Dask compute)."""
    device = device_of(proba)
    dtype = work_dtype(xp, device)
    weights = from_host(xp, weights, device, dtype)

    def one_block(block):
        rows = xp.astype(proba[block, :], dtype, copy=False)
        d = rows @ weights
        positive = d > 0
        # log 0 = -inf, as on NumPy (without its warning)
        log_d = xp.where(positive, xp.log(xp.where(positive, d, 1.0)), -xp.inf)
        inv = 1.0 / xp.where(d > _TINY, d, _TINY)
        return inv @ rows, xp.sum(log_d)

    column_sums_, log_d_sum = to_host(xp, *block_totals(xp, *proba.shape, one_block))
    return column_sums_.astype(np.float64), log_d_sum


def stranded_rows(proba, support):
    """Indices of the rows with no mass on ``support`` (a mask), on the host."""
    xp, _ = get_namespace(proba)
    mask = from_host(xp, support.astype(np.float64), device_of(proba), proba.dtype)
    (empty,) = to_host(xp, ~(proba @ mask > 0))
    return np.flatnonzero(empty)


def predicted_counts(proba):
    """How often each class is the argmax of a row (a host ``K``-vector)."""
    xp, _ = get_namespace(proba)
    return weighted_counts(xp.argmax(proba, axis=1), None, proba.shape[1])


def joint_confusion(proba, y_index, weights):
    """``P(predicted = i, true = j)``: weighted counts divided by their total."""
    xp, _ = get_namespace(proba)
    n_classes = proba.shape[1]
    cells = xp.argmax(proba, axis=1) * n_classes + y_index
    counts = weighted_counts(cells, weights, n_classes**2)
    return counts.reshape(n_classes, n_classes) / counts.sum()


def responsibility_sums(proba, train_prior, prior):
    r"""``sum_i r_ik`` with the E-step ``r_ik = p_ik (pi_k/q_k) / D_i``.

    ``D_i = sum_k p_ik pi_k / q_k``; computed as two matrix-vector products,
    ``w_k sum_i p_ik / D_i`` with ``w = pi / q``, without an n x K temporary.
    A row with ``D_i = 0`` (all its mass on classes with ``pi_k = 0``) carries
    no usable evidence and counts as ``pi`` itself, as in Bayes' rule.
    ``proba`` is in the working dtype of its namespace; a host vector comes back.
    """
    xp, _ = get_namespace(proba)
    weights = prior / train_prior
    d = proba @ from_host(xp, weights, device_of(proba), proba.dtype)
    empty = ~(d > 0)
    inverse = xp.where(empty, 0.0, 1.0 / xp.where(empty, 1.0, d))
    sums, n_empty = to_host(xp, inverse @ proba, xp.sum(xp.astype(empty, xp.int64)))
    return weights * sums + n_empty * prior


def posterior_sums(proba):
    """Column sums of ``proba`` as a float64 host vector (one Dask compute)."""
    return sums_and_bet(proba, None)[0]


def sums_and_bet(proba, bet):
    """Column sums of ``proba`` and ``sum_i log(proba_i . bet)``, on the host.

    One pass and one transfer (one Dask compute) for both; the log-sum is
    None when ``bet`` (a host K-vector, the stream monitor's bets) is None,
    ``-inf`` when a row has no mass on the classes bet on.
    """
    xp, is_numpy = get_namespace(proba)
    if is_numpy:
        if bet is None:
            return column_sums(proba), None
        with np.errstate(divide="ignore"):
            return column_sums(proba), float(np.log(proba @ bet).sum())
    if is_dask(xp):
        proba = coarse_chunks(proba)
    dtype = work_dtype(xp, device_of(proba))
    work = xp.astype(proba, dtype)
    if bet is None:
        (sums,) = to_host(xp, xp.sum(work, axis=0))
        return np.asarray(sums, dtype=np.float64), None
    factors = from_host(xp, bet, device_of(proba), dtype)
    sums, log_bet = to_host(
        xp, xp.sum(work, axis=0), xp.sum(xp.log(xp.matmul(work, factors)))
    )
    return np.asarray(sums, dtype=np.float64), float(log_bet)


def mean_posterior(proba):
    """Column means of ``proba`` as a float64 host vector."""
    return posterior_sums(proba) / proba.shape[0]


def like(values, array):
    """The host vector ``values`` in the namespace and on the device of ``array``.

    A copy on NumPy (state is never handed out); in the float dtype of
    ``array`` (float64 for integer arrays): see :func:`result_array`.
    """
    return result_array(get_namespace(array)[0], values, array)
