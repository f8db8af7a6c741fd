"""Arrays of other libraries: the array API namespace, device and host helpers.

Every public array function takes NumPy arrays (and array-likes) on its own
fast path, and any array of the array API standard -- PyTorch, CuPy, JAX,
``array-api-strict``, Dask -- on a second path written once against the
namespace that ``array-api-compat`` returns. On that path the ``n x K`` data
stay in their namespace and on their device; only scalars and small
``K``-vectors cross to the host, where the solvers (EM, Brent's method,
L-BFGS) run on NumPy.

Dask arrays are lazy: a map (``adjust_to_prior``) returns a Dask array, and a
reduction is computed once per pass, every result of the pass in one
``dask.compute`` (:func:`to_host`), so each pass reads the data once.

Nothing here imports ``array-api-compat`` (or Dask, or PyTorch) until a caller
passes such an array: skprior works without them.
"""

import contextvars
import functools
import operator

import numpy as np

from skprior._utils._kernels import BLOCK_ELEMENTS, row_blocks

# Modules whose arrays are not NumPy's but may have no ``__array_namespace__``
# of their own (array-api-compat wraps them).
_FOREIGN_MODULES = ("torch", "cupy", "jax", "jaxlib", "dask", "array_api_strict")

# Off NumPy a block is larger: one kernel launch per few million entries would
# dominate on a GPU, and the device has room for it.
XP_BLOCK_ELEMENTS = 16 * BLOCK_ELEMENTS


def _is_foreign(array):
    if array is None or isinstance(array, (np.ndarray, np.generic)):
        return False
    module = type(array).__module__.partition(".")[0]
    return module in _FOREIGN_MODULES or hasattr(array, "__array_namespace__")


@functools.cache  # (every NumPy check asks: a failed import is not cached)
def numpy_namespace():
    """array-api-compat's NumPy namespace: NumPy as the standard spells it."""
    import array_api_compat.numpy as numpy_xp

    return numpy_xp


def namespace_of(*arrays):
    """The array API namespace of the non-NumPy arrays among ``arrays``.

    ``None`` when every one is a NumPy array, a list or anything else that
    NumPy converts: the caller then takes its NumPy path.

    Raises
    ------
    ImportError
        When such an array is given but ``array-api-compat`` is not installed.
    TypeError
        When the arrays belong to different libraries.
    """
    foreign = [array for array in arrays if _is_foreign(array)]
    if not foreign:
        return None
    try:
        import array_api_compat
    except ImportError as exc:  # pragma: no cover - a dependency
        raise ImportError(
            f"skprior needs array-api-compat for {type(foreign[0]).__module__} "
            f"arrays: pip install array-api-compat (a dependency of skprior)."
        ) from exc
    try:
        return array_api_compat.array_namespace(*foreign)
    except TypeError as exc:
        kinds = sorted({type(array).__module__ for array in foreign})
        raise TypeError(
            f"The arrays come from different libraries ({', '.join(kinds)}); "
            f"pass them all as arrays of one library (or NumPy arrays)."
        ) from exc


def get_namespace(*arrays):
    """The namespace to compute in, and whether it is NumPy's.

    One code path serves every library: NumPy arrays (and lists, pandas
    objects, anything NumPy converts) get array-api-compat's NumPy namespace
    (scikit-learn ships a copy, so it needs no extra install), other arrays
    the namespace of their library (:func:`namespace_of`). ``is_numpy`` lets
    a kernel take a faster NumPy form (a partition, an in-place update) where
    the standard has none, as scikit-learn's own helpers do.

    Returns
    -------
    xp : module
        The array API namespace.
    is_numpy : bool
        Whether the arrays are NumPy's.

    Examples
    --------
    >>> import numpy as np
    >>> xp, is_numpy = get_namespace(np.ones(3))
    >>> is_numpy, float(xp.sum(xp.asarray([1.0, 2.0])))
    (True, 3.0)
    """
    xp = namespace_of(*arrays)
    if xp is None:
        return numpy_namespace(), True
    return xp, False


def is_dask(xp):
    """Whether ``xp`` is array-api-compat's Dask namespace."""
    return xp.__name__.startswith("array_api_compat.dask")


def device_of(array):
    """The device of ``array`` (``"cpu"`` for NumPy and Dask)."""
    if isinstance(array, (np.ndarray, np.generic)):
        return "cpu"  # (without array-api-compat, which NumPy does not need)
    import array_api_compat

    return array_api_compat.device(array)


