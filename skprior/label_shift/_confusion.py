"""Confusion-based estimates of the test prior (black-box shift estimation).

The joint confusion matrix of labelled held-out data
(:func:`joint_confusion_matrix`) and the test priors it gives with the hard
predictions of an unlabelled batch: black-box shift estimation
(:func:`bbse_test_prior`) and its regularised form RLLS
(:func:`rlls_test_prior`). Unlike the likelihood estimates of ``_prior.py`` they
do not need calibrated posteriors, only a confusion matrix ``P(predicted | true)``
that holds between held-out and test data. Their solves, on
``K``-vectors on the host, are at the end of the module.
"""

from numbers import Real

import numpy as np
from scipy.optimize import brentq, nnls

from skprior._utils._constraints import constraints
from skprior._utils._kernels import single_blas_thread
from skprior._utils._options import (
    DEFAULT_BBSE_PROJECTION,
    DEFAULT_RLLS_REG,
    RLLS_DELTA,
)
from skprior._utils._sklearn_compat import validate_params
from skprior._utils._validation import (
    check_class_count,
    check_confusion,
    check_proba,
    warn_user,
)
from skprior._utils._validation_labels import check_class_indices, check_sample_weight
from skprior.label_shift._estimate_warnings import warn_if_few_predictions
from skprior.label_shift._solvers import (
    joint_confusion,
    like,
    predicted_counts,
    project_to_simplex,
)

# Above these the K x K solves run for minutes: refused, with the alternative.
MAX_BBSE_CLASSES = 3000
MAX_RLLS_CLASSES = 1000
_LARGE_K_ALTERNATIVE = (
    "Use estimate_test_prior (EM: O(n K) per pass), or method='mle' of "
    "PriorAdaptedClassifier."
)


@validate_params(
    constraints(proba="array", confusion="array", projection="bbse_projection"),
    prefer_skip_nested_validation=True,
)
def bbse_test_prior(proba, confusion, *, projection=DEFAULT_BBSE_PROJECTION):
    r"""Black-box shift estimation of the test prior (Lipton et al., 2018).

    With the joint confusion matrix :math:`C_{ij} = P(\hat y = i, y = j)` of
    labelled held-out data and :math:`\hat\mu_i` the frequency of the hard
    prediction :math:`i` on the batch, solve :math:`C w = \hat\mu` (least
    squares, minimum norm when :math:`C` is singular) for the importance
    weights :math:`w = \pi / q_{\text{held-out}}`, with
    :math:`q_{\text{held-out},j} = \sum_i C_{ij}`. The unconstrained estimate
    :math:`\tilde\pi = w \odot q_{\text{held-out}}` sums to one when
    :math:`C` is invertible (:math:`1^\top C = q_{\text{held-out}}^\top`) but
    can be negative; it is mapped to a prior by

    - ``projection="simplex"``: the Euclidean projection onto the simplex,
      :math:`\arg\min_{\pi \in \Delta} \|\pi - \tilde\pi\|_2`;
    - ``projection="clip"``: :math:`\pi \propto \max(\tilde\pi, 0)`, the
      clip-and-renormalise of Lipton et al.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Posteriors of the batch; the hard prediction is the argmax of each row.
    confusion : array-like of shape (n_classes, n_classes)
        Joint confusion matrix, predictions in rows and true labels in columns,
        summing to one (:func:`joint_confusion_matrix`). (scikit-learn's
        ``confusion_matrix(y, y_pred, normalize="all")`` is its transpose.)
    projection : {"simplex", "clip"}, default="simplex"
        How a negative estimate is made a prior. The projection is never
        farther (in Euclidean norm) from the true prior than the unconstrained
        estimate, since the true prior lies in the simplex, a convex set;
        clipping and renormalising has no such guarantee, and moves every
        positive entry when it rescales. ``"clip"`` was the only behaviour
        before version 0.1 added the parameter.

    Returns
    -------
    prior : ndarray of shape (n_classes,)
        The estimate. With ``"clip"``, the held-out prior if every ``w`` clips
        to 0. In the namespace, on the device and in the float dtype of
        ``proba`` (computed in float64).

    See Also
    --------
    rlls_test_prior : The regularised estimate, for small batches.
    joint_confusion_matrix : The matrix ``C``.

    Notes
    -----
    More than 3,000 classes are refused (the solve grows as :math:`K^3`: 42 s
    at 3,000); :func:`estimate_test_prior` costs :math:`O(nK)` per pass.

    A class never predicted on the held-out data makes a zero row of ``C``,
    and classes that the hard predictions do not tell apart make dependent
    columns; the system is then singular and ``lstsq`` returns the
    minimum-norm solution: the estimate is still defined but partly
    arbitrary, and a warning says so.

    On the label-shift benchmark (``benchmarks/bench_label_shift.py``) the two
    mappings differ only where the estimate goes negative (strong shifts);
    there the projection had the lower mean L1 error (see
    ``docs/results_prior.md``).

    References
    ----------
    .. [1] Lipton, Wang and Smola, "Detecting and correcting for label shift
       with black box predictors", ICML 2018.
    .. [2] Duchi, Shalev-Shwartz, Singer and Chandra, "Efficient projections
       onto the l1-ball for learning in high dimensions", ICML 2008.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import bbse_test_prior
    >>> confusion = np.array([[0.4, 0.1], [0.1, 0.4]])
    >>> bbse_test_prior(np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]]), confusion)
    array([0.77777778, 0.22222222])

    A batch with no prediction of class 2 makes the unconstrained estimate
    negative there:

    >>> confusion = [[0.2, 0.05, 0.05], [0.05, 0.2, 0.05], [0.0, 0.05, 0.35]]
    >>> batch = np.eye(3)[[0, 0, 0, 0, 0, 1, 1, 1, 1, 1]]
    >>> bbse_test_prior(batch, confusion).round(4)
    array([0.4485, 0.5515, 0.    ])
    >>> bbse_test_prior(batch, confusion, projection="clip").round(4)
    array([0.4545, 0.5455, 0.    ])
    """
    proba = check_proba(proba)
    confusion = check_confusion(confusion, proba.shape[1])
    warn_if_few_predictions(*proba.shape, "BBSE")
    frequencies = predicted_counts(proba) / proba.shape[0]
    prior = bbse_from_frequencies(frequencies, confusion, projection)
    return like(prior, proba)


