"""Label shift from model outputs: Bayes' rule to a new prior, and estimating it.

Pure array functions on posteriors ``p`` (n_samples x n_classes) and the
training prior ``q`` they are calibrated to:

* :func:`adjust_to_prior` -- the posteriors under a new prior (Bayes' rule);
* :func:`estimate_test_prior` -- the maximum-likelihood or MAP test prior of an
  unlabelled batch, by EM, SQUAREM-accelerated EM or projected gradient ascent;
* :func:`bbse_test_prior` -- black-box shift estimation from a confusion matrix.

How the solvers share one pass over the data
---------------------------------------------
With weights ``w = pi / q`` and ``D_i = sum_k p_ik w_k`` (a matrix-vector
product), the EM map is ``F(pi)_k = pi_k g_k / N`` where
``g_k = sum_i (p_ik / q_k) / D_i`` (a second product) is also the gradient of
the log-likelihood ``l(pi) = sum_i log D_i``. One "pass" is these two products;
no n_samples x n_classes temporary is formed. Every solver stops on the same
scale-free criterion, the L1 size of one EM step, ``||F(pi) - pi||_1 <= tol``,
plus, for the MLE, the KKT violation ``max(g_k - 1, 0)`` of classes below
``tol`` (at or near 0, where an EM step is small whatever the gradient).
"""

import dataclasses
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skprior._validation import check_int, check_prior, check_proba, check_real

METHODS = ("mle", "map")
SOLVERS = ("em", "squarem", "pga")


@dataclasses.dataclass(frozen=True)
class PriorEstimate:
    """The result of :func:`estimate_test_prior`.

    Attributes
    ----------
    prior : ndarray of shape (n_classes,)
        The estimated test prior (sums to one).
    n_iter : int
        Iterations of the solver (EM steps, SQUAREM cycles or gradient steps).
    n_passes : int
        Passes over the data: evaluations of the E-step (equivalently of the
        log-likelihood and its gradient), the unit of cost shared by the solvers.
    converged : bool
        Whether the stopping criterion was met within ``max_iter``.
    objective : float
        Mean log-likelihood per sample at ``prior``,
        ``mean_i log sum_k prior_k p_ik / q_k``, plus the log Dirichlet density
        term ``(a - 1) sum_k log prior_k / N`` for ``method="map"``.

    See Also
    --------
    estimate_test_prior : The function that returns it.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import estimate_test_prior
    >>> proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]])
    >>> estimate = estimate_test_prior(proba, [0.5, 0.5])
    >>> estimate.converged, round(float(estimate.prior.sum()), 6)
    (True, 1.0)
    """

    prior: np.ndarray
    n_iter: int
    n_passes: int
    converged: bool
    objective: float


def _check_train_prior(train_prior, n_classes):
    prior = check_prior(train_prior, n_classes, name="train_prior")
    if np.any(prior == 0):
        zero = np.flatnonzero(prior == 0).tolist()
        raise ValueError(
            f"train_prior is 0 for the classes at positions {zero}: the ratio "
            f"p(c|x) / q_c is undefined there, so the posteriors cannot be moved "
            f"to another prior. Pass the prior the model was trained with (a "
            f"class the model predicts had training examples), or drop these "
            f"columns and renormalise the rows."
        )
    return prior


def _reweight(proba, train_prior, test_prior):
    """Rows of ``proba * test_prior / train_prior`` renormalised, in float64.

    A row that is 0 everywhere (all its mass on classes the test prior rules
    out) gets ``test_prior``, the posterior of a sample that carries no usable
    evidence. (In place after the product, and without a float64 copy of a
    float32 input: 8x faster than the plain expression on 5,000 x 100 float32.)
    """
    weights = test_prior / train_prior
    out = np.multiply(proba, weights, dtype=np.float64)
    total = np.einsum("ij->i", out)
    empty = ~(total > 0)
    if empty.any():
        total[empty] = 1.0
    out *= (1.0 / total)[:, None]
    if empty.any():
        out[empty] = test_prior
    return out