def work_dtype(xp, device):
    """float64 where the namespace has it on ``device``, else float32.

    The solvers accumulate in float64, as the NumPy path does; a device
    without it (Apple's MPS) computes in float32.
    """
    if device == "cpu" and xp.__name__ == "array_api_compat.numpy":
        return xp.float64  # (the hot path: no namespace-info lookup)
    try:
        dtypes = xp.__array_namespace_info__().dtypes(device=device)
    except (AttributeError, TypeError, ValueError):  # pragma: no cover
        return xp.float64
    return xp.float64 if "float64" in dtypes else xp.float32


def to_host(xp, *arrays):
    """NumPy copies of small arrays (K-vectors, scalars): one transfer each.

    For Dask every array is computed in one ``dask.compute``: the results of
    one pass share the reading of the data.
    """
    if is_dask(xp):
        import dask

        arrays = dask.compute(*arrays)
        return tuple(np.asarray(array) for array in arrays)
    out = []
    for array in arrays:
        if not isinstance(array, (np.ndarray, np.generic)):
            import array_api_compat  # (not needed for NumPy's own arrays)

            if array_api_compat.is_torch_array(array):
                array = array.detach().cpu().numpy()
            elif array_api_compat.is_cupy_array(array):  # pragma: no cover
                array = array.get()
            elif array_api_compat.is_array_api_strict_namespace(xp):
                # (its arrays on a device other than the CPU refuse NumPy)
                array = array.to_device(xp.Device("CPU_DEVICE"))
        out.append(np.asarray(array))
    return tuple(out)


def from_host(xp, array, device, dtype=None):
    """A small host array (a K-vector) in namespace ``xp`` on ``device``."""
    array = np.asarray(array)
    if is_dask(xp):
        return array if dtype is None else array.astype(_numpy_dtype(xp, dtype))
    return xp.asarray(array, device=device, dtype=dtype)


def _numpy_dtype(xp, dtype):
    return np.float32 if dtype == xp.float32 else np.float64


def per_row(xp, values, like, dtype=None):
    """``values`` (one per row of ``like``) in the namespace of ``like``.

    NumPy input is moved to the device (labels, weights: ``n``-vectors, not
    ``n x K``); for Dask it is chunked as the rows of ``like``.
    """
    if is_dask(xp):
        import dask.array as da

        if isinstance(values, da.Array):
            values = values.rechunk((like.chunks[0],))
        else:
            values = da.from_array(np.asarray(values), chunks=(like.chunks[0],))
        return values if dtype is None else values.astype(_numpy_dtype(xp, dtype))
    if _is_foreign(values):
        values = xp.asarray(values, device=device_of(like))
        return values if dtype is None else xp.astype(values, dtype)
    return xp.asarray(np.asarray(values), device=device_of(like), dtype=dtype)


def known_rows(array, merge=True):
    """A Dask array of whole rows whose chunk sizes are known, none empty.

    Chunk sizes that Dask does not know (after boolean filtering,
    ``x[x[:, 0] > 0.1]``) are computed here, at the cost of one pass over
    the data: without them the number of rows is NaN (an estimate divided by
    it was NaN, and EM never stopped), and Dask's own reductions fail on the
    chunks of no rows that filtering leaves. The caller's array is not
    changed (its sizes are computed on a copy). Empty chunks are dropped and,
    with ``merge``, small chunks merged for the passes (:func:`coarse_chunks`);
    the rows are the same, in the same order.
    """
    import dask.array as da

    if any(np.isnan(size) for sizes in array.chunks for size in sizes):
        array = da.Array(array.dask, array.name, array.chunks, meta=array._meta)
        array = array.compute_chunk_sizes()
    if 0 in array.chunks[0] and array.shape[0]:
        array = array.rechunk({0: tuple(size for size in array.chunks[0] if size)})
    if array.ndim == 1:  # (a vector per row: weights, labels)
        return array
    return coarse_chunks(array) if merge else array.rechunk({1: -1})