@validate_params(
    constraints(proba="array", confusion="array", reg="rlls_reg"),
    prefer_skip_nested_validation=True,
)
def rlls_test_prior(proba, confusion, *, reg=DEFAULT_RLLS_REG):
    r"""Regularised black-box shift estimation: RLLS (Azizzadenesheli et al., 2019).

    With :math:`C` and :math:`\hat\mu` as in :func:`bbse_test_prior`, the
    importance weights :math:`w = \pi / q_{\text{held-out}} = 1 + \theta`
    solve

    .. math::

        \hat\theta = \arg\min_{\theta \ge -1}
        \|C\theta - \hat b\|_2 + \Delta \|\theta\|_2,
        \qquad \hat b = \hat\mu - C\mathbf{1},

    (the norms are not squared) and :math:`\pi \propto q_{\text{held-out}}
    \odot (1 + \hat\theta)`. The constraint keeps every weight
    non-negative; the penalty pulls the weights towards 1, "no shift". It is
    the worst case of the residual over confusion matrices within
    :math:`\Delta` of :math:`C` in spectral norm,
    :math:`\max_{\|E\|_2 \le \Delta} \|(C + E)\theta - \hat b\|_2`:
    :math:`\Delta` is the uncertainty of :math:`C` that the estimate guards
    against.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Posteriors of the batch; the hard prediction is the argmax of each row.
    confusion : array-like of shape (n_classes, n_classes)
        Joint confusion matrix, predictions in rows and true labels in columns,
        summing to one (:func:`joint_confusion_matrix`).
    reg : float >= 0 or "auto", default="auto"
        :math:`\Delta`. ``0`` gives least squares under the constraint
        :math:`w \ge 0` (BBSE constrained in the solve instead of clipped
        afterwards); large values give the held-out prior (no shift).
        ``"auto"``: :math:`\Delta = \sigma_{\min}(C)\sqrt{\log(2K/\delta)/n}`
        with :math:`n` the batch size, :math:`K` the number of classes and
        :math:`\delta = 0.05`; see the notes. A singular :math:`C` (a class
        never predicted on the held-out data: a zero row) has
        :math:`\sigma_{\min}(C) = 0`, so ``"auto"`` is 0 there; pass a float
        to shrink such an estimate.

    Returns
    -------
    prior : ndarray of shape (n_classes,)
        The estimate (the held-out prior if every weight is 0), in the
        namespace, on the device and in the float dtype of ``proba``.

    See Also
    --------
    bbse_test_prior : The unregularised estimate.
    joint_confusion_matrix : The matrix ``C``.

    Notes
    -----
    More than 1,000 classes are refused (the constrained solves grow faster
    than :math:`K^3`: 296 s at 2,000); :func:`estimate_test_prior` costs
    :math:`O(nK)` per pass.

    *How much the penalty does.* Because the norms are not squared, the
    penalty is exact rather than a smooth shrinkage: :math:`\theta = 0` is the
    solution as soon as :math:`\|C^\top \hat b\| \le \Delta \|\hat b\|`,
    and when :math:`C \hat\theta = \hat b` has a feasible solution and
    :math:`\Delta` is below the smallest singular value of :math:`C`, the
    solution is that of BBSE, unchanged. Between those ends the estimate moves
    towards "no shift" along the poorly determined directions of :math:`C`.

    *The default.* The paper ties :math:`\Delta` to a high-probability bound
    on the estimation error of :math:`C`, of order
    :math:`\sqrt{\log(K/\delta)/n}`. ``"auto"`` keeps that rate, with
    :math:`n` the number of predictions in the batch, so that the penalty
    grows on small batches (it doubles when the batch is four times smaller),
    and measures it in units of :math:`\sigma_{\min}(C)`, the scale it is
    compared with in the optimality conditions. An absolute :math:`\Delta`
    of that rate was measured to collapse the estimate to the held-out prior
    on imbalanced held-out data (rare classes have tiny columns in :math:`C`,
    so their weights must be large) and with 100 classes; the relative one
    does not, and only acts once :math:`n < \log(2K/\delta)` or when the
    constraint binds. On the label-shift benchmark its L1 error is close to
    BBSE's: lower under mild shifts, slightly higher under strong ones (see
    ``docs/results_prior.md``). Pass a float to set :math:`\Delta` yourself.

    *The solver.* The problem is convex, :math:`K`-dimensional and not smooth.
    Its solution lies on the path of the bound-constrained ridge problems
    :math:`\theta(\lambda) = \arg\min_{\theta \ge -1} \|C\theta - \hat b\|^2
    + \lambda\|\theta\|^2`: their optimality conditions divided by
    :math:`2\|C\theta - \hat b\|` are those of RLLS exactly when
    :math:`\lambda\|\theta(\lambda)\| = \Delta\|C\theta(\lambda) - \hat b\|`.
    Each :math:`\theta(\lambda)` is a non-negative least-squares problem
    solved exactly (active set), and the scalar equation in :math:`\lambda` by
    Brent's method; the no-shift and the zero-residual ends are closed-form.

    References
    ----------
    .. [1] Azizzadenesheli, Liu, Yang and Anandkumar, "Regularized learning
       for domain adaptation under label shifts", ICLR 2019.
    .. [2] Lipton, Wang and Smola, "Detecting and correcting for label shift
       with black box predictors", ICML 2018.
    .. [3] El Ghaoui and Lebret, "Robust solutions to least-squares problems
       with uncertain data", SIAM Journal on Matrix Analysis and Applications
       18(4), 1997.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import rlls_test_prior
    >>> confusion = np.array([[0.4, 0.1], [0.1, 0.4]])
    >>> proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]])
    >>> rlls_test_prior(proba, confusion, reg=0.0)  # BBSE: the system is solvable
    array([0.77777778, 0.22222222])
    >>> rlls_test_prior(proba, confusion, reg=1.0)  # no shift: the held-out prior
    array([0.5, 0.5])
    """
    proba = check_proba(proba)
    confusion = check_confusion(confusion, proba.shape[1])
    frequencies = predicted_counts(proba) / proba.shape[0]
    prior = rlls_from_frequencies(frequencies, confusion, reg, proba.shape[0])
    return like(prior, proba)


