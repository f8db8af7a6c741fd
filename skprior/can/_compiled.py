"""CAN on NumPy arrays in one read and one copy: the compiled kernel's calls.

Optional: imported on the first call of
:func:`skprior.alternating_normalization` that can use it (``_can.py``), only
when numba is installed. The NumPy path makes a pass over the batch for each
operation (row maxima and row sums for the validation, the screen, the output
copy, the column sums of the confident rows, the correction). Here (the
functions that numba compiles are in ``_kernels.py``, this module runs
them):

1. :func:`screen`: the threads (one per core, kept between calls) take the
   batch in tasks of a few MB in turn; in each, ``_kernels._screen`` reads
   the rows once (``_kernels._read``, copying them into a given output as
   it goes; a new output, laid out for it and reused once let go by
   ``_output_memory.new_output``, gets NumPy's copy of the task's rows
   first, and the screen reads them there, from the cache, unless its
   pages have been written before) for each row's sum (checked against 1, for the
   validation) and largest entry seen as unsigned bits (which finds every
   entry that is not a finite non-negative float, as
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
``_kernels.py`` (or in numba's user cache directory): only the first run on
a machine compiles.
"""

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from queue import Empty, SimpleQueue

import numba
import numpy as np

from skprior._utils._validation import _LOGITS_FIX, _check_rows, _row_sum_tolerance
from skprior.can import _output_memory
from skprior.can._kernels import _correct, _screen
from skprior.can._solvers import power_floor, screen_share, tau_threshold

# The threads of :func:`screen` and :func:`correct` (None: see
# :func:`_threads`) and the size of the tasks that they take in turn (rows
# of about this many bytes).
THREADS = None
TASK_BYTES = 2**22


def screen(proba, k, tau, kind, alpha, accumulate, out=None):
    """Validate ``proba``, copy it and screen it in one read (:func:`_screen`).

    ``proba`` is a C-contiguous float32 or float64 ndarray whose shape is
    checked, ``k`` resolved, ``kind`` not ``"max_over_k"``. Returns ``None``
    when an entry is NaN, infinite or negative (also -0.0, which is valid:
    the NumPy path handles it and raises for the rest), else ``(out, low,
    column_sums, small)``: the copy of ``proba``, the low-confidence mask,
    the column sums of the confident rows (with ``accumulate``) and the flag
    of small entries. ``out``: where to copy ``proba`` (a new array if
    ``None``, perhaps in a kept buffer: ``_output_memory.new_output``;
    ``proba`` itself is not copied). Raises the error of ``check_proba``
    when a row does not sum to one.
    """
    unsigned = np.uint32 if proba.dtype == np.float32 else np.uint64
    n_rows, n_classes = proba.shape
    # The batch goes in tasks of TASK_BYTES, which the threads take in turn.
    # Into a given ``out``, each task's rows are copied as the screen reads
    # them (one read of the batch), and so into a new output whose pages
    # the process has written before (a buffer kept and reused, see
    # _output_memory). Pages new to the process are cleared by the system
    # on their first write, and there NumPy's copy (a memcpy) of the task's
    # rows before the screen is faster (2.84 passes with the screen's read
    # on 200,000 x 100 float32 in one thread, against 3.56 copying as the
    # screen reads). Either way the copy is shared out with the screen
    # rather than run beside it.
    # Taking tasks in turn balances the threads when another process holds
    # a core (a thread that gets half a core takes fewer tasks).
    step = max(1, TASK_BYTES // max(1, proba[:1].nbytes))
    n_tasks = -(-n_rows // step)
    in_place, copy_first = out is proba, False
    if out is None:
        out, copy_first = _output_memory.new_output(proba)  # (copied first: new pages)
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
    read, read_bits = (out, out.view(unsigned)) if copy_first else (proba, bits)

    def work(task):
        rows = slice(task * step, (task + 1) * step)
        if copy_first:
            np.copyto(out[rows], proba[rows])
        cell = np.zeros(1, dtype=unsigned)
        flags[task] = _screen(
            read[rows],
            read_bits[rows],
            None if in_place or copy_first else out[rows],
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
        size, old = _kept
        if size == n_workers:
            return old
        # (the new pool first: should it fail, the old one is still kept)
        pool = ThreadPoolExecutor(n_workers, thread_name_prefix="skprior-can")
        _kept = n_workers, pool
        if old is not None:
            old.shutdown(wait=False)
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

    n_threads = _threads()  # (read once: another thread may change THREADS)
    n_helpers = min(len(tasks), n_threads) - 1
    helpers = []
    try:
        for _ in range(n_helpers):
            try:
                helpers.append(_workers(n_threads - 1).submit(take))
            except RuntimeError:  # (at the interpreter's exit: this thread)
                break
        take()
        # (a helper that has not started finds nothing left: cancelled, not
        # waited for, as when another call keeps the threads busy)
        wait([helper for helper in helpers if not helper.cancel()])
    except BaseException:  # (no thread to start, an interrupt while waiting)
        errors.append(None)  # (the helpers stop after their task)
        wait([helper for helper in helpers if not helper.cancel()])
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
    # in turn: a corrected row costs a few copied ones; a helper is woken
    # only for a few milliseconds of work or more)
    step = max(1, TASK_BYTES // 2 // max(1, proba[:1].nbytes))
    n_parts = max(1, min(4 * _threads(), rows.size // step))
    parts = np.array_split(np.arange(rows.size), n_parts)

    def work(part):
        part = slice(part[0], part[-1] + 1) if part.size else slice(0, 0)
        _correct(proba, out, rows[part], column_sums, prior, float(alpha), lost[part])

    _in_turn(parts, work)
    return rows[lost]
