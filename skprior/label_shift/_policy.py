"""The policy of adapting a batch: test for shift, then estimate, then adjust.

Adapting when nothing changed costs accuracy and log loss: the estimated prior
carries the sampling noise of the batch, and with a weak or class-wise
miscalibrated model the maximum-likelihood estimate can drive most classes to
~0 on data with no shift at all. :func:`label_shift_test` asks first whether
the batch's mean posterior differs from the one seen without shift by more
than its sampling noise (class by class, or by Hotelling's T^2 where the
reference's rows are many against the classes); :func:`shift_gated_prior`,
the one place where that decision is made, estimates the prior only when it
does, for both :class:`~skprior.PriorAdaptedClassifier` and ``skprior adapt``.
The class-by-class numerics are in ``_shift_solvers.py``, Hotelling's here.
"""

import dataclasses

import numpy as np

from skprior._utils import _kernels
from skprior._utils._array_api import (
    blocks,
    device_of,
    from_host,
    get_namespace,
    per_row,
    to_host,
    work_dtype,
)
from skprior._utils._constraints import check_level, constraints
from skprior._utils._options import DEFAULT_SHIFT_LEVEL
from skprior._utils._sklearn_compat import validate_params
from skprior._utils._validation import check_prior, check_proba, warn_user
from skprior._utils._validation_arrays import on_host
from skprior._utils._validation_labels import check_sample_weight
from skprior.label_shift._shift_solvers import (
    NoShiftReference,
    varying,
    weighted_moments,
)
from skprior.label_shift._solvers import mean_posterior

# Hotelling's T^2 replaces the standardised sum of squares where the reference
# holds at least this many (effective) rows per class: there its covariance is
# estimated well enough for the F tail (at most 4 of 100 batches without shift
# declared shifted at level 0.01 on the CIFAR outputs, 10 and 100 classes,
# batches of 20 to 1,000 rows; 10 and 17 rows per class gave 6 to 18), and it
# weighs the classes' correlations, which the class-by-class statistic ignores
# (a weak CIFAR-100 model, 5,000 / 1,000 rows: 22 of 100 mild shifts found
# against 9). benchmarks/bench_shift_test_level.py has the tables.
_HOTELLING_ROWS_PER_CLASS = 50
# ... and at most this many classes: a K x K covariance and its eigenvectors.
_HOTELLING_CLASSES = 1000


@dataclasses.dataclass(frozen=True)
class ShiftTest:
    """The result of :func:`label_shift_test`.

    Attributes
    ----------
    statistic : float
        The gap of the batch's mean posterior from the reference's: the
        standardised sum of squares :math:`T`, or Hotelling's :math:`T^2`
        where the reference holds 50 rows per class (see
        :func:`label_shift_test`).
    pvalue : float
        Its upper-tail probability under "no shift"; ``nan`` when the test
        cannot be run (too few rows behind the variances).
    dof : int
        Classes tested (those whose posteriors vary in the reference), or for
        Hotelling's :math:`T^2` the directions of the reference's covariance
        that vary (``n_classes - 1`` as a rule).
    shifted : bool
        Whether ``pvalue <= level``: the batch's prior differs from the
        reference's. ``False`` when the test cannot be run.

    See Also
    --------
    label_shift_test : The function that returns it.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import label_shift_test
    >>> reference = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.4, 0.6]])
    >>> label_shift_test(reference[:2], reference).shifted
    False
    """

    statistic: float
    pvalue: float
    dof: int
    shifted: bool


