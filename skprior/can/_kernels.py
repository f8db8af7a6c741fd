"""CAN's compiled kernels (numba): the screen, the correction, their intrinsics.

Every function that numba compiles for the kernel is in this one module:
numba's cache of a function is keyed to its own file, so a compiled function
that inlined code from another module would keep running that code's old
version after an edit there. The threads, the tasks and the output's
allocation are in ``_compiled.py``, which calls :func:`_screen` and
:func:`_correct`.

Two things numba's loops do not give on their own are written as LLVM code
(numba intrinsics):

- :func:`_prefetch` (and :func:`_prefetch_row`): ask for a row's cache
  lines ahead of its use, for the scattered rows of the screen's candidates
  and of the correction.
- :func:`level_sweep`: a row's entries equal to a level, and the two
  largest below it, in one read of the row in whole vectors. Written by
  hand because the second largest is not a reduction LLVM's vectoriser
  recognises, and its loops over a short row (100 entries) leave a third of
  it to scalar code. :func:`_top_k` of a row of 100 float32 at k = 3, from
  the cache, in one thread: 31 ns, against 56-62 ns with two of numba's
  sweeps in a call of its own (it is inlined now, see there).

Integers of the bits of non-negative floats order as the floats do (the
caller, ``_compiled.screen``, makes the views), so every comparison is
unsigned.
"""

import math

import numba
import numpy as np
from llvmlite import binding, ir
from numba.core import cgutils
from numba.extending import intrinsic

# LLVM's prefetch intrinsic, named for its pointer type (opaque from LLVM 15).
_PREFETCH = (
    "llvm.prefetch.p0" if binding.llvm_version_info >= (15,) else "llvm.prefetch.p0i8"
)

# The width of :func:`_level_sweep_vector`'s vectors, in bits (one AVX-512
# register; LLVM splits it where the machine has narrower ones).
_VECTOR_BITS = 512


@intrinsic
def _prefetch(typingctx, matrix, row, column, write):
    """Ask for the cache line of ``matrix[row, column]`` (any layout: by its strides).

    A hint (LLVM's ``llvm.prefetch``: kept in every cache level; for a
    ``write``, a literal boolean, the line is asked for to be written), which
    does not fault and changes no value; a no-op on machines without such an
    instruction.
    """
    if not isinstance(write, numba.types.BooleanLiteral):
        return None
    signature = numba.types.void(matrix, row, column, write)

    def codegen(context, builder, signature, args):
        matrix_type, row_type, column_type, _ = signature.args
        array = context.make_array(matrix_type)(context, builder, args[0])
        index = [
            context.cast(builder, value, kind, numba.types.intp)
            for value, kind in zip(args[1:3], (row_type, column_type), strict=True)
        ]
        address = cgutils.get_item_pointer(context, builder, matrix_type, array, index)
        byte_pointer = ir.PointerType(ir.IntType(8))
        integer = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [byte_pointer, integer, integer, integer]),
            _PREFETCH,
        )
        # (read or write, locality 3: every cache level, data cache)
        flags = (int(write.literal_value), 3, 1)
        flags = [ir.Constant(integer, value) for value in flags]
        builder.call(function, [builder.bitcast(address, byte_pointer), *flags])
        return context.get_dummy_value()

    return signature, codegen