@validate_params(
    constraints(proba="array", y="array", sample_weight="optional_array"),
    prefer_skip_nested_validation=True,
)
def joint_confusion_matrix(proba, y, *, sample_weight=None):
    r"""Joint confusion matrix of labelled held-out posteriors, for BBSE.

    :math:`C_{ij} = \sum_n w_n [\hat y_n = i][y_n = j] / \sum_n w_n`, with
    :math:`\hat y_n = \arg\max_k p_{nk}` the hard prediction: predictions in
    rows, true labels in columns, summing to one (the transpose of
    scikit-learn's ``confusion_matrix(y, y_pred, normalize="all")``).

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Posteriors on labelled held-out data; rows sum to one.
    y : array-like of shape (n_samples,)
        The true classes as column indices ``0..n_classes-1`` of ``proba``.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights; ``None`` means 1.

    Returns
    -------
    confusion : ndarray of shape (n_classes, n_classes)
        :math:`C`, for :func:`bbse_test_prior`, in the namespace, on the
        device and in the float dtype of ``proba``.

    See Also
    --------
    bbse_test_prior : The test prior from this matrix and an unlabelled batch.

    References
    ----------
    .. [1] Lipton, Wang and Smola, "Detecting and correcting for label shift
       with black box predictors", ICML 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import joint_confusion_matrix
    >>> proba = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8]])
    >>> joint_confusion_matrix(proba, [0, 1, 1])
    array([[0.33333333, 0.33333333],
           [0.        , 0.33333333]])
    """
    proba = check_proba(proba)
    n_samples, n_classes = proba.shape
    y = check_class_indices(y, n_samples, n_classes, name="proba", like=proba)
    weights = check_sample_weight(sample_weight, n_samples, like=proba)
    return like(joint_confusion(proba, y, weights), proba)


