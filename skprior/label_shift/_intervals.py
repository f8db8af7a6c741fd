r"""Confidence intervals for an estimated test prior (delta method, bootstrap).

The target is the batch's own class proportions :math:`\hat y_k = \frac1n
\sum_i [y_i = k]` (what a monitor asks: "is class 3 at 12 % in this batch?"),
or, with ``target="prior"``, the prior the batch was drawn from.

The estimate solves the score equations of the mixture log-likelihood
:math:`\ell(\pi) = \sum_i \log D_i(\pi)`, :math:`D_i = \sum_k \pi_k a_{ik}`,
:math:`a_{ik} = p_{ik}/q_k` (Saerens et al., 2002), on the simplex. With
:math:`g_i = a_i / D_i(\hat\pi)` the per-row gradient, the Hessian is
:math:`-\sum_i g_i g_i^\top` (``D_i`` is linear in :math:`\pi`): the observed
information :math:`J = \sum_i g_i g_i^\top` comes from one pass at the estimate,
and so does everything below. Write :math:`M = J/n`; on the tangent space
:math:`\{u : \sum_k u_k = 0\}` of the simplex, with an orthonormal basis
:math:`B`, :math:`M_T^{-1} = B (B^\top M B)^{-1} B^\top` (for MAP, :math:`M`
gains the curvature :math:`(a-1)\,\mathrm{diag}(1/\hat\pi^2)/n` of the
Dirichlet term). A first-order expansion of the score equations about the
target gives

.. math:: \hat\pi - \hat y \approx M_T^{-1}\Bigl(\frac1n\sum_i g_i(\hat y)
   - 1 + \frac{a-1}{n\,\hat\pi}\Bigr).

Three readings of the right-hand side:

- ``target="prior"`` (the generating prior :math:`\pi`): the rows are
  i.i.d. from the mixture; the score's variance is the information itself, and
  :math:`\mathrm{Cov}\,\hat\pi = M_T^{-1} (M - \bar g \bar g^\top) M_T^{-1}/n`
  (the Fisher interval, the inverse observed information at the MLE). It carries
  the multinomial noise of the labels, which the batch's own proportions do
  not have: for them it is too wide.
- ``target="batch"`` without a labelled calibration set: conditional on the
  labels, only the within-class spread of :math:`g` is noise. A calibrated
  model gives it from the batch itself, the responsibilities
  :math:`r_{ij} = \hat\pi_j g_{ij}` standing for the labels: the class means of
  :math:`g` are the rows of :math:`M` and the within-class covariance is
  :math:`W = M - M\,\mathrm{diag}(\hat\pi)\,M` (the total minus the
  between-class part), so :math:`\mathrm{Cov} = M_T^{-1} W M_T^{-1}/n`. This
  is the sandwich interval conditional on the labels: it assumes the
  posteriors are calibrated, and the misfit of a real model, a bias that does
  not shrink with ``n``, makes it under-cover as ``n`` grows.
- ``target="batch"`` with ``calibration=(proba_cal, y_cal)``, labelled
  held-out posteriors of the same model (the honest answer when the user has
  them): under label shift the class-conditional distributions
  :math:`p(x|j)` are the calibration set's, so the class means
  :math:`\mu_j` and within-class covariances :math:`W_j` of :math:`g` (at
  :math:`\hat\pi`) on it describe the batch's rows of class ``j``. Given the
  labels, the batch's mean gradient is then, exactly and for any model,
  calibrated or not, linear in the proportions:

  .. math:: \bar g = \frac1n\sum_i g_i = \sum_j \hat y_j \mu_j + \varepsilon,
     \qquad \mathrm{Cov}\,\varepsilon \approx \sum_j \hat\pi_j
     \Bigl(\frac1n + \frac{\hat\pi_j}{n_j}\Bigr) W_j

  (the batch's noise, and that of the class means measured on :math:`n_j`
  calibration rows). The interval's centre solves
  :math:`\sum_j c_j \mu_j = \bar g` on the simplex (``K - 1`` free
  coordinates, as :math:`\hat\pi^\top \bar g = 1 = \hat\pi^\top \mu^\top
  \hat\pi` makes one equation redundant), and its covariance is that of
  :math:`\varepsilon` carried through the same solve. For a calibrated model
  :math:`\mu \approx M` and the centre is :math:`\hat\pi` (and for MAP, the
  estimate without the Dirichlet term's pull); otherwise the centre moves by
  the bias that the misfit causes at this prior. It is BBSE's moment equation
  (Lipton et al., 2018) with the confusion matrix replaced by the class means
  of the EM gradients at the estimate, and its error the sum of the batch's
  sampling error and that of quantities measured on labelled data, as Vaz et
  al. (2019) derive for ratio estimators. It assumes label shift, not
  calibration, at the cost of one pass over the calibration set. It may be
  the set the calibration map was fitted to (parameters :math:`\hat\theta`;
  :math:`\theta^*` in the population): the fit's error moves the set's class
  means and the batch's alike, :math:`\hat\mu(\hat\theta) - \mu(\hat\theta)
  = \hat\mu(\theta^*) - \mu(\theta^*) + O(1/n_{cal})`.

**Repeated rows.** The three spreads above take the batch's rows as
independent draws. A batch that holds some rows several times (an image
submitted twice, a batch resampled from a finite pool) has fewer: a row
repeated :math:`w_r` times is one draw, whose deviation
:math:`e_r = g_r - \mu_{y_r}` from its class mean enters
:math:`n\,\bar g` :math:`w_r` times, so its variance :math:`w_r^2` times,
where the formulas count :math:`w_r`. Identical rows are therefore one
cluster, and the spread is the cluster-robust (multiplicity-weighted)
sandwich :math:`\frac1{n^2}\sum_r w_r^2\,\mathrm{E}[e_r e_r^\top]`: the
formulas above plus

.. math:: \frac1{n^2}\sum_r w_r (w_r - 1) \sum_j \rho_{rj}
   (g_r - \mu_j)(g_r - \mu_j)^\top

over the repeated rows, the class unknown and weighted by the
responsibilities :math:`\rho_{rj} = \hat\pi_j g_{rj}` (``mu_j`` the
calibration set's class means, the rows of :math:`M` without one, and
:math:`\bar g` for ``target="prior"``). A class's effective number of
draws is :math:`(\sum w)^2/\sum w^2`; with no repeat the term is 0 and the
interval is the one above, and without a calibration set a batch that
holds every row twice gets exactly the interval of its rows once (with one,
within a few percent of its width). When a batch is drawn with
replacement from a pool of :math:`m_j` rows of class ``j``,
:math:`\mathrm{E}\sum_{r\in j} w_r^2 = n_j + n_j(n_j - 1)/m_j`: the
term is the pool's own sampling error (the pool is one sample of the
population, shared by every batch drawn from it), which the rows' repeats
reveal. The repeats are found exactly, at the cost of one sort: the pass
also forms each row's key :math:`x_i \cdot v` (``v`` fixed, positive, so no
cancellation), the ``n`` keys are sorted on the host, rows whose keys agree
to rounding are compared byte for byte, and only those rows leave the
device. Distinct rows are never merged, however close (a posterior's
values, not its input, are all the interval sees: two inputs with
bit-identical posteriors count as one). The bootstrap redraws each group of
identical rows as one row repeated as often.

The interval is :math:`c_k \pm z_{1-\alpha/2}\,\mathrm{se}_k` clipped to
``[0, 1]``, over the active classes. A class the MLE puts at the boundary
(below half a row, :math:`\hat\pi_k < 1/(2n)`; the expansion does not hold
there, the KKT conditions allowing :math:`\bar g_k < 1`) is held at 0 in the
expansion and gets a one-sided profile-likelihood bound ``[0, high]``: the
mass ``t`` moved into it, the other classes re-fitted, lowers the
log-likelihood by :math:`n(s t + v t^2/2)` to second order (``s`` the KKT
slope, ``v`` the profile's curvature), and ``high`` is where that drop
reaches :math:`z_{1-\alpha}^2/2` (all of :math:`\alpha` above: a proportion
cannot be below 0). It is a bound for the generating prior, used for the
batch too. With a calibration set the moment equation holds for every
class, the MLE's boundary classes included (it does not use the score
equations), and a misfit can move such a class off 0: a boundary class's
interval is ``[0, max(c_k + z se_k, high)]``, one-sided still, with ``c_k``
and ``se_k`` from the equations of the active classes and ``k`` (one class
at a time: the equations of many classes at 0 together are near-singular
for a weak model).

The bootstrap redraws the same target: for ``"prior"``, rows of the batch
with replacement, each resample re-estimated by the same solver, and the
percentile interval; for ``"batch"``, synthetic batches with the estimate's
class counts (``n pi_hat`` rounded), class ``j``'s rows drawn from a resample
of the calibration set's class ``j`` (or, without one, from the batch's rows
weighted by their responsibilities), re-estimated, and the interval
``pi_hat - quantiles(pi_star - counts / n)``. Repeated rows: for
``"prior"``, groups of identical rows are resampled whole; for ``"batch"``
each group becomes one row of a class drawn from its responsibilities,
repeated as often, and the single rows fill the counts up. Each re-estimate
starts at the training prior, as an estimate does. A class at the boundary
gets the larger of its resamples' ``level`` quantile and the profile bound:
the percentile bootstrap is not valid for a parameter on the boundary [5]_
(most resamples put the class at 0 again).

References
----------
.. [1] Saerens, Latinne and Decaestecker, "Adjusting the outputs of a
   classifier to new a priori probabilities: a simple procedure", Neural
   Computation 14(1), 2002.
.. [2] Sulc and Matas, "Improving CNN classifiers by estimating test-time
   priors", ICCV Workshops 2019.
.. [3] Vaz, Izbicki and Stern, "Quantification under prior probability shift:
   the ratio estimator and its extensions", JMLR 20(79), 2019.
.. [4] Lipton, Wang and Smola, "Detecting and correcting for label shift with
   black box predictors", ICML 2018.
.. [5] Andrews, "Inconsistency of the bootstrap when a parameter is on the
   boundary of the parameter space", Econometrica 68(2), 2000.
"""

