"""Benchmark: the debugger on a 100,000-step session (first paint, key latency, memory).

    python bench/ui.py                 # all cases, each in a fresh process, figures as a table
    python bench/ui.py --steps 20000   # a smaller session

Cases (one process each, so memory figures are the case's own):

- ``timelines`` -- the app as shipped: the two timelines on Textual's Line API. The session
  (truth from the real interpreter, the model's frames = the truth with one wrong value at
  60%, compared by the engine) is built first and not timed as UI; then the app starts
  headless at 120x40. First paint = app start to the first row the interpreter timeline draws.
  Key latency = a key press (j, pagedown, d, G, g) until the screen is updated (Pilot's press +
  pause, so an upper bound). Memory = the process's peak RSS, session included.
- ``timelines-small`` -- the same with 1,000 steps: the costs should not grow with the trace.
- ``datatable`` -- the baseline the design rules out: a stock DataTable holding every row of
  the interpreter's timeline (same columns), same measurements.
- ``open-file`` -- what ``cwmtui open SESSION.json`` does with the 100,000-step session saved
  to a file: read and check it (the comparisons are saved in it, rows and frames are built as
  they are shown), build the view and the app, first paint.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZE = (120, 40)
KEYS = ["j"] * 60 + ["pagedown"] * 10 + ["k"] * 20 + ["d", "G", "g", "d", "pageup", "j", "j", "j"]

PROGRAM = '''def walk(n):  # << START_OF_TRACE
    total = 0
    for i in range(n):
        total += i % 7
    return total


walk({n})
'''


def build_session(steps: int):
    """An offline session of about ``steps`` steps, one wrong value at 60% of the way."""
    from cwmtui.interpreter import Interpreter, Limits, program_from_source
    from cwmtui.session import Branch, DebugSession
    from cwmtui.trace import RolloutStatus

    program = program_from_source(PROGRAM.format(n=max(1, (steps - 5) // 2)), "walk.py")
    with Interpreter() as interpreter:
        truth = interpreter.trace(program, Limits(frames=steps + 100, seconds=300))
    frames = list(truth.frames)
    k = int(len(frames) * 0.6)
    while frames[k].locals is None or "total" not in frames[k].locals:
        k += 1
    frames[k] = replace(frames[k], locals={**frames[k].locals, "total": "-1"})
    session = DebugSession(program, None, truth=truth)
    session.model_name, session.model_description = "replay", "replay · benchmark session"
    branch = Branch("main", frames=frames, status=RolloutStatus.ENDED, tokens={"trace": 0, "processed": 0})
    session.branches = [branch]
    session.compare_branch(branch)
    return session


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def drive(app, first_paint: dict, start: float, start_cpu: float) -> dict:
    latencies: list[float] = []
    cpu: list[float] = []
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        paint = first_paint.get("t", time.perf_counter()) - start
        paint_cpu = first_paint.get("cpu", time.process_time()) - start_cpu
        for key in KEYS:
            t, c = time.perf_counter(), time.process_time()
            await pilot.press(key)
            await pilot.pause()
            latencies.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        # the harness's own cost: a key nothing is bound to, the same press + pause round trip
        noop: list[float] = []
        noop_cpu: list[float] = []
        for _ in range(30):
            t, c = time.perf_counter(), time.process_time()
            await pilot.press("f12")
            await pilot.pause()
            noop.append(time.perf_counter() - t)
            noop_cpu.append(time.process_time() - c)
    latencies.sort()
    cpu.sort()
    return {
        "first_paint_s": round(paint, 3),
        "first_paint_cpu_s": round(paint_cpu, 3),
        "key_median_ms": round(statistics.median(latencies) * 1000, 1),
        "key_p95_ms": round(latencies[int(len(latencies) * 0.95) - 1] * 1000, 1),
        "key_max_ms": round(latencies[-1] * 1000, 1),
        "key_cpu_median_ms": round(statistics.median(cpu) * 1000, 1),
        "key_cpu_p95_ms": round(cpu[int(len(cpu) * 0.95) - 1] * 1000, 1),
        "keys": len(latencies),
        "noop_median_ms": round(statistics.median(noop) * 1000, 1),
        "noop_cpu_median_ms": round(statistics.median(noop_cpu) * 1000, 1),
    }


def case_timelines(steps: int) -> dict:
    from cwmtui.ui.app import CwmApp
    from cwmtui.ui.branch_view import SessionView
    from cwmtui.ui.timeline import Timeline

    t = time.perf_counter()
    session = build_session(steps)
    built = time.perf_counter() - t
    t = time.perf_counter()
    view = SessionView.from_session(session)
    view_s = time.perf_counter() - t
    first: dict = {}
    original = Timeline.render_line

    def render_line(self, y):
        if self.side == "truth" and self.branch is not None and "t" not in first:
            first["t"], first["cpu"] = time.perf_counter(), time.process_time()
        return original(self, y)

    Timeline.render_line = render_line
    start, start_cpu = time.perf_counter(), time.process_time()
    app = CwmApp(view)
    result = asyncio.run(drive(app, first, start, start_cpu))
    result.update(steps=len(view.branches[0]), session_build_s=round(built, 2), view_s=round(view_s, 3),
                  peak_rss_mb=round(peak_rss_mb()))
    return result


def case_datatable(steps: int) -> dict:
    from textual.app import App
    from textual.widgets import DataTable

    from cwmtui.ui.timeline import short

    session = build_session(steps)
    frames = session.truth.frames
    first: dict = {}

    class TableApp(App):
        def compose(self):
            yield DataTable(id="table")

        def on_mount(self):
            table = self.query_one(DataTable)
            table.add_columns("step", "line", "action", "state")
            table.add_rows(
                (i, f.lineno, short(f.action.strip(), 40),
                 " ".join(f"{k}={short(v)}" for k, v in (f.locals or {}).items()) or (f.arg or ""))
                for i, f in enumerate(frames)
            )
            table.focus()

    original = DataTable.render_line

    def render_line(self, y):
        if "t" not in first and self.row_count:
            first["t"], first["cpu"] = time.perf_counter(), time.process_time()
        return original(self, y)

    DataTable.render_line = render_line
    start, start_cpu = time.perf_counter(), time.process_time()
    result = asyncio.run(drive(TableApp(), first, start, start_cpu))
    result.update(steps=len(frames), peak_rss_mb=round(peak_rss_mb()))
    return result


def case_open_file(steps: int) -> dict:
    from cwmtui.ui.launch import session_app
    from cwmtui.ui.timeline import Timeline

    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "session.json")
    build_session(steps).save(path)
    size_mb = os.path.getsize(path) / 1e6
    first: dict = {}
    original = Timeline.render_line

    def render_line(self, y):
        if self.side == "truth" and self.branch is not None and "t" not in first:
            first["t"], first["cpu"] = time.perf_counter(), time.process_time()
        return original(self, y)

    Timeline.render_line = render_line
    start, start_cpu = time.perf_counter(), time.process_time()
    app = session_app(path)  # what `cwmtui open PATH` runs (open_session_file) ...
    gc.freeze()  # ... freezing the session's objects while the app runs
    loaded = time.perf_counter() - start
    result = asyncio.run(drive(app, first, start, start_cpu))
    result.update(steps=len(app.view.branches[0]), file_mb=round(size_mb, 1), read_s=round(loaded, 2),
                  peak_rss_mb=round(peak_rss_mb()))
    gc.unfreeze()
    os.remove(path)
    return result


CASES = {
    "timelines": lambda steps: case_timelines(steps),
    "timelines-small": lambda steps: case_timelines(1_000),
    "datatable": lambda steps: case_datatable(steps),
    "open-file": lambda steps: case_open_file(steps),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--case", choices=sorted(CASES), help="run one case in this process (prints JSON)")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(CASES[args.case](args.steps)))
        return
    rows = []
    for name in ("timelines", "timelines-small", "datatable", "open-file"):
        env = dict(os.environ, PYTHONHASHSEED="0")
        out = subprocess.run([sys.executable, __file__, "--case", name, "--steps", str(args.steps)],
                             capture_output=True, text=True, env=env)
        if out.returncode != 0:
            print(f"{name}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
            continue
        result = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append((name, result))
        print(name, json.dumps(result), flush=True)
    print()
    print("key figures: wall / CPU of this process, per press (Pilot press + pause); 'harness' is the same")
    print("round trip for a key bound to nothing, so key - harness is what the app itself adds")
    print(f"{'case':<16} {'steps':>8} {'first paint':>12} {'key median':>16} {'key p95':>16} "
          f"{'harness':>16} {'peak RSS':>9}")
    for name, r in rows:
        print(f"{name:<16} {r['steps']:>8,} {r['first_paint_s']:>10.3f} s "
              f"{r['key_median_ms']:>6.1f}/{r['key_cpu_median_ms']:>5.1f} ms "
              f"{r['key_p95_ms']:>6.1f}/{r['key_cpu_p95_ms']:>5.1f} ms "
              f"{r['noop_median_ms']:>6.1f}/{r['noop_cpu_median_ms']:>5.1f} ms {r['peak_rss_mb']:>6} MB")
    extra = {name: r for name, r in rows}
    if "open-file" in extra:
        r = extra["open-file"]
        print(f"\nopen-file: {r['file_mb']} MB session file; reading and checking it (comparisons saved in it) "
              f"took {r['read_s']} s of the {r['first_paint_s']} s to first paint")
    if "timelines" in extra:
        r = extra["timelines"]
        print(f"timelines: building the session (interpreter + engine comparison) took {r['session_build_s']} s "
              f"before the app started; the view over it {r['view_s']} s")


if __name__ == "__main__":
    main()
