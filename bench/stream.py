"""Benchmark: a rollout streaming into the session and onto the screen.

    python bench/stream.py [--frames 2000]

1. **The session, per appended frame.** A replay of a loop's own trace (``--frames`` frames) runs
   through ``DebugSession.run_main`` (what the debugger, ``diff`` and ``eval`` run); the time
   between frames is kept by position, and printed per quarter of the trace: flat from frame 100
   to the end means O(1) work per frame. Beside it, in the same run, the baseline: the session
   as it was before #23, which copied the whole frame list on every frame (its ``forward``
   patched back in).
2. **The screen, per second.** The same replay in the app, headless (120x40), through the live
   session's worker: how many branch states and activity lines reached the screen's handlers,
   and how many times the status bar was drawn again, against the seconds it streamed and the
   screen frames Textual could have drawn in them (60 a second).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LOOP = """def f(n):  # << START_OF_TRACE
    total = 0
    for i in range(n):
        total += i
    return total
"""


def replay_record(frames: int):
    from cwmtui.interpreter import Interpreter, Limits, program_from_source
    from cwmtui.model.replay import ReplayRecord
    from cwmtui.trace import render_frames, tokens

    n = max(1, (frames - 3) // 2)
    program = program_from_source(LOOP, "<loop>", call=f"f({n})")
    with Interpreter() as interpreter:
        truth = interpreter.trace(program, Limits(frames=frames * 2))
    text = render_frames(truth.frames, end=True)
    return program, truth, ReplayRecord("a", program, text, not text.startswith(tokens.CALL_SEP))


def time_session(program, truth, record, baseline: bool) -> list[float]:
    """Seconds between consecutive frames reaching the session's caller."""
    from cwmtui.model.replay import ReplayBackend
    from cwmtui.model.rollout import RolloutOptions
    from cwmtui.session import DebugSession

    session = DebugSession(program, ReplayBackend(record), RolloutOptions(), truth=truth)
    if baseline:  # before #23: the whole frame list copied on every streamed frame
        def _run(branch, rollout, on_frame, cancel):
            def forward(frame):
                branch.frames = list(rollout.frames)
                if on_frame is not None:
                    on_frame(branch, len(rollout.frames) - 1, frame)

            rollout.run(on_frame=forward, cancel=cancel)
            session._refresh(branch)
            return branch

        session._run = _run
    stamps: list[float] = []
    session.run_main(on_frame=lambda branch, index, frame: stamps.append(time.perf_counter()))
    return [b - a for a, b in zip(stamps, stamps[1:])]


def quarters(gaps: list[float], start: int = 100) -> list[float]:
    """Median microseconds per frame in four equal parts of frames ``start``..end."""
    tail = gaps[start:]
    size = max(1, len(tail) // 4)
    return [statistics.median(tail[i * size:(i + 1) * size]) * 1e6 for i in range(4)]


async def time_screen(program, record) -> dict:
    from cwmtui.model.replay import ReplayBackend
    from cwmtui.ui.app import CwmApp, DebuggerScreen
    from cwmtui.ui.live import LiveSession

    counts = {"states": 0, "activities": 0, "status": 0}
    originals = (DebuggerScreen.on_branch_updated, DebuggerScreen.on_activity, DebuggerScreen.update_status)

    def counted(name, original):
        def call(self, *args):
            counts[name] += 1
            return original(self, *args)
        return call

    DebuggerScreen.on_branch_updated = counted("states", originals[0])
    DebuggerScreen.on_activity = counted("activities", originals[1])
    DebuggerScreen.update_status = counted("status", originals[2])
    try:
        live = LiveSession(program, lambda progress: ReplayBackend(record))
        app = CwmApp(opener=live.start)
        async with app.run_test(size=(120, 40)) as pilot:
            began = time.perf_counter()
            while app.view is None or app.view.branches[0].placeholder or app.view.branches[0].running:
                await pilot.pause(0.02)
            took = time.perf_counter() - began
    finally:
        DebuggerScreen.on_branch_updated, DebuggerScreen.on_activity, DebuggerScreen.update_status = originals
    return {**counts, "seconds": took, "screen_frames": took * 60}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=2000)
    args = parser.parse_args()
    program, truth, record = replay_record(args.frames)
    print(f"session: microseconds per appended frame (median), frames 100..{len(truth.frames)} in quarters")
    for label, baseline in (("before #23 (copy per frame)", True), ("now (append in place)", False)):
        q = quarters(time_session(program, truth, record, baseline))
        print(f"  {label:<30} " + "  ".join(f"{x:8.1f}" for x in q) + f"   last/first {q[3] / q[0]:.2f}")
    screen = asyncio.run(time_screen(program, record))
    print(f"\nscreen: {len(truth.frames):,} frames streamed in {screen['seconds']:.2f} s "
          f"(~{screen['screen_frames']:.0f} screen frames at 60/s)")
    print(f"  branch states handled {screen['states']}, activity lines {screen['activities']}, "
          f"status bar drawn {screen['status']} times")
    return 0


if __name__ == "__main__":
    sys.exit(main())
