"""The rows of a calibration fit, read block by block in any array namespace.

Every fit and map of the calibration package reads its data through
:class:`Rows`: row blocks of the features in the working dtype (float64, or
float32 on a device without it), with the labels and weights of the rows. A
pass applies a function to every block on the data's device and reduces
there; only scalars, ``K``-vectors and small matrices come back to the host,
where the solvers run, in one transfer (one ``dask.compute``) per pass.

NumPy runs the same code with its own block sizes (``row_blocks``: a block's
temporaries stay small, or in the CPU cache) and, in the few hot kernels, the
in-place forms the standard has no equivalent for (``out=``, ``where=``,
fancy indexing), as scikit-learn's array API helpers do.
"""

from functools import reduce
from operator import add

import numpy as np

from skprior._utils._array_api import (
    blocks,
    device_of,
    from_host,
    get_namespace,
    map_blocks,
    namespace_of,
    result_array,
    to_host,
    weighted_counts,
    work_dtype,
)
from skprior._utils._kernels import row_blocks
from skprior._utils._validation import check_logits
from skprior._utils._validation_labels import check_class_indices, check_sample_weight


class Rows:
    """Validated rows of a fit: features ``values``, labels ``y``, ``weights``.

    ``values`` (the caller's array, never written to) is read one block of
    rows at a time in the working dtype; ``shift`` subtracts each row's
    maximum (``d = z - max_k z``, the form temperature scaling works on);
    ``index`` selects rows of ``values`` without copying them (``y`` and
    ``weights`` are then those of the selected rows). Rows that must not
    count have weight 0: they keep their place, so a Dask array keeps its
    known chunks.
    """

    def __init__(self, xp, is_numpy, values, y, weights, shift=False, index=None):
        self.xp, self.is_numpy, self.values = xp, is_numpy, values
        self.y, self.weights, self.index = y, weights, index
        self.device = None if is_numpy else device_of(values)
        self.dtype = np.float64 if is_numpy else work_dtype(xp, self.device)
        n_rows = values.shape[0] if index is None else index.shape[0]
        self.shape = (n_rows, values.shape[1])
        self.shift, self.top = False, None
        if shift and index is None:  # (one reduction of the caller's array)
            self.top = xp.astype(xp.max(values, axis=1), self.dtype)
        elif shift:  # (the maxima of the selected rows, block by block)
            self.top = self.per_row(lambda rows, d: (xp.max(d, axis=1),))[0]
        self.shift = shift

    def block(self, rows):
        """Rows ``rows`` (a slice) in the working dtype (a new array if shifted)."""
        xp = self.xp
        if self.index is None:
            picked = self.values[rows, :]
        else:
            picked = xp.take(self.values, self.index[rows], axis=0)
        out = xp.astype(picked, self.dtype, copy=self.shift)
        if self.shift:
            out -= self.top[rows][:, None]
        return out

    def slices(self, elements=None):
        """Row slices of a pass: NumPy's ``row_blocks``, the namespace's blocks."""
        if self.is_numpy:
            return row_blocks(*self.shape, elements=elements)
        return blocks(self.xp, *self.shape)

    def sums(self, function, elements=None):
        """``function(rows, block)`` (a tuple of arrays) summed over the blocks.

        One pass; the sums come to the host in one transfer.
        """
        parts = (function(rows, self.block(rows)) for rows in self.slices(elements))
        return self.host(*reduce(lambda t, p: [*map(add, t, p)], parts))

    def per_row(self, function, elements=None):
        """``function(rows, block)`` (a tuple of per-row vectors) for all rows."""
        parts = [function(rows, self.block(rows)) for rows in self.slices(elements)]
        return [
            p[0] if len(p) == 1 else self.xp.concat(p) for p in zip(*parts, strict=True)
        ]

    def host(self, *arrays):
        """NumPy copies of small results (one transfer, one Dask compute)."""
        return to_host(self.xp, *arrays)

    def asarray(self, values):
        """A host parameter vector or matrix on the device, in the working dtype."""
        return from_host(self.xp, values, self.device, self.dtype)

    def result(self, values):
        """A fitted host array in the caller's namespace, device and float dtype."""
        return result_array(self.xp, values, self.values)

    def dot(self, a, b):
        """``sum_i a_i b_i`` (NumPy's BLAS dot)."""
        return np.dot(a, b) if self.is_numpy else self.xp.sum(a * b)

    def onehot(self, rows):
        """``y_i == k`` for the rows ``rows``."""
        classes = self.xp.arange(self.shape[1], device=self.device)
        return self.y[rows][:, None] == classes[None, :]

    def take_true(self, rows, a):
        """``a[i, y_i]`` of a block (a one-hot sum: the standard has no gather)."""
        if self.is_numpy:
            return a[np.arange(a.shape[0]), self.y[rows]]
        return self.xp.sum(self.xp.where(self.onehot(rows), a, 0.0), axis=1)

    def true_entries(self):
        """``values[i, y_i]`` (shifted if the rows are) of every row."""
        if not self.is_numpy:
            return self.per_row(lambda rows, d: (self.take_true(rows, d),))[0]
        picked = np.arange(self.shape[0]) if self.index is None else self.index
        z = self.values[picked, self.y].astype(np.float64)
        return z if self.top is None else z - self.top

    def class_totals(self):
        """The total weight of each class in ``y`` (a host ``K``-vector)."""
        return weighted_counts(self.y, self.weights, self.shape[1])

    def subset(self, index):
        """The rows ``index`` (host integers) of these rows, not copied."""
        xp = self.xp
        index = from_host(xp, index, self.device)

        def take(a):
            return xp.take(a, index, axis=0)

        return Rows(
            xp,
            self.is_numpy,
            self.values,
            take(self.y),
            take(self.weights),
            index=index if self.index is None else take(self.index),
        )

    def totalled(self):
        """These rows, with ``total``: the sum of their weights."""
        (self.total,) = (float(v) for v in self.host(self.xp.sum(self.weights)))
        return self

    def usable(self):
        """Give weight 0 to rows whose true class is at ``-inf``; ``d_true``.

        Such rows have an infinite log loss whatever the parameters, so they
        cannot move a log-loss fit's minimiser. Sets ``d_true``, each row's
        true entry (0 on the rows left out) and ``total``, the weights' sum.
        """
        xp = self.xp
        d_true = self.true_entries()
        keep = xp.isfinite(d_true) & (self.weights > 0)
        self.weights = xp.where(keep, self.weights, 0.0)
        self.d_true = xp.where(keep, d_true, 0.0)
        if not self.totalled().total > 0:
            raise ValueError(
                "Every sample gives its true class logit -inf (probability 0): the "
                "log loss is infinite at every temperature. Use method='ec'."
            )
        return self