@validate_params(
    {
        **constraints(proba="array", reference="array", sample_weight="optional_array"),
        **constraints(level="shift_level"),
    },
    prefer_skip_nested_validation=True,
)
def label_shift_test(
    proba, reference, *, sample_weight=None, level=DEFAULT_SHIFT_LEVEL
):
    r"""Test whether a batch's class prior differs from the reference's.

    Under label shift the mean posterior of a batch moves linearly with its
    class prior, :math:`E[p_k] = \sum_j \pi_j E[p_k \mid y = j]` (the soft
    confusion matrix of black-box shift detection, Lipton et al., 2018;
    Rabanser et al., 2019), so "no shift" means the batch's mean posterior
    :math:`\bar p` equals the reference's :math:`\mu`. Which statistic
    measures the gap depends on how many reference rows there are per class.

    With fewer than 50 (effective) reference rows per class, or more than
    1,000 classes, it is the standardised sum of squares of
    high-dimensional mean tests (Srivastava and Du, 2008; Chen and Qin, 2010)

    .. math:: T = n_{\mathrm{eff}} \sum_k (\bar p_k - \mu_k)^2 / v_k,

    with :math:`v_k` the variance of class :math:`k`'s posteriors pooled over
    the reference and the batch (and the gap between their means: the
    variance under "no shift"). Its null mean is :math:`\mathrm{tr}(R)` and
    its variance :math:`2\,\mathrm{tr}(R^2)`, :math:`R` the posteriors'
    correlation matrix, estimated from the reference; the p-value is the tail
    of the scaled :math:`\chi^2` with those two moments (Satterthwaite, 1946).
    No :math:`K \times K` matrix is formed (10,000 classes in about a second).

    From 50 reference rows per class (and up to 1,000 classes) it is
    Hotelling's (1931) :math:`T^2 = n_{\mathrm{eff}} (\bar p - \mu)^\top
    S^{+} (\bar p - \mu)`, :math:`S` the reference's covariance (its
    directions of ~0 variance, the sum-to-one one at least, left out: ``dof``
    of them remain), whose :math:`T^2 (m - d) / (d (m - 1))` is
    :math:`F(d, m - d)` (a batch whose mean moves along a direction left
    out, such as a class no reference row gives mass to, is tested class by
    class: :math:`T^2` cannot see it). It weighs the classes' correlations, which the
    class-by-class statistic ignores: against a weak model's correlated
    posteriors it finds more shifts (LeNet-5 on CIFAR-100, 5,000 reference
    and 1,000 batch rows: 28 of 100 mild shifts found, against 10). With
    fewer rows per class its inverse covariance divides by directions of
    near-zero *estimated* variance, and it declares batches without shift
    shifted far beyond the level (CIFAR-100, 300 / 300 rows: 30 to 98 in
    100 at level 0.01), where the class-by-class statistic holds it (at most
    2 in 100 on every shipped CIFAR output: ``benchmarks/bench_shift_test_level.py``).

    Both null distributions rest on the central limit theorem for the mean
    of the rows, not on calibration: a miscalibrated model's posteriors are
    compared with that same model's posteriors on data without shift.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Posteriors of the batch.
    reference : array-like of shape (n_reference, n_classes) or (n_classes,)
        What the batch is compared with. Two-dimensional (recommended): the
        same model's posteriors on data without shift, such as the
        validation data whose labels give the training prior; :math:`\mu`,
        the variances, :math:`R` and :math:`S` are theirs, and
        :math:`n_{\mathrm{eff}} = 1 / (1/n + 1/m)` counts the noise of both
        means (:math:`m` reference rows, Kish's effective size with weights).
        One-dimensional: a prior :math:`q` that the batch's mean posterior
        equals without shift -- true of a calibrated model only, since a
        miscalibrated model's mean posterior differs from its training prior
        with no shift at all; then the class-by-class statistic is used, the
        variances and :math:`R` are the batch's own and :math:`n > K` rows
        are needed.
    sample_weight : array-like of shape (n_reference,), default=None
        Weights of the reference rows (two-dimensional ``reference`` only).
    level : float in (0, 1], default=0.01
        Significance level: ``shifted`` when ``pvalue <= level``.

    Returns
    -------
    result : ShiftTest
        ``statistic``, ``pvalue``, ``dof`` and ``shifted``.

    Warns
    -----
    UserWarning
        When the test cannot be run: a one-dimensional reference with a batch
        of at most ``n_classes`` rows.

    See Also
    --------
    PriorAdaptedClassifier : Runs this test before adapting (``shift_level``).
    estimate_test_prior : The estimate that follows a rejection.

    Notes
    -----
    At the default level one batch without shift in a hundred is declared
    shifted. A batch drawn from a reference split at random is the null
    hypothesis exactly; a batch from another source (another hospital,
    another camera) may differ in more than its prior, and is then declared
    shifted as well: the test detects any change of the mean posterior.

    References
    ----------
    .. [1] Lipton, Wang and Smola, "Detecting and correcting for label shift
       with black box predictors", ICML 2018.
    .. [2] Rabanser, Gunnemann and Lipton, "Failing loudly: an empirical study
       of methods for detecting dataset shift", NeurIPS 2019.
    .. [3] Srivastava and Du, "A test for the mean vector with fewer
       observations than the dimension", Journal of Multivariate Analysis
       99(3), 2008.
    .. [4] Chen and Qin, "A two-sample test for high-dimensional data with
       applications to gene-set testing", Annals of Statistics 38(2), 2010.
    .. [5] Satterthwaite, "An approximate distribution of estimates of
       variance components", Biometrics Bulletin 2(6), 1946.
    .. [6] Hotelling, "The generalization of Student's ratio", Annals of
       Mathematical Statistics 2(3), 1931.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import label_shift_test
    >>> rng = np.random.default_rng(0)
    >>> reference = rng.dirichlet([1.0, 1.0, 1.0], size=500)
    >>> label_shift_test(reference[:100], reference).shifted
    False
    >>> skewed = reference[np.argsort(reference[:, 0])[-100:]]  # class 0 likely
    >>> label_shift_test(skewed, reference).shifted
    True
    """
    proba = check_proba(proba)
    n_classes = proba.shape[1]
    if (reference.ndim if hasattr(reference, "ndim") else np.ndim(reference)) == 1:
        if sample_weight is not None:
            raise ValueError(
                "sample_weight weighs the rows of a two-dimensional reference; "
                "with a prior as reference there are none. Drop sample_weight."
            )
        reference = check_prior(on_host(reference), n_classes, name="reference")
        return ShiftGate(reference).test(proba, level)
    reference = check_proba(reference, name="reference")
    if reference.shape[1] != n_classes:
        raise ValueError(
            f"reference has {reference.shape[1]} classes and proba "
            f"{n_classes}: pass the same model's posteriors, with the "
            f"classes in the same columns."
        )
    weights = check_sample_weight(on_host(sample_weight), reference.shape[0])
    return ShiftGate(reference, weights).test(proba, level)