import dataclasses
from numbers import Real

import numpy as np
from scipy.special import ndtri

from skprior._utils._array_api import (
    device_of,
    from_host,
    get_namespace,
    to_host,
)
from skprior._utils._kernels import single_blas_thread
from skprior._utils._validation_arrays import warn_user
from skprior.label_shift._interval_moments import (
    batch_moments,
    calibration_moments,
    calibration_pool,
    check_calibration,
)
from skprior.label_shift._repeats import (
    batch_repeats,
    class_repeats,
    cluster_spread,
    group_classes,
)
from skprior.label_shift._solvers import like, solve_prior

TARGETS = ("batch", "prior")
METHODS = ("delta", "bootstrap")


@dataclasses.dataclass(frozen=True)
class Fit:
    """What an interval needs of an estimate.

    The batch (a reference to the caller's array, not a copy) and the
    estimate's settings.
    """

    proba: object
    train_prior: np.ndarray  # (host float64, as the prior)
    prior: np.ndarray
    concentration: float  # a - 1 of MAP's Dirichlet(a); 0 for the MLE
    solver: str
    max_iter: int
    tol: float


def _tangent_basis(n_classes):
    """An orthonormal basis of ``{u : sum(u) = 0}`` (``n_classes x n_classes - 1``)."""
    # (the QR of [1 | I] gives 1/sqrt(K) and an orthonormal complement)
    q, _ = np.linalg.qr(np.column_stack([np.ones(n_classes), np.eye(n_classes)]))
    return q[:, 1:n_classes]


