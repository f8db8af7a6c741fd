"""CAN: Classification with Alternating Normalization (Jia et al., 2021).

The array functions :func:`topk_entropy` and :func:`alternating_normalization`
(the estimator :class:`CANClassifier` that calls them is in ``_classifier.py``).
The numerics, written once for every array namespace, are in ``_solvers.py``;
a Dask array runs their NumPy form on each of its blocks.
"""

import os

import numpy as np

from skprior._utils._array_api import (
    _is_foreign,
    cast_result,
    device_of,
    from_host,
    get_namespace,
    is_dask,
    numpy_namespace,
    work_dtype,
)
from skprior._utils._constraints import constraints
from skprior._utils._options import (
    DEFAULT_ALPHA,
    DEFAULT_K,
    DEFAULT_N_ITER,
    DEFAULT_TAU,
    DEFAULT_UNCERTAINTY,
)
from skprior._utils._sklearn_compat import validate_params
from skprior._utils._validation import (
    check_proba,
    check_proba_with_row_max,
    check_train_prior,
    resolve_k,
    warn_user,
)
from skprior._utils._validation_arrays import check_out
from skprior._utils._validation_labels import check_sample_weight
from skprior.can import _output_memory
from skprior.can._solvers import can_dask, can_rows, low_confidence, topk_uncertainty


@validate_params(
    constraints(proba="array", k="k", kind="uncertainty"),
    prefer_skip_nested_validation=True,
)
def topk_entropy(proba, k=DEFAULT_K, *, kind=DEFAULT_UNCERTAINTY):
    r"""Uncertainty of each prediction: the normalised entropy of its top k classes.

    Three definitions are in use for CAN (Jia et al., 2021):

    ``"renormalized"`` (default; Su's write-up)
        The k largest probabilities renormalised to sum to one, entropy divided
        by :math:`\log k`:
        :math:`u = -\sum_{j \le k} \tilde p_j \log \tilde p_j / \log k`,
        :math:`\tilde p_j = p_{(j)} / \sum_{l \le k} p_{(l)}`.
    ``"unrenormalized"`` (the paper's text)
        :math:`u = -\sum_{j \le k} p_{(j)} \log p_{(j)} / \log m`.
    ``"max_over_k"`` (the paper's code)
        The maximum of the renormalised form over every :math:`k = 2, \dots, m`;
        the argument ``k`` is then not used.

    All lie in [0, 1]; ``0 log 0 = 0``, so exact zeros give no NaN.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Class probabilities; rows sum to one.
    k : int or "auto", default="auto"
        Number of top classes, ``2 <= k <= n_classes``; ``"auto"`` is
        ``min(3, n_classes)`` (Su's 3, and 2 on binary problems).
    kind : {"renormalized", "unrenormalized", "max_over_k"}, default="renormalized"
        Which definition.

    Returns
    -------
    uncertainty : ndarray of shape (n_samples,)
        Values in [0, 1]; 1 is most uncertain. In the namespace, on the device
        and in the float dtype of ``proba`` (computed in float64; float64 for
        float16 ``proba``).

    References
    ----------
    .. [1] Jia, Reiter, Lim, Artzi and Cardie, "When in Doubt: Improving
       Classification Performance with Alternating Normalization", Findings of
       EMNLP 2021. arXiv:2109.13449.
    .. [2] Su Jianlin, "CAN: a simple post-processing trick that uses the prior
       distribution to improve classification" (in Chinese), kexue.fm, 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from skprior import topk_entropy
    >>> topk_entropy(np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]]), k=2)
    array([0., 1.])
    """
    xp, is_numpy = get_namespace(proba)
    proba = check_proba(proba)
    k = resolve_k(k, proba.shape[1], kind)
    return cast_result(xp, topk_uncertainty(xp, is_numpy, proba, k, kind), proba)


# (shared by the public function and the one that also counts the rows)
_CAN_CONSTRAINTS = {
    **constraints(proba="array", prior="prior", k="k", tau="tau", alpha="alpha"),
    **constraints(n_iter="n_iter", reference="optional_array"),
    **constraints(reference_weight="optional_array", uncertainty="uncertainty"),
    "out": [np.ndarray, None],
}


