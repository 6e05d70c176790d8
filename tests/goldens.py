"""The golden programs: each tests/golden/NAME.py with its expected CWM text in NAME.cwm.

A golden program marks its entry with ``# << START_OF_TRACE`` and calls it at module level,
unless :data:`CALLS` gives the ``--call`` expression for it (with a marked entry the expression
runs after the module code; without one the CRUXEval-style ``main()`` wrapper is appended).
The ``.cwm`` file holds the frames and the closing ``<|end_of_text|>`` (the prompt is the
program's source). Regenerate with ``python scripts/regen_goldens.py`` and read the diff.
"""

from __future__ import annotations

from pathlib import Path

from cwmtui.interpreter import Program, load_program
from cwmtui.trace import Status

GOLDEN = Path(__file__).resolve().parent / "golden"

#: --call expressions of the goldens that need one
CALLS = {
    "strawberry": "f('r')",
    "cruxeval_style": "f([2, 7, 11], 9)",
}

#: how the goldens whose trace is not simply complete end
STATUS = {
    "escaping_exception": Status.RAISED,
}


def names() -> list[str]:
    return sorted(p.stem for p in GOLDEN.glob("*.py"))


def program(name: str) -> Program:
    return load_program(str(GOLDEN / f"{name}.py"), call=CALLS.get(name))


def expected_status(name: str) -> Status:
    return STATUS.get(name, Status.COMPLETE)


def expected_text(name: str) -> str:
    return (GOLDEN / f"{name}.cwm").read_text(encoding="utf-8")