# -- the solves, on the host ------------------------------------------------------


def _warn_if_unseen(held_out_prior, method):
    """Warn of classes without held-out rows (zero columns of ``C``).

    Their column of ``C`` is 0, so nothing in the batch's predictions tells
    their share: the estimate gives them what the solve leaves (0, or the
    simplex projection's offset), whatever the batch holds.
    """
    unseen = np.flatnonzero(held_out_prior <= 0)
    if unseen.size:
        warn_user(
            f"{method}: the classes at columns {unseen.tolist()[:10]} have no rows "
            f"in the labelled held-out data behind the confusion matrix (zero "
            f"columns), so their test prior cannot be estimated and is set "
            f"arbitrarily (near 0). Build the confusion matrix from held-out data "
            f"holding every class, or use estimate_test_prior (EM on the "
            f"posteriors)."
        )


def _warn_if_unidentified(rank, held_out_prior):
    """Warn when ``C`` is singular beyond its zero columns (warned apart).

    The batch's prediction frequencies then fix the weights only up to the
    null space of ``C``: some classes are not told apart by the model's hard
    predictions, or one is never predicted on the held-out data (a zero
    row), and ``lstsq``'s least-norm solution sets that part arbitrarily.
    """
    seen = int(np.count_nonzero(held_out_prior > 0))
    if rank < seen:
        warn_user(
            f"BBSE: the confusion matrix has rank {rank} for {seen} classes with "
            f"held-out rows: the model's hard predictions do not tell some "
            f"classes apart, or never name one on the held-out data (a zero "
            f"row), so the batch's predictions do not determine the test prior, "
            f"and the estimate (least squares of least norm) is partly "
            f"arbitrary. Use estimate_test_prior (EM on the posteriors), or "
            f"rlls_test_prior with reg > 0, which pulls the estimate towards "
            f"the held-out prior."
        )


