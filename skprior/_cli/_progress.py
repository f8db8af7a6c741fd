"""The progress bars of the ``skprior`` commands, on stderr.

Drawn by tqdm, and only where someone watches: off with ``--quiet``, and off
when stderr is not a terminal (tqdm's ``disable=None``), so that logs and
pipes get the one-line messages only. Out of core, every pass over the
blocks (``dask.compute``) gets a bar of its tasks, numbered, since how many
passes an estimate takes is known only at its end.
"""

import contextlib
import sys
import threading


def bar(args, what, total=None):
    """A tqdm bar on stderr for ``what`` (``total`` steps), or a disabled one."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=f"skprior {args.command}: {what}",
        file=sys.stderr,
        disable=True if getattr(args, "quiet", False) else None,
        leave=False,
        dynamic_ncols=True,
    )


@contextlib.contextmanager
def ticking(args, what, every=1.0):
    """Within the block, a line counting its seconds.

    For a step with no progress of its own to report, such as an in-memory
    fit: a minute of it is not a minute of silence.
    """
    progress = bar(args, what)
    if progress.disable:
        yield
        return
    progress.bar_format = "{desc}: {elapsed}"
    stop = threading.Event()

    def tick():
        while not stop.wait(every):
            progress.refresh()

    thread = threading.Thread(target=tick, daemon=True)
    with progress:  # (the ticks end before the bar closes)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


@contextlib.contextmanager
def passes(args):
    """Within the block, a bar over the tasks of each pass over the blocks."""
    if getattr(args, "quiet", False):
        yield
        return
    from dask.callbacks import Callback

    class Passes(Callback):
        count = 0

        def _start_state(self, dsk, state):
            Passes.count += 1
            states = ("ready", "waiting", "running", "finished")
            total = sum(len(state[name]) for name in states)
            self.bar = bar(args, f"pass {Passes.count} over the blocks", total)

        def _posttask(self, key, result, dsk, state, worker_id):
            self.bar.update()

        def _finish(self, dsk, state, errored):
            self.bar.close()

    with Passes():
        yield
