"""Start-up: how long after ``cwmtui samples/X.py`` the screen shows the UI, the interpreter's
first steps and the model's first frame (the bundled model, on the CPU).

    python bench/startup.py [--repeat 3] [--tree DIR] [samples/strings.py ...]

Each run starts the command in a fresh tmux session (120x40) and reads the screen every 25 ms
(``tmux capture-pane``) until the model pane shows step 1, the first frame the model writes (step 0
is the entry call, forced from the truth). ``--tree DIR`` runs another checkout the same way,
one after the other (e.g. ``git worktree add /tmp/oldwt 67b9ef7``: the bundled model through
transformers), as the baseline. Needs tmux.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEP_ONE = re.compile(r"^\W*\s*1\s+(\d+|\?)\s")  # a timeline row of step 1 (marker, step, line)
PENDING = ("(loading", "(model still", "(waiting")


def screen(session: str) -> list[str]:
    out = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True)
    return out.stdout.splitlines()


def panes(lines: list[str]) -> tuple[list[str], list[str]]:
    left, right = [], []
    for line in lines:
        if "││" in line:
            a, b = line.split("││", 1)
            left.append(a.lstrip("│"))
            right.append(b)
    return left, right


def has_step_one(rows: list[str]) -> bool:
    return any(STEP_ONE.match(row) and not any(p in row for p in PENDING) for row in rows)


def run_once(tree: Path, sample: str, limit: float = 60.0) -> dict:
    session = f"cwmtui-startup-{os.getpid()}"
    env = dict(os.environ, PYTHONPATH=str(tree))
    command = f"cd {tree} && {sys.executable} -c 'from cwmtui.cli import entry; entry()' {sample}"
    subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    began = time.perf_counter()
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40", command], env=env, check=True)
    seen: dict = {}
    try:
        while time.perf_counter() - began < limit:
            lines = screen(session)
            now = time.perf_counter() - began
            if "paint" not in seen and any(line.strip() for line in lines):
                seen["paint"] = now
            left, right = panes(lines)
            if "truth" not in seen and has_step_one(left):
                seen["truth"] = now
            if "model" not in seen and has_step_one(right):
                seen["model"] = now
                break
            time.sleep(0.025)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", nargs="*", default=["samples/strings.py", "samples/swaps.py"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", action="append", default=[], help="another checkout, the baseline")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("bench/startup.py needs tmux", file=sys.stderr)
        return 2
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; seconds from the command to the "
          "screen showing it (best of {args.repeat})".replace("{args.repeat}", str(args.repeat)))
    print(f"{'checkout':28s} {'sample':22s} {'UI painted':>10s} {'truth step 1':>13s} {'model step 1':>13s}")
    for sample in args.samples:
        for tree in [ROOT, *map(Path, args.tree)]:
            runs = [run_once(tree, sample) for _ in range(args.repeat)]

            def best(key, runs=runs):
                values = [r[key] for r in runs if key in r]
                return f"{min(values):.2f}" if values else "-"

            print(f"{str(tree):28s} {sample:22s} {best('paint'):>10s} {best('truth'):>13s} {best('model'):>13s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