@validate_params(_CAN_CONSTRAINTS, prefer_skip_nested_validation=True)
def alternating_normalization(
    proba,
    prior,
    *,
    k=DEFAULT_K,
    tau=DEFAULT_TAU,
    alpha=DEFAULT_ALPHA,
    n_iter=DEFAULT_N_ITER,
    reference=None,
    reference_weight=None,
    uncertainty=DEFAULT_UNCERTAINTY,
    out=None,
):
    r"""Correct low-confidence predictions with CAN (alternating normalization).

    Rows whose top-k uncertainty (:func:`topk_entropy`) is below ``tau`` are
    confident: they are returned unchanged and form the matrix :math:`A_0`. Each
    low-confidence row :math:`b_0` is then corrected on its own, against
    :math:`A_0` and the training prior :math:`q`:

    .. math::

        L_0 = \begin{bmatrix} A_0 \\ b_0 \end{bmatrix}, \qquad
        S_t = \Lambda_c\bigl(L_t^{\alpha}\bigr), \qquad
        L_{t+1} = \Lambda_r\bigl(S_t \operatorname{diag}(q)\bigr),

    where :math:`\Lambda_c` divides each column by its sum and :math:`\Lambda_r`
    each row; after ``n_iter`` steps the last row of :math:`L` is the output.
    For one step this is :math:`b' \propto q \odot b^{\alpha} \oslash
    (\sum_i A_{0,i}^{\alpha} + b^{\alpha})`, which is how it is computed;
    for more steps all rows advance together by matrix products (see the
    module's notes). The result equals the one-row-at-a-time loop to rounding.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Class probabilities; rows sum to one. float32 stays float32 (the
        arithmetic is done in float64).
    prior : array-like of shape (n_classes,)
        Training class prior :math:`q`, strictly positive, summing to one.
    k : int or "auto", default="auto"
        Number of top classes in the uncertainty, ``2 <= k <= n_classes``;
        ``"auto"`` is ``min(3, n_classes)``.
    tau : float, default=0.9
        Uncertainty threshold in [0, 1]: rows with uncertainty ``>= tau`` are
        corrected (within rounding: 1e-12 for float64 rows, so that a uniform
        top k, whose uncertainty evaluates to 1 - 2e-16, counts at
        ``tau=1``; 1.2e-7 for float32 rows, so that a ``tau`` read off
        :func:`topk_entropy` of them counts its row).
    alpha : float, default=1.0
        Power :math:`\alpha > 0` applied before each column normalisation.
    n_iter : int, default=1
        Number of alternating normalisation steps :math:`d \geq 1`.
    reference : array-like of shape (n_reference, n_classes), default=None
        Where the confident rows :math:`A_0` come from: ``None`` takes them from
        ``proba`` itself (transductive, as in the paper); an array takes the
        confident rows of ``reference`` (for example, predictions on held-out
        data), so that every row of ``proba`` is treated on its own.
    reference_weight : array-like of shape (n_reference,), default=None
        Non-negative weight of each ``reference`` row in the column sums (a row
        of weight w counts as w copies of itself); ``None`` weighs all rows 1.
        Only with ``reference`` (refused without it).
    uncertainty : str, default="renormalized"
        Definition of the uncertainty: ``"renormalized"``, ``"unrenormalized"``
        or ``"max_over_k"``, see :func:`topk_entropy`.
    out : ndarray of shape (n_samples, n_classes), default=None
        Where to write the result, as NumPy's ``out=``: a writeable NumPy
        array of the result's dtype (that of ``proba`` for float32 or float64
        input). It may be ``proba`` itself: the batch is then corrected in
        place, which saves the memory of a second array of its size (the
        command line ``skprior can`` does so); ``proba`` is otherwise never
        modified. NumPy batches only.

    Returns
    -------
    proba_can : ndarray of shape (n_samples, n_classes)
        A new array (``out`` when given): confident rows equal to the input,
        the others corrected.

    Warns
    -----
    UserWarning
        When there are low-confidence rows but no confident reference row. The
        formula then returns the prior (restricted to the classes that a row
        gives non-zero probability) for every low-confidence row; lower ``tau``
        or pass a ``reference`` to avoid it.

    Notes
    -----
    A class whose column in :math:`L^\alpha` sums to zero keeps probability 0
    (``0 / 0 = 0``). CAN with :math:`d \to \infty` on the whole batch is
    Sinkhorn matrix scaling; ReMixMatch's distribution alignment is the case
    :math:`d = 1, \alpha = 1`.

    All low-confidence rows are computed together: ``d = 1`` in closed form
    (in logs when a power such as :math:`(10^{-12})^{30}` would come near
    underflow), ``d > 1`` by two matrix products per
    iteration (see the module's notes). That form is exact while a row's
    iteration scales spread over less than :math:`e^{600}`; rows beyond, which
    large :math:`\alpha^d` produces (:math:`5^5` on CIFAR-100 outputs), are
    computed one at a time in logs, at a cost of order
    ``n_reference * n_classes * d`` per row (tens of milliseconds with 7,000
    reference rows of 100 classes).

    With numba installed (optional: the ``fast`` extra), a NumPy batch of at
    least 2**20 entries is validated, screened and summed in one read by a
    compiled kernel, which also computes ``d = 1`` (the same values to
    rounding), in one thread per core (at most 8, kept between calls; the
    environment variable ``NUMBA_NUM_THREADS`` sets fewer, as joblib's
    workers do). The first such call of a process imports numba (about a
    second), the first on a machine also compiles the kernel (seconds, and
    one to three seconds more at the first call into an ``out`` other than
    ``proba`` or into a reused buffer; the machine code is cached). The
    environment variable ``SKPRIOR_NO_NUMBA=1`` turns it off (``0`` keeps
    it on).

    A new result of 64 MB or more is then a view (``.base``) of a buffer
    2 MB + 4 KB longer, laid out so that the system backs it with huge
    pages from its start. The buffers of the last two such results are
    kept, and a call of the same size writes its result into one that
    nothing refers to any more (no array, view or memoryview of it): a loop
    that rebinds its result (``p = alternating_normalization(batch,
    prior)``) costs about a pass less per call, with no clearing of new
    pages by the system and the copy made as the batch is screened
    (200,000 x 100 float32 in one thread: 3.1 ``proba.sum()`` passes
    against 4.3). They are let go 10 s after the last call that kept one,
    and the free ones before a call allocates a new buffer
    (``skprior.can._output_memory.KEEP_SECONDS``: 0 keeps none;
    ``_output_memory.release()`` lets them go now).

    References
    ----------
    .. [1] Jia, Reiter, Lim, Artzi and Cardie, "When in Doubt: Improving
       Classification Performance with Alternating Normalization", Findings of
       EMNLP 2021. arXiv:2109.13449.
    .. [2] Su Jianlin, "CAN: a simple post-processing trick that uses the prior
       distribution to improve classification" (in Chinese), kexue.fm, 2021.

    Examples
    --------
    The paper's teaser: one confident row [0, 1] pulls an undecided row towards
    the other class.

    >>> import numpy as np
    >>> from skprior import alternating_normalization
    >>> proba = np.array([[0.0, 1.0], [0.5, 0.5]])
    >>> alternating_normalization(proba, [0.5, 0.5], k=2)
    array([[0.  , 1.  ],
           [0.75, 0.25]])

    In place, for a batch that fills the memory (``out`` is returned):

    >>> result = alternating_normalization(proba, [0.5, 0.5], k=2, out=proba)
    >>> result is proba, proba[1]
    (True, array([0.75, 0.25]))
    """
    return alternating_normalization_counts(
        proba,
        prior,
        k=k,
        tau=tau,
        alpha=alpha,
        n_iter=n_iter,
        reference=reference,
        reference_weight=reference_weight,
        uncertainty=uncertainty,
        out=out,
    )[0]