def _tangent_inverse(matrix):
    """``B (B^T matrix B)^+ B^T`` for an orthonormal basis ``B`` of sum-zero."""
    basis = _tangent_basis(matrix.shape[0])
    if basis.shape[1] == 0:  # (one class holds everything: nowhere to move)
        return np.zeros_like(matrix)
    return basis @ np.linalg.pinv(basis.T @ matrix @ basis, hermitian=True) @ basis.T


def _profile_bounds(curvature, mean_gradient, prior, active, n_samples, z):
    r"""One-sided upper bounds of the classes at the boundary (profile likelihood).

    Moving mass ``t`` into a class ``k`` at 0, the other classes re-fitted,
    changes the mean log-likelihood by ``-(s t + v t**2 / 2)`` to second order:
    ``s = sum_A pi_j g_j - g_k`` the slope (``1 - g_k`` at the MLE, positive
    there by the KKT conditions) and ``v`` the curvature of the profile, the
    Schur complement of the active classes ``A`` in the tangent space. The
    bound solves ``n (s t + v t**2 / 2) = z**2 / 2``: the signed root of the
    likelihood-ratio statistic at the one-sided quantile ``z``. A class no row
    gives mass to has ``v ~ 0`` and the bound ``z**2 / (2 n s)``.
    """
    index = np.flatnonzero(active)
    block = curvature[np.ix_(index, index)]
    inverse = _tangent_inverse(block)
    level_gradient = prior[index] @ mean_gradient[index]
    c = z**2 / (2 * n_samples)
    high = np.zeros(len(prior))
    for k in np.flatnonzero(~active):
        # The profile's direction: mass 1 into k, taken from A so as to
        # minimise the quadratic form (a Newton step on the tangent of A).
        start = np.full(len(index), -1.0 / len(index))
        shift = start - inverse @ (block @ start + curvature[index, k])
        direction = np.append(shift, 1.0)
        columns = np.append(index, k)
        v = max(direction @ curvature[np.ix_(columns, columns)] @ direction, 0.0)
        s = max(level_gradient - mean_gradient[k], 0.0)
        if v > 0:
            high[k] = (np.sqrt(s**2 + 2 * v * c) - s) / v
        else:  # (flat: the rows say nothing of k, whose bound is then 1)
            high[k] = c / s if s > 0 else 1.0
    return np.clip(high, 0.0, 1.0)


