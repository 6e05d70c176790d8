"""The bundled model through the whole ``cwmtui eval`` pipeline on CPU, a small count per suite,
beside Meta CWM's published figures.

    python bench/eval_bundled.py [--out DIR] [--crux-count 10] [--s5-count 1] [--zoo-count 1]

Runs, one after the other (each a separate ``cwmtui eval`` process, wall time measured around
it, model load included):

* ``cruxeval --count K``;
* ``s5 --count K --teacher-force`` (N = 8, 16, 32, 64, 128);
* ``zoo --type string --count K`` (depth 1..5, nested and flat);

all with ``--token-budget 3500 --frame-tokens 160`` (the bundled model's context is 4096 tokens;
an S5 frame takes about 80). Prints the figures as Markdown tables; the results files and the
plots stay in ``--out`` (default ``runs/eval-bundled``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cwmtui.analysis.report import PUBLISHED  # noqa: E402

LIMITS = ["--token-budget", "3500", "--frame-tokens", "160"]
#: Table 9 of the CWM tech report (greedy, CRUXEval), as quoted in the trace-format spec §8
TABLE_9 = {"output_accuracy": 0.880, "valid_format": 0.996, "state_exact": 0.969, "action_exact": 0.965}


def pct(value) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def run(name: str, argv: list[str], out: Path) -> tuple[dict, float]:
    results = out / f"{name}.jsonl"
    command = ["cwmtui", "eval", *argv, *LIMITS, "--out", str(results), "--plot", str(out / f"{name}.png"), "--json"]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "eval-bundled")
    parser.add_argument("--crux-count", type=int, default=10)
    parser.add_argument("--s5-count", type=int, default=1)
    parser.add_argument("--zoo-count", type=int, default=1)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]

    crux, crux_wall = run("cruxeval", ["cruxeval", "--count", str(args.crux_count)], args.out)
    s5, s5_wall = run("s5", ["s5", "--count", str(args.s5_count), "--teacher-force"], args.out)
    zoo, zoo_wall = run("zoo", ["zoo", "--type", "string", "--count", str(args.zoo_count)], args.out)

    print(f"load average at the start: {load:.1f}")
    print("\n| suite | programs | wall time (model load included) |\n|---|---|---|")
    for name, report, wall in (("cruxeval", crux, crux_wall), ("s5 (free + teacher-forced)", s5, s5_wall), ("zoo, string", zoo, zoo_wall)):
        print(f"| {name} | {report['count']} | {wall:.0f} s |")

    print("\nCRUXEval (first programs of the benchmark)\n")
    print("| metric | bundled | Meta CWM (Table 9) |\n|---|---|---|")
    for key, label in (("output_accuracy", "output accuracy"), ("trace_exact", "whole trace exact"),
                       ("action_exact", "action exact"), ("state_exact", "state exact"), ("valid_format", "valid format")):
        print(f"| {label} | {pct(crux[key])} | {pct(TABLE_9.get(key))} |")
    print(f"\nfirst divergence: {crux['first_divergence_kinds']}; truncations: {crux['truncations']}")

    print("\nS5: output accuracy vs N\n")
    print("| N | programs | bundled free | bundled teacher-forced | teacher-forced state exact | Meta free | Meta teacher-forced |")
    print("|---|---|---|---|---|---|---|")
    for n, cell in s5["by_n"].items():
        forced = cell.get("teacher_forced", {})
        print(f"| {n} | {cell['count']} | {pct(cell['output_accuracy'])} | {pct(forced.get('output_accuracy'))} | "
              f"{pct(forced.get('state_exact'))} | {pct(PUBLISHED['s5']['free'].get(int(n)))} | "
              f"{pct(PUBLISHED['s5']['teacher_forced'].get(int(n)))} |")
    print(f"\nfirst divergence: {s5['first_divergence_kinds']} (teacher-forced: {s5['teacher_forced']['first_divergence_kinds']}); "
          f"truncations: {s5['truncations']}")

    print("\nComposition, string type: output accuracy vs depth\n")
    print("| depth | programs | nested | flat | p^d baseline | state exact | Meta CWM string nested |\n|---|---|---|---|---|---|---|")
    for depth, cell in zoo["by_type"]["string"].items():
        forms = cell.get("by_form", {})
        print(f"| {depth} | {cell['count']} | {pct(forms.get('nested'))} | {pct(forms.get('flat'))} | {pct(cell['baseline'])} | "
              f"{pct(cell['state_exact'])} | {pct(PUBLISHED['zoo']['string_nested'].get(int(depth)))} |")
    print(f"\nfirst divergence: {zoo['first_divergence_kinds']}; results and plots in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
