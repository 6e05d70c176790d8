"""CRUXEval ground truth: the tracer's return value of ``main`` equals the benchmark's output.

Runs every program of ``cruxeval.jsonl`` (Meta's wrapper: ``"\\n" + code + "\\n" + main``)
through ONE fork-server :class:`~cwmtui.interpreter.Interpreter` and compares the entry's
RETURN value with the benchmark's ``output`` (``ast.literal_eval`` of both when both parse,
else the strings). Prints ``correct / total``, every mismatch and the wall time.

    python scripts/cruxeval_check.py [--data PATH] [--limit N] [--ids sample_0,sample_7]

Exit status: 0 when every program matched, 1 otherwise, 2 when the data file is missing.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from pathlib import Path

from cwmtui.interpreter import Interpreter, cruxeval_program
from cwmtui.trace import Event, Trace

from cwmtui.evaluation.suite import CRUXEVAL_DATA as DEFAULT_DATA  # noqa: E402  (the copy the package ships)


def load_samples(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def returned_value(trace: Trace) -> str | None:
    """The repr the entry returned: the arg of the last RETURN at depth 0 of a complete trace."""
    if not trace.status.ok:
        return None
    for frame in reversed(trace.frames):
        if frame.event is Event.RETURN and frame.depth == 0:
            return frame.arg
    return None


def same_value(got: str, expected: str) -> bool:
    try:
        return ast.literal_eval(got) == ast.literal_eval(expected)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return got == expected


def check(samples: list[dict], interpreter: Interpreter) -> list[tuple[dict, str]]:
    """The samples whose traced return value differs from the expected output, with what came back."""
    wrong = []
    for sample in samples:
        program = cruxeval_program(sample["code"], sample["input"])
        trace = interpreter.trace(program)
        got = returned_value(trace)
        if got is None:
            wrong.append((sample, f"<{trace.status.kind.value}: {trace.status.message}>"))
        elif not same_value(got, sample["output"]):
            wrong.append((sample, got))
    return wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="cruxeval.jsonl")
    parser.add_argument("--limit", type=int, default=None, help="only the first N programs")
    parser.add_argument("--ids", default=None, help="comma-separated sample ids to run")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"error: {args.data}: no such file", file=sys.stderr)
        return 2
    samples = load_samples(args.data)
    if args.ids:
        wanted = set(args.ids.split(","))
        samples = [s for s in samples if s["id"] in wanted]
    if args.limit is not None:
        samples = samples[: args.limit]
    began = time.perf_counter()
    with Interpreter() as interpreter:
        if interpreter.warning:
            print(interpreter.warning, file=sys.stderr)
        wrong = check(samples, interpreter)
    elapsed = time.perf_counter() - began
    for sample, got in wrong:
        print(f"MISMATCH {sample['id']}: f({sample['input']})")
        print(f"  expected {sample['output']}")
        print(f"  traced   {got}")
    print(f"{len(samples) - len(wrong)} / {len(samples)} correct in {elapsed:.1f} s (one fork server)")
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