class ShiftGate:
    """What a batch is tested against before it is adapted.

    ``reference``: the model's checked posteriors on data without shift (any
    namespace; their weighted mean, variances and, where the rows are many
    against the classes, the whitening map of their covariance are kept), or
    a checked prior, when the batch's own covariance is used and a rejection
    cannot tell a shift from a miscalibrated model (``conclusive`` is False).
    """

    def __init__(self, reference, weights=None):
        self.conclusive = reference.ndim == 2
        self.expected = reference
        self.reference = self.whitening = None
        if self.conclusive:
            self.reference = NoShiftReference.from_proba(reference, weights)
            n_classes = reference.shape[1]
            if (
                n_classes <= _HOTELLING_CLASSES
                and self.reference.n_reference >= _HOTELLING_ROWS_PER_CLASS * n_classes
            ):
                self.whitening = whitening(reference, weights, self.reference)

    def test(self, proba, level):
        """The :class:`ShiftTest` of the checked batch ``proba`` at ``level``."""
        check_level(level)
        n_rows, n_classes = proba.shape
        if self.reference is None:
            if n_rows <= n_classes:
                warn_user(
                    f"label_shift_test with a prior as reference estimates the "
                    f"posteriors' variances from the batch, which needs more "
                    f"rows than classes ({n_rows} rows for {n_classes} classes): "
                    f"the test is not run and the batch is not declared shifted. "
                    f"Pass the model's posteriors on data without shift as "
                    f"reference."
                )
                return ShiftTest(float("nan"), float("nan"), 0, False)
            null = NoShiftReference.from_proba(proba, expected=self.expected)
            statistic, pvalue, dof = null.test(mean_posterior(proba), n_rows)
        elif getattr(self, "whitening", None) is not None and not moves_unseen(
            mean := mean_posterior(proba), self.reference, self.whitening
        ):  # (``getattr``: pickles before the whitening)
            statistic, pvalue, dof = hotelling(
                mean, n_rows, self.reference, self.whitening
            )
        else:
            mean, variance, _ = weighted_moments(proba)
            statistic, pvalue, dof = self.reference.test(mean, n_rows, variance)
        if np.isnan(pvalue) and n_classes > 1:  # (one class cannot shift)
            warn_user(
                f"label_shift_test could not be run: no class's posterior varies "
                f"in the {'batch' if self.reference is None else 'reference'} "
                f"(a single row, or weights that leave one), so "
                f"there is no spread to compare the batch's mean with; the batch "
                f"is not declared shifted. Pass the model's posteriors on more "
                f"rows without shift as reference."
            )
        return ShiftTest(statistic, pvalue, dof, bool(pvalue <= level))