def bbse_from_frequencies(frequencies, confusion, projection="clip"):
    """Solve ``C w = mu`` (least squares) and map ``w * q_held_out`` to a prior.

    ``projection="clip"``: clip ``w >= 0`` and renormalise; the held-out prior
    ``q_held_out = C.sum(axis=0)`` when every weight clips to 0.
    ``projection="simplex"``: the Euclidean projection of ``w * q_held_out``
    onto the simplex.
    """
    check_class_count(
        confusion.shape[0],
        MAX_BBSE_CLASSES,
        "BBSE",
        "its least-squares solve grows as K**3 (42 s at 3,000 classes)",
        _LARGE_K_ALTERNATIVE,
    )
    held_out_prior = confusion.sum(axis=0)
    _warn_if_unseen(held_out_prior, "BBSE")
    with single_blas_thread():  # (see rlls_from_frequencies)
        weights, _, rank, _ = np.linalg.lstsq(confusion, frequencies, rcond=None)
    _warn_if_unidentified(rank, held_out_prior)
    if projection == "simplex":
        return project_to_simplex(weights * held_out_prior)
    prior = np.maximum(weights, 0.0) * held_out_prior
    total = prior.sum()
    return prior / total if total > 0 else held_out_prior / held_out_prior.sum()


def _ridge_weights(confusion, frequencies, lam):
    """``argmin_{w >= 0} ||C w - mu||^2 + lam ||w - 1||^2``, exactly (NNLS).

    The stacked system ``[C; sqrt(lam) I] w = [mu; sqrt(lam) 1]`` turns the
    bound-constrained ridge problem into non-negative least squares, which
    scipy's active-set solver (Lawson and Hanson) solves in finitely many steps.
    """
    if lam == 0:
        return nnls(confusion, frequencies, maxiter=50 * confusion.shape[1])[0]
    root = np.sqrt(lam)
    n_classes = confusion.shape[1]
    stacked = np.vstack([confusion, root * np.eye(n_classes)])
    target = np.concatenate([frequencies, np.full(n_classes, root)])
    return nnls(stacked, target, maxiter=50 * n_classes)[0]


def rlls_weights(frequencies, confusion, reg):
    r"""Importance weights ``w = 1 + theta`` of RLLS (Azizzadenesheli et al., 2019).

    ``theta = argmin ||C theta - b||_2 + reg ||theta||_2`` subject to
    ``theta >= -1``, with ``b = mu - C 1``; the norms are not squared.

    The problem is convex but not smooth (at ``theta = 0`` and wherever the
    residual is 0), so it is not handed to a smooth solver. Its solution lies
    on the path of the bound-constrained ridge problems
    ``theta(lam) = argmin_{theta >= -1} ||C theta - b||^2 + lam ||theta||^2``:
    dividing the ridge stationarity condition
    ``2 C^T r + 2 lam theta - nu = 0`` (``r = C theta - b``, ``nu >= 0`` the
    bound multipliers) by ``2 ||r||`` gives the RLLS one,
    ``C^T r / ||r|| + reg theta / ||theta|| - nu' = 0``, exactly when
    ``lam = reg ||r|| / ||theta||``. So the solution is ``theta(lam*)`` at a
    root of the scalar equation ``lam ||theta(lam)|| / ||r(lam)|| = reg``,
    found by Brent's method on ``log lam``; each ``theta(lam)`` is an exact
    NNLS solve (``_ridge_weights``). The ends of the path are handled in
    closed form:

    - ``theta = 0`` (no shift) is optimal iff ``||C^T b|| <= reg ||b||`` (the
      subgradient condition at 0, an interior point of the constraint);
    - when the ratio stays at or above ``reg`` down to ``lam -> 0`` (in
      particular ``reg = 0``, or a residual of 0 with ``reg`` below the
      smallest singular value of ``C`` along the solution), the solution is the
      constrained least-squares one, ``lam = 0`` (the ``lam -> 0`` limit,
      the least-norm ``theta``, when ``C`` is singular).

    Any root satisfies the optimality conditions of the convex problem, so no
    monotonicity of the ratio is needed beyond a sign change, which the two
    end cases guarantee.
    """
    n_classes = confusion.shape[1]
    ones = np.ones(n_classes)
    b = frequencies - confusion @ ones
    b_norm = np.linalg.norm(b)
    if b_norm == 0 or np.linalg.norm(confusion.T @ b) <= reg * b_norm:
        return ones
    scale = np.linalg.norm(confusion, 2) ** 2  # lam's natural unit
    full_rank = np.linalg.matrix_rank(confusion) == n_classes

    def gap(log_lam):
        lam = np.exp(log_lam)
        weights = _ridge_weights(confusion, frequencies, lam)
        residual = np.linalg.norm(confusion @ weights - frequencies)
        if residual == 0:
            return np.inf
        return lam * np.linalg.norm(weights - 1) / residual - reg

    # Bracket a root by steps of e^2 outward from lam = ||C||^2, stopping at
    # the first sign change: far out, theta = w - 1 (tiny for huge lam) and a
    # residual of order lam (tiny lam) are lost to rounding.
    middle = np.log(scale)
    if gap(middle) < 0:
        low, high = middle, middle + 2
        while gap(high) < 0:  # the ratio tends to ||C^T b|| / ||b|| > reg
            low, high = high, high + 2
            if high > middle + 60:  # theta below rounding: no shift
                return _ridge_weights(confusion, frequencies, np.exp(high))
    else:
        low, high = middle - 2, middle
        while gap(low) >= 0:
            low, high = low - 2, low
            if low < middle - 30:  # the lam -> 0 end: least squares
                lam = 0.0 if full_rank else np.exp(low)
                return _ridge_weights(confusion, frequencies, lam)
    root = brentq(gap, low, high, xtol=1e-14, rtol=4 * np.finfo(float).eps)
    return _ridge_weights(confusion, frequencies, np.exp(root))