@validate_params(_CAN_CONSTRAINTS, prefer_skip_nested_validation=True)
def alternating_normalization_counts(
    proba,
    prior,
    *,
    k=DEFAULT_K,
    tau=DEFAULT_TAU,
    alpha=DEFAULT_ALPHA,
    n_iter=DEFAULT_N_ITER,
    reference=None,
    reference_weight=None,
    uncertainty=DEFAULT_UNCERTAINTY,
    out=None,
):
    """:func:`alternating_normalization` and the numbers of rows it found.

    Returns ``(proba_can, n_low, n_reference)``: the result, the number of
    low-confidence rows (those corrected) and of confident reference rows
    (``None`` where not counted). The command line reports them.
    """
    # (Python floats: NumPy scalars, as np.quantile gives, do not mix with
    # the arrays of every library -- array-api-strict refuses them)
    tau, alpha = float(tau), float(alpha)
    # The batch's namespace; a reference of another library than a NumPy
    # batch's is refused in _confident_reference, and two foreign libraries
    # by get_namespace.
    xp, is_numpy = get_namespace(proba, *([reference] if _is_foreign(proba) else []))
    destination = out  # (returned as given: a view of proba or a memmap too)
    if out is not None and not is_numpy:
        raise TypeError(
            "out= takes a NumPy array, for a NumPy batch; for arrays of other "
            "libraries, use the returned array."
        )
    # (reference=None, n_iter=1: the kernel also sums the confident rows)
    compiled = is_numpy and _compiled_screen(
        proba, k, tau, alpha, reference is None and n_iter == 1, uncertainty, out
    )
    if compiled:
        module, proba, (out, low, column_sums, small) = compiled
        row_max = row_sums = None
        screened = out  # (a new result's buffer is kept once it is returned)
    elif is_numpy:
        proba, row_max, row_sums = check_proba_with_row_max(proba)
        if out is not None:
            out = check_out(out, proba)
            if out is not proba:
                np.copyto(out, proba)
    else:
        proba, row_max, row_sums = check_proba(proba, lazy=True), None, None
    n_classes = proba.shape[1]
    prior = check_train_prior(prior, n_classes, name="prior")
    args = (resolve_k(k, n_classes, uncertainty), tau, uncertainty)
    weight = None
    if reference is not None:
        reference, weight = _confident_reference(
            xp, is_numpy, proba, reference, reference_weight, args
        )
    elif reference_weight is not None:
        raise ValueError(
            "reference_weight weighs the rows of reference, but no reference was "
            "given (the batch is its own reference, each row counted once). Pass "
            "reference= as well, or drop reference_weight."
        )
    if is_dask(xp):
        out, n_low, n_reference = can_dask(
            proba, prior, args, alpha, n_iter, reference, weight
        )
    else:
        dtype = work_dtype(xp, device_of(proba))
        if not compiled:
            low = low_confidence(xp, is_numpy, proba, *args, row_max, row_sums)
        prior = from_host(xp, prior, device_of(proba), dtype)
        n_low = n_reference = None
        # (whether ``out`` still holds the batch's rows: it may be the batch)
        pristine = out is None or out is not proba
        if compiled and reference is None and n_iter == 1 and not small:
            # The closed form over the low rows; those that lost digits are
            # left as they were and redone below (in logs). (Read from out,
            # which the screen has filled with proba's rows, where it is in C
            # order: each row's lines are then fetched once, 0.32 of a pass
            # against 0.48 on 200,000 x 100 float32, 5.6% of rows low, one
            # thread.)
            rows = np.flatnonzero(low)
            source = out if out.flags.c_contiguous else proba
            lost = module.correct(source, out, rows, column_sums, prior, alpha)
            n_low, n_reference = rows.size, proba.shape[0] - rows.size
            if lost.size:
                redo = np.zeros_like(low)
                redo[lost] = True
                reference, weight = proba, xp.astype(~low, dtype)
                given = (reference, weight, alpha, n_iter)
                can_rows(
                    xp, is_numpy, proba, prior, redo, *given, out=out, pristine=False
                )
        if n_low is None:
            if reference is None:
                reference, weight = proba, xp.astype(~low, dtype)
            given = (reference, weight, alpha, n_iter)
            out, n_low, n_reference = can_rows(
                xp, is_numpy, proba, prior, low, *given, out=out, pristine=pristine
            )
    if n_low and not n_reference:
        warn_user(
            f"CAN found {int(n_low)} low-confidence rows but no confident "
            f"reference row (uncertainty < tau={tau}); every low-confidence row "
            f"is replaced by the prior. Lower tau, or use a reference set (the "
            f"`reference` argument, or reference='fit' in CANClassifier)."
        )
    if compiled and destination is None and out is screened:
        _output_memory.keep(out)  # (only a result handed out: see keep)
    return (out if destination is None else destination), n_low, n_reference


