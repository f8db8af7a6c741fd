"""CAN's large new outputs: their buffers kept, reused only once let go.

The threshold (64 MB) is lowered to 1 MB here; the buffers are 2 MB + 4 KB
longer than the output (its layout, ``test_compiled.py``).
"""

import multiprocessing
import os
import threading
import time
import warnings
import weakref

import numpy as np
import pytest

from skprior import alternating_normalization
from skprior.can import _can, _output_memory


def new_output(proba):
    """An output handed out: made, then kept (as a call that returns it)."""
    out, new = _output_memory.new_output(proba)
    _output_memory.keep(out)
    return out, new


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch):
    monkeypatch.setattr(_output_memory, "_OWN_MAPPING", 2**20)
    _output_memory.release()
    yield
    _output_memory.release()


def proba_of(n_rows, seed=0, dtype=np.float64):
    proba = np.random.default_rng(seed).dirichlet(np.full(100, 0.1), n_rows)
    return (proba / proba.sum(axis=1, keepdims=True)).astype(dtype)


def test_a_buffer_let_go_is_reused():
    proba = proba_of(2000)
    first, new = new_output(proba)
    assert new
    buffer = weakref.ref(first.base)
    del first
    second, new = new_output(proba)
    assert second.base is buffer() and not new
    assert second.shape == proba.shape and second.dtype == proba.dtype


def values(buffer, out_of):
    """The output's values as they are now in ``buffer`` (its base)."""
    start, size = out_of
    return buffer[start : start + size].view(np.float64)


@pytest.mark.parametrize(
    "hold",
    [
        lambda out: out[3:7],
        lambda out: out.T,
        lambda out: memoryview(out),
        lambda out: out.base,
        lambda out: np.asarray(out).reshape(-1),
        lambda out: [out],
    ],
    ids=["view", "transpose", "memoryview", "base", "reshaped", "in a list"],
)
def test_a_buffer_still_referred_to_is_not_reused(hold):
    """Whatever still refers to an output's memory keeps it the user's: the
    next calls write elsewhere, and what it shows is unchanged."""
    proba = proba_of(2000)
    first, _ = new_output(proba)
    first[...] = 0.5
    place = (first.ctypes.data - first.base.ctypes.data, proba.nbytes)
    held, buffer = hold(first), weakref.ref(first.base)
    del first
    out, new = new_output(proba)
    assert out.base is not buffer() and new
    out[...] = 0.25
    assert np.all(values(buffer(), place) == 0.5)
    del held, out
    assert new_output(proba)[0].base is buffer()  # (let go: reused)


def test_a_loop_that_rebinds_its_result_alternates_two_buffers():
    proba, buffers, out = proba_of(2000), [], None
    for _ in range(5):
        out, _ = new_output(proba)  # (the previous result held during the call)
        buffers.append(weakref.ref(out.base))
        out[...] = len(buffers)
    assert [b() is buffers[0]() for b in buffers] == [True, False, True, False, True]
    assert np.all(out == 5) and buffers[1]() is not None


def test_only_a_buffer_of_the_same_size_is_reused():
    proba = proba_of(2000)
    first, _ = new_output(proba)
    buffer = weakref.ref(first.base)
    del first
    as_float32, new = new_output(proba_of(4000, dtype=np.float32))
    assert as_float32.base is buffer() and not new  # (the same bytes)
    del as_float32
    smaller, new = new_output(proba[:-1])
    assert new and buffer() is None  # (let go before the new one was made)
    assert [smaller.base is kept for kept in _output_memory._kept] == [True]


def test_batches_of_changing_sizes_hold_no_more_memory():
    """A loop over batches of changing sizes holds, when a call has made its
    new output, the previous result and the new one, as without the kept
    buffers (it held two kept free ones of other sizes too)."""
    out, alive = None, []
    for n_rows in range(2000, 2006):
        new, _ = _output_memory.new_output(proba_of(n_rows))
        alive.append(weakref.ref(new.base))
        assert sum(buffer() is not None for buffer in alive) <= 2
        _output_memory.keep(new)
        out = new  # noqa: F841 (held until the next call has made its output)


