"""Ground truth for a whole suite: CRUXEval-800 through one fork server vs a fresh tracer per program.

    python bench/suite_truth.py [--baseline-limit N]

``one server``: what ``cwmtui eval cruxeval`` does before any model runs: every program of
``cruxeval.jsonl`` traced by ONE :class:`cwmtui.interpreter.Interpreter`
(:func:`cwmtui.evaluation.batch.trace_suite`), wall time from the first program to the last,
including the fork server's start. ``fresh``: the baseline, :func:`trace_program` per program
(a new interpreter process each time), on the first ``--baseline-limit`` programs, with its
per-program time scaled to 800 for comparison. Both check the traced return value of ``main``
against the benchmark's ``output``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cwmtui.analysis.outcome import entry_outcome, same_value  # noqa: E402
from cwmtui.evaluation.batch import trace_suite  # noqa: E402
from cwmtui.evaluation.suite import CRUXEVAL_DATA, cruxeval_cases  # noqa: E402
from cwmtui.interpreter import trace_program  # noqa: E402


def expected_outputs() -> dict[str, str]:
    import json

    with open(CRUXEVAL_DATA, encoding="utf-8") as handle:
        return {r["id"]: r["output"] for r in map(json.loads, filter(str.strip, handle))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-limit", type=int, default=100, help="programs for the fresh-process baseline (default 100)")
    args = parser.parse_args()
    if not CRUXEVAL_DATA.is_file():
        print(f"error: {CRUXEVAL_DATA}: no such file", file=sys.stderr)
        return 2
    cases = cruxeval_cases(CRUXEVAL_DATA)
    expected = expected_outputs()

    began = time.perf_counter()
    truths = trace_suite(cases, workers=1)  # one server (a pool of them: bench/eval_scale.py)
    one_server = time.perf_counter() - began
    right = sum(1 for t in truths if same_value(expected[t.case.id], entry_outcome(t.trace.frames).value))
    frames = sum(len(t.trace.frames) for t in truths)

    subset = cases[: args.baseline_limit]
    began = time.perf_counter()
    fresh_right = 0
    for case in subset:
        trace = trace_program(case.program)
        fresh_right += same_value(expected[case.id], entry_outcome(trace.frames).value)
    fresh = time.perf_counter() - began

    per_one = one_server / len(cases)
    per_fresh = fresh / len(subset)
    print(f"CRUXEval programs: {len(cases)}, frames traced: {frames}")
    print(f"{'one server':<12} {len(cases):>4} programs {one_server:7.2f} s  {per_one * 1000:6.1f} ms/program  correct {right}/{len(cases)}")
    print(
        f"{'fresh':<12} {len(subset):>4} programs {fresh:7.2f} s  {per_fresh * 1000:6.1f} ms/program  correct {fresh_right}/{len(subset)}"
        f"  (x800: {per_fresh * len(cases):.1f} s)"
    )
    print(f"speed-up of one server: {per_fresh / per_one:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