def fit_rows(logits, y, sample_weight, shift=False):
    """Validate the inputs of a fit; warn if the logits look like probabilities."""
    xp, is_numpy = get_namespace(logits)
    z, _ = check_logits(logits, as_float64=False, warn_probabilities=True)
    y = check_class_indices(y, *z.shape, like=z)
    weights = check_sample_weight(sample_weight, z.shape[0], like=z)
    return Rows(xp, is_numpy, z, y, weights, shift=shift)


def map_rows(xp, is_numpy, z, function, dtype=None):
    """``function(block)`` of float64 row blocks of ``z``, in ``dtype`` (z's).

    NumPy fills one output array; other namespaces concatenate the blocks
    (a lazy map for Dask). ``function`` may overwrite its block.
    """
    dtype = z.dtype if dtype is None else dtype
    if is_numpy:
        out = np.empty(z.shape, dtype=dtype)
        for rows in row_blocks(*z.shape):
            out[rows] = function(z[rows].astype(np.float64))
        return out
    work = work_dtype(xp, device_of(z))
    return map_blocks(
        xp,
        *z.shape,
        lambda rows: xp.astype(function(xp.astype(z[rows, :], work)), dtype),
    )


def map_logits(logits):
    """Validated logits of a map, and how to apply a calibration to them.

    Returns ``z``, ``on_device(values)`` (a host parameter where the logits
    are, in the working dtype) and ``apply(transform)``: the row-wise
    ``softmax(transform(xp, block))`` of ``z`` in its dtype (lazy for Dask).
    """
    xp, is_numpy = get_namespace(logits)
    z, _ = check_logits(logits, as_float64=False, lazy=True)

    def on_device(values):
        if is_numpy or values is None:
            return values
        return from_host(xp, values, device_of(z), work_dtype(xp, device_of(z)))

    def apply(transform):
        with np.errstate(over="ignore", under="ignore"):
            return map_rows(xp, is_numpy, z, lambda u: softmax(xp, transform(xp, u)))

    return z, on_device, apply


