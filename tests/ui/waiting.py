"""Waiting for the app in Pilot tests: a condition polled while the app runs, never a fixed
sleep (on a loaded CI machine a message can take seconds to be handled)."""

from __future__ import annotations

import time

TIMEOUT = 30.0  # seconds: long enough for a loaded two-core machine, short enough to fail clearly


async def wait_for(pilot, condition, timeout: float = TIMEOUT, what: str = "the app") -> None:
    """Pump the app until ``condition()`` holds; fail after ``timeout`` seconds."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, f"timed out waiting for {what}"
        await pilot.pause(0.05)
