"""CAN on NumPy arrays in one read and one copy: compiled kernels (numba).

Optional: imported on the first call of
:func:`skprior.alternating_normalization` that can use it (``_can.py``), only
when numba is installed. The NumPy path makes a pass over the batch for each
operation (row maxima and row sums for the validation, the screen, the output
copy, the column sums of the confident rows, the correction). Here:

1. :func:`screen`: the threads (one per core, kept between calls) take the
   batch in tasks of a few MB in turn; in each, :func:`_screen` reads the
   rows once (:func:`_read`, copying them into a given output as it goes; a
   new output, laid out for it by :func:`_empty_for_copy`, gets NumPy's
   copy of the task's rows first, and the screen reads them from the
   cache) for each row's sum (checked against 1, for the validation) and
   largest entry seen as unsigned bits (which finds every entry that is
   not a finite non-negative float, as
   ``_validation.check_proba_with_row_max`` does) and for the column sums
   of every row. Then, from those figures, it finds the top-k uncertainty
   of the rows that the row-maximum bound does not already show confident
   (``_solvers.low_confidence``), and the column sums of the confident rows
   (``sum_i A_i ** alpha``): every row's less the low rows'.
2. :func:`correct`: the closed form of CAN with one iteration,
   ``q * b**alpha / (C + b**alpha)`` renormalised, written over the
   low-confidence rows of the output (a few percent of the batch, scattered
   over it: each row's memory is asked for two rows ahead, which takes a
   third off the correction's time).

Anything else (a reference, ``d > 1``, powers near underflow, rows that
lose digits) continues on the NumPy path from the screened batch
(``_solvers.can_rows``). The arithmetic is that of the NumPy path (float64,
the same formulas in the same order within a row); sums add their terms in
another order, so results agree to rounding (float64 1e-15, float32 one
rounding), not bit for bit. ``cache=True`` stores the machine code beside
this file (or in numba's user cache directory): only the first run on a
machine compiles.
"""

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from queue import Empty, SimpleQueue

import numba
import numpy as np

from skprior._utils._validation import _LOGITS_FIX, _check_rows, _row_sum_tolerance
from skprior.can._intrinsics import _prefetch_row, level_sweep
from skprior.can._solvers import power_floor, screen_share, tau_threshold

# The threads of :func:`screen` and :func:`correct` (None: see
# :func:`_threads`) and the size of the tasks that they take in turn (rows
# of about this many bytes).
THREADS = None
TASK_BYTES = 2**22

# Largest k whose top k are found level by level (k sweeps over the row in
# the cache); above, the row is sorted (k near n_classes, rare).
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
    :func:`~skprior.can._intrinsics.level_sweep`) counts the entries equal to
    the current level and finds the two largest below it. A row with ties
    fills several places at one level; the first below fills one place when
    the second is smaller (else it is held twice or more, and the next sweep
    counts it), and the second is the next level. The top 3 of a row
    without ties takes one sweep. Returns ``False`` (``top`` incomplete) when
    the places filled show the row confident: the rest are at most the next
    level, so the top k sum to at most ``filled + places left * level``, and
    a largest entry above ``share`` times that is a renormalised share above
    the bound of ``_solvers._largest_uncertain_share`` (``share = 0``: no such
    stop).
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


# Linux backs a large array with huge pages (2 MB, transparent huge pages,
# which NumPy asks for) only in the whole, aligned 2 MB ranges of its
# allocation, and memcpy is fastest between equal offsets within a page.
# Arrays under 32 MB, glibc's largest threshold for a mapping of their own,
# come from its heap once one has been freed, their pages already mapped.
_HUGE_PAGE, _PAGE, _OWN_MAPPING = 2**21, 4096, 2**25