def whitening(proba, weights, reference):
    """``W`` (``K x dof``, host) with ``W' S W = I``, ``S`` the rows' covariance.

    ``S`` is the weighted covariance of the checked posteriors ``proba`` about
    ``reference.expected`` (their mean), with the unbiased factor
    ``m / (m - 1)`` of Kish's effective size ``m``; it is accumulated in
    float64 over row blocks on the device, and only ``K x K`` crosses to the
    host. Directions of ~0 variance (the posteriors sum to one: one at least)
    are left out, as in :func:`~skprior.label_shift._shift_solvers.correlation_moments`.
    """
    xp, is_numpy = get_namespace(proba)
    n_rows, n_classes = proba.shape
    weights = np.ones(n_rows) if weights is None else weights
    on = device_of(proba)
    dtype = work_dtype(xp, on)
    w = (weights if is_numpy else per_row(xp, weights, proba, dtype))[:, None]
    centre = from_host(xp, reference.expected, on, dtype)
    pieces = []
    for part in (
        _kernels.row_blocks(n_rows, n_classes, elements=2**17)
        if is_numpy
        else blocks(xp, n_rows, n_classes)
    ):
        rows = xp.astype(proba[part, :], dtype) - centre
        pieces.append(xp.matmul((w[part, :] * rows).T, rows))
    covariance = np.asarray(to_host(xp, sum(pieces[1:], pieces[0]))[0], np.float64)
    m = reference.n_reference
    values, vectors = np.linalg.eigh(covariance / float(weights.sum()) * m / (m - 1))
    keep = varying(values, np.max(reference.expected))
    return vectors[:, keep] / np.sqrt(values[keep])


def moves_unseen(batch_mean, reference, whitening):
    """Whether the batch's mean moves along a direction the reference never varies in.

    Hotelling's statistic sees the gap ``batch_mean - mu`` only within the
    span of ``whitening``; a class that no reference row gives mass to (a
    tree's exact zeros, a class absent from the reference) is a direction
    of zero variance, left out of it. A batch whose mean moves along such a
    direction (beyond rounding) is then tested class by class, where the
    batch's own variance enters (Hotelling's ``T^2`` would not see it).
    """
    gap = np.asarray(batch_mean, np.float64) - reference.expected
    gap -= gap.mean()  # (along the sum-to-one direction: rounding only)
    # (the columns of ``whitening`` are orthogonal: eigenvectors, scaled)
    span = whitening / np.linalg.norm(whitening, axis=0)
    outside = gap - span @ (span.T @ gap)
    return bool(np.linalg.norm(outside) > 1e-9)


def hotelling(batch_mean, n_rows, reference, whitening):
    """``(T^2, pvalue, dof)`` of Hotelling's two-sample test, reference covariance.

    ``T^2 = n_eff |W' (m_batch - mu)|^2`` with ``n_eff = 1 / (1/n + 1/m)``;
    without shift, and with Gaussian rows, ``T^2 (m - d) / (d (m - 1))`` is
    ``F(d, m - d)``, ``d`` the directions tested (Hotelling, 1931).
    """
    from scipy.stats import f

    m, dof = reference.n_reference, whitening.shape[1]
    z = (batch_mean - reference.expected) @ whitening
    statistic = float(z @ z / (1.0 / n_rows + 1.0 / m))
    if dof == 0:  # (no class varies: nothing to test)
        return statistic, float("nan"), dof
    tail = f.sf(statistic * (m - dof) / (dof * (m - 1)), dof, m - dof)
    return statistic, float(tail), dof


def shift_gated_prior(proba, train_prior, estimate, gate, shift_level):
    """The prior to adjust a batch to: test for shift, then estimate.

    ``proba`` is the checked batch, ``estimate(proba)`` the method's estimate
    of its prior (a host vector) and ``gate`` a :class:`ShiftGate`. With
    ``shift_level=None`` every batch is estimated and no test is run;
    otherwise a batch is estimated only when the test rejects "no shift" at
    ``shift_level`` against a conclusive reference, and keeps
    ``train_prior`` (its posteriors unchanged) else.

    Returns
    -------
    prior : ndarray of shape (n_classes,)
        The test prior, on the host.
    shift : ShiftTest or None
        The test (None when not run).
    """
    check_level(shift_level, optional=True)
    if shift_level is None:
        return estimate(proba), None
    shift = gate.test(proba, shift_level)
    adapt = shift.shifted and gate.conclusive
    return (estimate(proba) if adapt else train_prior), shift
