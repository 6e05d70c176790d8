"""Regenerate tests/golden/*.cwm from the tracer (then read the diff: the files are the spec).

    python scripts/regen_goldens.py            # every golden
    python scripts/regen_goldens.py sets del_names
    python scripts/regen_goldens.py --check    # report which files differ, write nothing
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cwmtui.interpreter import Interpreter  # noqa: E402
from cwmtui.trace import render_frames  # noqa: E402
from tests import goldens  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="goldens to regenerate (default: all)")
    parser.add_argument("--check", action="store_true", help="only report differences")
    args = parser.parse_args()
    names = args.names or goldens.names()
    unknown = sorted(set(names) - set(goldens.names()))
    if unknown:
        print(f"regen_goldens: no such golden: {', '.join(unknown)}", file=sys.stderr)
        return 2
    differ = 0
    with Interpreter() as interpreter:
        for name in names:
            program = goldens.program(name)
            trace = interpreter.trace(program)
            text = render_frames(trace.frames, end=True)
            path = goldens.GOLDEN / f"{name}.cwm"
            old = path.read_text(encoding="utf-8") if path.exists() else None
            same = old == text
            differ += not same
            note = "same" if same else ("differs" if old is not None else "new")
            print(f"{name:28} {len(trace.frames):4} frames  {trace.status.describe():30} {note}")
            if not same and not args.check:
                path.write_text(text, encoding="utf-8")
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
