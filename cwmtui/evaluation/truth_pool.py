"""Ground truth on every core: a suite's programs traced by a pool of fork-server interpreters.

:func:`trace_programs` runs ``workers`` :class:`~cwmtui.interpreter.Interpreter` objects, each
with a fork server of its own, and one thread per interpreter that hands it the next program
and waits on it (the program runs in the server's child, on a core of its own; the thread only
reads the records and builds the frames). Programs are handed out in the suite's order, each to
whichever worker is free; the traces come back in the suite's order, and they are the ones one
interpreter gives: every program runs in a fresh fork of a server that runs nothing else, under
the same limits.

The pool's interpreters are its own (made like the caller's, if one is given, which is left
alone): a sandboxed fork server lives only as long as the thread that started it (bubblewrap's
``--die-with-parent`` is the parent *thread*'s death), so each is started, used and closed by
its worker's thread.

What one interpreter does when its fork server dies (the program in flight gets a ``died``
trace, "lost contact with the tracer process", and the next program starts a fresh server)
each worker does for its own. ``cancel``: no program is started after it is set; those in
flight finish, so the traces handed back are still the suite's first ones, in order. When the
caller stops early (Ctrl-C, an exception in what it does with a trace), the programs in flight
are abandoned: their servers are closed, as one interpreter's is.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Generator, Sequence

from ..interpreter import Interpreter, Limits, Program
from ..interpreter.runner import sandbox_available
from ..trace import Trace

_FINISHED = object()  # a worker's last word


def default_workers() -> int:
    """The cores this process may run on (``os.process_cpu_count`` where Python has it)."""
    counted = getattr(os, "process_cpu_count", None)
    if counted is not None:
        count = counted()
    elif hasattr(os, "sched_getaffinity"):
        count = len(os.sched_getaffinity(0))
    else:
        count = os.cpu_count()
    return max(1, count or 1)


def trace_programs(
    programs: Sequence[Program],
    limits: Limits,
    workers: int,
    interpreter: Interpreter | None = None,
    cancel: threading.Event | None = None,
) -> Generator[tuple[int, Trace, float], None, None]:
    """``(index, trace, seconds)`` of every program, in the order of ``programs``, traced by
    ``workers`` interpreters at once (no more than there are programs), made like
    ``interpreter`` (the same Python and tracer; it is not used itself) and closed here.

    A generator: the workers start on the first ``next`` and stop when it ends; close it (or
    use ``contextlib.closing``) when leaving early. An unexpected error of a worker (the
    interpreter never raises for what a program does) stops the others and is raised here."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    programs = list(programs)
    if not programs:
        return
    template = interpreter if interpreter is not None else Interpreter()
    interpreters = [template.sibling() for _ in range(min(workers, len(programs)))]
    if limits.sandbox:
        sandbox_available()  # found out here, before the threads ask at once
    stop = threading.Event()
    done: queue.SimpleQueue = queue.SimpleQueue()
    handed = iter(range(len(programs)))
    handing = threading.Lock()

    def work(worker: Interpreter) -> None:
        try:
            while not stop.is_set() and not (cancel is not None and cancel.is_set()):
                with handing:
                    index = next(handed, None)
                if index is None:
                    return
                began = time.perf_counter()
                trace = worker.trace(programs[index], limits)
                done.put((index, trace, time.perf_counter() - began))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            stop.set()
            done.put((None, exc, 0.0))
        finally:
            done.put(_FINISHED)

    threads = [threading.Thread(target=work, args=(worker,), name=f"truth-{number}", daemon=True)
               for number, worker in enumerate(interpreters)]
    ready: dict[int, tuple[Trace, float]] = {}
    following = 0  # the index handed back next
    running = len(threads)
    error: BaseException | None = None
    finished = False
    try:
        for thread in threads:
            thread.start()
        while running:
            try:
                item = done.get(timeout=0.25)  # (a timeout: Ctrl-C is seen while waiting)
            except queue.Empty:
                continue
            if item is _FINISHED:
                running -= 1
                continue
            index, trace, seconds = item
            if index is None:
                error = error or trace
                continue
            ready[index] = (trace, seconds)
            while following in ready:
                trace, seconds = ready.pop(following)
                yield following, trace, seconds
                following += 1
        if error is not None:
            raise error
        finished = True
    finally:
        stop.set()
        if not finished:  # the caller left, or a worker failed: abandon the programs in flight
            _close_all(interpreters)
        for thread in threads:
            thread.join()
        _close_all(interpreters)


def _close_all(interpreters: list[Interpreter]) -> None:
    """Close the interpreters at once (a server in the middle of a program takes up to 2 s)."""
    closing = [threading.Thread(target=worker.close, daemon=True) for worker in interpreters]
    for thread in closing:
        thread.start()
    for thread in closing:
        thread.join()