def coarse_chunks(array, elements=2**20):
    """A Dask array in chunks of whole rows, small chunks merged for a pass.

    Each chunk is a task of every pass (and validation): a graph of 1,000
    one-row chunks took 4 s per EM pass over 1,000 x 100, 0.2 s merged to
    one chunk (the merge stays in the graph: nothing is copied ahead). Chunks
    of ``elements`` entries or more on average are left as they are.
    """
    array = array.rechunk({1: -1})  # (no task where rows are already whole)
    n_rows, n_columns = array.shape
    mean_entries = n_rows * n_columns / array.numblocks[0]  # (NaN: unknown sizes)
    if array.numblocks[0] > 1 and mean_entries < elements / 16:
        array = array.rechunk({0: max(1, elements // max(n_columns, 1))})
    return array


def blocks(xp, n_rows, n_columns):
    """Row slices for a block-wise pass; one slice over everything for Dask.

    A Dask graph is already chunked, and a block loop would build one graph
    per block.
    """
    if is_dask(xp):
        return [slice(None)]
    # (NumPy's blocks are the kernels' own, whose float64 temporaries stay
    # small: a batch-wide block made the interval's pass 6.4x its input; off
    # NumPy a block is larger, as a device prefers)
    elements = BLOCK_ELEMENTS if xp is numpy_namespace() else XP_BLOCK_ELEMENTS
    # (stops clamped: the standard leaves out-of-bounds slices unspecified)
    return [
        slice(block.start, min(block.stop, n_rows))
        for block in row_blocks(n_rows, n_columns, elements)
    ]


def block_totals(xp, n_rows, n_columns, function):
    """Sum ``function(block)`` (a tuple of arrays) over the row blocks.

    The sums stay on the device (lazy for Dask), for a caller that reduces
    more of them in the same pass.
    """
    totals = None
    for block in blocks(xp, n_rows, n_columns):
        parts = function(block)
        totals = parts if totals is None else tuple(map(operator.add, totals, parts))
    return totals


def map_blocks(xp, n_rows, n_columns, function):
    """``function(block)`` over the row blocks, concatenated (lazy for Dask)."""
    pieces = [function(block) for block in blocks(xp, n_rows, n_columns)]
    return pieces[0] if len(pieces) == 1 else xp.concat(pieces, axis=0)


def top_k(xp, array, k):
    """The ``k`` largest entries of each row, in no particular order.

    The standard has no partition: ``torch.topk`` where the namespace is
    PyTorch's, NumPy's partition on each block of a Dask array whose rows are
    whole in one chunk, else a full sort (``xp.sort``).
    """
    import array_api_compat

    n_columns = array.shape[1]
    if array_api_compat.is_torch_array(array):
        return array.topk(k, dim=1, sorted=False).values
    if is_dask(xp):
        array = array.rechunk({1: -1})
        return array.map_blocks(
            lambda block: np.partition(block, n_columns - k, axis=1)[:, -k:],
            chunks=(array.chunks[0], (k,)),
            dtype=array.dtype,
        )
    return xp.sort(array, axis=1)[:, n_columns - k :]


def weighted_counts(index, weights, n_bins):
    """``sum_i weights_i [index_i = b]`` for ``b < n_bins``, a host float64 vector.

    ``index`` and ``weights`` are arrays of one namespace (``weights`` may be
    None: counts). The standard has no scatter-add: NumPy, PyTorch, CuPy and
    JAX have a ``bincount`` (one pass on the device, where a one-hot sum over
    many bins costs ``n x n_bins``: 14 s for the ``K**2 = 10**6`` cells of a
    confusion matrix of 10**6 rows on an H100), and so does a Dask array of
    NumPy chunks, chunk by chunk (one compute); other libraries sum one-hot
    rows block by block (one Dask compute).
    """
    xp, is_numpy = get_namespace(index)
    if is_numpy:
        return np.bincount(index, weights=weights, minlength=n_bins).astype(float)
    import array_api_compat

    if array_api_compat.is_torch_array(index) or array_api_compat.is_cupy_array(index):
        library = __import__(type(index).__module__.partition(".")[0])
        counts = library.bincount(index, weights=weights, minlength=n_bins)
    elif array_api_compat.is_jax_array(index):  # pragma: no cover - not installed
        import jax.numpy as jnp

        counts = jnp.bincount(index, weights=weights, length=n_bins)
    elif is_dask(xp) and isinstance(index._meta, np.ndarray):
        counts = _chunk_bincounts(index, weights, n_bins)
    else:
        bins = xp.arange(n_bins, device=device_of(index))
        dtype = work_dtype(xp, device_of(index))  # (float32 without float64)

        def one_block(block):
            hits = index[block, None] == bins[None, :]
            if weights is not None:
                hits = xp.where(hits, weights[block, None], 0)
            return (xp.sum(xp.astype(hits, dtype), axis=0),)

        (counts,) = block_totals(xp, index.shape[0], n_bins, one_block)
    return np.asarray(to_host(xp, counts)[0], dtype=np.float64)


def _chunk_bincounts(index, weights, n_bins):
    """:func:`weighted_counts` of a Dask array of NumPy chunks, lazily summed.

    Each chunk's ``np.bincount`` is one ``(1, n_bins)`` row: a one-hot sum
    (Dask's blocks are whole chunks) held ``chunk rows x n_bins`` floats, a
    peak of 3.6 GiB (0.2 GiB this way) for one 40,000-row chunk over the
    ``10**4`` cells of a 100-class confusion matrix. Counts and sums of
    integer weights are exact, as NumPy's.
    """
    import dask.array as da

    def one_chunk(index, weights=None):
        counts = np.bincount(index, weights=weights, minlength=n_bins)
        return counts.astype(np.float64)[None, :]

    # (the weights in the chunks of the index: one task per chunk of both)
    arrays = (index,) if weights is None else (index, weights.rechunk(index.chunks))
    rows = da.map_blocks(
        one_chunk,
        *arrays,
        chunks=((1,) * index.numblocks[0], (n_bins,)),
        new_axis=1,
        dtype=np.float64,
        meta=np.empty((0, 0)),
    )
    return rows.sum(axis=0)


def entr(xp, x):
    """``-x log x`` with ``entr(0) = 0``, as :func:`scipy.special.entr`."""
    positive = x > 0
    return xp.where(positive, -x * xp.log(xp.where(positive, x, 1.0)), 0.0)


def safe_log(xp, x):
    """``log x`` with ``log 0 = -inf``, and no warning."""
    positive = x > 0
    return xp.where(positive, xp.log(xp.where(positive, x, 1.0)), -xp.inf)


def logsumexp(xp, x, axis):
    r"""``log sum exp(x)`` along ``axis``: the one log-sum-exp of skprior.

    :math:`\log \sum_j e^{x_j} = m + \log \sum_j e^{x_j - m}` with
    :math:`m = \max_j x_j` (``0`` where the maximum is not finite), so that
    no term overflows; a slice of ``-inf`` gives ``-inf``. NumPy arrays too
    (:func:`scipy.special.logsumexp`, same formula, was 5x slower on a 11-vector
    and 6x on 200,000 x 100).

    Examples
    --------
    >>> import numpy as np
    >>> xp, _ = get_namespace(np.zeros(1))
    >>> logsumexp(xp, xp.asarray([[0.0, 0.0], [-np.inf, -np.inf]]), axis=1)
    array([0.69314718,       -inf])
    """
    top = xp.max(x, axis=axis, keepdims=True)
    top = xp.where(xp.isfinite(top), top, 0.0)
    total = safe_log(xp, xp.sum(xp.exp(x - top), axis=axis, keepdims=True))
    return xp.squeeze(total + top, axis=axis)


# Set inside the wrappers (:func:`working_dtype_results`): their fitted state
# keeps the solvers' float64, whatever the dtype of the inner model's outputs.
_WORKING_DTYPE_RESULTS = contextvars.ContextVar("working_dtype", default=False)


class working_dtype_results:  # (lower case: used as a function, a decorator)
    """Results in the working dtype (float64 where the device has it) within.

    Not the input's: for a wrapper's own use of the array functions. A
    context manager, or a decorator of a method (defined here, not with
    :mod:`contextlib`, so that :func:`warn_user` skips its frame too).
    """

    def __enter__(self):
        self.token = _WORKING_DTYPE_RESULTS.set(True)

    def __exit__(self, *exc_info):
        _WORKING_DTYPE_RESULTS.reset(self.token)

    def __call__(self, method):
        @functools.wraps(method)
        def in_working_dtype(*args, **kwargs):
            with working_dtype_results():  # (a new one per call: re-entrant)
                return method(*args, **kwargs)

        return in_working_dtype


def result_dtype(xp, like):
    """The float dtype of a result computed from the data array ``like``.

    The float dtype of ``like`` itself (float32 in, float32 out); float64 for
    integer data such as labels (float32 on a device without float64).
    """
    dtype = getattr(like, "dtype", None)
    keep = not _WORKING_DTYPE_RESULTS.get()
    if not _is_foreign(like):
        keep = keep and dtype in (np.float32, np.float64)
        return dtype if keep else np.dtype(np.float64)
    keep = keep and dtype in (xp.float32, xp.float64)
    return dtype if keep else work_dtype(xp, device_of(like))


def result_array(xp, values, like):
    """A host result (a ``K``-vector) in the namespace, device, dtype of ``like``.

    The solvers compute in float64; the result is cast once, here, to the
    dtype of :func:`result_dtype`. A new NumPy array for NumPy input (state
    is never handed out), a Dask array for Dask input.
    """
    dtype = result_dtype(xp, like)
    if not _is_foreign(like):
        return np.array(values, dtype=dtype)
    if is_dask(xp):
        import dask.array as da

        return da.from_array(np.asarray(values, dtype=_numpy_dtype(xp, dtype)))
    return xp.asarray(np.asarray(values), device=device_of(like), dtype=dtype)


def cast_result(xp, array, like):
    """``array`` (computed in the working dtype) in the float dtype of ``like``.

    That of :func:`result_dtype`; no copy where ``array`` already has it.
    """
    return xp.astype(array, result_dtype(xp, like), copy=False)
