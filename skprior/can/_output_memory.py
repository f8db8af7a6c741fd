"""The memory of CAN's large new outputs: laid out for the copy, reused once let go.

Used by the compiled kernel (``_compiled.screen`` makes its new output with
:func:`new_output`, and ``alternating_normalization`` passes it to
:func:`keep` as it returns it), for outputs of ``_OWN_MAPPING`` bytes or more
(64 MB; 200,000 x 100 float32 is 80 MB). Pure NumPy; no numba here.

*Layout.* Linux backs a large array with huge pages (2 MB, transparent huge
pages, which NumPy asks for) only in the whole, aligned 2 MB ranges of its
allocation, and memcpy is fastest between equal offsets within a page.
Arrays under 32 MB, glibc's largest threshold for a mapping of their own,
come from its heap once one has been freed, their pages already mapped; the
layout starts at 64 MB, where its 2 MB are 3% of the array or less.

*Reuse.* Above that threshold every new array is a new mapping, whose pages
the system clears on their first write. Into such pages NumPy's copy of a
task before the screen reads it is the faster way (2.84 ``proba.sum()``
passes with the screen's read, against 3.56 copying as the screen reads);
into pages the process has written already, copying as the screen reads
costs little more than the read. A whole call (200,000 x 100 float32 in one
thread, best of 15): 3.1 passes into a reused buffer against 4.3 into a new
one. So the buffers of the last :data:`KEPT_OUTPUTS` outputs handed out are
kept, and a call takes one of the same size once nothing else refers to it
(no array, view or memoryview of it: its reference count, the check of
NumPy's ``ndarray.resize``). A loop that rebinds its result (``p =
can(batch)`` holds the previous result during the call) thus writes each
result over the one before the previous. Before a call allocates a buffer
(none of its size free), it lets go the kept ones that are free: batches of
changing sizes hold no more memory than before. The buffers are let go
:data:`KEEP_SECONDS` after the last call that kept one, as jemalloc returns
freed memory to the system after 10 s (its ``dirty_decay_ms``): memory that
a program has let go is the system's again within seconds, not kept for
good. ``KEEP_SECONDS = 0`` keeps none.
"""

import os
import sys
import sysconfig
import threading
import time

import numpy as np

# The outputs whose buffers are kept (two: a loop that rebinds its result
# holds one) and for how long after the last call that kept one.
KEPT_OUTPUTS, KEEP_SECONDS = 2, 10.0

_HUGE_PAGE, _PAGE, _OWN_MAPPING = 2**21, 4096, 2**26


def new_output(proba):
    """A new array like C-contiguous ``proba``, laid out to be copied into fast.

    NumPy's own allocation (``np.empty_like``) of 64 MB or more is a mapping
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
    A view of a larger uint8 buffer (``.base``): a kept one when one of the
    same size is free (see the module's notes). Where the system has no
    such pages, the same copy, and 2 MB more of address space.

    Returns ``(out, new)``: ``new`` is False when ``out``'s pages have been
    written before (a reused buffer), True otherwise. Pass ``out`` to
    :func:`keep` once it is the caller's result.
    """
    if proba.nbytes < _OWN_MAPPING:
        return np.empty_like(proba), True
    size = proba.nbytes + _HUGE_PAGE + _PAGE
    buffer = _take(size)
    new = buffer is None
    if new:
        buffer = np.empty(size, dtype=np.uint8)
    offset = proba.ctypes.data % _PAGE
    offset -= offset % proba.itemsize  # (an input not aligned: an output that is)
    start = -buffer.ctypes.data % _HUGE_PAGE + offset
    data = buffer[start : start + proba.nbytes]
    return data.view(proba.dtype).reshape(proba.shape), new