def test_the_last_two_are_kept():
    outs = [new_output(proba_of(2000 + i))[0] for i in range(3)]  # (all held)
    first = weakref.ref(outs[0].base)
    kept = [weakref.ref(buffer) for buffer in _output_memory._kept]
    assert len(kept) == 2
    assert kept[0]() is outs[1].base and kept[1]() is outs[2].base
    del outs
    assert first() is None  # (let go and not kept: freed)
    assert all(k() is not None for k in kept)


def wait_until(condition, seconds=10):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def test_kept_buffers_are_let_go_after_keep_seconds(monkeypatch):
    monkeypatch.setattr(_output_memory, "KEEP_SECONDS", 0.05)
    out, _ = new_output(proba_of(2000))
    buffer = weakref.ref(out.base)
    del out
    assert wait_until(lambda: buffer() is None)
    assert wait_until(lambda: _output_memory._timer is None)


def test_a_lowered_keep_seconds_starts_an_earlier_timer(monkeypatch):
    new_output(proba_of(2000))  # (a timer of 10 s)
    monkeypatch.setattr(_output_memory, "KEEP_SECONDS", 0.05)
    out, _ = new_output(proba_of(2000))
    buffer = weakref.ref(out.base)
    del out
    assert wait_until(lambda: buffer() is None, seconds=5)


def test_release_lets_go_and_stops_the_timer():
    out, _ = new_output(proba_of(2000))
    timer, buffer = _output_memory._timer, weakref.ref(out.base)
    del out
    _output_memory.release()
    assert buffer() is None and _output_memory._timer is None
    timer.join(5)
    assert not timer.is_alive()  # (cancelled, not left to run for 10 s)


def test_the_timer_waits_again_while_calls_come(monkeypatch):
    """At the timer's end, a call since (a later time to keep until) starts
    another wait; without one, the buffers are let go."""
    monkeypatch.setattr(_output_memory, "KEEP_SECONDS", 30.0)
    out, _ = new_output(proba_of(2000))
    _output_memory._timer.cancel()
    # (this thread as the timer's, at its end: 30 s remain)
    monkeypatch.setattr(_output_memory, "_timer", threading.current_thread())
    _output_memory._let_go_when_idle()
    second_timer = _output_memory._timer
    assert second_timer is not threading.current_thread() and second_timer.is_alive()
    assert any(out.base is k for k in _output_memory._kept)
    second_timer.cancel()
    monkeypatch.setattr(_output_memory, "_timer", threading.current_thread())
    monkeypatch.setattr(_output_memory, "_kept_until", time.monotonic() - 1)
    _output_memory._let_go_when_idle()
    assert _output_memory._kept == [] and _output_memory._timer is None


def test_a_timer_that_ended_late_does_nothing(monkeypatch):
    """A timer replaced (or cancelled by release) as it ended leaves the
    kept buffers and the current timer alone."""
    out, _ = new_output(proba_of(2000))
    monkeypatch.setattr(_output_memory, "_kept_until", time.monotonic() - 1)
    _output_memory._let_go_when_idle()  # (run here, not in the timer's thread)
    assert any(out.base is k for k in _output_memory._kept)
    assert _output_memory._timer is not None


def test_no_thread_to_start_keeps_nothing(monkeypatch):
    """Where a thread cannot start (at the interpreter's exit, at a limit of
    threads) the call goes on, and nothing is kept: nothing would let it go."""

    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Timer, "start", refuse)
    out, new = new_output(proba_of(2000))
    assert new and out.shape == (2000, 100)
    assert _output_memory._kept == [] and _output_memory._timer is None


@pytest.mark.parametrize("setting", ["KEEP_SECONDS", "KEPT_OUTPUTS", "_REFCOUNTS"])
def test_nothing_kept_when_turned_off(monkeypatch, setting):
    """``KEEP_SECONDS = 0`` or ``KEPT_OUTPUTS = 0`` keep nothing, nor does
    an interpreter whose reference counts cannot tell (``_REFCOUNTS``)."""
    monkeypatch.setattr(_output_memory, setting, 0)
    proba = proba_of(2000)
    first, _ = new_output(proba)
    buffer = weakref.ref(first.base)
    del first
    assert buffer() is None and _output_memory._kept == []
    assert new_output(proba)[1]