def _empty_for_copy(proba):
    """A new array like C-contiguous ``proba``, laid out to be copied into fast.

    NumPy's own allocation (``np.empty_like``) of 32 MB or more is a mapping
    of its own that starts at a page boundary plus 16 bytes: on average 1 MB
    before the first 2 MB boundary gets 4 KB pages, each cleared by the
    system in a fault of its own (about 2 us each on this machine). Here the
    array starts at ``proba``'s offset within a page, past the first 2 MB
    boundary of an allocation 2 MB + 4 KB longer, whose head is never
    written, so the system gives it no memory (resident memory as NumPy's).
    The copy of 200,000 x 100 float32 in one thread: 1.97-1.99
    ``proba.sum()`` passes against 2.25-2.27 into ``np.empty_like``; in 4 MB
    tasks, each read by the screen after its copy, 2.84 against 3.52 (2.86
    with the array at the boundary itself: the copy's offsets then differ).
    A view of a larger uint8 buffer (``.base``). Where the system has no
    such pages, the same copy, and 2 MB more of address space.
    """
    if proba.nbytes < _OWN_MAPPING:
        return np.empty_like(proba)
    buffer = np.empty(proba.nbytes + _HUGE_PAGE + _PAGE, dtype=np.uint8)
    start = -buffer.ctypes.data % _HUGE_PAGE + proba.ctypes.data % _PAGE
    data = buffer[start : start + proba.nbytes]
    return data.view(proba.dtype).reshape(proba.shape)