def delta_interval(fit, level, target, calibration):
    """``(low, high)`` of the delta method, on the host (see the module notes)."""
    proba, train, prior = fit.proba, fit.train_prior, fit.prior
    n_samples, n_classes = proba.shape
    xp, _ = get_namespace(proba)
    lazy = list(batch_moments(proba, train, prior, keys=True))
    if target == "batch" and calibration is not None:
        counts = calibration.counts
        row_weights = prior * (1.0 / n_samples + prior / counts) / counts
        lazy += calibration_moments(
            calibration.proba,
            calibration.y,
            train,
            prior,
            row_weights,
            calibration.weights,
        )
    moments = list(to_host(xp, *lazy))  # (one transfer; one compute for Dask)
    keys = moments.pop(2)
    info = moments[0] / n_samples
    mean_gradient = moments[1] / n_samples
    curvature, score = info, np.zeros(n_classes)
    if fit.concentration > 0:  # (MAP, positive everywhere: its known pull)
        curvature = info + np.diag(fit.concentration / prior**2) / n_samples
        score = fit.concentration / prior / n_samples
    # The classes at the boundary stay at 0: the expansion is over the others
    # (at least the largest: with more classes than rows, all may be below).
    active = prior >= 0.5 / n_samples
    active[np.argmax(prior)] = True
    index = np.flatnonzero(active)
    block = np.ix_(index, index)
    if target == "prior":
        spread = (info - np.outer(mean_gradient, mean_gradient)) / n_samples
        score = score + mean_gradient - 1.0
    elif calibration is None:
        spread = (info - info @ (prior[:, None] * info)) / n_samples
    else:
        class_means = moments[2] / counts[:, None]  # mu_j, one row per class
        between = class_means.T @ (
            (prior * (1.0 / n_samples + prior / counts))[:, None] * class_means
        )
        spread = moments[3] - between
    clusters = batch_repeats(xp, proba, keys, calibration)
    if clusters is not None:
        means = {
            "prior": np.tile(mean_gradient, (n_classes, 1)),
            "batch": info if calibration is None else class_means,
        }[target]
        spread = spread + cluster_spread(clusters, train, prior, means) / n_samples**2
    two_sided, one_sided = z_values(level)
    if calibration is None or target == "prior":
        solve = _tangent_inverse(curvature[block])
        centre = prior.copy()
        centre[index] -= solve @ score[index]
        covariance = solve @ spread[block] @ solve.T
    else:
        centre, covariance = _moment_solve(
            class_means, spread, mean_gradient, prior, index
        )
    half_width = np.zeros(n_classes)
    half_width[index] = two_sided * np.sqrt(np.maximum(np.diag(covariance), 0.0))
    low = np.clip(centre - half_width, 0.0, 1.0)
    high = np.clip(centre + half_width, 0.0, 1.0)
    if not active.all():
        edge = _profile_bounds(
            curvature, mean_gradient, prior, active, n_samples, one_sided
        )
        if calibration is not None and target == "batch":
            # A misfit can move k off 0: the larger of the profile bound and
            # the moment equation's over the active classes and k.
            boundary = np.flatnonzero(~active)
            own, se = _boundary_moment_solves(
                class_means, spread, mean_gradient, prior, index, boundary
            )
            edge[boundary] = np.maximum(
                edge[boundary], np.minimum(own + two_sided * se, 1.0)
            )
        low[~active], high[~active] = 0.0, edge[~active]
        _what_the_others_leave(low, high, active)
    return low, high