def test_calls_in_threads_never_share_a_buffer():
    proba, errors = proba_of(2000), []

    def calls(value):
        for _ in range(30):
            out, _ = new_output(proba)
            out[...] = value
            time.sleep(0.0005)
            if not np.all(out == value):
                errors.append(value)

    threads = [threading.Thread(target=calls, args=(v,)) for v in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def _kept_in_child():
    return len(_output_memory._kept), _output_memory._timer is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
def test_a_forked_child_keeps_none_of_the_parents():
    """The parent's timer thread is not in a forked child: the child starts
    with nothing kept (else what it kept would never be let go)."""
    out, _ = new_output(proba_of(2000))
    assert _output_memory._kept and _output_memory._timer is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (fork with threads)
        with multiprocessing.get_context("fork").Pool(1) as pool:
            assert pool.apply(_kept_in_child) == (0, True)
    del out


@pytest.fixture
def kernel(monkeypatch):
    """``alternating_normalization`` through the kernel, in tasks of 500 rows."""
    pytest.importorskip("numba", exc_type=ImportError)
    from skprior.can import _compiled

    monkeypatch.setattr(_can, "COMPILED_MIN_ELEMENTS", 0)
    monkeypatch.setattr(_compiled, "TASK_BYTES", 500 * 100 * 8)
    monkeypatch.delenv("SKPRIOR_NO_NUMBA", raising=False)
    return _compiled


@pytest.mark.parametrize("threads", [1, 2])
def test_the_kernel_into_a_reused_buffer(monkeypatch, cifar100, kernel, threads):
    """Through ``alternating_normalization``: a reused buffer (its rows
    copied as the screen reads them, task by task) gets the values a new one
    gets, and a view of an earlier result keeps its values."""
    monkeypatch.setattr(kernel, "THREADS", threads)
    made, new_output = [], _output_memory.new_output

    def noted(proba):  # (its flag only: a reference would hold the buffer)
        out, new = new_output(proba)
        made.append(new)
        return out, new

    monkeypatch.setattr(_output_memory, "new_output", noted)
    prior = np.full(100, 0.01)
    rows = cifar100[0][:4000].astype(np.float64)
    batches = [np.roll(rows, shift, axis=0) for shift in (0, 1, 2)]
    monkeypatch.setenv("SKPRIOR_NO_NUMBA", "1")
    expected = [alternating_normalization(b, prior) for b in batches]
    monkeypatch.delenv("SKPRIOR_NO_NUMBA")
    first = alternating_normalization(batches[0], prior)
    np.testing.assert_allclose(first, expected[0], rtol=1e-12, atol=0)
    held, buffer = first[10:20], weakref.ref(first.base)
    del first
    second = alternating_normalization(batches[1], prior)
    assert second.base is not buffer()
    np.testing.assert_allclose(held, expected[0][10:20], rtol=1e-12, atol=0)
    del held
    third = alternating_normalization(batches[2], prior)
    assert third.base is buffer()  # (let go once the view was)
    assert made == [True, True, False]  # (the third copied as it is screened)
    np.testing.assert_allclose(second, expected[1], rtol=1e-12, atol=0)
    np.testing.assert_allclose(third, expected[2], rtol=1e-12, atol=0)


def test_a_result_not_returned_is_not_kept(cifar100, kernel):
    """A batch the kernel leaves to the NumPy path (a -0.0 entry) and one
    whose rows do not sum to one (an error) keep no buffer: only results
    handed out are."""
    rows = cifar100[0][:4000].astype(np.float64)
    signed = rows.copy()
    signed[5] = 0.0
    signed[5, 0], signed[5, 1] = 1.0, -0.0
    result = alternating_normalization(signed, np.full(100, 0.01))
    assert result.base is None and _output_memory._kept == []
    off = rows.copy()
    off[7] *= 1.5
    with pytest.raises(ValueError, match="sum"):
        alternating_normalization(off, np.full(100, 0.01))
    assert _output_memory._kept == []
    with pytest.raises(ValueError, match="prior"):  # (raised after the screen)
        alternating_normalization(rows, np.full(99, 1 / 99))
    assert _output_memory._kept == []
