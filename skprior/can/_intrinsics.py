"""LLVM-level pieces of CAN's compiled kernel (``_compiled.py``): numba intrinsics.

Two things numba's loops do not give on their own:

- :func:`_prefetch` (and :func:`_prefetch_row`): ask for a row's cache
  lines ahead of its use, for the scattered rows of the screen's candidates
  and of the correction.
- :func:`level_sweep`: a row's entries equal to a level, and the two
  largest below it, in one read of the row in whole vectors. Written by
  hand because the second largest is not a reduction LLVM's vectoriser
  recognises, and its loops over a short row (100 entries) leave a third of
  it to scalar code. ``_compiled._top_k`` of a row of 100 float32 at k = 3,
  from the cache, in one thread: 31 ns, against 56-62 ns with two of
  numba's sweeps in a call of its own (it is inlined now, see there).

Integers of the bits of non-negative floats order as the floats do
(``_compiled._screen`` makes the views), so every comparison is unsigned.
"""

import numba
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
            values = builder.load(address, align=element.bitwidth // 8, typ=vector)
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