def _what_the_others_leave(low, high, active):
    """The interval of the one class off the boundary, in place.

    It has no tangent to move along: it is what the others leave, one
    minus their sum, in ``[1 - sum of their highs, 1]``.
    """
    if active.sum() == 1:
        low[active] = max(1.0 - high[~active].sum(), 0.0)
        high[active] = 1.0


def _moment_solve(class_means, spread, mean_gradient, prior, index):
    """Centre and covariance of the batch's proportions of the classes ``index``.

    The batch's mean gradient is, given its labels, ``sum_j y_j mu_j`` plus
    noise: linear in ``y``, whatever the MLE put at the boundary (the
    equation does not use its stationarity). Solved on the tangent of the
    classes ``index``, the others held at 0; the covariance is over
    ``index``, in its order.
    """
    block = np.ix_(index, index)
    equations = class_means.T[block]
    basis = _tangent_basis(len(index))
    solve = basis @ np.linalg.pinv(equations @ basis)
    centre = prior.copy()
    centre[index] += solve @ (mean_gradient[index] - equations @ prior[index])
    return centre, solve @ spread[block] @ solve.T


def _boundary_moment_solves(class_means, spread, mean_gradient, prior, index, boundary):
    """:func:`_moment_solve` over ``index`` and each class of ``boundary`` in turn.

    Returns the centre and standard error of each boundary class's proportion
    (its equations solved with the active classes ``index``). Each solve is
    the one of the active classes bordered by one row and one column: with
    the tangent parametrised by the classes other than a reference ``r`` (the
    largest), the normal matrix of ``index`` and ``k`` is the active one plus
    ``a a^T`` (``k``'s equation), bordered by ``k``'s column, and its last row
    of the inverse follows from the active inverse by Sherman-Morrison and a
    Schur complement: ``O(m^2)`` a class rather than an ``O(m^3)`` pseudo-
    inverse (K = 1,000 with 513 classes at 0: 50 s before). The same least
    squares solution where the equations have full rank; where they are near
    rank-deficient (a weak model), :func:`_moment_solve` itself.
    """
    equations = class_means.T
    own, se = np.empty(len(boundary)), np.empty(len(boundary))
    m = len(index)
    r = index[np.argmax(prior[index])]
    free = index[index != r]
    active = equations[np.ix_(index, free)] - equations[index, r][:, None]
    normal = active.T @ active
    fast = m > 1 and np.linalg.cond(normal) < 1e10
    if fast:
        normal_inverse = np.linalg.inv(normal)
        fitted = equations[np.ix_(index, index)] @ prior[index]
        spread_active = spread[np.ix_(index, index)]
    for position, k in enumerate(boundary):
        if fast:
            a = equations[k, free] - equations[k, r]
            c = equations[index, k] - equations[index, r]
            d = equations[k, k] - equations[k, r]
            q = active.T @ c + a * d
            t = c @ c + d * d
            inverse_a, inverse_q = normal_inverse @ a, normal_inverse @ q
            solved = inverse_q - inverse_a * (a @ inverse_q) / (1.0 + a @ inverse_a)
            schur = t - q @ solved
            if schur > 1e-10 * t:
                # s: k's row of the solve, over the equations of index and k
                weights = np.append(-solved, 1.0) / schur
                row = np.append(active @ weights[:-1] + c * weights[-1], 0.0)
                row[-1] = a @ weights[:-1] + d * weights[-1]
                residual = np.append(
                    mean_gradient[index] - fitted - equations[index, k] * prior[k],
                    mean_gradient[k]
                    - equations[k, index] @ prior[index]
                    - equations[k, k] * prior[k],
                )
                variance = (
                    row[:-1] @ spread_active @ row[:-1]
                    + 2 * row[-1] * (spread[k, index] @ row[:-1])
                    + row[-1] ** 2 * spread[k, k]
                )
                own[position] = prior[k] + row @ residual
                se[position] = np.sqrt(max(variance, 0.0))
                continue
        centre, covariance = _moment_solve(
            class_means, spread, mean_gradient, prior, np.append(index, k)
        )
        own[position] = centre[k]
        se[position] = np.sqrt(max(covariance[-1, -1], 0.0))
    return own, se


