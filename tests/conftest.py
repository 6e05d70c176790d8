from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
CRUXEVAL = ROOT / "cwmtui" / "data" / "cruxeval" / "cruxeval.jsonl"  # the copy the package ships


@pytest.fixture(scope="session")
def interpreter():
    from cwmtui.interpreter import Interpreter

    with Interpreter() as it:
        yield it