def adjust_to_prior(proba, train_prior, test_prior):
    r"""Move posteriors from the training prior to a new class prior (Bayes' rule).

    Under label shift the class-conditional densities :math:`p(x|c)` stay and
    the prior changes from :math:`q` to :math:`\pi`; the posterior becomes

    .. math:: p_\pi(c|x) = \frac{p(c|x)\,\pi_c / q_c}{\sum_k p(k|x)\,\pi_k / q_k}.

    For a generative model (LDA, QDA, naive Bayes) this equals refitting it with
    ``priors=test_prior``.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Posteriors under the training prior; rows sum to one.
    train_prior : array-like of shape (n_classes,)
        The prior ``q`` the posteriors are calibrated to; strictly positive.
    test_prior : array-like of shape (n_classes,)
        The new prior ``pi``; zeros are allowed.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes)
        Adjusted posteriors, same dtype as the input (float32 or float64).

    Notes
    -----
    A row whose mass lies only on classes with ``pi_c = 0`` would be ``0/0``:
    the model is sure of classes the new prior rules out. Such a row is given
    ``test_prior`` itself (the evidence is discarded, not the prior).

    References
    ----------
    .. [1] Saerens, Latinne and Decaestecker, "Adjusting the outputs of a
       classifier to new a priori probabilities: a simple procedure", Neural
       Computation 14(1), 2002.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import adjust_to_prior
    >>> adjust_to_prior(np.array([[0.5, 0.5]]), [0.5, 0.5], [0.8, 0.2])
    array([[0.8, 0.2]])
    """
    proba = check_proba(proba)
    n_classes = proba.shape[1]
    test = check_prior(test_prior, n_classes, name="test_prior")
    train = _check_train_prior(train_prior, n_classes)
    adjusted = _reweight(proba, train, test)
    return adjusted.astype(proba.dtype, copy=False)


def _objective(log_d_sum, prior, n_samples, concentration):
    value = log_d_sum / n_samples
    if concentration != 0:
        with np.errstate(divide="ignore"):
            value += concentration * np.log(prior).sum() / n_samples
    return float(value)


class _Problem:
    """The data of one estimate and its single pass (see the module docstring)."""

    def __init__(self, proba, train_prior, concentration, tol):
        self.proba = proba
        self.train_prior = train_prior
        self.n_samples, self.n_classes = proba.shape
        self.concentration = concentration  # a - 1 of the Dirichlet(a) prior
        self.tol = tol  # classes below it get the KKT check of ``residual``
        self.n_passes = 0

    def evaluate(self, prior):
        """Return ``(g / N, sum_i log D_i)`` at ``prior``; one pass."""
        self.n_passes += 1
        d = self.proba @ (prior / self.train_prior)
        # D_i = 0 only when row i lies on classes with prior 0 (the projected
        # gradient can put some there): l = -inf, and the row points back in.
        tiny = np.finfo(np.float64).tiny
        with np.errstate(divide="ignore"):
            log_d_sum = np.log(d).sum()
        inv = 1.0 / np.maximum(d, tiny)
        gradient = (inv @ self.proba) / self.train_prior / self.n_samples
        return gradient, log_d_sum

    def em_map(self, prior, gradient):
        """The (MAP) EM update from the gradient at ``prior``: no extra pass."""
        counts = prior * gradient * self.n_samples  # sum_i r_ik
        a1 = self.concentration
        updated = (counts + a1) / (self.n_samples + self.n_classes * a1)
        return updated / updated.sum()

    def residual(self, prior, gradient):
        """L1 size of one EM step, plus KKT violations of classes at or near 0.

        At the MLE every class has ``g_k <= 1`` (``= 1`` where ``pi_k > 0``).
        A class with ``pi_k < tol`` moves by ``pi_k (g_k - 1) < tol`` per EM
        step however much it should grow, so for such classes the excess
        ``g_k - 1`` is counted too: a start near a vertex is not "converged".
        """
        step = np.abs(self.em_map(prior, gradient) - prior).sum()
        if self.concentration == 0:
            small = prior < self.tol
            step += np.maximum(gradient[small] - 1.0, 0.0).sum()
        return step

    def objective(self, prior, log_d_sum):
        return _objective(log_d_sum, prior, self.n_samples, self.concentration)