# The compiled kernel runs on NumPy batches of at least this many entries:
# below, the NumPy path takes about a millisecond, and the import of numba
# (a few tenths of a second, once) would outweigh what it saves.
COMPILED_MIN_ELEMENTS = 2**20
_COMPILED = []  # the module of compiled kernels, or None, once imported


def _numba_turned_off():
    """Whether ``SKPRIOR_NO_NUMBA`` is set to something true.

    ``0``, ``false``, ``no``, ``off`` and empty keep the kernel on (as
    ``NUMBA_DISABLE_JIT=0`` keeps numba's JIT on).
    """
    value = os.environ.get("SKPRIOR_NO_NUMBA", "").strip().lower()
    return value not in ("", "0", "false", "no", "off")


def _compiled_screen(proba, k, tau, alpha, accumulate, kind, out=None):
    """The compiled read of ``proba`` when it applies, else ``None``.

    It applies to a float32 or float64 ndarray (made C-contiguous) of at least
    ``COMPILED_MIN_ELEMENTS`` entries, with numba installed and the
    environment variable ``SKPRIOR_NO_NUMBA`` unset or false, for the
    uncertainties other than ``"max_over_k"``. Returns the module
    ``_compiled``, the contiguous ``proba`` and what its ``screen`` returns
    (its validation raises the errors of rows that do not sum to one);
    ``None`` also where the NumPy path must run for its errors (a bad ``k``,
    NaN, negative entries) or for negative zeros.
    """
    if (
        type(proba) is not np.ndarray
        or proba.dtype not in (np.float32, np.float64)
        or proba.ndim != 2
        or proba.shape[1] < 2
        or proba.size < max(COMPILED_MIN_ELEMENTS, 1)  # (an empty batch: its error)
        or kind == "max_over_k"
        or _numba_turned_off()
    ):
        return None
    try:
        k = resolve_k(k, proba.shape[1], kind)
    except ValueError:
        return None
    if not _COMPILED:
        try:
            from skprior.can import _compiled
        except ImportError:  # (numba is not installed)
            _compiled = None
        _COMPILED.append(_compiled)
    module = _COMPILED[0]
    if module is None:
        return None
    proba = np.ascontiguousarray(proba)
    if out is not None:
        out = check_out(out, proba)
    screened = module.screen(proba, k, tau, kind, alpha, accumulate, out)
    return None if screened is None else (module, proba, screened)