def z_values(level):
    """The two-sided and one-sided normal quantiles of ``level``.

    The one-sided one is 0 below level 0.5: a bound of the boundary is then
    0 itself (an interval nested in wider levels), not a negative quantile
    that squares into a wide bound.
    """
    return float(ndtri(0.5 + level / 2)), max(float(ndtri(level)), 0.0)


def _counts(prior, n_samples):
    """``n * prior`` rounded to integers summing to ``n`` (largest remainder)."""
    exact = prior * n_samples
    counts = np.floor(exact).astype(np.int64)
    order = np.argsort(counts - exact, kind="stable")
    counts[order[: n_samples - counts.sum()]] += 1
    return counts


def _resample_batch(pools, counts, rng, repeats=None):
    """A synthetic batch: ``counts[j]`` rows drawn from pool ``j``.

    A pool is ``(row indices, probabilities or None, size or None)``; a
    calibration pool (with a size) is first resampled with replacement to
    its size, with its probabilities (its finite size is part of the
    uncertainty), then drawn from uniformly. ``repeats[j]``:
    multiplicities of groups of class ``j``, each one row of the pool
    repeated (as the batch repeats rows).
    """
    chosen = []
    for j, ((rows, p, size), count) in enumerate(zip(pools, counts, strict=True)):
        groups = () if repeats is None else repeats[j]
        if count + len(groups) == 0:
            continue
        if size is not None:
            rows, p = rng.choice(rows, size=size, p=p), None
        drawn = rng.choice(rows, size=count + len(groups), p=p)
        chosen += [drawn[:count], np.repeat(drawn[count:], groups)]
    return np.concatenate(chosen)


def _clusters_of(proba, train_prior, prior, calibration):
    """:func:`batch_repeats` of the batch (one pass for the keys)."""
    xp, _ = get_namespace(proba)
    (keys,) = to_host(xp, batch_moments(proba, train_prior, prior, keys=True)[2])
    return batch_repeats(xp, proba, keys, calibration)


