"""Recovery at batch scale (#25): the interventions at each first divergence, their records and
the report's table, on an OracleBackend that recovers and one that does not."""

from __future__ import annotations

import json

import pytest

from cwmtui.analysis.report import aggregate
from cwmtui.analysis.stats import difference, wilson
from cwmtui.evaluation.batch import BatchOptions, RecordedGenerations, evaluate_case, trace_suite
from cwmtui.evaluation.suite import Case
from cwmtui.interpreter import program_from_source

from .world_models import OracleBackend, both, wrong_line, wrong_return, wrong_value

SOURCE = """def f(n):
    total = 0
    for i in range(n):
        total += i
    return total
"""


@pytest.fixture(scope="module")
def truth():
    case = Case("loop", program_from_source(SOURCE, "loop.py", call="f(3)"))
    [truth] = trace_suite([case])
    return truth


def run(truth, mistakes, **options):
    backend = OracleBackend(truth.case.program, truth.trace.frames, mistakes)
    return evaluate_case(backend, "test", truth, BatchOptions(recovery=True, **options))


def test_a_slip_of_control_recovers_once_the_real_line_is_forced(truth):
    frames = truth.trace.frames
    record = run(truth, {3: wrong_line(frames[-1].action)})  # "return total" where the loop goes on
    recovery = record["recovery"]
    assert (recovery["step"], recovery["kind"]) == (3, "action")
    action = recovery["action"]
    assert action["intervention"] == {"kind": "action", "step": 3, "source": "truth", "action": frames[3].action}
    assert action["recovered"] and action["steps_to_recover"] == 1 and action["held_to_end"]
    assert action["held_for"] == len(frames) - 4 and action["output"]["correct"]
    assert action["next_divergence"] is None and "recovered at step 4" in action["summary"]
    frame = recovery["frame"]
    assert frame["intervention"]["kind"] == "frame" and frame["recovered"] and frame["held_to_end"]


def test_a_lost_state_does_not_recover_under_either_intervention(truth):
    frames = truth.trace.frames
    lost = both(wrong_value("total", "99"), wrong_return("99"))
    record = run(truth, {k: lost for k in range(3, len(frames))})
    recovery = record["recovery"]
    assert (recovery["step"], recovery["kind"]) == (3, "state")
    # the model's line at step 3 was right: forcing it would rewrite the same wrong state
    assert recovery["action"] == {"skipped": "the model's line there was right: forcing it changes nothing"}
    result = recovery["frame"]
    assert not result["recovered"] and result["steps_to_recover"] is None and result["held_for"] == 0
    assert not result["output"]["correct"]
    assert result["next_divergence"]["kind"] == "state"
    assert "never matches the interpreter again" in result["summary"]


def test_a_trace_that_agrees_has_nothing_to_recover(truth):
    record = run(truth, {})
    assert record["trace_exact"] and "recovery" in record and record["recovery"] is None


def test_without_the_option_no_recovery_is_recorded(truth):
    backend = OracleBackend(truth.case.program, truth.trace.frames, {3: wrong_line("    return total\n")})
    assert "recovery" not in evaluate_case(backend, "test", truth, BatchOptions())


def test_the_report_counts_recovery_per_class_with_intervals(truth):
    frames = truth.trace.frames
    lost = both(wrong_value("total", "99"), wrong_return("99"))
    records = [
        run(truth, {3: wrong_line(frames[-1].action)}),  # action slip: recovers
        run(truth, {3: wrong_line(frames[-1].action)}),
        run(truth, {k: lost for k in range(3, len(frames))}),  # lost state: does not
        run(truth, {}),  # agrees
    ]
    report = aggregate(records)["recovery"]
    assert (report["programs"], report["diverged"], report["intervened"]) == (4, 3, 3)
    assert report["classes"] == ["action", "state", "string-valued", "all"]
    action = report["conditions"]["action"]
    assert action["action"]["count"] == 2 and action["action"]["recovered"] == wilson(2, 2).to_json()
    assert action["action"]["steps_to_recover"] == {"median": 1, "mean": 1.0}
    assert action["action"]["held_for"]["mean"] == len(frames) - 4
    assert "state" not in action  # its line was right: not forced
    assert report["not_run"] == {"action": {"the model's line there was right: forcing it changes nothing": 1}}
    assert report["conditions"]["frame"]["state"]["recovered"] == wilson(0, 1).to_json()
    assert action["all"]["recovered"] == wilson(2, 2).to_json()
    assert "string-valued" not in action  # no string-valued divergence here
    # output accuracy with each first divergence put right: the oracle's slips found their way
    # back by themselves (3/4 as run), the lost state stays lost (3/4 with the real line)
    free, fixed = report["output_accuracy"]["free"], report["output_accuracy"]["action"]
    assert (free["successes"], fixed["successes"], fixed["n"]) == (3, 3, 4)
    assert report["differences"]["action - free"] == difference(wilson(3, 4), wilson(3, 4)).to_json()


def test_recorded_interventions_replay_to_the_same_record(truth, tmp_path):
    frames = truth.trace.frames
    live = run(truth, {3: wrong_line(frames[-1].action)})
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(live) + "\n")
    replayed = evaluate_case(RecordedGenerations(str(path)), "test", truth, BatchOptions(recovery=True))
    for condition in ("action", "frame"):
        for key in ("recovered", "steps_to_recover", "held_for", "held_to_end", "output", "next_divergence", "generation"):
            assert replayed["recovery"][condition][key] == live["recovery"][condition][key], (condition, key)


def test_recorded_generations_get_their_interventions_from_a_live_model(truth, tmp_path):
    frames = truth.trace.frames
    free = run(truth, {3: wrong_line(frames[-1].action)})
    del free["recovery"]
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(free) + "\n")
    recorded = RecordedGenerations(str(path), live=OracleBackend(truth.case.program, frames))
    record = evaluate_case(recorded, "test", truth, BatchOptions(recovery=True))
    assert record["generation"] == free["generation"]  # the recorded free-running generation, reused
    assert record["recovery"]["action"]["recovered"] and record["recovery"]["frame"]["recovered"]


def test_a_program_cancelled_in_a_condition_run_beside_is_not_written(truth):
    """Review: a cancel during the teacher-forced (or other-decoding) condition left a record
    with that condition cancelled, which a resume then took as done."""
    from cwmtui.evaluation.batch import BatchRun
    from cwmtui.evaluation.suite import Suite

    frames = truth.trace.frames
    written = []

    class CancelsInTheSecondCondition(OracleBackend):
        def complete(self, *args, **kwargs):
            if self.calls > len(frames):  # the free-running rollout is done: cancel during the next
                batch.cancel.set()
            return super().complete(*args, **kwargs)

    backend = CancelsInTheSecondCondition(truth.case.program, frames)
    batch = BatchRun(Suite("test", [truth.case]), lambda: backend, BatchOptions(teacher_force=True), written.append)
    assert batch.run([truth]) == [] and written == []