def _confident_reference(xp, is_numpy, proba, reference, reference_weight, args):
    """The checked reference, and its weights with its low-confidence rows at 0.

    On the host for NumPy and Dask (where CAN holds it in memory), else on
    the device of ``proba``.
    """
    if (is_numpy or is_dask(xp)) and _is_foreign(reference):
        library = type(reference).__module__.partition(".")[0]
        fix = "reference.compute()" if library == "dask" else "np.asarray(reference)"
        raise ValueError(
            f"reference is a {library} array but proba is a "
            f"{'Dask' if is_dask(xp) else 'NumPy'} one, and CAN then holds the "
            f"reference in memory, on the host. Pass it as a NumPy array ({fix}), "
            f"or reference=None."
        )
    name = "reference_weight"
    if is_numpy or is_dask(xp):
        xp, is_numpy = numpy_namespace(), True
        reference = check_proba(reference, name="reference")
        weight = check_sample_weight(
            reference_weight, reference.shape[0], name=name, scale_free=False
        )
    else:
        if not _is_foreign(reference):  # (held on the host: to the device)
            reference = xp.asarray(np.asarray(reference), device=device_of(proba))
        elif device_of(reference) != device_of(proba):
            # (on another device of the same library: moved, as the labels
            # and references of the other functions are)
            reference = xp.asarray(reference, device=device_of(proba))
        reference = check_proba(reference, name="reference")
        weight = check_sample_weight(
            reference_weight,
            reference.shape[0],
            name=name,
            like=reference,
            scale_free=False,
        )
    if reference.shape[1] != proba.shape[1]:
        raise ValueError(
            f"reference has {reference.shape[1]} columns but proba has "
            f"{proba.shape[1]}; both must list the same classes."
        )
    low = low_confidence(xp, is_numpy, reference, *args)
    return reference, xp.where(low, 0.0, weight)