def _solve_em(problem, start, max_iter, tol):
    prior = start
    for n_iter in range(1, max_iter + 1):
        gradient, log_d = problem.evaluate(prior)
        if problem.residual(prior, gradient) <= tol:
            return prior, n_iter - 1, True, log_d
        prior = problem.em_map(prior, gradient)
    gradient, log_d = problem.evaluate(prior)
    return prior, max_iter, problem.residual(prior, gradient) <= tol, log_d


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


def _solve_squarem(problem, start, max_iter, tol):
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

    The stopping test (``_Problem.residual``) runs at ``p0`` and at ``p1``
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
        if problem.residual(prior, gradient) <= tol:
            return prior, n_iter - 1, True, log_d
        p1 = problem.em_map(prior, gradient)
        gradient1, log_d1 = problem.evaluate(p1)
        if problem.residual(p1, gradient1) <= tol:
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
        if step == -1.0:
            candidate = p2
        else:
            candidate = candidate / candidate.sum()
        objective0 = problem.objective(prior, log_d)
        gradient, log_d = problem.evaluate(candidate)
        if step < -1.0 and problem.objective(candidate, log_d) < objective0:
            candidate = p2
            gradient, log_d = problem.evaluate(candidate)
        prior = candidate
    return prior, max_iter, problem.residual(prior, gradient) <= tol, log_d


def project_to_simplex(v):
    r"""Euclidean projection of a vector onto the probability simplex.

    :math:`\arg\min_x \|x - v\|_2` subject to :math:`x \ge 0, \sum x = 1`, by
    sorting: with :math:`u` sorted in decreasing order,
    :math:`\rho = \max\{j : u_j - (\sum_{l \le j} u_l - 1)/j > 0\}`,
    :math:`\theta = (\sum_{l \le \rho} u_l - 1)/\rho` and
    :math:`x = \max(v - \theta, 0)` (Duchi et al., 2008; Wang and
    Carreira-Perpinan, 2013).

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
    >>> from skprior._prior_estimation import project_to_simplex
    >>> project_to_simplex([0.9, 0.6, -1.0])
    array([0.65, 0.35, 0.  ])
    """
    v = np.asarray(v, dtype=np.float64)
    u = -np.sort(-v)
    cumulative = np.cumsum(u) - 1.0
    index = np.arange(1, v.size + 1)
    rho = np.flatnonzero(u - cumulative / index > 0)[-1]
    theta = cumulative[rho] / (rho + 1)
    return np.maximum(v - theta, 0.0)


def _solve_pga(problem, start, max_iter, tol):
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
        if problem.residual(prior, gradient) <= tol:
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
            return prior, n_iter - 1, problem.residual(prior, gradient) <= tol, log_d
        direction_c = ascent_direction(candidate, gradient_c)
        s = candidate - prior
        y = direction - direction_c  # minus the change of the ascent direction
        curvature = s @ y
        learning_rate = (s @ s) / curvature if curvature > 0 else 2 * learning_rate
        prior, gradient, log_d, value = candidate, gradient_c, log_d_c, value_c
        direction = direction_c
    return prior, max_iter, problem.residual(prior, gradient) <= tol, log_d


_SOLVERS = {"em": _solve_em, "squarem": _solve_squarem, "pga": _solve_pga}


