"""Limits that must hold against hostile programs, measured: wall time against the limit, peak
memory of cwmtui itself and of the program's process tree, processes left running.

    python bench/limits.py [--timeout S] [--memory MiB] [--no-sandbox] [--replay-frames 5000,20000]

Each hostile program of tests/hostile/ (and one made here: 200 values of 20 MB) runs through
``cwmtui trace --format json`` in a child process, as a user would run it. Figures:

- wall: seconds from start to exit, beside ``--timeout`` (the limit plus a small margin is the
  target);
- cwmtui MiB: the peak resident memory of the cwmtui process itself (``ru_maxrss`` of the
  direct child);
- tree MiB: the peak memory (Pss) summed over the program's processes, sampled every 20 ms from
  /proc with the fork server's own ProcessTree (cwmtui's descendants);
- left: processes of the run still alive one second after cwmtui exited (target 0);
- status: the trace's end, as cwmtui names it.

Then ``cwmtui diff --replay`` on replay files of N frames (a loop program's own trace as the
generation): seconds for each N, to see whether parsing grows linearly.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "hostile"
sys.path.insert(0, str(ROOT))
from cwmtui.interpreter.child import ProcessTree  # noqa: E402

BIG_VALUES = """def f():  # << START_OF_TRACE
    values = []
    for i in range(200):
        values.append("x" * (20 << 20))
        v = values[-1]
    return len(values)

f()
"""

LOOP = """def f(n):  # << START_OF_TRACE
    total = 0
    for i in range(n):
        total += i
    return total
"""


def run_case(argv: list[str]) -> dict:
    """cwmtui ``argv``, watched: wall, cwmtui's own peak memory, the tree's, leftovers."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    began = time.monotonic()
    sink, errors = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # (a pipe nobody reads would block it)
    process = subprocess.Popen([sys.executable, "-m", "cwmtui", *argv], stdout=sink, stderr=errors)
    tree = ProcessTree(process.pid, process.pid)  # the fork server's own accounting, from outside
    tree_peak, seen = 0, set()
    while process.poll() is None:
        pids = tree.pids()
        seen.update(pids)
        tree_peak = max(tree_peak, tree.resident(pids))
        time.sleep(0.02)
    wall = time.monotonic() - began
    sink.seek(0)
    errors.seek(0)
    out, err = sink.read(), errors.read()
    own = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    time.sleep(1.0)
    left = [pid for pid in seen if os.path.exists(f"/proc/{pid}") and _alive(pid)]
    status = ""
    for line in out.decode("utf-8", "replace").splitlines()[::-1]:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if "status" in data:
            status = f"{data['status']}" + (f" ({data['limit']})" if data.get("limit") else "")
            break
    if not status:
        status = err.decode("utf-8", "replace").strip().splitlines()[-1][:60] if err.strip() else f"exit {process.returncode}"
    return {"wall": wall, "own": max(own, before) / 1024, "tree": tree_peak / 2**20, "left": len(left), "status": status}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False


def replay_file(folder: str, frames: int) -> str:
    from cwmtui.interpreter import Interpreter, Limits, program_from_source
    from cwmtui.trace import render_frames

    n = max(1, (frames - 3) // 2)
    program = program_from_source(LOOP, "<loop>", call=f"f({n})")
    with Interpreter() as interpreter:
        trace = interpreter.trace(program, Limits(frames=frames * 2))
    path = os.path.join(folder, f"replay{frames}.jsonl")
    with open(path, "w") as handle:
        handle.write(json.dumps({"id": "a", "program": LOOP, "call": f"f({n})", "generation": render_frames(trace.frames, end=True)}) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--memory", type=int, default=2048, help="MiB")
    parser.add_argument("--no-sandbox", action="store_true")
    parser.add_argument("--replay-frames", default="5000,20000,200000", help="frames of the replay files timed (comma list)")
    parser.add_argument("--replay-timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    limits = ["--timeout", str(args.timeout), "--memory", str(args.memory)] + (["--no-sandbox"] if args.no_sandbox else [])
    with tempfile.TemporaryDirectory() as scratch:
        big = os.path.join(scratch, "big_values.py")
        Path(big).write_text(BIG_VALUES)
        cases = [
            ("forked children, 3 x 200 MiB", [str(HOSTILE / "fork_memory.py")]),
            ("fork bomb", [str(HOSTILE / "fork_bomb.py")]),
            ("detached double fork", [str(HOSTILE / "detached.py"), "--call", "leave('/tmp/cwmtui-bench-note')"]),
            ("200 values of 20 MB", [big]),
            ("memory bomb (64 MiB a step)", [str(HOSTILE / "memory_bomb.py")]),
        ]
        print(f"limits: --timeout {args.timeout:g} s, --memory {args.memory} MiB, sandbox {'off' if args.no_sandbox else 'on'}")
        print(f"{'program':<30} {'wall s':>7} {'cwmtui MiB':>11} {'tree MiB':>9} {'left':>5}  status")
        for name, program in cases:
            result = run_case(["trace", *program, "--format", "json", *limits])
            print(f"{name:<30} {result['wall']:>7.2f} {result['own']:>11.0f} {result['tree']:>9.0f} {result['left']:>5}  {result['status']}")
        print()
        print(f"{'cwmtui diff --replay':<30} {'frames':>7} {'seconds':>9}")
        for frames in [int(f) for f in args.replay_frames.split(",") if f.strip()]:
            path = replay_file(scratch, frames)
            began = time.monotonic()
            try:
                subprocess.run([sys.executable, "-m", "cwmtui", "diff", "--replay", path, "--id", "a", "--json",
                                "--max-frames", str(frames + 10), "--timeout", "120"],
                               capture_output=True, timeout=args.replay_timeout)
                took = f"{time.monotonic() - began:>9.1f}"
            except subprocess.TimeoutExpired:
                took = f"> {args.replay_timeout:g} (stopped)"
            print(f"{'':<30} {frames:>7,} {took}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
