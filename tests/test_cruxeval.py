"""CRUXEval ground truth on a fixed sample: the traced return value of main is the real output.

The full run (all 800 programs) is ``python scripts/cruxeval_check.py``.
"""

import ast
import json

from cwmtui.interpreter import cruxeval_program
from cwmtui.trace import Event

from .conftest import CRUXEVAL

SAMPLE_EVERY = 20  # programs 0, 20, 40, ... 780: 40 of the 800


def sample_programs() -> list[dict]:
    with open(CRUXEVAL, encoding="utf-8") as handle:
        samples = [json.loads(line) for line in handle if line.strip()]
    return samples[::SAMPLE_EVERY]


def test_traced_return_value_is_the_benchmark_output(interpreter):
    samples = sample_programs()
    assert len(samples) == 40
    wrong = []
    for sample in samples:
        trace = interpreter.trace(cruxeval_program(sample["code"], sample["input"]))
        assert trace.status.ok, (sample["id"], trace.status.describe())
        last = trace.frames[-1]
        assert (last.event, last.function, last.depth) == (Event.RETURN, "main", 0)
        if ast.literal_eval(last.arg) != ast.literal_eval(sample["output"]):
            wrong.append((sample["id"], sample["output"], last.arg))
    assert wrong == []


def test_every_trace_starts_with_main_and_shows_f_called_with_the_input(interpreter):
    sample = sample_programs()[0]  # sample_0: f(nums) on a list
    trace = interpreter.trace(cruxeval_program(sample["code"], sample["input"]))
    first, second = trace.frames[0], trace.frames[1]
    assert (first.event, first.action, first.locals) == (Event.CALL, "def main():\n", {})
    assert second.event is Event.LINE and second.action == f"    return f({sample['input']})\n"
    call_f = trace.frames[2]
    assert call_f.event is Event.CALL and call_f.function == "f"
    assert call_f.locals == {"nums": sample["input"]}
