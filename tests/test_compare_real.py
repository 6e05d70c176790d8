"""The comparison on real CWM generations (tests/fixtures/README.md), against our interpreter."""

import json

import pytest

from cwmtui.analysis.compare import StepKind, compare
from cwmtui.interpreter import cruxeval_program
from cwmtui.trace import RolloutStatus, parse_trace, render_frames

from .conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "cwm_cruxeval_generations.jsonl"
RECORDS = {r["id"]: r for r in map(json.loads, FIXTURE.read_text().splitlines())}


@pytest.fixture(scope="module")
def real(interpreter):
    """id -> (truth, the model's frames): the forced entry frame, then the generation."""
    cases = {}
    for sid, record in RECORDS.items():
        program = cruxeval_program(record["code"], record["input"])
        truth = interpreter.trace(program)
        text = render_frames(truth.frames[:1]) + record["generation"]
        cases[sid] = (program, truth, parse_trace(text, source=program.source).frames)
    return cases


def test_a_correct_real_trace_agrees_step_for_step(real):
    program, truth, frames = real["sample_0"]
    result = compare(truth, frames, RolloutStatus.ENDED)
    assert result.verdict == "agree"
    assert len(frames) == len(truth.frames) == 21


def test_real_string_valued_state_error(real):
    program, truth, frames = real["sample_4"]
    first = compare(truth, frames, RolloutStatus.ENDED).first_divergence
    assert (first.kind, first.variables, first.string_valued) == ("state", ["s"], True)
    assert first.regime == "string-valued state"
    assert first.step == 5 and first.lineno == 5  # before `return s`


def test_real_rstrip_predicted_as_no_change(real):
    program, truth, frames = real["sample_23"]
    result = compare(truth, frames, RolloutStatus.ENDED)
    first = result.first_divergence
    assert (first.kind, first.variables, first.string_valued) == ("state", ["text"], True)
    (diff,) = result.steps[first.step].variables
    assert diff.expected == "'new-medium-performing-application - XQuery 2.'"
    assert diff.predicted == "'new-medium-performing-application - XQuery 2.2'"


def test_real_wrong_int_return_of_a_lambda(real):
    program, truth, frames = real["sample_6"]
    result = compare(truth, frames, RolloutStatus.ENDED)
    first = result.first_divergence
    assert (first.kind, first.variables, first.string_valued) == ("value", ["return"], False)
    row = result.steps[first.step]
    assert row.truth.function == "<lambda>"
    assert (row.variables[0].expected, row.variables[0].predicted) == ("10", "6")
    # the lambda's value is wrong, the loop itself is right: the model gets back on track
    assert result.steps[-1].kind is StepKind.MATCH


def test_real_comprehension_drifts_then_takes_an_extra_step(real):
    program, truth, frames = real["sample_19"]
    result = compare(truth, frames, RolloutStatus.ENDED)
    first = result.first_divergence
    assert (first.kind, first.variables, first.string_valued) == ("state", ["c"], True)
    assert len(frames) == len(truth.frames) + 1
    kinds = [s.kind for s in result.steps]
    # the model stays in the comprehension one step too long: an action divergence after the state error
    later = [s for s in result.steps[first.step + 1 :] if s.kind in (StepKind.ACTION, StepKind.EVENT)]
    assert later, kinds
    assert "another path" in first.explanation
    # and the paths meet again: the caller's next line lines up
    assert result.steps[-1].kind in (StepKind.MATCH, StepKind.STATE)


def test_start_of_trace_marker_written_into_the_entry_frame(real):
    """The paper's Fig. 5 spells the entry call with the marker; the comparison must not care.

    (In the recorded generations the entry frame is part of the prompt, so here the real
    generation follows an entry frame written with the marker, as a model prompted that way
    writes it.)
    """
    program, truth, _ = real["sample_0"]
    marked = "<|call_sep|>{}<|action_sep|>def main():  # << START_OF_TRACE\n<|frame_sep|>"
    text = marked + RECORDS["sample_0"]["generation"]
    frames = parse_trace(text, source=program.source).frames
    frames[0].action = "def main():  # << START_OF_TRACE\n"  # even unstripped, as a backend may pass it
    result = compare(truth, frames, RolloutStatus.ENDED)
    assert result.verdict == "agree"
    assert result.steps[0].kind is StepKind.MATCH
