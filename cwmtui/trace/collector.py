"""Pausing Python's cyclic garbage collector while a bulk of objects is made.

Reading a long session or comparing two long traces makes hundreds of thousands of small
containers (frames, rows, sets of names) at once, none of them garbage and none in a reference
cycle. The collector, triggered every few hundred allocations, would scan the growing heap
again and again while they are made: more than half the time of comparing 100,000 steps.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator


_lock = threading.Lock()
_pauses = 0  # blocks inside collector_paused(), over all threads
_was_enabled = False  # the collector's state when the first of them began


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (reference counting goes on as ever);
    the collector is on again after it, if it was on before. Thread-safe: the UI thread and
    worker threads compare at once, so the first pause to begin remembers the state and the
    last to end restores it (with one flag per block, two overlapping blocks could leave the
    collector off for good)."""
    global _pauses, _was_enabled
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()