@numba.njit(cache=True, nogil=True, inline="always")
def _prefetch_row(matrix, row, write):
    """:func:`_prefetch` each cache line of row ``row`` of ``matrix``.

    A line's worth of entries apart from the first, and the last entry,
    whose line the steps miss where the row does not start on a line. For
    a matrix that is not C-contiguous (an ``out=`` in Fortran order), whose
    row is spread over as many lines as it has entries, the first only.
    """
    if not matrix.flags.c_contiguous:
        _prefetch(matrix, row, 0, write)
        return
    step = max(1, 64 // matrix.itemsize)
    for column in range(0, matrix.shape[1], step):
        _prefetch(matrix, row, column, write)
    _prefetch(matrix, row, matrix.shape[1] - 1, write)


def _splat(builder, value, vector_type):
    """A vector of ``vector_type`` with ``value`` in every lane."""
    undefined = ir.Constant(vector_type, ir.Undefined)
    lane = ir.Constant(ir.IntType(32), 0)
    first = builder.insert_element(undefined, value, lane)
    zeros = ir.Constant(ir.VectorType(ir.IntType(32), vector_type.count), None)
    return builder.shuffle_vector(first, undefined, zeros)


def _call(builder, name, return_type, *args):
    """Call LLVM's intrinsic ``name`` on ``args``."""
    kind = ir.FunctionType(return_type, [arg.type for arg in args])
    function = cgutils.get_or_insert_function(builder.module, kind, name)
    return builder.call(function, args)


@intrinsic
def _level_sweep_vector(typingctx, row, level):
    """:func:`level_sweep` in vectors; ``row`` has at least one vector's entries.

    Each lane keeps the count of its entries equal to ``level`` and the two
    largest of its entries below it (a two-place sorting network: the larger
    of the old first and the entry is the new first, the smaller goes on to
    the second place). The last entries are read as the row's last whole
    vector, whose lanes already read are masked off. At the end, the
    largest first is the row's first, and the row's second is that value
    again if two lanes hold it, else the largest of the other lanes' firsts
    and of its own lane's second.
    """
    element = getattr(row, "dtype", None)
    if not (
        isinstance(row, numba.types.Array)
        and row.ndim == 1
        and row.layout == "C"
        and isinstance(element, numba.types.Integer)
        and not element.signed
        and element.bitwidth in (32, 64)  # (the bits of float32 or float64)
    ):
        return None
    signature = numba.types.Tuple((numba.types.intp, element, element))(row, level)

    def codegen(context, builder, signature, args):
        row_type, level_type = signature.args
        array = context.make_array(row_type)(context, builder, args[0])
        scalar = ir.IntType(element.bitwidth)
        n_lanes = _VECTOR_BITS // element.bitwidth
        vector = ir.VectorType(scalar, n_lanes)
        intp = context.get_value_type(numba.types.intp)
        suffix = f"v{n_lanes}i{element.bitwidth}"
        zero, one = ir.Constant(vector, None), ir.Constant(vector, [1] * n_lanes)
        levels = _splat(
            builder, context.cast(builder, args[1], level_type, element), vector
        )
        count, first, second = (cgutils.alloca_once_value(builder, zero) for _ in "abc")

        def vector_call(name, *args):
            return _call(builder, f"llvm.{name}.{suffix}", vector, *args)

        def read(start, unread=None):
            address = builder.gep(array.data, [start])
            address = builder.bitcast(address, ir.PointerType(vector))
            values = builder.load(address, align=element.bitwidth // 8)
            equal = builder.icmp_unsigned("==", values, levels)
            below = builder.icmp_unsigned("<", values, levels)
            if unread is not None:
                equal, below = builder.and_(equal, unread), builder.and_(below, unread)
            ones = builder.select(equal, one, zero)
            builder.store(builder.add(builder.load(count), ones), count)
            entry, old = builder.select(below, values, zero), builder.load(first)
            builder.store(vector_call("umax", old, entry), first)
            moved = vector_call("umin", old, entry)
            builder.store(vector_call("umax", builder.load(second), moved), second)

        n = builder.extract_value(array.shape, 0)
        step = ir.Constant(intp, n_lanes)
        whole = builder.sub(n, builder.srem(n, step))
        begin = ir.Constant(intp, 0)
        with cgutils.for_range_slice(builder, begin, whole, step, intp) as (start, _):
            read(start)
        last = builder.sub(n, step)
        lanes = ir.Constant(vector, list(range(n_lanes)))
        seen = builder.sub(whole, last)  # (lanes of the last vector already read)
        seen = builder.trunc(seen, scalar) if scalar.width < intp.width else seen
        read(last, builder.icmp_unsigned(">=", lanes, _splat(builder, seen, vector)))

        firsts, seconds = builder.load(first), builder.load(second)
        reduce = f"llvm.vector.reduce.{{}}.{suffix}"
        largest = _call(builder, reduce.format("umax"), scalar, firsts)
        holds = builder.icmp_unsigned("==", firsts, _splat(builder, largest, vector))
        mask = ir.IntType(n_lanes)
        holds_mask = builder.bitcast(holds, mask)
        holders = _call(builder, f"llvm.ctpop.i{n_lanes}", mask, holds_mask)
        others = builder.select(holds, seconds, firsts)
        rest = _call(builder, reduce.format("umax"), scalar, others)
        two = builder.icmp_unsigned(">=", holders, ir.Constant(mask, 2))
        runner_up = builder.select(two, largest, rest)
        total = _call(builder, reduce.format("add"), scalar, builder.load(count))
        total = builder.zext(total, intp) if scalar.width < intp.width else total
        values = [total, largest, runner_up]
        return context.make_tuple(builder, signature.return_type, values)

    return signature, codegen


@numba.njit(cache=True, nogil=True, inline="always")
def level_sweep(bits, level):
    """``(count, first, second)`` of a row of float bits: one read of the row.

    ``count``: the entries equal to ``level``; ``first >= second``: the two
    largest entries below ``level`` (a value held twice fills both places),
    ``0`` for a place that no entry fills. ``bits`` is a C-contiguous row of
    unsigned integers; a row shorter than a vector is read entry by entry.
    """
    if bits.shape[0] * bits.itemsize * 8 >= _VECTOR_BITS:
        return _level_sweep_vector(bits, level)
    zero = bits.dtype.type(0)
    count, first, second = 0, zero, zero
    for value in bits:
        count += value == level
        if value < level:
            if value > first:
                first, second = value, first
            elif value > second:
                second = value
    return count, first, second


# Largest k whose top k are found level by level (a sweep over the row in
# the cache fills one or two places, more with ties); above, the row is
# sorted (k near n_classes, rare).
_LEVELS_K = 16


@numba.njit(cache=True, nogil=True, fastmath={"reassoc"})
def _read(proba, bits, out, totals, largests, sums):
    """One sweep over the rows: their sums, maxima and (optionally) column sums.

    Writes each row's float64 sum into ``totals`` and its largest entry seen
    as unsigned bits (of ``bits``, ``proba`` seen so) into ``largests``;
    copies each row into ``out`` as it reads it, unless ``out`` is None, and
    writes the float64 column sums of every row into ``sums``, unless it is
    None (both settled when numba compiles). Reassociation lets the sums be
    vectorised (the only arithmetic here), and the column sums go into an
    array of this function's own, which the compiler knows does not overlap
    ``proba`` (1.7x faster than into an argument). One sweep for all: a
    second sweep over each row, even from the cache, costs a fifth of a pass
    on 200,000 x 100 float32.
    """
    own = np.zeros(proba.shape[1] if sums is not None else 0)
    for i in range(proba.shape[0]):
        total, largest = 0.0, bits[i, 0]
        for j in range(proba.shape[1]):
            value = proba[i, j]
            if out is not None:
                out[i, j] = value
            total += np.float64(value)
            largest = max(largest, bits[i, j])
            if sums is not None:
                own[j] += np.float64(value)
        totals[i] = total
        largests[i] = largest
    if sums is not None:
        sums[:] = own


@numba.njit(cache=True, nogil=True)
def _has_small(proba, floor):
    """Whether an entry of ``proba`` lies in ``(0, floor)``."""
    for i in range(proba.shape[0]):
        for j in range(proba.shape[1]):
            if 0 < proba[i, j] < floor:
                return True
    return False


# (inlined, as _entropy: a call of a compiled function that passes arrays
# costs numba's reference counting of each, about half of _top_k's time)
@numba.njit(cache=True, nogil=True, inline="always")
def _top_k(row, bits, largest, k, top, work, cell, cell_value, share):
    """The ``k`` largest entries of ``row``, largest first, into ``top``.

    ``largest`` is the row's largest entry seen as unsigned bits (of ``bits``,
    the row seen so), in which non-negative floats order as their values do.
    For small ``k``, level by level: one sweep over the row (in the cache,
    :func:`level_sweep`) counts the entries equal to
    the current level and finds the two largest below it. A row with ties
    fills several places at one level; the first below fills one place when
    the second is smaller (else it is held twice or more, and the next sweep
    counts it), and the second is the next level. The top 3 of a row
    without ties takes one sweep. Returns ``False`` when the places filled
    (all of them, or some: ``top`` is then incomplete) show the row
    confident: the rest are at most the next level, so the top k sum to at
    most ``filled + places left * level``, and a largest entry above
    ``share`` times that is a renormalised share above the bound of
    ``_solvers._largest_uncertain_share`` (``share = 0``: no such stop).
    """
    if k > _LEVELS_K:
        for j in range(row.shape[0]):
            work[j] = row[j]
        work.sort()
        for j in range(k):
            top[j] = work[row.shape[0] - 1 - j]
        return True
    filled, level, total = 0, largest, 0.0
    while filled < k:
        count, first, second = level_sweep(bits, level)
        if count == 0:  # (cannot happen: k <= n_classes)
            break
        cell[0] = level
        for _ in range(min(count, k - filled)):
            top[filled] = cell_value[0]
            total += top[filled]
            filled += 1
        level = first
        if first > second and filled < k:  # (first is held once)
            cell[0] = first
            top[filled] = cell_value[0]
            total += top[filled]
            filled += 1
            level = second
        cell[0] = level
        left = k - filled
        if share and top[0] > share * (total + left * cell_value[0]):
            return False
        # Fewer than k entries are >= the last level, so some entry is below
        # it: the last place needs no sweep of its own.
        if filled == k - 1:
            top[filled] = cell_value[0]
            filled += 1
    return True


@numba.njit(cache=True, nogil=True, inline="always")
def _entropy(top, k, renormalized, log_n):
    """Normalised entropy of the ``k`` values of ``top`` (in [0, 1])."""
    total = 1.0
    if renormalized:
        total = 0.0
        for j in range(k):
            total += top[j]
    entropy = 0.0
    for j in range(k):
        share = top[j] / total if renormalized else top[j]
        if share > 0:
            entropy -= share * math.log(share)
    return min(entropy / log_n, 1.0)


@numba.njit(cache=True, nogil=True)
def _screen(
    proba,
    bits,
    out,
    low,
    column_sums,
    cell,
    cell_value,
    infinity,
    k,
    share,
    log_n,
    threshold,
    renormalized,
    accumulate,
    alpha,
    floor,
    tolerance,
):
    """One read of ``proba`` from memory: its copy, row sums, low rows, column sums.

    ``bits`` is ``proba`` seen as unsigned integers, whose row maximum is
    ``>= bits(+inf)`` exactly when the row holds a NaN, an infinity or a
    negative number (-0.0 included): then the first value returned is
    ``True`` and nothing else is computed (the caller raises, or takes the
    NumPy path). Each row is copied into ``out`` as it is read (by
    :func:`_read`), unless ``out`` is None. A row whose sum is more than
    ``tolerance`` from 1 is flagged (the caller raises).
    ``cell`` is a one-entry unsigned array and ``cell_value`` its float view,
    which turns bits into values; ``infinity`` holds the bits of ``+inf``.
    A row is low-confidence when its top-k uncertainty is ``>= threshold``
    (its ``low`` entry is set; the others are left as they are, ``False``);
    with ``renormalized``, only rows whose maximum is at most ``share`` times
    their sum can be (the bound of ``_solvers._largest_uncertain_share``),
    and the top k of the others are not sought. With ``accumulate``, the
    confident rows' ``x ** alpha`` are summed per column into
    ``column_sums``: for ``alpha = 1``, every row's sums (of the sweep) less
    the low rows'; otherwise in a second sweep over the task (from the
    cache), as where the difference would lose digits. Returns ``(bad,
    small, off)``: whether an entry is invalid, whether (for ``alpha > 1``)
    a positive entry lies below ``floor``, where powers lose precision and
    the NumPy path computes in logs (a sweep of its own, from the cache), and
    whether a row sum is off.
    """
    n_rows, n_classes = proba.shape
    totals = np.empty(n_rows)
    largests = np.empty(n_rows, dtype=bits.dtype)
    by_difference = accumulate and alpha == 1
    sums = np.zeros(n_classes)
    _read(proba, bits, out, totals, largests, sums if by_difference else None)
    bad, small, off = False, False, False
    for i in range(n_rows):
        off |= not abs(totals[i] - 1.0) <= tolerance
        bad |= largests[i] >= infinity
    if bad:
        return bad, small, off
    maxima = largests.view(proba.dtype)  # (the rows' largest entries)
    top = np.empty(max(k, 1))
    work = np.empty(n_classes)
    low_sums = np.zeros(n_classes)
    bound = share if renormalized else 0.0
    # The candidates: rows that are not zeros (flagged off; their entropy is
    # 0 / 0) and, with renormalized, whose maximum the bound does not show
    # confident. Each is read again for its top k, from the cache: the row
    # _AHEAD candidates on is asked for first (1.83-1.86 passes for the
    # screen of 200,000 x 100 float32 against 1.91-1.95 without).
    candidates = np.empty(n_rows, dtype=np.intp)
    n_candidates = 0
    for i in range(n_rows):
        total = totals[i]
        if total > 0 and (not renormalized or np.float64(maxima[i]) <= share * total):
            candidates[n_candidates] = i
            n_candidates += 1
    for position in range(n_candidates):
        if position + _AHEAD < n_candidates:
            _prefetch_row(proba, candidates[position + _AHEAD], False)
        i = candidates[position]
        row = proba[i]
        if _top_k(
            row, bits[i], largests[i], k, top, work, cell, cell_value, bound
        ) and (_entropy(top, k, renormalized, log_n) >= threshold):
            low[i] = True
            if by_difference:
                for j in range(n_classes):
                    low_sums[j] += row[j]
    if alpha > 1:
        small = _has_small(proba, floor)
    if not accumulate:
        return bad, small, off
    # The confident rows' column sums are those of every row (summed in the
    # sweep) less those of the low rows, a few percent. The difference loses
    # at most a bit or two to cancellation unless the low rows hold half of a
    # column's mass, where the confident rows are summed again (from cache).
    for j in range(n_classes):
        by_difference &= low_sums[j] <= 0.5 * sums[j]
    if by_difference:
        for j in range(n_classes):
            column_sums[j] = sums[j] - low_sums[j]
        return bad, small, off
    # (an array of this function's own: vectorised, see _read)
    confident = np.zeros(n_classes)
    for i in range(n_rows):
        if not low[i]:
            if alpha == 1:
                for j in range(n_classes):
                    confident[j] += proba[i, j]
            else:
                for j in range(n_classes):
                    confident[j] += np.float64(proba[i, j]) ** alpha
    column_sums[:] = confident
    return bad, small, off


@numba.njit(cache=True, nogil=True, fastmath={"reassoc"})
def _sum(values):
    """The sum of a float64 vector, vectorised (in some order of the terms)."""
    total = 0.0
    for j in range(values.shape[0]):
        total += values[j]
    return total


# How many rows ahead :func:`_correct` (and :func:`_screen`, among its
# candidates) asks for a row, every cache line of it
# (measured on 200,000 x 100 float32 at the defaults, 11,120 rows corrected,
# one thread, the caches emptied first: 3.0 ms without asking, 2.4-2.5 ms
# asking for the first line of each row two rows ahead, 1.8-1.9 ms for whole
# rows; whole rows 1, 4 or 8 ahead within 0.1 ms of 2).
_AHEAD = 2


@numba.njit(cache=True, nogil=True)
def _correct(proba, out, rows, column_sums, prior, alpha, lost):
    """CAN with one iteration on ``proba[rows]``, written to ``out[rows]``.

    As ``_solvers._one_step`` computes it: ``b**alpha / (C + b**alpha)``
    (``0 / 0 = 0``), times the prior, times the inverse of its sum. A row
    whose result does not sum to one within 1e-6 (digits lost) is not
    written and is marked in ``lost`` (the caller redoes it on the NumPy
    path, in logs). Each row is read whole before its result is written, so
    ``out`` may be ``proba`` itself. The rows are scattered over the batch,
    beyond the reach of the processor's own prefetching, so the row
    ``_AHEAD`` places on (in ``proba`` and in ``out``, every cache line) is
    asked for before this one is computed.
    """
    n_classes = proba.shape[1]
    values = np.empty(n_classes)
    for position in range(rows.shape[0]):
        i = rows[position]
        if position + _AHEAD < rows.shape[0]:
            _prefetch_row(proba, rows[position + _AHEAD], False)
            _prefetch_row(out, rows[position + _AHEAD], True)
        for j in range(n_classes):
            values[j] = proba[i, j]
        if alpha != 1:  # (a loop of its own: a branch in the next one slows it 10x)
            for j in range(n_classes):
                values[j] = values[j] ** alpha
        for j in range(n_classes):
            denominator = values[j] + column_sums[j]
            denominator = denominator if denominator != 0 else 1.0
            values[j] = values[j] / denominator * prior[j]
        scale = 1.0 / _sum(values)
        for j in range(n_classes):
            values[j] *= scale
        lost[position] = not abs(_sum(values) - 1.0) <= 1e-6
        if not lost[position]:
            for j in range(n_classes):
                out[i, j] = values[j]