def bootstrap_interval(fit, level, target, calibration, n_resamples, rng):
    """``(low, high)`` on the host by the bootstrap (see the module notes)."""
    proba, train, prior = fit.proba, fit.train_prior, fit.prior
    n_samples, n_classes = proba.shape
    source = proba if calibration is None or target == "prior" else calibration.proba
    xp, _ = get_namespace(source)
    clusters = _clusters_of(proba, train, prior, calibration)
    if target == "batch":
        counts = _counts(prior, n_samples)
        if clusters is not None:  # (the single rows fill the counts up)
            rho = group_classes(clusters, train, prior)
            repeated = np.rint(clusters.multiplicity @ rho).astype(np.int64)
            counts = np.maximum(counts - repeated, 0)
        if calibration is not None:
            (y_host,) = to_host(xp, calibration.y)
            weights = None
            if calibration.weights is not None:
                (weights,) = to_host(xp, calibration.weights)
            pools = [calibration_pool(y_host, weights, j) for j in range(n_classes)]
        else:  # (the batch's rows, weighted by their responsibilities)
            r = _responsibilities(proba, train, prior)
            totals = np.where(r.sum(axis=0) > 0, r.sum(axis=0), 1.0)
            pools = [
                (np.arange(n_samples), r[:, j] / totals[j], None)
                for j in range(n_classes)
            ]
    elif clusters is not None:  # (groups of identical rows are resampled whole)
        units = np.concatenate(
            [np.setdiff1d(np.arange(n_samples), clusters.members), clusters.index]
        )
        sizes = np.ones(len(units), dtype=np.int64)
        sizes[len(units) - len(clusters.index) :] = clusters.multiplicity
    draws = np.empty((n_resamples, n_classes))
    truths = np.empty((n_resamples, n_classes))
    for b in range(n_resamples):
        if target == "prior" and clusters is None:
            index = rng.integers(n_samples, size=n_samples)
        elif target == "prior":
            drawn = rng.integers(len(units), size=len(units))
            index = np.repeat(units[drawn], sizes[drawn])
        else:
            repeats = None
            if clusters is not None:
                repeats = class_repeats(clusters, rho, rng)
            index = _resample_batch(pools, counts, rng, repeats)
            truths[b] = counts + [np.sum(r) for r in repeats or [0] * n_classes]
            truths[b] /= truths[b].sum()
        rows = xp.take(source, from_host(xp, index, device_of(source)), axis=0)
        # (each re-estimate starts where an estimate does, at the training
        # prior: from the estimate itself, EM's multiplicative steps keep a
        # class the estimate put at 0 there, and every draw's bound is 0)
        settings = (fit.concentration, train, fit.solver, fit.max_iter, fit.tol)
        draws[b] = solve_prior(rows, train, *settings)[0]
    tail = (1 - level) / 2
    if target == "prior":
        low, high = np.quantile(draws, [tail, 1 - tail], axis=0)
    else:
        errors = draws - truths
        high_error, low_error = np.quantile(errors, [1 - tail, tail], axis=0)
        low, high = prior - high_error, prior - low_error
    edge = prior < 0.5 / n_samples  # (one-sided at the boundary, as the delta)
    low[edge] = 0.0
    high[edge] = np.quantile(draws[:, edge], level, axis=0)
    if edge.any():
        # The percentile bootstrap is not valid where the estimate sits on the
        # boundary (Andrews, 2000): most re-estimates put the class at 0 again
        # and its bound collapses (a class of prior 0.5 % above it in 59 % of
        # 300-row batches, not 5 %). At least the profile bound, as the delta.
        profile = delta_interval(fit, level, target, calibration)[1]
        high[edge] = np.maximum(high[edge], profile[edge])
    low, high = np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)
    active = ~edge
    active[np.argmax(prior)] = True  # (as the delta method's)
    _what_the_others_leave(low, high, active)
    return low, high


def _responsibilities(proba, train_prior, prior):
    """The E-step ``r_ij = p_ij (pi_j / q_j) / D_i`` on the host (n x K)."""
    xp, _ = get_namespace(proba)
    (rows,) = to_host(xp, proba)
    rows = rows.astype(np.float64) * (prior / train_prior)
    total = rows.sum(axis=1, keepdims=True)
    return np.divide(rows, total, out=np.zeros_like(rows), where=total > 0)


def confidence_interval(fit, level, method, target, calibration, n_resamples, rng):
    """The interval of :meth:`PriorEstimate.confidence_interval`.

    As arrays of the namespace, device and float dtype of ``fit.proba``.
    """
    if isinstance(level, bool) or not isinstance(level, Real) or not 0 < level < 1:
        raise ValueError(
            f"level must be a confidence level in (0, 1), got {level!r}; "
            f"e.g. level=0.95."
        )
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}.")
    if target == "prior" and calibration is not None:
        warn_user(
            "calibration= recentres the interval of the batch's proportions; "
            "target='prior' (the generating prior's, by the Fisher information) "
            "does not use it. Pass target='batch', or drop calibration=."
        )
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    n_samples, n_classes = fit.proba.shape
    if calibration is not None:
        calibration = check_calibration(calibration, n_classes)
    if method == "delta":
        with single_blas_thread():  # (see the solvers: busy cores stall BLAS)
            low, high = delta_interval(fit, level, target, calibration)
    else:
        if not (isinstance(n_resamples, (int, np.integer)) and n_resamples >= 10):
            raise ValueError(
                f"n_resamples must be an integer >= 10, got {n_resamples!r}; "
                f"a percentile interval needs a few hundred (default 200)."
            )
        low, high = bootstrap_interval(
            fit, level, target, calibration, int(n_resamples), rng
        )
    return like(low, fit.proba), like(high, fit.proba)