def screen(proba, k, tau, kind, alpha, accumulate, out=None):
    """Validate ``proba``, copy it and screen it in one read (:func:`_screen`).

    ``proba`` is a C-contiguous float32 or float64 ndarray whose shape is
    checked, ``k`` resolved, ``kind`` not ``"max_over_k"``. Returns ``None``
    when an entry is NaN, infinite or negative (also -0.0, which is valid:
    the NumPy path handles it and raises for the rest), else ``(out, low,
    column_sums, small)``: the copy of ``proba``, the low-confidence mask,
    the column sums of the confident rows (with ``accumulate``) and the flag
    of small entries. ``out``: where to copy ``proba`` (a new array if
    ``None``; ``proba`` itself is not copied). Raises the error of
    ``check_proba`` when a row does not sum to one.
    """
    unsigned = np.uint32 if proba.dtype == np.float32 else np.uint64
    n_rows, n_classes = proba.shape
    # The batch goes in tasks of TASK_BYTES, which the threads take in turn.
    # Into a given ``out``, each task's rows are copied as the screen reads
    # them (one read of the batch). A new output's pages are new to the
    # process: the system clears each on its first write, and there NumPy's
    # copy (a memcpy) of the task's rows before the screen is faster (2.84
    # passes with the screen's read on 200,000 x 100 float32 in one thread,
    # against 3.56 copying as the screen reads; see _empty_for_copy).
    # Either way the copy is shared out with the screen rather than run
    # beside it.
    # Taking tasks in turn balances the threads when another process holds
    # a core (a thread that gets half a core takes fewer tasks).
    step = max(1, TASK_BYTES // max(1, proba[:1].nbytes))
    n_tasks = -(-n_rows // step)
    in_place, new = out is proba, out is None
    out = _empty_for_copy(proba) if new else out
    low = np.zeros(n_rows, dtype=bool)
    column_sums = np.zeros((n_tasks, n_classes))
    flags = np.zeros((n_tasks, 3), dtype=bool)  # (bad, small, off) per task
    bits = proba.view(unsigned)
    constants = (
        np.array(np.inf, dtype=proba.dtype).view(unsigned)[()],
        k,
        screen_share(k, tau, proba.shape, proba.dtype),
        float(np.log(k if kind == "renormalized" else n_classes)),
        tau_threshold(tau, np.finfo(proba.dtype)),
        kind == "renormalized",
        accumulate,
        float(alpha),
        proba.dtype.type(power_floor(alpha)),
        _row_sum_tolerance(proba.dtype, n_classes),
    )

    # (a new output is screened in place of proba once its rows are copied:
    # the same values, in lines the copy has just written, 0.1 of a pass
    # less in one thread)
    read, read_bits = (out, out.view(unsigned)) if new else (proba, bits)

    def work(task):
        rows = slice(task * step, (task + 1) * step)
        if new:
            np.copyto(out[rows], proba[rows])
        cell = np.zeros(1, dtype=unsigned)
        flags[task] = _screen(
            read[rows],
            read_bits[rows],
            None if in_place or new else out[rows],
            low[rows],
            column_sums[task],
            cell,
            cell.view(proba.dtype),
            *constants,
        )

    _in_turn(range(n_tasks), work)
    bad, small, off = flags.any(axis=0)
    if bad:
        return None
    if off:  # (NumPy's row sums decide, and give the error: a row off only by
        # the kernel's order of the terms is taken, as the NumPy path takes it)
        row_sums = proba.sum(axis=1, dtype=np.float64)
        _check_rows(row_sums, None, n_classes, "proba", proba.dtype, _LOGITS_FIX)
    # (the tasks' sums added in task order: the same result for any threads)
    return out, low, column_sums.sum(axis=0), small


def _threads():
    """The number of threads of a call.

    ``THREADS``, else numba's thread count (the cores of the process, or
    ``NUMBA_NUM_THREADS``, which joblib's workers set), at most 8: the work
    is bound by memory, which a few threads fill.
    """
    return THREADS or max(1, min(numba.config.NUMBA_NUM_THREADS, 8))


def _workers(n_workers):
    """The ``n_workers`` threads kept for the calls of this process.

    Started on the first call that needs them and woken by the next (BLAS
    and numba's own pools keep theirs too): a thread's start costs a call of
    20,000 x 100 float32 a fifth of a millisecond, a fifth of its time (best
    of 30: 0.82-0.84 ms against 1.00-1.22 ms, `bench_can_passes.py --rows
    20000`).
    """
    global _kept
    with _kept_lock:
        size, pool = _kept
        if size != n_workers:
            if pool is not None:
                pool.shutdown(wait=False)
            pool = ThreadPoolExecutor(n_workers, thread_name_prefix="skprior-can")
            _kept = n_workers, pool
        return pool


def _forget_workers():
    """In a forked child: the parent's threads are not there (start anew)."""
    global _kept, _kept_lock
    _kept, _kept_lock = (0, None), threading.Lock()


_forget_workers()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def _in_turn(tasks, work):
    """Run ``work(task)`` for each of ``tasks``, in threads that take them in turn.

    At most :func:`_threads` threads, this one included (the others kept,
    :func:`_workers`). Raises the first exception raised, once every thread
    has ended its task (none takes a new task after it).
    """
    queue = SimpleQueue()
    for task in tasks:
        queue.put(task)
    errors = []

    def take():
        while not errors:
            try:
                task = queue.get_nowait()
            except Empty:
                return
            try:
                work(task)
            except BaseException as error:  # (re-raised in the calling thread)
                errors.append(error)

    n_helpers = min(len(tasks), _threads()) - 1
    helpers = []
    try:
        for _ in range(n_helpers):
            try:
                helpers.append(_workers(_threads() - 1).submit(take))
            except RuntimeError:  # (at the interpreter's exit: this thread alone)
                break
        take()
        # (a helper that has not started finds nothing left: cancelled, not
        # waited for, as when another call keeps the threads busy)
        wait([helper for helper in helpers if not helper.cancel()])
    except BaseException:  # (no thread to start, an interrupt while waiting)
        errors.append(None)  # (the helpers stop after their task)
        wait(helpers)
        raise
    if errors:
        raise errors[0]


def correct(proba, out, rows, column_sums, prior, alpha):
    """Write CAN's d = 1 correction of ``proba[rows]`` into ``out`` (:func:`_correct`).

    Returns the rows that lost digits, which are left as they were in ``out``
    (``out`` may be ``proba`` itself).
    """
    prior = np.ascontiguousarray(prior, dtype=np.float64)
    lost = np.zeros(rows.size, dtype=bool)
    # (in parts of half the screen's tasks or more, which the threads take
    # in turn: a corrected row costs a few copied ones; a thread is started
    # only for a few milliseconds of work or more)
    step = max(1, TASK_BYTES // 2 // max(1, proba[:1].nbytes))
    n_parts = max(1, min(4 * _threads(), rows.size // step))
    parts = np.array_split(np.arange(rows.size), n_parts)

    def work(part):
        part = slice(part[0], part[-1] + 1) if part.size else slice(0, 0)
        _correct(proba, out, rows[part], column_sums, prior, float(alpha), lost[part])

    _in_turn(parts, work)
    return rows[lost]