def parameter_array(values, shape, name, what):
    """``values`` as a finite float64 host array of ``shape``, or a named error.

    A fitted parameter given back in its namespace comes to the host. The
    error says what was wrong by shape, type or values, never by the array's
    repr (which differs by namespace).
    """

    def bad(got):
        return ValueError(
            f"{name} must be a finite array of real numbers of shape {shape}: "
            f"{what}, got {got}."
        )

    try:
        if namespace_of(values) is not None:
            values = to_host(namespace_of(values), values)[0]
        if np.iscomplexobj(values):
            raise bad("complex values")
        values = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise bad(
            f"a {type(values).__name__} that is not a rectangular array of numbers"
        ) from None
    if values.shape != shape:
        raise bad(f"shape {values.shape}")
    if not np.all(np.isfinite(values)):
        raise bad("NaN or infinite values")
    return values


def check_vector(values, n_classes, name):
    """A finite parameter vector of one entry per class (:func:`parameter_array`)."""
    return parameter_array(
        values, (n_classes,), name, f"one entry per class ({n_classes})"
    )


def exp_(xp, u):
    """``exp(u)``, in place on NumPy (``u`` is the caller's temporary)."""
    with np.errstate(under="ignore", over="ignore"):
        return np.exp(u, out=u) if isinstance(u, np.ndarray) else xp.exp(u)


def softmax(xp, u):
    """``softmax`` of each row of ``u`` (a temporary, overwritten on NumPy).

    ``exp(u - max u) / sum``, in place on NumPy: no temporary of the block's
    size (SciPy's ``logsumexp`` makes several, which set the peak of a map).
    """
    with np.errstate(invalid="ignore"):
        u -= xp.max(u, axis=1, keepdims=True)
    u = exp_(xp, u)
    u /= xp.sum(u, axis=1, keepdims=True)
    return u


def finite_product(xp, e, d):
    """``e * d`` where ``d`` is finite and ``e`` elsewhere (``e`` overwritten).

    Used where ``e`` is 0 at the ``-inf`` entries of ``d``, not ``0 * -inf``.
    """
    if isinstance(e, np.ndarray):
        return np.multiply(e, d, out=e, where=np.isfinite(d))
    return e * xp.where(xp.isfinite(d), d, 0.0)


def softmax_loss(data, rows, u):
    """Weighted log loss of ``softmax(u)`` on a block, and ``softmax(u)``.

    ``u`` is overwritten by the softmax on NumPy. Rows of weight 0 add 0,
    even when their true class is at ``-inf``.
    """
    xp, w = data.xp, data.weights[rows]
    # (the loss's log-sum-exp, top + log(sums), shares its exponentials with
    # the softmax: logsumexp() and a second exp would read the block twice)
    top = xp.max(u, axis=1, keepdims=True)
    u_true = data.take_true(rows, u)
    u -= top
    u = exp_(xp, u)
    sums = xp.sum(u, axis=1, keepdims=True)
    loss = xp.where(w > 0, (top + xp.log(sums))[:, 0] - u_true, 0.0)
    u /= sums
    return data.dot(w, loss), u


def softmax_residual(data, rows, u):
    """:func:`softmax_loss`, with ``softmax - onehot`` (in place on NumPy)."""
    loss, p = softmax_loss(data, rows, u)
    if data.is_numpy:
        p[np.arange(p.shape[0]), data.y[rows]] -= 1.0
        return loss, p
    return loss, p - data.xp.astype(data.onehot(rows), p.dtype)


def softmax_curvature(data, rows, u):
    """``w_i p_ik (1 - p_ik)``: the diagonal curvature of the log loss in ``u``."""
    p = softmax(data.xp, u)
    return data.weights[rows][:, None] * p * (1 - p)