def check_rlls_reg(reg):
    """Refuse an RLLS penalty that is not a number >= 0 or ``"auto"``.

    Also where scikit-learn's parameter check does not run: a wrapper's
    ``rlls_reg`` set after ``fit``, checked before a stream's state changes.
    """
    if isinstance(reg, str) and reg == "auto":
        return
    is_number = isinstance(reg, Real) and not isinstance(reg, bool)
    if not is_number or not reg >= 0:
        raise ValueError(
            f"reg={reg!r}: RLLS takes a penalty >= 0 or 'auto'. Pass "
            f"reg='auto' (the default), reg=0.0 (BBSE) or a number."
        )


def rlls_from_frequencies(frequencies, confusion, reg, n_samples):
    """The RLLS prior ``q_held_out * w`` renormalised (``reg`` may be "auto").

    The held-out prior ``q_held_out = C.sum(axis=0)`` when every weight is 0.
    The ``K x K`` factorisations and solves run with one BLAS thread: more buy
    nothing at this size, and when the cores are busy a multi-threaded call
    waits for a thread that is not scheduled (K = 100: 2x slower with a second
    busy process on two cores).
    """
    check_rlls_reg(reg)
    check_class_count(
        confusion.shape[0],
        MAX_RLLS_CLASSES,
        "RLLS",
        "its constrained solves grow faster than K**3 (296 s at 2,000 classes)",
        _LARGE_K_ALTERNATIVE,
    )
    with single_blas_thread():
        if isinstance(reg, str):
            # "auto": sigma_min(C) sqrt(log(2 K / delta) / n), the paper's rate
            # sqrt(log(K / delta) / n) in the units of C^T u (||u|| <= 1), which
            # the penalty is compared with in the optimality conditions: so it
            # depends neither on K nor on the held-out prior's imbalance (see
            # rlls_test_prior). n is the number of predictions (the batch).
            sigma_min = np.linalg.svd(confusion, compute_uv=False)[-1]
            log_term = np.log(2 * confusion.shape[0] / RLLS_DELTA)
            reg = float(sigma_min * np.sqrt(log_term / n_samples))
        held_out_prior = confusion.sum(axis=0)
        _warn_if_unseen(held_out_prior, "RLLS")
        prior = rlls_weights(frequencies, confusion, reg) * held_out_prior
    total = prior.sum()
    return prior / total if total > 0 else held_out_prior / held_out_prior.sum()