def estimate_test_prior(
    proba,
    train_prior,
    *,
    method="mle",
    solver="em",
    dirichlet_alpha=2.0,
    init=None,
    max_iter=10_000,
    tol=1e-6,
):
    r"""Estimate the class prior of an unlabelled batch from its posteriors.

    Maximum likelihood (``method="mle"``) maximises over the simplex

    .. math:: \ell(\pi) = \sum_i \log \sum_k \pi_k\, p_{ik} / q_k,

    concave in :math:`\pi`, with :math:`p_{ik}` the posteriors under the
    training prior :math:`q` (Saerens et al., 2002). ``method="map"`` adds a
    symmetric Dirichlet(:math:`a`) hyper-prior, :math:`(a-1)\sum_k\log\pi_k`
    (Sulc and Matas, 2019). The EM algorithm alternates the E-step
    :math:`r_{ik} \propto p_{ik}\pi_k/q_k` and the M-step

    .. math:: \pi_k = \frac{\sum_i r_{ik} + a - 1}{N + K(a - 1)}

    (:math:`a = 1` for MLE), starting from :math:`q`.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Posteriors of the batch under the training prior; rows sum to one.
        Computation is in float64 whatever the input dtype.
    train_prior : array-like of shape (n_classes,)
        The prior ``q`` the posteriors are calibrated to; strictly positive.
    method : {"mle", "map"}, default="mle"
        Maximum likelihood, or maximum a posteriori with a Dirichlet prior.
    solver : {"em", "squarem", "pga"}, default="em"
        ``"em"``: plain EM. ``"squarem"``: EM accelerated by SQUAREM (Varadhan
        and Roland, 2008), several times fewer passes when the optimum is on
        the boundary (classes absent from the batch), where EM crawls.
        ``"pga"``: projected gradient ascent on the simplex (Sulc and Matas,
        2019) with Barzilai-Borwein steps and Euclidean projection. All reach
        the same optimum.
    dirichlet_alpha : float, default=2.0
        Concentration ``a >= 1`` of the symmetric Dirichlet hyper-prior, for
        ``method="map"`` only: ``a - 1`` pseudo-examples per class (the default
        is add-one smoothing); ``a = 1`` gives the MLE.
    init : array-like of shape (n_classes,), default=None
        Starting point; ``None`` starts from ``train_prior``. For ``"em"`` and
        ``"squarem"`` a class started at 0 stays at 0.
    max_iter : int, default=10_000
        Largest number of iterations.
    tol : float, default=1e-6
        Stop when one EM step would move the estimate by at most ``tol`` in L1
        norm (a scale-free criterion: the prior lies on the simplex) and, for
        the MLE, no class below ``tol`` has a likelihood gradient pulling it up
        (see the module's notes).

    Returns
    -------
    result : PriorEstimate
        ``result.prior`` the estimate, with ``n_iter``, ``n_passes``,
        ``converged`` and ``objective``.

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` iterations did not meet ``tol``.

    Notes
    -----
    A class absent from the batch has MLE 0: the optimum lies on the boundary
    of the simplex and EM approaches it geometrically, slowly (hundreds to
    thousands of iterations); prefer ``solver="squarem"`` or ``method="map"``
    (whose estimate stays positive). A batch of one sample has as MLE the
    vertex of the class maximising ``p_k / q_k``. Classes with ``q_k = 0`` are
    refused: ``p_k / q_k`` is undefined.

    References
    ----------
    .. [1] Saerens, Latinne and Decaestecker, "Adjusting the outputs of a
       classifier to new a priori probabilities: a simple procedure", Neural
       Computation 14(1), 2002.
    .. [2] Sulc and Matas, "Improving CNN classifiers by estimating test-time
       priors", ICCV Workshops 2019. arXiv:1805.08235.
    .. [3] Varadhan and Roland, "Simple and globally convergent methods for
       accelerating the convergence of any EM algorithm", Scandinavian Journal
       of Statistics 35(2), 2008.
    .. [4] Duchi, Shalev-Shwartz, Singer and Chandra, "Efficient projections
       onto the l1-ball for learning in high dimensions", ICML 2008.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import estimate_test_prior
    >>> proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]])
    >>> result = estimate_test_prior(proba, [0.5, 0.5], solver="squarem", tol=1e-10)
    >>> np.round(result.prior, 2)
    array([0.77, 0.23])
    >>> result.converged
    True
    """
    proba = check_proba(proba)
    n_classes = proba.shape[1]
    train = _check_train_prior(train_prior, n_classes)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}.")
    max_iter = check_int(max_iter, "max_iter", low=1)
    tol = check_real(tol, "tol", low=0, closed="neither")
    if method == "map":
        a = check_real(dirichlet_alpha, "dirichlet_alpha", low=1)
        concentration = a - 1.0
    else:
        concentration = 0.0
    start = train if init is None else check_prior(init, n_classes, name="init")
    if concentration > 0 and np.any(start == 0):
        start = (start + 1e-3 / n_classes) / (1 + 1e-3)  # MAP lives in the interior
    elif np.any(start == 0):
        # EM keeps a class at 0 where it starts; a row with all its mass there
        # has likelihood 0 at every such prior, and the estimate is undefined.
        stranded = np.flatnonzero(~(proba[:, start > 0].sum(axis=1) > 0))
        if stranded.size:
            raise ValueError(
                f"init is 0 on every class that row {int(stranded[0])} of proba "
                f"gives probability to ({stranded.size} such rows), so the "
                f"likelihood is 0 there and no solver can start from it. Pass "
                f"an init that is positive on every class, or init=None (the "
                f"training prior)."
            )

    # float64 once: a float32 matrix would be converted in every product.
    problem = _Problem(proba.astype(np.float64), train, concentration, tol)
    prior, n_iter, converged, log_d = _SOLVERS[solver](problem, start, max_iter, tol)
    if not converged:
        warnings.warn(
            f"The {method.upper()} prior estimate ({solver}) did not converge in "
            f"max_iter={max_iter} iterations to tol={tol:g}. Increase max_iter, "
            f"use solver='squarem' (fast when classes are absent from the batch), "
            f"or method='map'.",
            ConvergenceWarning,
            stacklevel=2,
        )
    return PriorEstimate(
        prior=prior,
        n_iter=int(n_iter),
        n_passes=int(problem.n_passes),
        converged=bool(converged),
        objective=problem.objective(prior, log_d),
    )


