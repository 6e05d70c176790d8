import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
SHARED = ROOT.parent / "shared"
CRUXEVAL = SHARED / "benchmarks" / "cruxeval" / "cruxeval.jsonl"


@pytest.fixture(scope="session")
def interpreter():
    from cwmtui.interpreter import Interpreter

    with Interpreter() as it:
        yield it
