"""Pausing Python's cyclic garbage collector while a bulk of objects is made.

Reading a long session or comparing two long traces makes hundreds of thousands of small
containers (frames, rows, sets of names) at once, none of them garbage and none in a reference
cycle. The collector, triggered every few hundred allocations, would scan the growing heap
again and again while they are made: more than half the time of comparing 100,000 steps.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (reference counting goes on as ever);
    the collector is on again after it, if it was on before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