def bbse_test_prior(proba, confusion):
    r"""Black-box shift estimation of the test prior (Lipton et al., 2018).

    With the joint confusion matrix :math:`C_{ij} = P(\hat y = i, y = j)` of
    labelled held-out data and :math:`\hat\mu_i` the frequency of the hard
    prediction :math:`i` on the batch, solve :math:`C w = \hat\mu` (least
    squares, minimum norm when :math:`C` is singular), clip :math:`w \ge 0`
    and return :math:`\pi \propto w \odot q_{\text{held-out}}` with
    :math:`q_{\text{held-out},j} = \sum_i C_{ij}`.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Posteriors of the batch; the hard prediction is the argmax of each row.
    confusion : array-like of shape (n_classes, n_classes)
        Joint confusion matrix, predictions in rows and true labels in columns,
        summing to one. (scikit-learn's ``confusion_matrix(y, y_pred,
        normalize="all")`` is its transpose.)

    Returns
    -------
    prior : ndarray of shape (n_classes,)
        The estimate. If every ``w`` clips to 0, the held-out prior.

    Notes
    -----
    A class never predicted on the held-out data makes a zero row of ``C``;
    the system is then singular and ``lstsq`` returns the minimum-norm
    solution: the estimate is still defined but less reliable.

    References
    ----------
    .. [1] Lipton, Wang and Smola, "Detecting and correcting for label shift
       with black box predictors", ICML 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import bbse_test_prior
    >>> confusion = np.array([[0.4, 0.1], [0.1, 0.4]])
    >>> bbse_test_prior(np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]]), confusion)
    array([0.77777778, 0.22222222])
    """
    proba = check_proba(proba)
    n_classes = proba.shape[1]
    confusion = np.array(confusion, dtype=np.float64)
    if confusion.shape != (n_classes, n_classes):
        raise ValueError(
            f"confusion must be of shape ({n_classes}, {n_classes}) for "
            f"{n_classes} classes, got {confusion.shape}."
        )
    if (
        not np.all(np.isfinite(confusion))
        or np.any(confusion < 0)
        or abs(confusion.sum() - 1) > 1e-6
    ):
        raise ValueError(
            "confusion must be a joint distribution: finite, non-negative, "
            "summing to 1 (divide the counts by their total)."
        )
    predicted = np.bincount(np.argmax(proba, axis=1), minlength=n_classes)
    return _bbse_from_frequencies(predicted / proba.shape[0], confusion)


def _bbse_from_frequencies(frequencies, confusion):
    held_out_prior = confusion.sum(axis=0)
    weights, *_ = np.linalg.lstsq(confusion, frequencies, rcond=None)
    prior = np.maximum(weights, 0.0) * held_out_prior
    total = prior.sum()
    return prior / total if total > 0 else held_out_prior / held_out_prior.sum()