def keep(out):
    """Keep the buffer of ``out`` (from :func:`new_output`, returned now).

    Called as ``alternating_normalization`` returns ``out``: only a result
    handed out is kept, and a call that raises, or that leaves the batch to
    the NumPy path, lets its buffer go with ``out``. Until
    :data:`KEEP_SECONDS` pass without a call that keeps one.
    """
    buffer = out.base
    if out.nbytes < _OWN_MAPPING or not isinstance(buffer, np.ndarray):
        return
    global _kept_until
    with _lock:
        if not _keeps():
            dropped = _empty_kept()
        else:
            _kept.append(buffer)
            dropped = _kept[:-KEPT_OUTPUTS]
            del _kept[:-KEPT_OUTPUTS]
            _kept_until = time.monotonic() + KEEP_SECONDS
            dropped += _arm_timer()
    del dropped  # (their memory freed outside the lock)


def release():
    """Let every kept buffer go now (those still in use stay their users')."""
    global _timer
    with _lock:
        dropped = _empty_kept()
        if _timer is not None:
            _timer.cancel()
        _timer = None
    del dropped


def _keeps():
    return _REFCOUNTS and KEEP_SECONDS > 0 and KEPT_OUTPUTS > 0


def _empty_kept():
    """Empty the kept list (under the lock); its buffers, to be let go after it."""
    dropped = list(_kept)
    _kept.clear()
    return dropped


def _refs(buffers, index):
    """The reference count of ``buffers[index]`` (this call's own included)."""
    return sys.getrefcount(buffers[index])


# Reference counts say whether anything else refers to a buffer in CPython
# with its global lock; elsewhere nothing is kept.
_REFCOUNTS = sys.implementation.name == "cpython" and not sysconfig.get_config_var(
    "Py_GIL_DISABLED"
)


def _take(size):
    """A kept buffer of ``size`` bytes that nothing else refers to, or None.

    Taken out of the kept ones under the lock, so no other call takes it.
    With none, the kept buffers that are free are let go (a new buffer will
    be allocated). A buffer referred to by the kept list alone has the
    count of a new object in a list, measured the same way at each call.
    """
    if not _REFCOUNTS:
        return None
    dropped = []
    with _lock:
        alone = _refs([object()], 0)
        free = [i for i in range(len(_kept)) if _refs(_kept, i) <= alone]
        for index in free if _keeps() else ():
            if _kept[index].size == size:
                return _kept.pop(index)
        for index in reversed(free):
            dropped.append(_kept.pop(index))
    del dropped  # (their memory freed outside the lock)
    return None


def _arm_timer():
    """Start the timer that lets the buffers go, if none ends by ``_kept_until``.

    One timer, which waits again while calls come; a lowered
    :data:`KEEP_SECONDS` starts an earlier one. Where no thread can start
    (at the interpreter's exit, at a limit of threads), nothing is kept.
    Returns the buffers to let go (after the lock): those, or none.
    """
    global _timer, _timer_end
    if _timer is not None and _timer_end <= _kept_until:
        return []
    if _timer is not None:
        _timer.cancel()
    # (at most threading's longest wait: it waits again at its end)
    seconds = min(max(0.0, _kept_until - time.monotonic()), threading.TIMEOUT_MAX)
    timer = threading.Timer(seconds, _let_go_when_idle)
    timer.daemon = True  # (it does not hold the interpreter's exit)
    try:
        timer.start()
    except RuntimeError:
        _timer = None
        return _empty_kept()
    _timer, _timer_end = timer, _kept_until
    return []


def _let_go_when_idle():
    """The timer's end: let the kept buffers go, or wait for a later call's time."""
    global _timer
    dropped = []
    with _lock:
        if threading.current_thread() is not _timer:
            return  # (cancelled after it ended, or replaced)
        _timer = None
        if _kept_until > time.monotonic():
            dropped = _arm_timer()
        else:
            dropped = _empty_kept()
    del dropped  # (the system gets back the memory of those let go)


def _forget():
    """In a forked child: no timer there (the parent's thread is not copied)."""
    global _kept, _kept_until, _timer, _timer_end, _lock
    _kept, _kept_until, _timer, _timer_end = [], 0.0, None, 0.0
    _lock = threading.Lock()


_forget()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
